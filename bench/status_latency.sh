#!/bin/sh
# Benchmark: GET /v1/status latency on a machine of many blocks while a
# grant runs (the status reads the live block table: no discovery).
# Prints figures; asserts nothing.
#   bench/status_latency.sh [BLOCKS] [REQUESTS]   (default 65536 blocks of 128M, 300 requests)
set -eu
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
N=${1:-65536}
R=${2:-300}
T=$(mktemp -d ${BENCH_DIR:-/tmp}/memgrant-bench.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null && wait $PID; rm -rf "$T"' EXIT
CTL="$BUILD/memgrantctl --socket $T/api.sock"
now() { date +%s.%N; }
t0=$(now)
"$BUILD/memgrantctl" sim init "$T/sim.json" --online 4G --standby $(((N - 32) * 128))M --block-size 128M > /dev/null
t1=$(now)
"$BUILD/memgrantctl" sim fault "$T/sim.json" --latency 20 > /dev/null
cat > "$T/memgrant.yaml" <<YAML
agent: {id: bench, state_dir: $T/state, api_socket: $T/api.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/sim.json}
policy: {zone: movable}
YAML
"$BUILD/memgrantd" -c "$T/memgrant.yaml" -f 2> "$T/log" &
PID=$!
until $CTL status > /dev/null 2>&1; do kill -0 $PID 2>/dev/null || { cat "$T/log"; exit 1; }; sleep 0.1; done
t2=$(now)
echo "machine: $N blocks of 128M (sim init $(echo "$t0 $t1" | awk '{printf "%.1f s", $2-$1}'), memgrantd up in $(echo "$t1 $t2" | awk '{printf "%.1f s", $2-$1}'))"
# measure LABEL [URL]: R requests of URL (default /v1/status; one connection
# each, from one client process), p50/p99/max
measure() {
	python3 - "$T/api.sock" "$R" "$1" "${2:-/v1/status}" <<'PY'
import socket, sys, time
path, n, what, url = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ts = []
for _ in range(n):
    t0 = time.perf_counter()
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b"GET " + url.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    while s.recv(65536):
        pass
    s.close()
    ts.append((time.perf_counter() - t0) * 1000)
ts.sort()
print("GET %s x%d %s:\n  p50 %.2f ms, p99 %.2f ms, max %.2f ms" %
      (url, n, what, ts[n // 2], ts[int(n * 0.99) - 1], ts[-1]))
PY
}
running() {
	$CTL status --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["running"]; print("%s %s/%s blocks" % (r["id"], r["blocks_done"], r["blocks_total"]) if r else "none")'
}
measure "idle"
# a grant long enough to run through the whole measurement (20 ms per kernel step)
$CTL grant 64G > /dev/null
until [ "$(running)" != none ]; do sleep 0.05; done
measure "while a grant runs"
measure "while a grant runs" /metrics
echo "  (grant at the end: $(running))"
echo "RSS: $(awk '/VmRSS/ {print $2 " kB"}' /proc/$PID/status)"
