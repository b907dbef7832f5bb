#!/bin/sh
# Benchmark: does the cost follow the work, not the machine (issue 22)?
#   - a grant and a revocation of 64 blocks and GET /v1/status on sims of
#     BENCH_SCALE_MACHINES blocks (default 1000 65536 262144), with the
#     start-up to ready of each; sysfs-shaped trees (bench/mktree.py) of
#     BENCH_SCALE_TREES blocks (default 65536 262144): start-up to ready
#   - grants and revocations of BENCH_SCALE_GRANTS blocks (default 512 4096
#     16384) per block, against the same steps with memgrantctl --sim, the
#     machine's context switches per block (/proc/stat ctxt: the wake-ups
#     of the agent, its helper and their writer), and the system calls per
#     block (strace -f, memgrantd apart from its helper) at
#     BENCH_SCALE_STRACE (4096; set empty: skipped)
#   - grants and revocations per block on a sim served as a tree over FUSE
#     (tests/tools/simfs), BENCH_SCALE_FUSE_GRANTS blocks (default 512 4096
#     16384), against the same steps with memgrantctl --sysroot, and the
#     system calls per block there at BENCH_SCALE_STRACE_TREE (1024)
#   - memgrantd's CPU time (its threads' run time) of each 64-block grant
#     and revocation on the sims of BENCH_SCALE_MACHINES
#   - RSS after BENCH_SCALE_CYCLES (6) and BENCH_SCALE_CYCLES_LONG (50; set
#     empty: skipped) grant+revocation cycles of BENCH_SCALE_CYCLE_BLOCKS
#     (4096) against after the first
# Never drops a figure silently: what it skips it says, with why.
# Prints "FIG KEY VALUE UNIT load=L [REFERENCE LABEL]" (L: the 1-minute load
# average when the figure was taken) and "NOTE text" lines for bench/run.sh,
# then "TARGET ..." lines, met or missed by how much, with the loads.
# A size list set empty skips that part (and says so in the targets).
#   BUILD=build sh bench/scale.sh
set -eu
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
BENCH=$(cd "$(dirname "$0")" && pwd)
CTL=$BUILD/memgrantctl
D=$BUILD/memgrantd
# everything in memory (sims, journals, trees): the figures here are ratios
# between sizes, and a disk's fsyncs would only blur them (bench/run.sh
# section 3 counts those)
TREES=${BENCH_TREES:-/dev/shm}
[ -d "$TREES" ] && [ -w "$TREES" ] || TREES=${TMPDIR:-/tmp}
T=$(mktemp -d "$TREES/memgrant-scale.XXXXXX")
TT=$T
PIDS=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT INT TERM
FIGS=$T/figs
: >"$FIGS"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
load1() { cut -d' ' -f1 /proc/loadavg; }
fig() {
	_k=$1 _v=$2 _u=$3
	shift 3
	_l=$(load1)
	echo "FIG $_k $_v $_u load=$_l${*:+ $*}"
	echo "$_k $_v $_u $*" >>"$FIGS"
	echo "$_k $_l" >>"$FIGS.load"
}
load_of() { awk -v k="$1" '$1 == k { print $2; exit }' "$FIGS.load"; }
note() { echo "NOTE $*"; }
val() { awk -v k="$1" '$1 == k { print $2; exit }' "$FIGS"; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
# RSS once the agent is idle: its executor gives freed heap back 50 ms
# after the last operation and again 1 s later, for what other threads
# freed meanwhile (agent/exec/executor.c); read before the second, RSS is
# whichever side of it the reader lands on
rss_settled() { sleep 1.3; rss_kb "$1"; }
ctxt() { awk '$1 == "ctxt" { print $2 }' /proc/stat; }
ms_per() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.3f", s * 1000 / n }'; }
# cpu_ns PID: the time PID's threads have run so far, in ns (schedstat: a
# thread that ended is not counted; memgrantd's threads live as long as it)
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
# median3 A B C
median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }

# yaml NAME BLOCKS: a sim of BLOCKS blocks of 128M, 16 of them online,
# made here: a start-up is timed without the making of the machine
# (every config here is one --check-config accepts, as an operator's is: an
# api_group that exists; a missing one makes glibc ask every NSS module,
# which maps e.g. nss_systemd and libm into the agent, 0.65 MB of its RSS)
yaml() {
	mkdir -p "$T/$1.d"
	"$CTL" sim init "$T/$1.d/sim.json" --online 2G --standby $((($2 - 16) * 128))M --block-size 128M >/dev/null
	cat >"$T/$1.yaml" <<YAML
agent: {id: scale-$1, state_dir: $T/$1.state, api_socket: $T/$1.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/$1.d/sim.json, online: 2G, standby: $((($2 - 16) * 128))M, block_size: 128M}
policy: {zone: movable, memmap_on_memory: always, reserve: 0, revoke_budget: 600s}
YAML
}
# start NAME: memgrantd on $T/NAME.yaml; DPID, and UP the seconds to ready
# (its API answers); 1 when it did not come up (its last lines in $T/NAME.log)
start() {
	t0=$(now)
	"$D" -c "$T/$1.yaml" --foreground >"$T/$1.log" 2>&1 &
	DPID=$!
	PIDS="$PIDS $DPID"
	i=0
	until "$CTL" --socket "$T/$1.sock" status >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 1200 ] || ! kill -0 "$DPID" 2>/dev/null; then
			kill "$DPID" 2>/dev/null || true
			wait "$DPID" 2>/dev/null || true
			return 1
		fi
		sleep 0.02
	done
	UP=$(secs "$t0" "$(now)")
}
stop() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
timed() { # NAME CMD...: seconds of CMD against NAME's daemon
	_n=$1
	shift
	_t0=$(now)
	"$CTL" --socket "$T/$_n.sock" "$@" >"$T/$_n.out" 2>&1 || { echo "scale: $_n $*: $(tail -2 "$T/$_n.out")" >&2; return 1; }
	secs "$_t0" "$(now)"
}

# ---- machine sizes: 64 blocks and /v1/status ---------------------------------
for m in ${BENCH_SCALE_MACHINES-1000 65536 262144}; do
	name=m$m
	yaml "$name" "$m"
	if ! start "$name"; then
		note "sim of $m blocks: memgrantd did not come up: $(tail -1 "$T/$name.log")"
		continue
	fi
	fig "startup_s@sim$m" "$UP" s
	# memory at ready: the live table and the backend's own per-block state
	# (a row 16 B, the sim watch's record 4 B); the per-block figure is the
	# difference between two machine sizes, below
	fig "ready_rss_kb@sim$m" "$(rss_kb "$DPID")" kB
	# the median of three of each, one block operation at a time
	# and memgrantd's CPU time for each (its threads' run time, the
	# helper's writes apart)
	g= v= gc= vc=
	for _ in 1 2 3; do
		c0=$(cpu_ns "$DPID")
		g="$g $(timed "$name" grant 8G --wait)"
		c1=$(cpu_ns "$DPID")
		v="$v $(timed "$name" revoke 8G --wait)"
		c2=$(cpu_ns "$DPID")
		gc="$gc $(((c1 - c0) / 1000))" vc="$vc $(((c2 - c1) / 1000))"
	done
	fig "grant64_s@sim$m" "$(median3 $g)" s
	fig "revoke64_s@sim$m" "$(median3 $v)" s
	fig "grant64_cpu_ms@sim$m" "$(awk -v u="$(median3 $gc)" 'BEGIN { printf "%.2f", u / 1000 }')" ms
	fig "revoke64_cpu_ms@sim$m" "$(awk -v u="$(median3 $vc)" 'BEGIN { printf "%.2f", u / 1000 }')" ms
	set -- $(python3 "$BENCH/apiclient.py" latency "$T/$name.sock" /v1/status 100 20)
	fig "status_median_ms@sim$m" "$1" ms
	fig "idle_rss_kb@sim$m" "$(rss_kb "$DPID")" kB
	stop "$DPID"
	rm -rf "$T/$name.d" "$T/$name.state"
done

# ---- sysfs-shaped trees: start-up to ready ------------------------------------------
for m in ${BENCH_SCALE_TREES-65536 262144}; do
	name=t$m
	python3 "$BENCH/mktree.py" "$TT/$name" "$m" --online 16 --firmware
	cat >"$T/$name.yaml" <<YAML
agent: {id: scale-$name, state_dir: $T/$name.state, api_socket: $T/$name.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend: {type: sysfs, root: $TT/$name}
YAML
	if start "$name"; then
		fig "startup_s@tree$m" "$UP" s
		stop "$DPID"
	else
		why=$(grep -m1 'max_user_watches' "$T/$name.log" || grep -v '^memgrantd: warning' "$T/$name.log" | tail -1)
		note "tree of $m blocks: memgrantd did not start: $why"
	fi
	rm -rf "$TT/$name" "$T/$name.state"
done

# steps N --sim FILE | --sysroot DIR: the writes of a grant of N blocks (16 on)
# and of its revocation, with memgrantctl alone; their seconds in RGS, RVS
steps() {
	_rg="16-$(($1 + 15))"
	shift
	_t0=$(now)
	"$CTL" "$@" block memmap on "$_rg" >/dev/null
	"$CTL" "$@" block configure "$_rg" >/dev/null
	"$CTL" "$@" block online "$_rg" --zone movable >/dev/null
	rgs=$(secs "$_t0" "$(now)")
	_t0=$(now)
	"$CTL" "$@" block offline "$_rg" >/dev/null
	"$CTL" "$@" block deconfigure "$_rg" >/dev/null
	rvs=$(secs "$_t0" "$(now)")
}

# ---- grant sizes: per block against memgrantctl --sim steps -----------------------
ST=${BENCH_SCALE_STRACE-4096} STF=${BENCH_SCALE_STRACE_TREE:-1024}
for n in ${BENCH_SCALE_GRANTS-512 4096 16384}; do
	name=g$n
	yaml "$name" $((n + 16))
	start "$name" || { note "grant of $n: memgrantd did not come up: $(tail -1 "$T/$name.log")"; continue; }
	c0=$(ctxt)
	g=$(timed "$name" grant $((n * 128))M --wait)
	c1=$(ctxt)
	v=$(timed "$name" revoke $((n * 128))M --wait)
	c2=$(ctxt)
	stop "$DPID"
	rm -rf "$T/$name.d" "$T/$name.state"
	"$CTL" sim init "$T/r$n.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
	steps "$n" --sim "$T/r$n.sim"
	rm -rf "$T/r$n.sim"*
	fig "grant_ms_per_block@$n" "$(ms_per "$g" "$n")" ms "$(ms_per "$rgs" "$n")" "memgrantctl steps"
	fig "revoke_ms_per_block@$n" "$(ms_per "$v" "$n")" ms "$(ms_per "$rvs" "$n")" "memgrantctl steps"
	fig "grant_ctxt_per_block@$n" "$(awk -v c=$((c1 - c0)) -v n="$n" 'BEGIN { printf "%.2f", c / n }')" switches
	fig "revoke_ctxt_per_block@$n" "$(awk -v c=$((c2 - c1)) -v n="$n" 'BEGIN { printf "%.2f", c / n }')" switches
done

# ---- grants on a tree that behaves like the kernel's: the sysfs backend on a
# sim served over FUSE (tests/tools/simfs: a write goes to the sim, a read
# never sees a half-written file); every read is a round trip to simfs, so
# the figures are simfs's cost as much as memgrantd's: compare ratios
SIMFS=$BUILD/tests/tools/simfs
FG=${BENCH_SCALE_FUSE_GRANTS-512 4096 16384}
if [ -z "$FG" ]; then
	note "grants on a simfs tree: skipped (BENCH_SCALE_FUSE_GRANTS set empty)"
elif ! [ -x "$SIMFS" ] || ! [ -e /dev/fuse ] || ! command -v fusermount3 >/dev/null 2>&1; then
	note "grants on a simfs tree: skipped: tests/tools/simfs, /dev/fuse or fusermount3 missing"
else
	for n in $FG; do
		name=f$n
		mkdir -p "$T/$name.mnt"
		"$CTL" sim init "$T/$name.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
		if ! "$SIMFS" "$T/$name.sim" "$T/$name.mnt" 2>"$T/$name.simfs"; then
			note "grants on a simfs tree of $n: simfs did not mount: $(tail -1 "$T/$name.simfs")"
			continue
		fi
		cat >"$T/$name.yaml" <<YAML
agent: {id: scale-$name, state_dir: $T/$name.state, api_socket: $T/$name.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend: {type: sysfs, root: $T/$name.mnt}
policy: {zone: movable, memmap_on_memory: always, reserve: 0, revoke_budget: 600s}
YAML
		g= v=
		if start "$name"; then
			fig "startup_s@simfs$n" "$UP" s
			g=$(timed "$name" grant $((n * 128))M --wait) && v=$(timed "$name" revoke $((n * 128))M --wait) || g=
			stop "$DPID"
		else
			note "grants on a simfs tree of $n: memgrantd did not come up: $(tail -1 "$T/$name.log")"
		fi
		fusermount3 -u "$T/$name.mnt" 2>/dev/null || true
		rm -rf "$T/$name.sim"* "$T/$name.state"
		[ -n "$g" ] || continue
		# the same writes with memgrantctl --sysroot on a fresh tree
		"$CTL" sim init "$T/$name.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
		"$SIMFS" "$T/$name.sim" "$T/$name.mnt" 2>"$T/$name.simfs" || { note "simfs did not mount again"; continue; }
		steps "$n" --sysroot "$T/$name.mnt"
		fusermount3 -u "$T/$name.mnt" 2>/dev/null || true
		rm -rf "$T/$name.sim"*
		fig "tree_grant_ms_per_block@$n" "$(ms_per "$g" "$n")" ms "$(ms_per "$rgs" "$n")" "memgrantctl --sysroot steps"
		fig "tree_revoke_ms_per_block@$n" "$(ms_per "$v" "$n")" ms "$(ms_per "$rvs" "$n")" "memgrantctl --sysroot steps"
	done
fi

# system calls per block: a grant and its revocation under strace -f, every
# call counted by process: memgrantd's threads (the agent: its reads of the
# machine, notifications, journal, API) apart from memgrant-helper's (the
# writes; on the sim, the sim's own rendering of each write, about 50 calls
# a write: lock, records, summary, tree files, which the kernel does in one
# call on real sysfs)
# count_calls NAME N KEY: memgrantd on $T/NAME.yaml under strace for a grant
# and a revocation of N blocks; figure KEY
count_calls() {
	name=$1 n=$2 key=$3
	strace -f -qq -o "$T/$name.trace" "$D" -c "$T/$name.yaml" --foreground >"$T/$name.log" 2>&1 &
	spid=$!
	PIDS="$PIDS $spid"
	i=0
	until "$CTL" --socket "$T/$name.sock" status >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 1200 ] || break
		sleep 0.05
	done
	"$CTL" --socket "$T/$name.sock" grant $((n * 128))M --wait >/dev/null
	"$CTL" --socket "$T/$name.sock" revoke $((n * 128))M --wait >/dev/null
	dpid=$(cat /proc/"$spid"/task/*/children 2>/dev/null | awk '{ print $1; exit }')
	[ -n "$dpid" ] && kill -TERM "$dpid"
	wait "$spid" 2>/dev/null || true
	# the helper is the process that ran execve(...memgrant-helper...), with
	# the children it forks (the writer of a revocation's offlines); a call
	# strace split in two (unfinished / resumed) counts once
	set -- $(awk -v n=$((2 * n)) '
		/execve\(".*memgrant-helper"/ { helper[$1] = 1 }
		/(clone|clone3|fork|vfork)(\(| resumed>).*= [0-9]+$/ { if ($1 in helper) helper[$NF] = 1 }
		/resumed>/ { next }
		{ calls[$1]++ }
		END { for (p in calls) if (p in helper) h += calls[p]; else a += calls[p]
		      printf "%.1f %.1f\n", a / n, h / n }' "$T/$name.trace")
	fig "$key" "$1" "calls" "$2" "memgrant-helper (the writes)"
	rm -rf "$T/$name.state" "$T/$name.trace"
}
if [ -z "$ST" ]; then
	note "syscalls_per_block: skipped (BENCH_SCALE_STRACE set empty)"
elif command -v strace >/dev/null 2>&1; then
	yaml s$ST $((ST + 16))
	count_calls s$ST "$ST" "syscalls_per_block@$ST"
	rm -rf "$T/s$ST.d"
	note "syscalls_per_block: memgrantd's system calls for a grant and its revocation of $ST blocks (start-up and stop included), per block and operation; memgrant-helper's (the writes, on the sim the sim's own work) apart"
	# the same on a simfs tree (the sysfs backend: its reads of the files)
	if [ -x "$SIMFS" ] && [ -e /dev/fuse ] && command -v fusermount3 >/dev/null 2>&1; then
		n=$STF name=sf$STF
		mkdir -p "$T/$name.mnt"
		"$CTL" sim init "$T/$name.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
		if "$SIMFS" "$T/$name.sim" "$T/$name.mnt" 2>"$T/$name.simfs"; then
			cat >"$T/$name.yaml" <<YAML
agent: {id: scale-$name, state_dir: $T/$name.state, api_socket: $T/$name.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend: {type: sysfs, root: $T/$name.mnt}
policy: {zone: movable, memmap_on_memory: always, reserve: 0, revoke_budget: 600s}
YAML
			count_calls "$name" "$n" "tree_syscalls_per_block@$n"
			fusermount3 -u "$T/$name.mnt" 2>/dev/null || true
		else
			note "tree_syscalls_per_block: simfs did not mount: $(tail -1 "$T/$name.simfs")"
		fi
		rm -rf "$T/$name.sim"*
	else
		note "tree_syscalls_per_block: skipped: tests/tools/simfs, /dev/fuse or fusermount3 missing"
	fi
else
	note "strace not installed: no syscall counts"
fi

# ---- memory with history: RSS after each of six cycles ------------------------------
C=${BENCH_SCALE_CYCLES:-6} n=${BENCH_SCALE_CYCLE_BLOCKS:-4096} CL=${BENCH_SCALE_CYCLES_LONG-50}
name=c$n
yaml "$name" $((n + 16))
if [ "$C" -lt 1 ]; then
	note "cycles: skipped (BENCH_SCALE_CYCLES=$C)"
elif start "$name"; then
	fig "rss_idle_kb@cycles" "$(rss_kb "$DPID")" kB
	fig "pss_anon_idle_kb@cycles" "$(awk '/^Pss_Anon:/ { print $2 }' /proc/"$DPID"/smaps_rollup 2>/dev/null || echo null)" kB
	fig "threads_idle@cycles" "$(ls /proc/"$DPID"/task | wc -l)" threads
	i=1 last=$C
	[ -n "$CL" ] && [ "$CL" -gt "$C" ] && last=$CL
	while [ $i -le "$last" ]; do
		timed "$name" grant $((n * 128))M --wait >/dev/null && timed "$name" revoke $((n * 128))M --wait >/dev/null
		[ $i -eq 1 ] && first=$(rss_settled "$DPID")
		[ $i -eq "$C" ] && fig "rss_after_${C}_cycles_kb@$n" "$(rss_settled "$DPID")" kB "$first" "after the first"
		[ $i -eq "$last" ] && [ "$last" -ne "$C" ] &&
			fig "rss_after_${last}_cycles_kb@$n" "$(rss_settled "$DPID")" kB "$first" "after the first"
		i=$((i + 1))
	done
	# the view of the last grant, whose every block went back: it names
	# the revocation that took each (a decode per block was 20 s)
	fig "view_revoked_grant_s@$n" "$(timed "$name" grants --json "local-$((2 * last - 1))")" s
	stop "$DPID"
else
	note "cycles: memgrantd did not come up"
fi

# ---- the targets of issue 22 ------------------------------------------------------------
# target WHAT VALUE LIMIT [KEY...]: "met" or "missed by N%" (VALUE <= LIMIT
# is met), with the load average when each figure KEY was taken
target() {
	_w=$1 _v=$2 _lim=$3
	shift 3
	if [ -z "$_v" ] || [ -z "$_lim" ]; then
		echo "TARGET $_w: not measured (a figure above was skipped)"
		return
	fi
	_loads=
	for _k in "$@"; do _loads="$_loads${_loads:+, }$(load_of "$_k") at ${_k#*@}"; done
	awk -v w="$_w" -v v="$_v" -v l="$_lim" -v ld="$_loads" 'BEGIN {
		at = ld != "" ? sprintf(" [load %s]", ld) : "";
		if (v <= l) printf "TARGET %s: met (%.3g <= %.3g)%s\n", w, v, l, at;
		else printf "TARGET %s: MISSED by %.0f%% (%.3g > %.3g)%s\n", w, (v / l - 1) * 100, v, l, at }'
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }' || true; }
ref_of() { awk -v k="$1" '$1 == k { print $4; exit }' "$FIGS"; }
big=262144 small=1000
target "grant of 64 blocks at $big / at $small blocks <= 1.5x" "$(ratio "$(val grant64_s@sim$big)" "$(val grant64_s@sim$small)")" 1.5 grant64_s@sim$big grant64_s@sim$small
target "revocation of 64 blocks at $big / at $small blocks <= 1.5x" "$(ratio "$(val revoke64_s@sim$big)" "$(val revoke64_s@sim$small)")" 1.5 revoke64_s@sim$big revoke64_s@sim$small
target "agent CPU of a 64-block grant at $big / at $small blocks <= 1.5x" "$(ratio "$(val grant64_cpu_ms@sim$big)" "$(val grant64_cpu_ms@sim$small)")" 1.5 grant64_cpu_ms@sim$big grant64_cpu_ms@sim$small
target "agent CPU of a 64-block revocation at $big / at $small blocks <= 1.5x" "$(ratio "$(val revoke64_cpu_ms@sim$big)" "$(val revoke64_cpu_ms@sim$small)")" 1.5 revoke64_cpu_ms@sim$big revoke64_cpu_ms@sim$small
target "GET /v1/status at $big / at $small blocks <= 1.5x" "$(ratio "$(val status_median_ms@sim$big)" "$(val status_median_ms@sim$small)")" 1.5 status_median_ms@sim$big status_median_ms@sim$small
target "grant per block at 16384 / at 512 <= 1.2x" "$(ratio "$(val grant_ms_per_block@16384)" "$(val grant_ms_per_block@512)")" 1.2 grant_ms_per_block@16384 grant_ms_per_block@512
target "revocation per block at 16384 / at 512 <= 1.2x" "$(ratio "$(val revoke_ms_per_block@16384)" "$(val revoke_ms_per_block@512)")" 1.2 revoke_ms_per_block@16384 revoke_ms_per_block@512
set -- $FG
if [ $# -ge 2 ]; then
	fs=$1 fb=$(echo "$FG" | awk '{ print $NF }')
	target "grant per block on a simfs tree at $fb / at $fs <= 1.2x" "$(ratio "$(val tree_grant_ms_per_block@$fb)" "$(val tree_grant_ms_per_block@$fs)")" 1.2 tree_grant_ms_per_block@$fb tree_grant_ms_per_block@$fs
	target "revocation per block on a simfs tree at $fb / at $fs <= 1.2x" "$(ratio "$(val tree_revoke_ms_per_block@$fb)" "$(val tree_revoke_ms_per_block@$fs)")" 1.2 tree_revoke_ms_per_block@$fb tree_revoke_ms_per_block@$fs
	target "grant per block on a simfs tree at $fb / memgrantctl --sysroot steps <= 1.5x" "$(ratio "$(val tree_grant_ms_per_block@$fb)" "$(ref_of tree_grant_ms_per_block@$fb)")" 1.5 tree_grant_ms_per_block@$fb
	target "revocation per block on a simfs tree at $fb / memgrantctl --sysroot steps <= 1.5x" "$(ratio "$(val tree_revoke_ms_per_block@$fb)" "$(ref_of tree_revoke_ms_per_block@$fb)")" 1.5 tree_revoke_ms_per_block@$fb
fi
target "grant per block at 16384 / memgrantctl --sim steps <= 1.5x" "$(ratio "$(val grant_ms_per_block@16384)" "$(ref_of grant_ms_per_block@16384)")" 1.5 grant_ms_per_block@16384
target "revocation per block at 16384 / memgrantctl --sim steps <= 1.5x" "$(ratio "$(val revoke_ms_per_block@16384)" "$(ref_of revoke_ms_per_block@16384)")" 1.5 revoke_ms_per_block@16384
target "system calls per block of memgrantd on the sim (its helper's writes apart) <= 30" "$(val syscalls_per_block@$ST)" 30 syscalls_per_block@$ST
target "system calls per block of memgrantd on a simfs tree (its helper's writes apart) <= 20" "$(val tree_syscalls_per_block@$STF)" 20 tree_syscalls_per_block@$STF
target "RSS after $C cycles of $n / after the first <= 1.1x" "$(ratio "$(val "rss_after_${C}_cycles_kb@$n")" "$(ref_of "rss_after_${C}_cycles_kb@$n")")" 1.1 "rss_after_${C}_cycles_kb@$n"
[ -n "$CL" ] && [ "$CL" -gt "$C" ] &&
	target "RSS after $CL cycles of $n / after the first <= 1.15x" "$(ratio "$(val "rss_after_${CL}_cycles_kb@$n")" "$(ref_of "rss_after_${CL}_cycles_kb@$n")")" 1.15 "rss_after_${CL}_cycles_kb@$n"
target "idle RSS <= 6144 kB" "$(val rss_idle_kb@cycles)" 6144 rss_idle_kb@cycles
target "idle Pss_Anon <= 1024 kB" "$(val pss_anon_idle_kb@cycles)" 1024 pss_anon_idle_kb@cycles
target "idle threads <= 4" "$(val threads_idle@cycles)" 4 threads_idle@cycles
rb=$(val "ready_rss_kb@sim$big") rs=$(val "ready_rss_kb@sim$small")
if [ -n "$rb" ] && [ -n "$rs" ]; then
	fig "ready_bytes_per_block@sim$big" "$(awk -v a="$rb" -v b="$rs" -v n=$((big - small)) 'BEGIN { printf "%.1f", (a - b) * 1024 / n }')" B
	target "memory at ready per block (RSS at $big blocks less at $small) <= 24 B" "$(val "ready_bytes_per_block@sim$big")" 24 "ready_rss_kb@sim$big" "ready_rss_kb@sim$small"
fi
target "start-up to ready at $big blocks, sim <= 0.5 s" "$(val startup_s@sim$big)" 0.5 startup_s@sim$big
target "start-up to ready at $big blocks, tree <= 3 s" "$(val startup_s@tree$big)" 3 startup_s@tree$big
