#!/bin/sh
# The privilege split, started as root: memgrantd runs as two processes.
# Exactly one of them is root: the helper, which has no capabilities, no API
# socket, no network socket and no libcurl mapped; the other runs as the
# unprivileged user (agent.user: nobody here) with CapEff 0 and holds the
# API socket.  Both show "Seccomp: 2" and NoNewPrivs.  A grant and a
# revocation work end to end through the helper, and when the helper dies
# the agent stops with a clear line instead of running on without it.
. "$(dirname "$0")/lib.sh"

# Under qemu-user (.ci/s390x.sh sets TEST_WRAPPER) what this test reads in
# /proc is the emulator's: both processes are qemu-s390x-static (no process
# named memgrant-helper, the maps are qemu's), and qemu-user refuses seccomp,
# so the daemon runs with agent.seccomp=off (no "Seccomp: 2").
[ -z "${TEST_WRAPPER:-}" ] ||
	skip "skipped: under qemu-user the processes are the emulator and run without seccomp (checked natively)"
[ "$(id -u)" -eq 0 ] || skip "skipped: needs root (the split changes uid)"
id nobody >/dev/null 2>&1 || skip "skipped: no user nobody"

# the unprivileged user must reach the test directory and the sim in it
chmod 0755 "$T"
NOGROUP=$(id -gn nobody)
SOCK=$T/run/api.sock # its directory is created by memgrantd for nobody
CTL="$MEMGRANTCTL --socket $SOCK"
AGENT_USER=nobody write_config
sed -i "s|^  api_group: .*|  api_group: $NOGROUP|" "$T/memgrant.yaml"
start_daemon

main=$DAEMON_PID
helper=$(pgrep -P "$main" -x memgrant-helper) || fail "no memgrant-helper child of memgrantd $main"
[ "$(echo "$helper" | wc -l)" -eq 1 ] || fail "more than one helper: $helper"

status() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "/proc/$1/status"; }
uids() { status "$1" Uid | tr -s '\t ' ' '; }

# every process of the agent: the main process, its threads share it, and its children
procs=$(printf '%s\n%s\n' "$main" "$(pgrep -P "$main")" | sort -u)
roots=0
for p in $procs; do
	u=$(uids "$p")
	[ "$u" = "0 0 0 0" ] && roots=$((roots + 1))
done
expect_eq "processes running as root" "$roots" 1
expect_eq "helper uids" "$(uids "$helper")" "0 0 0 0"
nobody_uid=$(id -u nobody)
expect_eq "main process uids" "$(uids "$main")" "$nobody_uid $nobody_uid $nobody_uid $nobody_uid"

for p in $main $helper; do
	expect_eq "CapEff of $p" "$(status "$p" CapEff)" 0000000000000000
	expect_eq "CapPrm of $p" "$(status "$p" CapPrm)" 0000000000000000
	expect_eq "CapAmb of $p" "$(status "$p" CapAmb)" 0000000000000000
	expect_eq "Seccomp of $p" "$(status "$p" Seccomp)" 2
	expect_eq "NoNewPrivs of $p" "$(status "$p" NoNewPrivs)" 1
done
expect_eq "CapBnd of the main process" "$(status "$main" CapBnd)" 0000000000000000

# the helper: one fd that is a socket (its end of the pair), no libcurl, no OpenSSL, no libmicrohttpd
sockets() { ls -l "/proc/$1/fd" 2>/dev/null | grep -c 'socket:'; }
expect_eq "sockets of the helper" "$(sockets "$helper")" 1
for lib in libcurl libssl libmicrohttpd libyaml; do
	grep -q "$lib" "/proc/$helper/maps" && fail "the helper maps $lib"
done
grep -q libmicrohttpd "/proc/$main/maps" || fail "the main process does not map libmicrohttpd (the check above would prove nothing)"
# nor does the agent load libcurl or libcrypto when neither HTTPS nor a webhook is configured
for lib in libcurl libcrypto; do
	grep -q "$lib" "/proc/$main/maps" && fail "the main process maps $lib with neither HTTPS nor a webhook configured"
done
# the API socket is the main process's: its inode is among the main process's fds, not the helper's
api_inode=$(awk -v p="$SOCK" '$8 == p { print $7 }' /proc/net/unix | head -n 1)
[ -n "$api_inode" ] || fail "no listening socket $SOCK in /proc/net/unix"
ls -l "/proc/$main/fd" | grep -q "socket:\[$api_inode\]" || fail "the main process does not hold the API socket"
ls -l "/proc/$helper/fd" | grep -q "socket:\[$api_inode\]" && fail "the helper holds the API socket"
[ "$(stat -c %U "$SOCK")" = nobody ] || fail "the API socket belongs to $(stat -c %U "$SOCK"), not nobody"
[ "$(stat -c %U "$T/state")" = nobody ] || fail "the state directory belongs to $(stat -c %U "$T/state")"

# a grant and a revocation, end to end
out=$($CTL grant 512M --wait) || fail "grant: $out"
echo "$out" | grep -q "applied" || fail "grant not applied: $out"
[ "$($CTL status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["memory"]["online_bytes"])')" = $((2560 * 1024 * 1024)) ] ||
	fail "online memory after the grant: $($CTL status)"
out=$($CTL revoke 512M --wait) || fail "revoke: $out"
echo "$out" | grep -q "applied" || fail "revocation not applied: $out"
[ "$($CTL status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["memory"]["online_bytes"])')" = $((2048 * 1024 * 1024)) ] ||
	fail "online memory after the revocation: $($CTL status)"
grep -q "Bad system call\|SIGSYS" "$T/daemon.log" && fail "a seccomp kill in the log"

# the helper gone: the agent says so and stops (non-zero) instead of running on
kill -KILL "$helper"
i=0
while kill -0 "$main" 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 100 ] && fail "memgrantd still runs 10s after its helper died"
	sleep 0.1
done
rc=0
wait "$main" || rc=$?
DAEMON_PID=
[ "$rc" -ne 0 ] || fail "memgrantd exited 0 after losing its helper"
# one line says it all: that the helper is gone and how it ended
[ "$(grep -c "the privileged helper is gone" "$T/daemon.log")" -eq 1 ] ||
	fail "not exactly one log line about the helper's end: $(grep "privileged helper" "$T/daemon.log")"
grep -q "the privileged helper is gone (killed by " "$T/daemon.log" || fail "the line does not say how the helper ended"
grep -q "Broken pipe\|main loop:" "$T/daemon.log" && fail "the helper's end reported as an error of something else"
echo "split checked: helper $helper (root, no capabilities), main $main (nobody)"
