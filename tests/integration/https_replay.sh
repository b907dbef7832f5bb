#!/bin/sh
# Requests the agent applies nothing for still get a status on the control
# plane (docs/protocol.md, "Generations"): a replayed grant gets the status
# recorded for its generation, a new id at a recorded generation (a control
# plane rolled back to an older copy) that same recorded status, and a new
# id at a generation below the last that was never recorded (stale)
# `rejected` with ESTALE naming why.  Nothing is applied twice.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

cp_start
HTTPS_WAIT=2s https_config "ca_file: $CERTS/ca.pem"
start_daemon
cp_wait 'len(s["inventories"]) >= 1' 10
before=$(online_bytes)
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-1","size":"128M","generation":1}' >/dev/null
cp_wait 'st("g-1")[-1:] == ["applied"]' 15
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-5","size":"128M","generation":5}' >/dev/null
cp_wait 'st("g-5")[-1:] == ["applied"]' 15

# 1. the same grant again: its recorded status, a second time
cp_admin POST /agents/test-guest/push '{"grants": [{"type":"grant","id":"g-1","size":"128M","generation":1}]}' >/dev/null
cp_wait 'st("g-1").count("applied") == 2' 15
# 2. a rolled-back control plane's new id at generation 5: g-5's status
cp_admin POST /agents/test-guest/push '{"grants": [{"type":"grant","id":"g-new","size":"256M","generation":5}]}' >/dev/null
cp_wait 'st("g-5").count("applied") == 2' 15
# 3. a new id at generation 3, below 5 and never recorded: rejected, ESTALE
cp_admin POST /agents/test-guest/push '{"grants": [{"type":"grant","id":"g-stale","size":"128M","generation":3}]}' >/dev/null
cp_wait 'st("g-stale") == ["rejected"]' 15
cp_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
b = [x["body"] for x in s["statuses"] if x["body"].get("id") == "g-stale"][-1]
assert b["generation"] == 3 and b["error"]["code"] == "ESTALE", b
assert "stale, nothing applied" in b["error"]["message"], b["error"]
assert not [x for x in s["statuses"] if x["body"].get("id") == "g-new"], "g-new got a status of its own"' ||
	fail "the stale grant's status"
expect_eq "online bytes" "$(online_bytes)" "$((before + 2 * 134217728))"
$CTL grants --json | grep -q '"g-stale"\|"g-new"' && fail "g-stale or g-new was recorded"
check_schema
stop_daemon
echo ok
