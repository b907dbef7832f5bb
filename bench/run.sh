#!/bin/sh
# memgrant's benchmark suite (`make bench`): every figure as a ratio to a
# reference measured in the same run, block counts varied so that growth
# shows.  Prints text and writes $OUT/summary.json (and $OUT/bench.txt).
# Asserts nothing: the targets are in docs/performance.md.
#
# Everything runs in a temporary directory: sims made with memgrantctl,
# sysfs-shaped trees made by bench/mktree.py.  Nothing touches /sys.
#
# Sizes (environment):
#   BENCH_GRANT_SIZES   blocks per grant         default "64 512", plus 4096
#                                                when a sim write is cheap
#   BENCH_SIM_SIZES     sim sizes for one write  default "64 512 8192"
#   BENCH_SIM_WRITES    writes timed per size    default 32
#   BENCH_DISCOVER      blocks for lsmem         default 65536
#   BENCH_IDLE_SECS     idle window              default 60
#   BENCH_PAIRS         grant+revoke pairs       default 10000, fewer when the
#                                                sim is slow (fits BENCH_PAIRS_SECS, 150)
#   BENCH_RSS_BLOCKS    grant for the RSS figure default the largest grant size
#   BENCH_INTENT_4096   1: the journal-cost figures (bench/intent_cost.sh) also
#                       at 4,096 blocks (minutes on the sim); default 64 only
#   LSMEM_UPSTREAM      util-linux lsmem to compare with (bench/upstream-lsmem.sh);
#                       else $OUT/lsmem-upstream if built, else the system's lsmem
#   UTIL_LINUX_SRC      a util-linux checkout: build $OUT/lsmem-upstream from it
#   BENCH_FLEET_N       section 9's fleet (bench/fleet.sh): 20 agents, a 10 s
#                       outage and window (a minute or two); 0 skips it; the
#                       issue's 500 agents: FLEET_N=500 sh bench/fleet.sh
#   BENCH_SCALE_*       section 8's sizes (bench/scale.sh): MACHINES "1000 65536
#                       262144", TREES "65536 262144", GRANTS "512 4096 16384",
#                       CYCLES 6 of CYCLE_BLOCKS 4096, STRACE 512
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
OUT=${OUT:-$BUILD/bench}
mkdir -p "$OUT"
# the text goes to the terminal and to $OUT/bench.txt; the exit status stays ours
if [ -z "${BENCH_INNER:-}" ]; then
	rcf=$(mktemp)
	{
		rc=0
		BENCH_INNER=1 sh "$0" "$@" || rc=$?
		echo "$rc" >"$rcf"
	} 2>&1 | tee "$OUT/bench.txt"
	rc=$(cat "$rcf")
	rm -f "$rcf"
	exit "$rc"
fi
CTL=$BUILD/memgrantctl
D=$BUILD/memgrantd
BENCH=$(pwd)/bench
# sims and the daemons' state on disk (their fsyncs are part of the cost);
# the generated sysfs-shaped trees in memory, as sysfs is (BENCH_TREES)
T=$(mktemp -d "${TMPDIR:-/tmp}/memgrant-bench.XXXXXX")
TREES=${BENCH_TREES:-/dev/shm}
[ -d "$TREES" ] && [ -w "$TREES" ] || TREES=${TMPDIR:-/tmp}
TT=$(mktemp -d "$TREES/memgrant-bench-trees.XXXXXX")
PIDS=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T" "$TT"
}
trap cleanup EXIT INT TERM
FIGS=$OUT/figures.jsonl
: >"$FIGS"

now() { date +%s.%N; }
# fig KEY VALUE UNIT [REF_VALUE REF_LABEL]: one figure, a line of text and of JSON
# fig KEY VALUE UNIT [REFERENCE LABEL [LOAD]]: LOAD, the load average when
# the figure was taken, printed beside it
fig() {
	_k=$1 _v=${2:-null} _u=$3 _r=${4:-} _rl=${5:-} _ld=${6:-}
	_lp=${_ld:+  load $_ld} _lj=${_ld:+,\"load\":$_ld}
	if [ -n "$_r" ]; then
		_x=$(awk -v a="$_v" -v b="$_r" 'BEGIN { if (b > 0 && a != "null") printf "%.2f", a / b; else print "null" }')
		printf '  %-44s %12s %-7s ref %10s %-7s %6sx  (%s)%s\n' "$_k" "$_v" "$_u" "$_r" "$_u" \
			"$(echo "$_x" | sed 's/null/-/')" "$_rl" "$_lp"
		printf '{"key":"%s","value":%s,"unit":"%s","reference":%s,"reference_is":"%s","ratio":%s%s}\n' \
			"$_k" "$_v" "$_u" "$_r" "$_rl" "$_x" "$_lj" >>"$FIGS"
	else
		printf '  %-44s %12s %s%s\n' "$_k" "$_v" "$_u" "$_lp"
		printf '{"key":"%s","value":%s,"unit":"%s"%s}\n' "$_k" "$_v" "$_u" "$_lj" >>"$FIGS"
	fi
}
note() { printf '  note: %s\n' "$*"; printf '{"note":"%s"}\n' "$(echo "$*" | sed 's/"/\\"/g')" >>"$FIGS"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
ms_per() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.3f", s * 1000 / n }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# time_cmd CMD...: wall seconds of one run (output discarded)
time_cmd() {
	t0=$(now)
	"$@" >/dev/null 2>&1 || { echo "bench: failed: $*" >&2; return 1; }
	secs "$t0" "$(now)"
}
# time3 CMD...: median of three runs
time3() {
	for _ in 1 2 3; do time_cmd "$@"; done | median
}
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
io_of() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/io"; }
# context switches of every thread: each one a wake-up or a preemption
ctxsw() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'; }
ranges() { echo "$1-$(($1 + $2 - 1))"; }

# daemon_start NAME: starts memgrantd on $T/NAME.yaml (sim_yaml writes it), sets DPID
daemon_start() {
	name=$1
	"$D" -c "$T/$name.yaml" --foreground >"$T/$name.log" 2>&1 &
	DPID=$!
	PIDS="$PIDS $DPID"
	i=0
	until "$CTL" --socket "$T/$name.sock" status >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 "$DPID" 2>/dev/null; then
			echo "bench: memgrantd $name did not come up:" >&2
			tail -5 "$T/$name.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}
daemon_stop() {
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
sim_yaml() { # NAME STANDBY_BYTES BLOCK [extra lines]: writes $T/NAME.yaml
	name=$1 standby=$2 bs=$3
	shift 3
	{
	cat <<YAML
agent: {id: bench-$name, state_dir: $T/$name.state, api_socket: $T/$name.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/$name.sim, online: 2G, standby: $standby, block_size: $bs}
policy: {zone: movable, memmap_on_memory: always, reserve: 0, revoke_budget: 600s}
YAML
	for l in "$@"; do echo "$l"; done
	} >"$T/$name.yaml"
}

# NAME's sim in a folder of its own: the sim's watch wakes for every entry of
# the folder of its state file, and the idle daemons must not see the others'
sim_own_dir() {
	mkdir -p "$T/$1.d"
	sed -i "s|state: $T/$1.sim,|state: $T/$1.d/$1.sim,|" "$T/$1.yaml"
}

# ---- the machine -------------------------------------------------------------
start=$(now)
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "memgrant bench: $(cat VERSION 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "machine: $(nproc) cores ($cpu), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)"
echo "sims and state on $(df -T "$T" | awk 'NR == 2 { print $2 }') ($T), generated trees on $(df -T "$TT" | awk 'NR == 2 { print $2 }') ($TT)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows in every figure)"

if [ -z "${LSMEM_UPSTREAM:-}" ] && [ -n "${UTIL_LINUX_SRC:-}" ]; then
	sh "$BENCH/upstream-lsmem.sh" "$UTIL_LINUX_SRC" "$OUT/lsmem-upstream" >/dev/null
fi
if [ -z "${LSMEM_UPSTREAM:-}" ] && [ -x "$OUT/lsmem-upstream" ]; then
	LSMEM_UPSTREAM=$OUT/lsmem-upstream
fi
SYS_LSMEM=$(command -v lsmem || true)
REF_LSMEM=${LSMEM_UPSTREAM:-$SYS_LSMEM}
if [ -n "$REF_LSMEM" ]; then
	echo "lsmem reference: $REF_LSMEM ($("$REF_LSMEM" -V 2>/dev/null | head -1))"
else
	echo "lsmem reference: none installed (lsmem figures skipped)"
fi

# ---- 1. one sim write against one write into a sysfs-shaped tree -------------
echo
echo "1. one write (block configure N): the sim against a sysfs-shaped tree (--sysroot)"
K=${BENCH_SIM_WRITES:-32}
sim_write_ms_max=0
for n in ${BENCH_SIM_SIZES:-64 512 8192}; do
	"$CTL" sim init "$T/w$n.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
	python3 "$BENCH/mktree.py" "$TT/w$n.tree" $((n + 16)) --online 16 --firmware
	# the cost of a write is the difference between K+1 writes and one,
	# so that the process start and the discovery of the machine drop out
	s1=$(time_cmd "$CTL" --sim "$T/w$n.sim" block configure 16)
	s=$(time_cmd "$CTL" --sim "$T/w$n.sim" block configure "$(ranges 17 "$K")")
	# a write into a tree costs so little that it needs more of them to show
	KR=$((n < 1024 ? n : 1024))
	r1=$(time_cmd "$CTL" --sysroot "$TT/w$n.tree" block configure 16)
	r=$(time_cmd "$CTL" --sysroot "$TT/w$n.tree" block configure "$(ranges 17 $((KR - 1)))")
	simw=$(awk -v a="$s" -v b="$s1" -v k="$K" 'BEGIN { v = (a - b) * 1000 / (k - 1); printf "%.3f", (v > 0 ? v : 0) }')
	refw=$(awk -v a="$r" -v b="$r1" -v k="$KR" 'BEGIN { v = (a - b) * 1000 / (k - 2); printf "%.3f", (v > 0 ? v : 0.001) }')
	fig "sim_write_ms@$n" "$simw" ms "$refw" "--sysroot tree"
	sim_write_ms_max=$(awk -v a="$simw" -v b="$sim_write_ms_max" 'BEGIN { print ((a > b) ? a : b) }')
	rm -rf "$TT/w$n.tree" "$T/w$n.sim"*
done

# ---- 2. block configure of 8,192 blocks, --sysroot, against a shell loop ---------
echo
echo "2. block configure of 8192 blocks into a sysfs-shaped tree: memgrantctl --sysroot vs echo 1 > config"
python3 "$BENCH/mktree.py" "$TT/c.tree" 8208 --online 16 --firmware
c=$(time_cmd "$CTL" --sysroot "$TT/c.tree" block configure "$(ranges 16 8192)")
t0=$(now)
(cd "$TT/c.tree/sys/firmware/memory" && i=16 && while [ $i -lt 8208 ]; do echo 1 >memory$i/config; i=$((i + 1)); done)
e=$(secs "$t0" "$(now)")
fig "configure_8192_sysroot_s" "$c" s "$e" "shell loop"
rm -rf "$TT/c.tree"

# ---- 3. grants through memgrantd against the same steps with memgrantctl --------
echo
echo "3. grant and revocation of N blocks through memgrantd (sim, 2G online, 128M blocks)"
echo "   against the same steps with memgrantctl --sim (memmap on, configure, online / offline, deconfigure)"
sizes=${BENCH_GRANT_SIZES:-}
if [ -z "$sizes" ]; then
	sizes="64 512"
	if awk -v m="$sim_write_ms_max" 'BEGIN { exit !(m <= 1.0) }'; then sizes="64 512 4096"; fi
	note "grant sizes: $sizes (sim write up to $sim_write_ms_max ms; 4096 only when <= 1 ms)"
fi
last=
for n in $sizes; do last=$n; done
RSS_N=${BENCH_RSS_BLOCKS:-$last}
for n in $sizes; do
	name=g$n
	sim_yaml "$name" $((n * 128))M 128M
daemon_start "$name"
	pid=$DPID
	rss0=$(rss_kb "$pid")
	w0=$(io_of "$pid" wchar)
	b0=$(io_of "$pid" write_bytes)
	t0=$(now)
	"$CTL" --socket "$T/$name.sock" grant $((n * 128))M --wait >"$T/$name.grant" 2>&1 ||
		{ echo "bench: grant of $n blocks failed: $(tail -3 "$T/$name.grant")"; exit 1; }
	g=$(secs "$t0" "$(now)")
	w1=$(io_of "$pid" wchar)
	b1=$(io_of "$pid" write_bytes)
	t0=$(now)
	"$CTL" --socket "$T/$name.sock" revoke $((n * 128))M --wait >"$T/$name.revoke" 2>&1 ||
		{ echo "bench: revocation of $n blocks failed: $(tail -3 "$T/$name.revoke")"; exit 1; }
	v=$(secs "$t0" "$(now)")
	w2=$(io_of "$pid" wchar)
	b2=$(io_of "$pid" write_bytes)
	rss1=$(rss_kb "$pid")
	jsize=$(wc -c <"$T/$name.state/journal.log" 2>/dev/null || echo 0)
	daemon_stop "$pid"

	"$CTL" sim init "$T/r$n.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
	rg=$(ranges 16 "$n")
	t0=$(now)
	"$CTL" --sim "$T/r$n.sim" block memmap on "$rg" >/dev/null
	"$CTL" --sim "$T/r$n.sim" block configure "$rg" >/dev/null
	"$CTL" --sim "$T/r$n.sim" block online "$rg" --zone movable >/dev/null
	rgs=$(secs "$t0" "$(now)")
	t0=$(now)
	"$CTL" --sim "$T/r$n.sim" block offline "$rg" >/dev/null
	"$CTL" --sim "$T/r$n.sim" block deconfigure "$rg" >/dev/null
	rvs=$(secs "$t0" "$(now)")
	rm -rf "$T/r$n.sim"* "$T/$name.sim"*

	fig "grant_s@$n" "$g" s "$rgs" "memgrantctl steps"
	fig "grant_ms_per_block@$n" "$(ms_per "$g" "$n")" ms "$(ms_per "$rgs" "$n")" "memgrantctl steps"
	fig "revoke_s@$n" "$v" s "$rvs" "memgrantctl steps"
	fig "grant_bytes_written@$n" $((w1 - w0)) B
	fig "grant_bytes_to_disk@$n" $((b1 - b0)) B
	fig "revoke_bytes_written@$n" $((w2 - w1)) B
	fig "journal_bytes_after@$n" "$jsize" B
	if [ "$n" = "$RSS_N" ]; then
		fig "rss_before_grant_kb@$n" "$rss0" kB
		fig "rss_after_grant_revoke_kb@$n" "$rss1" kB "$rss0" "before"
	fi
done

# fsyncs per block operation: a 64-block grant and revocation under strace
# (seccomp-filtered, so only the counted calls stop), and the same steps
echo
echo "   fsyncs (fsync + fdatasync) per block, 64 blocks"
if command -v strace >/dev/null 2>&1; then
	n=64 name=f64
	sim_yaml "$name" $((n * 128))M 128M
	strace -f -c -U calls,name -e trace=fsync,fdatasync,sync_file_range --seccomp-bpf -o "$T/$name.strace" \
		"$D" -c "$T/$name.yaml" --foreground >"$T/$name.log" 2>&1 &
	spid=$!
	PIDS="$PIDS $spid"
	i=0
	until "$CTL" --socket "$T/$name.sock" status >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -lt 600 ] || { echo "bench: traced memgrantd did not come up"; exit 1; }
		sleep 0.1
	done
	"$CTL" --socket "$T/$name.sock" grant $((n * 128))M --wait >/dev/null
	"$CTL" --socket "$T/$name.sock" revoke $((n * 128))M --wait >/dev/null
	dpid=$(cat /proc/"$spid"/task/*/children 2>/dev/null | awk '{ print $1; exit }')
	[ -n "$dpid" ] && kill -TERM "$dpid"
	wait "$spid" 2>/dev/null || true
	dsync=$(awk '$2 ~ /^(fsync|fdatasync|sync_file_range)$/ { s += $1 } END { print s + 0 }' "$T/$name.strace")
	"$CTL" sim init "$T/fr.sim" --online 2G --standby $((n * 128))M --block-size 128M >/dev/null
	rg=$(ranges 16 "$n")
	rsync=0
	for step in "memmap on $rg" "configure $rg" "online $rg --zone movable" "offline $rg" "deconfigure $rg"; do
		# shellcheck disable=SC2086
		strace -f -c -U calls,name -e trace=fsync,fdatasync,sync_file_range --seccomp-bpf -o "$T/fr.strace" \
			"$CTL" --sim "$T/fr.sim" block $step >/dev/null
		rsync=$((rsync + $(awk '$2 ~ /^(fsync|fdatasync|sync_file_range)$/ { s += $1 } END { print s + 0 }' "$T/fr.strace")))
	done
	# a grant and its revocation are 5 steps per block
	fig "fsyncs_per_block_step@64" "$(awk -v s="$dsync" -v n=$((5 * n)) 'BEGIN { printf "%.2f", s / n }')" "" \
		"$(awk -v s="$rsync" -v n=$((5 * n)) 'BEGIN { printf "%.2f", s / n }')" "memgrantctl steps"
	rm -rf "$T/fr.sim"* "$T/$name.sim"*
else
	note "strace not installed: no fsync counts"
fi

# journal cost per operation: one intent and one result, whatever the size
echo
echo "   journal per grant and revocation (bench/intent_cost.sh; BENCH_INTENT_4096=1 adds 4096 blocks)"
isizes=64
[ "${BENCH_INTENT_4096:-}" = 1 ] && isizes="64 4096"
# shellcheck disable=SC2086
BUILD=$BUILD BENCH_FIGS=1 sh "$BENCH/intent_cost.sh" $isizes >"$T/intent.out" 2>&1 ||
	{ echo "bench: intent_cost.sh failed: $(tail -3 "$T/intent.out")"; exit 1; }
sed -n 's/^FIG //p' "$T/intent.out" | while read -r k v u r rl; do fig "$k" "$v" "$u" "${r:-}" "${rl:-}"; done

# ---- 4. lsmem at BENCH_DISCOVER blocks -----------------------------------------------
N=${BENCH_DISCOVER:-65536}
echo
echo "4. lsmem at $N blocks (128M, a quarter online, Normal and Movable halves)"
python3 "$BENCH/mktree.py" "$TT/l.tree" "$N"
if [ -n "$REF_LSMEM" ]; then
	ours=$(time3 "$CTL" --sysroot "$TT/l.tree" lsmem)
	ref=$(time3 "$REF_LSMEM" --sysroot "$TT/l.tree")
	fig "lsmem_sysroot_s@$N" "$ours" s "$ref" "$(basename "$REF_LSMEM") --sysroot"
	refdef=$ref
	ours=$(time_cmd "$CTL" --sysroot "$TT/l.tree" lsmem -o +NODE,ZONES)
	ref=$(time_cmd "$REF_LSMEM" --sysroot "$TT/l.tree" -o +NODE,ZONES)
	fig "lsmem_sysroot_node_zones_s@$N" "$ours" s "$ref" "$(basename "$REF_LSMEM") --sysroot"
	if [ -n "$SYS_LSMEM" ] && [ "$SYS_LSMEM" != "$REF_LSMEM" ]; then
		fig "lsmem_debian_s@$N" "$(time_cmd "$SYS_LSMEM" --sysroot "$TT/l.tree")" s "$refdef" "$(basename "$REF_LSMEM")"
	fi
	same=0
	for args in "" "-a" "-J -o +NODE,ZONES" "-P -a -b"; do
		# shellcheck disable=SC2086
		"$CTL" --sysroot "$TT/l.tree" lsmem $args >"$T/l.ours"
		# shellcheck disable=SC2086
		"$REF_LSMEM" --sysroot "$TT/l.tree" $args >"$T/l.ref"
		if cmp -s "$T/l.ours" "$T/l.ref"; then same=$((same + 1)); else note "lsmem $args: output differs from $REF_LSMEM"; fi
	done
	fig "lsmem_identical_outputs@$N" "$same" "of 4"
	if command -v strace >/dev/null 2>&1; then
		strace -c -U calls -o "$T/l.st" "$CTL" --sysroot "$TT/l.tree" lsmem >/dev/null
		a=$(awk '$1 ~ /^[0-9]+$/ && NF == 2 && $2 != "total" { s += $1 } END { print s }' "$T/l.st")
		strace -c -f -U calls -o "$T/l.st" "$REF_LSMEM" --sysroot "$TT/l.tree" >/dev/null
		b=$(awk '$1 ~ /^[0-9]+$/ && NF == 2 && $2 != "total" { s += $1 } END { print s }' "$T/l.st")
		fig "lsmem_sysroot_syscalls@$N" "$a" calls "$b" "$(basename "$REF_LSMEM")"
	fi
fi
rm -rf "$TT/l.tree"

# through the daemon: its block table against lsmem on the sim's own tree
sb=16M
name=big
sim_yaml "$name" "$(((N - 128) * 16))M" "$sb"
# the sim's tree has an entry per block: in memory with the other trees
sed -i "s|state: $T/$name.sim,|state: $TT/$name.sim,|" "$T/$name.yaml"
daemon_start "$name"
BIGPID=$DPID
if [ -n "$REF_LSMEM" ]; then
	ours=$(time3 "$CTL" --socket "$T/$name.sock" lsmem)
	ref=$(time3 "$REF_LSMEM" --sysroot "$TT/$name.sim.tree")
	fig "lsmem_daemon_s@$N" "$ours" s "$ref" "$(basename "$REF_LSMEM") --sysroot (sim tree)"
	fig "lsmem_sim_s@$N" "$(time3 "$CTL" --sim "$TT/$name.sim" lsmem)" s "$ref" "$(basename "$REF_LSMEM") --sysroot (sim tree)"
	"$CTL" --socket "$T/$name.sock" lsmem >"$T/d.ours" 2>&1 || true
	"$REF_LSMEM" --sysroot "$TT/$name.sim.tree" >"$T/d.ref"
	if cmp -s "$T/d.ours" "$T/d.ref"; then fig "lsmem_daemon_identical@$N" 1 "of 1"; else
		fig "lsmem_daemon_identical@$N" 0 "of 1"; note "lsmem through the daemon differs: $(diff "$T/d.ref" "$T/d.ours" | head -3 | tr '\n' ' ')"; fi
	bytes=$(curl -s --unix-socket "$T/$name.sock" http://x/v1/blocks | wc -c)
	fig "blocks_json_bytes@$N" "$bytes" B
fi

# ---- 5. /v1/status and /metrics while a grant runs -------------------------------
echo
echo "5. GET /v1/status and /metrics at $N blocks while a grant runs (one connection, 200 requests or 20 s)"
"$CTL" --socket "$T/$name.sock" grant 4G >/dev/null
i=0
until "$CTL" --socket "$T/$name.sock" status 2>/dev/null | grep -q '^running: *grant'; do
	i=$((i + 1)); [ $i -lt 100 ] || { note "the grant did not start"; break; }
	sleep 0.05
done
for path in /v1/status /metrics; do
	set -- $(python3 "$BENCH/apiclient.py" latency "$T/$name.sock" "$path" 200 20)
	what=$(echo "$path" | tr -d / | sed 's/v1//')
	fig "${what}_median_ms@$N" "$1" ms 1 "target"
	fig "${what}_p99_ms@$N" "$2" ms 5 "target"
	[ "$4" -ge 200 ] || note "$path: $4 requests in 20 s"
done
if "$CTL" --socket "$T/$name.sock" status 2>/dev/null | grep -q '^running: *nothing'; then
	note "the grant had finished before the last request"
fi
daemon_stop "$BIGPID"
rm -rf "$TT/$name.sim"*

# ---- 7 (started here, printed after 6). many grants through the local API -----------
# The idle daemons of section 6 are other processes: the pairs' work shares the
# CPU with them but cannot wake them, so both run in the same two minutes.
per_pair=$(awk -v m="$sim_write_ms_max" 'BEGIN { printf "%.4f", (5 * m + 10) * 1.4 / 1000 }')
pairs=${BENCH_PAIRS:-$(awk -v p="$per_pair" -v b="${BENCH_PAIRS_SECS:-120}" 'BEGIN { n = int(b / p); if (n > 10000) n = 10000; if (n < 50) n = 50; print n }')}
sim_yaml many 4G 128M
sim_own_dir many
daemon_start many
P_MANY=$DPID
rss_many0=$(rss_kb "$P_MANY")
python3 "$BENCH/apiclient.py" pairs "$T/many.sock" "$pairs" 128M >"$T/pairs.out" 2>&1 &
P_PAIRS=$!
PIDS="$PIDS $P_PAIRS"

# ---- 6. idle: wake-ups and RSS ---------------------------------------------------------
IDLE=${BENCH_IDLE_SECS:-60}
echo
echo "6. idle for $IDLE s: context switches (wake-ups), syscalls and RSS"
sim_yaml api 2G 128M
sim_own_dir api
daemon_start api
P_API=$DPID
# the port's directory exists and stays quiet: inotify wakes for its entries only
mkdir -p "$T/ports"
sim_yaml chan 2G 128M "providers:" "  channel: {path: $T/ports/no-such-port}"
sim_own_dir chan
daemon_start chan
P_CHAN=$DPID
sim_yaml https 2G 128M "providers:" "  https: {url: 'https://127.0.0.1:9/memgrant', wait: 30s}"
sim_own_dir https
daemon_start https
P_HTTPS=$DPID
sleep 7 # start-up work and the channel's first quick retries (5 s) are over
# first window: context switches of every thread (each one a wake-up), nothing attached
c_api=$(ctxsw "$P_API") c_chan=$(ctxsw "$P_CHAN") c_https=$(ctxsw "$P_HTTPS")
sleep "$IDLE"
fig "idle_wakeups_api" $(($(ctxsw "$P_API") - c_api)) "in ${IDLE}s" 0 "target"
fig "idle_wakeups_channel_no_host" $(($(ctxsw "$P_CHAN") - c_chan)) "in ${IDLE}s" 0 "target"
fig "idle_wakeups_api_https_unreachable" $(($(ctxsw "$P_HTTPS") - c_https)) "in ${IDLE}s"
# second window: which system calls (strace's attach itself switches context)
if command -v strace >/dev/null 2>&1; then
	sc=
	for p in $P_API $P_CHAN; do
		strace -f -c -U calls,name -o "$T/idle.$p" -p "$p" 2>/dev/null &
		sc="$sc $!"
		PIDS="$PIDS $!"
	done
	sleep "$IDLE"
	for s in $sc; do kill -INT "$s" 2>/dev/null || true; done
	for s in $sc; do wait "$s" 2>/dev/null || true; done
	for p in $P_API $P_CHAN; do
		[ -f "$T/idle.$p" ] || continue
		k=api
		[ "$p" = "$P_CHAN" ] && k=channel_no_host
		fig "idle_syscalls_$k" "$(awk '$1 ~ /^[0-9]+$/ && NF == 2 && $2 != "total" { s += $1 } END { print s + 0 }' "$T/idle.$p")" \
			"in ${IDLE}s" 0 "target"
		top=$(awk '$1 ~ /^[0-9]+$/ && NF == 2 && $2 != "total" { printf "%s %s, ", $2, $1 }' "$T/idle.$p")
		[ -z "$top" ] || note "idle syscalls ($k): $top"
	done
fi
fig "idle_rss_kb_api" "$(rss_kb "$P_API")" kB 6144 "target"
fig "idle_rss_kb_api_https" "$(rss_kb "$P_HTTPS")" kB 6144 "target"
fig "idle_threads_api_https" "$(ls /proc/"$P_HTTPS"/task | wc -l)" ""
# where the resident memory of the HTTPS-configured daemon is
awk '/^[0-9a-f]+-[0-9a-f]+ / { name = (NF >= 6) ? $6 : "[anon]"; sub(".*/", "", name) }
     /^Rss:/ { rss[name] += $2 }
     END { for (n in rss) if (rss[n] >= 64) printf "%d %s\n", rss[n], n }' "/proc/$P_HTTPS/smaps" |
	sort -rn | head -8 | awk '{ printf "%s %s kB, ", $2, $1 }' >"$T/rss.where"
note "RSS by mapping (api+https): $(cat "$T/rss.where")"
for p in $P_API $P_CHAN $P_HTTPS; do daemon_stop "$p"; done

echo
echo "7. grant+revocation pairs of one block through the local API, first tenth against last tenth"
[ "$pairs" -ge 10000 ] || note "pairs: $pairs, not 10000 (the sim costs about $per_pair s per pair today; BENCH_PAIRS=10000 for all)"
wait "$P_PAIRS" || { echo "bench: pairs failed: $(cat "$T/pairs.out")"; exit 1; }
set -- $(cat "$T/pairs.out")
fig "pairs_per_s_last_tenth@$pairs" "$2" "1/s" "$1" "first tenth"
fig "pairs_total_s@$pairs" "$3" s
fig "pairs_failed@$pairs" "$4" ""
fig "pairs_rss_kb_after@$pairs" "$(rss_kb "$P_MANY")" kB "$rss_many0" "before"
fig "pairs_journal_bytes@$pairs" "$(wc -c <"$T/many.state/journal.log" 2>/dev/null || echo 0)" B
daemon_stop "$P_MANY"

# ---- 8. cost against machine and grant sizes (issue 22's targets) --------------------
echo
echo "8. machine sizes (sims of 1000-262144 blocks, trees), grant sizes up to 16384 blocks (bench/scale.sh)"
BUILD=$BUILD sh "$BENCH/scale.sh" >"$T/scale.out" 2>&1 || { echo "bench: scale.sh failed: $(tail -3 "$T/scale.out")"; exit 1; }
sed -n 's/^FIG //p' "$T/scale.out" | while read -r k v u ld r rl; do fig "$k" "$v" "$u" "${r:-}" "${rl:-}" "${ld#load=}"; done
sed -n 's/^NOTE //p' "$T/scale.out" | while read -r l; do note "$l"; done
sed -n 's/^TARGET /  target: /p' "$T/scale.out"

# ---- 9. the idle agent's footprint (issue 22's targets) -----------------------------
echo
echo "9. the idle agent: RSS, Pss_Anon, threads, libraries, wake-ups; HTTPS to a silent control plane; memgrantctl status (bench/idle.sh)"
FIGS=$FIGS IDLE_SECS=$IDLE BUILD=$BUILD sh "$BENCH/idle.sh" >"$T/idle.out" 2>&1 || { echo "bench: idle.sh failed: $(tail -3 "$T/idle.out")"; exit 1; }
tail -n +2 "$T/idle.out"

# ---- 10. a fleet against one control plane (bench/fleet.sh, issue 24) -----------------
if [ "${BENCH_FLEET_N:-20}" -gt 0 ]; then
	echo
	echo "10. a fleet of ${BENCH_FLEET_N:-20} agents against the reference control plane (bench/fleet.sh; larger: FLEET_N=500 sh bench/fleet.sh)"
	FLEET_N=${BENCH_FLEET_N:-20} FLEET_OUTAGE=${FLEET_OUTAGE:-10} FLEET_WINDOW=${FLEET_WINDOW:-10} \
		FLEET_WAIT=${FLEET_WAIT:-5s} FLEET_SCENARIOS=${FLEET_SCENARIOS:-"outage grant window"} \
		BUILD=$BUILD sh "$BENCH/fleet.sh" >"$T/fleet.out" 2>&1 ||
		echo "bench: fleet.sh failed: $(tail -3 "$T/fleet.out")"
	sed -n '/^fleet of/,$p' "$T/fleet.out"
fi

# ---- 11. memgrant-host serve with 1,000 guests (bench/serve_scale.c) ------------------
echo
echo "11. memgrant-host serve's tick with 1000 guests (fake hypervisor and agents): CPU per guest, status file writes (build/bench/serve_scale)"
if [ -x "$BUILD/bench/serve_scale" ]; then
	BENCH_FIGS=1 "$BUILD/bench/serve_scale" >"$T/serve.out" 2>&1 ||
		{ echo "bench: serve_scale failed: $(tail -3 "$T/serve.out")"; exit 1; }
	sed -n 's/^FIG //p' "$T/serve.out" | while read -r k v u ld r rl; do fig "$k" "$v" "$u" "${r:-}" "${rl:-}" "${ld#load=}"; done
	sed -n 's/^NOTE //p' "$T/serve.out" | while read -r l; do note "$l"; done
	sed -n 's/^TARGET /  target: /p' "$T/serve.out"
else
	note "build/bench/serve_scale not built (make bench-bin; memgrant-host needs libvirt): skipped"
fi

# ---- summary --------------------------------------------------------------------------
total=$(secs "$start" "$(now)")
echo
echo "whole run: $total s"
python3 - "$FIGS" "$OUT/summary.json" "$total" "$REF_LSMEM" <<'PY'
import json, sys, os, platform
figs, notes = [], []
for line in open(sys.argv[1]):
    d = json.loads(line)
    (notes.append(d["note"]) if "note" in d else figs.append(d))
out = {"machine": {"cores": os.cpu_count(), "kernel": platform.release()},
       "lsmem_reference": sys.argv[4], "seconds": float(sys.argv[3]),
       "figures": figs, "notes": notes}
json.dump(out, open(sys.argv[2], "w"), indent=1)
print("summary: %s (%d figures)" % (sys.argv[2], len(figs)))
PY
