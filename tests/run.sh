#!/bin/sh
# Runs cmocka unit binaries and integration scripts, counts every test case,
# and closes with "N passed, N failed" (and skipped, when some were).
# An integration script is one test: exit 0 passes, 77 skips, anything else fails.
# Logs of each run are kept under $BUILD/test-logs/.
set -u
BUILD=${BUILD:-build}
logs=$BUILD/test-logs
mkdir -p "$logs"
passed=0 failed=0 skipped=0
failed_names=

for t in "$@"; do
	name=$(basename "$t")
	log=$logs/$name.log
	t0=$(date +%s)
	case $t in
	*.sh)
		printf '%-40s ' "$name"
		BUILD=$BUILD timeout 600 sh "$t" >"$log" 2>&1
		rc=$?
		case $rc in
		0) echo "ok ($(( $(date +%s) - t0 ))s)"; passed=$((passed + 1)) ;;
		77) echo "skipped: $(tail -n 1 "$log")"; skipped=$((skipped + 1)) ;;
		*) echo "FAILED (exit $rc, log $log)"; tail -n 30 "$log" | sed 's/^/    /'
		   failed=$((failed + 1)); failed_names="$failed_names $name" ;;
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
		fi
		printf '%-40s %s passed, %s failed%s (%ss)\n' "$name" "$p" "$f" "$skips" "$(( $(date +%s) - t0 ))"
		if [ "$f" -ne 0 ]; then
			grep -E '^\[  (FAILED|ERROR)|^\[ +ERROR|Failure|error:|ERROR' "$log" | head -n 20 | sed 's/^/    /'
			tail -n 15 "$log" | sed 's/^/    /'
			failed_names="$failed_names $name"
		fi
		passed=$((passed + p))
		failed=$((failed + f))
		skipped=$((skipped + s))
		;;
	esac
done

[ -n "$failed_names" ] && echo "failing:$failed_names"
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
