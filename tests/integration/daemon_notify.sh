#!/bin/sh
# systemd integration without systemd: a datagram socket stands in for
# NOTIFY_SOCKET; memgrantd must send READY=1, STATUS= lines, WATCHDOG=1 pings
# (WATCHDOG_USEC set) and STOPPING=1.  Under JOURNAL_STREAM pointing at its
# stderr, log lines carry syslog priority prefixes.  STATUS= lines are
# coalesced: at most four a second, not two per block of a 256-block grant.
. "$(dirname "$0")/lib.sh"
SIM_BLOCK=1M SIM_ONLINE=16M SIM_STANDBY=256M write_config
python3 - "$T/notify.sock" "$T/notify.log" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(120)  # until STOPPING=1; a loaded machine may be slow to get there
with open(sys.argv[2], "w") as log:
    end = time.time() + 300
    while time.time() < end:
        try:
            msg = s.recv(4096).decode()
        except socket.timeout:
            break
        log.write(msg.replace("\n", "|") + " @%.3f\n" % time.monotonic())
        log.flush()
        if "STOPPING=1" in msg:
            break
PY
LISTENER=$!
i=0
while [ ! -S "$T/notify.sock" ]; do i=$((i + 1)); [ $i -gt 50 ] && fail "no notify listener"; sleep 0.1; done

# stderr is a file whose dev:ino we hand over as JOURNAL_STREAM
: > "$T/daemon.log"
js=$(stat -c '%d:%i' "$T/daemon.log")
NOTIFY_SOCKET=$T/notify.sock WATCHDOG_USEC=400000 JOURNAL_STREAM=$js \
	"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground 2>> "$T/daemon.log" &
DAEMON_PID=$!
i=0
while ! $CTL status >/dev/null 2>&1; do i=$((i + 1)); [ $i -gt 100 ] && fail "memgrantd did not come up"; sleep 0.1; done
$CTL grant 256M --wait > /dev/null || fail "grant"
sleep 1
stop_daemon
wait "$LISTENER"

grep -q "READY=1" "$T/notify.log" || fail "no READY=1: $(cat "$T/notify.log")"
grep -q "^STATUS=idle" "$T/notify.log" || fail "no STATUS=idle line: $(cat "$T/notify.log")"
grep -q "STATUS=.*256M granted" "$T/notify.log" || fail "STATUS does not follow the grant: $(cat "$T/notify.log")"
# at least 250 ms apart, however fast or slow the machine (two lines of slack
# for the receiver's clock): a line per engine notification is two per block
awk '/STATUS=/ { t = substr($NF, 2) + 0; if (!n++) first = t; last = t }
     END { max = (last - first) / 0.25 + 2; if (n > max) { printf "%d STATUS= lines in %.2f s\n", n, last - first; exit 1 } }' \
	"$T/notify.log" >"$T/rate" || fail "STATUS= lines not coalesced: $(cat "$T/rate")"
[ "$(grep -c "STATUS=" "$T/notify.log")" -ge 2 ] || fail "fewer than two STATUS= lines"
n=$(grep -c "WATCHDOG=1" "$T/notify.log")
[ "$n" -ge 3 ] || fail "only $n watchdog pings in over a second with WATCHDOG_USEC=400000"
grep -q "STOPPING=1" "$T/notify.log" || fail "no STOPPING=1"
grep -q "^<5>memgrantd.* ready\|^<5>" "$T/daemon.log" || fail "no <N> priority prefixes under JOURNAL_STREAM: $(head -3 "$T/daemon.log")"
grep -q "^<5>" "$T/daemon.log" || fail "notice lines lack <5>"
echo ok
