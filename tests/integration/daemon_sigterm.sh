#!/bin/sh
# test-runner: alone (it stops the daemon partway through a grant: a loaded machine may finish the grant first)
# SIGTERM finishes the block operation in progress and stops the grant
# there, exits 0, logs how many blocks were done (the count the sim shows),
# and the grant resumes at the next start.
# The SIGTERM is sent once the first block of the grant is online (read from
# the sim, no sleep): the grant is then certainly partway.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --latency 2000 > /dev/null || fail "sim fault"
start_daemon
$CTL grant 1G > /dev/null || fail "grant"
$CTL events > /dev/null 2>&1 &   # an open event stream must not delay the stop
EV_PID=$!

# online blocks, as the sim says
online_blocks() {
	$MEMGRANTCTL --sim "$SIM" lsmem -a -J -o BLOCK,STATE | python3 -c 'import json,sys
print(sum(1 for r in json.load(sys.stdin)["memory"] if r["state"]=="online"))'
}
i=0
while [ "$(online_blocks)" -le 16 ]; do
	i=$((i + 1)); [ $i -gt 300 ] && fail "the grant brought no block online"; sleep 0.1
done
at_term=$(online_blocks)
stop_daemon
kill "$EV_PID" 2>/dev/null
n=$(online_blocks)
# the 16 blocks of boot memory and part of the grant of 8: what was online
# at SIGTERM stays, the grant does not run to its end
[ "$n" -ge "$at_term" ] || fail "$n blocks online after the stop, $at_term before it"
[ "$n" -lt 24 ] || fail "the grant ran to its end instead of stopping"
line=$(grep "stopping after" "$T/daemon.log") || fail "no 'stopping after N of M blocks' line"
case $line in
*"stopping after $((n - 16)) of 8 blocks"*) ;;
*) fail "the log says '$line' but $((n - 16)) blocks of the grant are online" ;;
esac
# a block half done when SIGTERM came was finished, never left half done
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,CONFIGURED -r -n | grep -q 'offline yes' && fail "a block was left configured but offline"
start_daemon
wait_state local-1 applied
expect_eq "online bytes" "$(online_bytes)" 3221225472
expect_eq "owned" "$(jget "$($CTL grants --json)" grants.0.owned_blocks)" 8
stop_daemon
echo ok
