#!/bin/sh
# The channel waits for a port that is not there without a timer: after the
# first quick retries it sleeps until the port's path appears (inotify on the
# nearest existing directory, here two levels up), then connects at once;
# while it waits it does not wake up.
. "$(dirname "$0")/lib.sh"

LISTEN_PID=
trap 'kill $LISTEN_PID 2>/dev/null; cleanup' EXIT INT TERM
port=$T/ports/virtio/guest.sock
write_config "providers:" "  channel:" "    path: $port"
start_daemon

i=0
until grep -q "cannot open $port" "$T/daemon.log"; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "the agent did not report the missing port"; sleep 0.1
done
# past the quick retries (0.2 + 0.4 + 0.8 + 1.6 + 2 s): only events wake it now
sleep 6
ctxsw() { cat /proc/"$DAEMON_PID"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s }'; }
before=$(ctxsw)
sleep 5
after=$(ctxsw)
[ $((after - before)) -le 1 ] || fail "the agent wakes up while the port is missing: $((after - before)) context switches in 5 s"

mkdir -p "$T/ports/virtio"
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
i=0
until grep -q accepted "$T/listen.log"; do
	i=$((i + 1)); [ $i -gt 30 ] && fail "the agent did not connect within 3 s of the port appearing"; sleep 0.1
done
grep -q "channel: $port open" "$T/daemon.log" || fail "no 'open' line in the log"
$CTL status >/dev/null || fail "API"
stop_daemon
echo ok
