#!/bin/sh
# make demo into a pipe, as a newcomer saves its log: no escape codes (bold
# commands are for a terminal only), no warning or error a newcomer could not
# act on, no make noise; every step shown and the agent stopped cleanly.
# The same as root (the agent runs as nobody) and as an ordinary user.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v make >/dev/null 2>&1 || skip "make is needed"
# under qemu-user BUILD is a folder of wrapper scripts (.ci/s390x.sh): make
# would build the programs into it over the wrappers; the demo runs natively
[ -z "${TEST_WRAPPER:-}" ] || skip "skipped: under qemu-user (make demo builds and runs natively)"
# B: the build the test runs on (make check's, maybe a sanitizer build)
make -C "$ROOT" --no-print-directory B="$BUILD" demo < /dev/null 2>&1 | cat > "$T/demo.log"
check_log() { # WHO
	if grep -q "$(printf '\033')" "$T/demo.log"; then fail "$1: escape codes in the piped log: $(grep -n "$(printf '\033')" "$T/demo.log" | cat -v)"; fi
	grep -n -i 'warning\|error:\|make\[' "$T/demo.log" && fail "$1: a warning, error or make line in the log"
	for s in 'memgrantctl lsmem' 'memgrantctl grant 1G --wait' 'memgrantctl revoke 512M --wait' 'memgrantctl grants' 'memgrantctl status'; do
		grep -qx "\$ $s" "$T/demo.log" || fail "$1: step '$s' not shown plainly: $(cat "$T/demo.log")"
	done
	grep -q 'grant local-1: applied, 1G of 1G' "$T/demo.log" || fail "$1: the grant did not apply: $(cat "$T/demo.log")"
	grep -q 'memgrantd: stopped$' "$T/demo.log" || fail "$1: memgrantd did not stop cleanly: $(cat "$T/demo.log")"
}
check_log "make demo"
as_nobody() { setpriv --reuid nobody --regid "$(id -g nobody)" --clear-groups "$@"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && id nobody >/dev/null 2>&1 &&
	! as_nobody test -x "$BUILD/memgrantd"; then
	echo "not run as nobody: the build in $BUILD is not reachable for other users"
elif [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && id nobody >/dev/null 2>&1; then
	# an ordinary user: the demo script itself (make deps would want root)
	chmod 0755 "$T"
	as_nobody env HOME="$T" BUILD="$BUILD" \
		sh "$ROOT/tests/demo.sh" < /dev/null > "$T/demo.log" 2>&1 || fail "demo as nobody: $(cat "$T/demo.log")"
	check_log "demo as nobody"
fi
echo ok
