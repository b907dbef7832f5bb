#!/bin/sh
# Benchmark: bytes of server-sent events for a revocation of 128 blocks of
# which 2 stay busy (sim offline_ebusy 40,41) until the revocation budget
# runs out.  Prints figures; asserts nothing.
#   bench/revoke_events.sh [BUDGET]   (default 10s)
set -eu
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
BUDGET=${1:-10s}
T=$(mktemp -d ${BENCH_DIR:-/tmp}/memgrant-bench.XXXXXX)
PID=
CURL_PID=
trap '[ -n "$CURL_PID" ] && kill $CURL_PID 2>/dev/null; [ -n "$PID" ] && kill $PID 2>/dev/null && wait $PID; rm -rf "$T"' EXIT
CTL="$BUILD/memgrantctl --socket $T/api.sock"
"$BUILD/memgrantctl" sim init "$T/sim.json" --online 2G --standby 17G --block-size 128M > /dev/null
cat > "$T/memgrant.yaml" <<YAML
agent: {id: bench, state_dir: $T/state, api_socket: $T/api.sock, log_level: notice, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/sim.json}
policy: {revoke_budget: $BUDGET}
YAML
"$BUILD/memgrantd" -c "$T/memgrant.yaml" -f 2> "$T/log" &
PID=$!
until $CTL status > /dev/null 2>&1; do kill -0 $PID || { cat "$T/log"; exit 1; }; sleep 0.1; done
$CTL grant 16G --id big --wait > /dev/null
"$BUILD/memgrantctl" sim fault "$T/sim.json" --offline-ebusy 40,41 > /dev/null
curl -sN --unix-socket "$T/api.sock" http://agent/v1/events > "$T/events" &
CURL_PID=$!
sleep 0.3
$CTL revoke 16G --id back --wait > /dev/null 2>&1 || true
sleep 0.3
kill $CURL_PID
CURL_PID=
n=$(grep -c '^event: ' "$T/events" || true)
bytes=$(wc -c < "$T/events")
warn=$(grep -c 'revocation back' "$T/log" || true)
echo "revocation of 128 blocks, 2 busy, budget $BUDGET: $n events, $bytes bytes of SSE ($((bytes / (n > 0 ? n : 1))) per event), $warn log lines about it"
