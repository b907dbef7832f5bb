#!/bin/sh
# A revocation skips a block that will not go offline (EBUSY, W6) and takes
# the next one; when the busy block must go (revoke by grant), the budget
# runs out and the result is "partial" with the busy block named.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
REVOKE_BUDGET=2s
start_daemon
$CTL grant 512M --wait > /dev/null || fail "grant"
$MEMGRANTCTL sim fault "$SIM" --offline-ebusy 19 > /dev/null || fail "sim fault"

$CTL revoke 256M --wait > "$T/out" || fail "revoke 256M should be applied by skipping the busy block: $(cat "$T/out")"
st=$($CTL grants --json)
expect_eq "revoke state" "$(jget "$st" grants.1.state)" applied
expect_eq "busy block tried first" "$(jget "$st" grants.1.blocks.0.block)" 19
expect_eq "busy block errno" "$(jget "$st" grants.1.blocks.0.error.code)" EBUSY
expect_eq "busy block still online" "$(jget "$st" grants.1.blocks.0.state)" online
expect_eq "next block" "$(jget "$st" grants.1.blocks.1.block)" 18
expect_eq "bytes given back" "$(jget "$st" grants.1.applied_bytes)" 268435456
# grants ID lists the blocks done, and apart the busy one it skipped: a
# range never covers a block that was not done
$CTL grants local-2 > "$T/one" || fail "grants local-2"
grep -q '^  blocks: *2 of 2: 17-18 (not done: 19)$' "$T/one" || fail "grants ID blocks: $(cat "$T/one")"

start=$(date +%s)
$CTL revoke --grant local-1 --wait > "$T/out2"
rc=$?
took=$(( $(date +%s) - start ))
expect_eq "exit code of a partial revocation" "$rc" 64
st=$($CTL grants --json)
expect_eq "revoke state" "$(jget "$st" grants.2.state)" partial
grep -q "block 19" "$T/out2" || fail "summary does not name block 19: $(cat "$T/out2")"
$CTL grants local-3 > "$T/one" || fail "grants local-3"
grep -q '^  blocks: *1 of 2: 16 (not done: 19)$' "$T/one" || fail "grants ID of the partial revocation: $(cat "$T/one")"
[ "$took" -le 8 ] || fail "revocation took ${took}s with a 2s budget"
# busy blocks are retried with pauses (250 ms, 500 ms, then 1 s), not in a tight loop
tries=$(curl -s --unix-socket "$SOCK" http://x/metrics |
	sed -n 's/^memgrant_executor_steps_total{step="offline",result="EBUSY"} //p')
[ "${tries:-0}" -ge 2 ] && [ "${tries:-0}" -le 8 ] || fail "block 19 was tried ${tries:-0} times in 2+2 s of budget"
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE -r -n > "$T/lsmem"
grep -qx '19 online' "$T/lsmem" || fail "block 19 should still be online: $(cat "$T/lsmem")"
stop_daemon
echo ok
