#!/bin/sh
# /init of the s390x kernel test's guest (busybox sh, PID 1; tests/s390/run.sh).
# Runs on the real s390x kernel of ../shared/s390-kernel with standby memory:
#   1. the rule suite on the kernel's own /sys (kernel_rules kernel,
#      tests/tools/kernel_rules.c; run.sh compares it with the sim's results);
#   2. memgrant as shipped: memgrantd on its sysfs backend with the packaged
#      configuration, the agent as memgrant, the helper as root, seccomp on;
#      grants and revocations through memgrantctl, the policy's memmap
#      choice, outside changes seen through uevents, SIGKILL of the agent and
#      of the helper in the middle of a grant, lsmem against the kernel's
#      files, MemTotal.
# Prints "S390: PASS what" / "S390: FAIL what" lines and ends with
# "S390: RESULT N passed, M failed", then powers off.
export PATH=/bin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /var/lib

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "S390: PASS $*"; }
fail() { failed=$((failed + 1)); echo "S390: FAIL $*"; }
check() { # WHAT COMMAND...: PASS when COMMAND succeeds
	local check_what=$1
	shift
	if "$@"; then pass "$check_what"; else fail "$check_what"; fi
}
finish() {
	echo "S390: RESULT $passed passed, $failed failed"
	sync
	poweroff -f
}

FW=/sys/firmware/memory
DEV=/sys/devices/system/memory
memmap_param=$(cat /sys/module/memory_hotplug/parameters/memmap_on_memory)
echo "S390: kernel $(uname -r), memory_hotplug.memmap_on_memory=$memmap_param, $(grep MemTotal /proc/meminfo | tr -s ' ')"
# facts the sim's tree is compared on (docs/kernel-rules.md)
echo "S390: memory12 has: $(ls $DEV/memory12 | tr '\n' ' '); phys_device $(cat $DEV/memory12/phys_device);" \
	"sys/devices/system/node $([ -d /sys/devices/system/node ] && echo present || echo absent)"
memtotal() { sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo; }
# the blocks with config=1 in /sys/firmware/memory, as "8 9 "
configured() {
	for f in "$FW"/memory*/config; do
		[ "$(cat "$f")" = 1 ] || continue
		b=${f%/config}
		echo "${b##*memory}"
	done | sort -n | tr '\n' ' '
}

# ---- 1. the rule suite on the real kernel (compared with the sim by run.sh) -----
t0=$(date +%s)
# the outcomes as they come, and the asserts that failed in the multi-step cases
# (cmocka's words); at most 8 minutes
{
	timeout 480 /usr/libexec/memgrant/kernel_rules kernel 2>&1
	echo "rc=$?"
} | tee /tmp/rules.out | grep -E '^RULES: |[Ee]rror|Failure'
rc=$(sed -n 's/^rc=//p' /tmp/rules.out)
echo "S390: the rule suite on the kernel took $(($(date +%s) - t0))s"
check "kernel_rules kernel ran (exit $rc)" test $rc = 0
boot_configured=$(configured)
standby_blocks=$(for f in "$FW"/memory*/config; do
	[ "$(cat "$f")" = 0 ] || continue
	b=${f%/config}
	echo "${b##*memory}"
done | sort -n | tr '\n' ' ')

# ---- 2. memgrant as shipped ----------------------------------------------------
# the build's directories (mkroot.py), made as the packages' tmpfiles.d makes them
. /etc/memgrant-test.env
mkdir -p "$RUNSTATEDIR/memgrant" "$LOCALSTATEDIR/lib/memgrant"
chown memgrant:memgrant "$RUNSTATEDIR/memgrant" "$LOCALSTATEDIR/lib/memgrant"
chmod 0755 "$RUNSTATEDIR/memgrant"
chmod 0700 "$LOCALSTATEDIR/lib/memgrant"
SOCK=$RUNSTATEDIR/memgrant/api.sock
agent_pid=
start_agent() {
	rm -f /tmp/agent-ready
	# the configuration memgrantd reads by default: $SYSCONFDIR/memgrant/memgrant.yaml
	memgrantd --foreground >> /tmp/memgrantd.log 2>&1 &
	agent_pid=$!
	i=0
	while [ $i -lt 300 ]; do
		[ -S "$SOCK" ] && timeout 20 memgrantctl status > /dev/null 2>&1 && return 0
		kill -0 "$agent_pid" 2> /dev/null || break
		i=$((i + 1))
		sleep 0.1
	done
	echo "--- memgrantd.log"
	cat /tmp/memgrantd.log
	return 1
}
ctl() { timeout 60 memgrantctl "$@"; }
if start_agent; then
	pass "memgrantd started as shipped (seccomp: kill, helper as root, agent as memgrant)"
else
	fail "memgrantd did not start"
	finish
fi
helper=$(pidof memgrant-helper)
check "the agent runs as memgrant" grep -q "^Uid:[[:space:]]*998" /proc/$agent_pid/status
check "the helper runs as root" grep -q "^Uid:[[:space:]]*0" /proc/$helper/status
check "both run under seccomp filters" sh -c "grep -q '^Seccomp:[[:space:]]*2' /proc/$agent_pid/status && grep -q '^Seccomp:[[:space:]]*2' /proc/$helper/status"

# the kernel's own files as memgrantctl lsmem -a -r -n -o BLOCK,STATE,CONFIGURED,MEMMAP-ON-MEMORY prints them
kernel_lsmem() {
	for f in "$FW"/memory*; do echo "${f##*memory}"; done | sort -n | while read -r b; do
		c=$(cat "$FW/memory$b/config")
		m=$(cat "$FW/memory$b/memmap_on_memory")
		state=offline
		[ -e "$DEV/memory$b/state" ] && state=$(cat "$DEV/memory$b/state")
		[ "$c" = 1 ] && c=yes || c=no
		[ "$m" = 1 ] && m=yes || m=no
		echo "$b $state $c $m"
	done
}
LSMEM="lsmem -a -r -n -o BLOCK,STATE,CONFIGURED,MEMMAP-ON-MEMORY"
# WHAT: the agent's lsmem (its live table, over the API) and the kernel's files agree
lsmem_agrees() {
	kernel_lsmem > /tmp/lsmem.kernel
	i=0
	while [ $i -lt 50 ]; do
		# shellcheck disable=SC2086
		ctl $LSMEM > /tmp/lsmem.agent 2>&1
		cmp -s /tmp/lsmem.kernel /tmp/lsmem.agent && { pass "$1: memgrantctl lsmem agrees with the kernel's files"; return 0; }
		i=$((i + 1))
		sleep 0.1
	done
	fail "$1: memgrantctl lsmem differs from the kernel's files"
	diff /tmp/lsmem.kernel /tmp/lsmem.agent
	return 1
}
json_num() { # KEY FILE: the first number after "KEY":
	sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" "$2" | head -n 1
}
status_settled() { # in_flight_bytes 0 and nothing running, within 10 s
	i=0
	while [ $i -lt 100 ]; do
		ctl status --json > /tmp/status.json 2>&1
		[ "$(json_num in_flight_bytes /tmp/status.json)" = 0 ] && ! grep -q '"running": *{' /tmp/status.json && return 0
		i=$((i + 1))
		sleep 0.1
	done
	cat /tmp/status.json
	return 1
}
new_blocks() { # the blocks configured now that were not at boot
	for b in $(configured); do
		case " $boot_configured " in *" $b "*) ;; *) printf '%s ' "$b" ;; esac
	done
}
lsmem_agrees "at start"

# WHAT SIZE WANT_MEMMAP: a grant through memgrantctl, checked in the kernel, then its revocation
grant_and_revoke() {
	local what=$1 size=$2 want_mm=$3 t0 t1 id blocks n per online mm_ok want_n b
	t0=$(memtotal)
	if ! ctl grant "$size" --wait --json > /tmp/grant.json 2>&1; then
		fail "$what: memgrantctl grant $size"
		cat /tmp/grant.json
		return
	fi
	id=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' /tmp/grant.json | head -n 1)
	blocks=$(new_blocks)
	n=$(echo $blocks | wc -w)
	per=131072
	[ "$want_mm" = 1 ] && per=129024
	online=0 mm_ok=1
	for b in $blocks; do
		[ "$(cat $DEV/memory$b/state)" = online ] && online=$((online + 1))
		[ "$(cat $FW/memory$b/memmap_on_memory)" = "$want_mm" ] || mm_ok=0
	done
	want_n=$(( ${size%M} / 128 ))
	if [ "$n" = "$want_n" ] && [ "$online" = "$n" ]; then
		pass "$what: grant $size configured and onlined blocks $blocks"
	else
		fail "$what: grant $size: blocks '$blocks' ($online online), $want_n wanted"
	fi
	check "$what: memmap_on_memory=$want_mm on the granted blocks (the policy's choice)" test "$mm_ok" = 1
	t1=$(memtotal)
	if [ $((t1 - t0)) = $((n * per)) ]; then
		pass "$what: MemTotal $t0 -> $t1 kB (+$n x $per kB)"
	else
		fail "$what: MemTotal $t0 -> $t1 kB, +$((n * per)) kB wanted"
	fi
	lsmem_agrees "$what, granted"
	if ctl revoke --grant "$id" --wait > /tmp/revoke.out 2>&1; then
		pass "$what: memgrantctl revoke --grant $id"
	else
		fail "$what: memgrantctl revoke --grant $id"
		cat /tmp/revoke.out
	fi
	check "$what: revoked blocks deconfigured (config=0)" test -z "$(new_blocks)"
	check "$what: MemTotal back to $t0 kB" test "$(memtotal)" = "$t0"
	check "$what: nothing in flight after the revocation" status_settled
	lsmem_agrees "$what, revoked"
}

grant_and_revoke "plenty of memory" 256M 0
# little memory: MemAvailable below policy.reserve (256M) once a tmpfs holds the rest
avail=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
fill=$(( (avail - 160 * 1024) / 1024 ))
mkdir -p /run/fill
mount -t tmpfs -o size=${fill}m tmpfs /run/fill
dd if=/dev/zero of=/run/fill/f bs=1M count="$fill" 2> /dev/null
echo "S390: MemAvailable $(sed -n 's/^MemAvailable: *//p' /proc/meminfo) with ${fill}M in a tmpfs"
if [ "$memmap_param" = Y ]; then
	grant_and_revoke "little memory, memmap on memory supported" 128M 1
else
	grant_and_revoke "little memory, memmap on memory not supported" 128M 0
fi
rm -f /run/fill/f
umount /run/fill

# ---- outside changes: the agent's table follows the kernel's uevents -------------
last=$(for f in "$FW"/memory*; do echo "${f##*memory}"; done | sort -n | tail -n 1)
echo 1 > "$FW/memory$last/config" && lsmem_agrees "outside config=1 of block $last"
echo online_movable > "$DEV/memory$last/state" && lsmem_agrees "outside online_movable of block $last"
echo offline > "$DEV/memory$last/state" && lsmem_agrees "outside offline of block $last"
echo 0 > "$FW/memory$last/config" && lsmem_agrees "outside config=0 of block $last"
# a granted block taken away behind the agent's back: block.changed on its event stream
ctl events --json > /tmp/events.json 2>&1 &
events=$!
ctl grant 128M --wait > /dev/null 2>&1
b=$(new_blocks)
b=${b% }
echo offline > "$DEV/memory$b/state"
echo 0 > "$FW/memory$b/config"
i=0
while [ $i -lt 100 ] && ! grep -q "\"block.changed\".*\"block\": *$b[,}]" /tmp/events.json; do i=$((i + 1)); sleep 0.1; done
check "outside removal of granted block $b: a block.changed event" grep -q "\"block.changed\".*\"block\": *$b[,}]" /tmp/events.json
kill "$events"
lsmem_agrees "granted block $b removed outside"
ctl status --json > /tmp/status.json
check "after the outside removal: granted_bytes 0" test "$(json_num granted_bytes /tmp/status.json)" = 0
check "after the outside removal: in_flight_bytes 0" test "$(json_num in_flight_bytes /tmp/status.json)" = 0

# ---- SIGKILL in the middle of a grant, and recovery from what the kernel says ----------
# WHO (agent or helper): a 384M grant (3 blocks), WHO killed once its first block is
# configured; memgrantd started again (if it went); then the agent must own exactly
# the blocks the kernel has online beyond boot, none left between two steps
kill_mid_grant() {
	local who=$1 victim n i mine v first
	if [ "$who" = agent ]; then victim=$agent_pid; else victim=$(pidof memgrant-helper); fi
	# the planner takes the lowest standby blocks: watch the first one, without forking
	first=${standby_blocks%% *}
	ctl grant 384M --json > /tmp/kill-grant.json 2>&1 &
	i=0
	v=0
	while [ $i -lt 100000 ] && [ "$v" != 1 ]; do read -r v < "$FW/memory$first/config"; i=$((i + 1)); done
	kill -9 "$victim"
	echo "S390: $who (pid $victim) killed with blocks '$(new_blocks)' configured," \
		"states: $(for b in $(new_blocks); do cat $DEV/memory$b/state 2> /dev/null || echo gone; done | tr '\n' ' ')"
	wait $! 2> /dev/null
	i=0
	while [ $i -lt 50 ] && kill -0 "$agent_pid" 2> /dev/null; do i=$((i + 1)); sleep 0.1; done
	if kill -0 "$agent_pid" 2> /dev/null; then
		echo "S390: memgrantd (pid $agent_pid) still runs after the $who's death"
	else
		wait "$agent_pid" 2> /dev/null
		check "$who killed: memgrantd starts again" start_agent
	fi
	check "$who killed: the agent settles (nothing running, nothing in flight)" status_settled
	n=$(echo $(new_blocks) | wc -w)
	mine=$(json_num granted_bytes /tmp/status.json)
	check "$who killed: no block left configured but offline" sh -c '
		for b in '"$(new_blocks)"'; do [ "$(cat '"$DEV"'/memory$b/state)" = online ] || exit 1; done'
	if [ "$mine" = $((n * 134217728)) ]; then
		pass "$who killed: the agent owns exactly the $n blocks the kernel has online ($(new_blocks))"
	else
		fail "$who killed: the agent owns $mine bytes, the kernel has $n blocks online beyond boot ($(new_blocks))"
	fi
	lsmem_agrees "$who killed, recovered"
	if [ "$n" -gt 0 ]; then
		check "$who killed: the recovered memory is revoked" ctl revoke $((n * 128))M --wait
	fi
	check "$who killed: back to the boot configuration" test -z "$(new_blocks)"
	check "$who killed: nothing in flight at the end" status_settled
}
kill_mid_grant agent
kill_mid_grant helper

finish
