#!/bin/sh
# Benchmark: how fast memgrantd brings blocks up and takes them down on the
# sim, and what it costs in memory.  Prints figures; asserts nothing.
#   bench/grant_throughput.sh [BLOCKS]     (default 512 blocks of 128M)
set -eu
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
N=${1:-512}
T=$(mktemp -d /tmp/memgrant-bench.XXXXXX)
trap 'kill $PID 2>/dev/null; rm -rf "$T"' EXIT
CTL="$BUILD/memgrantctl --socket $T/api.sock"
cat > "$T/memgrant.yaml" <<YAML
agent: {id: bench, state_dir: $T/state, api_socket: $T/api.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/sim.json, online: 4G, standby: $((N * 128))M, block_size: 128M}
policy: {zone: movable}
YAML
"$BUILD/memgrantd" -c "$T/memgrant.yaml" -f 2> "$T/log" &
PID=$!
until $CTL status > /dev/null 2>&1; do sleep 0.1; done
rss() { awk '/VmRSS/ {print $2 " kB"}' /proc/$PID/status; }
now() { date +%s.%N; }

echo "machine: 4G online, $N standby blocks of 128M (sim backend, state on $(df -T "$T" | awk 'NR==2 {print $2}'))"
echo "RSS at start: $(rss)"
t0=$(now)
$CTL grant $((N * 128))M --wait > /dev/null
t1=$(now)
echo "grant of $N blocks:   $(echo "$t0 $t1 $N" | awk '{printf "%.2f s, %.1f ms per block", $2-$1, ($2-$1)*1000/$3}')"
echo "RSS after grant: $(rss)"
t0=$(now)
$CTL revoke $((N * 128))M --wait > /dev/null
t1=$(now)
echo "revoke of $N blocks:  $(echo "$t0 $t1 $N" | awk '{printf "%.2f s, %.1f ms per block", $2-$1, ($2-$1)*1000/$3}')"
t0=$(now)
for i in $(seq 1 50); do $CTL grant 128M > /dev/null; done
$CTL revoke 128M --wait > /dev/null 2>&1 || true
t1=$(now)
echo "50 small grants accepted + 1 revoke: $(echo "$t0 $t1" | awk '{printf "%.2f s", $2-$1}')"
echo "RSS at end: $(rss)"
echo "journal: $(wc -c < "$T/state/journal.log") bytes (journal.log); sim state: $(wc -c < "$T/sim.json") bytes"
curl -s --unix-socket "$T/api.sock" http://x/metrics | grep -E '^memgrant_block_operation_seconds_(sum|count)'
