#!/bin/sh
# HTTPS provider through an outage: grants arrive, then the control plane goes
# down (not listening) while the agent applies them, then answers 500, then
# 429 with Retry-After, then garbage (200 with HTML), then comes back.  No
# report is lost, none is out of order (the outbox sequence numbers in the
# Idempotency-Keys arrive strictly increasing and without gaps), Retry-After
# is honoured, the agent serves its local API all along, and each kind of
# failure is logged once, not once per attempt.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

cp_start --token tok-outage
printf 'tok-outage\n' > "$T/token"
SIM_LATENCY_MS=150 HTTPS_WAIT=2s https_config "ca_file: $CERTS/ca.pem" "token_file: $T/token"
start_daemon
before=$(online_bytes)
cp_wait 'len(s["inventories"]) >= 1' 10

# three grants in one poll; the control plane goes away as soon as the first is accepted
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-1","size":"384M"}' >/dev/null
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-2","size":"256M"}' >/dev/null
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-3","size":"256M"}' >/dev/null
cp_wait 'len(st("g-1")) >= 1' 10
cp_admin POST /mode '{"mode":"down"}' >/dev/null

# the local API answers quickly throughout (2 s at most per call)
probe_api() { # seconds
	end=$(($(date +%s) + $1))
	while [ "$(date +%s)" -lt "$end" ]; do
		timeout 2 $CTL status >/dev/null || fail "memgrantctl status did not answer within 2 s"
		sleep 0.3
	done
}
probe_api 4
wait_state g-3 applied
expect_eq "online bytes with the server down" "$(online_bytes)" "$((before + 939524096))"
cp_admin POST /mode '{"mode":"500"}' >/dev/null
probe_api 4
cp_admin POST /mode '{"mode":"429","retry_after":3}' >/dev/null
probe_api 7
cp_admin POST /mode '{"mode":"garbage"}' >/dev/null
probe_api 4
cp_admin POST /mode '{"mode":"ok"}' >/dev/null
cp_wait 'st("g-3")[-1:] == ["applied"]' 20
cp_wait 'len(s["inventories"]) >= 2 and s["inventories"][-1]["body"]["memory"]["online_bytes"] > 0' 10
$CTL status >/dev/null || fail "local API"

cp_state > "$T/state.json"
python3 - "$T/state.json" "$T/daemon.log" <<'PY' || fail "delivery after the outage"
import json, re, sys
s = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
firsts = [x for x in s["statuses"] if not x["duplicate"]]
seqs = [int(x["key"].rsplit(":", 1)[1]) for x in firsts]
# nothing lost, nothing out of order: the outbox sequence, gapless and increasing
assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
for gid in ("g-1", "g-2", "g-3"):
    states = [x["body"]["state"] for x in firsts if x["body"]["id"] == gid]
    assert states[0] == "accepted" and states[-1] == "applied", (gid, states)
    assert set(states[1:-1]) <= {"in_progress"}, (gid, states)
# the grants' reports in the order they were applied
order = [x["body"]["id"] for x in firsts]
assert order.index("g-1") < order.index("g-2") < order.index("g-3"), order
# every failure mode was met by the agent
modes = {x["mode"] for x in s["interfered"]}
assert modes == {"500", "429", "garbage"}, modes
# Retry-After 3: the same endpoint was not asked again sooner
for what in ("GET grants", "POST status", "PUT inventory"):
    ts = [x["t"] for x in s["interfered"] if x["mode"] == "429" and x["what"] == what]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    assert all(g >= 2.9 for g in gaps), (what, gaps)
# once per change of state, not per attempt
warn = len(re.findall(r"retrying with backoff", log))
attempts = len(re.findall(r"attempt \d+ failed", log))
assert warn <= 14, warn
print("reports", len(firsts), "seq", seqs[0], "..", seqs[-1], "warnings", warn, "quiet retries", attempts,
      "duplicates", len(s["statuses"]) - len(firsts))
PY
grep -q 'answers again after' "$T/daemon.log" || fail "no recovery line"
check_schema
stop_daemon
echo "ok"
