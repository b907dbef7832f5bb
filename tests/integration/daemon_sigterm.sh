#!/bin/sh
# SIGTERM finishes the block operation in progress, exits 0, and the grant
# resumes at the next start.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --latency 200 > /dev/null || fail "sim fault"
start_daemon
$CTL grant 1G > /dev/null || fail "grant"
$CTL events > /dev/null 2>&1 &   # an open event stream must not delay the stop
sleep 0.7
t0=$(date +%s)
stop_daemon
[ $(( $(date +%s) - t0 )) -le 3 ] || fail "SIGTERM took too long"
grep -q "stopping after" "$T/daemon.log" || fail "no 'stopping after N of M blocks' line"
n=$($MEMGRANTCTL --sim "$SIM" lsmem -J -o BLOCK,STATE | python3 -c 'import json,sys
print(sum(1 for r in json.load(sys.stdin)["memory"] if r["state"]=="online"))')
# a block half done when SIGTERM came was finished, never left half done
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,CONFIGURED -r -n | grep -q 'offline yes' && fail "a block was left configured but offline"
start_daemon
wait_state local-1 applied
expect_eq "online bytes" "$(online_bytes)" 3221225472
expect_eq "owned" "$(jget "$($CTL grants --json)" grants.0.owned_blocks)" 8
stop_daemon
echo ok
