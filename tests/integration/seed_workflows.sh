#!/bin/sh
# The four workflows of the seed commit (kernel.md "The seed's workflows"),
# replayed on the sim with memgrantctl block steps.  After every step
# `memgrantctl lsmem -o RANGE,SIZE,STATE,BLOCK,CONFIGURED,MEMMAP_ON_MEMORY`
# must print exactly tests/golden/seed/NN-*.txt, and its rows must be the
# rows of the seed commit message (tests/golden/seed/seed-tables.txt; there
# addresses have 8 hex digits and the spacing is approximate, so they are
# compared with whitespace collapsed).  Rules: C2 C7 C10 C11 C12 C14 W5 W6.
set -eu
BUILD=${BUILD:-build}
CTL=$BUILD/memgrantctl
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/../golden/seed
[ -x "$CTL" ] || { echo "no $CTL"; exit 1; }

tmp=$(mktemp -d /tmp/memgrant-seed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sim=$tmp/sim.json
fail=0

"$CTL" sim init "$sim" --online 2G --standby 2G --block-size 128M

ctl() { "$CTL" --sim "$sim" "$@"; }

# check NAME SEEDSECTION: exact golden, then the seed commit's rows
check() {
	ctl lsmem -o RANGE,SIZE,STATE,BLOCK,CONFIGURED,MEMMAP_ON_MEMORY >"$tmp/out"
	if ! diff -u "$golden/$1.txt" "$tmp/out"; then
		echo "FAIL: step $1 differs from golden"
		fail=1
	fi
	# rows only, 8-digit addresses, single spaces
	sed -n '2,/^$/p' "$tmp/out" | sed '/^$/d' |
		sed 's/0x00000000\([0-9a-f]\{8\}\)/0x\1/g' | tr -s ' ' >"$tmp/rows"
	sed -n "/^$2:/,/^\$/p" "$golden/seed-tables.txt" | sed '1d;/^$/d' | tr -s ' ' >"$tmp/seed"
	if [ ! -s "$tmp/seed" ]; then
		echo "FAIL: no section '$2' in seed-tables.txt"
		fail=1
	elif ! diff -u "$tmp/seed" "$tmp/rows"; then
		echo "FAIL: step $1 rows differ from the seed commit's table '$2'"
		fail=1
	fi
	[ "$fail" -ne 0 ] || echo "ok: $1"
}

check 01-initial initial

# Workflow 1: configure block 16 (C7, memmap stays 1 from C2), then deconfigure it (C11).
ctl block configure 16
check 02-configure16 configure16
ctl block deconfigure 16
check 01-initial initial

# Workflow 2: block 5 offline (W6), deconfigured (C11): memmap stays 0.
ctl block offline 5
check 03-offline5 offline5
ctl block deconfigure 5
check 04-deconfigure5 deconfigure5

# Workflow 3: memmap on (C12, allowed while deconfigured), configure, online.
ctl block memmap on 5
check 05-memmap5 memmap5
ctl block configure 5
check 06-configure5 configure5
ctl block online 5
check 07-online5 online5

# Workflow 4: the same with memmap off; back to the initial table.
ctl block offline 5
ctl block deconfigure 5
check 05-memmap5 memmap5
ctl block memmap off 5
check 04-deconfigure5 deconfigure5
ctl block configure 5
ctl block online 5
check 01-initial initial

# A refused step names block, step and the kernel's reason (C12) and changes nothing.
if ctl block memmap on 16 2>/dev/null && ctl block configure 16 && ctl block memmap off 16 2>"$tmp/err"; then
	echo "FAIL: memmap_on_memory changed on a configured block"
	fail=1
fi
grep -qx 'memgrantctl: block 16: memmap_on_memory can only change while deconfigured (EBUSY)' "$tmp/err" || {
	echo "FAIL: unexpected message:"; cat "$tmp/err"; fail=1; }
ctl block deconfigure 16
check 01-initial initial

exit $fail
