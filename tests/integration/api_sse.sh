#!/bin/sh
# GET /v1/events speaks standard SSE: every event is named (`event: status`,
# the agent event's name otherwise), `Last-Event-ID` resumes after that id as
# `?after=` does (`after` wins when both are given), a bad one is a 400, and
# memgrantctl's event reader still follows the stream.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to read the raw stream"
start_daemon
$CTL grant --json 256M > /dev/null || fail "grant"
sse() { curl -s --max-time 2 --unix-socket "$SOCK" "$@" > "$T/sse" 2>/dev/null; true; }

sse "http://memgrantd/v1/events?after=0"
grep -q '^event: status$' "$T/sse" || fail "no 'event: status' line: $(head -5 "$T/sse")"
python3 - "$T/sse" <<'PY' || fail "stream framing: $(head -12 "$T/sse")"
import sys
blocks = [b for b in open(sys.argv[1]).read().split("\n\n") if b.strip() and not b.startswith(":")]
assert blocks, "no events"
for b in blocks:
    lines = b.split("\n")
    assert lines[0].startswith("id: ") and lines[1].startswith("event: ") and lines[2].startswith("data: "), lines
print("ok sse-named: %d events, each id, event, data" % len(blocks))
PY
n=$(grep -c '^id: ' "$T/sse")
[ "$n" -ge 2 ] || fail "want at least 2 events after 0, got $n"

sse -H 'Last-Event-ID: 1' "http://memgrantd/v1/events"
first=$(grep -m1 '^id: ' "$T/sse")
expect_eq "first id after Last-Event-ID: 1" "$first" "id: 2"
echo "ok sse-last-event-id: resumes at $first"

sse -H 'Last-Event-ID: 1' "http://memgrantd/v1/events?after=0"
expect_eq "after= wins over Last-Event-ID" "$(grep -m1 '^id: ' "$T/sse")" "id: 1"

code=$(curl -s -o "$T/bad" -w '%{http_code}' --max-time 2 --unix-socket "$SOCK" -H 'Last-Event-ID: -3' http://memgrantd/v1/events)
expect_eq "bad Last-Event-ID" "$code" 400
grep -q 'header Last-Event-ID: \\"-3\\" is not a sequence number' "$T/bad" || fail "$(cat "$T/bad")"
echo "ok sse-bad-last-event-id: $(jget "$(cat "$T/bad")" error.message)"

# memgrantctl's reader ignores the event: lines and still prints the events
$CTL events --json > "$T/ev" 2>&1 &
ev=$!
sleep 0.5
$CTL grant 128M > /dev/null || fail "second grant"
sleep 1
kill $ev 2>/dev/null
wait $ev 2>/dev/null
grep -q '"type": *"status"' "$T/ev" || fail "memgrantctl events printed no status: $(head -3 "$T/ev")"
echo "ok sse-ctl: memgrantctl events reads the named stream"
stop_daemon
echo ok
