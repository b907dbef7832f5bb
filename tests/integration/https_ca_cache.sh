#!/bin/sh
# The CA bundle is parsed once per change of the file, not at every
# connection: once the agent has connected, control-plane outages that force
# new TLS handshakes open ca_file no more, and a replaced ca_file is opened
# again (once per connection thread at most) at the next connection.  The opens are
# counted with inotify on the CA's own folder (nothing else opens it).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../controlplane/lib.sh"

cp_start
mkdir -p "$T/ca"
cp "$CERTS/ca.pem" "$T/ca/agent-ca.pem"
python3 - "$T/ca" agent-ca.pem "$T/ca.opens" <<'PY' &
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
IN_OPEN = 0x20
fd = libc.inotify_init()
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), IN_OPEN) < 0:
    sys.exit("inotify: %s" % os.strerror(ctypes.get_errno()))
n = 0
open(sys.argv[3] + ".tmp", "w").write("0")
os.rename(sys.argv[3] + ".tmp", sys.argv[3])
while True:
    buf = os.read(fd, 65536)
    i = 0
    while i < len(buf):
        wd, mask, cookie, ln = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + ln].rstrip(b"\0").decode()
        i += 16 + ln
        if name == sys.argv[2]:
            n += 1
    open(sys.argv[3] + ".tmp", "w").write(str(n))
    os.rename(sys.argv[3] + ".tmp", sys.argv[3])
PY
WATCH=$!
trap 'kill $WATCH 2>/dev/null; cp_stop; cleanup' EXIT INT TERM
i=0
while [ ! -s "$T/ca.opens" ]; do i=$((i + 1)); [ $i -lt 100 ] || fail "inotify watcher did not start"; sleep 0.1; done
opens() { cat "$T/ca.opens"; }

HTTPS_WAIT=1s https_config "ca_file: $T/ca/agent-ca.pem"
start_daemon
cp_wait 'len(s["inventories"]) >= 1 and s["n_polls"] >= 1' 20
# each outage drops the connections: the next poll is a new TLS handshake
outage() {
	n=$(jget "$(cp_state)" n_polls)
	cp_admin POST /mode '{"mode":"down"}' >/dev/null
	sleep 1
	cp_admin POST /mode '{"mode":"ok"}' >/dev/null
	cp_wait "s[\"n_polls\"] > $n" 30
}
sleep 1 # the watcher's count catches up with the first handshakes
first=$(opens)
[ "$first" -ge 1 ] || fail "ca_file never opened by the agent (opens: $first)"
outage
outage
outage
sleep 1
again=$(opens)
[ "$again" -eq "$first" ] || fail "ca_file opened $((again - first)) more times across 3 reconnects: parsed per connection, not once per change"
cp "$CERTS/ca.pem" "$T/ca/new.pem"
mv "$T/ca/new.pem" "$T/ca/agent-ca.pem"
before=$(opens)
outage
# the watcher counts the open a moment after the handshake that made it
i=0
while [ "$(opens)" -le "$before" ] && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.1; done
after=$(opens)
[ "$after" -gt "$before" ] || fail "a replaced ca_file was not read again (opens $before -> $after)"
[ "$after" -le $((before + 2)) ] || fail "a replaced ca_file was read $((after - before)) times"
echo "ca_file opens: $first at start, $((again - first)) across 3 reconnects, $((after - before)) after it was replaced"
stop_daemon
echo ok
