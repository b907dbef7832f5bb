#!/bin/sh
# A grant whose third block fails to configure (EIO from the hypervisor, C7):
# the failed block is rolled back, the others are brought up, the grant ends
# "partial" with the failing block and its errno in the status.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --configure-eio 18 > /dev/null || fail "sim fault"
start_daemon

$CTL grant 1G --wait > "$T/out"
rc=$?
expect_eq "exit code of a partial grant" "$rc" 64
st=$($CTL grants --json)
expect_eq "state" "$(jget "$st" grants.0.state)" partial
expect_eq "applied bytes" "$(jget "$st" grants.0.applied_bytes)" $((7 * 134217728))
expect_eq "third block" "$(jget "$st" grants.0.blocks.2.block)" 18
expect_eq "third block errno" "$(jget "$st" grants.0.blocks.2.error.code)" EIO
expect_eq "third block configured" "$(jget "$st" grants.0.blocks.2.configured)" False
expect_eq "grant error code" "$(jget "$st" grants.0.error.code)" EIO
grep -q "block 18: configure failed" "$T/out" || fail "summary lacks the failing block: $(cat "$T/out")"
# block 18 is standby again, 16,17,19-23 online
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,CONFIGURED -r -n > "$T/lsmem"
grep -qx '18 offline no' "$T/lsmem" || fail "block 18 not back to standby: $(cat "$T/lsmem")"
grep -qx '19-23 online yes' "$T/lsmem" || fail "blocks 19-23: $(cat "$T/lsmem")"

# a grant where every block fails is "failed", exit 1
$MEMGRANTCTL sim fault "$SIM" --configure-eio 18,24 > /dev/null
$CTL grant --blocks 18,24 --wait > /dev/null
expect_eq "exit code of a failed grant" "$?" 1
expect_eq "state" "$(jget "$($CTL grants --json)" grants.1.state)" failed
stop_daemon
echo ok
