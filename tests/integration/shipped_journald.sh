#!/bin/sh
# Under journald memgrantd's entries carry structured fields, sent in
# journald's native protocol by lib/log_journald.c (no libsystemd): GRANT_ID=,
# BLOCK=, STEP=, ERRNO= and ERRNO_NAME=, so that `journalctl GRANT_ID=g-1`
# finds a grant.  It sends to the fixed path /run/systemd/journal/socket; here, in
# the test's own mount namespace (as_shipped: a fresh /run), a listener of
# the test binds that path and decodes journald's native protocol.  The
# split as shipped: root starts memgrantd with the shipped configuration on
# the sim, its agent runs as memgrant; its stderr is the "journal stream"
# (JOURNAL_STREAM names it, as systemd sets it for a unit).
# A grant g-1 of 512M with block 17 failing configure (EIO) must produce an
# entry from uid memgrant with GRANT_ID=g-1 BLOCK=17 STEP=configure ERRNO=5
# ERRNO_NAME=EIO PRIORITY=3 SYSLOG_IDENTIFIER=memgrantd, and every entry of
# g-1 carries GRANT_ID=g-1.  Without the journal stream, stderr lines are as
# before and nothing reaches the socket.
. "$(dirname "$0")/lib.sh"
as_shipped
shipped_config
C=$T/etc/memgrant.yaml
"$MEMGRANTCTL" sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
"$MEMGRANTCTL" sim fault "$SIM" --configure-eio 17 > /dev/null || fail "sim fault"
chmod 0666 "$SIM"

mkdir -p /run/systemd/journal
python3 - "$T/journal.jsonl" "$T/listener.ready" <<'PY' &
import array, json, os, socket, struct, sys
out, ready = sys.argv[1], sys.argv[2]
path = "/run/systemd/journal/socket"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)  # as journald's: every user may log
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
open(ready, "w").close()

def decode(data):
    """journald's native protocol: KEY=VALUE\n, or KEY\n<le64 size>VALUE\n"""
    f, i = {}, 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack_from("<Q", data, nl + 1)
            v = data[nl + 9:nl + 9 + n]
            i = nl + 9 + n + 1
        f[k.decode()] = v.decode(errors="replace")
    return f

with open(out, "a") as o:
    while True:
        data, anc, _, _ = s.recvmsg(1 << 20, socket.CMSG_SPACE(64) + socket.CMSG_SPACE(12))
        uid = None
        for level, kind, d in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                _, uid, _ = struct.unpack("iII", d[:12])
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fd = array.array("i", d[:4])[0]  # a large entry in a memfd
                data = os.pread(fd, 1 << 24, 0)
                os.close(fd)
        f = decode(data)
        f["_UID"] = uid
        o.write(json.dumps(f) + "\n")
        o.flush()
PY
LISTENER=$!
trap 'kill $LISTENER 2>/dev/null; cleanup' EXIT
i=0
until [ -f "$T/listener.ready" ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "the journal listener did not start"
	sleep 0.1
done

: > "$T/daemon.log"
stream=$(stat -c '%d:%i' "$T/daemon.log")
JOURNAL_STREAM=$stream "$MEMGRANTD" -c "$C" $PKG_PATHS -o backend.type=sim -o backend.sim.state="$SIM" \
	--foreground 2>> "$T/daemon.log" &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" status > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "memgrantd did not come up"
	kill -0 $DAEMON_PID 2>/dev/null || fail "memgrantd exited at start"
	sleep 0.1
done
rc=0
"$MEMGRANTCTL" grant 512M --id g-1 --wait > "$T/grant.out" 2>&1 || rc=$?
expect_eq "grant g-1 with block 17 failing: exit ($(cat "$T/grant.out"))" "$rc" 64
stop_daemon
sleep 0.2

python3 - "$T/journal.jsonl" "$(id -u memgrant)" <<'PY' || fail "journal entries: $(cat "$T/journal.jsonl")"
import json, sys
entries = [json.loads(l) for l in open(sys.argv[1])]
uid = int(sys.argv[2])
want = {"GRANT_ID": "g-1", "BLOCK": "17", "STEP": "configure", "ERRNO": "5", "ERRNO_NAME": "EIO",
        "PRIORITY": "3", "SYSLOG_IDENTIFIER": "memgrantd"}
hits = [e for e in entries if all(e.get(k) == v for k, v in want.items())]
assert hits, "no entry with %s" % want
assert "block 17" in hits[0]["MESSAGE"] and "configure" in hits[0]["MESSAGE"], hits[0]
assert hits[0]["_UID"] == uid, "the entry came from uid %s, not memgrant (%d)" % (hits[0]["_UID"], uid)
g1 = [e for e in entries if "g-1" in e.get("MESSAGE", "")]
assert len(g1) >= 3, "too few entries of g-1: %s" % g1
assert all(e.get("GRANT_ID") == "g-1" for e in g1), [e for e in g1 if e.get("GRANT_ID") != "g-1"]
names = {k for e in entries for k in e if k != "_UID"}
bad = [k for k in names if not k.replace("_", "A").isalnum() or not k.isupper() or k[0] == "_"]
assert not bad, "field names journald refuses: %s" % bad
print("%d entries, %d of g-1" % (len(entries), len(g1)))
PY
grep -q "block 17: configure failed" "$T/daemon.log" &&
	fail "the agent's entry went to stderr too: $(grep 'block 17' "$T/daemon.log")"

# without the journal stream: plain lines on stderr, nothing to the socket
n=$(wc -l < "$T/journal.jsonl")
: > "$T/daemon.log"
"$MEMGRANTD" -c "$C" $PKG_PATHS -o backend.type=sim -o backend.sim.state="$SIM" --foreground 2>> "$T/daemon.log" &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" status > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "memgrantd did not come up"
	sleep 0.1
done
"$MEMGRANTCTL" grant --blocks 20 --id g-2 --wait > /dev/null 2>&1 || fail "grant g-2"
stop_daemon
grep -q "^[0-9T:.-]*Z memgrantd: grant g-2 applied: 128M of 128M" "$T/daemon.log" || fail "stderr lines changed: $(cat "$T/daemon.log")"
expect_eq "journal entries without the journal stream" "$(wc -l < "$T/journal.jsonl")" "$n"
echo ok
