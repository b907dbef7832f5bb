#!/bin/sh
# Benchmark: what the journal costs per grant, in fsyncs and bytes written,
# for the whole-file journal.json (agent/journal.c, as memgrantd uses it) and
# the intent log (agent/intentlog.c: accept, intent, result).  Prints
# figures; asserts nothing.  Needs strace for the fsync counts.
#   bench/journal_cost.sh [BLOCKS...]     (default 1 16 256 4096; the old
#                                          journal is skipped above 256: O(N^2))
set -eu
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
TOOL=$BUILD/tests/tools/journal_bench
[ -x "$TOOL" ] || { echo "journal_cost: build first ($TOOL)"; exit 2; }
command -v strace > /dev/null || { echo "journal_cost: needs strace"; exit 2; }
T=$(mktemp -d /tmp/memgrant-jbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "state on $(df -T "$T" | awk 'NR==2 {print $2}'); one grant of N blocks, the engine's journal writes"
printf '%-10s %7s %8s %12s %14s %9s\n' journal blocks fsyncs "fsync/block" bytes seconds
for n in ${*:-1 16 256 4096}; do
	for way in old new; do
		[ "$way" = old ] && [ "$n" -gt 256 ] && continue
		rm -rf "$T/state"
		out=$(strace -f -c -e trace=fsync,fdatasync -o "$T/strace" "$TOOL" "$T/state" "$n" "$way" | tail -n 1)
		syncs=$(awk '$NF == "fsync" || $NF == "fdatasync" { s += $(NF-1) } END { print s + 0 }' "$T/strace")
		bytes=$(echo "$out" | sed -n 's/.*: \([0-9]*\) bytes written.*/\1/p')
		secs=$(echo "$out" | sed -n 's/.*written, \([0-9.]*\) s/\1/p')
		printf '%-10s %7s %8s %12s %14s %9s\n' "$way" "$n" "$syncs" \
			"$(awk -v s="$syncs" -v n="$n" 'BEGIN { printf "%.2f", s / n }')" "$bytes" "$secs"
	done
done
echo "(new: the 2 fsyncs of creating journal.log are included; a grant itself is 3 fdatasyncs)"
