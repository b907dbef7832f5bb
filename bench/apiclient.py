#!/usr/bin/env python3
# The benchmarks' client of memgrantd's local API (HTTP over the Unix
# socket, one kept-alive connection, so that the figures are the daemon's
# and not a process start per request).
#   apiclient.py latency SOCK PATH COUNT [SECS] -> "median_ms p99_ms max_ms n"
#       (stops after SECS seconds when given, with the requests done so far)
#   apiclient.py pairs SOCK COUNT SIZE     -> COUNT grants of SIZE, each
#       followed by its revocation, each waited for; prints
#       "first_per_s last_per_s total_s failed" where first/last are the
#       grant+revocation pairs per second over the first and last tenth
import http.client
import json
import socket
import sys
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("memgrantd", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Client:
    def __init__(self, path):
        self.path = path
        self.conn = UnixHTTPConnection(path)

    def call(self, method, url, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        for attempt in (0, 1):
            try:
                self.conn.request(method, url, body=data, headers=headers)
                r = self.conn.getresponse()
                payload = r.read()
                return r.status, payload
            except (http.client.HTTPException, OSError):
                # the server may close an idle keep-alive connection
                self.conn.close()
                self.conn = UnixHTTPConnection(self.path)
                if attempt:
                    raise
        raise RuntimeError("unreachable")


def percentile(xs, p):
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def latency(sock, path, count, secs=None):
    c = Client(sock)
    c.call("GET", path)  # warm
    ts = []
    end = time.time() + secs if secs else None
    for _ in range(count):
        if end and time.time() > end and len(ts) >= 10:
            break
        t0 = time.perf_counter()
        st, _ = c.call("GET", path)
        ts.append((time.perf_counter() - t0) * 1000)
        if st != 200:
            sys.exit("GET %s: HTTP %d" % (path, st))
    print("%.3f %.3f %.3f %d" % (percentile(ts, 50), percentile(ts, 99), max(ts), len(ts)))


FINAL = ("applied", "partial", "failed", "rejected", "cancelled")


def wait_final(c, gid, deadline=600):
    end = time.time() + deadline
    delay = 0.0005
    while time.time() < end:
        st, body = c.call("GET", "/v1/grants/" + gid)
        if st == 200:
            s = json.loads(body).get("state")
            if s in FINAL:
                return s
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    return "timeout"


def pairs(sock, count, size):
    c = Client(sock)
    stamps = []
    failed = 0
    t_start = time.perf_counter()
    for n in range(count):
        st, body = c.call("POST", "/v1/grants", {"type": "grant", "size": size})
        if st not in (200, 202):
            sys.exit("grant %d: HTTP %d %s" % (n, st, body[:200]))
        gid = json.loads(body)["id"]
        a = wait_final(c, gid)
        st, body = c.call("POST", "/v1/grants", {"type": "revoke", "grant": gid})
        if st not in (200, 202):
            sys.exit("revoke %d: HTTP %d %s" % (n, st, body[:200]))
        b = wait_final(c, json.loads(body)["id"])
        if a != "applied" or b != "applied":
            failed += 1
        stamps.append(time.perf_counter())
    tenth = max(1, count // 10)
    first = tenth / (stamps[tenth - 1] - t_start)
    last = tenth / (stamps[-1] - stamps[-tenth - 1]) if count > tenth else first
    print("%.2f %.2f %.2f %d" % (first, last, stamps[-1] - t_start, failed))


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "latency":
        latency(sys.argv[2], sys.argv[3], int(sys.argv[4]),
                float(sys.argv[5]) if len(sys.argv) > 5 else None)
    elif len(sys.argv) >= 5 and sys.argv[1] == "pairs":
        pairs(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit("usage: apiclient.py latency SOCK PATH COUNT | pairs SOCK COUNT SIZE")


if __name__ == "__main__":
    main()
