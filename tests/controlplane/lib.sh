# Helpers for the HTTPS integration tests (sourced after tests/integration/lib.sh).
# Not a test itself: it lives here so that `make check` does not run it.
#   cp_start [cp.py options]      start the reference control plane (TLS with fresh certificates)
#   cp_admin METHOD PATH [JSON]   talk to its admin side
#   cp_state                      everything it received, as JSON
#   cp_wait 'PYTHON-EXPR' [SECS]  wait until the expression over s (the state) is true
#   https_config [yaml lines]     write_config plus a providers.https section
#   log_wait REGEX [SECS]         wait for a line in the daemon's log
#   opens_watch DIR NAME          count the opens of DIR/NAME from now on; opens prints the count,
#                                 opens_stop ends the count
CPDIR=$(cd "$(dirname "${0}")/../controlplane" 2>/dev/null && pwd)
[ -f "$CPDIR/cp.py" ] || CPDIR=$(pwd)/tests/controlplane
CERTS=$T/certs
CP_PID=
OPENS_PID=
command -v openssl >/dev/null 2>&1 || skip "openssl not installed"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
trap 'cp_stop; cleanup' EXIT INT TERM

cp_stop() {
	opens_stop
	if [ -n "$CP_PID" ]; then
		kill "$CP_PID" 2>/dev/null
		wait "$CP_PID" 2>/dev/null
		CP_PID=
	fi
}

cp_certs() {
	[ -f "$CERTS/ca.pem" ] || sh "$CPDIR/mkcerts.sh" "$CERTS" || fail "cannot make test certificates"
}

cp_start() {
	cp_certs
	mkdir -p "$T/cp"
	rm -f "$T/cp/cp.json"
	python3 "$CPDIR/cp.py" --dir "$T/cp" --cert "$CERTS/server.pem" --key "$CERTS/server.key" "$@" \
		>> "$T/cp.log" 2>&1 &
	CP_PID=$!
	i=0
	while [ ! -f "$T/cp/cp.json" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "control plane did not come up: $(tail -5 "$T/cp.log")"
		sleep 0.1
	done
	CP_PORT=$(jget "$(cat "$T/cp/cp.json")" port)
	CP_ADMIN=$(jget "$(cat "$T/cp/cp.json")" admin_port)
	CP_URL=https://127.0.0.1:$CP_PORT
}

cp_admin() {
	curl -sS --max-time 10 -X "$1" ${3:+-H 'Content-Type: application/json' --data "$3"} \
		"http://127.0.0.1:$CP_ADMIN$2" || fail "control plane admin $1 $2 failed"
}

cp_state() {
	cp_admin GET /state
}

# cp_wait EXPR [SECS]: EXPR is python over s (the state dict) and helpers
#   st(id) = the states posted for id, in order, duplicates dropped
cp_wait() {
	python3 - "$CP_ADMIN" "$1" "${2:-30}" <<'PY' || fail "control plane never saw: $1"
import json, sys, time, urllib.request
port, expr, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
def get():
    with urllib.request.urlopen("http://127.0.0.1:%s/state" % port, timeout=10) as r:
        return json.load(r)
end = time.time() + secs
while True:
    s = get()
    def st(i):
        return [x["body"]["state"] for x in s["statuses"] if not x["duplicate"] and x["body"].get("id") == i]
    if eval(expr):
        sys.exit(0)
    if time.time() > end:
        print("timeout after %gs waiting for: %s" % (secs, expr))
        sys.exit(1)
    time.sleep(0.1)
PY
}

# https_config [extra providers.https lines (4 spaces indent)] -- [other yaml]
https_config() {
	write_config
	{
		echo "providers:"
		echo "  https:"
		echo "    url: ${HTTPS_URL:-$CP_URL}"
		echo "    wait: ${HTTPS_WAIT:-3s}"
		while [ $# -gt 0 ] && [ "$1" != "--" ]; do echo "    $1"; shift; done
		[ $# -gt 0 ] && shift
		for l in "$@"; do echo "$l"; done
	} >> "$T/memgrant.yaml"
	if [ -n "${SIM_LATENCY_MS:-}" ]; then
		sed -i "s/^    block_size: .*/&\n    faults: {latency_ms: $SIM_LATENCY_MS}/" "$T/memgrant.yaml"
	fi
}

log_wait() {
	i=0
	n=$((${2:-20} * 10))
	while ! grep -Eq "$1" "$T/daemon.log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt $n ] && fail "no log line matching /$1/ within ${2:-20}s"
		sleep 0.1
	done
}

# check_schema: every status and inventory the server received is valid
check_schema() {
	cp_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
bad = [(x.get("key"), e) for x in s["statuses"] + s["inventories"] for e in x["schema_errors"]]
for k, e in bad:
    print("schema:", k, e)
print("checked %d statuses, %d inventories with %s" % (len(s["statuses"]), len(s["inventories"]), s["schema"]))
sys.exit(1 if bad or not s["statuses"] and not s["inventories"] else 0)' || fail "messages do not match docs/api/messages.schema.json"
}

# opens_watch DIR NAME: counts the opens of DIR/NAME with inotify on DIR
# (nothing but the agent, or its helper, may open it meanwhile); `opens`
# prints the count so far.  The watcher stops with opens_stop or cp_stop.
opens_watch() {
	python3 - "$1" "$2" "$T/opens" <<'PY' &
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
	OPENS_PID=$!
	i=0
	while [ ! -s "$T/opens" ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || fail "inotify watcher did not start"
		sleep 0.1
	done
}

opens() { cat "$T/opens"; }

opens_stop() {
	if [ -n "$OPENS_PID" ]; then
		kill "$OPENS_PID" 2>/dev/null
		OPENS_PID=
	fi
}
