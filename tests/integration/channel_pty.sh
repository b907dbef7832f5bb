#!/bin/sh
# The channel on a character device: a pty stands in for the virtio port
# (the agent opens the slave, the test speaks on the master).  A grant over
# the tty; then the host side hangs up for good and the agent waits without
# spinning (its CPU time stays flat) while its local API keeps serving.
. "$(dirname "$0")/lib.sh"

PTY_PID=
trap 'kill $PTY_PID 2>/dev/null; cleanup' EXIT INT TERM

python3 - "$T" > "$T/pty.log" 2>&1 <<'PY' &
import json, os, select, sys, time, tty
t = sys.argv[1]
master, slave = os.openpty()
name = os.ttyname(slave)
# raw before the agent is there (no echo of our own syncs); the slave stays
# open here so the master does not read EIO until the agent opened it by name
tty.setraw(slave)
with open(t + "/pts.tmp", "w") as f:
    f.write(name)
os.rename(t + "/pts.tmp", t + "/pts")
buf = b""

def lines(timeout):
    global buf
    end = time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([master], [], [], 0.2)
        if not r:
            continue
        try:
            buf += os.read(master, 65536)
        except OSError:
            return
        while b"\n" in buf:
            l, buf = buf.split(b"\n", 1)
            if l.strip():
                yield json.loads(l)

# the agent starts after us: sync until it answers
for nonce in range(1, 100):
    os.write(master, b'{"type":"sync","nonce":%d}\n' % nonce)
    if any(m.get("type") == "sync" and m.get("nonce") == nonce for m in lines(0.5)):
        break
else:
    sys.exit("no sync answer on the pty")
os.write(master, b'{"type":"grant","id":"pty-1","generation":1,"size":"256M"}\n')
for m in lines(20):
    print(json.dumps(m), flush=True)
    if m.get("type") == "status" and "seq" in m:
        os.write(master, b'{"type":"ack","seq":%d}\n' % m["seq"])
    if m.get("type") == "status" and m.get("state") == "applied":
        print("applied", flush=True)
        break
time.sleep(0.3)  # let the last ack be read before the hang-up
os.close(master)
os.close(slave)
PY
PTY_PID=$!
i=0
while [ ! -f "$T/pts" ]; do i=$((i + 1)); [ $i -gt 50 ] && fail "no pty"; sleep 0.1; done

write_config "providers:" "  channel:" "    path: $(cat "$T/pts")"
start_daemon
wait $PTY_PID || { cat "$T/pty.log"; fail "pty host session"; }
PTY_PID=
cat "$T/pty.log"
grep -q "^applied" "$T/pty.log" || fail "no applied status over the pty: $(cat "$T/pty.log")"
grep -q '"type": "status", .*"state": "accepted"' "$T/pty.log" || grep -q '"state": "accepted"' "$T/pty.log" ||
	fail "no accepted answer"
expect_eq "online after the pty grant" "$(online_bytes)" $((2048 * 1048576 + 256 * 1048576))

# the pty's master is gone: the slave reports POLLHUP from now on
i=0
until grep -q "waiting for the host" "$T/daemon.log"; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "the agent did not notice the hang-up"; sleep 0.1
done
cpu() { awk '{print $14 + $15}' "/proc/$DAEMON_PID/stat"; }
before=$(cpu)
sleep 3
after=$(cpu)
# spinning on POLLHUP would burn ~300 ticks in 3 s
[ $((after - before)) -le 10 ] || fail "the agent spins while the host is away: $((after - before)) ticks in 3 s"
# and it does not wake up either: the port's edge, not a timer, tells when a host comes
ctxsw() { cat /proc/"$DAEMON_PID"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s }'; }
before=$(ctxsw)
sleep 3
after=$(ctxsw)
[ $((after - before)) -le 1 ] || fail "the agent wakes up while the host is away: $((after - before)) context switches in 3 s"
$CTL status >/dev/null || fail "API while the channel has no host"
stop_daemon
echo ok
