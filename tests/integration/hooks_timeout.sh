#!/bin/sh
# Hooks never hold up grants, and a hook that outlives its timeout is killed
# with the processes it started. No wall-clock window: the order of events
# is the test.
# 1. Hooks that block until the test releases them (timeout 1 h): six grants
#    are applied while every run started so far is still blocked.
# 2. Hooks that never end (timeout 1 s): each run is logged as killed at its
#    timeout, and the processes it started are gone after it.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"

# until: poll CONDITION (a shell command) with a hang guard of 60 s, not a speed target
until_true() {
	i=0
	until eval "$1"; do
		i=$((i + 1)); [ $i -gt 600 ] && fail "$2"; sleep 0.1
	done
}

cat > "$T/block" <<SH
#!/bin/sh
echo started >> "$T/started"
while [ ! -e "$T/release" ]; do sleep 0.1; done
echo ended >> "$T/ended"
SH
chmod 0755 "$T/block"
write_config "hooks:" "  - {events: [grant.accepted, grant.applied], exec: $T/block, timeout: 1h}"
start_daemon
for i in 1 2 3 4 5 6; do
	$CTL grant 128M --id g-$i --wait > /dev/null || fail "g-$i not applied while hooks block"
done
expect_eq "online after 6 grants" "$(online_bytes)" $((2147483648 + 6 * 134217728))
until_true '[ -s "$T/started" ]' "no hook started"
[ -e "$T/ended" ] && fail "a hook ended before the test released it: the grants did not run beside them"
touch "$T/release"
# 12 runs (two events, six grants), at most 4 at a time: all end once released
until_true '[ "$(wc -l < "$T/ended" 2>/dev/null || echo 0)" -ge 12 ]' "the released hooks did not all end"
stop_daemon

cat > "$T/hang" <<SH
#!/bin/sh
sleep 3600 &
echo \$! >> "$T/pids"
wait
SH
chmod 0755 "$T/hang"
rm -f "$T/memgrant.yaml" "$T/pids"
write_config "hooks:" "  - {events: [grant.applied], exec: $T/hang, timeout: 1s}"
start_daemon
for i in 7 8 9; do
	$CTL grant 128M --id g-$i --wait > /dev/null || fail "g-$i not applied while hooks hang"
done
until_true '[ "$(grep -c "timed out after 1.0s: killed" "$T/daemon.log")" -ge 3 ]' \
	"hung hooks were not all killed: $(grep -c 'timed out' "$T/daemon.log") of 3"
expect_eq "hook processes started" "$(wc -l < "$T/pids")" 3
gone() {
	for pid in $(cat "$T/pids"); do
		if [ -e /proc/$pid ] && ! grep -q '^State:.*Z' /proc/$pid/status 2>/dev/null; then
			return 1
		fi
	done
}
until_true gone "a process started by a killed hook still runs: $(cat "$T/pids")"
stop_daemon
echo ok
