#!/bin/sh
# The channel waits for a port that is not there without a timer: after the
# first quick retries it sleeps until the port's path appears (inotify on
# the nearest existing directory, here two levels up), then connects. No
# wall-clock window: the order of the agent's (debug) lines is the test.
# - it says it waits on inotify on $T for "ports";
# - nothing wakes it while the test creates nothing: however long the test
#   takes before the next step, no wake-up line (a timer would log one);
# - each directory and the socket appearing wake it, as inotify events
#   ("changed"), and it connects (a hang guard, no speed target).
. "$(dirname "$0")/lib.sh"

LISTEN_PID=
trap 'kill $LISTEN_PID 2>/dev/null; cleanup' EXIT INT TERM
port=$T/ports/virtio/guest.sock
write_config "providers:" "  channel:" "    path: $port"
start_daemon

# until_true CONDITION WHY: poll with a hang guard of 60 s (not a speed target)
until_true() {
	i=0
	until eval "$1"; do
		i=$((i + 1)); [ $i -gt 600 ] && fail "$2"; sleep 0.1
	done
}
until_true 'grep -q "cannot open $port" "$T/daemon.log"' "the agent did not report the missing port"
until_true 'grep -q "channel: waiting for $port: inotify on $T for ports" "$T/daemon.log"' \
	"the agent did not go to wait on inotify after the quick retries"
attempts=$(grep -c "channel: waiting for $port" "$T/daemon.log")
$CTL status > /dev/null || fail "API"   # the test's own step: the API answers meanwhile
grep -q "changed: " "$T/daemon.log" && fail "the agent woke up while nothing changed"
expect_eq "waits while nothing changed" "$(grep -c "channel: waiting for $port" "$T/daemon.log")" "$attempts"

mkdir -p "$T/ports/virtio"
until_true 'grep -q "channel: $T/ports changed: trying $port again" "$T/daemon.log"' \
	"creating the port's directories did not wake the agent"
python3 - "$port" > "$T/listen.log" 2>&1 <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(1)
c, _ = s.accept()
print("accepted", flush=True)
c.recv(1)
PY
LISTEN_PID=$!
until_true 'grep -q accepted "$T/listen.log"' "the agent did not connect once the port appeared"
grep -q "channel: $port open" "$T/daemon.log" || fail "no 'open' line in the log"
grep -q "changed: trying $port again" "$T/daemon.log" || fail "no inotify wake-up for the port"
$CTL status >/dev/null || fail "API"
stop_daemon
echo ok
