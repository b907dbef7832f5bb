#!/bin/sh
# Webhooks: a receiver on loopback checks the HMAC-SHA256 signature and the
# delivery id of every POST, and gets each event exactly once although it is
# down for a while and the agent restarts in between (the events wait in the
# durable outbox).
. "$(dirname "$0")/lib.sh"
RECV="$(dirname "$0")/../tools/webhook_receiver.py"
RECV_PID=
receiver_up() { # [port]
	rm -f "$T/port"
	python3 "$RECV" --secret-file "$T/secret" --log "$T/deliveries" --port-file "$T/port" ${1:+--port $1} &
	RECV_PID=$!
	i=0
	while [ ! -s "$T/port" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "receiver did not start"
		sleep 0.1
	done
	PORT=$(cat "$T/port")
}
receiver_down() {
	kill "$RECV_PID"
	wait "$RECV_PID" 2>/dev/null
	RECV_PID=
}
trap '[ -n "$RECV_PID" ] && kill $RECV_PID 2>/dev/null; cleanup' EXIT INT TERM

$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
printf 'test-secret-%s\n' "$$" > "$T/secret"
receiver_up
write_config "hooks:" \
	"  - {events: [grant.accepted, grant.applied, revoke.applied], webhook: \"http://127.0.0.1:$PORT/hook\"," \
	"     secret_file: $T/secret, insecure_http: true, timeout: 2s}"
start_daemon

# count LINES: wait until the receiver logged at least LINES deliveries
wait_deliveries() {
	i=0
	while [ "$(cat "$T/deliveries" 2>/dev/null | wc -l)" -lt "$1" ]; do
		i=$((i + 1))
		[ $i -gt 400 ] && fail "only $(cat "$T/deliveries" 2>/dev/null | wc -l) of $1 deliveries arrived"
		sleep 0.1
	done
}

$CTL grant 256M --id g-1 --wait > /dev/null || fail "g-1"
wait_deliveries 2

# outage: the receiver is gone, events queue up, the agent restarts
receiver_down
$CTL grant 256M --id g-2 --wait > /dev/null || fail "g-2"
$CTL revoke 128M --id r-1 --wait > /dev/null || fail "r-1"
sleep 1.5
grep -q "webhook http://127.0.0.1:$PORT/hook: cannot deliver" "$T/daemon.log" || fail "no failed attempt logged"
stop_daemon
start_daemon
sleep 1
receiver_up "$PORT"
wait_deliveries 5
sleep 2 # anything sent twice would show up now
stop_daemon

python3 - "$T/deliveries" <<'PY' || fail "deliveries"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
bad = [r for r in recs if not (r["sig_ok"] and r["delivery_ok"])]
if bad:
    sys.exit("bad signature or delivery id: %s" % bad)
got = sorted((r["event"], r["id"]) for r in recs)
want = sorted([("grant.accepted", "g-1"), ("grant.applied", "g-1"), ("grant.accepted", "g-2"),
               ("grant.applied", "g-2"), ("revoke.applied", "r-1")])
if got != want:
    sys.exit("got %s\nwant %s" % (got, want))
if len(set(r["event_id"] for r in recs)) != len(recs):
    sys.exit("an event id was delivered twice")
# order is kept: g-2's events before r-1's
order = [(r["event"], r["id"]) for r in recs]
if order.index(("grant.applied", "g-2")) > order.index(("revoke.applied", "r-1")):
    sys.exit("out of order: %s" % order)
PY
echo ok
