#!/bin/sh
# Builds the libFuzzer harnesses with clang (fuzzer, address, undefined) and
# runs each for SECONDS (default 60).  make check replays only the seeds,
# without libFuzzer (tests/fuzz_corpus.sh); CI runs every
# harness briefly through tests/fuzz/run-all.sh).
#
#   tests/fuzz/build.sh [SECONDS] [HARNESS...]     e.g. tests/fuzz/build.sh 30 message
#
# Every tests/fuzz/fuzz_NAME.c is a harness; the sources it needs besides
# lib/ are listed in its header comment on a line " * Sources: PATH.c ...".
# FUZZ_RUNS=N runs each N inputs instead of SECONDS.  FUZZ_JOBS harnesses
# build and run at a time (default: one per CPU).
# Needs clang and its runtime (Debian: apt-get install clang libclang-rt-14-dev,
# plus libjansson-dev libyaml-dev libcurl4-openssl-dev).  Work files go to
# $BUILD/fuzz (default build/fuzz): binaries, the growing corpus, and crash
# artifacts.  The seeds in tests/fuzz/corpus/ are read, never written.
# Exit 0: no crash; 1: a harness crashed (the input is in $BUILD/fuzz/artifacts,
# replay it with: $BUILD/fuzz/fuzz_NAME FILE); 2: cannot build.
set -eu
cd "$(dirname "$0")/../.."
SECONDS_EACH=${1:-60}
[ $# -gt 0 ] && shift
HARNESSES=${*:-$(for f in tests/fuzz/fuzz_*.c; do f=${f##*/fuzz_}; echo "${f%.c}"; done)}
CLANG=${CLANG:-clang}
BUILD=${BUILD:-build}
OUT=$BUILD/fuzz

case $SECONDS_EACH in
*[!0-9]* | '') echo "build.sh: SECONDS must be a whole number, got '$SECONDS_EACH'" >&2; exit 2 ;;
esac
command -v "$CLANG" >/dev/null 2>&1 || { echo "build.sh: $CLANG not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

pc() { pkg-config "$@" 2>/dev/null || true; }
CFLAGS="-std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -ffunction-sections -fdata-sections -I. $(pc --cflags jansson yaml-0.1 libcurl libcrypto)"
LIBS="$(pc --libs jansson yaml-0.1 libcurl libcrypto)"
[ -n "$LIBS" ] || LIBS="-ljansson -lyaml -lcurl -lcrypto"
LIBSRC="lib/errname.c lib/size.c lib/fileio.c lib/timeutil.c hotplug/words.c hotplug/block.c lib/dl_table.c lib/curl_dl.c lib/crypto_dl.c" # message.c and config use the words and the block model; config/ the loaded libcurl and libcrypto
# the loaded libraries' sonames, from the one list (lib/dlopen.list)
soname() { awk -F';' -v n="$1" '$1 == n { print $2 }' lib/dlopen.list; }
CFLAGS="$CFLAGS -DMEMGRANT_CURL_SONAME=\"$(soname curl)\" -DMEMGRANT_CRYPTO_SONAME=\"$(soname crypto)\""
LIMIT="-max_total_time=$SECONDS_EACH"
[ -n "${FUZZ_RUNS:-}" ] && LIMIT="-runs=$FUZZ_RUNS"

JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $JOBS in *[!0-9]* | '' | 0) JOBS=1 ;; esac

# each_harness FUNCTION: FUNCTION NAME for every harness, JOBS at a time;
# fails when one of them failed
each_harness() {
	fn=$1 bad=0 n=0 pids=
	for h in $HARNESSES; do
		$fn "$h" &
		pids="$pids $!"
		n=$((n + 1))
		if [ $n -ge "$JOBS" ]; then
			for p in $pids; do wait "$p" || bad=1; done
			pids= n=0
		fi
	done
	for p in $pids; do wait "$p" || bad=1; done
	return $bad
}

build_one() {
	h=$1
	src=$(sed -n 's/^ \* Sources: //p' "tests/fuzz/fuzz_$h.c")
	echo "  FUZZCC  $OUT/fuzz_$h"
	# shellcheck disable=SC2086 # word splitting of the flag lists is wanted
	$CLANG $CFLAGS -Wl,--gc-sections -o "$OUT/fuzz_$h" "tests/fuzz/fuzz_$h.c" $src $LIBSRC $LIBS
}

mkdir -p "$OUT/artifacts"
for h in $HARNESSES; do
	[ -f "tests/fuzz/fuzz_$h.c" ] || { echo "build.sh: no harness tests/fuzz/fuzz_$h.c" >&2; exit 2; }
done
each_harness build_one || exit 2

run_one() {
	h=$1
	work=$OUT/corpus-$h
	mkdir -p "$work"
	# seeds: our corpus, and for the config the shipped file and every fixture
	seeds=
	[ -d "tests/fuzz/corpus/$h" ] && seeds="tests/fuzz/corpus/$h"
	if [ "$h" = config ]; then
		cp config/memgrant.yaml "$work/shipped.yaml"
		for f in tests/fixtures/config/good/*.yaml tests/fixtures/config/bad/*.yaml; do
			d=${f%/*}
			cp "$f" "$work/${d##*/}-${f##*/}"
		done
	fi
	dict=
	[ -f "tests/fuzz/$h.dict" ] && dict="-dict=tests/fuzz/$h.dict"
	echo "  FUZZ    $h (${FUZZ_RUNS:-$SECONDS_EACH s})"
	# shellcheck disable=SC2086
	if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		"$OUT/fuzz_$h" $LIMIT -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
		-artifact_prefix="$OUT/artifacts/$h-" -print_final_stats=1 $dict "$work" $seeds \
		>"$OUT/$h.log" 2>&1; then
		echo "FAIL: fuzz_$h found a problem; see $OUT/$h.log and $OUT/artifacts/$h-*"
		grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$OUT/$h.log" | head -5
		return 1
	else
		echo "fuzz_$h: $(grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$OUT/$h.log" | tr '\n' ' ')"
	fi
}

rc=0
each_harness run_one || rc=1
exit $rc
