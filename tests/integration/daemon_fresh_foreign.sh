#!/bin/sh
# No journal at all next to standby memory that is online (a lost state_dir,
# blocks brought up by hand): memgrantd warns once, naming the blocks, and
# they stay foreign: no grant owns them and no revocation takes them, until
# an operator adopts them (memgrantctl adopt: then they are granted and
# revocable, durably) or releases them (block offline/deconfigure).
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL --sim "$SIM" block configure 16 17 > /dev/null || fail "configure 16 17"
$MEMGRANTCTL --sim "$SIM" block online 16 17 > /dev/null || fail "online 16 17"
[ ! -e "$T/state" ] || fail "state dir exists before the first start"

start_daemon
grep -q "foreign standby memory: 2 blocks (16-17) are configured and owned by no grant: there is no journal in $T/state" "$T/daemon.log" ||
	fail "no warning naming exactly the online standby blocks (16 17, not boot memory)"
grep "foreign standby memory" "$T/daemon.log" | grep -q "memgrantctl adopt 16-17" ||
	fail "the warning does not say what to do"
$CTL grants --json > "$T/grants" || fail "grants"
expect_eq "grants after a fresh start" "$(jget "$(cat "$T/grants")" grants)" "[]"
# no grant on top of memory that may be one already (a re-sent grant after a lost journal)
$CTL grant 128M --wait > "$T/g0" 2>&1 && fail "a grant was applied next to foreign blocks: $(cat "$T/g0")"
grep -q "memgrantctl adopt 16-17" "$T/g0" || fail "the grant's refusal does not say what to do: $(cat "$T/g0")"
before=$(online_bytes)
$CTL revoke 128M --wait --json > "$T/r1" 2>&1 && fail "a revocation took a foreign block: $(cat "$T/r1")"
expect_eq "online bytes after the refused revocation" "$(online_bytes)" "$before"
$MEMGRANTCTL --sim "$SIM" lsmem -J > "$T/lsmem" || fail "lsmem"
python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["memory"]
on = [b for b in m if b["state"] == "online"]
if not on: sys.exit("no online range: %s" % m)' "$T/lsmem" || fail "lsmem"

# adopt: refusals name the block and why, and change nothing
adopt_fails() { # blocks expected-message
	$CTL adopt "$1" > "$T/adopt" 2>&1 && fail "adopt $1 was accepted: $(cat "$T/adopt")"
	grep -q "$2" "$T/adopt" || fail "adopt $1: expected '$2', got: $(cat "$T/adopt")"
}
adopt_fails 9999 "block 9999: no such memory block"
adopt_fails 3 "block 3 is boot memory"
adopt_fails 20 "block 20 is standby"
adopt_fails 16,20 "block 20 is standby"
adopt_fails 16,16 "16"
adopt_fails x "adopt BLOCKS"
kinds() { python3 -c 'import json,sys; print(" ".join("%s:%s:%s" % (g["kind"], g["state"], g["owned_blocks"]) for g in json.loads(sys.argv[1])["grants"]))' "$1"; }
expect_eq "records after refused adoptions" "$(kinds "$($CTL grants --json)")" "grant:rejected:0 revoke:rejected:0"
expect_eq "foreign blocks before adopt" "$(jget "$($CTL status --json)" memory.foreign_blocks)" 2
$CTL adopt 16 > "$T/adopt" 2>&1 || fail "adopt 16: $(cat "$T/adopt")"
grep -q "adopted 1 block (128M) into grant local-" "$T/adopt" || fail "adopt 16 said: $(cat "$T/adopt")"
adopt_fails 16 "block 16 is owned by local-"
st=$($CTL status --json)
expect_eq "foreign blocks after adopt" "$(jget "$st" memory.foreign_blocks)" 1
expect_eq "granted bytes after adopt" "$(jget "$st" memory.granted_bytes)" 134217728
# durable before acknowledged: a SIGKILL right after the answer keeps it
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
start_daemon
expect_eq "records after a kill" "$(kinds "$($CTL grants --json)")" "grant:rejected:0 revoke:rejected:0 grant:applied:1"
# now it is granted: a revocation takes it, and only it (17 stays foreign)
$CTL revoke 128M --wait > "$T/r2" 2>&1 || fail "revoking the adopted block: $(cat "$T/r2")"
expect_eq "online bytes after revoking the adopted block" "$(online_bytes)" "$((before - 134217728))"
$MEMGRANTCTL --sim "$SIM" lsmem -J -o RANGE,STATE > "$T/lsmem2" || fail "lsmem"
python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))["memory"]
sys.exit(0 if {"range": "0x0000000088000000-0x000000008fffffff", "state": "online"} in m else 1)' "$T/lsmem2" || fail "block 17 (foreign) was taken: $(cat "$T/lsmem2")"
# the other way out: release by hand; then nothing is foreign
$MEMGRANTCTL --sim "$SIM" block offline 17 > /dev/null || fail "offline 17"
$MEMGRANTCTL --sim "$SIM" block deconfigure 17 > /dev/null || fail "deconfigure 17"
sleep 1
expect_eq "foreign blocks after the release" "$(jget "$($CTL status --json)" memory.foreign_blocks)" 0
stop_daemon

# the journal exists now: no warning on the next start
: > "$T/daemon.log"
start_daemon
grep -q "no journal in" "$T/daemon.log" && fail "warned again with a journal present"
stop_daemon
echo ok
