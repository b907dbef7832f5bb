#!/bin/bash
# memgrant on a real kernel: a QEMU (TCG) x86 guest whose memory is
# hot-plugged through QMP, grants delivered over a real virtio-serial port.
# docs/vm-test.md describes the set-up and each step.
#
# Exit 0 pass, 77 skip (no QEMU, no kernel package, no memgrant-host), else fail.
# BUILD: the build directory (default build).  VM_WORK: where the downloaded
# kernel and busybox packages are kept (default tests/vm/work, gitignored).
# QEMU: the emulator (default qemu-system-x86_64 from PATH).  VM_TIMEOUT:
# seconds the whole run may take (default 480).
set -u
cd "$(dirname "$0")/../.."
TOP=$(pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
WORK=${VM_WORK:-$TOP/tests/vm/work}
VMCTL="python3 $TOP/tests/vm/vmctl.py"
T0=$(date +%s)

skip() { echo "SKIP: $*"; exit 77; }
step() { printf '\n== [%3ss] %s\n' $(( $(date +%s) - T0 )) "$*"; }

# --- what is needed --------------------------------------------------------------
QEMU=${QEMU:-$(command -v qemu-system-x86_64)}
[ -n "$QEMU" ] && [ -x "$QEMU" ] || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
[ "$(uname -m)" = x86_64 ] || skip "the VM test boots an amd64 Debian kernel; this host is $(uname -m)"
for p in memgrantd memgrant-helper memgrantctl memgrant-host; do
	[ -x "$BUILD/$p" ] || skip "$BUILD/$p not built (memgrant-host needs libvirt-dev at configure time)"
done
command -v python3 >/dev/null || skip "python3 missing (QMP helper)"
command -v cpio >/dev/null || skip "cpio missing"

# the guest kernel and busybox (tests/vm/kernel.sh)
. "$TOP/tests/vm/kernel.sh"
vm_fetch_kernel

# --- the run's own directory (Unix socket paths must stay short) ------------------
S=$(mktemp -d /tmp/memgrant-vm.XXXXXX)
QEMU_PID=
# the whole run is bounded: a guest that hangs ends the test, not CI
WATCHDOG_S=${VM_TIMEOUT:-480}
( trap 'kill $sp 2>/dev/null; exit 0' TERM
  sleep "$WATCHDOG_S" & sp=$!
  wait $sp && echo "FAIL: the VM test took longer than ${WATCHDOG_S}s" && kill -TERM $$ ) &
WATCHDOG=$!
cleanup() {
	kill -TERM "$WATCHDOG" 2>/dev/null
	if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
		kill -TERM "$QEMU_PID" 2>/dev/null
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$QEMU_PID" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$QEMU_PID" 2>/dev/null
		wait "$QEMU_PID" 2>/dev/null
	fi
	[ -f "$S/console.log" ] && cp "$S/console.log" "$WORK/console.log"
	rm -rf "$S"
}
trap cleanup EXIT
trap 'echo "FAIL: stopped (see above)"; exit 1' INT TERM

fail() {
	# called inside $(...): report on stderr and end the main script too
	if [ "$BASHPID" != "$$" ]; then
		echo "FAIL: $*" >&2
		kill -TERM $$
		exit 1
	fi
	echo "FAIL: $*"
	if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
		echo "--- memgrantd log in the guest (last 40 lines)"
		$VMCTL guest "$S/control.sock" 10 "tail -n 40 /run/memgrant/memgrantd.log" 2>&1
	fi
	echo "--- guest console (last 60 lines; whole log in $WORK/console.log)"
	tail -n 60 "$S/console.log" 2>/dev/null
	exit 1
}

# g CMD: run CMD in the guest, its output on ours (or captured for values);
# fails the test when it fails
g() {
	$VMCTL guest "$S/control.sock" 120 "$1" || fail "in the guest: '$1' exited $?"
}
qmp() { $VMCTL qmp "$S/qmp.sock" "$@" || fail "QMP $1 failed"; }
memtotal_kb() { g "sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo"; }
# the memory block ids the guest has, one line
blocks() { g "cd /sys/devices/system/memory && ls -d memory[0-9]* | sed 's/memory//' | sort -n | tr '\n' ' '"; }
block_state() { g "cat /sys/devices/system/memory/memory$1/state"; }
block_zone() { g "cat /sys/devices/system/memory/memory$1/valid_zones"; }
H="$BUILD/memgrant-host --socket $S/channel.sock --state-dir $S/hoststate --timeout 30s"
jfield() { # JSON-LINES FIELD: the field of the last line
	python3 -c 'import json,sys
v=json.loads([l for l in sys.argv[1].splitlines() if l.strip()][-1])
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v.get(k)
print(json.dumps(v) if isinstance(v,(dict,list)) or v is None else v)' "$1" "$2"
}

# --- build the guest ----------------------------------------------------------------
step "building the initramfs ($(basename "$KDEB"), $(basename "$BDEB"))"
mkdir -p "$BUILD/tests/vm"
cc -static -O2 -Wall -Wextra -Werror -o "$BUILD/tests/vm/pin" tests/vm/pin.c ||
	fail "cannot build tests/vm/pin.c statically"
tests/vm/mkinitramfs.sh "$BUILD" "$WORK/kernel" "$WORK/busybox/bin/busybox" "$S/initramfs.gz" ||
	fail "mkinitramfs failed"
echo "initramfs $(du -h "$S/initramfs.gz" | cut -f1)"

step "booting the guest (TCG, 512M, slots=4, maxmem=4G, memhp_default_state=offline)"
"$QEMU" -machine q35 -accel tcg -smp 1 -m 512M,slots=4,maxmem=4G \
	-kernel "$VMLINUZ" -initrd "$S/initramfs.gz" \
	-append "console=ttyS0 memhp_default_state=offline panic=-1 loglevel=5" \
	-display none -monitor none -serial "file:$S/console.log" -no-reboot \
	-device virtio-serial-pci,id=vs0 \
	-chardev "socket,id=ch0,path=$S/channel.sock,server=on,wait=off" \
	-device virtserialport,bus=vs0.0,chardev=ch0,name=org.memgrant.0 \
	-chardev "socket,id=ctl,path=$S/control.sock,server=on,wait=off" \
	-device virtserialport,bus=vs0.0,chardev=ctl,name=org.memgrant.test \
	-qmp "unix:$S/qmp.sock,server=on,wait=off" > "$S/qemu.log" 2>&1 &
QEMU_PID=$!
for _ in $(seq 50); do [ -S "$S/qmp.sock" ] && break; kill -0 $QEMU_PID 2>/dev/null || break; sleep 0.1; done
kill -0 $QEMU_PID 2>/dev/null || { cat "$S/qemu.log"; fail "qemu exited at start"; }
$VMCTL wait-guest "$S/control.sock" 180 || fail "the guest did not come up"
echo "guest up after $(( $(date +%s) - T0 ))s"
g "uname -r; cat /sys/devices/system/memory/block_size_bytes; ls /dev/virtio-ports; ls /sys/firmware/memory 2>&1 | head -n 1; for b in /sys/devices/system/memory/memory*; do echo \"\${b##*/}: \$(cat \$b/state) \$(cat \$b/valid_zones)\"; done"
BS=$(( 0x$(g "cat /sys/devices/system/memory/block_size_bytes") ))
[ "$BS" -gt 0 ] || fail "no block size"
BSM=$(( BS / 1048576 ))
# the agent is up and has the channel
for _ in $(seq 60); do
	$VMCTL guest "$S/control.sock" 30 "memgrantctl --socket /run/memgrant/api.sock status >/dev/null 2>&1" && break
	sleep 0.5
done
g "memgrantctl --socket /run/memgrant/api.sock status"
# the privilege split on the real kernel: the helper is root, the agent memgrant (990); no
# capabilities, seccomp filters on both
split=$(g 'for p in $(pidof memgrant-helper) $(pidof memgrantd); do echo "$(cat /proc/$p/comm) $(awk '"'"'/^(Uid|CapEff|Seccomp):/ { printf "%s ", $2 }'"'"' /proc/$p/status)"; done')
echo "$split"
echo "$split" | grep -qx "memgrant-helper 0 0000000000000000 2 " || fail "the helper is not root without capabilities under seccomp: $split"
echo "$split" | grep -qx "memgrantd 990 0000000000000000 2 " || fail "the agent is not memgrant without capabilities under seccomp: $split"
[ "$(echo "$split" | wc -l)" -eq 2 ] || fail "not exactly two agent processes: $split"
out=$($H status vm) || fail "memgrant-host status: $out"
echo "$out"
echo "$out" | grep -q "^agent: *memgrant-vm" || fail "the agent did not answer on the channel: $out"

MT0=$(memtotal_kb)
B0=$(blocks)
echo "MemTotal at boot: $MT0 kB; blocks: $B0"

# --- 1. hot-plug, grant, revoke, unplug --------------------------------------------
step "hot-plugging dimm0 (256M) through QMP"
qmp object-add '{"qom-type":"memory-backend-ram","id":"mem0","size":268435456}' >/dev/null
qmp device_add '{"driver":"pc-dimm","id":"dimm0","memdev":"mem0"}' >/dev/null
for _ in $(seq 100); do [ "$(blocks)" != "$B0" ] && break; sleep 0.2; done
B1=$(blocks)
NEW=$(echo " $B1 " | tr ' ' '\n' | grep -vxF -f <(echo "$B0" | tr ' ' '\n' | grep .) | grep . | tr '\n' ' ')
set -- $NEW
[ $# -eq $(( 256 / BSM )) ] || fail "after device_add the guest has blocks '$B1' (new: '$NEW'), wanted $(( 256 / BSM )) new"
for b in $NEW; do
	expect=$(block_state "$b")
	[ "$expect" = offline ] || fail "new block $b is $expect, wanted offline (memhp_default_state=offline)"
done
echo "new offline blocks: $NEW"
[ "$(memtotal_kb)" = "$MT0" ] || fail "MemTotal changed by the plug alone"
g "memgrantctl --socket /run/memgrant/api.sock lsmem"

step "grant 256M over the channel (memgrant-host --socket ... --wait --json)"
t=$(date +%s%N)
out=$($H --json grant vm 256M --wait) || fail "grant exited $?: $out"
echo "grant took $(( ($(date +%s%N) - t) / 1000000 )) ms"
echo "$out"
[ "$(jfield "$out" state)" = applied ] || fail "grant state $(jfield "$out" state), wanted applied"
GID1=$(jfield "$out" id)
echo "-- the grant's status inside the guest (memgrantctl grants --json):"
g "memgrantctl --socket /run/memgrant/api.sock grants --json"
st=$(g "memgrantctl --socket /run/memgrant/api.sock grants --json")
python3 - "$st" "$GID1" <<'EOF' || fail "the agent's status of $GID1 is not applied/Movable"
import json, sys
g = [x for x in json.loads(sys.argv[1])["grants"] if x.get("id") == sys.argv[2]][0]
blocks = g.get("blocks") or []
zones = sorted({b.get("zone") for b in blocks})
print("agent: %s state=%s blocks=%s zones=%s" % (g["id"], g["state"], [b.get("block") for b in blocks], zones))
sys.exit(0 if g["state"] == "applied" and blocks and all(str(z).lower().startswith("movable") for z in zones) else 1)
EOF
MT1=$(memtotal_kb)
echo "MemTotal: before grant $MT0 kB, after grant $MT1 kB (+$(( (MT1 - MT0) / 1024 )) MiB)"
[ $(( MT1 - MT0 )) -eq $(( 256 * 1024 )) ] || fail "MemTotal went up by $(( MT1 - MT0 )) kB, wanted 262144"
for b in $NEW; do
	s=$(block_state "$b") z=$(block_zone "$b")
	echo "block $b: $s, zone $z"
	[ "$s" = online ] || fail "block $b is $s after the grant"
	[ "$z" = Movable ] || fail "block $b is in $z, the policy (auto, lots of room) wants Movable"
done

set -- $NEW
shift $(( $# - 1 ))
BX=$1
step "outside the agent: echo 0 > memory$BX/online, a block of $GID1"
# the guest polls the agent's status right after its own write and prints
# how long the agent took to see it (uevent -> live table -> grant record)
WANT=$(( 256 * 1048576 - BS ))
seen=$(g "u0=\$(cut -d' ' -f1 /proc/uptime); echo 0 > /sys/devices/system/memory/memory$BX/online || exit 2; i=0; until memgrantctl --socket /run/memgrant/api.sock status --json | grep -Eq '\"granted_bytes\": *$WANT([^0-9]|\$)'; do i=\$((i + 1)); [ \$i -gt 300 ] && exit 3; sleep 0.01; done; u1=\$(cut -d' ' -f1 /proc/uptime); awk -v a=\$u0 -v b=\$u1 'BEGIN { printf \"%d\", (b - a) * 1000 }'")
echo "the agent reported the outside offline of block $BX after $seen ms (guest clock, 10 ms resolution)"
# the figure is printed above (under 1 s on an idle machine, emulated); the
# bound only catches a table that waits for a periodic rescan instead of the
# uevent, with room for a loaded CI machine under TCG
[ "$seen" -le 10000 ] || fail "the outside offline was seen after $seen ms: not from its uevent"
[ "$(block_state "$BX")" = offline ] || fail "block $BX is $(block_state "$BX") after the outside offline"
st=$(g "memgrantctl --socket /run/memgrant/api.sock grants --json")
python3 - "$st" "$GID1" "$WANT" <<'EOF' || fail "the grant's record still counts block $BX"
import json, sys
g = [x for x in json.loads(sys.argv[1])["grants"] if x.get("id") == sys.argv[2]][0]
print("agent: %s applied_bytes=%s owned_blocks=%s" % (g["id"], g.get("applied_bytes"), g.get("owned_blocks")))
sys.exit(0 if g.get("applied_bytes") == int(sys.argv[3]) else 1)
EOF

step "revoke the grant: it gives back what it still holds"
t=$(date +%s%N)
out=$($H --json revoke vm --grant "$GID1" --wait) || fail "revoke exited $?: $out"
echo "revoke took $(( ($(date +%s%N) - t) / 1000000 )) ms"
echo "$out"
[ "$(jfield "$out" state)" = applied ] || fail "revoke state $(jfield "$out" state)"
[ "$(jfield "$out" applied_bytes)" = "$WANT" ] ||
	fail "the revocation reports $(jfield "$out" applied_bytes) bytes, wanted $WANT (block $BX was already gone)"
MT2=$(memtotal_kb)
echo "MemTotal: after revoke $MT2 kB (boot $MT0 kB)"
[ "$MT2" = "$MT0" ] || fail "MemTotal after revoke $MT2 kB, wanted $MT0"
for b in $NEW; do
	s=$(block_state "$b")
	echo "block $b: $s"
	[ "$s" = offline ] || fail "block $b is $s after the revoke"
done

step "device_del dimm0: the guest must let it go"
$VMCTL device-del "$S/qmp.sock" dimm0 60 || fail "dimm0 was not released"
qmp object-del '{"id":"mem0"}' >/dev/null
[ "$(blocks)" = "$B0" ] || fail "blocks after unplug: $(blocks), wanted $B0"
echo "blocks after unplug: $(blocks)"

# --- 2. a grant larger than what is plugged ------------------------------------------
step "hot-plug dimm1 (256M), ask for 512M: refused"
qmp object-add '{"qom-type":"memory-backend-ram","id":"mem1","size":268435456}' >/dev/null
qmp device_add '{"driver":"pc-dimm","id":"dimm1","memdev":"mem1"}' >/dev/null
for _ in $(seq 100); do [ "$(blocks)" != "$B0" ] && break; sleep 0.2; done
NEW=$(blocks | tr ' ' '\n' | grep -vxF -f <(echo "$B0" | tr ' ' '\n' | grep .) | grep . | tr '\n' ' ')
set -- $NEW
[ $# -eq $(( 256 / BSM )) ] || fail "dimm1 gave blocks '$NEW'"
out=$($H --json grant vm 512M --wait 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 1 ] || fail "memgrant-host grant 512M exited $rc, wanted 1 (refused)"
echo "$out" | grep -q '"state":"rejected"' || fail "the big grant was not rejected: $out"
reason=$(echo "$out" | grep '"state":"rejected"' | tail -n 1)
code=$(jfield "$reason" error.code) reason=$(jfield "$reason" error.message)
echo "refused: $code: $reason"
[ "$code" = ENOSPC ] || fail "the rejection's code is '$code', wanted ENOSPC: $out"
echo "$reason" | grep -q "512M requested, 256M offline available" ||
	fail "the rejection gives no clear reason: $out"
[ "$(memtotal_kb)" = "$MT0" ] || fail "a rejected grant changed MemTotal"

# --- 3. a block that cannot be offlined ends the revocation partial -----------------
set -- $NEW
BN=$1 BM=$2
step "grant ${BSM}M --zone normal (block $BN) and ${BSM}M --zone movable (block $BM)"
out=$($H --json grant vm "${BSM}M" --zone normal --wait) || fail "normal grant exited $?: $out"
echo "$out" | tail -n 1
GN=$(jfield "$out" id)
out=$($H --json grant vm "${BSM}M" --zone movable --wait) || fail "movable grant exited $?: $out"
echo "$out" | tail -n 1
GM=$(jfield "$out" id)
echo "block $BN: $(block_state "$BN") $(block_zone "$BN"); block $BM: $(block_state "$BM") $(block_zone "$BM")"
[ "$(block_zone "$BN")" = Normal ] || fail "block $BN is not in Normal"
[ "$(block_zone "$BM")" = Movable ] || fail "block $BM is not in Movable"
MT3=$(memtotal_kb)
echo "MemTotal with both: $MT3 kB"
# page tables (unmovable kernel memory) into the Normal block
g "pin $BN > /run/pin.out 2>&1 & for i in \$(seq 100); do grep -q 'pin:' /run/pin.out && break; sleep 0.1; done; cat /run/pin.out; grep -q holds /run/pin.out"
step "revoke $(( 2 * BSM ))M: the Movable block goes, the Normal one stays busy -> partial"
t=$(date +%s%N)
out=$($H --json revoke vm "$(( 2 * BSM ))M" --wait); rc=$?
echo "revoke took $(( ($(date +%s%N) - t) / 1000000 )) ms, exit $rc"
echo "$out"
[ "$rc" -eq 64 ] || fail "memgrant-host revoke exited $rc, wanted 64 (partial)"
[ "$(jfield "$out" state)" = partial ] || fail "revoke state $(jfield "$out" state), wanted partial"
echo "block $BN: $(block_state "$BN"); block $BM: $(block_state "$BM")"
[ "$(block_state "$BN")" = online ] || fail "the pinned block $BN went $(block_state "$BN")"
[ "$(block_state "$BM")" = offline ] || fail "the movable block $BM is $(block_state "$BM")"
MT4=$(memtotal_kb)
echo "MemTotal after the partial revoke: $MT4 kB (was $MT3 kB)"
[ $(( MT3 - MT4 )) -eq $(( BSM * 1024 )) ] || fail "MemTotal went down by $(( MT3 - MT4 )) kB, wanted $(( BSM * 1024 ))"
g "grep -i 'busy\|EBUSY\|partial' /run/memgrant/memgrantd.log | tail -n 5"

# the pin gone, the Normal block may still hold other kernel memory (every
# GFP_KERNEL allocation prefers it): try once, report, do not fail on it
g "kill \$(pidof pin); sleep 0.5; pidof pin && exit 1; pin --count $BN"
out=$($H --json revoke vm --grant "$GN" --wait); rc=$?
echo "$out" | tail -n 1
if [ "$rc" -eq 0 ]; then
	echo "block $BN offline after the pin went away"
	$VMCTL device-del "$S/qmp.sock" dimm1 60 || fail "dimm1 was not released"
else
	echo "NOTE: block $BN still busy after the pin ended (other unmovable kernel memory in ZONE_NORMAL)"
fi

step "power off"
$VMCTL guest "$S/control.sock" 30 poweroff >/dev/null 2>&1
for _ in $(seq 50); do kill -0 $QEMU_PID 2>/dev/null || break; sleep 0.2; done
echo "vm test: 1 passed, 0 failed in $(( $(date +%s) - T0 ))s"
exit 0
