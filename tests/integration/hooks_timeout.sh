#!/bin/sh
# A hook that never ends is killed at its timeout (with the processes it
# started), and grants keep being applied while it hangs.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
cat > "$T/hang" <<SH
#!/bin/sh
sleep 3600 &
echo \$! >> "$T/pids"
wait
SH
chmod 0755 "$T/hang"
write_config "hooks:" "  - {events: [grant.accepted, grant.applied], exec: $T/hang, timeout: 1s}"
start_daemon

start=$(date +%s)
for i in 1 2 3 4 5 6; do
	$CTL grant 128M --id g-$i --wait > /dev/null || fail "g-$i not applied while hooks hang"
done
took=$(( $(date +%s) - start ))
[ "$took" -le 5 ] || fail "6 grants took ${took}s with hanging hooks"
expect_eq "online after 6 grants" "$(online_bytes)" $((2147483648 + 6 * 134217728))

# 12 runs, 4 at a time, 1s each: all killed within about 3s
i=0
while [ "$(grep -c 'timed out after 1.0s: killed' "$T/daemon.log")" -lt 12 ]; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail "hung hooks were not all killed: $(grep -c 'timed out' "$T/daemon.log") of 12"
	sleep 0.1
done
sleep 0.2
for pid in $(cat "$T/pids"); do
	if [ -e /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status 2>/dev/null; then
		fail "process $pid started by a killed hook still runs"
	fi
done
stop_daemon
echo ok
