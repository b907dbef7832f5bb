#!/bin/sh
# A hostile or broken control plane cannot wedge the agent:
# - a message whose generation is 2^62 (the protocol's maximum is 2^53), or
#   not an integer, is skipped with a warning naming it, and never moves the
#   poll's cursor: the valid grant that follows is fetched and applied; no
#   status can name such a message (docs/https.md), so none is sent, and
#   memgrant_messages_skipped_total counts them;
# - a 302 to another host is logged as a refused redirect naming where it
#   pointed;
# - N grants in one answer (500 here, 10,000 by hand): taken at most 256 per answer with
#   back-pressure while reports wait, so every one gets a final status at the
#   control plane (15 applied, the rest rejected: no room), none is lost, the
#   outbox never overflows and memory stays bounded.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

# 10,000 by hand (HTTPS_HOSTILE_N=10000: 42 s, 28 s of the agent's CPU on a
# 2-core machine, peak RSS 33 MB; linear: 1,500 take 3 s of CPU, 6,000 16 s);
# too long for make check; the provider's bounds are the same
N=${HTTPS_HOSTILE_N:-500}
cp_start
HTTPS_WAIT=2s https_config "ca_file: $CERTS/ca.pem"
# the journal fsyncs every record: on tmpfs when there is one, so the test
# measures the provider, not the disk
if [ -d /dev/shm ] && SHM=$(mktemp -d /dev/shm/memgrant-test.XXXXXX 2>/dev/null); then
	trap 'rm -rf "$SHM"; cp_stop; cleanup' EXIT INT TERM
	sed -i "s|^  state_dir: .*|  state_dir: $SHM/state|" "$T/memgrant.yaml"
fi
start_daemon
cp_wait 'len(s["inventories"]) >= 1' 10

# 1. generations out of range, then a valid grant
cp_admin POST /agents/test-guest/push '{"grants": [
  {"type":"grant","id":"g-huge","size":"128M","generation":4611686018427387904},
  {"type":"grant","id":"g-text","size":"128M","generation":"7"}]}' >/dev/null
log_wait 'grants\[0\] \(g-huge\) skipped: generation 4611686018427387904 is above 2\^53; the poll.s cursor stays at generation 0' 10
log_wait 'grants\[1\] \(g-text\) skipped: generation is not an integer' 5
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-ok","size":"128M"}' >/dev/null
wait_state g-ok applied
cp_wait 'st("g-ok")[-1:] == ["applied"]' 10
cp_wait 'all(p["after"] <= 1 for p in s["polls"])' 1
cp_wait 'st("g-huge") == [] and st("g-text") == [] and all(not x["schema_errors"] for x in s["statuses"])' 1
curl -s --unix-socket "$SOCK" http://agent/metrics > "$T/metrics"
grep -qx 'memgrant_messages_skipped_total{source="https",reason="generation"} 2' "$T/metrics" ||
	fail "2 skipped messages not counted: $(grep skipped "$T/metrics")"
grep -qx 'memgrant_messages_skipped_total{source="https",reason="malformed"} 0' "$T/metrics" ||
	fail "malformed messages counted: $(grep skipped "$T/metrics")"

# 2. a redirect is refused and says where it pointed
cp_admin POST /mode '{"mode":"redirect"}' >/dev/null
log_wait 'https poll: GET grants: redirect to https://elsewhere.invalid/v1/agents/test-guest/grants\?after=1&wait=2&limit=256 refused \(HTTP 302\)' 15
grep -q 'HTTP 302: (no message)' "$T/daemon.log" && fail "a redirect logged as HTTP 302: (no message)"
cp_admin POST /mode '{"mode":"ok"}' >/dev/null
log_wait 'https poll: control plane .* answers again' 70

# 3. N grants in one answer
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$DAEMON_PID/status"; }
RSS0=$(rss_kb)
t0=$(date +%s)
cp_admin POST /agents/test-guest/bulk "{\"prefix\":\"b\",\"count\":$N,\"size\":\"128M\"}" >/dev/null
peak=$RSS0
i=0
while :; do
	c=$(cp_admin GET /count/b-)
	[ "$(jget "$c" final)" -ge "$N" ] && break
	r=$(rss_kb)
	[ "$r" -gt "$peak" ] && peak=$r
	i=$((i + 1))
	[ $i -gt 2400 ] && fail "after 240 s only $(jget "$c" final) of $N grants have a final status: $c"
	sleep 0.1
done
t1=$(date +%s)
c=$(cp_admin GET /count/b-)
echo "$N grants in one answer: all answered in $((t1 - t0)) s; states $(jget "$c" states); RSS $RSS0 KiB idle, peak $peak KiB"
expect_eq "ids with a status" "$(jget "$c" ids)" "$N"
expect_eq "applied" "$(jget "$c" states.applied)" 15
expect_eq "rejected" "$(jget "$c" states.rejected)" $((N - 15))
grep -q 'No buffer space\|cannot journal' "$T/daemon.log" && fail "reports were dropped: $(grep -m3 'No buffer space\|cannot journal' "$T/daemon.log")"
# memory bounded: the answer is parsed at most 16 MiB at a time, the journal grows by N records.
# A sanitizer build keeps freed memory in its quarantine (256 MiB by default) and
# shadow memory beside it: its RSS says nothing about the agent's.
if ldd "$MEMGRANTD" 2>/dev/null | grep -q libasan; then
	echo "sanitizer build: RSS bound not checked (peak $peak KiB)"
else
	[ "$peak" -lt $((RSS0 + 262144)) ] || fail "RSS rose from $RSS0 to $peak KiB"
fi
cp_state > "$T/state.json"
python3 - "$T/state.json" <<'PY' || fail "polls"
import json, sys
s = json.load(open(sys.argv[1]))
assert all(p["after"] <= 2 ** 53 for p in s["polls"]), "a cursor beyond 2^53"
assert all(p.get("limit") == 256 for p in s["polls"]), "a poll without limit=256"
print("%d polls, the largest answer %d messages" % (s["n_polls"], max(p["answer"] if p["answer"] != 204 else 0 for p in s["polls"])))
PY
echo "CPU time: $(ps -o time= -p $DAEMON_PID) memgrantd, $(ps -o time= -p $CP_PID) control plane"
grep -c "taking no more from the control plane" "$T/daemon.log" | sed 's/^/back-pressure pauses: /'
stop_daemon
echo ok
