#!/usr/bin/env python3
"""Hostile local clients for memgrantd's API (a test tool, Unix socket only).

  api_attack.py attack MODE N SECS SOCK    one attacker, run under its own uid:
      slowloris  N connections sending a request one byte every 0.5 s
      idle       N connections that send nothing
      sse        N /v1/events streams, read and thrown away
      flood      N clients, each GET /v1/status or POST /v1/grants, again and again
    Connections the agent closes are opened again at once.  Prints one JSON
    line of counts at the end.
  api_attack.py reopen SOCK N    open N event streams, close them, open N
    0.2 s later: every one must be served (a closed stream frees its slot
    at once, not at the next keep-alive 15 s later).  Exit 1 otherwise.
  api_attack.py trickle SOCK    one connection sending a request a byte every
    0.5 s, forever: prints after how many seconds the agent closed it.
  api_attack.py probe CTL SECS OUT [setpriv args...]    run `CTL status` every
    second (every $PROBE_EVERY seconds) for SECS seconds (as another user with
    setpriv args), recording each call's time and exit status as JSON lines
    in OUT.
"""
import json
import os
import selectors
import socket
import subprocess
import sys
import time

REQUEST = (b"GET /v1/status HTTP/1.1\r\nHost: memgrantd\r\nUser-Agent: slow\r\n"
           + b"".join(b"X-Pad-%d: %s\r\n" % (i, b"y" * 40) for i in range(200)) + b"\r\n")


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except (BlockingIOError, InterruptedError):
        pass  # a full listen queue: the socket becomes writable when accepted
    except OSError:
        s.close()
        return None
    return s


def attack(mode, n, secs, path):
    sel = selectors.DefaultSelector()
    stats = {"mode": mode, "uid": os.getuid(), "connects": 0, "connect_errors": 0, "closed_by_agent": 0,
             "refused_503": 0, "answers": 0, "bytes_in": 0}
    conns = {}  # socket -> state

    def open_one():
        s = connect(path)
        stats["connects"] += 1
        if s is None:
            stats["connect_errors"] += 1
            return
        st = {"off": 0, "next": time.monotonic(), "buf": b"", "sent": False}
        conns[s] = st
        sel.register(s, selectors.EVENT_READ, st)

    def drop(s):
        sel.unregister(s)
        del conns[s]
        s.close()

    end = time.monotonic() + secs
    flood_n = 0
    while time.monotonic() < end:
        while len(conns) < n:
            open_one()
            if stats["connect_errors"] and len(conns) < n and stats["connect_errors"] % 50 == 0:
                time.sleep(0.01)
                break
        now = time.monotonic()
        for s, st in list(conns.items()):
            try:
                if mode == "slowloris" and now >= st["next"] and st["off"] < len(REQUEST):
                    s.send(REQUEST[st["off"]:st["off"] + 1])
                    st["off"] += 1
                    st["next"] = now + 0.5
                elif mode in ("sse", "flood") and not st["sent"]:
                    if mode == "sse":
                        req = b"GET /v1/events HTTP/1.1\r\nHost: memgrantd\r\n\r\n"
                    else:
                        flood_n += 1
                        if flood_n % 2:
                            req = b"GET /v1/status HTTP/1.1\r\nHost: memgrantd\r\nConnection: close\r\n\r\n"
                        else:
                            body = b'{"type":"grant","size":"128M"}'
                            req = (b"POST /v1/grants HTTP/1.1\r\nHost: memgrantd\r\nConnection: close\r\n"
                                   b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                   % (len(body), body))
                    s.send(req)
                    st["sent"] = True
            except (BlockingIOError, InterruptedError):
                pass  # not accepted yet
            except OSError:
                stats["closed_by_agent"] += 1
                drop(s)
        for key, _ in sel.select(timeout=0.05):
            s, st = key.fileobj, key.data
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if data:
                stats["bytes_in"] += len(data)
                if not st["buf"]:
                    st["buf"] = data[:16]
                continue
            if st["buf"].startswith(b"HTTP/1.1 503"):
                stats["refused_503"] += 1
            elif st["buf"].startswith(b"HTTP/1.1 "):
                stats["answers"] += 1
            else:
                stats["closed_by_agent"] += 1
            drop(s)
    for s in list(conns):
        drop(s)
    print(json.dumps(stats))
    sys.stdout.flush()


def reopen(path, n):
    def streams():
        out = []
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(path)
            s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: memgrantd\r\n\r\n")
            head = s.recv(64)
            out.append((s, head))
        return out
    first = streams()
    bad = [h for _, h in first if not h.startswith(b"HTTP/1.1 200")]
    for s, _ in first:
        s.close()
    time.sleep(0.2)  # the agent notices a hang-up in milliseconds; the keep-alive is 15 s
    t0 = time.monotonic()
    second = streams()
    took = time.monotonic() - t0
    bad2 = [h for _, h in second if not h.startswith(b"HTTP/1.1 200")]
    for s, _ in second:
        s.close()
    print(json.dumps({"first_refused": len(bad), "again_refused": len(bad2), "again_s": round(took, 3)}))
    return 1 if bad or bad2 else 0


def trickle(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(0.5)
    t0 = time.monotonic()
    off = 0
    while time.monotonic() - t0 < 30:
        try:
            s.send(REQUEST[off % len(REQUEST):off % len(REQUEST) + 1])
            off += 1
            if s.recv(4096) == b"":
                break
        except socket.timeout:
            continue
        except OSError:
            break
    print(json.dumps({"closed_after_s": round(time.monotonic() - t0, 2), "bytes_sent": off}))


def probe(ctl, secs, out, priv):
    every = float(os.environ.get("PROBE_EVERY", "1"))
    end = time.monotonic() + secs
    with open(out, "a") as f:
        while True:  # at least one probe, however late this process got the CPU
            t0 = time.monotonic()
            try:
                p = subprocess.run(priv + ctl.split() + ["status", "--json"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, timeout=10)
                rc, err = p.returncode, p.stderr.decode(errors="replace").strip()
            except subprocess.TimeoutExpired:
                rc, err = -1, "timeout after 10 s"
            took = time.monotonic() - t0
            f.write(json.dumps({"t": time.time(), "rc": rc, "s": round(took, 3), "err": err[:200]}) + "\n")
            f.flush()
            if time.monotonic() >= end:
                break
            left = every - took
            if left > 0:
                time.sleep(left)


def main():
    a = sys.argv[1:]
    if a[0] == "attack":
        attack(a[1], int(a[2]), float(a[3]), a[4])
    elif a[0] == "reopen":
        sys.exit(reopen(a[1], int(a[2])))
    elif a[0] == "trickle":
        trickle(a[1])
    elif a[0] == "probe":
        probe(a[1], float(a[2]), a[3], a[4:])
    else:
        sys.exit("usage: see the docstring")


if __name__ == "__main__":
    main()
