#!/bin/sh
# memgrantd's sysfs backend on a tree that behaves like the kernel's: a sim
# served over FUSE (tests/tools/simfs), where a block's devices directory
# appears and its files change inside the file system, so no inotify event
# tells the agent (on a real kernel uevents do; on such a tree only the
# agent's own writes and reads are news).  A grant and its revocation must
# change the kernel's blocks, read back from the sim itself, not only the
# agent's table: a revocation once answered "applied" here without a write,
# its blocks' rows left from start-up saying they were down already.
. "$(dirname "$0")/lib.sh"
SIMFS=${MEMGRANT_SIMFS:-$BUILD/tests/tools/simfs}
[ -x "$SIMFS" ] || skip "skipped: no $SIMFS"
[ -e /dev/fuse ] || skip "skipped: no /dev/fuse"
command -v fusermount3 >/dev/null 2>&1 || skip "skipped: no fusermount3 (apt-get install fuse3)"
MNT=$T/mnt
mkdir "$MNT"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 1G --block-size 128M >/dev/null || fail "sim init"
"$SIMFS" "$SIM" "$MNT" 2> "$T/simfs.err"
case $? in
0) ;;
77) skip "skipped: simfs built without libfuse3" ;;
4) skip "skipped: FUSE mounts refused here: $(tail -1 "$T/simfs.err")" ;;
*) fail "simfs did not mount: $(cat "$T/simfs.err")" ;;
esac
unmount() { fusermount3 -u "$MNT" 2>/dev/null || true; }
trap 'kill -KILL "$DAEMON_PID" 2>/dev/null; sleep 0.2; unmount; rm -rf "$T"' EXIT INT TERM
cat > "$T/memgrant.yaml" <<YAML
agent:
  id: test-guest
  state_dir: $T/state
  api_socket: $SOCK
  log_level: debug
  user: $(id -un)
  api_group: $(id -gn)
backend:
  type: sysfs
  root: $MNT
policy:
  revoke_budget: 10s
YAML
start_daemon

# the kernel's blocks (the sim's own file, not through the agent)
kernel() { $MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,CONFIGURED -r -n; }
$CTL grant 256M --id g-1 --wait > "$T/grant.out" || fail "grant: $(cat "$T/grant.out")"
grep -q "applied, 256M of 256M" "$T/grant.out" || fail "grant summary: $(cat "$T/grant.out")"
kernel > "$T/k1"
grep -qx '0-17 online yes' "$T/k1" || fail "the kernel after the grant: $(cat "$T/k1")"
# the agent's table agrees, owner included
st=$($CTL lsmem -o BLOCK,STATE -r -n)
echo "$st" | grep -qx '0-17 online' || fail "the agent's table after the grant: $st"
# and in every column the kernel has: the rows the agent re-read after its
# writes (the files each write changes) are what a whole read finds
COLS=BLOCK,STATE,REMOVABLE,NODE,ZONES,CONFIGURED,MEMMAP-ON-MEMORY
same_as_kernel() {
	a=$($CTL lsmem -o $COLS -r -n) k=$($MEMGRANTCTL --sim "$SIM" lsmem -o $COLS -r -n)
	[ "$a" = "$k" ] || fail "$1: the agent's table differs from the kernel's: agent:
$a
kernel:
$k"
}
same_as_kernel "after the grant"

$CTL revoke 256M --id r-1 --wait > "$T/revoke.out" || fail "revoke: $(cat "$T/revoke.out")"
grep -q "applied, 256M of 256M" "$T/revoke.out" || fail "revoke summary: $(cat "$T/revoke.out")"
kernel > "$T/k2"
grep -qx '0-15 online yes' "$T/k2" && grep -qx '16-23 offline no' "$T/k2" ||
	fail "the kernel after the revocation (it said applied): $(cat "$T/k2")"
same_as_kernel "after the revocation"
online=$(jget "$($CTL status --json)" memory.online_bytes)
expect_eq "online after the revocation" "$online" 2147483648
stop_daemon
echo ok
