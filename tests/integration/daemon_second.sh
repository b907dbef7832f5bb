#!/bin/sh
# A second memgrantd with the running one's configuration fails at once
# (well before the 30 s the helper lock would wait), exit 1, and names the
# running agent: its pid, its API socket and its state folder.  The running
# one keeps answering.  A socket file left by a killed agent does not stop
# a new start.
. "$(dirname "$0")/lib.sh"
start_daemon
# a baseline from this run: how long a start that fails on a bad option takes
t0=$(date +%s%N)
"$MEMGRANTD" -c "$T/memgrant.yaml" --no-such-option > /dev/null 2>&1
base=$(( ($(date +%s%N) - t0) / 1000000 ))
t0=$(date +%s%N)
"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground > "$T/second.log" 2>&1
rc=$?
took=$(( ($(date +%s%N) - t0) / 1000000 ))
cat "$T/second.log"
[ "$rc" = 1 ] || fail "the second memgrantd exited $rc, want 1"
# the lock's wait is 30 s: at once means far below it, whatever the load
[ "$took" -lt $((base + 10000)) ] || fail "the second memgrantd took $took ms (a failed start: $base ms)"
grep -q "memgrantd is already running (pid $DAEMON_PID): its API answers on $SOCK, its state folder is $T/state; not starting a second one" "$T/second.log" ||
	fail "the second memgrantd said: $(cat "$T/second.log")"
grep -q "helper.lock" "$T/second.log" && fail "the second memgrantd names the helper lock"
$CTL status > /dev/null || fail "the first memgrantd stopped answering"
# without --foreground too (a classic daemon detaches: it must fail before)
"$MEMGRANTD" -c "$T/memgrant.yaml" > "$T/third.log" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "the second memgrantd (detaching) exited $rc, want 1: $(cat "$T/third.log")"
grep -q "already running (pid $DAEMON_PID)" "$T/third.log" || fail "detaching: $(cat "$T/third.log")"

# killed: its socket file stays, nobody listens; the next start goes on
kill -KILL "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
[ -S "$SOCK" ] || fail "no socket file left behind to test with"
start_daemon
grep -q "already running" "$T/daemon.log" && fail "a stale socket file was taken for a running agent"
stop_daemon
echo ok
