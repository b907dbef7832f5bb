#!/bin/bash
# The autoscaling loop end to end on libvirt's QEMU driver under TCG:
# memgrant-host serve plugs a virtio-mem device through libvirt and grants
# it to the memgrantd of a real guest when the guest's pressure monitor asks,
# takes it back when the guest offers, refuses a revocation below the
# guest's floor, and survives a SIGKILL mid-grow without leaving memory
# plugged and ungranted.  docs/vm-test.md ("The libvirt test") has each step.
#
# Exit 0 pass, 77 skip (no libvirtd, QEMU, kernel package or memgrant-host;
# the reason is printed), else fail.
# libvirt runs as a private session daemon (qemu:///session) of an
# unprivileged user: the caller, or `nobody` when run as root (CI), with HOME
# and XDG_RUNTIME_DIR in the run's own directory, so nothing of the machine's
# libvirt is used or changed and the service runs without root.
# BUILD, VM_WORK, QEMU as tests/vm/run.sh; LIBVIRTD: the daemon (default
# libvirtd from PATH or /usr/sbin); VM_TIMEOUT: seconds for the whole run (1500; about 12 min on an idle 2-core machine).
set -u
cd "$(dirname "$0")/../.."
TOP=$(pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
WORK=${VM_WORK:-$TOP/tests/vm/work}
VMCTL="python3 $TOP/tests/vm/vmctl.py"
T0=$(date +%s%N)
TSTEP=$T0

skip() { echo "SKIP: $*"; exit 77; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
# each step prints the time since the start and what the previous step took
step() {
	local now
	now=$(date +%s%N)
	printf '\n== [%6.1fs, previous step %5.1fs] %s\n' "$(( (now - T0) / 1000000 ))e-3" \
		"$(( (now - TSTEP) / 1000000 ))e-3" "$*"
	TSTEP=$now
}

# --- what is needed --------------------------------------------------------------
QEMU=${QEMU:-$(command -v qemu-system-x86_64)}
[ -n "$QEMU" ] && [ -x "$QEMU" ] || skip "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
[ "$(uname -m)" = x86_64 ] || skip "the libvirt test boots an amd64 Debian kernel; this host is $(uname -m)"
LIBVIRTD=${LIBVIRTD:-$(command -v libvirtd || ls /usr/sbin/libvirtd 2>/dev/null)}
[ -n "$LIBVIRTD" ] && [ -x "$LIBVIRTD" ] ||
	skip "libvirtd not installed (apt-get install libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients)"
command -v virsh >/dev/null || skip "virsh not installed (apt-get install libvirt-clients)"
ls /usr/lib/*/libvirt/connection-driver/libvirt_driver_qemu.so >/dev/null 2>&1 ||
	skip "libvirt's QEMU driver not installed (apt-get install libvirt-daemon-driver-qemu)"
for p in memgrantd memgrant-helper memgrantctl memgrant-host; do
	[ -x "$BUILD/$p" ] || skip "$BUILD/$p not built (memgrant-host needs libvirt-dev at configure time)"
done
"$BUILD/memgrant-host" serve --help 2>&1 | grep -q "serve" || skip "$BUILD/memgrant-host has no serve mode"
command -v python3 >/dev/null || skip "python3 missing"
command -v cpio >/dev/null || skip "cpio missing"
if [ "$(id -u)" = 0 ]; then
	command -v setpriv >/dev/null || skip "setpriv missing (util-linux): root runs libvirt as nobody through it"
	RUN_UID=65534 RUN_GID=65534
else
	RUN_UID=$(id -u) RUN_GID=$(id -g)
fi

# the guest kernel and busybox (tests/vm/kernel.sh)
. "$TOP/tests/vm/kernel.sh"
vm_fetch_kernel
ls "$WORK"/kernel/lib/modules/*/kernel/drivers/virtio/virtio_mem.ko* >/dev/null 2>&1 ||
	skip "$KDEB has no virtio_mem module"

# --- the run's own directory: libvirt's HOME, sockets, images, the service's state -----
S=$(mktemp -d /tmp/mg-lv.XXXXXX)
chmod 0755 "$S"
mkdir -p "$S/home" "$S/run" "$S/bin" "$S/hs"
LIBVIRTD_PID= SERVE_PID=
URI=qemu:///session
# as the unprivileged user, with the run's libvirt session
as() {
	local envs=(HOME="$S/home" XDG_RUNTIME_DIR="$S/run" XDG_CONFIG_HOME="$S/home/.config"
		XDG_CACHE_HOME="$S/home/.cache" LIBVIRT_DEFAULT_URI="$URI" PATH="$PATH")
	local ex=
	[ -n "${exec_as:-}" ] && ex=exec
	if [ "$(id -u)" = 0 ]; then
		$ex setpriv --reuid=$RUN_UID --regid=$RUN_GID --clear-groups --inh-caps=-all env -i "${envs[@]}" "$@"
	else
		$ex env "${envs[@]}" "$@"
	fi
}
vsh() { as virsh -q -c "$URI" "$@"; }

WATCHDOG_S=${VM_TIMEOUT:-1500}
( trap 'kill $sp 2>/dev/null; exit 0' TERM
  sleep "$WATCHDOG_S" & sp=$!
  wait $sp && echo "FAIL: the libvirt test took longer than ${WATCHDOG_S}s" && kill -TERM $$ ) &
WATCHDOG=$!
cleanup() {
	kill -TERM "$WATCHDOG" 2>/dev/null
	[ -n "$SERVE_PID" ] && kill -KILL "$SERVE_PID" 2>/dev/null
	# any service of this run (its binary's path is the run's own)
	for p in $(pgrep -f "^$S/bin/memgrant-host serve"); do kill -KILL "$p" 2>/dev/null; done
	if [ -n "$LIBVIRTD_PID" ] && kill -0 "$LIBVIRTD_PID" 2>/dev/null; then
		for d in $(vsh list --name 2>/dev/null); do vsh destroy "$d" >/dev/null 2>&1; done
		kill -TERM "$LIBVIRTD_PID" 2>/dev/null
		for _ in $(seq 25); do kill -0 "$LIBVIRTD_PID" 2>/dev/null || break; sleep 0.2; done
		kill -KILL "$LIBVIRTD_PID" 2>/dev/null
	fi
	# a QEMU libvirt started and could not stop (libvirtd killed): by its pid file only
	for pf in "$S"/home/.config/libvirt/qemu/run/*.pid "$S"/run/libvirt/qemu/run/*.pid; do
		[ -f "$pf" ] && kill -KILL "$(cat "$pf")" 2>/dev/null
	done
	for c in "$S"/console-*.log; do [ -f "$c" ] && cp "$c" "$WORK/libvirt-$(basename "$c")"; done
	[ -f "$S/events.jsonl" ] && cp "$S/events.jsonl" "$WORK/libvirt-events.jsonl"
	[ -f "$S/serve.log" ] && cp "$S/serve.log" "$WORK/libvirt-serve.log"
	rm -rf "$S"
}
trap cleanup EXIT
trap 'echo "FAIL: stopped (see above)"; exit 1' INT TERM

CUR_DOM=
fail() {
	if [ "$BASHPID" != "$$" ]; then
		echo "FAIL: $*" >&2
		kill -TERM $$
		exit 1
	fi
	echo "FAIL: $*"
	if [ -n "$CUR_DOM" ] && [ -S "$S/control-$CUR_DOM.sock" ]; then
		echo "--- memgrantd log in $CUR_DOM (last 30 lines)"
		$VMCTL guest "$S/control-$CUR_DOM.sock" 10 "tail -n 30 /run/memgrant/memgrantd.log" 2>&1
	fi
	echo "--- memgrant-host serve (last 30 lines)"
	tail -n 30 "$S/serve.log" 2>/dev/null
	echo "--- events (last 20)"
	tail -n 20 "$S/events.jsonl" 2>/dev/null
	echo "--- libvirtd (last 20 lines)"
	tail -n 20 "$S/libvirtd.log" 2>/dev/null
	for c in "$S"/console-*.log; do
		[ -f "$c" ] || continue
		echo "--- $(basename "$c") (last 30 lines)"
		tail -n 30 "$c"
	done
	exit 1
}

# g DOMAIN CMD: run CMD in the guest DOMAIN (tests/vm/init's control port)
g() { $VMCTL guest "$S/control-$1.sock" 120 "$2" || fail "in $1: '$2' exited $?"; }
memtotal_kb() { g "$1" "sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo"; }
memavail_kb() { g "$1" "sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo"; }
# the online blocks above the boot memory, "N:zone" each
hot_blocks() {
	g "$1" "cd /sys/devices/system/memory && for b in memory*; do n=\${b#memory}; [ \$n -ge $2 ] && [ \$(cat \$b/state) = online ] && echo \"\$n:\$(cat \$b/valid_zones)\"; done | sort -n | tr '\n' ' '"
}
# the virtio-mem device's <current> (bytes) in the live XML
vm_current() {
	vsh dumpxml "$1" | python3 -c 'import sys, xml.etree.ElementTree as E
m = [d for d in E.fromstring(sys.stdin.read()).iter("memory") if d.get("model") == "virtio-mem"][0]
t = m.find("target"); u = {"KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30, "b": 1, "bytes": 1}
c = t.find("current"); r = t.find("requested")
print(int(c.text) * u[c.get("unit", "KiB")] if c is not None else 0, int(r.text) * u[r.get("unit", "KiB")])'
}
# a field of a domain in the service's status file
sfield() {
	python3 -c 'import json, sys
try:
    st = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("none"); sys.exit(0)
d = [x for x in st.get("domains", []) if x.get("domain") == sys.argv[2]]
v = d[0] if d else {}
for k in sys.argv[3].split("."):
    v = v.get(k) if isinstance(v, dict) else None
print("none" if v is None else str(v).lower() if isinstance(v, bool) else v)' "$S/hs/serve-status.json" "$1" "$2"
}
agent_granted() {
	g "$1" "memgrantctl --socket /run/memgrant/api.sock status --json" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["memory"]["granted_bytes"])'
}
EVLINE=0 # events consumed so far
# ev TIMEOUT NAME [K=V...]: waits for the next such event after EVLINE; sets EVLINE and EV
ev() {
	local out
	out=$($VMCTL wait-event "$S/events.jsonl" "$EVLINE" "$@") || fail "no event $2 ${*:3} within $1 s"
	EVLINE=${out%% *}
	EV=${out#* }
}
evfield() { python3 -c 'import json,sys; v=json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v = v.get(k) if isinstance(v, dict) else None
print(v)' "$1" "$2"; }

serve_start() { # CONFIG
	# exec all the way down (subshell, setpriv, env): $! is the service itself
	( exec_as=1 as "$S/bin/memgrant-host" serve --config "$1" >> "$S/serve.log" 2>&1 ) &
	SERVE_PID=$!
	for _ in $(seq 50); do
		[ "$(readlink "/proc/$SERVE_PID/exe" 2>/dev/null)" = "$S/bin/memgrant-host" ] && return 0
		sleep 0.1
	done
	fail "memgrant-host serve did not start (pid $SERVE_PID)"
}
serve_stop() { # SIGNAL
	[ -n "$SERVE_PID" ] || return 0
	kill -"$1" "$SERVE_PID" 2>/dev/null
	wait "$SERVE_PID" 2>/dev/null
	kill -0 "$SERVE_PID" 2>/dev/null && fail "memgrant-host serve (pid $SERVE_PID) survived SIG$1"
	SERVE_PID=
	# no other instance of ours is left (two services on one domain would hide bugs)
	pgrep -f "^$S/bin/memgrant-host serve" >/dev/null && fail "another memgrant-host serve of this run is running"
	return 0
}

# --- the guest image ----------------------------------------------------------------
step "building the initramfs with virtio_mem ($(basename "$KDEB"))"
mkdir -p "$BUILD/tests/vm"
cc -static -O2 -Wall -Wextra -Werror -o "$BUILD/tests/vm/pin" tests/vm/pin.c || fail "cannot build tests/vm/pin.c"
cc -static -O2 -Wall -Wextra -Werror -o "$BUILD/tests/vm/trace" tests/vm/trace.c || fail "cannot build tests/vm/trace.c"
# The agent's pressure monitor exactly as docs/autoscaling.md's worked
# example configures it (its one "pressure:" line), PSI on, the default
# policy.reserve (256M); the rest is the test guest's own (channel, sysfs).
PRESSURE_LINE=$(grep -E '^pressure: \{' docs/autoscaling.md)
[ "$(printf '%s\n' "$PRESSURE_LINE" | wc -l)" = 1 ] && [ -n "$PRESSURE_LINE" ] ||
	fail "docs/autoscaling.md has not exactly one 'pressure: {...}' line"
RESERVE_MIB=256
cat > "$S/agent.yaml" <<YAML
agent:
  id: memgrant-lv
  state_dir: /var/lib/memgrant
  api_socket: /run/memgrant/api.sock
  api_group: memgrant
  log_level: debug
backend:
  type: sysfs
  root: /
  own_onlining: true
policy:
  revoke_budget: 5s
$PRESSURE_LINE
providers:
  channel:
    path: /dev/virtio-ports/org.memgrant.0
YAML
echo "the agent's pressure section (docs/autoscaling.md): $PRESSURE_LINE"
MKINITRAMFS_EXTRA_MODULES="virtio/virtio_mem" MKINITRAMFS_CONFIG="$S/agent.yaml" \
	tests/vm/mkinitramfs.sh "$BUILD" "$WORK/kernel" "$WORK/busybox/bin/busybox" "$S/initramfs.gz" ||
	fail "mkinitramfs failed"
cp "$VMLINUZ" "$S/vmlinuz"
# the unprivileged user runs these (the build tree may not be readable to it)
cp "$BUILD/memgrant-host" "$S/bin/"
chown -R $RUN_UID:$RUN_GID "$S"

# --- libvirt ----------------------------------------------------------------------------
step "libvirtd as uid $RUN_UID: a private session daemon ($URI, HOME=$S/home)"
( exec_as=1 as "$LIBVIRTD" > "$S/libvirtd.log" 2>&1 ) &
LIBVIRTD_PID=$!
for _ in $(seq 100); do [ -S "$S/run/libvirt/libvirt-sock" ] && break; sleep 0.1; done
[ -S "$S/run/libvirt/libvirt-sock" ] || { cat "$S/libvirtd.log"; fail "libvirtd did not come up"; }
vsh version 2>&1 | head -n 3

# domain_xml NAME MEMORY-DEVICE-XML MAXMEM-XML
domain_xml() {
	cat <<XML
<domain type='qemu'>
  <name>$1</name>
  $3
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <cpu><numa><cell id='0' cpus='0' memory='512' unit='MiB'/></numa></cpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>$S/vmlinuz</kernel>
    <initrd>$S/initramfs.gz</initrd>
    <cmdline>console=ttyS0 memhp_default_state=offline panic=-1 loglevel=5</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$QEMU</emulator>
    <serial type='file'><source path='$S/console-$1.log'/><target port='0'/></serial>
    <controller type='virtio-serial' index='0'/>
    <channel type='unix'><source mode='bind' path='$S/ch-$1.sock'/><target type='virtio' name='org.memgrant.0'/></channel>
    <channel type='unix'><source mode='bind' path='$S/control-$1.sock'/><target type='virtio' name='org.memgrant.test'/></channel>
    $2
    <memballoon model='none'/>
  </devices>
</domain>
XML
}

boot() { # NAME: start it, wait for its control port and its agent
	local t
	t=$(date +%s%N)
	vsh create "$S/$1.xml" > "$S/create-$1.log" 2>&1 || { cat "$S/create-$1.log"; fail "virsh create $1"; }
	CUR_DOM=$1
	$VMCTL wait-guest "$S/control-$1.sock" 180 || fail "$1 did not come up"
	for _ in $(seq 60); do
		$VMCTL guest "$S/control-$1.sock" 30 "memgrantctl --socket /run/memgrant/api.sock status >/dev/null 2>&1" && break
		sleep 0.5
	done
	g "$1" "memgrantctl --socket /run/memgrant/api.sock status >/dev/null" >/dev/null
	echo "$1 up, agent answering, after $(ms "$t") ms"
}

DOM=mg-vmem
domain_xml $DOM "<memory model='virtio-mem'><target><size unit='MiB'>1024</size><node>0</node><block unit='MiB'>2</block><requested unit='MiB'>0</requested></target></memory>" \
	"<maxMemory slots='4' unit='MiB'>4096</maxMemory>" > "$S/$DOM.xml"
step "booting $DOM (TCG, 512M boot memory, virtio-mem 1G of 2M blocks, requested 0)"
boot $DOM
g $DOM "lsmod | grep -c virtio_mem; ls -d /sys/bus/virtio/drivers/virtio_mem/virtio* | wc -l; cat /sys/devices/system/memory/block_size_bytes; ls /proc/pressure 2>&1 | head -n 1"
BS=$(( 0x$(g $DOM "cat /sys/devices/system/memory/block_size_bytes") ))
BSM=$(( BS / 1048576 ))
# blocks of the device start above the boot memory (and the PCI hole, 4G)
FIRST_HOT=$(( (4 << 30) / BS ))
MT0=$(memtotal_kb $DOM)
echo "MemTotal at boot $MT0 kB, MemAvailable $(memavail_kb $DOM) kB, block ${BSM}M, virtio-mem <current>/<requested>: $(vm_current $DOM)"
[ "$(vm_current $DOM)" = "0 0" ] || fail "the device is not empty at boot"

# --- the service ----------------------------------------------------------------------------
serve_cfg() { # FILE MAX [LAW]
	# the shipped packaging/memgrant-host.yaml, its defaults as they are;
	# only what names this host changes: the session daemon's URI, the
	# test's folders, no host reserve (the test machine's memory is not the
	# point), one domain with the virtio-mem device's size as its max
	local law=${3:-memgrant} extra=""
	# MoM decides every 15 s
	[ "$law" = mom ] && extra=", grow_cooldown: 15s, shrink_cooldown: 15s"
	python3 - packaging/memgrant-host.yaml "$1" "$URI" "$S" "$DOM" "law: $law, max: $2$extra" <<'PY' ||
import re, sys
src, dst, uri, s, dom, pol = sys.argv[1:7]
text = open(src).read()
subs = [
    (r"(?m)^connect: .*$", 'connect: "%s"' % uri),
    (r"(?m)^state_dir: .*$", "state_dir: %s/hs" % s),
    (r"(?m)^events: .*$", "events: %s/events.jsonl" % s),
    (r"(?m)^metrics_file: .*$", "metrics_file: %s/hs/metrics.prom" % s),
    (r"(?m)^  reserve: 2G .*$", "  reserve: 0"),
    (r"(?m)^  budget: 0 .*$", "  budget: 2G"),
    (r"(?m)^domains: \{\}$", "domains:\n  %s: {%s}" % (dom, pol)),
]
for pat, rep in subs:
    text, n = re.subn(pat, lambda m: rep, text)
    if n != 1:
        sys.exit("packaging/memgrant-host.yaml: %r matched %d times" % (pat, n))
open(dst, "w").write(text)
PY
		fail "cannot derive the service's config from packaging/memgrant-host.yaml"
	chown $RUN_UID:$RUN_GID "$1"
}
serve_cfg "$S/serve.yaml" 512M
serve_cfg "$S/serve-max0.yaml" 0

step "memgrant-host serve as uid $RUN_UID (packaging/memgrant-host.yaml as shipped; the domain max 512M)"
serve_start "$S/serve.yaml"
ev 30 domain.added domain=$DOM
ev 30 channel.up domain=$DOM
for _ in $(seq 100); do [ "$(sfield $DOM synced)" = true ] && break; sleep 0.1; done
[ "$(sfield $DOM synced)" = true ] || fail "the service did not sync with the agent of $DOM"
as env MEMGRANT_HOST_CONFIG="$S/serve.yaml" "$S/bin/memgrant-host" status
[ "$(sfield $DOM granted_bytes)" = 0 ] || fail "granted $(sfield $DOM granted_bytes) before any request"

# hog HOLD_KB: fill a tmpfs of its own (/tmp's is half the memory, and the
# control port needs /tmp) until MemAvailable is HOLD_KB below the agent's reserve
hog() {
	local avail n
	avail=$(memavail_kb $DOM)
	n=$(( (avail - RESERVE_MIB * 1024 + $1) / 1024 ))
	g $DOM "mkdir -p /hog; grep -q ' /hog ' /proc/mounts || mount -t tmpfs -o size=100% hog /hog; dd if=/dev/zero of=/hog/fill bs=1M count=$n 2>&1 | tail -n 1; grep MemAvailable /proc/meminfo"
}

# --- 1. pressure -> request -> plug -> grant ----------------------------------------------------
step "a memory hog in $DOM (tmpfs) leaves MemAvailable 64M below the agent's reserve"
t_hog=$(date +%s%N)
hog $((64 * 1024))
ev 30 decision domain=$DOM action=grow; e=$EV
echo "$e"
echo "decision $(ms "$t_hog") ms after the hog"
DEC1=$e
ev 60 grant.applied domain=$DOM; e=$EV
echo "$e"
echo "grant applied $(ms "$t_hog") ms after the hog; took_ms $(evfield "$e" took_ms)"
G1=$(sfield $DOM granted_bytes)
ASKED1=$(evfield "$DEC1" bytes)
[ "$G1" = "$ASKED1" ] && [ $(( G1 % BS )) = 0 ] && [ "$G1" -ge $(( 64 << 20 )) ] ||
	fail "granted $G1, the decision was $ASKED1 (the agent's deficit, whole blocks, at least the 64M it is short)"
MT1=$(memtotal_kb $DOM)
read -r cur req <<< "$(vm_current $DOM)"
HB=$(hot_blocks $DOM $FIRST_HOT)
echo "MemTotal $MT0 -> $MT1 kB (+$(( (MT1 - MT0) / 1024 ))M); virtio-mem current $cur requested $req; online hot blocks: $HB"
[ $(( (MT1 - MT0) * 1024 )) -eq "$G1" ] || fail "MemTotal rose by $(( MT1 - MT0 )) kB, the grant is $G1 bytes"
[ "$cur" = "$G1" ] || fail "the device has $cur plugged, $G1 granted"
set -- $HB
[ $# -eq $(( G1 / BS )) ] || fail "online hot blocks '$HB', wanted $(( G1 / BS ))"
for b in $HB; do [ "${b#*:}" = Movable ] || fail "block ${b%%:*} is in ${b#*:}, the policy's zone is movable"; done
[ "$(agent_granted $DOM)" = "$G1" ] || fail "the agent reports $(agent_granted $DOM) granted, the service $G1"

# --- 2. the hog exits -> offer -> revoke -> SIGKILL -> restart -> unplug --------------------------
step "the hog exits: the agent offers, the service revokes; SIGKILL between the revocation and the unplug"
t_free=$(date +%s%N)
g $DOM "rm -f /hog/fill; grep MemAvailable /proc/meminfo"
ev 60 decision domain=$DOM action=shrink; e=$EV
echo "$e"
echo "$e" | grep -Eq '"why":"shrink [0-9.]+[MG]: offer' || fail "the shrink was not on the guest's offer: $e"
echo "decision $(ms "$t_free") ms after the hog exited"
ev 30 revoke.offline domain=$DOM; e=$EV
serve_stop KILL
echo "$e"
J2=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j.get("phase"), j.get("granted"), json.dumps(j.get("counts", {}), sort_keys=True))' "$S/hs/$DOM.serve.json" 2>&1)
echo "killed after the revocation; journal: phase, granted, counts: $J2; device current/requested $(vm_current $DOM)"
step "restart: the service unplugs what the guest gave back, its counters kept"
serve_start "$S/serve.yaml"
# the guest keeps the headroom of its last allocation burst while it fades
# (docs/autoscaling.md): the rest may come back in a second offer; an unplug
# the device finished while the service was down is finished at its restart
ev 90 unplugged domain=$DOM plugged=0; e=$EV
echo "$e"
echo "all unplugged $(ms "$t_free") ms after the hog exited; shrinks: $(sfield $DOM counts.shrinks)"
[ "$(sfield $DOM counts.shrinks)" -ge 1 ] && [ "$(sfield $DOM counts.grows)" -ge 1 ] ||
	fail "the counters did not survive the SIGKILL: grows $(sfield $DOM counts.grows), shrinks $(sfield $DOM counts.shrinks)"
MT2=$(memtotal_kb $DOM)
echo "MemTotal $MT2 kB; virtio-mem current/requested $(vm_current $DOM); hot blocks online: '$(hot_blocks $DOM $FIRST_HOT)'"
[ "$MT2" = "$MT0" ] || fail "MemTotal $MT2 kB after the revocation, $MT0 at boot"
[ "$(vm_current $DOM)" = "0 0" ] || fail "the device still has $(vm_current $DOM)"
[ "$(sfield $DOM granted_bytes)" = 0 ] || fail "the service still counts $(sfield $DOM granted_bytes) granted"

# --- 3. SIGKILL mid-grow, restart --------------------------------------------------------------
step "the hog again; memgrant-host serve gets SIGKILL as soon as it decides to grow"
hog $((64 * 1024))
ev 30 decision domain=$DOM action=grow; e=$EV
serve_stop KILL
ASKED3=$(evfield "$e" bytes)
echo "$e"
echo "killed; journal: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print({k: j[k] for k in j if k in ("granted","phase","op","bytes","target")})' "$S/hs/$DOM.serve.json" 2>&1)"
echo "virtio-mem current/requested while the service is down: $(vm_current $DOM)"
step "restart: the service resumes from its journal"
serve_start "$S/serve.yaml"
ok=
for _ in $(seq 600); do
	gr=$(sfield $DOM granted_bytes) ph=$(sfield $DOM phase) pl=$(sfield $DOM plugged_bytes)
	if [ "$ph" = idle ] && [ "$gr" != none ] && [ "$gr" -gt 0 ] && [ "$gr" = "$pl" ]; then ok=1; break; fi
	sleep 0.1
done
[ -n "$ok" ] || fail "after the restart the service did not settle: phase $ph granted $gr plugged $pl"
grep -E '"event":"(resumed|reconciled|grant.applied)"' "$S/events.jsonl" | tail -n 3
G3=$(sfield $DOM granted_bytes)
read -r cur req <<< "$(vm_current $DOM)"
MT3=$(memtotal_kb $DOM)
AG=$(agent_granted $DOM)
echo "service granted $G3, plugged_unusable $(sfield $DOM plugged_unusable_bytes); device current $cur requested $req; agent granted $AG; MemTotal +$(( (MT3 - MT0) / 1024 ))M"
[ "$cur" = "$G3" ] && [ "$req" = "$G3" ] || fail "plugged $cur (requested $req) but granted $G3: memory plugged and not granted"
[ "$AG" = "$G3" ] || fail "the agent has $AG granted, the service $G3"
[ $(( (MT3 - MT0) * 1024 )) -eq "$G3" ] || fail "MemTotal rose by $(( MT3 - MT0 )) kB, the grant is $G3 bytes"
[ "$(sfield $DOM plugged_unusable_bytes)" = 0 ] || fail "plugged but unusable: $(sfield $DOM plugged_unusable_bytes)"
[ "$G3" = "$ASKED3" ] || fail "granted $G3 after the restart, the grow killed was $ASKED3: granted twice?"

# --- 4. a revocation below the floor -----------------------------------------------------------
step "restart with max: 0 while the hog holds its memory: the floor refuses the shrink"
serve_stop TERM
serve_start "$S/serve-max0.yaml"
ev 30 shrink.refused domain=$DOM; e=$EV
echo "$e"
FLOOR4=$(evfield "$e" floor_total)
# a few more ticks (interval 1s): what lies above the floor may go (the grant
# was the agent's deficit, more than the hog holds), nothing below it
sleep 5
G4=$(sfield $DOM granted_bytes)
MT4=$(memtotal_kb $DOM)
echo "granted $G4, MemTotal $MT4 kB (floor: use + reserve = $FLOOR4 bytes), device $(vm_current $DOM), refused_floor $(sfield $DOM counts.refused_floor)"
[ "$G4" -gt 0 ] && [ $(( MT4 * 1024 )) -ge "$FLOOR4" ] ||
	fail "the shrink below the floor went ahead: granted $G4, MemTotal $MT4 kB, floor $FLOOR4 bytes"
[ "$(sfield $DOM phase)" = idle ] && [ "$(vm_current $DOM)" = "$G4 $G4" ] ||
	fail "after the refusal: phase $(sfield $DOM phase), device $(vm_current $DOM), granted $G4"
MT3=$MT4 G3=$G4
step "the hog exits: the shrink to max 0 goes ahead"
g $DOM "rm -f /hog/fill"
ev 60 unplugged domain=$DOM plugged=0; e=$EV
echo "$e"
MT5=$(memtotal_kb $DOM)
[ "$MT5" = "$MT0" ] && [ "$(vm_current $DOM)" = "0 0" ] || fail "after the shrink: MemTotal $MT5, device $(vm_current $DOM)"
echo "MemTotal $MT5 kB, device $(vm_current $DOM)"
serve_stop TERM

# --- 5. a pressure trace: the memgrant law three times, then MoM and naive -------------------
# The trace (tests/vm/trace.c, anonymous memory, no swap): a ramp to 352M,
# a step to 640M (1.25x the boot memory) within 3 s, a release, a step to
# 448M within 3 s, a release.  A step faults in at 96-150 MiB/s, three to
# five times the 33 MiB/s of the workload issue 29 measured under TCG; an
# all-at-once step (400 MiB/s here) from the floor, where 344M are
# available, reaches the OOM killer in 0.8 s, before any plug under TCG
# (1.3-1.6 s) can answer (docs/vm-test.md).  Three runs of the memgrant law with different timing (the ramp's
# length, the start offset) so no result depends on where the agent's
# reading falls, then the same trace under the MoM-style rule and the naive
# one (law: mom / naive); between runs the guest goes back to its boot
# memory.  tests/vm/trace_report.py computes the figures.
serve_cfg "$S/serve-trace.yaml" 1G
serve_cfg "$S/serve-mom.yaml" 1G mom
serve_cfg "$S/serve-naive.yaml" 1G naive
count() { sfield $DOM "counts.$1"; }
to_floor() { # everything granted given back (max 0)
	serve_start "$S/serve-max0.yaml"
	for _ in $(seq 240); do
		[ "$(sfield $DOM phase)" = idle ] && [ "$(sfield $DOM granted_bytes)" = 0 ] && break
		sleep 0.5
	done
	serve_stop TERM
	[ "$(memtotal_kb $DOM)" = "$MT0" ] || fail "the guest is not back at its boot memory: MemTotal $(memtotal_kb $DOM) kB"
}
RUNS=()
trace_run() { # LABEL CONFIG OFFSET_S RAMP_S
	local label=$1 p0 u0 t
	step "trace: $label"
	serve_start "$2"
	for _ in $(seq 100); do [ "$(sfield $DOM synced)" = true ] && break; sleep 0.1; done
	[ "$(sfield $DOM synced)" = true ] || fail "the service did not sync with the agent of $DOM"
	p0=$(count plugs) u0=$(count unplugs)
	sleep "$3"
	g $DOM "rm -f /run/trace.log; trace /run/trace.log 12:352:$4 10:640:3 40:0 10:448:3 40:0 > /run/trace.out 2>&1 &"
	t=$(date +%s)
	until $VMCTL guest "$S/control-$DOM.sock" 30 "grep -q '^E' /run/trace.log" >/dev/null 2>&1; do
		[ $(( $(date +%s) - t )) -lt 200 ] || fail "the trace did not end within 200 s: $(g $DOM "tail -n 3 /run/trace.log; cat /run/trace.out")"
		sleep 3
	done
	g $DOM "cat /run/trace.log" > "$S/trace-$label.log"
	cp "$S/trace-$label.log" "$WORK/libvirt-trace-$label.log"
	python3 tests/vm/trace_report.py run "$S/trace-$label.log" "$label" "$MT0" $(( RESERVE_MIB * 1024 )) 0,1,3 2,4 \
		$(( $(count plugs) - p0 )) $(( $(count unplugs) - u0 )) > "$S/run-$label.json" || fail "trace_report.py failed"
	cat "$S/run-$label.json"
	serve_stop TERM
	RUNS+=("$S/run-$label.json")
	to_floor
}
to_floor
trace_run memgrant-1 "$S/serve-trace.yaml" 0 8
trace_run memgrant-2 "$S/serve-trace.yaml" 0.35 6
trace_run memgrant-3 "$S/serve-trace.yaml" 0.7 10
trace_run mom "$S/serve-mom.yaml" 0 8
trace_run naive "$S/serve-naive.yaml" 0 8
step "the trace side by side (relief: a burst's start to its first grant online; floor: a release to the boot memory)"
python3 tests/vm/trace_report.py table "${RUNS[@]}"
# What the loop must do, each run: answer every burst that went short, give
# everything back after each release, never turn a grow into a shrink (or
# back) within a phase, and the Must-show targets: relief <= 5 s, back to
# the floor <= 30 s, 0 OOM kills.
python3 - "${RUNS[@]:0:3}" <<'PY' || fail "the memgrant law failed the trace (see the table)"
import json, sys
bad = []
for p in sys.argv[1:]:
    r = json.load(open(p))
    for i, v in enumerate(r["relief_s"]):
        if v is None:
            bad.append("%s: burst %d went short and got nothing" % (r["label"], i + 1))
        elif v != "n/a" and v > 5:
            bad.append("%s: burst %d relief %.1f s > 5 s" % (r["label"], i + 1, v))
    for i, v in enumerate(r["floor_s"]):
        if v is None:
            bad.append("%s: release %d never back to the boot memory" % (r["label"], i + 1))
        elif v > 30:
            bad.append("%s: release %d back to the floor in %.1f s > 30 s" % (r["label"], i + 1, v))
    if r["reversals"]:
        bad.append("%s: %d grow/shrink reversals" % (r["label"], r["reversals"]))
    if r["oom_kills"]:
        bad.append("%s: %d OOM kills" % (r["label"], r["oom_kills"]))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("the memgrant law: every burst answered within 5 s, back to the floor within 30 s, no OOM kill, no reversal")
PY
EVLINE=$(wc -l < "$S/events.jsonl") # the trace's events are not the next steps'

# --- 6. the DIMM backend on the same guest (its <maxMemory slots='4'>) -------------------------
dimm_cfg() { # FILE MAX
	cat > "$1" <<YAML
connect: "$URI"
state_dir: $S/hs
events: $S/events.jsonl
interval: 1s
host: {reserve: 0, budget: 2G}
defaults: {hypervisor: auto, max: 0}
domains:
  $DOM: {hypervisor: dimm, dimm_size: 128M, min: 0, max: $2, step: 128M, shrink_step: 128M, reserve: 256M,
         grow_cooldown: 2s, shrink_cooldown: 2s, slack_after: 1h, online_deadline: 30s, unplug_deadline: 10s,
         revoke_backoff: 3s, revoke_backoff_max: 3s, zone: movable}
YAML
	chown $RUN_UID:$RUN_GID "$1"
}
dimms() { vsh dumpxml $DOM | grep -c "<memory model='dimm'"; }
dimm_cfg "$S/dimm.yaml" 128M
dimm_cfg "$S/dimm-max0.yaml" 0
step "DIMM backend: the service (hypervisor: dimm, dimm_size 128M) attaches one DIMM on the guest's request"
serve_start "$S/dimm.yaml"
t=$(date +%s%N)
hog $((64 * 1024))
ev 40 decision domain=$DOM action=grow; echo "$EV"
ev 40 grant.applied domain=$DOM; echo "$EV"
echo "DIMM granted $(ms "$t") ms after the hog; took_ms $(evfield "$EV" took_ms)"
MT6=$(memtotal_kb $DOM)
DHB=$(hot_blocks $DOM $FIRST_HOT)
echo "MemTotal +$(( (MT6 - MT0) / 1024 ))M, DIMMs attached: $(dimms), online hot blocks: $DHB"
[ $(( (MT6 - MT0) * 1024 )) -eq $(( 128 << 20 )) ] || fail "the DIMM grant moved MemTotal by $(( MT6 - MT0 )) kB"
[ "$(dimms)" = 1 ] || fail "$(dimms) DIMMs attached, wanted 1"
for b in $DHB; do [ "${b#*:}" = Movable ] || fail "DIMM block ${b%%:*} is in ${b#*:}"; done
g $DOM "rm -f /hog/fill"

step "the guest refuses the eject (/sys/firmware/acpi/hotplug/memory/enabled = 0); max: 0 asks for the DIMM back"
g $DOM "echo 0 > /sys/firmware/acpi/hotplug/memory/enabled && cat /sys/firmware/acpi/hotplug/memory/enabled"
serve_stop TERM
t=$(date +%s%N)
serve_start "$S/dimm-max0.yaml"
ev 40 revoke.offline domain=$DOM; echo "$EV"
ev 60 unplug.partial domain=$DOM; echo "$EV"
echo "detach refused, seen $(ms "$t") ms after the restart"
ev 40 grant.applied domain=$DOM; echo "$EV"
MT7=$(memtotal_kb $DOM)
echo "granted back: MemTotal +$(( (MT7 - MT0) / 1024 ))M, DIMMs attached: $(dimms), service granted $(sfield $DOM granted_bytes)"
[ "$(dimms)" = 1 ] || fail "the refused DIMM is gone from the XML"
[ $(( (MT7 - MT0) * 1024 )) -eq $(( 128 << 20 )) ] || fail "after the refused eject MemTotal moved by $(( MT7 - MT0 )) kB"
[ "$(sfield $DOM granted_bytes)" = $(( 128 << 20 )) ] || fail "the refused DIMM is not granted back"

step "the guest allows ejects again: the next try detaches the DIMM"
t=$(date +%s%N)
g $DOM "echo 1 > /sys/firmware/acpi/hotplug/memory/enabled"
ev 60 unplugged domain=$DOM; echo "$EV"
echo "DIMM detached $(ms "$t") ms after the guest allowed it (took_ms $(evfield "$EV" took_ms): revoke, detach, DEVICE_REMOVED)"
MT8=$(memtotal_kb $DOM)
[ "$(dimms)" = 0 ] || fail "$(dimms) DIMMs still attached"
[ "$MT8" = "$MT0" ] || fail "MemTotal $MT8 kB after the detach, $MT0 at boot"
[ "$(sfield $DOM granted_bytes)" = 0 ] || fail "the service still counts $(sfield $DOM granted_bytes)"
serve_stop TERM
vsh destroy $DOM >/dev/null

step "done"
echo "libvirt test: 1 passed, 0 failed in $(ms "$T0") ms"
exit 0
