#!/bin/sh
# No journal at all next to standby memory that is online (a lost state_dir,
# blocks brought up by hand): memgrantd warns once, naming the blocks, and
# they stay foreign: no grant owns them and no revocation takes them.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL --sim "$SIM" block configure 16 17 > /dev/null || fail "configure 16 17"
$MEMGRANTCTL --sim "$SIM" block online 16 17 > /dev/null || fail "online 16 17"
[ ! -e "$T/state" ] || fail "state dir exists before the first start"

start_daemon
grep -q "no journal in $T/state, but 2 standby blocks are online (16 17): they stay foreign" "$T/daemon.log" ||
	fail "no warning naming exactly the online standby blocks (16 17, not boot memory)"
$CTL grants --json > "$T/grants" || fail "grants"
expect_eq "grants after a fresh start" "$(jget "$(cat "$T/grants")" grants)" "[]"
before=$(online_bytes)
$CTL revoke 128M --wait --json > "$T/r1" 2>&1 && fail "a revocation took a foreign block: $(cat "$T/r1")"
expect_eq "online bytes after the refused revocation" "$(online_bytes)" "$before"
$MEMGRANTCTL --sim "$SIM" lsmem -J > "$T/lsmem" || fail "lsmem"
python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["memory"]
on = [b for b in m if b["state"] == "online"]
if not on: sys.exit("no online range: %s" % m)' "$T/lsmem" || fail "lsmem"
stop_daemon

# the journal exists now: no warning on the next start
: > "$T/daemon.log"
start_daemon
grep -q "no journal in" "$T/daemon.log" && fail "warned again with a journal present"
stop_daemon
echo ok
