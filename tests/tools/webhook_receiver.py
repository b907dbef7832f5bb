#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A webhook receiver for memgrant's integration tests (loopback, plain http).

Every POST is checked: the body is JSON, X-Memgrant-Signature is
sha256=HMAC-SHA256(secret, body) and X-Memgrant-Delivery equals the body's
event_id.  Each delivery is appended to LOG as one JSON line
{"event", "event_id", "id", "state", "sig_ok", "delivery_ok"}; the answer is
200 when all checks pass, 400 otherwise (a bad signature is a test failure,
the sender retrying it must not hide that).

usage: webhook_receiver.py --secret-file F --log LOG --port-file P [--port N]
"""
import argparse
import hashlib
import hmac
import http.server
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    with open(args.secret_file, "rb") as f:
        secret = f.read()
    if secret.endswith(b"\n"):
        secret = secret[:-1]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            want = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
            sig_ok = hmac.compare_digest(want, self.headers.get("X-Memgrant-Signature", ""))
            try:
                ev = json.loads(body)
            except ValueError:
                ev = {}
            delivery_ok = (ev.get("event_id") is not None
                           and self.headers.get("X-Memgrant-Delivery") == ev.get("event_id")
                           and self.headers.get("Idempotency-Key") == ev.get("event_id")
                           and self.headers.get("X-Memgrant-Event") == ev.get("event"))
            rec = {"event": ev.get("event"), "event_id": ev.get("event_id"), "id": ev.get("id"),
                   "state": ev.get("state"), "sig_ok": sig_ok, "delivery_ok": delivery_ok}
            with open(args.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            code = 200 if sig_ok and delivery_ok else 400
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, fmt, *a):
            pass

    http.server.HTTPServer.allow_reuse_address = True
    srv = http.server.HTTPServer(("127.0.0.1", args.port), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
