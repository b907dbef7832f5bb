#!/usr/bin/env python3
"""Host side of the memgrant VM test: QMP and the guest's control port.

  vmctl.py qmp SOCK COMMAND [ARGS_JSON]      run a QMP command, print its return as JSON
  vmctl.py device-del SOCK ID TIMEOUT        device_del ID, wait for its DEVICE_DELETED event
  vmctl.py guest SOCK TIMEOUT COMMAND        run COMMAND in the guest (tests/vm/init serves
                                             it), print its output, exit with its status
  vmctl.py wait-guest SOCK TIMEOUT           until the guest's control port answers
  vmctl.py wait-event FILE FROM TIMEOUT EVENT [KEY=VALUE ...]
                                             until a line after line FROM of the JSON-lines
                                             file FILE has "event": EVENT and each KEY
                                             (a.b for nested) equal to VALUE; prints
                                             "LINENO JSON" (memgrant-host serve's events)

Exit status: the command's (guest), 0 (qmp, device-del, wait-guest done),
1 (QMP error, no event, guest did not answer in time), 2 (usage).
Only the Python standard library is used.
"""
import json
import os
import re
import socket
import sys
import time


def die(msg, code=1):
    print("vmctl: " + msg, file=sys.stderr)
    sys.exit(code)


class Qmp:
    def __init__(self, path, timeout=30):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.events = []
        greeting = self.read()
        if "QMP" not in greeting:
            die("no QMP greeting: %r" % greeting)
        self.execute("qmp_capabilities")

    def read(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                die("QMP connection closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def execute(self, cmd, args=None):
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            r = self.read()
            if "event" in r:
                self.events.append(r)
                continue
            if "error" in r:
                die("QMP %s: %s: %s" % (cmd, r["error"].get("class"), r["error"].get("desc")))
            return r.get("return")

    def wait_event(self, name, pred, timeout):
        end = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["event"] == name and pred(e.get("data", {})):
                    return e
            self.events.clear()
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                r = self.read()
            except socket.timeout:
                return None
            if "event" in r:
                self.events.append(r)


def guest(path, timeout, command):
    """Runs COMMAND in the guest; returns (rc, output)."""
    tag = "%d.%d" % (os.getpid(), time.monotonic_ns())
    marker = re.compile(rb"@@" + re.escape(tag.encode()) + rb" rc=(\d+)@@\n")
    end = time.monotonic() + timeout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        s.sendall(b"\n" + tag.encode() + b" " + command.encode() + b"\n")
        buf = b""
        while True:
            m = marker.search(buf)
            if m:
                # drop what an earlier, abandoned command left in the port
                out = re.split(rb"@@[0-9.]+ rc=\d+@@\n", buf[:m.start()])[-1]
                return int(m.group(1)), out.decode(errors="replace")
            left = end - time.monotonic()
            if left <= 0:
                return None, buf.decode(errors="replace")
            s.settimeout(left)
            try:
                data = s.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return None, buf.decode(errors="replace")
            buf += data
    finally:
        s.close()


def wait_event(path, start, timeout, name, conds):
    """The first event NAME after line START whose fields match CONDS."""
    end = time.monotonic() + timeout
    while True:
        try:
            with open(path, errors="replace") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            lines = []
        # the last piece is an unfinished line (or empty): not read yet
        for n, line in enumerate(lines[:-1], 1):
            if n <= start or not line.strip():
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") != name:
                continue
            ok = True
            for k, want in conds:
                v = e
                for part in k.split("."):
                    v = v.get(part) if isinstance(v, dict) else None
                got = str(v).lower() if isinstance(v, bool) else str(v)
                if got != want:
                    ok = False
                    break
            if ok:
                return n, line
        if time.monotonic() >= end:
            return None, None
        time.sleep(0.05)


def main(argv):
    if len(argv) < 3:
        die(__doc__, 2)
    cmd, path = argv[1], argv[2]
    if cmd == "qmp":
        if len(argv) not in (4, 5):
            die("usage: qmp SOCK COMMAND [ARGS_JSON]", 2)
        q = Qmp(path)
        r = q.execute(argv[3], json.loads(argv[4]) if len(argv) == 5 else None)
        print(json.dumps(r))
        return 0
    if cmd == "device-del":
        if len(argv) != 5:
            die("usage: device-del SOCK ID TIMEOUT", 2)
        dev, timeout = argv[3], float(argv[4])
        q = Qmp(path)
        t0 = time.monotonic()
        q.execute("device_del", {"id": dev})
        e = q.wait_event("DEVICE_DELETED", lambda d: d.get("device") == dev, timeout)
        if not e:
            die("no DEVICE_DELETED for %s within %gs: the guest did not let it go" % (dev, timeout))
        print("DEVICE_DELETED %s after %.1fs" % (dev, time.monotonic() - t0))
        return 0
    if cmd == "guest":
        if len(argv) != 5:
            die("usage: guest SOCK TIMEOUT COMMAND", 2)
        rc, out = guest(path, float(argv[3]), argv[4])
        sys.stdout.write(out)
        if rc is None:
            die("the guest did not finish '%s' within %ss" % (argv[4], argv[3]))
        return rc
    if cmd == "wait-guest":
        if len(argv) != 4:
            die("usage: wait-guest SOCK TIMEOUT", 2)
        end = time.monotonic() + float(argv[3])
        while time.monotonic() < end:
            try:
                rc, _ = guest(path, 2, "true")
                if rc == 0:
                    return 0
            except OSError:
                pass
            time.sleep(0.5)
        die("the guest's control port did not answer within %ss" % argv[3])
    if cmd == "wait-event":
        if len(argv) < 6:
            die("usage: wait-event FILE FROM TIMEOUT EVENT [KEY=VALUE ...]", 2)
        conds = [tuple(a.split("=", 1)) for a in argv[6:]]
        if any(len(c) != 2 for c in conds):
            die("wait-event: conditions are KEY=VALUE", 2)
        n, line = wait_event(path, int(argv[3]), float(argv[4]), argv[5], conds)
        if n is None:
            die("no event %s %s after line %s of %s within %ss" % (argv[5], " ".join(argv[6:]), argv[3], path,
                                                                      argv[4]))
        print(n, line)
        return 0
    die("unknown command %s" % cmd, 2)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
