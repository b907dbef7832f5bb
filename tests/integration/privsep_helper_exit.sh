#!/bin/sh
# The helper never outlives the agent, and never runs beside another one:
#  1. memgrantd killed (SIGKILL) while the helper sleeps in a slow sim write:
#     the helper is gone at once (parent-death signal) and the write it was
#     doing never lands, so a restarted agent reads a kernel nobody changes
#     behind its back;
#  2. while something holds STATE_DIR/helper.lock (a helper left behind by
#     an earlier memgrantd), a new memgrantd says it waits and starts its
#     helper only once the lock is free.
. "$(dirname "$0")/lib.sh"

$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
start_daemon
$MEMGRANTCTL sim fault "$SIM" --latency 3000 > /dev/null || fail "sim fault"
helper=$(pgrep -P "$DAEMON_PID") || fail "no helper process under memgrantd $DAEMON_PID"
[ "$(echo "$helper" | wc -l)" -eq 1 ] || fail "more than one child of memgrantd: $helper"
before=$($MEMGRANTCTL --sim "$SIM" lsmem -J -a -o BLOCK,CONFIGURED) || fail "lsmem on the sim"

$CTL grant 128M > /dev/null || fail "grant not accepted"
sleep 0.5 # the helper is now inside the first 3 s write of the grant
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
# alive: it exists and is not a zombie waiting for whoever inherited it
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]; }
i=0
while alive "$helper"; do
	i=$((i + 1))
	[ $i -gt 20 ] && fail "the helper ($helper) still runs 1 s after memgrantd was killed"
	sleep 0.05
done
sleep 3 # longer than the write would have taken
after=$($MEMGRANTCTL --sim "$SIM" lsmem -J -a -o BLOCK,CONFIGURED) || fail "lsmem on the sim"
[ "$before" = "$after" ] || fail "the killed helper's write landed after memgrantd died"

# 2. the lock held by "an earlier helper" for 2 s
$MEMGRANTCTL sim fault "$SIM" --latency 0 > /dev/null || fail "sim fault"
mkdir -p "$T/state"
flock "$T/state/helper.lock" sleep 2 &
holder=$!
sleep 0.3
t0=$(date +%s%N)
start_daemon
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait "$holder"
grep -q "waiting for the helper of an earlier memgrantd to exit" "$T/daemon.log" ||
	fail "no line saying memgrantd waits for the earlier helper"
[ "$ms" -ge 1200 ] || fail "memgrantd answered after ${ms} ms, while the lock was held for 2 s"
wait_state local-1 applied
stop_daemon
echo ok
