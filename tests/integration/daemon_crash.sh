#!/bin/sh
# kill -9 right after a grant was acknowledged, then restart: the grant
# completes exactly once (journal + step marker + reconciliation).
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --latency 150 > /dev/null || fail "sim fault"
start_daemon

$CTL grant 1G > "$T/ack" || fail "grant not acknowledged"
grep -q "accepted" "$T/ack" || fail "ack: $(cat "$T/ack")"
sleep 0.4   # somewhere in the middle of the second block
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
before=$(jget "$($MEMGRANTCTL --sim "$SIM" lsmem -J -o STATE,BLOCK)" memory.1.block 2>/dev/null || true)

start_daemon
wait_state local-1 applied partial failed
st=$($CTL grants --json)
expect_eq "state after restart" "$(jget "$st" grants.0.state)" applied
expect_eq "owned blocks" "$(jget "$st" grants.0.owned_blocks)" 8
expect_eq "online bytes" "$(online_bytes)" 3221225472
grep -q "was accepted\|was in_progress" "$T/daemon.log" || fail "the restart did not say it resumed the grant"

# the same message again is a replay: answered with the record, nothing applied
$MEMGRANTCTL sim fault "$SIM" --latency 0 > /dev/null
code=$(curl -s -o "$T/replay" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
	-d '{"type":"grant","id":"local-1","generation":1,"size":"1G"}' http://x/v1/grants)
expect_eq "replay status" "$code" 200
expect_eq "replay answer" "$(jget "$(cat "$T/replay")" state)" applied
sleep 0.3
expect_eq "online bytes after replay" "$(online_bytes)" 3221225472
stop_daemon
echo ok
