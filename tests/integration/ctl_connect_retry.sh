#!/bin/sh
# memgrantctl retries a connect that the agent's socket refuses (nothing
# listens yet: a restart) or that finds its connection queue full (a busy
# agent) for about 2 s (agent/ctl/ctl_client.c), then says which it was:
#  - the socket exists, listen() comes 0.5 s later: status succeeds;
#  - the listen queue is full and frees up after 0.5 s: status succeeds;
#  - nothing ever listens: exit 1 after the retries, "memgrantd is not
#    running: nothing listens on SOCK (connection refused for 2 s)";
#  - the queue stays full: exit 1, "memgrantd at SOCK is busy: its
#    connection queue stayed full for 2 s; try again";
#  - no socket file: exit 1 at once (nothing to wait for), "no socket at".
# The listener is a Python stand-in on a Unix socket under $T that answers
# GET /v1/status with what the real daemon answered.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to record the daemon's answer"

# the real answer, recorded once
start_daemon
curl -sf --unix-socket "$SOCK" http://agent/v1/status > "$T/status.json" || fail "GET /v1/status"
stop_daemon
rm -f "$SOCK"
FAKE=$T/fake.sock

cat > "$T/listener.py" <<'PY'
import os, socket, sys, time
mode, path, delay, answer, ready = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
body = open(answer, "rb").read()
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
fillers = []
if mode in ("full", "full-forever"):
    srv.listen(0)
    # fill the queue: non-blocking connects until the kernel says EAGAIN
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.setblocking(False)
        try:
            c.connect(path)
        except BlockingIOError:
            c.close()
            break
        fillers.append(c)
        if len(fillers) > 64:
            sys.exit("the listen queue never filled")
open(ready, "w").write("%d fillers\n" % len(fillers))
if mode in ("never", "full-forever"):
    time.sleep(60)
    sys.exit(0)
time.sleep(delay)
if mode == "late":
    srv.listen(8)
for c in fillers:  # their queued connections now read as closed at once
    c.close()
served = 0
srv.settimeout(20)
while served < 1:
    conn, _ = srv.accept()
    conn.settimeout(5)
    req = b""
    while b"\r\n\r\n" not in req:
        d = conn.recv(4096)
        if not d:
            break
        req += d
    if b"\r\n\r\n" in req:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % len(body) + body)
        served += 1
        print("served", req.split(b"\r\n")[0].decode(), flush=True)
    conn.close()
PY

LPID=
stop_listener() {
	if [ -n "$LPID" ]; then
		kill "$LPID" 2>/dev/null
		wait "$LPID" 2>/dev/null
		LPID=
	fi
	rm -f "$FAKE" "$T/ready"
}
trap 'stop_listener; cleanup' EXIT INT TERM

# listener MODE DELAY: start the stand-in and wait until it is set up
listener() {
	rm -f "$FAKE" "$T/ready"
	python3 "$T/listener.py" "$1" "$FAKE" "$2" "$T/status.json" "$T/ready" > "$T/listener.out" 2>&1 &
	LPID=$!
	i=0
	until [ -f "$T/ready" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "listener $1 did not come up: $(cat "$T/listener.out")"
		kill -0 "$LPID" 2>/dev/null || fail "listener $1 exited: $(cat "$T/listener.out")"
		sleep 0.05
	done
}

ms() { echo $(($(date +%s%N) / 1000000)); }

# status_via: runs memgrantctl status on the stand-in; sets RC, MS (elapsed), OUT, ERR
status_via() {
	t0=$(ms)
	RC=0
	"$MEMGRANTCTL" --socket "$FAKE" status > "$T/out" 2> "$T/err" || RC=$?
	MS=$(($(ms) - t0))
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

# 1. refused at first (the socket exists, nothing listens), listening after 0.5 s
listener late 0.5
status_via
expect_eq "status while the agent starts listening: exit" "$RC" 0
echo "$OUT" | grep -q '^agent: *test-guest' || fail "status output: $OUT"
[ "$MS" -ge 400 ] || fail "status answered in $MS ms: it never waited for the listener"
wait "$LPID"; LPID=
grep -q 'served GET /v1/status' "$T/listener.out" || fail "listener: $(cat "$T/listener.out")"
echo "refused, then listening after 0.5 s: status answered in $MS ms"
stop_listener

# 2. the listen queue full (EAGAIN), drained after 0.5 s
listener full 0.5
status_via
expect_eq "status while the queue is full: exit" "$RC" 0
echo "$OUT" | grep -q '^agent: *test-guest' || fail "status output: $OUT"
[ "$MS" -ge 400 ] || fail "status answered in $MS ms: it never met the full queue ($(cat "$T/ready"))"
wait "$LPID"; LPID=
echo "queue full ($(cat "$T/ready")), drained after 0.5 s: status answered in $MS ms"
stop_listener

# 3. nothing ever listens
listener never 0
status_via
expect_eq "status with nothing listening: exit" "$RC" 1
echo "$ERR" | grep -qF "memgrantd is not running: nothing listens on $FAKE (connection refused for 2 s)" ||
	fail "nothing listening: $ERR"
[ "$MS" -ge 1800 ] && [ "$MS" -lt 6000 ] || fail "nothing listening: gave up after $MS ms, want about 2 s"
echo "nothing listens: exit 1 after $MS ms: $ERR"
stop_listener

# 4. the queue stays full
listener full-forever 0
status_via
expect_eq "status with the queue full: exit" "$RC" 1
echo "$ERR" | grep -qF "memgrantd at $FAKE is busy: its connection queue stayed full for 2 s; try again" ||
	fail "queue full: $ERR"
[ "$MS" -ge 1800 ] && [ "$MS" -lt 6000 ] || fail "queue full: gave up after $MS ms, want about 2 s"
echo "queue stays full: exit 1 after $MS ms: $ERR"
stop_listener

# 5. no socket at all: nothing to wait for
status_via
expect_eq "status without a socket: exit" "$RC" 1
echo "$ERR" | grep -qF "memgrantd is not running: no socket at $FAKE" || fail "no socket: $ERR"
[ "$MS" -lt 1000 ] || fail "no socket: took $MS ms, want no retry"
echo "no socket: exit 1 after $MS ms"
echo ok
