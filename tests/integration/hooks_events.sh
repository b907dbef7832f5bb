#!/bin/sh
# Every event fires its hooks once with the documented JSON (docs/autoscaling.md):
# agent.started, grant.accepted, grant.in_progress (once), grant.partial + block.failed (an EIO from the
# hypervisor, C7), grant.applied, grant.rejected, revoke.accepted,
# revoke.applied, agent.stopping.  A configured exec hook gets the event on
# stdin; the hooks.d program next to the config gets every event.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
$MEMGRANTCTL sim fault "$SIM" --configure-eio 18 > /dev/null || fail "sim fault"
mkdir -p "$T/events" "$T/hooks.d"
cat > "$T/record" <<SH
#!/bin/sh
cat > "$T/events/\$MEMGRANT_EVENT_ID.json"
echo "\$MEMGRANT_EVENT \$MEMGRANT_GRANT_ID \$MEMGRANT_STATE \$MEMGRANT_ONLINE_BYTES \$1" >> "$T/env.log"
SH
cat > "$T/hooks.d/10-log" <<SH
#!/bin/sh
echo "\$MEMGRANT_EVENT" >> "$T/hooksd.log"
SH
cat > "$T/hooks.d/README.txt" <<SH
not a hook: the name has a dot
SH
chmod 0755 "$T/record" "$T/hooks.d/10-log" "$T/hooks.d/README.txt"
write_config "hooks:" "  - {events: [\"*\"], exec: $T/record, timeout: 10s}"
start_daemon

$CTL grant 1G --id g-partial --wait > /dev/null
[ $? -eq 64 ] || fail "g-partial should be partial"
$CTL grant 256M --id g-ok --wait > /dev/null || fail "g-ok"
$CTL grant 100G --id g-big --wait > /dev/null 2>&1 && fail "g-big should be rejected"
$CTL revoke 256M --id r-1 --wait > /dev/null || fail "r-1"
stop_daemon

python3 - "$T" <<'PY' || fail "events"
import json, os, sys
t = sys.argv[1]
evs = []
for name in os.listdir(t + "/events"):
    with open(os.path.join(t, "events", name)) as f:
        evs.append(json.load(f))
got = sorted((e["event"], e.get("id") or "") for e in evs)
want = sorted([("agent.started", ""), ("agent.stopping", ""),
               ("grant.accepted", "g-partial"), ("grant.in_progress", "g-partial"),
               ("grant.partial", "g-partial"), ("block.failed", "g-partial"),
               ("grant.accepted", "g-ok"), ("grant.in_progress", "g-ok"), ("grant.applied", "g-ok"),
               ("grant.rejected", "g-big"),
               ("revoke.accepted", "r-1"), ("revoke.in_progress", "r-1"), ("revoke.applied", "r-1")])
if got != want:
    sys.exit("events: got %s\nwant %s" % (got, want))
ids = set()
for e in evs:
    for k in ("type", "event", "event_id", "agent", "time"):
        if k not in e:
            sys.exit("%s lacks %s: %s" % (e["event"], k, e))
    if e["type"] != "event" or e["agent"] != "test-guest":
        sys.exit("bad envelope: %s" % e)
    ids.add(e["event_id"])
    if e["event"].startswith(("grant.", "revoke.", "block.")):
        st = e["status"]
        if st["type"] != "status" or st["id"] != e["id"] or e["kind"] != e["event"].split(".")[0] and not e["event"].startswith("block."):
            sys.exit("bad status in %s" % e)
        if not e["event"].startswith("block.") and e["state"] != e["event"].split(".")[1]:
            sys.exit("state does not match the event: %s" % e)
        if "seq" in st:
            sys.exit("bus sequence leaked into the event: %s" % e)
    if e["event"] == "block.failed":
        b = e["block"]
        if b["block"] != 18 or b["error"]["code"] != "EIO" or e["kind"] != "grant":
            sys.exit("block.failed: %s" % e)
    if e["event"].startswith("agent."):
        if "online_bytes" not in e["memory"]:
            sys.exit("agent event without memory: %s" % e)
if len(ids) != len(evs):
    sys.exit("event ids repeat")
with open(t + "/env.log") as f:
    lines = f.read().splitlines()
applied = [e for e in evs if e["event"] == "grant.applied"][0]
line = "grant.applied g-ok applied %d grant.applied" % applied["status"]["memory"]["online_bytes"]
if line not in lines:
    sys.exit("environment of grant.applied: want %r in %s" % (line, lines))
with open(t + "/hooksd.log") as f:
    d = sorted(f.read().split())
if d != sorted(w[0] for w in want):
    sys.exit("hooks.d saw %s" % d)
PY
grep -q "hook hooks\[0\] for grant.applied: done" "$T/daemon.log" || fail "no log line for the hook run"
echo ok
