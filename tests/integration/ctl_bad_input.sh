#!/bin/sh
# Bad input to memgrantctl: a clear error that names the problem, a non-zero
# exit, and nothing changed (the sim state file, its state directory and its
# tree byte-identical).
set -eu
BUILD=${BUILD:-build}
CTL=$BUILD/memgrantctl
[ -x "$CTL" ] || { echo "no $CTL"; exit 1; }

tmp=$(mktemp -d /tmp/memgrant-bad.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sim=$tmp/sim.json
fail=0 n=0

"$CTL" sim init "$sim" --online 2G --standby 2G --block-size 128M
"$CTL" --sim "$sim" block configure 16

snapshot() { # the file, and every file of its tree and state folder: names and contents
	{
		sha256sum "$1"
		find "$1.tree" "$1.d" -type f -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 -r sha256sum
	} | sha256sum
}

# bad FILE EXPECTED-TEXT -- memgrantctl ARGS...: must fail, say EXPECTED-TEXT, change nothing in FILE
bad() {
	file=$1 want=$2
	shift 3
	n=$((n + 1))
	before=$(snapshot "$file")
	rc=0
	"$CTL" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	after=$(snapshot "$file")
	if [ "$rc" -eq 0 ]; then
		echo "FAIL: memgrantctl $* succeeded"
		fail=1
	fi
	if ! grep -q -- "$want" "$tmp/err"; then
		echo "FAIL: memgrantctl $*: error does not say '$want':"
		sed 's/^/    /' "$tmp/err"
		fail=1
	fi
	if [ "$before" != "$after" ]; then
		echo "FAIL: memgrantctl $* changed $file"
		fail=1
	fi
}

S="--sim $sim"
# unknown block, block out of range; the good block in the list is not touched either
bad "$sim" "block 'abc'" -- $S block online abc
bad "$sim" "block 99: out of range (this machine has blocks 0-31)" -- $S block configure 17 99
bad "$sim" "out of range" -- $S block deconfigure 16 32
bad "$sim" "block 18446744073709551615: out of range" -- $S block configure 18446744073709551615
bad "$sim" "too large" -- $S block configure 99999999999999999999
bad "$sim" "unknown option '-1'" -- $S block online -1
bad "$sim" "ends before it starts" -- $S block configure 20-17
bad "$sim" "given twice" -- $S block configure 17 17
bad "$sim" "unknown action 'enable'" -- $S block enable 17
bad "$sim" "expected on or off (also 1/0, true/false, always/never), not 'maybe'" -- $S block memmap maybe 17
bad "$sim" "expected Movable or Normal (any case)" -- $S block online 16 --zone dma
bad "$sim" "only applies to 'online'" -- $S block offline 5 --zone movable
bad "$sim" "no block numbers" -- $S block online
bad "$sim" "mutually exclusive" -- $S --sysroot "$tmp" block online 16
bad "$sim" "give --sim FILE or --sysroot DIR" -- block online 16

# --sim and --sysroot name a backend for lsmem and block: the agent commands go
# through memgrantd, so with them it is a usage error (exit 1) that says so,
# not "memgrantd is not running"
for cmd in "grant 128M" "revoke 128M" "status" "grants" "wait g-1" "cancel g-1" "adopt 16" "events"; do
	# shellcheck disable=SC2086
	bad "$sim" "--sim applies only to lsmem and block (and sim); grant, revoke, status" -- \
		--socket "$tmp/none.sock" $S $cmd
	grep -q "not running\|no socket" "$tmp/err" && { echo "FAIL: $cmd with --sim asked for memgrantd:"; cat "$tmp/err"; fail=1; }
	rc=0
	# shellcheck disable=SC2086
	"$CTL" --sysroot "$tmp" $cmd >/dev/null 2>"$tmp/err" || rc=$?
	[ "$rc" -eq 1 ] || { echo "FAIL: --sysroot DIR $cmd exited $rc, not 1 (usage error)"; fail=1; }
	grep -q -- "--sysroot applies only to lsmem and block" "$tmp/err" ||
		{ echo "FAIL: --sysroot DIR $cmd:"; cat "$tmp/err"; fail=1; }
done
rc=0
"$CTL" --sim "$sim" grant 128M >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: --sim FILE grant exited $rc, not 1 (usage error)"; fail=1; }

# malformed sizes: sim init over the existing sim must leave it alone
# (1.5G is a size as lsmem prints it; 1.3G is not whole 128M blocks)
for size in 2X -1G 99999999999999G "" 1.3G; do
	bad "$sim" "--online" -- sim init "$sim" --online "$size"
	bad "$sim" "--standby" -- sim init "$sim" --standby "$size"
	bad "$sim" "--block-size" -- sim init "$sim" --block-size "$size"
done
bad "$sim" "too large" -- sim init "$sim" --online 99999999999999G
bad "$sim" "invalid size '2X'" -- sim init "$sim" --used 2X
bad "$sim" "power of two" -- sim init "$sim" --block-size 100M
bad "$sim" "multiple of the block size" -- sim init "$sim" --online 2000M
bad "$sim" "not one of offline" -- sim init "$sim" --auto-online sometimes
bad "$sim" "unexpected argument" -- sim init "$sim" extra

# fault lists
bad "$sim" "malformed block list" -- sim fault "$sim" --configure-eio 1,,2
bad "$sim" "block 40: out of range" -- sim fault "$sim" --offline-ebusy 3,40
bad "$sim" "invalid duration" -- sim fault "$sim" --latency 5x

# lsmem options
bad "$sim" "unknown column: BOGUS" -- $S lsmem -o RANGE,BOGUS
bad "$sim" "unsupported --summary argument" -- $S lsmem --summary=sometimes
bad "$sim" "mutually exclusive" -- $S lsmem -J -r
bad "$sim" "mutually exclusive" -- $S lsmem --summary=only -P

# corrupt or truncated state files: every command refuses them, they stay as they are
cp "$sim" "$tmp/good.json"
cp -r "$sim.tree" "$tmp/trunc.json.tree"
head -c 100 "$sim" >"$tmp/trunc.json"
cp -r "$sim.tree" "$tmp/garbage.json.tree"
printf 'this is not json\n' >"$tmp/garbage.json"
cp -r "$sim.tree" "$tmp/empty.json.tree"
: >"$tmp/empty.json"
cp -r "$sim.tree" "$tmp/types.json.tree"
sed 's/"block_size": *[0-9]*/"block_size": "128M"/' "$sim" >"$tmp/types.json"
cmp -s "$sim" "$tmp/types.json" && { echo "FAIL: could not corrupt block_size"; fail=1; }
for f in trunc garbage empty types; do
	st=$tmp/$f.json
	bad "$st" "sim state $st" -- --sim "$st" lsmem
	bad "$st" "sim state $st" -- --sim "$st" block configure 17
	bad "$st" "sim state $st" -- --sim "$st" block offline 3
	bad "$st" "sim state $st" -- sim fault "$st" --latency 5
	bad "$st" "not a usable sim state file" -- sim init "$st" --online 1G
done
bad "$sim" "no such file" -- --sim "$tmp/missing.json" lsmem

# the good sim still works and was never changed by any of the above
cmp -s "$sim" "$tmp/good.json" || { echo "FAIL: sim state changed"; fail=1; }
"$CTL" --sim "$sim" lsmem -o BLOCK,STATE,CONFIGURED >"$tmp/out"
grep -q '^   16 offline        yes$' "$tmp/out" || { echo "FAIL: sim lost block 16:"; cat "$tmp/out"; fail=1; }

# partial success exits 64 like chmem, with a line per refused block (C7 EIO, W6 EBUSY)
"$CTL" sim fault "$sim" --configure-eio 18 --offline-ebusy 4
rc=0
"$CTL" --sim "$sim" block configure 17 18 2>"$tmp/err" || rc=$?
[ "$rc" -eq 64 ] || { echo "FAIL: partial configure exited $rc, not 64"; fail=1; }
grep -qx 'memgrantctl: block 18: the hypervisor could not assign the storage (EIO)' "$tmp/err" ||
	{ echo "FAIL: EIO message:"; cat "$tmp/err"; fail=1; }
rc=0
"$CTL" --sim "$sim" block offline 4 2>"$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || { echo "FAIL: failed offline exited $rc, not 1"; fail=1; }
grep -q 'block 4: .*cannot be migrated.* (EBUSY)' "$tmp/err" || { echo "FAIL: EBUSY message:"; cat "$tmp/err"; fail=1; }
rc=0
"$CTL" --sim "$sim" block deconfigure 0 2>"$tmp/err" || rc=$?
grep -qx 'memgrantctl: block 0: block must be offline before it can be deconfigured (EBUSY)' "$tmp/err" ||
	{ echo "FAIL: C10 message:"; cat "$tmp/err"; fail=1; }
"$CTL" --sim "$sim" lsmem -o BLOCK,STATE,CONFIGURED >"$tmp/out"
grep -q '^16-17 offline        yes$' "$tmp/out" && grep -q '^18-31 offline         no$' "$tmp/out" ||
	{ echo "FAIL: after partial configure:"; cat "$tmp/out"; fail=1; }

echo "$n bad inputs checked"
exit $fail
