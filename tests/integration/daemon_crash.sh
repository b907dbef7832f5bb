#!/bin/sh
# kill -9 in the middle of a grant, then restart: the grant completes
# exactly once (the journal's intent, written before the first kernel
# write, names the blocks; recovery reads from the kernel what became of
# them and the grant resumes; docs/journal.md). The kill comes once the
# first block of the grant is online (read from the sim, no sleep), so the
# grant is partway; each kernel write takes 1 s in the sim.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --latency 1000 > /dev/null || fail "sim fault"
start_daemon

$CTL grant 1G > "$T/ack" || fail "grant not acknowledged"
grep -q "accepted" "$T/ack" || fail "ack: $(cat "$T/ack")"
# online blocks, as the sim says
online_blocks() {
	$MEMGRANTCTL --sim "$SIM" lsmem -a -J -o BLOCK,STATE | python3 -c 'import json,sys
print(sum(1 for r in json.load(sys.stdin)["memory"] if r["state"]=="online"))'
}
i=0
while [ "$(online_blocks)" -le 16 ]; do
	i=$((i + 1)); [ $i -gt 300 ] && fail "the grant brought no block online"; sleep 0.1
done
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
at_kill=$(online_blocks)
[ "$at_kill" -gt 16 ] && [ "$at_kill" -lt 24 ] || fail "the kill did not come in the middle of the grant: $at_kill blocks online"

start_daemon
wait_state local-1 applied partial failed
st=$($CTL grants --json)
expect_eq "state after restart" "$(jget "$st" grants.0.state)" applied
expect_eq "owned blocks" "$(jget "$st" grants.0.owned_blocks)" 8
expect_eq "online bytes" "$(online_bytes)" 3221225472
grep -q "was accepted\|was in_progress" "$T/daemon.log" || fail "the restart did not say it resumed the grant"
grep -q "local-1: its bring-up of 8 blocks was interrupted" "$T/daemon.log" || fail "recovery did not read the open intent"

# the same message again is a replay: answered with the record, nothing applied
$MEMGRANTCTL sim fault "$SIM" --latency 0 > /dev/null
code=$(curl -s -o "$T/replay" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
	-d '{"type":"grant","id":"local-1","generation":1,"size":"1G"}' http://x/v1/grants)
expect_eq "replay status" "$code" 200
expect_eq "replay answer" "$(jget "$(cat "$T/replay")" state)" applied
# answered from the record: nothing queued or running behind the answer
st=$($CTL status --json)
expect_eq "queued after replay" "$(jget "$st" queued)" 0
expect_eq "running after replay" "$(jget "$st" running)" null
expect_eq "online bytes after replay" "$(online_bytes)" 3221225472
stop_daemon
echo ok
