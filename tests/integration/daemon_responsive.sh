#!/bin/sh
# Kernel work runs on the executor thread: while a block takes seconds to go
# offline, the API still answers at once.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
start_daemon
$CTL grant 256M --wait > /dev/null || fail "grant"
$MEMGRANTCTL sim fault "$SIM" --latency 4000 > /dev/null
$CTL revoke 128M > /dev/null || fail "revoke not accepted"
sleep 0.5
for i in 1 2 3; do
	t0=$(date +%s%N)
	$CTL status > "$T/status" || fail "status failed while offlining"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	[ "$ms" -lt 1000 ] || fail "status took ${ms}ms while a block was going offline"
done
grep -q "running: *revoke local-2" "$T/status" || fail "status does not show the running revocation: $(cat "$T/status")"
grep -q "going-offline" "$T/../$(basename "$SIM").tree/sys/devices/system/memory/memory17/state" 2>/dev/null ||
	grep -rq "going-offline" "$SIM.tree/sys/devices/system/memory/" || fail "no block is going-offline in the sim's tree"
wait_state local-2 applied
stop_daemon
echo ok
