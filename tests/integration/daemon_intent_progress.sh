#!/bin/sh
# test-runner: alone (it samples an operation in flight: a loaded machine makes the samples too slow to see it)
# While an operation runs, the blocks it has done are its own in memory,
# although nothing is journaled per block: one intent before the first kernel
# write, one result after the last (docs/journal.md).  During a slow grant,
# status and /v1/blocks call its blocks the grant's (never foreign) and
# /v1/grants/ID shows the progress; during its revocation, the blocks taken
# down are not outside changes; each operation costs the journal 3 fsyncs
# (accept, intent, result) whatever its size; a SIGKILL mid-grant leaves an
# open intent that the restart settles from the kernel.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --latency 700 > /dev/null || fail "sim fault"
start_daemon
syncs() { curl -s --unix-socket "$SOCK" http://x/metrics | sed -n 's/^memgrant_journal_syncs_total //p'; }
before=$(online_bytes)

s0=$(syncs)
$CTL grant 1G --id slow > /dev/null || fail "grant not acknowledged"
seen_progress=0
for i in $(seq 1 600); do
	g=$($CTL grants slow --json 2>/dev/null) || g='{}'
	state=$(jget "$g" state)
	[ "$state" = applied ] && break
	st=$($CTL status --json)
	expect_eq "foreign blocks while the grant runs" "$(jget "$st" memory.foreign_blocks)" 0
	done_n=$(jget "$g" blocks_done)
	if [ "$state" = in_progress ] && [ "${done_n:-0}" -gt 0 ] 2>/dev/null; then
		seen_progress=1
		curl -s --unix-socket "$SOCK" http://x/v1/blocks > "$T/blocks" || fail "/v1/blocks"
		python3 - "$T/blocks" <<'PY' || fail "owners while the grant runs"
import json, sys
bl = json.load(open(sys.argv[1]))["blocks"]
for b in bl:
    if b["id"] >= 16 and b["state"] == "online":
        assert b["owner"] == "slow", b
PY
	fi
	sleep 0.05
done
expect_eq "grant state" "$(jget "$($CTL grants slow --json)" state)" applied
[ "$seen_progress" = 1 ] || fail "never saw blocks_done > 0 while the grant ran"
s1=$(syncs)
expect_eq "journal fsyncs of a grant of 8 blocks" "$((s1 - s0))" 3
expect_eq "online bytes after the grant" "$(online_bytes)" "$((before + 1073741824))"

$MEMGRANTCTL sim fault "$SIM" --latency 100 > /dev/null || fail "sim fault"
$CTL revoke --grant slow --wait > "$T/r" 2>&1 || fail "revoke: $(cat "$T/r")"
s2=$(syncs)
expect_eq "journal fsyncs of a revocation of 8 blocks" "$((s2 - s1))" 3
expect_eq "online bytes after the revocation" "$(online_bytes)" "$before"
grep -q "outside memgrant" "$T/daemon.log" && fail "a block the revocation took down was called an outside change"

# SIGKILL in the middle of a grant: the open intent is settled from the kernel
$MEMGRANTCTL sim fault "$SIM" --latency 1000 > /dev/null || fail "sim fault"
$CTL grant 1G --id killed > /dev/null || fail "grant not acknowledged"
i=0
until $CTL status --json | grep -q '"blocks_done": [1-9]'; do
	i=$((i + 1)); [ $i -lt 300 ] || fail "the grant did not start"
	sleep 0.1
done
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
$MEMGRANTCTL sim fault "$SIM" --latency 0 > /dev/null
start_daemon
grep -q "killed: its bring-up of 8 blocks was interrupted: [0-9]* found done (adopted)" "$T/daemon.log" ||
	fail "the restart did not settle the open intent from the kernel"
wait_state killed applied partial failed
g=$($CTL grants killed --json)
expect_eq "state after the restart" "$(jget "$g" state)" applied
expect_eq "applied bytes after the restart" "$(jget "$g" applied_bytes)" 1073741824
expect_eq "online bytes after the restart" "$(online_bytes)" "$((before + 1073741824))"
expect_eq "foreign blocks after the restart" "$(jget "$($CTL status --json)" memory.foreign_blocks)" 0
stop_daemon
echo ok
