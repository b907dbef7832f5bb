#!/bin/sh
# Kernel work runs on the executor thread: while a block is going offline
# (the sim holds the write for 8 s), the API answers, and what it answers is
# the revocation still running with the write still in progress. Were the
# API served by the thread that writes, status would be answered only after
# the write, and the block would be offline by then. No clock is read: the
# order of what the sim's tree and the API say is the test.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
start_daemon
$CTL grant 256M --wait > /dev/null || fail "grant"
$MEMGRANTCTL sim fault "$SIM" --latency 8000 > /dev/null || fail "sim fault"
$CTL revoke 128M > /dev/null || fail "revoke not accepted"

# the blocks the sim's tree (default FILE.tree) shows going offline
going_offline() {
	grep -l "going-offline" "$SIM.tree"/sys/devices/system/memory/memory*/state 2>/dev/null |
		sed 's|.*/memory\([0-9]*\)/state|\1|'
}
i=0
until [ -n "$(going_offline)" ]; do
	i=$((i + 1)); [ $i -gt 300 ] && fail "no block went offline in the sim's tree"; sleep 0.1
done
blk=$(going_offline)
$CTL status > "$T/status" || fail "status failed while offlining"
grep -q "running: *revoke local-2" "$T/status" || fail "status does not show the running revocation: $(cat "$T/status")"
expect_eq "block still going offline after status answered" "$(going_offline)" "$blk"
$CTL grants --json > "$T/grants" || fail "grants failed while offlining"
state=$(python3 -c 'import json,sys
print([g["state"] for g in json.load(sys.stdin)["grants"] if g["id"] == "local-2"][0])' < "$T/grants")
expect_eq "revocation state while its block is going offline" "$state" in_progress
wait_state local-2 applied
[ -z "$(going_offline)" ] || fail "a block stayed going-offline"
stop_daemon
echo ok
