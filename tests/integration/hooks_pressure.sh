#!/bin/sh
# Memory pressure through a stand-in PSI file under the sim's tree (never the
# real /proc): a spike that lasts over several readings is one request, queued
# for the control plane (here the channel's outbox) and one pressure.high hook
# run, not a storm.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
mkdir -p "$SIM.tree/proc/pressure"
HIGH="some avg10=45.00 avg60=30.00 avg300=10.00 total=99999999
full avg10=20.00 avg60=10.00 avg300=2.00 total=9999999"
printf '%s\n' "$HIGH" > "$SIM.tree/proc/pressure/memory"
cat > "$T/record" <<SH
#!/bin/sh
cat >> "$T/pressure.jsonl"
SH
chmod 0755 "$T/record"
write_config "providers:" "  channel: {path: $T/no-such-port}" \
	"hooks:" "  - {events: [pressure.*], exec: $T/record}" \
	"pressure: {request_above: \"some avg10>20\", step: 256M, release_below: \"some avg300<1\", cooldown: 1h}"
start_daemon

i=0
while [ ! -s "$T/pressure.jsonl" ]; do
	i=$((i + 1))
	[ $i -gt 50 ] && fail "no pressure.high within 5s"
	sleep 0.1
done
grep -q "is not procfs: no PSI trigger" "$T/daemon.log" || fail "the monitor did not say PSI triggers are unavailable"
# the monitor reads at least every second: stay high over a few more readings
sleep 4
stop_daemon

"$BUILD/tests/tools/journal_dump" "$T/state" > "$T/journal-state.json" || fail "journal_dump failed"
python3 - "$T/pressure.jsonl" "$T/journal-state.json" <<'PY' || fail "pressure"
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1])]
if [e["event"] for e in evs] != ["pressure.high"]:
    sys.exit("hook runs: %s" % [e["event"] for e in evs])
m = evs[0]["message"]
if m["type"] != "request" or m["bytes"] != 268435456 or "avg10 45.00%" not in m["reason"] or m["agent"] != "test-guest":
    sys.exit("request: %s" % m)
if evs[0]["pressure"]["source"] != "psi":
    sys.exit("detail: %s" % evs[0]["pressure"])
found = []
def walk(v):
    if isinstance(v, dict):
        if v.get("type") == "request":
            found.append(v)
        for x in v.values():
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
walk(json.load(open(sys.argv[2])).get("outbox", {}))
if len(found) != 1 or found[0]["id"] != m["id"]:
    sys.exit("requests in the outbox: %s" % found)
PY
[ "$(grep -c 'pressure: requesting' "$T/daemon.log")" -eq 1 ] || fail "more than one request logged"
echo ok
