#!/bin/sh
# HTTPS soak: N grants (default 1000), each followed by its revocation, from
# the reference control plane over TLS to memgrantd on the sim; prints the
# daemon's RSS before and after and checks that every report arrived.  Not a
# timed test: run it by hand (`sh bench/https_soak.sh [N]`, BUILD=build).
# The figure to look at is RSS after minus RSS before: flat means no leak per
# grant in the provider, the journal or the outbox.
set -u
N=${1:-1000}
cd "$(dirname "$0")/.."
. tests/integration/lib.sh
. tests/controlplane/lib.sh

cp_start --token soak-token
printf 'soak-token\n' > "$T/token"
HTTPS_WAIT=30s https_config "ca_file: $CERTS/ca.pem" "token_file: $T/token"
sed -i 's/log_level: debug/log_level: notice/' "$T/memgrant.yaml"
start_daemon
cp_wait 'len(s["inventories"]) >= 1' 10

rss() { awk '/^VmRSS/ {print $2}' "/proc/$DAEMON_PID/status"; }
# the first pairs grow the heap (malloc arenas of the threads, the
# journal's buffers): measure from a warm agent
warm=${WARM:-100}
[ "$N" -gt "$warm" ] || fail "N must be larger than the warm-up ($warm)"
cat > "$T/drive.py" <<'PY'
import json, sys, time, urllib.request
port, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = "http://127.0.0.1:%s" % port
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)
def final(i, deadline=60):
    end = time.time() + deadline
    while time.time() < end:
        st = call("GET", "/last/" + i)["state"]
        if st in ("applied", "partial", "failed", "rejected"):
            return st
        time.sleep(0.01)
    raise SystemExit("no final report for %s" % i)
for n in range(first, last + 1):
    call("POST", "/agents/test-guest/grants", {"type": "grant", "id": "g-%d" % n, "size": "128M"})
    a = final("g-%d" % n)
    call("POST", "/agents/test-guest/grants", {"type": "revoke", "id": "r-%d" % n, "grant": "g-%d" % n})
    b = final("r-%d" % n)
    if a != "applied" or b != "applied":
        raise SystemExit("g-%d %s, r-%d %s" % (n, a, n, b))
PY
python3 "$T/drive.py" "$CP_ADMIN" 1 "$warm" || fail "warm-up"
before=$(rss)
t0=$(date +%s)
half=$(((warm + N) / 2))
python3 "$T/drive.py" "$CP_ADMIN" $((warm + 1)) "$half" || fail "soak"
middle=$(rss)
python3 "$T/drive.py" "$CP_ADMIN" $((half + 1)) "$N" || fail "soak"
t1=$(date +%s)
after=$(rss)
cp_state > "$T/state.json"
python3 - "$T/state.json" "$N" <<'PY' || fail "reports"
import json, sys
s = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
first = [x for x in s["statuses"] if not x["duplicate"]]
seqs = [int(x["key"].rsplit(":", 1)[1]) for x in first]
assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "gap or reorder in the outbox sequence"
final = {x["body"]["id"] for x in first if x["body"]["state"] == "applied"}
assert len(final) == 2 * n, len(final)
bad = sum(len(x["schema_errors"]) for x in s["statuses"] + s["inventories"])
assert bad == 0, bad
print("reports %d (duplicates %d), inventories %d, connections %d" % (len(first), len(s["statuses"]) - len(first),
      len(s["inventories"]), s["connections"]))
PY
echo "grants+revocations: $N + $N ($((N - warm)) measured after $warm warm-up pairs) in $((t1 - t0)) s"
echo "memgrantd RSS before: ${before} kB, at pair $half: ${middle} kB, after: ${after} kB, difference: $((after - before)) kB"
$CTL status >/dev/null || fail "local API"
stop_daemon
