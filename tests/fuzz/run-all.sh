#!/bin/sh
# Builds every libFuzzer harness (tests/fuzz/fuzz_*.c) under ASan+UBSan and
# runs each briefly, as CI does: SECONDS each (default 20), or FUZZ_RUNS=N
# inputs each.  Prints one line per harness with its exec count and a
# summary; exit 0 no crash, 1 a harness crashed (see build/fuzz/), 2 cannot
# build.  Longer runs by hand: tests/fuzz/build.sh 600 [HARNESS...].
set -u
cd "$(dirname "$0")/../.."
SECS=${1:-${FUZZ_SECONDS:-20}}
t0=$(date +%s)
BUILD=${BUILD:-build}
sh tests/fuzz/build.sh "$SECS" | tee "${TMPDIR:-/tmp}/fuzz-run-all.$$"
rc=$?
# pipefail is not POSIX: take build.sh's status from what it printed
if grep -q '^FAIL:' "${TMPDIR:-/tmp}/fuzz-run-all.$$"; then
	rc=1
elif ! grep -q '^fuzz_' "${TMPDIR:-/tmp}/fuzz-run-all.$$"; then
	rc=2
fi
n=$(grep -c '^fuzz_[a-z_]*: stat::number_of_executed_units' "${TMPDIR:-/tmp}/fuzz-run-all.$$")
rm -f "${TMPDIR:-/tmp}/fuzz-run-all.$$"
echo "fuzz: $n harnesses ran without a crash in $(( $(date +%s) - t0 ))s" | sed "s/without a crash/$( [ $rc -eq 0 ] || echo 'with a FAILURE,')&/"
exit $rc
