#!/bin/sh
# A revocation stuck on busy blocks (sim offline_ebusy 40,41; revoke 8G of
# 64 blocks): status, grants ID and --wait show which blocks are retried,
# how many attempts and how much of the budget is left; the log has one
# line per busy block (per minute) and a closing count, not one per retry;
# SSE progress events carry the changed blocks, not the whole list.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to follow the event stream"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 9G --block-size 128M > /dev/null || fail "sim init"
# long enough for the first pass over 126 blocks on a slow (sanitized) build
REVOKE_BUDGET=20s
start_daemon
$CTL grant 8G --id big --wait > /dev/null || fail "grant 8G"
$MEMGRANTCTL sim fault "$SIM" --offline-ebusy 40,41 > /dev/null || fail "sim fault"
curl -sN --unix-socket "$SOCK" http://agent/v1/events > "$T/events" &
CURL_PID=$!
sleep 0.3

rc=0
$CTL revoke 8G --id back --wait > "$T/out" 2> "$T/err" &
WAIT_PID=$!
# mid-way: status and grants ID name the busy blocks and the budget (one
# memgrantctl call per look, then the other views at once)
i=0
while :; do
	$CTL status > "$T/status"
	[ "$(grep -c '^retrying: *block 4[01], [0-9]* attempts (EBUSY)$' "$T/status")" -eq 2 ] &&
		! grep -q '^retrying: .*, 1 attempts' "$T/status" && break
	i=$((i + 1)); [ $i -gt 300 ] && fail "status never showed 2 busy blocks: $(cat "$T/status")"
	sleep 0.05
done
$CTL grants back > "$T/one"
st=$($CTL status --json)
grep -q '^budget left: *[0-9]* s of 20 s$' "$T/status" || fail "status budget: $(cat "$T/status")"
grep -q '^  retrying: *block 4[01], [0-9]* attempts (EBUSY)$' "$T/one" || fail "grants ID: $(cat "$T/one")"
grep -q '^  budget: *[0-9]* s of 20 s left$' "$T/one" || fail "grants ID budget: $(cat "$T/one")"
busy=$(echo "$st" | python3 -c 'import json,sys; print(",".join(str(b["block"]) for b in sorted(json.load(sys.stdin)["running"]["busy_blocks"], key=lambda b: b["block"])))') ||
	fail "status --json has no busy blocks: $st"
expect_eq "busy blocks" "$busy" 40,41
expect_eq "busy error" "$(jget "$st" running.busy_blocks.0.error)" EBUSY
expect_eq "budget" "$(jget "$st" running.budget_ms)" 20000
left=$(jget "$st" running.budget_left_ms)
[ "$left" -ge 0 ] && [ "$left" -lt 20000 ] || fail "budget_left_ms $left"

wait $WAIT_PID || rc=$?
expect_eq "revoke --wait exit (partial)" "$rc" 64
grep -q '^back: in_progress, 62 of 64 blocks; retrying block 4[01] ([0-9]* attempts, EBUSY), block 4[01] ([0-9]* attempts, EBUSY); [0-9]* s of the 20 s budget left$' "$T/err" ||
	fail "--wait progress: $(cat "$T/err")"
g=$($CTL grants back --json)
expect_eq "back state" "$(jget "$g" state)" partial
expect_eq "back done" "$(jget "$g" blocks_done)" 62
attempts=$(jget "$g" busy_blocks.0.attempts)
[ "$attempts" -ge 3 ] || fail "only $attempts attempts in 20 s"

# the log: the first failure and a closing count per block, not one per retry
kill $CURL_PID 2>/dev/null
n40=$(grep -c 'revocation back: .*block 40' "$T/daemon.log")
expect_eq "log lines about block 40" "$n40" 2
grep -q "revocation back: block 40: still EBUSY after $attempts attempts ($((attempts - 1)) since the last line)" "$T/daemon.log" ||
	grep -q "revocation back: block 40: still EBUSY after [0-9]* attempts" "$T/daemon.log" ||
	fail "no closing line for block 40: $(grep 'block 40' "$T/daemon.log")"

# SSE: progress events without the block list, the final one with all of it
python3 - "$T/events" <<'PY' || fail "SSE events"
import json, sys
evs = [json.loads(l[6:]) for l in open(sys.argv[1]) if l.startswith("data: ")]
back = [e for e in evs if e.get("id") == "back"]
prog = [e for e in back if e["state"] == "in_progress"]
final = [e for e in back if e["state"] == "partial"]
# progress reports are built at most every 100 ms, so the first pass may come
# in a few events carrying several changed blocks each; the retries of the
# two busy blocks are what must stay small
assert len(prog) >= 2, "only %d progress events" % len(prog)
assert all("blocks" not in e for e in prog), "a progress event carries the whole list"
assert len(final) == 1 and len(final[0]["blocks"]) == 64, "the final event has not every block"
retried = [e for e in prog if e["changed_blocks"] and all(b["block"] in (40, 41) for b in e["changed_blocks"])]
assert len(retried) >= 2, "only %d events about the retried blocks" % len(retried)
assert all("busy_blocks" in e for e in retried), "retries without busy_blocks"
assert max(len(json.dumps(e)) for e in retried) < 4096, "a retry event of %d bytes" % max(len(json.dumps(e)) for e in retried)
print("ok SSE: %d progress events, %d about retries, largest retry event %d bytes" % (len(prog), len(retried), max(len(json.dumps(e)) for e in retried)))
PY
stop_daemon
cat "$T/err"; grep 'revocation back' "$T/daemon.log"; echo ok
