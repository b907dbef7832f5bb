#!/bin/sh
# Foreground log lines (stderr, not journald) start with the time, UTC to the
# millisecond, as journald or syslog would stamp them; every event carries
# "time" (UTC, seconds), and both fall within the test's own clock readings.
. "$(dirname "$0")/lib.sh"
t0=$(date -u +%s)
start_daemon
$CTL grant 256M --id g-1 --wait > /dev/null || fail "g-1"
$CTL revoke --grant g-1 --id r-1 --wait > /dev/null || fail "r-1"
stop_daemon
t1=$(date -u +%s)
python3 - "$T/daemon.log" "$t0" "$t1" <<'PY' || fail "log lines"
import calendar, json, re, sys, time
path, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stamp = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z memgrantd: ")
lines = open(path).read().splitlines()
assert len(lines) > 5, lines
last = None
events = 0
for l in lines:
    m = stamp.match(l)
    assert m, "no time on: %r" % l
    when = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    assert t0 <= when <= t1, "time %s outside %d..%d: %r" % (m.group(1), t0, t1, l)
    ms = when * 1000 + int(m.group(2))
    assert last is None or ms >= last - 1000, "time goes back: %r" % l
    last = ms
    if "debug: event {" in l:
        ev = json.loads(l.split("debug: event ", 1)[1])
        et = calendar.timegm(time.strptime(ev["time"], "%Y-%m-%dT%H:%M:%SZ"))
        assert t0 <= et <= t1, "event time %s outside %d..%d" % (ev["time"], t0, t1)
        events += 1
assert events >= 8, "%d events logged" % events
print("%d lines, %d events, all stamped" % (len(lines), events))
PY
echo ok
