#!/bin/sh
# Runs cmocka unit binaries and integration scripts, counts every test case,
# and closes with "N passed, N failed" (and skipped, when some were).
# An integration script is one test: exit 0 passes, 77 skips, anything else fails.
# Logs of each run are kept under $BUILD/test-logs/.
#
# Tests run TEST_JOBS at a time (default: two per CPU; 1 runs them one by
# one): most of them wait on a daemon far more than they compute.  A script
# whose header has the line "# test-runner: alone" (one that loads the machine
# itself, or counts what a loaded machine would disturb) runs after the others,
# with nothing beside it.  Each test's result is printed whole when it ends.
set -u
BUILD=${BUILD:-build}
logs=$BUILD/test-logs
runner=$0

# run_one TEST: runs one test, writes its counts to $logs/NAME.counts
# ("passed failed skipped") and prints its result block in one write.
run_one() {
	t=$1
	name=$(basename "$t")
	log=$logs/$name.log
	out=$logs/$name.out
	t0=$(date +%s)
	case $t in
	*.sh)
		BUILD=$BUILD timeout 600 sh "$t" >"$log" 2>&1
		rc=$?
		case $rc in
		0) printf '%-40s ok (%ss)\n' "$name" "$(( $(date +%s) - t0 ))" >"$out"; c="1 0 0" ;;
		77) why=$(tail -n 1 "$log" | sed 's/^skipped: //; s/^SKIPPED: //')
		    printf '%-40s skipped: %s\n' "$name" "$why" >"$out"; c="0 0 1"
		    printf '%s\n' "$why" >"$logs/$name.skip" ;;
		*) { printf '%-40s FAILED (exit %s, log %s)\n' "$name" "$rc" "$log"
		     tail -n 30 "$log" | sed 's/^/    /'; } >"$out"
		   c="0 1 0" ;;
		esac
		;;
	*)
		# shellcheck disable=SC2086
		CMOCKA_MESSAGE_OUTPUT=stdout timeout 600 ${TEST_WRAPPER:-} "$t" >"$log" 2>&1
		rc=$?
		# a binary may run several cmocka groups: add them all up
		p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
		f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
		s=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
		p=${p:-0} f=${f:-0} s=${s:-0}
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			f=1 # crashed or timed out before cmocka could count
		fi
		skips=
		if [ "$s" -gt 0 ]; then # with the reason a test printed as "SKIPPED: why"
			why=$(sed -n 's/^.*SKIPPED: //p' "$log" | tail -n 1)
			skips=", $s skipped${why:+ ($why)}"
			printf '%s\n' "${why:-no reason printed}" >"$logs/$name.skip"
		fi
		{ printf '%-40s %s passed, %s failed%s (%ss)\n' "$name" "$p" "$f" "$skips" "$(( $(date +%s) - t0 ))"
		  if [ "$f" -ne 0 ]; then
			grep -E '^\[  (FAILED|ERROR)|^\[ +ERROR|Failure|error:|ERROR' "$log" | head -n 20 | sed 's/^/    /'
			tail -n 15 "$log" | sed 's/^/    /'
		  fi; } >"$out"
		c="$p $f $s"
		;;
	esac
	echo "$c" >"$logs/$name.counts"
	cat "$out"
}

if [ "${1:-}" = --one ]; then
	run_one "$2"
	exit 0
fi

mkdir -p "$logs"
jobs=${TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 1) * 2 ))}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
for t in "$@"; do
	rm -f "$logs/$(basename "$t").counts" "$logs/$(basename "$t").skip"
done

together= alone=
for t in "$@"; do
	if case $t in *.sh) grep -q '^# test-runner: alone' "$t" ;; *) false ;; esac; then
		alone="$alone $t"
	else
		together="$together $t"
	fi
done
# shellcheck disable=SC2086
printf '%s\n' $together | xargs -r -P "$jobs" -n 1 sh "$runner" --one
for t in $alone; do
	sh "$runner" --one "$t"
done

passed=0 failed=0 skipped=0 failed_names=
for t in "$@"; do
	name=$(basename "$t")
	if [ -r "$logs/$name.counts" ]; then
		read -r p f s <"$logs/$name.counts"
	else
		echo "$name: no result (the runner was stopped?)"
		p=0 f=1 s=0
	fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	[ "$f" -ne 0 ] && failed_names="$failed_names $name"
done

[ -n "$failed_names" ] && echo "failing:$failed_names"
# why tests skipped, one line per reason with the tests it stopped
if [ "$skipped" -gt 0 ]; then
	echo "skipped, by reason:"
	for t in "$@"; do
		name=$(basename "$t")
		[ -r "$logs/$name.skip" ] && printf '%s\t%s\n' "$(cat "$logs/$name.skip")" "$name"
	done | sort | awk -F '\t' '$1 != r { if (r != "") print "  " r ": " n; r = $1; n = $2; next } { n = n ", " $2 }
		END { if (r != "") print "  " r ": " n }'
fi
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
