#!/bin/sh
# kill -9 in the middle of grants and revocations of every kind: after the
# restart each one finishes with exactly what it asked for, nothing twice.
# Also: promised blocks are not promised twice; local ids never collide.
. "$(dirname "$0")/lib.sh"
G=134217728
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
start_daemon

crash_and_restart() { # seconds
	sleep "$1"
	kill -KILL "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	start_daemon
}

# a grant by blocks, interrupted after about two blocks
$MEMGRANTCTL sim fault "$SIM" --latency 150 > /dev/null
$CTL grant --blocks 16-19 --id by-blocks > /dev/null || fail "grant by blocks"
crash_and_restart 0.45
wait_state by-blocks applied partial failed
st=$($CTL grants --json)
expect_eq "grant by blocks" "$(jget "$st" grants.0.state)" applied
expect_eq "grant by blocks: owned" "$(jget "$st" grants.0.owned_blocks)" 4
expect_eq "online after grant by blocks" "$(online_bytes)" $((20 * G))

# a grant by size, so there is something to revoke by size
$MEMGRANTCTL sim fault "$SIM" --latency 0 > /dev/null
$CTL grant 512M --id more --wait > /dev/null || fail "grant 512M"
expect_eq "online" "$(online_bytes)" $((24 * G))

# a revocation by size, interrupted after about two blocks
$MEMGRANTCTL sim fault "$SIM" --latency 150 > /dev/null
$CTL revoke 512M --id rv-size > /dev/null || fail "revoke by size"
crash_and_restart 0.45
wait_state rv-size applied partial failed
st=$($CTL grants --json)
expect_eq "revoke by size" "$(jget "$st" grants.2.state)" applied
expect_eq "revoke by size: bytes" "$(jget "$st" grants.2.applied_bytes)" $((4 * G))
expect_eq "online after revoke by size (exactly 512M back)" "$(online_bytes)" $((20 * G))

# a revocation by blocks, interrupted
$CTL revoke --blocks 16-19 --id rv-blocks > /dev/null || fail "revoke by blocks"
crash_and_restart 0.45
wait_state rv-blocks applied partial failed rejected
st=$($CTL grants --json)
expect_eq "revoke by blocks" "$(jget "$st" grants.3.state)" applied
expect_eq "online after revoke by blocks" "$(online_bytes)" $((16 * G))
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,CONFIGURED -r -n | grep -q 'offline yes' &&
	fail "a block was left configured but offline"

# two queued grants never get the same block
$MEMGRANTCTL sim fault "$SIM" --latency 300 > /dev/null
$CTL grant --blocks 24 --id first > /dev/null || fail "first grant of block 24"
code=$(curl -s -o "$T/second" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
	-d '{"type":"grant","id":"second","blocks":[24]}' http://x/v1/grants)
expect_eq "second grant of a promised block" "$code" 409
grep -q "block 24" "$T/second" || fail "the rejection does not name block 24: $(cat "$T/second")"
wait_state first applied

# an operator's id that looks like an automatic one does not block later grants
$MEMGRANTCTL sim fault "$SIM" --latency 0 > /dev/null
next=$(( $(jget "$($CTL grants --json)" grants.6.generation 2>/dev/null || echo 0) ))
$CTL grant 128M --id "local-$((next + 1))" --wait > /dev/null || fail "grant with an id like local-N"
$CTL grant 128M --wait > /dev/null || fail "a plain grant after an operator took local-N"
$CTL grant 128M --wait > /dev/null || fail "a second plain grant"

# a local generation far ahead is refused, the local numbering stays usable
code=$(curl -s -o "$T/far" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
	-d '{"type":"grant","id":"far","generation":9007199254740991,"size":"128M"}' http://x/v1/grants)
expect_eq "a generation far ahead" "$code" 400
$CTL grant 128M --wait > /dev/null || fail "a plain grant after a refused far generation"
stop_daemon
echo ok
