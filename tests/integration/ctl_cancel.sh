#!/bin/sh
# test-runner: alone (it samples an operation in flight: a loaded machine makes the samples too slow to see it)
# memgrantctl cancel ID and POST /v1/grants/ID/cancel:
#  - a queued grant ends cancelled at once (exit 0), nothing applied;
#  - a running grant stops after the block in flight and ends partial
#    (exit 64) with the blocks done still online and owned;
#  - a running revocation likewise: partial, the blocks given back stay back;
#  - final already: 409 EALREADY, exit 1; unknown: 404, exit 1;
#  - every surface agrees: grants table and JSON, the SSE stream, metrics;
#  - the final states survive a restart (journaled, not resumed).
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to send raw API requests"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 4G --block-size 128M > /dev/null || fail "sim init"
start_daemon
curl -sN --unix-socket "$SOCK" http://agent/v1/events > "$T/events" &
CURL_PID=$!

# every kernel write takes 300 ms: 24 blocks take about 15 s
$MEMGRANTCTL sim fault "$SIM" --latency 300 > /dev/null || fail "sim fault --latency"
$CTL grant 3G --id run-1 > /dev/null || fail "grant run-1"
$CTL grant 512M --id queued-1 > /dev/null || fail "grant queued-1"
i=0
until [ "$(jget "$($CTL grants run-1 --json)" blocks_done)" -ge 1 ]; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "run-1 did not get going"; sleep 0.1
done
expect_eq "queued-1 waits" "$(jget "$($CTL grants queued-1 --json)" state)" accepted
# queued: cancelled at once
rc=0
$CTL cancel queued-1 > "$T/out" 2> "$T/err" || rc=$?
expect_eq "cancel queued exit" "$rc" 0
grep -q '^grant queued-1: cancelled, 0B of 512M$' "$T/out" || fail "cancel queued summary: $(cat "$T/out")"
grep -q 'error: cancelled by local (uid [0-9]*) before it started (ECANCELED)' "$T/out" ||
	fail "cancel queued reason: $(cat "$T/out")"
g=$($CTL grants queued-1 --json)
expect_eq "queued-1 state" "$(jget "$g" state)" cancelled
expect_eq "queued-1 applied" "$(jget "$g" applied_bytes)" 0

# mid-operation: online + standby + in flight = total at every look, and a
# block is seen between its two steps (configured, not online yet)
python3 - $CTL <<'PY' > "$T/inflight" || fail "in flight: $(cat "$T/inflight")"
import json, subprocess, sys, time
seen = 0
for i in range(400):  # a loaded machine may miss many looks: on until one saw it
    m = json.loads(subprocess.run(sys.argv[1:] + ["status", "--json"], capture_output=True, text=True).stdout)["memory"]
    assert m["online_bytes"] + m["standby_bytes"] + m["in_flight_bytes"] == m["total_bytes"], m
    seen += m["in_flight_bytes"] > 0
    tot = m["total_bytes"]
    if seen >= 2 or (seen and i >= 40):
        break
    time.sleep(0.03)
assert seen, "no block seen in flight in 400 looks at a grant of 300 ms steps"
print(tot)
PY
tot=$(cat "$T/inflight")
expect_eq "total" "$tot" 6442450944
$CTL status > "$T/status"
grep -q '^in flight: .*online + standby + in flight = 6G)$' "$T/status" || fail "status in flight: $(cat "$T/status")"

i=0
until [ "$(jget "$($CTL grants run-1 --json)" blocks_done)" -ge 4 ]; do
	i=$((i + 1)); [ $i -gt 300 ] && fail "run-1 did not get to 4 blocks"; sleep 0.1
done
# running: stops after the block in flight, partial
rc=0
$CTL cancel run-1 > "$T/out" 2> "$T/err" || rc=$?
expect_eq "cancel running exit (partial)" "$rc" 64
grep -q '^grant run-1: partial, ' "$T/out" || fail "cancel running summary: $(cat "$T/out") $(cat "$T/err")"
g=$($CTL grants run-1 --json)
done_=$(jget "$g" blocks_done)
expect_eq "run-1 state" "$(jget "$g" state)" partial
expect_eq "run-1 error" "$(jget "$g" error.code)" ECANCELED
[ "$done_" -ge 4 ] && [ "$done_" -lt 24 ] || fail "run-1 did $done_ of 24 blocks"
expect_eq "run-1 applied" "$(jget "$g" applied_bytes)" $((done_ * 134217728))
expect_eq "online after the cancel" "$(online_bytes)" $((2147483648 + done_ * 134217728))
grep -q "grant run-1: cancel requested by local (uid [0-9]*) after" "$T/daemon.log" || fail "no log line for the cancel"
# the executor is free again: nothing left running
expect_eq "nothing running" "$(jget "$($CTL status --json)" running)" null

# final already: 409 EALREADY, exit 1
rc=0
$CTL cancel run-1 > "$T/out" 2> "$T/err" || rc=$?
expect_eq "cancel final exit" "$rc" 1
grep -q 'grant run-1 is partial already: nothing to cancel (revoke it to give its memory back)' "$T/err" ||
	fail "cancel final message: $(cat "$T/err")"
code=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X POST http://agent/v1/grants/run-1/cancel)
expect_eq "cancel final HTTP" "$code" 409
expect_eq "cancel final code" "$(jget "$(cat "$T/reply")" error.code)" EALREADY
expect_eq "cancel final status" "$(jget "$(cat "$T/reply")" status.state)" partial
code=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X POST http://agent/v1/grants/nope/cancel)
expect_eq "cancel unknown HTTP" "$code" 404
code=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X GET http://agent/v1/grants/run-1/cancel)
expect_eq "GET on cancel" "$code" 405
rc=0
$CTL cancel nope > "$T/out" 2> "$T/err" || rc=$?
expect_eq "cancel unknown exit" "$rc" 1
grep -q 'no grant or revocation with id "nope"' "$T/err" || fail "cancel unknown message: $(cat "$T/err")"
rc=0
$CTL cancel 'bad id!' > "$T/out" 2> "$T/err" || rc=$?
expect_eq "cancel bad id exit" "$rc" 1

# a running revocation: the blocks given back stay back
$CTL revoke --grant run-1 --id back-1 > /dev/null || fail "revoke back-1"
i=0
until [ "$(jget "$($CTL grants back-1 --json)" blocks_done)" -ge 1 ]; do
	i=$((i + 1)); [ $i -gt 200 ] && fail "back-1 did not get going"; sleep 0.1
done
rc=0
$CTL cancel back-1 --json > "$T/out" 2> "$T/err" || rc=$?
expect_eq "cancel revocation exit (partial)" "$rc" 64
expect_eq "back-1 state (--json)" "$(jget "$(cat "$T/out")" state)" partial
back=$(jget "$($CTL grants back-1 --json)" blocks_done)
[ "$back" -ge 1 ] && [ "$back" -lt "$done_" ] || fail "back-1 gave back $back of $done_"
expect_eq "online after the cancelled revocation" "$(online_bytes)" $((2147483648 + (done_ - back) * 134217728))
owned=$($CTL grants --json | python3 -c 'import json,sys; print([g for g in json.load(sys.stdin)["grants"] if g["id"]=="run-1"][0]["owned_blocks"])')
expect_eq "run-1 keeps the rest" "$owned" $((done_ - back))

# every surface: table, SSE, metrics
$CTL grants > "$T/table"
grep -q '^queued-1 .* cancelled ' "$T/table" || fail "grants table: $(cat "$T/table")"
head -n 1 "$T/table" | grep -q 'CREATED *UPDATED' || fail "grants table has no times: $(head -n 1 "$T/table")"
grep -q '"state": *"cancelled"' "$T/events" || grep -q '"state":"cancelled"' "$T/events" || fail "no cancelled event on SSE"
curl -s --unix-socket "$SOCK" http://agent/metrics > "$T/metrics"
grep -qx 'memgrant_requests_total{kind="grant",outcome="cancelled"} 1' "$T/metrics" ||
	fail "metrics: $(grep requests_total "$T/metrics")"
kill $CURL_PID 2>/dev/null

# durable: after a restart nothing resumes, the states are kept
stop_daemon
start_daemon
expect_eq "queued-1 after restart" "$(jget "$($CTL grants queued-1 --json)" state)" cancelled
# run-1 gave blocks back to back-1: it reads what it holds now, its report
# (partial) is kept as history
g=$($CTL grants run-1 --json)
expect_eq "run-1 after restart" "$(jget "$g" state)" reduced
expect_eq "run-1's report after restart" "$(jget "$g" report.state)" partial
expect_eq "run-1 holds after restart" "$(jget "$g" blocks_done)" $((done_ - back))
expect_eq "run-1 gave back to" "$(jget "$g" given_back.0.by)" back-1
expect_eq "back-1 after restart" "$(jget "$($CTL grants back-1 --json)" state)" partial
expect_eq "nothing resumed" "$(jget "$($CTL status --json)" running)" null
stop_daemon
echo "ok: queued cancelled at once, run-1 partial after $done_ blocks, back-1 partial after $back"
