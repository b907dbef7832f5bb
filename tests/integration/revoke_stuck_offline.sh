#!/bin/sh
# A revocation whose offline migrates forever answers within its budget
# (W6 as Linux does it: only a fatal signal ends the migration, so the helper
# writes the offline from a child it kills at the deadline;
# docs/kernel-rules.md, "W6 and signals").  The sim's offline sleeps through
# every signal its writer catches, as the kernel's does.
#  baseline: the same revocation with the block refusing (EBUSY) takes the
#            budget and ends; measured here, in this run, on this machine;
#  stuck:    the offline takes 10 minutes; the revocation must end as soon
#            as the baseline did (plus a little), failed with EINTR, the
#            block online, and the helper with no child left behind;
#  killed:   memgrantd killed (SIGKILL) during such an offline: the helper
#            and the offline's writer, its child, are gone at once
#            (parent-death signals), nothing left migrating.
. "$(dirname "$0")/lib.sh"

$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
REVOKE_BUDGET=3s
start_daemon
helper=$(pgrep -P "$DAEMON_PID") || fail "no helper process under memgrantd $DAEMON_PID"
$CTL grant 128M --id given --wait > /dev/null || fail "grant 128M"
block=$(jget "$($CTL grants given --json)" blocks.0.block)

ms_now() { echo $(( $(date +%s%N) / 1000000 )); }
# children KIND: the helper's children, as /proc lists them
children() { cat /proc/"$helper"/task/*/children 2>/dev/null | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }
# revoke ID LIMIT_MS: revokes 128M in the background, waits for the answer at
# most LIMIT_MS; sets took (ms) and rc
revoke() {
	t0=$(ms_now)
	$CTL revoke 128M --id "$1" --wait > "$T/$1.out" 2> "$T/$1.err" &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		[ $(( $(ms_now) - t0 )) -gt "$2" ] &&
			fail "revocation $1 still without an answer after $2 ms (budget 3 s): $(children) $(cat "$T/$1.err")"
		sleep 0.05
	done
	rc=0
	wait $pid || rc=$?
	took=$(( $(ms_now) - t0 ))
}

# baseline: the budget runs out on a busy block
$MEMGRANTCTL sim fault "$SIM" --offline-ebusy "$block" > /dev/null || fail "sim fault --offline-ebusy"
revoke base 60000
base=$took
expect_eq "baseline exit (failed)" "$rc" 1
expect_eq "baseline error" "$(jget "$($CTL grants base --json)" blocks.0.error.code)" EBUSY

# stuck: an offline that would take 10 minutes
$MEMGRANTCTL sim fault "$SIM" --latency 600000 > /dev/null || fail "sim fault --latency"
revoke stuck $((base + 15000))
stuck=$took
echo "budget 3000 ms: busy block answered in $base ms, stuck offline in $stuck ms"
[ "$stuck" -le $((base + 2000)) ] ||
	fail "the stuck offline's revocation took $stuck ms, the busy block's $base ms (budget 3 s)"
expect_eq "stuck exit (failed)" "$rc" 1
g=$($CTL grants stuck --json)
expect_eq "stuck state" "$(jget "$g" state)" failed
expect_eq "stuck block" "$(jget "$g" blocks.0.block)" "$block"
expect_eq "stuck error" "$(jget "$g" blocks.0.error.code)" EINTR
grep -q "time budget ran out" "$T/stuck.out" "$T/stuck.err" ||
	fail "the answer does not say the budget ran out: $(cat "$T/stuck.out" "$T/stuck.err")"
# the kernel (the sim) has the block online again, and so has the agent
$MEMGRANTCTL --sim "$SIM" lsmem -a -o BLOCK,STATE -r -n > "$T/lsmem"
grep -qx "$block online" "$T/lsmem" || fail "block $block is not online: $(cat "$T/lsmem")"
i=0
until [ "$(jget "$($CTL grants given --json)" blocks.0.state)" = online ]; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "the agent does not see block $block online: $($CTL grants given --json)"
	sleep 0.05
done
# the offline's writer is gone and reaped: the helper has no child, not even a zombie
expect_eq "the helper's children" "$(children)" ""
kill -0 "$helper" || fail "the helper is gone"

# killed: the writer never outlives the helper, nor the helper memgrantd
$CTL revoke 128M --id orphan > /dev/null || fail "revoke not accepted"
i=0
until writer=$(children) && [ -n "$writer" ]; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "no offline writer under the helper"
	sleep 0.05
done
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
# alive: it exists and is not a zombie waiting for whoever inherited it
alive() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" != Z ]; }
i=0
while alive "$helper" || alive "$writer"; do
	i=$((i + 1))
	[ $i -gt 40 ] && fail "2 s after memgrantd was killed: helper $helper or its offline writer $writer still runs"
	sleep 0.05
done
$MEMGRANTCTL sim fault "$SIM" > /dev/null || fail "sim fault (none)"
$MEMGRANTCTL --sim "$SIM" lsmem -a -o BLOCK,STATE -r -n > "$T/lsmem"
grep -qx "$block online" "$T/lsmem" || fail "block $block is not online after the kill: $(cat "$T/lsmem")"
echo ok
