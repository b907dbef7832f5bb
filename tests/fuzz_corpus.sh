#!/bin/sh
# Every fuzz harness (tests/fuzz/fuzz_NAME.c) over its seed corpus
# (tests/fuzz/corpus/NAME/), built without libFuzzer as
# $BUILD/tests/fuzz/replay_NAME (tests/fuzz/replay.c): a parser that crashes,
# or breaks the invariant its harness asserts, on one seed fails make check.
# memgrant-host's harnesses are skipped when it is not built (no libvirt).
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
bad=0 n=0
for h in tests/fuzz/fuzz_*.c; do
	h=${h##*/fuzz_}
	h=${h%.c}
	bin=$BUILD/tests/fuzz/replay_$h
	if [ ! -x "$bin" ]; then
		case $h in host_*) [ -x "$BUILD/memgrant-host" ] || continue ;; esac
		echo "fuzz_corpus: $bin is missing (make all builds it)"
		bad=1
		continue
	fi
	[ -d "tests/fuzz/corpus/$h" ] || { echo "fuzz_corpus: no seeds in tests/fuzz/corpus/$h"; bad=1; continue; }
	seeds="tests/fuzz/corpus/$h"
	# the configuration's harness also starts from the shipped file and the fixtures (as build.sh does)
	[ "$h" = config ] && seeds="$seeds config/memgrant.yaml tests/fixtures/config/good tests/fixtures/config/bad"
	# the harnesses' work folders are /tmp/fuzz-NAME.PID: removed after the run
	# shellcheck disable=SC2086 # the seed list is split on purpose
	${TEST_WRAPPER:-} "$bin" $seeds >"${TMPDIR:-/tmp}/fuzz_corpus.$$.out" 2>&1 &
	pid=$!
	wait "$pid"
	rc=$?
	rm -rf "/tmp/fuzz-$(echo "$h" | tr _ -).$pid"
	if [ "$rc" -ne 0 ]; then
		echo "fuzz_corpus: $h failed on its seeds (exit $rc):"
		tail -n 20 "${TMPDIR:-/tmp}/fuzz_corpus.$$.out" | sed 's/^/    /'
		bad=1
	else
		echo "fuzz_corpus: $h: $(grep -v "^replay: [^0-9]" "${TMPDIR:-/tmp}/fuzz_corpus.$$.out")"
		n=$((n + 1))
	fi
done
rm -f "${TMPDIR:-/tmp}/fuzz_corpus.$$.out"
echo "fuzz_corpus: $n harnesses replayed their seeds"
exit "$bad"
