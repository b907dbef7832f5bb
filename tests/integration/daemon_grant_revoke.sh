#!/bin/sh
# memgrantd on the sim: a grant becomes online memory, a revocation gives it
# back, and the journal, lsmem and metrics agree at each step.
. "$(dirname "$0")/lib.sh"
start_daemon

expect_eq "online before" "$(online_bytes)" 2147483648
$CTL grant 1G --wait > "$T/grant.out" || fail "grant 1G --wait exited $?"
grep -q "applied, 1G of 1G" "$T/grant.out" || fail "grant summary: $(cat "$T/grant.out")"
grep -q "memmap_on_memory=" "$T/grant.out" || fail "no memmap decision in the summary"
grep -q "zone=" "$T/grant.out" || fail "no zone decision in the summary"
expect_eq "online after grant" "$(online_bytes)" 3221225472

st=$($CTL grants --json)
expect_eq "grant state" "$(jget "$st" grants.0.state)" applied
expect_eq "grant blocks owned" "$(jget "$st" grants.0.owned_blocks)" 8
expect_eq "first block" "$(jget "$st" grants.0.blocks.0.block)" 16
expect_eq "first block zone" "$(jget "$st" grants.0.blocks.0.zone)" Movable

# the sim's tree says the same as the agent (lsmem through the sysfs view)
$MEMGRANTCTL --sim "$SIM" lsmem -o RANGE,BLOCK,STATE,ZONES,CONFIGURED -r -n > "$T/lsmem"
grep -qx '0x0000000080000000-0x00000000bfffffff 16-23 online Movable yes' "$T/lsmem" || fail "lsmem: $(cat "$T/lsmem")"

# memgrantctl lsmem through the daemon shows the same machine
$CTL lsmem -a -J > "$T/via-daemon.json" || fail "lsmem through the daemon"
$MEMGRANTCTL --sim "$SIM" lsmem -a -J > "$T/direct.json"
cmp -s "$T/via-daemon.json" "$T/direct.json" || fail "lsmem via the daemon differs from the sim's own"
# without --socket: the daemon when its socket is there (MEMGRANT_SOCKET), no note
MEMGRANT_SOCKET=$SOCK $MEMGRANTCTL lsmem -a -J > "$T/default.json" 2> "$T/default.err" || fail "lsmem without --socket"
cmp -s "$T/default.json" "$T/direct.json" || fail "lsmem without --socket did not ask the daemon"
[ ! -s "$T/default.err" ] || fail "lsmem through the daemon wrote to stderr: $(cat "$T/default.err")"

$CTL revoke 512M --wait > "$T/revoke.out" || fail "revoke 512M exited $?"
grep -q "applied, 512M of 512M" "$T/revoke.out" || fail "revoke summary: $(cat "$T/revoke.out")"
expect_eq "online after revoke" "$(online_bytes)" 2684354560
# newest first: blocks 20-23 went back to standby
$MEMGRANTCTL --sim "$SIM" lsmem -o RANGE,BLOCK,STATE,CONFIGURED -r -n > "$T/lsmem"
grep -qx '0x00000000a0000000-0x00000000ffffffff 20-31 offline no' "$T/lsmem" || fail "lsmem after revoke: $(cat "$T/lsmem")"

# revoking the rest of the grant by id
$CTL revoke --grant local-1 --wait > /dev/null || fail "revoke --grant local-1 exited $?"
expect_eq "online after revoking the grant" "$(online_bytes)" 2147483648

# a rejection reports what was asked for and why
$CTL grant 4G --json > "$T/rej" 2>/dev/null && fail "a grant of 4G with 2G standby was not refused"
expect_eq "rejected state" "$(jget "$(cat "$T/rej")" state)" rejected
expect_eq "rejected requested_bytes" "$(jget "$(cat "$T/rej")" requested_bytes)" 4294967296
expect_eq "rejected code" "$(jget "$(cat "$T/rej")" error.code)" ENOSPC

m=$($CTL --socket "$SOCK" status --json)
expect_eq "granted bytes" "$(jget "$m" memory.granted_bytes)" 0
curl -s --unix-socket "$SOCK" http://x/metrics > "$T/metrics"
grep -q 'memgrant_requests_total{kind="grant",outcome="applied"} 1' "$T/metrics" || fail "metrics: grant count"
grep -q 'memgrant_requests_total{kind="grant",outcome="rejected"} 1' "$T/metrics" || fail "metrics: rejected count"
grep -q 'memgrant_requests_total{kind="revoke",outcome="applied"} 2' "$T/metrics" || fail "metrics: revoke count"
grep -q '^memgrant_block_operation_seconds_count 16' "$T/metrics" || fail "metrics: 16 block operations expected"
# every kernel write counted by step: 8 blocks up, 8 down; and memmap: the
# sim's standby blocks start with memmap_on_memory on, the policy chose off,
# so each of the 8 got a memmap write before its configure
for step in memmap_on_memory configure online offline deconfigure; do
	grep -q "^memgrant_executor_steps_total{step=\"$step\",result=\"ok\"} 8\$" "$T/metrics" ||
		fail "metrics: 8 $step steps expected: $(grep executor_steps "$T/metrics")"
done
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,MEMMAP-ON-MEMORY -r -n > "$T/lsmem"
grep -qx '0-23 no' "$T/lsmem" && grep -qx '24-31 yes' "$T/lsmem" ||
	fail "memmap of the granted blocks not set off: $(cat "$T/lsmem")"
stop_daemon

# a policy that sets memmap_on_memory (policy.memmap_on_memory: always): the
# memmap step runs for the blocks whose memmap is off (16-17, from the grant
# above) and is counted; the counters start again with the new process
sed -i 's/^policy:$/policy:\n  memmap_on_memory: always/' "$T/memgrant.yaml"
grep -q '^  memmap_on_memory: always$' "$T/memgrant.yaml" || fail "could not set policy.memmap_on_memory"
start_daemon
$CTL grant 256M --wait > "$T/grant.out" || fail "grant 256M with memmap always: $(cat "$T/grant.out")"
grep -q 'memmap_on_memory=on' "$T/grant.out" || fail "policy always did not turn memmap on: $(cat "$T/grant.out")"
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,MEMMAP-ON-MEMORY -r -n > "$T/lsmem"
grep -qx '16-17 online yes' "$T/lsmem" || fail "memmap not on in the sim: $(cat "$T/lsmem")"
curl -s --unix-socket "$SOCK" http://x/metrics > "$T/metrics"
for step in memmap_on_memory configure online; do
	grep -q "^memgrant_executor_steps_total{step=\"$step\",result=\"ok\"} 2\$" "$T/metrics" ||
		fail "metrics: 2 $step steps expected: $(grep executor_steps "$T/metrics")"
done
stop_daemon
echo ok
