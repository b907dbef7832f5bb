#!/bin/sh
# HTTPS reports survive an agent restart: reports queued while the control
# plane is down stay in the durable outbox across a stop and a start, and
# are delivered afterwards, in order, with the same Idempotency-Keys; the
# restarted agent polls from its last generation and applies nothing twice.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

cp_start
SIM_LATENCY_MS=100 HTTPS_WAIT=2s https_config "ca_file: $CERTS/ca.pem"
start_daemon
before=$(online_bytes)
cp_wait 'len(s["inventories"]) >= 1' 10
cp_admin POST /agents/test-guest/grants '{"type":"grant","id":"g-1","size":"512M"}' >/dev/null
cp_wait 'len(st("g-1")) >= 1' 10
cp_admin POST /mode '{"mode":"down"}' >/dev/null
wait_state g-1 applied
stop_daemon
start_daemon
log_wait 'after generation 1\)' 5
cp_admin POST /mode '{"mode":"ok"}' >/dev/null
cp_wait 'st("g-1")[-1:] == ["applied"]' 15
expect_eq "online bytes" "$(online_bytes)" "$((before + 536870912))"
cp_state > "$T/state.json"
python3 - "$T/state.json" <<'PY' || fail "delivery across the restart"
import json, sys
s = json.load(open(sys.argv[1]))
first = [x for x in s["statuses"] if not x["duplicate"]]
seqs = [int(x["key"].rsplit(":", 1)[1]) for x in first]
assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
states = [x["body"]["state"] for x in first]
assert states[0] == "accepted" and states[-1] == "applied", states
# once generation 1 was handed out, every poll (the restarted agent's
# included) asked from it: nothing handed out twice.  Polls from 0 before
# the grant came are long polls that ran out (HTTPS_WAIT) on a slow machine.
after = [p["after"] for p in s["polls"]]
assert after == sorted(after) and after[-1] == 1, after
print("reports", len(first), "duplicates", len(s["statuses"]) - len(first))
PY
check_schema
stop_daemon
echo ok
