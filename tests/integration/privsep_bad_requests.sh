#!/bin/sh
# The privileged helper (hotplug/privsep/spawn.h) against malformed, oversized and
# out-of-range requests: each one ends the helper with one log line naming
# what was wrong, and nothing in the machine is written (the tree is the same
# byte for byte).  Well-formed requests are answered with the write's errno.
# Both backends: sysfs over a generated tree and the sim.  The helper runs
# exactly as under memgrantd, with its capabilities dropped and its seccomp
# filter loaded (a call outside it would show as "helper: signal 31"; under
# qemu-user, .ci/s390x.sh has the probe pass agent.seccomp=off: qemu refuses
# seccomp).
. "$(dirname "$0")/lib.sh"

[ -x "$BUILD/tests/tools/privhelper_probe" ] || fail "no $BUILD/tests/tools/privhelper_probe"
PROBE="$BUILD/tests/tools/privhelper_probe $BUILD/memgrant-helper"

# A sysfs-shaped tree: blocks 0-3 configured and online, 4-7 standby (only a
# firmware entry), as kernel.md's seed machine.
TREE=$T/tree
mk() { mkdir -p "$(dirname "$TREE/$1")"; printf '%s\n' "$2" > "$TREE/$1"; }
mk sys/devices/system/memory/block_size_bytes 8000000
mk sys/devices/system/memory/auto_online_blocks offline
for i in 0 1 2 3 4 5 6 7; do
	if [ $i -lt 4 ]; then
		mk sys/devices/system/memory/memory$i/state online
		mk sys/devices/system/memory/memory$i/online 1
		mk sys/devices/system/memory/memory$i/phys_index "$(printf '%08x' $i)"
		mk sys/firmware/memory/memory$i/config 1
	else
		mk sys/firmware/memory/memory$i/config 0
	fi
	mk sys/firmware/memory/memory$i/memmap_on_memory 0
done

cat > "$T/sysfs.yaml" <<YAML
agent:
  state_dir: $T/state
  api_socket: $SOCK
  user: $(id -un)
backend:
  type: sysfs
  root: $TREE
YAML
SIM_ONLINE=512M SIM_STANDBY=512M write_config
cp "$T/memgrant.yaml" "$T/sim.yaml"

snapshot() { # DIR: a digest of every file's name and content
	(cd "$1" && find . -type f | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum)
}

# bad CONFIG REQUEST WHAT: the helper refuses, logs WHAT, writes nothing
bad() {
	dir=$TREE
	[ "$1" = sim ] && dir=$T/sim.json.tree
	before=$(snapshot "$dir"; cat "$SIM" 2>/dev/null)
	out=$($PROBE "$T/$1.yaml" "$2" 2>&1) || fail "probe $1 $2: $out"
	after=$(snapshot "$dir"; cat "$SIM" 2>/dev/null)
	echo "$out" | grep -q "^closed$" || fail "$1 $2: the helper answered: $out"
	echo "$out" | grep -q "^helper: exit 2$" || fail "$1 $2: the helper did not stop with status 2: $out"
	[ "$(echo "$out" | grep -c 'privileged helper: refusing a malformed request and stopping: ')" -eq 1 ] ||
		fail "$1 $2: not exactly one log line: $out"
	echo "$out" | grep -q "$3" || fail "$1 $2: the log does not say '$3': $out"
	[ "$before" = "$after" ] || fail "$1 $2: the machine changed"
	n=$((n + 1))
}

# good CONFIG REQUEST ANSWER
good() {
	out=$($PROBE "$T/$1.yaml" "$2" 2>&1) || fail "probe $1 $2: $out"
	echo "$out" | grep -q "^answer: $3$" || fail "$1 $2: want answer $3: $out"
	echo "$out" | grep -q "^helper: exit 0$" || fail "$1 $2: the helper did not end cleanly: $out"
	n=$((n + 1))
}

# the sim (blocks 0-3 online, 4-7 standby) exists before the first snapshot
good sim configure:5 0
n=0
for be in sysfs sim; do
	bad $be short "request of 10 bytes, expected 24"
	bad $be long "request of 25 bytes, expected 24"
	bad $be huge "request of 4096 bytes, expected 24"
	bad $be empty "request of 0 bytes"
	bad $be magic "magic 0x12345678"
	bad $be pad "unknown flags 0x00000002"
	bad $be op:0 "unknown operation 0"
	bad $be op:99 "unknown operation 99"
	bad $be noblock "block 100000, which this machine does not have"
	bad $be configure:32 "block 32, which this machine does not have"
	bad $be online:99:0 "online of block 99"
	bad $be zone "online into zone 9"
	bad $be memmap "set_memmap to 2"
	bad $be word "auto_online_blocks word 4"
	bad $be aoblock "set_auto_online for block 5"
	bad $be deadline "configure with a deadline"
	bad $be bigdeadline "deadline of 86400001 ms"
	bad $be fd "ancillary data"
done

# sysfs over a plain tree: each write lands in exactly its file
good sysfs configure:5 0
[ "$(cat "$TREE/sys/firmware/memory/memory5/config")" = 1 ] || fail "configure:5 did not write config"
good sysfs online:2:2 0
[ "$(cat "$TREE/sys/devices/system/memory/memory2/state")" = online_movable ] || fail "online:2:2 wrote $(cat "$TREE/sys/devices/system/memory/memory2/state")"
good sysfs auto_online:3 0
[ "$(cat "$TREE/sys/devices/system/memory/auto_online_blocks")" = online_movable ] || fail "auto_online:3"
# block 6 exists (firmware) but has no devices entry: the kernel's ENOENT, no protocol error
good sysfs offline:6:1000 ENOENT
# the sim judges as the kernel does: block 5 configured above, onlining block 0 again is EINVAL (W2)
good sim online:5:2 0
good sim online:0:0 EINVAL
good sim offline:5:5000 0
good sim deconfigure:5 0
echo "$n requests"
