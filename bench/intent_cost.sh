#!/bin/sh
# Benchmark: what the journal costs per grant and revocation when the
# executor writes one intent and one result per operation (docs/journal.md):
# for each size, a grant of N blocks and its revocation on the sim, with the
# journal's fsyncs and bytes (memgrant_journal_* in /metrics) per operation,
# and the time per block as a ratio to the same blocks brought up with
# `memgrantctl --sim FILE block configure/online` (no daemon, no journal).
# Prints figures; asserts nothing.  With BENCH_FIGS=1 it also prints lines
# "FIG KEY VALUE UNIT [REFERENCE LABEL]" for bench/run.sh.
#   bench/intent_cost.sh [N...]      (default: 64 4096; BUILD=build)
# 4,096 blocks take minutes on the sim (its write costs grow with its size).
set -eu
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
SIZES=${*:-64 4096}
T=$(mktemp -d "${TMPDIR:-/tmp}/memgrant-intent.XXXXXX")
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; rm -rf "$T"' EXIT
CTL="$BUILD/memgrantctl --socket $T/api.sock"
now() { date +%s.%N; }
metric() { curl -s --unix-socket "$T/api.sock" http://x/metrics | sed -n "s/^$1 //p"; }
ONLINE_BLOCKS=32 # 4G of 128M blocks: standby starts at block 32

for N in $SIZES; do
	rm -rf "$T/state" "$T/sim.json" "$T/sim.json.d" "$T/ref.json" "$T/ref.json.d"
	last=$((ONLINE_BLOCKS + N - 1))
	# the reference: the same blocks, the same sim, by hand
	"$BUILD/memgrantctl" sim init "$T/ref.json" --online 4G --standby $((N * 128))M --block-size 128M > /dev/null
	t0=$(now)
	"$BUILD/memgrantctl" --sim "$T/ref.json" block configure "$ONLINE_BLOCKS-$last" > /dev/null
	"$BUILD/memgrantctl" --sim "$T/ref.json" block online "$ONLINE_BLOCKS-$last" > /dev/null
	t1=$(now)
	ref=$(echo "$t0 $t1 $N" | awk '{printf "%.3f", ($2-$1)*1000/$3}')

	cat > "$T/memgrant.yaml" <<YAML
agent: {id: bench, state_dir: $T/state, api_socket: $T/api.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/sim.json, online: 4G, standby: $((N * 128))M, block_size: 128M}
policy: {zone: movable, memmap_on_memory: off}
YAML
	"$BUILD/memgrantd" -c "$T/memgrant.yaml" -f 2> "$T/log" &
	PID=$!
	until $CTL status > /dev/null 2>&1; do sleep 0.1; done
	s0=$(metric memgrant_journal_syncs_total); b0=$(metric memgrant_journal_written_bytes_total)
	t0=$(now)
	$CTL grant $((N * 128))M --wait > /dev/null
	t1=$(now)
	s1=$(metric memgrant_journal_syncs_total); b1=$(metric memgrant_journal_written_bytes_total)
	$CTL revoke $((N * 128))M --wait > /dev/null
	t2=$(now)
	s2=$(metric memgrant_journal_syncs_total); b2=$(metric memgrant_journal_written_bytes_total)
	kill $PID; wait $PID 2>/dev/null || true; PID=
	per=$(echo "$t0 $t1 $N" | awk '{printf "%.3f", ($2-$1)*1000/$3}')
	rper=$(echo "$t1 $t2 $N" | awk '{printf "%.3f", ($2-$1)*1000/$3}')
	echo "blocks $N: grant fsyncs $((s1 - s0)), journal bytes $((b1 - b0)); revoke fsyncs $((s2 - s1)), journal bytes $((b2 - b1))"
	echo "blocks $N: grant $per ms/block, revoke $rper ms/block; memgrantctl --sim configure+online $ref ms/block; grant/reference $(echo "$per $ref" | awk '{printf "%.2f", $1/$2}')x"
	if [ -n "${BENCH_FIGS:-}" ]; then
		echo "FIG intent_grant_fsyncs@$N $((s1 - s0)) fsyncs"
		echo "FIG intent_revoke_fsyncs@$N $((s2 - s1)) fsyncs"
		echo "FIG intent_grant_journal_bytes@$N $((b1 - b0)) B"
		echo "FIG intent_revoke_journal_bytes@$N $((b2 - b1)) B"
		echo "FIG intent_grant_ms_per_block@$N $per ms $ref memgrantctl_configure+online"
	fi
done
