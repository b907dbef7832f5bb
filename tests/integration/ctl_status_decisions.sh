#!/bin/sh
# memgrantctl status prints what memgrantctl(8) says it prints: the policy in
# force and the policy's decisions, with their reasons, for the operation
# running or else the last one accepted (named by "decisions of:").
. "$(dirname "$0")/lib.sh"
start_daemon

$CTL status > "$T/s0.txt" || fail "status exited $?"
cat "$T/s0.txt"
grep -q '^policy: *zone auto, memmap_on_memory auto, reserve 256M, movable ratio [0-9]*%$' "$T/s0.txt" ||
	fail "no policy line: $(cat "$T/s0.txt")"
grep -q '^decisions of:' "$T/s0.txt" && fail "decisions shown before any operation"

$CTL grant 512M --id g-1 --wait > /dev/null || fail "grant g-1"
$CTL status > "$T/s1.txt" || fail "status exited $?"
cat "$T/s1.txt"
grep -q '^decisions of: *grant g-1, applied$' "$T/s1.txt" || fail "g-1 not named: $(cat "$T/s1.txt")"
# the same decisions, in the same order, as the grant's own view
$CTL grants g-1 --json > "$T/g1.json" || fail "grants g-1 --json"
python3 - "$T/g1.json" "$T/s1.txt" <<'PY' || fail "decisions differ"
import json, sys
want = json.load(open(sys.argv[1]))["decisions"]
got = [l.split(":", 1)[1].strip() for l in open(sys.argv[2]) if l.startswith("decision:")]
assert want and got == want, (got, want)
PY

$CTL revoke --grant g-1 --id r-1 --wait > /dev/null || fail "revoke r-1"
$CTL status > "$T/s2.txt" || fail "status exited $?"
cat "$T/s2.txt"
grep -q '^decisions of: *revoke r-1, applied$' "$T/s2.txt" || fail "r-1 not named: $(cat "$T/s2.txt")"
grep -q '^decision: *revoke: grant g-1: 512M in 4 blocks' "$T/s2.txt" || fail "r-1 decision: $(cat "$T/s2.txt")"
stop_daemon
echo ok
