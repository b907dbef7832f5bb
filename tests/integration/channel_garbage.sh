#!/bin/sh
# Garbage from the host side of the channel: invalid JSON, non-objects,
# unknown types, bad fields, lines over 64 KiB (in one piece and split over
# many writes), bad acks.  Each gets an {"type":"error"} line naming the
# problem, the stream resynchronises at the next newline, and the agent keeps
# serving both the channel and its local API.  Also: the agent answers a sync
# before anything else, and a silent peer makes memgrant-host time out.
. "$(dirname "$0")/lib.sh"

HOSTBIN=$BUILD/memgrant-host
RELAY_PID=
SILENT_PID=
trap 'kill $RELAY_PID $SILENT_PID 2>/dev/null; cleanup' EXIT INT TERM

python3 "$(dirname "$0")/channel_relay.py" "$T/guest.sock" "$T/host.sock" &
RELAY_PID=$!
i=0
while [ ! -S "$T/host.sock" ]; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "relay did not start"; sleep 0.1
done
write_config "providers:" "  channel:" "    path: $T/guest.sock"
start_daemon

# A raw host: sends the lines, then a sync; collects every line up to the sync
# answer and checks the error codes in order.
python3 - "$T/host.sock" > "$T/raw.out" 2>&1 <<'PY' || { cat "$T/raw.out"; fail "raw channel session"; }
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
f = s.makefile("rb")

def send(b):
    s.sendall(b)

def line():
    l = f.readline()
    if not l:
        raise SystemExit("channel closed")
    return json.loads(l)

def until_sync(nonce):
    got = []
    while True:
        m = line()
        if m.get("type") == "sync" and m.get("nonce") == nonce:
            return got
        got.append(m)

# a first sync discards whatever the agent sent before we came
send(b"\n" + b'{"type":"sync","nonce":1}\n')
until_sync(1)

cases = [
    (b"hello\n", "EBADMSG", "not valid JSON"),
    (b"[1,2]\n", "EBADMSG", "not a JSON object"),
    (b'{"type":"nope","id":"x-1"}\n', "EINVAL", "nope"),
    (b'{"type":"grant","id":"g-1","generation":1,"size":"2X"}\n', "EINVAL", "size"),
    (b'{"type":"grant","id":"g-1","generation":1,"size":"128M","zon":"normal"}\n', "EINVAL", "zon"),
    (b"x" * 70000 + b"\n", "E2BIG", "longer than 65536"),
    (b'{"type":"ack","seq":"one"}\n', "EINVAL", "seq"),
    (b'{"type":"ack","seq":5,"extra":1}\n', "EINVAL", "extra"),
    (b'{"type":"sync","nonce":-1}\n', "EINVAL", "nonce"),
]
for i, (data, code, word) in enumerate(cases):
    send(data)
    send(b'{"type":"sync","nonce":%d}\n' % (100 + i))
    got = until_sync(100 + i)
    errs = [m for m in got if m.get("type") == "error"]
    assert len(errs) == 1, (data[:40], got)
    assert errs[0]["code"] == code, (data[:40], errs[0])
    assert word in errs[0]["message"], (data[:40], errs[0])
    print("ok", code, errs[0]["message"][:80])

# an id the agent could read is echoed in the error
send(b'{"type":"grant","id":"g-9","generation":1,"size":"2X"}\n{"type":"sync","nonce":200}\n')
errs = [m for m in until_sync(200) if m.get("type") == "error"]
assert errs[0].get("id") == "g-9", errs

# an oversized line written in small pieces, with the next message glued to its end
big = b'{"type":"grant","id":"big","size":"' + b"9" * 100000 + b'"}\n{"type":"sync","nonce":300}\n'
for k in range(0, len(big), 4096):
    send(big[k:k + 4096])
    time.sleep(0.001)
got = until_sync(300)
assert [m["code"] for m in got if m.get("type") == "error"] == ["E2BIG"], got

# a line of exactly 65536 bytes is not too long (it is not JSON either)
send(b"y" * 65536 + b'\n{"type":"sync","nonce":301}\n')
got = until_sync(301)
assert [m["code"] for m in got if m.get("type") == "error"] == ["EBADMSG"], got

# the sync answer comes before the answer to anything sent after it
send(b'{"type":"sync","nonce":400}\n{"type":"query"}\n')
got = until_sync(400)
m = line()
assert m["type"] == "agent_status" and m["agent"] == "test-guest", m
# an empty line and CRLF are fine
send(b'\n\r\n{"type":"sync","nonce":401}\r\n')
assert until_sync(401) == [], "CRLF sync"
print("done")
PY
cat "$T/raw.out"
grep -q "^done" "$T/raw.out" || fail "raw session incomplete"

# the agent is unharmed: local API and channel still serve
$CTL status >/dev/null || fail "memgrantctl status after garbage"
out=$("$HOSTBIN" --socket "$T/host.sock" --state-dir "$T/hs" grant guest 128M --wait) ||
	fail "grant after garbage exited $?: $out"
echo "$out" | grep -q "applied, 128M of 128M" || fail "grant after garbage: $out"
expect_eq "online" "$(online_bytes)" $((2048 * 1048576 + 128 * 1048576))
stop_daemon

# a peer that never answers: memgrant-host gives up after --timeout (exit 3)
python3 -c '
import os, socket, sys, time
p = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(p); s.listen(1)
c, _ = s.accept()
time.sleep(30)' "$T/silent.sock" &
SILENT_PID=$!
i=0
while [ ! -S "$T/silent.sock" ]; do i=$((i + 1)); [ $i -gt 50 ] && fail "silent peer"; sleep 0.1; done
start=$(date +%s)
"$HOSTBIN" --socket "$T/silent.sock" --state-dir "$T/hs" --timeout 1s status guest 2>"$T/timeout.err"
rc=$?
expect_eq "exit on timeout" "$rc" 3
grep -q "did not answer within 1.0s" "$T/timeout.err" || fail "timeout message: $(cat "$T/timeout.err")"
[ $(($(date +%s) - start)) -le 5 ] || fail "timeout took too long"

# no socket at all: exit 4 with the path
"$HOSTBIN" --socket "$T/nothing.sock" status guest 2>"$T/nosock.err"
expect_eq "exit without socket" "$?" 4
grep -q "cannot connect to $T/nothing.sock" "$T/nosock.err" || fail "$(cat "$T/nosock.err")"

# usage errors: exit 1 (as memgrantd and memgrantctl), nothing sent
"$HOSTBIN" --socket "$T/nothing.sock" grant guest 2X 2>"$T/usage.err"
expect_eq "bad size" "$?" 1
grep -q "'2X' is not a size" "$T/usage.err" || fail "$(cat "$T/usage.err")"
"$HOSTBIN" --socket "$T/nothing.sock" grant guest 1G --memmap maybe 2>/dev/null
expect_eq "bad memmap" "$?" 1
"$HOSTBIN" --socket "$T/nothing.sock" grant guest 0x80000000-zz 2>"$T/usage.err"
expect_eq "bad range" "$?" 1
grep -q "'0x80000000-zz' is not an address range" "$T/usage.err" || fail "$(cat "$T/usage.err")"
"$HOSTBIN" --socket "$T/nothing.sock" revoke guest 2>/dev/null
expect_eq "revoke without size" "$?" 1
"$HOSTBIN" -c test:///default --socket "$T/x" status guest 2>/dev/null
expect_eq "-c with --socket" "$?" 1
"$HOSTBIN" --bogus 2>/dev/null
expect_eq "unknown option" "$?" 1
"$HOSTBIN" 2>/dev/null
expect_eq "no command" "$?" 1
echo ok
