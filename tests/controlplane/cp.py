#!/usr/bin/env python3
"""Reference control plane for memgrant: a test tool, not part of the product.

Serves the API of docs/api/controlplane.openapi.yaml (Python 3 standard
library only) over TLS with certificates made by mkcerts.sh:

  GET  /v1/agents/{agent}/grants?after=G&wait=S   long poll
  POST /v1/agents/{agent}/status                  one status report (Idempotency-Key)
  PUT  /v1/agents/{agent}                         inventory

and an admin side, plain HTTP on 127.0.0.1 (never the agent's port), for the
tests:

  GET  /state                       everything received, in order
  GET  /last/{id}                   the last state posted for a grant or revoke id
  GET  /count/{prefix}              for the ids starting with prefix: how many have a status,
                                    how many a final one, by last state (cheap, for big tests)
  POST /agents/{agent}/grants       queue a grant or revoke (generation: next one when absent)
  POST /agents/{agent}/push         {"grants": [...]} handed out verbatim on the next poll,
                                    whatever its after= (replays, malformed messages)
  POST /agents/{agent}/bulk         {"prefix": P, "count": N, "size": S}: queue N grants
                                    P-1..P-N of size S at the next generations
  POST /mode   {"mode": "ok" | "down" | "500" | "garbage" | "429" | "slow" | "redirect",
                "retry_after": S, "delay": S, "restart": true}
                                    "restart" with "down": back up as a restarted server is,
                                    with new TLS session ticket keys and an empty session
                                    cache (no agent resumes its session)
  POST /token  {"token": "..." | null}   the bearer token accepted from now on
  POST /spread {"spread": S | null}      send "Memgrant-Spread: S" with every answer to
                                    the agents from now on (null: no header)
  GET  /stats                       per second (int(time.time())): TCP connections,
                                    TLS handshakes full and resumed, requests; per agent
                                    the times of its polls (for the fleet bench and tests)
  POST /stats/reset                 forget the per-second figures and poll times

Every status and inventory received is checked against
docs/api/messages.schema.json (schemacheck.py) and recorded with its problems,
so a test can assert that the agent only ever sends valid messages.

Usage: cp.py --dir DIR [--cert F --key F] [--client-ca F] [--token T]
       [--http] [--port N] [--spread S] [--quiet]
It writes DIR/cp.json {"port": N, "admin_port": M} once both sides listen.
"""
import argparse
import hashlib
import json
import os
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import schemacheck  # noqa: E402


def log(fmt, *args):
    sys.stderr.write("cp %s: %s\n" % (time.strftime("%H:%M:%S"), fmt % args))
    sys.stderr.flush()


class State:
    def __init__(self, token):
        self.cond = threading.Condition()
        self.token = token
        self.mode = "ok"
        self.retry_after = 1
        self.delay = 0.0
        self.grants = {}        # agent -> [message], generation order
        self.pushes = {}        # agent -> [[message]]
        self.statuses = []      # every POST status, in arrival order
        self.keys = set()
        self.last = {}          # id -> last state posted
        self.inventories = []
        self.polls = []         # {agent, after, wait, answer}
        self.refused = []       # {what, code, reason}
        self.tls_errors = []
        self.auths = set()      # every Authorization header received (what left the agent)
        self.connections = 0    # TCP connections accepted (keep-alive check)
        self.interfered = []    # {what, mode, t}: requests answered by a failure mode
        self.schema = schemacheck.load_schema()
        self.spread = None      # Memgrant-Spread sent with every answer, None: none
        self.per_sec = {}       # int(time) -> [connections, full handshakes, resumed, requests]
        self.poll_times = {}    # agent -> [time of each GET grants]
        self.quiet = False

    def count(self, i, n=1):
        """Adds N to figure I of this second (caller holds no lock)."""
        sec = int(time.time())
        with self.cond:
            row = self.per_sec.get(sec)
            if row is None:
                row = self.per_sec[sec] = [0, 0, 0, 0]
            row[i] += n

    def snapshot(self):
        with self.cond:
            return {
                "mode": self.mode, "statuses": self.statuses, "inventories": self.inventories,
                "polls": self.polls[-200:], "n_polls": len(self.polls), "refused": self.refused,
                "tls_errors": self.tls_errors, "connections": self.connections,
                "interfered": self.interfered, "grants": self.grants, "schema": schemacheck.engine(),
                "auths": sorted(self.auths),
            }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive
    server_version = "memgrant-cp/1"

    def log_message(self, fmt, *args):  # one line per request, on stderr
        if not self.server.st.quiet:
            log("%s %s", self.address_string(), fmt % args)

    def end_headers(self):
        sp = self.server.st.spread
        if sp is not None:
            self.send_header("Memgrant-Spread", str(sp))
        super().end_headers()

    def parse_request(self):
        ok = super().parse_request()
        if ok:
            self.server.st.count(3)
        return ok

    def setup(self):
        ctx = self.server.ssl_ctx
        with self.server.st.cond:
            self.server.st.connections += 1
        self.server.st.count(0)
        # headers and body go out in two writes: without this, Nagle and the
        # agent's delayed ACK add 40 ms to every answer
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ctx is not None:
            try:
                self.request = ctx.wrap_socket(self.request, server_side=True)
            except (ssl.SSLError, OSError) as e:
                with self.server.st.cond:
                    self.server.st.tls_errors.append(str(e))
                log("TLS handshake refused: %s", e)
                raise
            # a resumed session costs the server no signature: the fleet's
            # reconnect storm is counted in full handshakes
            self.server.st.count(2 if self.request.session_reused else 1)
        # which client certificate this connection presented (mTLS): the
        # SHA-256 of its DER, recorded with every poll, status and inventory
        self.client_cert = None
        if ctx is not None:
            der = self.request.getpeercert(binary_form=True)
            if der:
                self.client_cert = hashlib.sha256(der).hexdigest()
        self.server.track(self.request, True)
        super().setup()

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.request, False)

    # --- helpers ---
    def send_json(self, code, obj, headers=None):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def send_error_json(self, code, ecode, message, headers=None):
        self.send_json(code, {"error": {"code": ecode, "message": message}}, headers)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # --- failure modes and auth: True when the request was answered ---
    def interfere(self, what):
        st = self.server.st
        with st.cond:
            mode, delay, ra = st.mode, st.delay, st.retry_after
        if mode == "slow" and delay > 0:
            time.sleep(delay)
        if mode in ("500", "429", "garbage"):
            with st.cond:
                st.interfered.append({"what": what, "mode": mode, "t": time.time()})
        if mode == "redirect":
            self.read_body()
            self.send_response(302)
            self.send_header("Location", "https://elsewhere.invalid" + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        if mode == "500":
            self.read_body()
            self.send_error_json(500, "internal", "injected failure (mode 500)")
            return True
        if mode == "429":
            self.read_body()
            self.send_error_json(429, "too_many_requests", "slow down", {"Retry-After": str(ra)})
            return True
        if mode == "garbage":
            self.read_body()
            body = b"<html><body>Proxy error: garbage instead of the protocol</body></html>\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return True
        if self.headers.get("Authorization"):
            with st.cond:
                st.auths.add(self.headers["Authorization"])
        if st.token is not None:
            auth = self.headers.get("Authorization", "")
            if auth != "Bearer " + st.token:
                self.read_body()
                reason = "no bearer token" if not auth else "token expired or unknown"
                with st.cond:
                    st.refused.append({"what": what, "code": 401, "reason": reason})
                self.send_error_json(401, "unauthorized", reason,
                                     {"WWW-Authenticate": 'Bearer realm="memgrant"'})
                return True
        return False

    def route(self):
        u = urlparse(self.path)
        parts = [p for p in u.path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "v1" and parts[1] == "agents":
            return parts[2], parts[3:], parse_qs(u.query)
        return None, None, None

    # --- the agent's API ---
    def do_GET(self):
        agent, rest, q = self.route()
        if agent is None or rest != ["grants"]:
            return self.send_error_json(404, "not_found", "no such endpoint: GET " + self.path)
        if self.interfere("GET grants"):
            return
        st = self.server.st
        try:
            after = int(q.get("after", ["0"])[0])
            wait = float(q.get("wait", ["0"])[0])
            limit = int(q["limit"][0]) if "limit" in q else None
        except ValueError:
            return self.send_error_json(400, "bad_request", "after and wait must be numbers")
        deadline = time.monotonic() + min(wait, 300)
        with st.cond:
            # when the poll came, not when it was answered (a fleet's pace)
            st.poll_times.setdefault(agent, []).append(time.time())
            while True:
                if st.pushes.get(agent):
                    batch = st.pushes[agent].pop(0)
                    break
                batch = [g for g in st.grants.get(agent, []) if g.get("generation", 0) > after]
                if batch:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self.server.closing:
                    batch = None
                    break
                st.cond.wait(left)
            st.polls.append({"agent": agent, "after": after, "wait": wait, "limit": limit,
                             "client_cert": self.client_cert,
                             "answer": len(batch) if batch is not None else 204})
        if batch is None:
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_json(200, {"grants": batch})

    def do_POST(self):
        agent, rest, _ = self.route()
        if agent is None or rest != ["status"]:
            return self.send_error_json(404, "not_found", "no such endpoint: POST " + self.path)
        if self.interfere("POST status"):
            return
        raw = self.read_body()
        key = self.headers.get("Idempotency-Key")
        try:
            body = json.loads(raw)
        except ValueError as e:
            return self.send_error_json(400, "bad_request", "not JSON: %s" % e)
        errs = schemacheck.validate(body, "agent_report", self.server.st.schema)
        if isinstance(body, dict) and body.get("agent") != agent:
            errs.append("agent %r in the body is not %r of the URL" % (body.get("agent"), agent))
        if not key:
            errs.append("no Idempotency-Key header")
        st = self.server.st
        with st.cond:
            dup = key in st.keys
            st.keys.add(key)
            if isinstance(body, dict):
                st.last[str(body.get("id"))] = body.get("state")
            st.statuses.append({"agent": agent, "key": key, "duplicate": dup, "body": body,
                                "schema_errors": errs, "t": time.time(), "client_cert": self.client_cert})
            st.cond.notify_all()
        for e in errs:
            log("status %s: schema: %s", key, e)
        self.send_json(200, {"ok": True, "duplicate": dup})

    def do_PUT(self):
        agent, rest, _ = self.route()
        if agent is None or rest != []:
            return self.send_error_json(404, "not_found", "no such endpoint: PUT " + self.path)
        if self.interfere("PUT inventory"):
            return
        raw = self.read_body()
        try:
            body = json.loads(raw)
        except ValueError as e:
            return self.send_error_json(400, "bad_request", "not JSON: %s" % e)
        errs = schemacheck.validate(body, "inventory", self.server.st.schema)
        st = self.server.st
        with st.cond:
            st.inventories.append({"agent": agent, "body": body, "schema_errors": errs, "t": time.time(),
                                   "client_cert": self.client_cert})
            st.cond.notify_all()
        for e in errs:
            log("inventory: schema: %s", e)
        self.send_json(200, {"ok": True})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 4096   # a fleet reconnecting at once: not 5 (the default), SYNs dropped

    def __init__(self, addr, st, ssl_ctx):
        self.st = st
        self.ssl_ctx = ssl_ctx
        self.closing = False
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, Handler)

    def track(self, sock, add):
        with self.conns_lock:
            (self.conns.add if add else self.conns.discard)(sock)

    def handle_error(self, request, client_address):
        e = sys.exc_info()[1]
        if not isinstance(e, (ssl.SSLError, ConnectionError, OSError)):
            super().handle_error(request, client_address)

    def kill_connections(self):
        self.closing = True
        with self.st.cond:
            self.st.cond.notify_all()
        with self.conns_lock:
            for s in list(self.conns):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class Front:
    """The agent-facing side; "down" closes it, anything else opens it again."""

    def __init__(self, st, host, port, make_ctx):
        self.st, self.host, self.make_ctx = st, host, make_ctx
        self.ssl_ctx = make_ctx()
        self.srv = None
        self.port = port
        self.up()

    def up(self):
        if self.srv:
            return
        for _ in range(50):
            try:
                self.srv = Server((self.host, self.port), self.st, self.ssl_ctx)
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("cannot listen on port %d again" % self.port)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        log("listening on %s:%d", self.host, self.port)

    def down(self):
        if not self.srv:
            return
        srv, self.srv = self.srv, None
        srv.shutdown()
        srv.server_close()
        srv.kill_connections()
        log("down: not listening")


class Admin(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, obj):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/state":
            return self.reply(200, self.server.st.snapshot())
        if self.path == "/stats":
            st = self.server.st
            with st.cond:
                return self.reply(200, {"per_sec": {str(k): v for k, v in sorted(st.per_sec.items())},
                                        "poll_times": st.poll_times, "now": time.time()})
        if self.path.startswith("/last/"):  # the last state posted for an id (cheap, for the soak)
            st = self.server.st
            with st.cond:
                return self.reply(200, {"state": st.last.get(self.path[len("/last/"):])})
        if self.path.startswith("/count/"):
            prefix = self.path[len("/count/"):]
            st = self.server.st
            with st.cond:
                last = {k: v for k, v in st.last.items() if k.startswith(prefix)}
            states = {}
            for v in last.values():
                states[v] = states.get(v, 0) + 1
            final = sum(n for k, n in states.items() if k in ("applied", "partial", "failed", "rejected"))
            return self.reply(200, {"ids": len(last), "final": final, "states": states})
        self.reply(404, {"error": "no such admin endpoint"})

    def do_POST(self):
        st, front = self.server.st, self.server.front
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"null")
        except ValueError as e:
            return self.reply(400, {"error": str(e)})
        parts = [p for p in self.path.split("/") if p]
        if len(parts) == 3 and parts[0] == "agents" and parts[2] == "grants":
            with st.cond:
                q = st.grants.setdefault(parts[1], [])
                if "generation" not in body:
                    body["generation"] = (q[-1]["generation"] if q else 0) + 1
                q.append(body)
                st.cond.notify_all()
            log("queued %s %s generation %d", body.get("type"), body.get("id"), body["generation"])
            return self.reply(200, body)
        if len(parts) == 3 and parts[0] == "agents" and parts[2] == "push":
            with st.cond:
                st.pushes.setdefault(parts[1], []).append(body["grants"])
                st.cond.notify_all()
            return self.reply(200, {"ok": True})
        if len(parts) == 3 and parts[0] == "agents" and parts[2] == "bulk":
            with st.cond:
                q = st.grants.setdefault(parts[1], [])
                gen = q[-1]["generation"] if q else 0
                for i in range(1, int(body["count"]) + 1):
                    q.append({"type": "grant", "id": "%s-%d" % (body["prefix"], i),
                              "size": body.get("size", "128M"), "generation": gen + i})
                st.cond.notify_all()
            log("queued %d grants %s-*", int(body["count"]), body["prefix"])
            return self.reply(200, {"ok": True, "last_generation": gen + int(body["count"])})
        if parts == ["mode"]:
            with st.cond:
                st.mode = body["mode"]
                st.retry_after = int(body.get("retry_after", st.retry_after))
                st.delay = float(body.get("delay", st.delay))
                st.cond.notify_all()
            if st.mode == "down":
                front.down()
                if body.get("restart"):
                    front.ssl_ctx = front.make_ctx()
            else:
                front.up()
            log("mode %s", st.mode)
            return self.reply(200, {"mode": st.mode})
        if parts == ["spread"]:
            with st.cond:
                st.spread = body.get("spread")
            log("spread %s", st.spread)
            return self.reply(200, {"spread": st.spread})
        if parts == ["stats", "reset"]:
            with st.cond:
                st.per_sec, st.poll_times = {}, {}
            return self.reply(200, {"ok": True})
        if parts == ["token"]:
            with st.cond:
                st.token = body.get("token")
            log("token %s", "changed" if st.token else "not required")
            return self.reply(200, {"ok": True})
        self.reply(404, {"error": "no such admin endpoint"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--client-ca", help="require a client certificate signed by this CA (mTLS)")
    ap.add_argument("--token", help="require this bearer token")
    ap.add_argument("--http", action="store_true", help="plain http (insecure_http tests)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--spread", type=int, help="send Memgrant-Spread: S with every answer")
    ap.add_argument("--quiet", action="store_true", help="no line per request (fleet bench)")
    a = ap.parse_args()

    def make_ctx():
        """a TLS context: its session ticket keys are its own, as a server process's"""
        if a.http:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(a.cert, a.key)
        ctx.set_alpn_protocols(["http/1.1"])
        if a.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(a.client_ca)
        return ctx

    st = State(a.token)
    st.spread = a.spread
    st.quiet = a.quiet
    front = Front(st, "127.0.0.1", a.port, make_ctx)
    admin = ThreadingHTTPServer(("127.0.0.1", 0), Admin)
    admin.daemon_threads = True
    admin.st, admin.front = st, front
    tmp = os.path.join(a.dir, "cp.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"port": front.port, "admin_port": admin.server_address[1]}, f)
    os.rename(tmp, os.path.join(a.dir, "cp.json"))
    log("admin on 127.0.0.1:%d, schema check: %s", admin.server_address[1], schemacheck.engine())
    try:
        admin.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
