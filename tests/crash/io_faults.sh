#!/bin/sh
# I/O fault walk: every durable I/O call memgrantd (and its helper) makes on
# the state folder and the sim during a scenario fails once, in turn, with
# ENOSPC, EIO, EDQUOT or a short write (build/tests/tools/faultio.so,
# tests/tools/preload/faultio.c), the way SQLite tests its I/O errors.
# After each fault the agent is killed if it still runs (SIGKILL), started
# again without faults, and the invariant is checked once it has settled:
#   1. every id answered accepted is recorded;
#   2. every final state answered (memgrantctl wait) is the recorded one, with
#      the same applied_bytes: nothing answered rejected or failed is applied
#      later, nothing answered applied is forgotten;
#   3. nothing is recorded that was not answered accepted;
#   4. the kernel (the sim) matches the grants: the standby blocks online are
#      exactly the blocks the grants own, status's granted_bytes says so,
#      and online memory = boot + granted - revoked;
#   5. no memgrantctl call waits past its deadline (WAIT_S).
# Scenarios: grants; revocations (by size, by grant); a cancel; a restart
# (SIGTERM, start, revocation); recovery itself (SIGKILL during a grant, the
# faults over the restart's recovery); a control-plane grant and revocation
# over HTTPS with their reports (tests/controlplane/cp.py on loopback, TLS);
# webhook events (tests/tools/webhook_receiver.py); a host's grant and
# revocation over the guest channel (ChannelHost below, on a UNIX socket:
# it acknowledges every report and counts how often each one came: a
# report sent again and again in a loop is a violation).  A report or an event
# the other side received is an answer given: after the restart every one
# is delivered (none lost), each id's final reports agree with each other
# and with the record, no event names a state the record does not hold, and
# a final state's event comes under one event id.
#
#   tests/crash/io_faults.sh   BUILD=build FAULT_STRIDE=1 (every call; N walks
#                              every FAULT_STRIDE-th) KEEP=1 keeps the work dir
#                              FAULT_SCENARIOS=grants,cancel FAULT_POINTS=52,53
#                              FAULT_TARGETS=state,sim (default: state)
#
# ENOSPC, EDQUOT and a short write stay (every later call of the walk fails
# too: a full disk stays full); EIO is one call.  Prints per scenario its I/O
# points and the runs injected per errno, each violation, and "io_faults: N
# runs, N with a fault injected, V violations"; exit 1 when a violation was
# found.
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
export BUILD
[ -z "${TEST_WRAPPER:-}" ] || { echo "skipped: under qemu-user (LD_PRELOAD of a native library)"; exit 77; }
[ -x "$BUILD/memgrantd" ] && [ -f "$BUILD/tests/tools/faultio.so" ] || { echo "io_faults: build first"; exit 2; }
command -v python3 >/dev/null || { echo "io_faults: needs python3"; exit 77; }
IO_FAULTS_SCRIPT=$0 exec python3 - <<'PY'
import json, mmap, os, pwd, re, shutil, signal, socket, struct, subprocess, sys, tempfile, threading, time, urllib.request

BUILD = os.environ["BUILD"]
MEMGRANTD, MEMGRANTCTL = BUILD + "/memgrantd", BUILD + "/memgrantctl"
TESTS = os.path.abspath(os.path.dirname(os.environ["IO_FAULTS_SCRIPT"]) + "/..")
PRELOAD = BUILD + "/tests/tools/faultio.so"
STRIDE = max(1, int(os.environ.get("FAULT_STRIDE", "1")))
ONLY = [x for x in os.environ.get("FAULT_SCENARIOS", "").split(",") if x]
# what the faults hit: state (the state folder: journal, its end mark, the
# outboxes in it, locks) and sim (the sim's files, standing in for the kernel)
TARGETS = [x for x in os.environ.get("FAULT_TARGETS", "state").split(",") if x]
POINTS = [int(x) for x in os.environ.get("FAULT_POINTS", "").split(",") if x]  # only these calls
KEEP = bool(os.environ.get("KEEP"))
WAIT_S = 30
BS = 128 << 20
MODES = ["ENOSPC", "EIO", "EDQUOT", "SHORT"]
KINDS = {"accepted": 0, "refused": 0, "maybe recorded": 0, "final": 0, "stopped, not final": 0}  # answers given
FINAL = ("applied", "partial", "failed", "rejected", "cancelled")
T = tempfile.mkdtemp(prefix="memgrant-faults.")
SOCK = T + "/api.sock"
COUNTER = T + "/counter"
CERTS = T + "/certs"
if not ONLY or "controlplane" in ONLY:
    if shutil.which("openssl") is None:
        print("skipped: openssl not installed (the control plane's certificates)")
        sys.exit(77)
    if subprocess.run(["sh", TESTS + "/controlplane/mkcerts.sh", CERTS], capture_output=True).returncode != 0:
        sys.exit("io_faults: cannot make the control plane's test certificates")
with open(COUNTER, "wb") as f:
    f.write(b"\0" * 4096)
cfd = os.open(COUNTER, os.O_RDWR)
page = mmap.mmap(cfd, 4096)


def word(i):
    return struct.unpack_from("<Q", page, 8 * i)[0]


def arm(at, mode):
    struct.pack_into("<Q", page, 24, mode)
    struct.pack_into("<Q", page, 16, at)


class Failure(Exception):
    pass


class ChannelHost:
    """The host's end of the guest channel (docs/channel.md) on a UNIX socket
    memgrantd connects to: syncs each connection, sends what it is given,
    acknowledges every report and keeps each one it received."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.received = []   # every report line, in order, repeats included
        self.errors = []     # error lines
        self.conn = None
        self.nonce = 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.alive = True
        self.server = threading.Thread(target=self.serve, daemon=True)
        self.server.start()

    def serve(self):
        while self.alive:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with self.lock:
                if self.conn:
                    self.conn.close()
                self.conn = c
                self.nonce += 1
                self.send_locked({"type": "sync", "nonce": self.nonce})
            threading.Thread(target=self.read, args=(c,), daemon=True).start()

    def send_locked(self, obj):
        try:
            self.conn.sendall((json.dumps(obj) + "\n").encode())
        except (OSError, AttributeError):
            pass

    def send(self, obj):
        with self.lock:
            self.send_locked(obj)

    def read(self, c):
        buf = b""
        while True:
            try:
                data = c.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    m = json.loads(line)
                except ValueError:
                    continue
                if m.get("type") == "error":
                    with self.lock:
                        self.errors.append(m)
                elif m.get("type") == "status" and m.get("seq"):
                    with self.lock:
                        self.received.append(m)
                        if c is self.conn:
                            self.send_locked({"type": "ack", "seq": m["seq"]})

    def snapshot(self):
        with self.lock:
            return list(self.received)

    def kill(self):
        self.alive = False
        with self.lock:
            if self.conn:
                self.conn.close()
        # shutdown() ends the accept() in progress; close() alone would not, and
        # an accept() retried after a signal would then take the next
        # listener's connections once it has the same fd number
        try:
            self.srv.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.join()
        self.srv.close()

    def wait(self):
        pass


class Machine:
    count = 0

    def __init__(self, name):
        Machine.count += 1
        self.name = name
        self.peer = None    # the control plane or the webhook receiver of this run
        self.reports = {}   # id -> final states and applied bytes the peer received, in order
        self.events = []    # webhook deliveries received
        self.dir = "%s/m%d" % (T, Machine.count)
        os.mkdir(self.dir)
        self.sim = self.dir + "/sim.json"
        self.cfg = "%s/m%d.yaml" % (T, Machine.count)
        self.log = "%s/m%d.log" % (T, Machine.count)
        self.proc = None
        self.answers = {}   # id -> final state answered, or "accepted"
        self.applied = {}   # id -> applied_bytes answered with a final state
        self.late = []      # calls past their deadline
        self.foreign = 0    # blocks a sim fault left online, named foreign
        r = run(MEMGRANTCTL, "sim", "init", self.sim, "--online", "2G", "--standby", "2G", "--block-size", "128M")
        if r.returncode != 0:
            sys.exit("io_faults: sim init: " + r.stderr)
        with open(self.cfg, "w") as f:
            f.write("""agent:
  id: fault-guest
  state_dir: %s/state
  api_socket: %s
  log_level: debug
  user: %s
backend:
  type: sim
  own_onlining: true
  sim:
    state: %s
    online: 2G
    standby: 2G
    block_size: 128M
policy:
  revoke_budget: 2s
""" % (self.dir, SOCK, pwd.getpwuid(os.getuid()).pw_name, self.sim))
            f.write(self.peer_start())
        self.boot = [b for b, st in self.blocks().items() if st == "online"]

    def peer_start(self):
        """Starts this scenario's peer (outside the faults); its config lines."""
        if self.name == "controlplane":
            d = self.dir + "/cp"
            os.mkdir(d)
            self.peer = subprocess.Popen(["python3", TESTS + "/controlplane/cp.py", "--dir", d, "--cert",
                                          CERTS + "/server.pem", "--key", CERTS + "/server.key", "--quiet"],
                                         stdout=subprocess.DEVNULL, stderr=open(self.dir + "/cp.log", "w"))
            ports = json.loads(wait_file(d + "/cp.json"))
            self.admin = "http://127.0.0.1:%d" % ports["admin_port"]
            return "providers:\n  https:\n    url: https://127.0.0.1:%d\n    wait: 1s\n    ca_file: %s/ca.pem\n" % (
                ports["port"], CERTS)
        if self.name == "channel":
            self.peer = ChannelHost(self.dir + "/channel.sock")
            return "providers:\n  channel: {path: %s}\n" % self.peer.path
        if self.name == "webhook":
            self.deliveries = self.dir + "/deliveries"
            with open(self.dir + "/secret", "w") as f:
                f.write("fault-walk-secret\n")
            self.peer = subprocess.Popen(["python3", TESTS + "/tools/webhook_receiver.py", "--secret-file",
                                          self.dir + "/secret", "--log", self.deliveries, "--port-file",
                                          self.dir + "/port"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            port = int(wait_file(self.dir + "/port"))
            return ("hooks:\n  - {events: [\"grant.*\", \"revoke.*\"], webhook: \"http://127.0.0.1:%d/hook\",\n"
                    "     secret_file: %s/secret, insecure_http: true, timeout: 2s}\n" % (port, self.dir))
        return ""

    def peer_stop(self):
        if self.peer:
            self.peer.kill()
            self.peer.wait()
            self.peer = None

    def channel_reports(self):
        """The channel host's reports: id -> [(state, applied)] of its final ones."""
        out = {}
        for x in self.peer.snapshot():
            if x.get("state") in FINAL:
                out.setdefault(x["id"], []).append((x["state"], int(x.get("applied_bytes") or 0)))
            elif x.get("id"):
                out.setdefault(x["id"], [])
        return out

    def admin_call(self, method, path, body=None):
        req = urllib.request.Request(self.admin + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def collect(self):
        """What the peer received so far: reports and events are answers given."""
        if self.name == "channel":
            self.reports = self.channel_reports()
        elif self.name == "controlplane":
            self.reports = {}
            for x in self.admin_call("GET", "/state")["statuses"]:
                b = x["body"]
                if b.get("state") in FINAL:
                    self.reports.setdefault(b["id"], []).append((b["state"], int(b.get("applied_bytes") or 0)))
                elif b.get("id"):
                    self.reports.setdefault(b["id"], [])
        elif self.name == "webhook":
            try:
                with open(self.deliveries) as f:
                    self.events = [json.loads(l) for l in f if l.strip()]
            except OSError:
                self.events = []

    def latency(self, ms):
        run(MEMGRANTCTL, "sim", "fault", self.sim, "--latency", str(ms))

    def start(self):
        paths = [self.dir + "/state"] * ("state" in TARGETS) + [self.sim + x for x in (".d", ".tree")] * ("sim" in TARGETS)
        env = dict(os.environ, LD_PRELOAD=PRELOAD, FAULTIO_PATHS=":".join(paths), FAULTIO_COUNTER=COUNTER,
                   FAULTIO_LOG=T + "/calls.log", ASAN_OPTIONS="verify_asan_link_order=0")
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen([MEMGRANTD, "-c", self.cfg, "--foreground"], stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # it may refuse to start on a fault: said in its log
            if ctl("status").returncode == 0:
                return True
            time.sleep(0.05)
        raise Failure("memgrantd did not answer within 20 s")

    def stop(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
        if self.proc:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise Failure("memgrantd did not stop within 30 s of signal %d" % sig)
        self.proc = None

    def blocks(self):
        r = run(MEMGRANTCTL, "--sim", self.sim, "lsmem", "-J", "-a", "-o", "BLOCK,STATE")
        if r.returncode != 0:
            raise Failure("lsmem on the sim: " + r.stderr.strip())
        return {int(e["block"]): e["state"] for e in json.loads(r.stdout)["memory"]}

    # --- requests, their answers recorded -----------------------------------
    def submit(self, *args):
        """memgrantctl grant/revoke ARGS --json: the id, when it was accepted"""
        r = timed(self, *args, "--json")
        try:
            ans = json.loads(r.stdout)
        except ValueError:
            # refused: no id given, unless the journal could not undo the
            # failed write of its accept (it may be recorded: either is right)
            may = re.search(r"cannot record (\S+) in the journal.* may be recorded", r.stdout + r.stderr)
            if may:
                self.answers[may.group(1)] = "maybe"
            KINDS["maybe recorded" if may else "refused"] += 1
            return None
        i, st = ans.get("id"), ans.get("state")
        if i and st:
            self.answer(i, st, ans)
        return i

    def wait(self, i):
        r = timed(self, "wait", i, "--json")
        try:
            ans = json.loads(r.stdout)
        except ValueError:
            return None
        self.answer(i, ans.get("state"), ans)
        return ans.get("state")

    def answer(self, i, st, ans):
        KINDS["final" if st in FINAL else "stopped, not final" if isinstance(ans.get("error"), dict)
              else "accepted"] += 1
        if st in FINAL:
            self.answers[i] = st
            self.applied[i] = int(ans.get("applied_bytes") or 0)
        else:
            self.answers.setdefault(i, "accepted")


def wait_file(path, secs=30):
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if text.strip():
                return text
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit("io_faults: %s did not appear within %d s" % (path, secs))


def run(*args, timeout=60, env=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def ctl(*args):
    return run(MEMGRANTCTL, "--socket", SOCK, *args)


def timed(m, *args):
    t0 = time.monotonic()
    try:
        r = run(MEMGRANTCTL, "--socket", SOCK, *args, timeout=WAIT_S + 5)
    except subprocess.TimeoutExpired:
        m.late.append("memgrantctl %s: no answer within %d s" % (" ".join(args), WAIT_S + 5))
        return subprocess.CompletedProcess(args, 124, "", "")
    if time.monotonic() - t0 > WAIT_S:
        m.late.append("memgrantctl %s took %.1f s" % (" ".join(args), time.monotonic() - t0))
    return r


# --- scenarios: setup (no faults) and the walked part -----------------------
def grants_setup(m):
    pass


def grants_walk(m):
    for size in ("256M", "128M"):
        i = m.submit("grant", size)
        if i:
            m.wait(i)


def revokes_setup(m):
    i = m.submit("grant", "512M")
    if not i or m.wait(i) != "applied":
        raise Failure("setup grant: not applied")
    m.g = i


def revokes_walk(m):
    i = m.submit("revoke", "128M")
    if i:
        m.wait(i)
    i = m.submit("revoke", "--grant", m.g)
    if i:
        m.wait(i)
    i = m.submit("grant", "256M")
    if i:
        m.wait(i)


def cancel_setup(m):
    m.latency(150)


def cancel_walk(m):
    i = m.submit("grant", "768M")
    if i:
        time.sleep(0.3)
        r = timed(m, "cancel", i, "--json")
        try:
            ans = json.loads(r.stdout)
            m.answer(i, ans.get("state"), ans)
        except ValueError:
            pass
        m.wait(i)


def restart_setup(m):
    i = m.submit("grant", "256M")
    if not i or m.wait(i) != "applied":
        raise Failure("setup grant: not applied")


def restart_walk(m):
    m.stop(signal.SIGTERM)
    if m.start():
        i = m.submit("revoke", "128M")
        if i:
            m.wait(i)


def recovery_setup(m):
    m.latency(100)
    i = m.submit("grant", "768M")
    if not i:
        raise Failure("setup grant: refused")
    time.sleep(0.35)
    m.stop(signal.SIGKILL)  # the grant stays open: recovery resumes it
    m.latency(0)


def recovery_walk(m):
    if m.start():
        for i in list(m.answers):
            m.wait(i)


def cp_final(m, i):
    """Waits (up to WAIT_S) until the control plane holds a final report of I:
    False if none came (the faults may keep the grant from being recorded)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        m.collect()
        if m.reports.get(i):
            return True
        if m.proc.poll() is not None:
            return False
        time.sleep(0.1)
    return False  # nothing was answered: a full disk refuses the control plane's grant, which asks again


def controlplane_setup(m):
    pass


def cp_taken(m, i):
    """The control plane's I is final; if the faults kept it out, it is once
    the disk has room again (the faults end), without a restart."""
    if cp_final(m, i):
        return True
    arm(0, 0)
    if cp_final(m, i):
        return True
    if m.proc.poll() is None:
        m.late.append("%s: no final report within %d s of the disk having room again" % (i, WAIT_S))
    return False


def controlplane_walk(m):
    m.admin_call("POST", "/agents/fault-guest/grants", {"type": "grant", "id": "c-1", "size": "384M"})
    if cp_taken(m, "c-1"):
        m.admin_call("POST", "/agents/fault-guest/grants", {"type": "revoke", "id": "c-2", "size": "128M"})
        cp_taken(m, "c-2")


def channel_final(m, i, msg):
    """Sends MSG until the host holds a final report of I (a journal that
    could not record it answers an error: the host sends it again)."""
    deadline = time.monotonic() + WAIT_S
    sent = 0
    while time.monotonic() < deadline and m.proc.poll() is None:
        if m.channel_reports().get(i):
            return True
        if time.monotonic() - sent > 1:
            m.peer.send(msg)
            sent = time.monotonic()
        time.sleep(0.1)
    return bool(m.channel_reports().get(i))


def channel_taken(m, i, msg):
    if channel_final(m, i, msg):
        return True
    arm(0, 0)  # the disk has room again
    if channel_final(m, i, msg):
        return True
    if m.proc.poll() is None:
        m.late.append("%s: no final report within %d s of the disk having room again" % (i, WAIT_S))
    return False


def channel_setup(m):
    deadline = time.monotonic() + 10
    while m.peer.conn is None and time.monotonic() < deadline:
        time.sleep(0.05)


def channel_walk(m):
    if channel_taken(m, "h-1", {"type": "grant", "id": "h-1", "generation": 1, "size": "384M"}):
        channel_taken(m, "h-2", {"type": "revoke", "id": "h-2", "generation": 2, "size": "128M"})


def webhook_setup(m):
    pass


def webhook_walk(m):
    grants_walk(m)
    i = m.submit("revoke", "128M")
    if i:
        m.wait(i)


SCENARIOS = [("grants", grants_setup, grants_walk), ("revocations", revokes_setup, revokes_walk),
             ("cancel", cancel_setup, cancel_walk), ("restart", restart_setup, restart_walk),
             ("recovery", recovery_setup, recovery_walk), ("controlplane", controlplane_setup, controlplane_walk),
             ("webhook", webhook_setup, webhook_walk), ("channel", channel_setup, channel_walk)]
if ONLY:
    SCENARIOS = [s for s in SCENARIOS if s[0] in ONLY]


def settle(m):
    deadline = time.monotonic() + 30
    g = s = None
    while time.monotonic() < deadline:
        r1, r2 = ctl("grants", "--json"), ctl("status", "--json")
        if r1.returncode == 0 and r2.returncode == 0:
            g, s = json.loads(r1.stdout)["grants"], json.loads(r2.stdout)
            if all(x.get("state") in FINAL for x in g) and not s.get("running") and not s.get("queued"):
                return g, s
        time.sleep(0.1)
    raise Failure("not settled within 30 s: %s" % [(x["id"], x.get("state")) for x in (g or [])
                                                    if x.get("state") not in FINAL])


def check(m):
    """The invariant after the restart; a list of violations."""
    problems = list(m.late)
    if not m.start():
        return problems + ["memgrantd does not start after the fault: " + log_tail(m, 2)]
    grants, status = settle(m)
    by_id = {g["id"]: g for g in grants}
    for i, st in m.answers.items():
        g = by_id.get(i)
        if st == "maybe":
            continue
        if g is None:
            problems.append("%s was answered %s but is not recorded after the restart" % (i, st))
        elif st in FINAL and (g["state"] != st or int(g.get("applied_bytes") or 0) != m.applied[i]):
            problems.append("%s was answered %s (%dM) but is %s (%dM) after the restart" %
                            (i, st, m.applied[i] >> 20, g["state"], int(g.get("applied_bytes") or 0) >> 20))
    for i in by_id:
        # a control plane's grant is recorded before its accept is reported:
        # its reports are checked below
        if i not in m.answers and not (m.name == "controlplane" and i.startswith("c-")) and \
                not (m.name == "channel" and i.startswith("h-")):
            problems.append("%s is recorded (%s) but was never answered accepted" % (i, by_id[i]["state"]))
    problems += peer_check(m, by_id)
    now = m.blocks()
    online = [b for b, st in now.items() if st == "online" and b not in m.boot]
    # a failed write to the sim's own files is a kernel write that failed
    # half way: a block it left online that no grant owns must be named
    # foreign at the start (recovery.c), then it is not counted as granted
    owners = {int(e["block"]): e.get("owner") for e in json.loads(ctl("lsmem", "-J", "-a", "-o", "BLOCK,OWNER").stdout)["memory"]}
    named = re.findall(r"foreign standby memory: \d+ blocks? \(([0-9, -]+)\)", open(m.log).read())
    named = set(int(x) for part in named for x in re.findall(r"\d+", part))
    for b in [b for b in online if owners.get(b) in (None, "foreign")]:
        if owners.get(b) == "foreign" and b in named:
            m.foreign += 1
            online.remove(b)
        else:
            problems.append("standby block %d is online, owned by no grant, and not named foreign" % b)
    owned = sum(int(g.get("owned_blocks") or 0) for g in grants)
    if owned != len(online):
        problems.append("the grants own %d blocks, %d standby blocks are online" % (owned, len(online)))
    if status["memory"].get("granted_bytes") != len(online) * BS:
        problems.append("status says granted %dM, %dM of standby memory is online" %
                        ((status["memory"].get("granted_bytes") or 0) >> 20, (len(online) * BS) >> 20))
    granted = sum(int(g.get("applied_bytes") or 0) for g in grants if g.get("kind") == "grant")
    revoked = sum(int(g.get("applied_bytes") or 0) for g in grants if g.get("kind") == "revoke")
    if len(online) * BS != granted - revoked:
        problems.append("online standby %dM != granted %dM - revoked %dM" % ((len(online) * BS) >> 20,
                                                                            granted >> 20, revoked >> 20))
    m.stop(signal.SIGTERM)
    return problems


def peer_check(m, by_id):
    """Reports and events: what was received before the kill is kept, and
    what is recorded reaches the peer after the restart."""
    problems = []
    before_reports = {i: list(r) for i, r in m.reports.items()}
    if m.name in ("controlplane", "channel"):
        mine = "c-" if m.name == "controlplane" else "h-"
        for i, r in before_reports.items():
            if i not in by_id:
                problems.append("%s was reported to the %s but is not recorded after the restart" % (i, m.name))
        deadline = time.monotonic() + WAIT_S
        while True:
            m.collect()
            missing = [i for i in by_id if i.startswith(mine) and not m.reports.get(i)]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for i in missing:
            problems.append("%s is recorded %s, but its final report never reached the %s" %
                            (i, by_id[i]["state"], m.name))
        if m.name == "channel":
            # at least once, not in a loop: a report goes again after a reconnect
            # or a restart, never again and again to the same host
            seen = {}
            for x in m.peer.snapshot():
                seen[x["seq"]] = seen.get(x["seq"], 0) + 1
            for seq, n in seen.items():
                if n > 10:
                    problems.append("report %d reached the host %d times" % (seq, n))
        for i, r in m.reports.items():
            g = by_id.get(i)
            for st, applied in r:
                if g and (st != g["state"] or applied != int(g.get("applied_bytes") or 0)):
                    problems.append("the %s was told %s %s (%dM), the record says %s (%dM)" %
                                    (m.name, i, st, applied >> 20, g["state"],
                                     int(g.get("applied_bytes") or 0) >> 20))
    if m.name == "webhook":
        want = {(g["kind"] + "." + g["state"], i) for i, g in by_id.items()
                if g.get("state") in FINAL and g["state"] != "cancelled"}
        deadline = time.monotonic() + WAIT_S
        while True:
            m.collect()
            got = {(e["event"], e["id"]) for e in m.events}
            if want <= got or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for ev, i in sorted(want - got):
            problems.append("event %s of %s (recorded) was never delivered" % (ev, i))
        ids = {}
        for e in m.events:
            if not (e["sig_ok"] and e["delivery_ok"]):
                problems.append("a delivery with a bad signature or delivery id: %s" % e)
            if e["event"] in ("grant.accepted", "revoke.accepted") and e["id"] not in by_id:
                problems.append("%s delivered for %s, which is not recorded" % (e["event"], e["id"]))
            kind, _, st = e["event"].partition(".")
            g = by_id.get(e["id"])
            if st in FINAL and (not g or g["state"] != st):
                problems.append("%s delivered for %s, recorded %s" % (e["event"], e["id"], g and g["state"]))
            # a final state is told once: one event id, however often it is
            # delivered; accepted and in_progress may be told again when an
            # operation is resumed after a restart (docs/autoscaling.md)
            if st in FINAL:
                ids.setdefault((e["event"], e["id"]), set()).add(e["event_id"])
        for (ev, i), eids in ids.items():
            if len(eids) > 1:
                problems.append("%s of %s delivered under %d event ids (a receiver cannot tell them apart)" %
                                (ev, i, len(eids)))
    return problems


def log_tail(m, n):
    try:
        return " | ".join(open(m.log).read().splitlines()[-n:])
    except OSError:
        return ""


def one(name, setup, walk, at, mode):
    """One run: the fault at the AT-th call of the walk (0: none). Returns
    (calls of the walk, injected, problems)."""
    arm(0, 0)
    m = Machine(name)
    try:
        if not m.start():
            raise Failure("memgrantd does not start: " + log_tail(m, 2))
        setup(m)
        base = word(0)
        inj0 = word(1)
        if at:
            arm(base + at, mode)
        walk(m)
        calls = word(0) - base
        arm(0, 0)
        injected = word(1) - inj0
        m.stop(signal.SIGKILL)
        m.collect()
        problems = check(m)
    finally:
        arm(0, 0)
        m.stop(signal.SIGKILL)
        m.peer_stop()
        if not KEEP:
            shutil.rmtree(m.dir, ignore_errors=True)
    foreign_total[0] += m.foreign
    return calls, injected, problems


runs = total_injected = violations = 0
foreign_total = [0]
failed_calls = 0
try:
    for name, setup, walk in SCENARIOS:
        calls, _, problems = one(name, setup, walk, 0, 0)
        runs += 1
        for p in problems:
            violations += 1
            print("FAIL %s (no fault): %s" % (name, p), flush=True)
        per = dict.fromkeys(MODES, 0)
        for at in POINTS or range(1, calls + 1, STRIDE):
            mode = (at // STRIDE) % len(MODES)
            # a full disk stays full until the walk ends; an EIO is one call
            mode |= 4 if MODES[mode] != "EIO" else 0
            try:
                _, inj, problems = one(name, setup, walk, at, mode)
            except Failure as e:
                inj, problems = 0, [str(e)]
            runs += 1
            per[MODES[mode & 3]] += 1 if inj else 0
            total_injected += 1 if inj else 0
            failed_calls += inj
            for p in problems:
                violations += 1
                print("FAIL %s, call %d of %d failing with %s%s: %s" % (name, at, calls, MODES[mode & 3],
                                                                    " and after" if mode & 4 else "", p), flush=True)
        print("io_faults: %s: %d I/O points, runs injected with %s" %
              (name, calls, ", ".join("%s %d" % (k, v) for k, v in per.items())), flush=True)
finally:
    arm(0, 0)
    if KEEP:
        print("io_faults: work directory kept: %s" % T)
    else:
        shutil.rmtree(T, ignore_errors=True)
print("io_faults: answers given: %s" % ", ".join("%s %d" % kv for kv in KINDS.items()))
print("io_faults: %d blocks left online by a failed sim write were named foreign at the next start" % foreign_total[0])
print("io_faults: %d runs, %d with a fault injected (%d calls failed), %d violations" %
      (runs, total_injected, failed_calls, violations))
sys.exit(1 if violations else 0)
PY
