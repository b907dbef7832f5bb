#!/bin/sh
# memgrantd runs without glibc's per-thread malloc caches (lib/heap.h):
# their chunks keep pages of the heap malloc_trim() hands back, and RSS
# crept up over grant+revocation cycles.  It runs itself again at start
# with glibc.malloc.tcache_count=0 added to GLIBC_TUNABLES (the same pid,
# so a service manager and a pid file see one process); the operator's
# other tunables stay, and an operator's own tcache_count is kept as given.
. "$(dirname "$0")/lib.sh"
# under qemu-user /proc/self/exe is the emulator: the agent runs as it was
# started (lib/heap.c), which the runs below would count as a failure
[ -z "${TEST_WRAPPER:-}" ] || skip "skipped: under qemu-user (/proc/self/exe is the emulator's)"

# tunables_of PID: its GLIBC_TUNABLES, "(unset)" without.  glibc splits
# the variable in place where it parses it (a NUL for each ':'), so the
# entries after it that are tunables ("glibc.*", no variable has a dot
# in its name) are joined back.
tunables_of() {
	python3 -c 'import sys
env = open("/proc/%s/environ" % sys.argv[1], "rb").read().decode().split("\0")
out = []
for i, e in enumerate(env):
    if e.startswith("GLIBC_TUNABLES="):
        out = [e[len("GLIBC_TUNABLES="):]]
        for f in env[i + 1:]:
            if not f.startswith("glibc."):
                break
            out.append(f)
print(":".join(out) if out else "(unset)")' "$1"
}

# check_run WHAT WANT [VALUE]: started with GLIBC_TUNABLES=VALUE (unset
# without), the daemon serves, under the pid it was started as, with WANT
check_run() {
	what=$1 want=$2
	if [ $# -ge 3 ]; then
		GLIBC_TUNABLES=$3
		export GLIBC_TUNABLES
	else
		unset GLIBC_TUNABLES
	fi
	start_daemon
	unset GLIBC_TUNABLES
	got=$(tunables_of "$DAEMON_PID")
	[ "$got" = "$want" ] || fail "$what: GLIBC_TUNABLES is '$got', want '$want'"
	$CTL grant 256M --id "g-$what" --wait > /dev/null || fail "$what: grant"
	$CTL revoke 256M --wait > /dev/null || fail "$what: revoke"
	stop_daemon
}

check_run plain glibc.malloc.tcache_count=0
check_run others glibc.malloc.arena_test=2:glibc.malloc.tcache_count=0 glibc.malloc.arena_test=2
check_run operators glibc.malloc.tcache_count=3 glibc.malloc.tcache_count=3
check_run empty glibc.malloc.tcache_count=0 ""

# once per start: the log says nothing of it, and no second agent ran
n=$(grep -c 'memory interface:' "$T/daemon.log")
[ "$n" = 4 ] || fail "$n starts logged for 4 runs"
echo ok
