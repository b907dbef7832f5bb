#!/bin/sh
# The state folder on a 512 KiB tmpfs of a mount namespace of its own, filled
# while operations run (docs/journal.md, "When the journal cannot record"):
#   1. a grant runs (slow blocks), a second one is accepted behind it; the
#      disk fills: the first cannot record its result, the second never gets
#      its intent.  `wait` answers "stopped ..., not final" (never "rejected"
#      or "applied"), a new request is refused with ENOSPC and the state
#      folder, memgrantd stops with exit status 1;
#   2. the same for a revocation between its kernel steps and its result;
# after each, SIGKILL what is left, free the disk, start again: every answer
# given holds, both operations end applied, and the sim agrees.
. "$(dirname "$0")/../integration/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "skipped: needs root (a tmpfs in a mount namespace)"
command -v unshare >/dev/null 2>&1 || skip "skipped: no unshare"
if [ -z "${MEMGRANT_DISK_FULL_NS:-}" ]; then
	unshare -m --propagation private true 2>/dev/null || skip "skipped: no mount namespaces here"
	rm -rf "$T"
	trap - EXIT INT TERM
	MEMGRANT_DISK_FULL_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
cleanup() { # the tmpfs first: $T's removal would stop at it
	[ -z "$DAEMON_PID" ] || kill -KILL "$DAEMON_PID" 2>/dev/null
	umount -l "$T/state" 2>/dev/null
	rm -rf "$T"
}
mkdir -p "$T/state"
mount -t tmpfs -o size=512k,mode=0700 memgrant-full "$T/state" || fail "cannot mount a tmpfs on $T/state"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"

fill() { # the state folder's disk, full
	dd if=/dev/zero of="$T/state/filler" bs=4k > /dev/null 2>&1
	[ "$(df --output=avail "$T/state" | tail -n 1)" -eq 0 ] || fail "the tmpfs is not full"
}
unfill() { rm -f "$T/state/filler"; }
# online_count: the blocks online in the sim
online_count() {
	$MEMGRANTCTL --sim "$SIM" lsmem -a -J -o BLOCK,STATE | python3 -c 'import json,sys
print(sum(1 for r in json.load(sys.stdin)["memory"] if r["state"]=="online"))'
}
# follow ID: memgrantctl wait ID in the background, from before the disk fills
follow() {
	$CTL wait "$1" > "$T/wait-$1.out" 2>&1 &
	WAIT_PID=$!
	sleep 0.2 # its event stream is open
}
# expect_stopped ID: that wait ended on a non-final state naming ENOSPC
expect_stopped() {
	wait "$WAIT_PID"
	rc=$?
	out=$(cat "$T/wait-$1.out")
	[ $rc -eq 1 ] || fail "wait $1 exited $rc: $out"
	case $out in
	*"$1 stopped "*"not final"*"$T/state cannot record"*"No space left on device"*) ;;
	*) fail "wait $1 said: $out" ;;
	esac
}
# expect_exit: memgrantd stops by itself, status 1, one line saying why
expect_exit() {
	i=0
	while kill -0 "$DAEMON_PID" 2>/dev/null; do
		i=$((i + 1)); [ $i -gt 300 ] && fail "memgrantd still runs 30 s after the journal failed"; sleep 0.1
	done
	wait "$DAEMON_PID"
	rc=$?
	DAEMON_PID=
	[ $rc -eq 1 ] || fail "memgrantd exited $rc after the journal failed"
	grep -q "the journal in $T/state cannot record (No space left on device): stopping with exit status 1" \
		"$T/daemon.log" || fail "no line saying why memgrantd stopped"
}

# 1. a grant's result and a queued grant's intent: its four blocks take
# 8 s, time for the disk to fill and for the grants below to be refused
# on a loaded machine and a sanitizer build (with 400 ms a write, the
# grant once recorded its result first)
$MEMGRANTCTL sim fault "$SIM" --latency 1000 > /dev/null || fail "sim fault"
start_daemon
$CTL grant 512M > /dev/null || fail "grant local-1"
$CTL grant 256M > /dev/null || fail "grant local-2"
follow local-1
i=0
while [ "$(online_count)" -le 16 ]; do
	i=$((i + 1)); [ $i -gt 300 ] && fail "the grant brought no block online"; sleep 0.1
done
fill
# a record that fits in the journal's last page needs no new space: grants
# of one block are accepted until one needs it, and that one is refused
n=3
while out=$($CTL grant 128M 2>&1); do
	n=$((n + 1))
	[ $n -le 12 ] || fail "12 grants accepted on a full disk"
done
case $out in
*"cannot record local-$n in the journal in $T/state: No space left on device"*"nothing was done"*) ;;
*) fail "a grant on a full disk was refused with: $out" ;;
esac
expect_stopped local-1
expect_exit
[ "$(online_count)" -eq 20 ] || fail "$(online_count) blocks online after local-1 stopped, want 20"
unfill
start_daemon
wait_state local-1 applied
wait_state local-2 applied
k=3 # not i: wait_state counts its tries in i
while [ $k -lt $n ]; do # accepted behind them: recorded, and they run
	wait_state local-$k applied
	k=$((k + 1))
done
$CTL grants --json | grep -q "\"local-$n\"" && fail "the refused local-$n is recorded"
online_want=$((22 + n - 3)) # not want: wait_state sets it
expect_eq "online blocks" "$(online_count)" $online_want
expect_eq "online bytes" "$(online_bytes)" $((online_want << 27))

# 2. a revocation between its kernel steps and its result
r=local-$n # the refused grant's id was never recorded: it is given again
$CTL revoke 384M --id $r > /dev/null || fail "revoke $r"
follow $r
i=0
while [ "$(online_count)" -ge $online_want ]; do
	i=$((i + 1)); [ $i -gt 300 ] && fail "the revocation took no block"; sleep 0.1
done
fill
# the revocation's result needs a new page of the journal: it cannot be
# recorded (its report names every block, the journal's last page is full)
expect_stopped $r
expect_exit
[ "$(online_count)" -eq $((online_want - 3)) ] || fail "$(online_count) blocks online after $r stopped, want $((online_want - 3))"
unfill
start_daemon
wait_state $r applied
expect_eq "online blocks" "$(online_count)" $((online_want - 3))
expect_eq "revoked" "$(jget "$($CTL grants $r --json)" applied_bytes)" $((384 << 20))
owned=$($CTL grants --json | python3 -c 'import json,sys
print(sum(g.get("owned_blocks") or 0 for g in json.load(sys.stdin)["grants"]))')
expect_eq "owned blocks" "$owned" $((online_want - 3 - 16))
stop_daemon
echo ok
