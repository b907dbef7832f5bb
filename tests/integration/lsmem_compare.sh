#!/bin/sh
# For generic columns, `memgrantctl --sim F lsmem ARGS` and util-linux
# `lsmem --sysroot TREE ARGS` on the sim's tree must print the same.
#
# The system lsmem here may be older than 2.42: it does not read
# sys/firmware/memory, so the machines compared are ones where that does not
# matter (C0: no firmware; or every standby block configured, so the device
# directories and the firmware entries list the same blocks).  Two known
# differences of older releases are normalised: the summary label width
# (%-23s before, %-32s in 2.42) and the "Memmap on memory parameter:" line
# (2.42 only).
#
# The direct form (`memgrantctl --sysroot TREE lsmem`, agent/ctl/lsmem/lsmemread.c) is
# compared on the same trees, and on a tree shaped like util-linux's aarch64
# dump (first block memory8192, no memory0).  Releases before 2.39 look for
# zones in memory0 only, so on that tree the ZONES comparisons need a newer
# lsmem: LSMEM_UPSTREAM=path/to/lsmem (util-linux head, bench/upstream-lsmem.sh)
# runs every comparison against it as well.
set -eu
BUILD=${BUILD:-build}
CTL=$BUILD/memgrantctl
LSMEM=${LSMEM:-$(command -v lsmem || true)}
if [ -z "$LSMEM" ]; then
	echo "skipped: no lsmem (util-linux) on this machine"
	exit 77
fi
if ! "$LSMEM" --help 2>/dev/null | grep -q -- '--sysroot'; then
	echo "skipped: $LSMEM has no --sysroot"
	exit 77
fi
[ -x "$CTL" ] || { echo "no $CTL"; exit 1; }

tmp=$(mktemp -d /tmp/memgrant-lsmem.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0

norm() {
	sed -e '/^Memmap on memory parameter:/d' \
	    -e '/^\(Memory block size\|Total online memory\|Total offline memory\):/s/  */ /g' "$1"
}

# compare SIMFILE ARGS...: the sim's view and the direct form of its tree
compare() {
	sim=$1
	shift
	compare_one "--sim $sim" "$sim.tree" "$@"
	compare_one "--sysroot $sim.tree" "$sim.tree" "$@"
}

# compare_one "GLOBAL OPTIONS" TREE ARGS...
compare_one() {
	how=$1 tree=$2
	shift 2
	n=$((n + 1))
	rc1=0 rc2=0
	# shellcheck disable=SC2086
	"$CTL" $how lsmem "$@" >"$tmp/ours" 2>&1 || rc1=$?
	"$LSMEM" --sysroot "$tree" "$@" >"$tmp/theirs" 2>&1 || rc2=$?
	norm "$tmp/ours" >"$tmp/ours.n"
	norm "$tmp/theirs" >"$tmp/theirs.n"
	if [ "$rc1" -ne "$rc2" ] || ! cmp -s "$tmp/ours.n" "$tmp/theirs.n"; then
		echo "FAIL: memgrantctl $how lsmem $* against $LSMEM (exit $rc1, lsmem exit $rc2)"
		diff -u "$tmp/theirs.n" "$tmp/ours.n" | sed 's/^/    /' || true
		fail=1
	fi
}

ARGSETS='"" "-a" "-b" "-n" "-J" "-J -b" "-J -a" "-r" "-r -a -b" "-P" "-P -a" \
		"--summary=only" "--summary=only -b" "--summary=never" "--summary=always -r" \
		"-o RANGE,SIZE,STATE,REMOVABLE,BLOCK,NODE,ZONES" "-o +NODE,ZONES -a" \
		"-o BLOCK,ZONES" "-o SIZE,NODE -J" "-o zones,state -P" "-o STATE -S none" \
		"-S ZONES" "--output-all" "-o RANGE -S STATE,NODE" "-o SIZE -o BLOCK,STATE" \
		"--summary=never --split=STATE,REMOVABLE"'
# options of newer releases, compared when the reference knows them
if "$LSMEM" --help 2>/dev/null | grep -q -- '--annotate'; then
	ARGSETS="$ARGSETS \"--annotate -o BLOCK,STATE\" \"--annotate=never -r\""
fi

compare_all() {
	sim=$1
	eval "set -- $ARGSETS"
	for args in "$@"; do
		# with firmware entries 2.42 adds CONFIGURED and MEMMAP-ON-MEMORY to --output-all
		if [ "$args" = "--output-all" ] && [ -d "$sim.tree/sys/firmware/memory" ]; then
			continue
		fi
		# shellcheck disable=SC2086
		compare "$sim" $args
	done
}

# 1. host without sys/firmware/memory (C0), boot state
"$CTL" sim init "$tmp/nofw" --online 2G --standby 2G --block-size 128M --no-firmware
compare_all "$tmp/nofw"

# 2. the same with mixed states and zones (W5: online_movable / default policy, W6)
"$CTL" --sim "$tmp/nofw" block online 17 20 --zone movable
"$CTL" --sim "$tmp/nofw" block online 18
"$CTL" --sim "$tmp/nofw" block offline 3
compare_all "$tmp/nofw"

# 3. s390 with firmware entries, every standby block configured (C7), some online
"$CTL" sim init "$tmp/fw" --online 1G --standby 1G --block-size 256M
"$CTL" --sim "$tmp/fw" block configure 4-7
"$CTL" --sim "$tmp/fw" block online 5 --zone movable
"$CTL" --sim "$tmp/fw" block offline 1
compare_all "$tmp/fw"

# 4. the shape of util-linux's aarch64 dump: no memory0, a hole, zones and nodes
a64=$tmp/aarch64/sys/devices/system/memory
mkdir -p "$a64" "$tmp/aarch64/sys/devices/system/node/node0"
printf '8000000\n' >"$a64/block_size_bytes"
printf 'offline\n' >"$a64/auto_online_blocks"
for i in $(seq 8192 8319); do
	[ "$i" -eq 8317 ] || [ "$i" -eq 8318 ] && continue
	mkdir "$a64/memory$i"
	printf 'online\n' >"$a64/memory$i/state"
	printf '1\n' >"$a64/memory$i/online"
	printf '1\n' >"$a64/memory$i/removable"
	if [ "$i" -lt 8200 ]; then z=DMA; else z=Normal; fi
	printf '%s\n' "$z" >"$a64/memory$i/valid_zones"
	ln -s ../../node/node0 "$a64/memory$i/node0"
done
old_zones=0
"$LSMEM" --sysroot "$tmp/aarch64" -o ZONES -n -r --summary=never | grep -q "[A-Za-z]" || old_zones=1
eval "set -- $ARGSETS"
for args in "$@"; do
	case $args in *[Zz][Oo][Nn][Ee][Ss]*|--output-all) [ $old_zones -eq 0 ] || continue ;; esac
	# shellcheck disable=SC2086
	compare_one "--sysroot $tmp/aarch64" "$tmp/aarch64" $args
done
# whatever lsmem is installed: the zones come from the first block present
"$CTL" --sysroot "$tmp/aarch64" lsmem -o BLOCK,ZONES -r -n >"$tmp/zones"
if ! grep -qx '8192-8199 DMA' "$tmp/zones" || ! grep -qx '8200-8316 Normal' "$tmp/zones"; then
	echo "FAIL: no ZONES without memory0: $(cat "$tmp/zones")"
	fail=1
fi

# 5. options of lsmem beyond the table: -V, LSMEM_COLUMNS, --annotate's words
n=$((n + 1))
"$CTL" --sysroot "$tmp/aarch64" lsmem -V | grep -Eqx 'memgrantctl lsmem from memgrant [0-9][^ ]*' ||
	{ echo "FAIL: lsmem -V: $("$CTL" lsmem -V 2>&1)"; fail=1; }
n=$((n + 1))
LSMEM_COLUMNS=BLOCK,STATE "$CTL" --sysroot "$tmp/aarch64" lsmem -n -r --summary=never >"$tmp/ours"
printf '8192-8316 online\n8319 online\n' >"$tmp/want"
cmp -s "$tmp/ours" "$tmp/want" || { echo "FAIL: LSMEM_COLUMNS"; diff "$tmp/want" "$tmp/ours"; fail=1; }
LSMEM_COLUMNS=BLOCK "$CTL" --sysroot "$tmp/aarch64" lsmem -n -r --summary=never -o STATE >"$tmp/ours"
printf 'online\nonline\n' >"$tmp/want"
cmp -s "$tmp/ours" "$tmp/want" || { echo "FAIL: -o over LSMEM_COLUMNS"; diff "$tmp/want" "$tmp/ours"; fail=1; }
n=$((n + 1))
"$CTL" --sysroot "$tmp/aarch64" lsmem --annotate=never -o BLOCK -n -r --summary=never >"$tmp/ours"
printf '8192-8316\n8319\n' >"$tmp/want"
cmp -s "$tmp/ours" "$tmp/want" || { echo "FAIL: --annotate=never"; diff "$tmp/want" "$tmp/ours"; fail=1; }
n=$((n + 1))
rc=0
"$CTL" --sysroot "$tmp/aarch64" lsmem --annotate=sometimes >/dev/null 2>"$tmp/err" || rc=$?
if [ $rc -ne 1 ] || ! grep -q "invalid argument of --annotate: sometimes" "$tmp/err"; then
	echo "FAIL: --annotate=sometimes: exit $rc, $(cat "$tmp/err")"
	fail=1
fi

# 5b. no --sim/--sysroot/--socket and a daemon socket that does not answer:
# this machine's /sys read directly (read only), with a note.  Not under
# qemu-user (.ci/s390x.sh sets TEST_WRAPPER): its -L ROOT maps the open of
# "/" to the target root, and the reads relative to that directory find no
# sys/ there (the same reads through --sysroot are compared above).
if [ -n "${TEST_WRAPPER:-}" ]; then
	echo "5b skipped: under qemu-user '/' is the target root, which has no /sys"
elif [ -f /sys/devices/system/memory/block_size_bytes ]; then
	n=$((n + 1))
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/stale.sock"
	rc=0
	MEMGRANT_SOCKET=$tmp/stale.sock "$CTL" lsmem --summary=only >"$tmp/ours" 2>"$tmp/err" || rc=$?
	if [ $rc -ne 0 ] || ! grep -q "reading this machine's /sys directly" "$tmp/err" || ! grep -q "^Memory block size:" "$tmp/ours"; then
		echo "FAIL: fallback to /sys: exit $rc, $(cat "$tmp/err")"
		fail=1
	fi
fi

# 6. against util-linux head when given: every comparison, firmware trees too
if [ -n "${LSMEM_UPSTREAM:-}" ]; then
	LSMEM=$LSMEM_UPSTREAM
	"$CTL" sim init "$tmp/fw2" --online 1G --standby 1G --block-size 256M
	"$CTL" --sim "$tmp/fw2" block configure 4
	"$CTL" --sim "$tmp/fw2" block online 4 --zone movable
	for sim in "$tmp/nofw" "$tmp/fw" "$tmp/fw2"; do
		eval "set -- $ARGSETS"
		for args in "$@"; do
			# shellcheck disable=SC2086
			compare_one "--sysroot $sim.tree" "$sim.tree" $args
		done
	done
	eval "set -- $ARGSETS"
	for args in "$@"; do
		# shellcheck disable=SC2086
		compare_one "--sysroot $tmp/aarch64" "$tmp/aarch64" $args
	done
fi

echo "$n comparisons"
exit $fail
