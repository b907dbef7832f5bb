#!/bin/sh
# memgrantd says once at start which memory interface the kernel offers
# (C0: sys/firmware/memory present or not), and a grant that finds nothing
# to take says why there is nothing: no standby memory interface, or no
# standby blocks left.  On the sim with and without firmware, and on a
# sysfs-shaped tree without sys/firmware/memory whose blocks are all online.
. "$(dirname "$0")/lib.sh"

# once_in_log WANT: the daemon log has exactly one line matching WANT
once_in_log() {
	n=$(grep -c -- "$1" "$T/daemon.log")
	[ "$n" = 1 ] || fail "$n lines match '$1' in the daemon log, want 1"
}

# 1. the sim with sys/firmware/memory: standby memory
SIM_ONLINE=1G SIM_STANDBY=512M write_config
start_daemon
stop_daemon
once_in_log '^[0-9T:.-]*Z memgrantd: memory interface: sys/firmware/memory (s390 standby memory): 512M standby in 4 blocks for grants$'
start_daemon
$CTL grant 512M --id g-1 --wait > /dev/null || fail "g-1"
$CTL grant 128M --id g-2 --wait 2> "$T/err" && fail "g-2 granted with no standby left"
grep -q 'rejected: 128M requested, 0B standby available (no standby blocks left: every block the hypervisor offers is configured)$' "$T/err" ||
	fail "g-2: $(cat "$T/err")"
stop_daemon

# 2. the sim without it: blocks the kernel keeps offline
rm -rf "$T/state" "$SIM" "$SIM.tree" "$T/daemon.log"
$MEMGRANTCTL sim init "$SIM" --online 1G --standby 512M --block-size 128M --no-firmware > /dev/null || fail "sim init"
SIM_ONLINE=1G SIM_STANDBY=512M write_config
sed -i 's/^    block_size: .*/&\n    has_firmware: false/' "$T/memgrant.yaml"
start_daemon
once_in_log '^[0-9T:.-]*Z memgrantd: memory interface: no sys/firmware/memory (no standby memory on this kernel): grants can only online blocks the kernel keeps offline, 512M in 4 blocks now$'
# the blocks kept offline are what a grant can take, not memory half-way
$CTL status --json | python3 -c 'import json,sys; m=json.load(sys.stdin)["memory"]; sys.exit(not (m["in_flight_bytes"] == 0 and m["standby_bytes"] == 512 << 20 and m["online_bytes"] + m["standby_bytes"] == m["total_bytes"]))' ||
	fail "status without firmware: $($CTL status --json | tr -d '\n' | grep -o '"memory":{[^}]*}')"
$CTL grant 512M --id g-1 --wait > /dev/null || fail "g-1 without firmware"
$CTL grant 128M --id g-2 --wait 2> "$T/err" && fail "g-2 granted with nothing offline"
grep -q 'rejected: 128M requested, 0B offline available (no standby memory interface: this kernel has no sys/firmware/memory, and it keeps no block offline)$' "$T/err" ||
	fail "g-2 without firmware: $(cat "$T/err")"
stop_daemon

# 3. a sysfs-shaped tree without sys/firmware/memory, every block online (a
# guest that is not s390, or s390 without the SCLP memory facility)
TREE=$T/tree
mk() { mkdir -p "$(dirname "$TREE/$1")"; printf '%s\n' "$2" > "$TREE/$1"; }
mk sys/devices/system/memory/block_size_bytes 8000000
mk sys/devices/system/memory/auto_online_blocks offline
for i in 0 1 2 3; do
	mk sys/devices/system/memory/memory$i/state online
	mk sys/devices/system/memory/memory$i/online 1
	mk sys/devices/system/memory/memory$i/phys_index "$(printf '%08x' $i)"
	mk sys/devices/system/memory/memory$i/removable 1
	mk sys/devices/system/memory/memory$i/valid_zones Normal
done
rm -rf "$T/state" "$T/daemon.log"
cat > "$T/memgrant.yaml" <<YAML
agent:
  id: test-guest
  state_dir: $T/state
  api_socket: $SOCK
  user: $(id -un)
  api_group: $(id -gn)
backend:
  type: sysfs
  root: $TREE
YAML
start_daemon
once_in_log '^[0-9T:.-]*Z memgrantd: memory interface: no sys/firmware/memory (no standby memory on this kernel): grants can only online blocks the kernel keeps offline, 0B in 0 blocks now$'
$CTL grant 128M --id g-1 --wait 2> "$T/err" && fail "g-1 granted on a tree with nothing offline"
grep -q 'rejected: 128M requested, 0B offline available (no standby memory interface: this kernel has no sys/firmware/memory, and it keeps no block offline)$' "$T/err" ||
	fail "g-1 on the tree: $(cat "$T/err")"
stop_daemon
echo ok
