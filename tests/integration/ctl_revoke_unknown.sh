#!/bin/sh
# memgrantctl revoke --grant ID for a grant memgrantd does not know: "no such
# grant", a non-zero exit, and nothing recorded (the journal's list stays
# empty); the same for a revocation's id given as a grant.  A known grant
# is still revoked.
. "$(dirname "$0")/lib.sh"
start_daemon

for args in "--grant nosuch" "--grant nosuch --wait" "--grant nosuch --dry-run"; do
	# shellcheck disable=SC2086
	$CTL revoke $args > "$T/out" 2> "$T/err" && fail "revoke $args exited 0"
	grep -qx 'memgrantctl: no such grant: nosuch (memgrantctl grants lists them)' "$T/err" ||
		fail "revoke $args said: $(cat "$T/out" "$T/err")"
done
[ "$(jget "$($CTL grants --json)" grants)" = "[]" ] || fail "recorded: $($CTL grants)"

$CTL grant 256M --id g-1 --wait > /dev/null || fail "grant g-1"
$CTL revoke 128M --id r-1 --wait > /dev/null || fail "revoke r-1"
$CTL revoke --grant r-1 2> "$T/err" && fail "revoke --grant r-1 exited 0"
grep -q 'r-1 is a revocation, not a grant' "$T/err" || fail "revoke --grant r-1 said: $(cat "$T/err")"
$CTL grants --json > "$T/g.json" || fail "grants --json"
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["grants"]))' "$T/g.json")
[ "$n" = 2 ] || fail "$n operations recorded, 2 expected: $($CTL grants)"
$CTL revoke --grant g-1 --wait > /dev/null || fail "revoke --grant g-1 of a known grant"
stop_daemon
echo ok
