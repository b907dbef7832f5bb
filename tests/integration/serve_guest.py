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
"""
import argparse
import faulthandler
import json
import os
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--mode", choices=["normal", "flood"], required=True)
    ap.add_argument("--request", type=int, default=256 * M)
    ap.add_argument("--result", required=True)
    ap.add_argument("--rounds", type=int, default=1000000)
    args = ap.parse_args()
    faulthandler.register(__import__('signal').SIGUSR1)  # a stack dump, when a test wonders
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(args.socket)
    srv.listen(1)
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
