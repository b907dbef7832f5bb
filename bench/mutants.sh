#!/bin/sh
# One-line mutants of the product code, each run against the tests that
# cover its area (not part of make check: a full run takes as long as many
# make checks).  Each line of LIST (default bench/mutants.list) is
#   FILE|LINE|FROM|TO|TESTS
# FROM is replaced by TO on LINE of FILE (a fixed string, which must occur
# there); TESTS are unit binaries' names (test_engine) and integration
# scripts (tests/integration/X.sh) run through tests/run.sh.  A mutant is
# killed when the build fails or a test fails.  Prints one line per mutant
# and the count; the tree is restored after each.  Run from the top of a
# configured tree:  sh bench/mutants.sh [LIST]
set -u
LIST=${1:-bench/mutants.list}
BUILD=${BUILD:-build}
killed=0 total=0 survivors=
while IFS='|' read -r file line from to tests; do
	case $file in '' | '#'*) continue ;; esac
	total=$((total + 1))
	cp "$file" "$file.mutant-orig"
	FROM=$from TO=$to LINE=$line perl -i -pe 'if ($. == $ENV{LINE}) { $n = index($_, $ENV{FROM}); substr($_, $n, length($ENV{FROM})) = $ENV{TO} if $n >= 0 }' "$file"
	if cmp -s "$file" "$file.mutant-orig"; then
		echo "mutant $total $file:$line: '$from' not on that line: not applied"
		mv "$file.mutant-orig" "$file"
		continue
	fi
	run=
	for t in $tests; do
		case $t in *.sh) run="$run $t" ;; *) run="$run $BUILD/tests/$t" ;; esac
	done
	if ! make -s -j2 all >/dev/null 2>&1; then
		verdict="killed (build)"
	elif BUILD=$BUILD tests/run.sh $run >"$BUILD/mutant.log" 2>&1; then
		verdict="SURVIVED"
	else
		verdict="killed by $(grep -E 'FAILED|failed \(' "$BUILD/mutant.log" | grep -v ' 0 failed' | head -n 1 | awk '{print $1}')"
	fi
	mv "$file.mutant-orig" "$file"
	touch "$file"
	case $verdict in SURVIVED) survivors="$survivors $file:$line" ;; *) killed=$((killed + 1)) ;; esac
	echo "mutant $total $file:$line '$from' -> '$to': $verdict"
done <"$LIST"
make -s -j2 all >/dev/null 2>&1
echo "mutants: $killed of $total killed; survivors:${survivors:- none}"
