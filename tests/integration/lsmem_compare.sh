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

# compare SIMFILE ARGS...
compare() {
	sim=$1
	shift
	n=$((n + 1))
	rc1=0 rc2=0
	"$CTL" --sim "$sim" lsmem "$@" >"$tmp/ours" 2>&1 || rc1=$?
	"$LSMEM" --sysroot "$sim.tree" "$@" >"$tmp/theirs" 2>&1 || rc2=$?
	norm "$tmp/ours" >"$tmp/ours.n"
	norm "$tmp/theirs" >"$tmp/theirs.n"
	if [ "$rc1" -ne "$rc2" ] || ! cmp -s "$tmp/ours.n" "$tmp/theirs.n"; then
		echo "FAIL: lsmem $* on $(basename "$sim") (exit $rc1, lsmem exit $rc2)"
		diff -u "$tmp/theirs.n" "$tmp/ours.n" | sed 's/^/    /' || true
		fail=1
	fi
}

compare_all() {
	sim=$1
	for args in "" "-a" "-b" "-n" "-J" "-J -b" "-J -a" "-r" "-r -a -b" "-P" "-P -a" \
		"--summary=only" "--summary=only -b" "--summary=never" "--summary=always -r" \
		"-o RANGE,SIZE,STATE,REMOVABLE,BLOCK,NODE,ZONES" "-o +NODE,ZONES -a" \
		"-o BLOCK,ZONES" "-o SIZE,NODE -J" "-o zones,state -P" "-o STATE -S none" \
		"-S ZONES" "--output-all" "-o RANGE -S STATE,NODE" "-o SIZE -o BLOCK,STATE"; do
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

echo "$n comparisons"
exit $fail
