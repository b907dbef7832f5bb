#!/bin/sh
# memgrantctl on a sim, in the words of lsmem and chmem, with nothing else
# around: block lists and address ranges, memmap and zone spellings, sizes
# with a fraction, -v as chmem -v prints it, --json; and bad words refused
# with a clear message, exit 1 and the sim state unchanged.
set -eu
BUILD=${BUILD:-build}
CTL=$BUILD/memgrantctl
T=$(mktemp -d /tmp/memgrant-words.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sim=$T/sim.json
S="--sim $sim"
"$CTL" sim init "$sim" --online 2G --standby 2G --block-size 128M

# the sim's state: its file and its state directory (FILE.d), if any
state() { find "$sim" "$sim.d" -type f 2>/dev/null | LC_ALL=C sort | xargs cat | sha256sum; }
# bad WANT ARGS...: exit 1, stderr says WANT, the sim's state unchanged
bad() {
	want=$1
	shift
	before=$(state)
	rc=0
	"$CTL" "$@" > "$T/out" 2> "$T/err" || rc=$?
	[ $rc -eq 1 ] || fail "memgrantctl $*: exit $rc, want 1"
	grep -q -- "$want" "$T/err" || fail "memgrantctl $*: does not say '$want': $(cat "$T/err")"
	[ "$(state)" = "$before" ] || fail "memgrantctl $* changed the sim"
}
bad "expected on or off" $S block memmap 17
bad "start and end + 1 must be aligned to the memory block size (128M)" $S block configure 0x80000000-0x88000000
bad "malformed block list '16,,17'" $S block configure 16,,17
bad "block 99: out of range" $S block configure 17,99
bad "the nearest valid sizes are 1.875G and 2G" sim init "$sim" --online 2000M
bad "the nearest valid sizes are 1.25G and 1.375G" sim init "$sim" --standby 1.3G
bad "--online" sim init "$sim" --online 1.5
bad "--online" sim init "$sim" --online .5G

# a size with a fraction as lsmem prints it
"$CTL" sim init "$T/frac.json" --online 1.5G --standby 2.25G --block-size 128M
"$CTL" --sim "$T/frac.json" lsmem --summary=only > "$T/out"
grep -q 'Total online memory: *1.5G' "$T/out" || fail "1.5G online: $(cat "$T/out")"

# block lists, address ranges and -v as chmem -v prints it
"$CTL" $S block -v configure 16,17,20-21 > "$T/out"
cat > "$T/want" <<'OUT'
Memory Block 16 (0x0000000080000000-0x0000000087ffffff) configured
Memory Block 17 (0x0000000088000000-0x000000008fffffff) configured
Memory Block 20 (0x00000000a0000000-0x00000000a7ffffff) configured
Memory Block 21 (0x00000000a8000000-0x00000000afffffff) configured
OUT
cmp -s "$T/out" "$T/want" || fail "block -v configure: $(cat "$T/out")"
"$CTL" $S block --verbose online 0x80000000-0x8fffffff --zone MOVABLE > "$T/out"
grep -qx 'Memory Block 17 (0x0000000088000000-0x000000008fffffff) enabled' "$T/out" || fail "online range: $(cat "$T/out")"
"$CTL" $S lsmem -o BLOCK,STATE,ZONES -r -n > "$T/lsmem"
grep -qx '16-17 online Movable' "$T/lsmem" || fail "blocks 16-17 not online in Movable: $(cat "$T/lsmem")"
# memmap in another spelling, on a deconfigured block
"$CTL" $S block memmap 0 22
"$CTL" $S block memmap true 22
# a refused step: stderr says why, -v lists it as chmem does, exit 64 for partly done
rc=0
"$CTL" $S block -v deconfigure 17 20 > "$T/out" 2> "$T/err" || rc=$?
[ $rc -eq 64 ] || fail "partial deconfigure: exit $rc, want 64"
grep -qx 'Memory Block 17 (0x0000000088000000-0x000000008fffffff) deconfigure failed' "$T/out" || fail "-v failure line: $(cat "$T/out")"
grep -qx 'Memory Block 20 (0x00000000a0000000-0x00000000a7ffffff) deconfigured' "$T/out" || fail "-v done line: $(cat "$T/out")"
grep -q 'block 17: block must be offline before it can be deconfigured (EBUSY)' "$T/err" || fail "reason: $(cat "$T/err")"
# --json: each block's step and result
rc=0
"$CTL" $S block --json offline 16,40 > "$T/out" 2>/dev/null || rc=$?
[ $rc -eq 1 ] || fail "out of range with --json: exit $rc"
"$CTL" $S block --json offline 16 0x88000000-0x8fffffff > "$T/json"
python3 - "$T/json" <<'PY' || fail "block --json: $(cat "$T/json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["action"] == "offline" and j["done"] == 2 and j["failed"] == 0, j
assert [b["block"] for b in j["blocks"]] == [16, 17], j
assert all(b["result"] == "done" and b["step"] == "offline" for b in j["blocks"]), j
PY
echo ok
