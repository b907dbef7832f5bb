#!/usr/bin/env python3
"""A fake guest for memgrant-host serve (tests/integration/serve_hostile.sh).

Listens on the channel's bind path, as QEMU's chardev server does, and speaks
the agent's side of the channel (docs/channel.md, docs/protocol.md):
answers the service's sync with its nonce, a query with an agent_status, a
grant with a status report.

  normal  answers like a real agent: applies each grant, reports it, and
          sends one request of --request bytes once synced; writes what it
          saw (queries between its request and the grant, its grants) to
          --result as JSON.
  flood   answers sync and query, then writes --rounds rounds of 400
          requests for 1 TiB, 300 garbage lines (bad JSON, bad fields,
          reports of operations nobody sent) and a 5 MiB line, as fast as the
          socket takes them; then a 1 TiB request every 0.1 s.  Lies in its
          agent_status, answers each grant with a lie (1 TiB applied) and
          never reports a revocation.
  ledger  answers like a real agent and keeps what it applied in --ledger
          (JSON lines, fsynced before each report: id, kind, generation,
          bytes): a grant or revoke at a generation it already recorded is a
          replay, answered with the recorded status and not applied again;
          one at a generation below its last, never recorded, gets ESTALE.
          What it wants comes from --control ({"target": BYTES, "delay_ms":
          N}, read at each query): below the target it asks for the
          difference, above it offers it.  Operations run one at a time in
          the order received; delay_ms (read when one arrives) holds it that
          long before it is applied and reported (the service may be killed
          meanwhile: the report goes to whoever is connected then; a
          replay of it meanwhile is not answered).  The ledger also says
          what it received, replayed and refused; it survives the guest, and
          tests/crash/serve_faults.sh reads it.
"""
import argparse
import faulthandler
import json
import os
import queue
import socket
import threading
import time

M = 1 << 20
BLOCK = 128 * M


class Guest:
    def __init__(self, conn, args):
        self.conn = conn
        self.args = args
        self.lock = threading.Lock()
        self.granted = 0
        self.generation = 0
        self.seq = 0
        self.synced = False
        self.requested_at_query = None  # queries seen when the request left
        self.queries = 0
        self.grants = []
        self.alive = True

    def send(self, obj_or_bytes):
        data = obj_or_bytes if isinstance(obj_or_bytes, bytes) else (json.dumps(obj_or_bytes) + "\n").encode()
        with self.lock:
            self.conn.sendall(data)

    def next_seq(self):
        self.seq += 1
        return self.seq

    def agent_status(self):
        if self.args.mode == "flood":  # lies: holds everything, uses everything
            return {"type": "agent_status",
                    "memory": {"block_size": BLOCK, "online_bytes": 1 << 40, "standby_bytes": 0,
                               "granted_bytes": 1 << 40, "mem_total_bytes": 1 << 40, "mem_available_bytes": 0}}
        return {"type": "agent_status",
                "memory": {"block_size": BLOCK, "online_bytes": 1024 * M + self.granted,
                           "standby_bytes": 2048 * M - self.granted, "granted_bytes": self.granted,
                           # no slack: what it gets, it uses
                           "mem_total_bytes": 1024 * M + self.granted, "mem_available_bytes": 64 * M}}

    def on_line(self, line):
        try:
            m = json.loads(line)
        except ValueError:
            return
        t = m.get("type")
        if t == "sync":
            self.send({"type": "sync", "nonce": m["nonce"], "generation": self.generation})
            self.synced = True
        elif t == "query":
            self.queries += 1
            self.send(self.agent_status())
            if self.args.mode == "normal" and self.requested_at_query is None:
                self.requested_at_query = self.queries
                self.send({"type": "request", "id": "r1", "bytes": self.args.request, "seq": self.next_seq()})
        elif t == "grant":
            self.generation = max(self.generation, m["generation"])
            size = m.get("size", 0)
            if self.args.mode == "normal":
                self.granted += size
                self.grants.append(size)
                self.send({"type": "status", "id": m["id"], "generation": m["generation"], "state": "applied",
                           "requested_bytes": size, "applied_bytes": size, "seq": self.next_seq()})
                self.write_result()
            else:
                self.grants.append(size)
                self.send({"type": "status", "id": m["id"], "generation": m["generation"], "state": "applied",
                           "requested_bytes": 1 << 40, "applied_bytes": 1 << 40, "seq": self.next_seq()})
        elif t == "revoke":
            self.generation = max(self.generation, m["generation"])
            # normal: never asked (no slack); flood: never answered

    def write_result(self):
        if not self.args.result:
            return
        tmp = self.args.result + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"granted": self.granted, "grants": self.grants,
                       "queries_before_grant": self.queries - (self.requested_at_query or 0)}, f)
        os.rename(tmp, self.args.result)

    def reader(self):
        buf = b""
        while self.alive:
            try:
                data = self.conn.recv(65536)
            except OSError:
                break
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    self.on_line(line.decode("utf-8", "replace"))
        self.alive = False

    def flood(self):
        while not self.synced and self.alive:
            time.sleep(0.05)
        rounds = 0
        sent = {"requests": 0, "garbage": 0, "oversized": 0}
        while self.alive and rounds < self.args.rounds:
            rounds += 1
            chunk = []
            for i in range(400):
                chunk.append(json.dumps({"type": "request", "bytes": 1 << 40, "seq": self.next_seq()}).encode())
                sent["requests"] += 1
                if i % 4 == 0:
                    chunk.append(b"\x01\x02\xff garbage {{{")
                    chunk.append(b'{"type":"request","bytes":-1}')
                    chunk.append(b'{"type":"status","id":"mgs-999","generation":999,"state":"applied",'
                                 b'"applied_bytes":1099511627776}')
                    sent["garbage"] += 3
            try:
                self.send(b"\n".join(chunk) + b"\n")
                if rounds % 2 == 1:
                    self.send(b"x" * (5 * M) + b"\n")  # past the service's line limit
                    sent["oversized"] += 1
            except OSError:
                break
            self.write_sent(sent)
        # then a steady liar within its line budget: 1 TiB requests, ten a second
        while self.alive:
            try:
                self.send({"type": "request", "bytes": 1 << 40, "seq": self.next_seq()})
            except OSError:
                break
            sent["requests"] += 1
            self.write_sent(sent)
            time.sleep(0.1)

    def write_sent(self, sent):
        with open(self.args.result + ".tmp", "w") as f:
            json.dump(sent, f)
        os.rename(self.args.result + ".tmp", self.args.result)


class LedgerGuest:
    """The ledger mode: one guest across the service's connections."""

    RESEND_S = 2.0  # a request or offer not followed by an operation is sent again

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.conn = None
        self.seq = 0
        self.records = {}   # generation -> the recorded status line
        self.inflight = {}  # generation -> id, while held by delay_ms
        self.granted = 0
        self.high = 0       # the last generation recorded or in flight
        self.asked_at = None
        self.asked_on = None  # the connection the last request or offer went to
        self.queue = queue.Queue()
        threading.Thread(target=self.worker, daemon=True).start()
        try:
            with open(args.ledger) as f:
                for line in f:
                    e = json.loads(line)
                    if "status" in e:
                        self.remember(e)
        except FileNotFoundError:
            pass

    def remember(self, e):
        st = e["status"]
        self.records[st["generation"]] = (e["kind"], st)
        self.high = max(self.high, st["generation"])
        self.granted += st["applied_bytes"] if e["kind"] == "grant" else -st["applied_bytes"]

    def log(self, entry):
        """One line appended and fsynced: durable before the guest says it"""
        with open(self.args.ledger, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def send(self, obj):
        with self.lock:
            conn = self.conn
        if conn is None:
            return
        try:
            conn.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            pass  # the service went away; it replays what it missed

    def control(self):
        try:
            with open(self.args.control) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def agent_status(self, target):
        # no slack unless offering: the service shrinks on the offer alone
        avail = 1024 * M if target < self.granted else 64 * M if target > self.granted else 200 * M
        return {"type": "agent_status",
                "memory": {"block_size": BLOCK, "online_bytes": 1024 * M + self.granted,
                           "standby_bytes": 2048 * M - self.granted, "granted_bytes": self.granted,
                           "mem_total_bytes": 1024 * M + self.granted, "mem_available_bytes": avail}}

    def on_line(self, conn, line):
        try:
            m = json.loads(line)
        except ValueError:
            return
        t = m.get("type")
        if t == "sync":
            self.send({"type": "sync", "nonce": m["nonce"], "generation": self.high})
        elif t == "query":
            ctl = self.control()
            target = int(ctl.get("target", 0))
            with self.lock:
                self.seq += 1
                seq = self.seq
                busy = bool(self.inflight)
                due = (self.asked_on is not conn or self.asked_at is None or
                       time.monotonic() - self.asked_at > self.RESEND_S)
                if not busy and target != self.granted and due:
                    self.asked_at, self.asked_on = time.monotonic(), conn
                else:
                    due = False
            self.send(self.agent_status(target))
            if due and target > self.granted:
                self.send({"type": "request", "bytes": target - self.granted, "seq": seq})
            elif due:
                self.send({"type": "offer", "bytes": self.granted - target, "seq": seq})
        elif t in ("grant", "revoke"):
            self.on_op(t, m)

    def on_op(self, kind, m):
        gen, oid = m["generation"], m["id"]
        with self.lock:
            rec = self.records.get(gen)
            if gen in self.inflight:
                return  # its report comes when it is done
            if rec is None and gen <= self.high:
                stale = True
            else:
                stale = False
                if rec is None:
                    self.inflight[gen] = oid
                    self.high = gen
                    self.asked_at = time.monotonic()
        if rec is not None:
            if rec[1]["id"] != oid or rec[0] != kind:
                # a generation used twice for different operations: the test counts it
                self.log({"conflict": {"generation": gen, "recorded": [rec[0], rec[1]["id"]], "sent": [kind, oid]}})
            self.log({"replay": {"generation": gen, "id": oid}})
            self.send(dict(rec[1], seq=self.next_seq()))
            return
        if stale:
            self.log({"stale": {"generation": gen, "id": oid, "kind": kind}})
            self.send({"type": "error", "id": oid, "code": "ESTALE",
                       "message": "generation %d is below the last one (%d) and not recorded" % (gen, self.high)})
            return
        self.log({"received": {"generation": gen, "id": oid, "kind": kind}})
        self.queue.put((kind, m, int(self.control().get("delay_ms", 0))))

    def worker(self):
        """one operation at a time, in the order received, as the agent runs them"""
        while True:
            self.apply(*self.queue.get())

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def apply(self, kind, m, delay):
        time.sleep(delay / 1000.0)
        gen, oid = m["generation"], m["id"]
        with self.lock:
            if kind == "grant":
                asked = int(m.get("size", 0))
                got = min(asked, 2048 * M - self.granted)
            else:
                asked = int(m.get("size", 0))
                if "grant" in m:  # the grant's bytes, as far as they are still held
                    asked = next((st["applied_bytes"] for g, (k, st) in self.records.items()
                                  if k == "grant" and st["id"] == m["grant"]), 0)
                got = min(asked, self.granted)
            status = {"type": "status", "id": oid, "generation": gen,
                      "state": "applied" if got == asked else "partial",
                      "requested_bytes": asked, "applied_bytes": got}
            entry = {"kind": kind, "status": status, "granted_after": self.granted + (got if kind == "grant" else -got)}
            self.log(entry)
            self.remember(entry)
            del self.inflight[gen]
            self.seq += 1
            seq = self.seq
        self.send(dict(status, seq=seq))

    def serve(self, conn):
        with self.lock:
            self.conn = conn
        buf = b""
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                break
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    self.on_line(conn, line.decode("utf-8", "replace"))
        with self.lock:
            if self.conn is conn:
                self.conn = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--mode", choices=["normal", "flood", "ledger"], required=True)
    ap.add_argument("--request", type=int, default=256 * M)
    ap.add_argument("--result")
    ap.add_argument("--ledger", help="ledger mode: where it records what it applied")
    ap.add_argument("--control", help="ledger mode: its target and delay (JSON)")
    ap.add_argument("--rounds", type=int, default=1000000)
    args = ap.parse_args()
    faulthandler.register(__import__('signal').SIGUSR1)  # a stack dump, when a test wonders
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(args.socket)
    srv.listen(1)
    if args.mode == "ledger":
        if not args.ledger or not args.control:
            ap.error("--mode ledger needs --ledger and --control")
        g = LedgerGuest(args)
        while True:
            conn, _ = srv.accept()
            g.serve(conn)
            conn.close()
    if not args.result:
        ap.error("--mode %s needs --result" % args.mode)
    while True:  # the service may reconnect; one connection at a time, as QEMU's chardev
        conn, _ = srv.accept()
        g = Guest(conn, args)
        r = threading.Thread(target=g.reader, daemon=True)
        r.start()
        if args.mode == "flood":
            threading.Thread(target=g.flood, daemon=True).start()
        r.join()
        conn.close()


if __name__ == "__main__":
    main()
