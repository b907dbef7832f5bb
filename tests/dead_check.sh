#!/bin/sh
# No dead functions: every global function the product's objects define
# ($BUILD/{agent,config,hotplug,lib,providers}) is referenced by some object
# of the build (programs, unit tests, tools, benchmarks, fuzz replays): an
# undefined symbol (nm -u) or a relocation (objdump -r: calls inside the
# same file, function pointers).  A function the compiler inlined into every
# caller of its own file leaves neither, so a candidate counts as dead only
# when its name also appears in no C file but on its declaration and
# definition lines.  Run after make all (make check does).
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
command -v nm >/dev/null 2>&1 && command -v objdump >/dev/null 2>&1 || { echo "dead_check: needs nm and objdump (binutils)"; exit 1; }
# objects of sources that exist: a build folder kept across a rename still
# holds the old name's object, which is nobody's now
current() {
	while read -r o; do
		src=${o#"$BUILD"/}
		[ -e "${src%.o}.c" ] && echo "$o"
	done
}
prod=$(find "$BUILD/agent" "$BUILD/config" "$BUILD/hotplug" "$BUILD/lib" "$BUILD/providers" -name '*.o' 2>/dev/null | current)
[ -n "$prod" ] || { echo "dead_check: no objects under $BUILD (run make all first)"; exit 1; }
all=$(find "$BUILD" -name '*.o' -not -path "$BUILD/fuzz/*" | current)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086 # the object lists are split on purpose
nm --defined-only -g $prod | awk '$2 == "T" { print $3 }' | sort -u >"$tmp/defined"
# shellcheck disable=SC2086
{
	nm -u $all | awk '{ print $NF }'
	objdump -r $all | awk 'NF == 3 && $1 ~ /^[0-9a-f]+$/ { s = $3; sub(/[-+].*/, "", s); print s }'
} | sort -u >"$tmp/referenced"
dead=0
for f in $(comm -23 "$tmp/defined" "$tmp/referenced" | grep -v -e '^main$' -e '^LLVMFuzzer'); do
	# lines naming F outside comments: its declaration and its definition make 2
	n=$(find agent config hotplug lib providers tests bench -name '*.[ch]' -exec grep -hw -- "$f" {} + |
		grep -v -e '^[[:space:]]*\*' -e '^[[:space:]]*/[*/]' | wc -l)
	if [ "$n" -le 2 ]; then
		echo "dead_check: $f() is defined and called nowhere: remove it (or call it)"
		dead=$((dead + 1))
	fi
done
[ "$dead" -eq 0 ] || { echo "dead_check: $dead dead functions"; exit 1; }
echo "dead_check: every global function has a caller"
