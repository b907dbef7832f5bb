#!/bin/sh
# HTTPS provider, the happy path over mutual TLS with a bearer token: a grant
# queued on the control plane becomes online memory and its accepted,
# in_progress (once, with the operation's intent), applied reports arrive in order with Idempotency-Keys; the
# inventory is PUT at start and again when the layout changed; a revocation
# gives the memory back; a replayed generation changes nothing; every message
# matches docs/api/messages.schema.json; one kept-alive connection per thread.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

cp_start --client-ca "$CERTS/ca.pem" --token s3cret-token-1
printf 's3cret-token-1\n' > "$T/token"
# a long wait: stopping must abort the held poll, not wait for it
HTTPS_WAIT=50s https_config "ca_file: $CERTS/ca.pem" "cert_file: $CERTS/client.pem" "key_file: $CERTS/client.key" \
	"token_file: $T/token"
start_daemon
before=$(online_bytes)

cp_wait 'len(s["inventories"]) >= 1' 10

cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-1","size":"256M","zone":"movable"}' >/dev/null
cp_wait 'st("g-1")[-1:] == ["applied"]' 20
after=$(online_bytes)
expect_eq "online bytes after g-1" "$after" "$((before + 268435456))"
cp_wait 'len(s["inventories"]) >= 2' 10

cp_state > "$T/state1.json"
python3 - "$T/state1.json" <<'PY' || fail "reports of g-1"
import json, sys
s = json.load(open(sys.argv[1]))
g = [x for x in s["statuses"] if x["body"]["id"] == "g-1"]
states = [x["body"]["state"] for x in g if not x["duplicate"]]
# in_progress when the work starts (the intent record); per-block progress is live only
assert states[0] == "accepted" and states[-1] == "applied" and len(states) >= 3, states
assert set(states[1:-1]) == {"in_progress"}, states
for x in g:
    k = x["key"]
    b = x["body"]
    assert k.startswith("g-1:1:%s:" % b["state"]), k
    assert b["agent"] == "test-guest" and b["source"] == "https" and b["generation"] == 1, b
seqs = [int(x["key"].rsplit(":", 1)[1]) for x in s["statuses"]]
assert seqs == sorted(seqs), seqs
last = s["inventories"][-1]["body"]
online = sorted(b["id"] for b in last["blocks"] if b["state"] == "online")
assert 16 in online and 17 in online, online
assert last["last_generation"] == 1, last["last_generation"]
# keep-alive: a handful of connections for many requests
n_req = len(s["statuses"]) + len(s["inventories"]) + s["n_polls"]
assert s["connections"] <= 4 and n_req >= 6, (s["connections"], n_req)
print("g-1:", states, "connections", s["connections"], "requests", n_req)
PY

# the token never reaches the log
grep -q s3cret-token "$T/daemon.log" && fail "the bearer token is in the log"

# revocation by grant id, generation 2
cp_admin POST /agents/test-guest/grants '{"type":"revoke","id":"r-2","grant":"g-1"}' >/dev/null
cp_wait 'st("r-2")[-1:] == ["applied"]' 20
expect_eq "online bytes after r-2" "$(online_bytes)" "$before"

# a replay of generation 1 (kernel.md-independent: protocol rule "Generations"):
# nothing is applied again, the recorded status is posted once more, the
# agent logs it
n_before=$(cp_state | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["statuses"]))')
cp_admin POST /agents/test-guest/push '{"grants":[{"type":"grant","id":"g-1","generation":1,"size":"256M","zone":"movable"}]}' >/dev/null
log_wait 'g-1 from https: generation 1 already seen' 10
sleep 1
expect_eq "online bytes after the replay" "$(online_bytes)" "$before"
n_after=$(cp_state | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["statuses"]))')
expect_eq "reports after the replay" "$n_after" "$((n_before + 1))"
cp_wait 'st("g-1")[-1:] == ["applied"] and s["statuses"][-1]["body"]["id"] == "g-1"' 1
# a different grant under an old generation is not applied either
cp_admin POST /agents/test-guest/push '{"grants":[{"type":"grant","id":"g-old","generation":2,"size":"128M"}]}' >/dev/null
log_wait 'g-old from https: generation 2 already seen|g-old.*not applied' 10
expect_eq "online bytes after the old generation" "$(online_bytes)" "$before"
$CTL grants --json | grep -q '"g-old"' && fail "g-old was recorded"

# a malformed message (misspelt field) is logged and skipped with its
# generation; the next one is applied and the poller does not spin on it
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-bad","generation":3,"size":"128M","zon":"normal"}' >/dev/null
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-4","size":"128M"}' >/dev/null
log_wait 'g-bad\) not applied \(400\): .*zon' 10
cp_wait 'st("g-4")[-1:] == ["applied"]' 20
expect_eq "online bytes after g-4" "$(online_bytes)" "$((before + 134217728))"
polls0=$(cp_state | python3 -c 'import json,sys; print(json.load(sys.stdin)["n_polls"])')
sleep 2
polls1=$(cp_state | python3 -c 'import json,sys; print(json.load(sys.stdin)["n_polls"])')
[ $((polls1 - polls0)) -le 1 ] || fail "the poller spins: $((polls1 - polls0)) polls in 2 s"

check_schema
$CTL status >/dev/null || fail "local API"
sleep 1 # the poller is inside a 50 s long poll now
t0=$(date +%s%N)
stop_daemon
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 2000 ] || fail "stopping took $ms ms with a long poll held"
echo "stopped in $ms ms during a long poll"
grep -q "https.*refused\|error:" "$T/daemon.log" && { grep "error:" "$T/daemon.log"; fail "errors in the log"; }
echo "ok"
