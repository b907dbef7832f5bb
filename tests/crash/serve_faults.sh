#!/bin/sh
# I/O fault walk of memgrant-host serve: every durable I/O call serve makes
# in its state_dir (its journal STATE_DIR/<domain>.serve.json, the
# generations STATE_DIR/<domain>.json and their lock, the status file) during
# a scenario fails once, in turn, with ENOSPC, EIO, EDQUOT or a short write
# (build/tests/tools/faultio.so, tests/tools/preload/faultio.c), as
# tests/crash/io_faults.sh does for memgrantd.  serve runs on libvirt's
# test:///FILE.xml driver with one standby-memory domain whose channel a fake
# guest serves (tests/integration/serve_guest.py --mode ledger: it records
# every grant and revoke it applies in a ledger outside the faulted folder,
# answers a replayed generation with its recorded status, reports what it
# holds).  After each fault serve is killed (SIGKILL), started again without
# faults and, once settled, the invariant is checked:
#   1. serve's granted for the domain (serve-status.json) is what the guest
#      holds (its ledger), and what the guest wants (up to the policy's max);
#   2. nothing is applied twice: one id, one generation, one application; no
#      generation sent for two different operations;
#   3. never above the policy's max: not in the ledger at any time, not in
#      serve's status, not in any event;
#   4. serve's events (the events: file, outside the faulted folder) do not
#      contradict the end state: each grant.applied / revoke.offline is an
#      application the ledger has, with its bytes, and what they add up to
#      (each id once) is what the guest holds; no "reconciled" down to what
#      the guest held all along (a grant serve forgot);
#   5. serve starts again after every fault, or exits with a clear message;
#      it never dies of a signal, no sanitizer report is in its log, and it
#      does not go round in a loop (thousands of events in one run).
# Scenarios: grow (request -> grant -> applied); shrink (offer -> revoke ->
# applied); restart (SIGTERM, start, grow); recovery (SIGKILL while the guest
# holds a grant unanswered, the faults over the restart and its replay);
# late (the guest applies a grant after its online deadline: serve takes it
# back, then grants again).
#
#   tests/crash/serve_faults.sh  BUILD=build FAULT_STRIDE=N (every N-th call;
#                                default 2) FAULT_MAX_RUNS=N (a wider stride
#                                where a scenario has more points than N
#                                runs at FAULT_STRIDE; default 20, 0: none)
#                                FAULT_JOBS=N runs at a time (default 3)
#                                FAULT_STALL_S=S how long a walk waits once
#                                its fault went in (default 3: past serve's
#                                online deadline of 2 s)
#                                FAULT_SCENARIOS=grow,shrink
#                                FAULT_POINTS=3,7 KEEP=1 keeps the work dir
#
# ENOSPC, EDQUOT and a short write stay (every later call of the walk fails
# too: a full disk stays full); EIO is one call.  Prints per scenario its I/O
# points and the runs injected per errno, each violation, and "serve_faults:
# N runs, N with a fault injected, V violations"; exit 1 on a violation.
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
export BUILD
HERE=$(cd "$(dirname "$0")" && pwd)
export GUEST_PY="$HERE/../integration/serve_guest.py"
[ -z "${TEST_WRAPPER:-}" ] || { echo "skipped: under qemu-user (LD_PRELOAD of a native library)"; exit 77; }
[ -x "$BUILD/memgrant-host" ] || { echo "skipped: memgrant-host not built (configure found no libvirt)"; exit 77; }
[ -f "$BUILD/tests/tools/faultio.so" ] || { echo "serve_faults: build first"; exit 2; }
command -v python3 >/dev/null || { echo "skipped: serve_faults needs python3"; exit 77; }
exec python3 - <<'PY'
import json, mmap, os, shutil, signal, struct, subprocess, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor

BUILD = os.environ["BUILD"]
HOST = BUILD + "/memgrant-host"
PRELOAD = BUILD + "/tests/tools/faultio.so"
GUEST = os.environ["GUEST_PY"]
STRIDE = max(1, int(os.environ.get("FAULT_STRIDE", "2")))
ONLY = [x for x in os.environ.get("FAULT_SCENARIOS", "").split(",") if x]
POINTS = [int(x) for x in os.environ.get("FAULT_POINTS", "").split(",") if x]
KEEP = bool(os.environ.get("KEEP"))
JOBS = max(1, int(os.environ.get("FAULT_JOBS", "3")))
MAX_RUNS = int(os.environ.get("FAULT_MAX_RUNS", "20"))  # per scenario (0: no bound)
M = 1 << 20
MAX = 768 * M
MODES = ["ENOSPC", "EIO", "EDQUOT", "SHORT"]
# a run of any scenario says a few dozen events; thousands are a loop
EVENTS_MAX = 1000
# how long a walk waits for serve once a fault went in (it may never get
# there: a full disk stays full); a run without a fault waits for its end
STALL_S = float(os.environ.get("FAULT_STALL_S", "3"))
T = tempfile.mkdtemp(prefix="memgrant-servefaults.")


class Counter:
    """faultio.so's shared page (tests/tools/preload/faultio.c), one per run:
    runs go FAULT_JOBS at a time"""
    count = 0

    def __init__(self):
        Counter.count += 1
        self.path = "%s/counter.%d" % (T, Counter.count)
        with open(self.path, "wb") as f:
            f.write(b"\0" * 4096)
        fd = os.open(self.path, os.O_RDWR)
        self.page = mmap.mmap(fd, 4096)
        os.close(fd)

    def word(self, i):
        return struct.unpack_from("<Q", self.page, 8 * i)[0]

    def arm(self, at, mode):
        struct.pack_into("<Q", self.page, 24, mode)
        struct.pack_into("<Q", self.page, 16, at)


class Failure(Exception):
    pass


class Machine:
    count = 0

    lock = threading.Lock()

    def __init__(self, counter):
        with Machine.lock:
            Machine.count += 1
            self.dir = "%s/m%d" % (T, Machine.count)
        self.counter = counter
        os.mkdir(self.dir)
        self.state = self.dir + "/state"
        self.events = self.dir + "/events.jsonl"
        self.ledger = self.dir + "/ledger.jsonl"
        self.control = self.dir + "/control.json"
        self.log = self.dir + "/serve.log"
        self.cfg = self.dir + "/serve.yaml"
        self.sock = self.dir + "/vm.sock"
        self.proc = None
        self.exits = []  # how serve ended on its own during the walk
        self.want(0)
        with open(self.dir + "/node.xml", "w") as f:
            f.write("""<node>
  <domain type='test'>
    <name>vm</name>
    <memory unit='MiB'>1024</memory>
    <os><type arch='s390x'>hvm</type></os>
    <devices>
      <channel type='unix'>
        <source mode='bind' path='%s'/>
        <target type='virtio' name='org.memgrant.0'/>
      </channel>
    </devices>
  </domain>
</node>
""" % self.sock)
        with open(self.cfg, "w") as f:
            f.write("""connect: test://%s/node.xml
channel: socket
state_dir: %s
events: %s
interval: 100ms
host: {budget: 8G}
defaults: {hypervisor: standby, standby: 2G, max: %dM, step: 512M, grow_cooldown: 100ms, shrink_cooldown: 100ms,
  query_interval: 200ms, online_deadline: 2s, unplug_deadline: 2s, revoke_backoff: 500ms, revoke_backoff_max: 1s}
""" % (self.dir, self.state, self.events, MAX >> 20))
        with open(self.dir + "/guest.err", "w") as err:
            self.guest = subprocess.Popen(["python3", GUEST, "--socket", self.sock, "--mode", "ledger",
                                           "--ledger", self.ledger, "--control", self.control],
                                          stdout=err, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.sock):
            if time.monotonic() > deadline or self.guest.poll() is not None:
                raise Failure("the fake guest did not listen: " + open(self.dir + "/guest.err").read())
            time.sleep(0.02)

    def want(self, target, delay_ms=0):
        with open(self.control + ".tmp", "w") as f:
            json.dump({"target": target, "delay_ms": delay_ms}, f)
        os.rename(self.control + ".tmp", self.control)
        self.target = target

    def ups(self):
        try:
            return sum(1 for l in open(self.events) if '"channel.up"' in l)
        except OSError:
            return 0

    def start(self):
        """serve started (faults armed or not) and its channel up; False when it exited"""
        ups = self.ups()
        env = dict(os.environ, LD_PRELOAD=PRELOAD, FAULTIO_PATHS=self.state, FAULTIO_COUNTER=self.counter.path,
                   FAULTIO_LOG=self.dir + "/calls.log", ASAN_OPTIONS="verify_asan_link_order=0")
        with open(self.log, "a") as log:
            log.write("---- start\n")
            log.flush()
            self.proc = subprocess.Popen([HOST, "serve", "--config", self.cfg], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.exits.append(self.proc.returncode)
                self.proc = None
                return False
            if self.ups() > ups:
                return True
            time.sleep(0.02)
        raise Failure("serve's channel was not up within 20 s: " + log_tail(self, 3))

    def stop(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
        if self.proc:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise Failure("serve did not stop within 30 s of signal %d" % sig)
            if sig != signal.SIGKILL and self.proc.returncode != 0:
                self.exits.append(self.proc.returncode)
        self.proc = None

    def alive(self):
        if self.proc and self.proc.poll() is not None:
            self.exits.append(self.proc.returncode)
            self.proc = None
        return self.proc is not None

    def entries(self):
        try:
            return [json.loads(l) for l in open(self.ledger)]
        except OSError:
            return []

    def held(self):
        return sum(e["status"]["applied_bytes"] * (1 if e["kind"] == "grant" else -1)
                   for e in self.entries() if "status" in e)

    def inflight(self):
        """operations the guest received and has not applied yet"""
        got, done = set(), set()
        for e in self.entries():
            if "received" in e:
                got.add(e["received"]["generation"])
            elif "status" in e:
                done.add(e["status"]["generation"])
        return got - done

    def status(self):
        try:
            s = json.load(open(self.state + "/serve-status.json"))
            return next(d for d in s["domains"] if d["domain"] == "vm")
        except (OSError, ValueError, StopIteration, KeyError):
            return None

    def reach(self, inj0=None):
        """wait until the guest holds what it wants (at most max); a walk with
        a fault in it waits STALL_S past the fault, one without it 20 s"""
        goal = min(self.target, MAX)
        t_inj = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.held() == goal and not self.inflight():
                return True
            if inj0 is not None and self.counter.word(1) > inj0:
                t_inj = t_inj or time.monotonic()
                if time.monotonic() - t_inj > STALL_S:
                    return False
            if self.proc is None or not self.alive():
                return False
            time.sleep(0.05)
        if inj0 is None:
            raise Failure("the guest holds %dM, not %dM, after 20 s (%d operations unapplied)" %
                          (self.held() >> 20, goal >> 20, len(self.inflight())))
        return False

    def close(self):
        self.stop()
        if self.guest.poll() is None:
            self.guest.kill()
        self.guest.wait()


def log_tail(m, n):
    try:
        return " | ".join(open(m.log).read().splitlines()[-n:])
    except OSError:
        return ""


# --- scenarios: setup (no faults) and the walked part -----------------------
def grow_setup(m):
    pass


def grow_walk(m, inj0):
    m.want(1024 * M)  # asks above max: gets max
    m.reach(inj0)


def shrink_setup(m):
    m.want(768 * M)
    m.reach()


def shrink_walk(m, inj0):
    m.want(256 * M)
    m.reach(inj0)


def restart_setup(m):
    m.want(256 * M)
    m.reach()


def restart_walk(m, inj0):
    m.stop(signal.SIGTERM)
    if m.start():
        m.want(768 * M)
        m.reach(inj0)


def recovery_setup(m):
    m.want(512 * M, delay_ms=1500)  # the guest holds the grant unanswered...
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if json.load(open(m.state + "/vm.serve.json")).get("phase") == "granting":
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    else:
        raise Failure("setup: no grant in flight within 20 s")
    time.sleep(0.2)
    m.stop(signal.SIGKILL)  # ...and serve is killed: the restart replays it
    m.want(512 * M)


def recovery_walk(m, inj0):
    if m.start():
        m.reach(inj0)


def late_setup(m):
    pass


def late_walk(m, inj0):
    m.want(512 * M, delay_ms=2600)  # past online_deadline: serve takes the grant back
    deadline = time.monotonic() + 20
    while not m.inflight() and time.monotonic() < deadline and m.alive():
        if inj0 is not None and m.counter.word(1) > inj0 and time.monotonic() > deadline - 20 + STALL_S:
            break
        time.sleep(0.02)
    m.want(512 * M)  # the next ones at once
    m.reach(inj0)


SCENARIOS = [("grow", grow_setup, grow_walk), ("shrink", shrink_setup, shrink_walk),
             ("restart", restart_setup, restart_walk), ("recovery", recovery_setup, recovery_walk),
             ("late", late_setup, late_walk)]
if ONLY:
    SCENARIOS = [s for s in SCENARIOS if s[0] in ONLY]


def settle(m):
    """serve idle and synced, granted what the guest holds and wants"""
    goal = min(m.target, MAX)
    deadline = time.monotonic() + 20
    st = None
    while time.monotonic() < deadline:
        st = m.status()
        if (st and st.get("phase") == "idle" and st.get("synced") and st.get("granted_bytes") == m.held() == goal
                and not m.inflight()):
            return st
        if not m.alive():
            raise Failure("serve exited while settling: " + log_tail(m, 3))
        time.sleep(0.05)
    return st


def check_events(m, granted, held):
    problems = []
    applied = {e["status"]["id"]: (e["kind"], e["status"]["applied_bytes"]) for e in m.entries() if "status" in e}
    final = {}  # id -> signed bytes, each id once
    resumed = None  # the operation a restart replays
    given_up = []  # grants serve stopped waiting for (plugged_not_usable)
    names = []
    taken_back = set()
    try:
        lines = open(m.events).read().splitlines()
    except OSError:
        lines = []
    for l in lines:
        try:
            e = json.loads(l)
        except ValueError:
            problems.append("events: not JSON: %r" % l[:120])
            continue
        if e.get("domain") != "vm":
            continue
        name = e.get("event")
        names.append(name)
        if int(e.get("granted_bytes") or 0) > MAX:
            problems.append("event %s says granted %dM, above max %dM" % (name, e["granted_bytes"] >> 20, MAX >> 20))
        if name in ("grant.applied", "grant.incomplete", "revoke.offline", "revoke.incomplete"):
            kind = name.split(".")[0]
            got = applied.get(e["id"])
            if (got is None and e["bytes"]) or (got and got != (kind, e["bytes"])):
                problems.append("event %s %s of %dM, the guest applied %s" %
                                (name, e["id"], e["bytes"] >> 20, "%s of %dM" % (got[0], got[1] >> 20) if got else "nothing"))
            sign = 1 if kind == "grant" else -1
            if e["id"] in final and final[e["id"]] != sign * e["bytes"]:
                problems.append("event %s %s says %dM, an earlier one said %dM" %
                                (name, e["id"], e["bytes"] >> 20, abs(final[e["id"]]) >> 20))
            final[e["id"]] = sign * e["bytes"]
        if name == "plugged_not_usable":
            given_up.append(e.get("grant"))
        if name == "take_back.revoked" and given_up:
            # the revocation of a grant given up on: what that grant applied
            # late (no event of its own: the ledger has it) less what this took
            g = given_up.pop()
            late = applied[g][1] if g in applied and applied[g][0] == "grant" else 0
            final["take_back of " + g] = max(0, late - e["bytes"])
            taken_back.add(g)
        if name == "resumed":
            resumed = e.get("op")
        if name == "domain.added":
            # a restart: what its journal holds, with the operation it replays,
            # is what the events said so far; less is a report forgotten
            before = sum(final.values())
            after = int(e.get("granted_bytes") or 0)
            if e.get("phase") in ("granting", "revoking") and resumed in final:
                after += final[resumed]
            if after != before:
                problems.append("the restart's journal holds %dM (%s%s), the events before it said %dM" %
                                (after >> 20, e.get("phase"), ", replaying " + resumed if resumed else "", before >> 20))
            resumed = None
        if name == "reconciled" and "agent_granted" in e:
            problems.append("event reconciled: serve's journal had %dM, the guest %dM (the guest never lost any)" %
                            (e["journal_granted"] >> 20, e["agent_granted"] >> 20))
    for g in given_up:  # a grant given up on, applied late, not taken back: no event says so
        if g not in final and g not in taken_back and g in applied and applied[g][0] == "grant":
            final[g] = applied[g][1]
    if len(lines) > EVENTS_MAX:
        top = max(set(names), key=names.count)
        problems.append("%d events in one run (%d of them %s): serve went round in a loop" %
                        (len(lines), names.count(top), top))
    if sum(final.values()) != held or granted != held:
        problems.append("the events' grants and revocations add up to %dM, serve says %dM, the guest holds %dM" %
                        (sum(final.values()) >> 20, granted >> 20, held >> 20))
    return problems


def check(m):
    """The invariant after the clean restart; a list of violations."""
    problems = []
    for rc in m.exits:
        if rc < 0:
            problems.append("serve died of signal %d during the walk: %s" % (-rc, log_tail(m, 3)))
        elif rc and "memgrant-host" not in log_tail(m, 3):
            problems.append("serve exited %d during the walk without a clear message: %s" % (rc, log_tail(m, 3)))
    m.exits = []
    if not m.start():
        return problems + ["serve does not start after the fault (exit %s): %s" % (m.exits, log_tail(m, 3))]
    st = settle(m)
    held = m.held()
    goal = min(m.target, MAX)
    if not st:
        problems.append("no status file after the restart")
    elif st.get("granted_bytes") != held or held != goal:
        problems.append("after the restart serve says granted %dM (%s), the guest holds %dM and wants %dM" %
                        ((st.get("granted_bytes") or 0) >> 20, st.get("phase"), held >> 20, goal >> 20))
    ids, gens, running = set(), set(), 0
    for e in m.entries():
        if "conflict" in e:
            problems.append("generation %d sent for two operations: %s" % (e["conflict"]["generation"], e["conflict"]))
        if "status" not in e:
            continue
        s = e["status"]
        if s["id"] in ids or s["generation"] in gens:
            problems.append("%s (generation %d) applied twice" % (s["id"], s["generation"]))
        ids.add(s["id"])
        gens.add(s["generation"])
        running += s["applied_bytes"] * (1 if e["kind"] == "grant" else -1)
        if running > MAX:
            problems.append("the guest held %dM after %s: above max %dM" % (running >> 20, s["id"], MAX >> 20))
    if st and (st.get("granted_bytes") or 0) > MAX:
        problems.append("serve's status says granted %dM: above max" % (st["granted_bytes"] >> 20))
    problems += check_events(m, (st or {}).get("granted_bytes") or 0, held)
    m.stop(signal.SIGTERM)
    for rc in m.exits:
        problems.append("serve exited %d on SIGTERM after the restart: %s" % (rc, log_tail(m, 3)))
    text = open(m.log).read()
    for mark in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
        if mark in text:
            problems.append("sanitizer report in serve's log: " + text[text.index(mark):][:300].replace("\n", " | "))
    return problems


def one(setup, walk, at, mode):
    """One run: the fault at the AT-th call of the walk (0: none). Returns
    (calls of the walk, injected, problems)."""
    counter, m = Counter(), None
    try:
        m = Machine(counter)
        if not m.start():
            raise Failure("serve does not start: " + log_tail(m, 3))
        setup(m)
        base, inj0 = counter.word(0), counter.word(1)
        if at:
            counter.arm(base + at, mode)
        walk(m, inj0 if at else None)
        calls = counter.word(0) - base
        counter.arm(0, 0)
        injected = counter.word(1) - inj0
        m.stop(signal.SIGKILL)
        problems = check(m)
    except Failure as e:
        calls, injected, problems = 0, 0, [str(e)]
    finally:
        counter.arm(0, 0)
        counter.page.close()
        if m:
            m.close()
        if m and not KEEP:
            shutil.rmtree(m.dir, ignore_errors=True)
    return calls, injected, problems


runs = total_injected = violations = failed_calls = 0
print("serve_faults: every %d. I/O point is failed (FAULT_STRIDE=%d; wider where a scenario has more than %s "
      "points: FAULT_MAX_RUNS=%d), %d runs at a time" % (STRIDE, STRIDE, STRIDE * MAX_RUNS if MAX_RUNS else "any", MAX_RUNS, JOBS),
      flush=True)
try:
    for name, setup, walk in SCENARIOS:
        calls, _, problems = one(setup, walk, 0, 0)
        runs += 1
        for p in problems:
            violations += 1
            print("FAIL %s (no fault): %s" % (name, p), flush=True)
        per = dict.fromkeys(MODES, 0)
        points = []
        # a scenario with many points (the status file, rewritten as it changes)
        # gets a wider stride: its run time stays bounded
        stride = max(STRIDE, -(-calls // MAX_RUNS)) if MAX_RUNS else STRIDE
        for at in POINTS or range(1, calls + 1, stride):
            mode = (at // stride) % len(MODES)
            # a full disk stays full until the walk ends; an EIO is one call
            points.append((at, mode | (4 if MODES[mode] != "EIO" else 0)))
        with ThreadPoolExecutor(JOBS) as pool:
            results = list(pool.map(lambda p: one(setup, walk, p[0], p[1]), points))
        for (at, mode), (_, inj, problems) in zip(points, results):
            runs += 1
            per[MODES[mode & 3]] += 1 if inj else 0
            total_injected += 1 if inj else 0
            failed_calls += inj
            for p in problems:
                violations += 1
                print("FAIL %s, call %d of %d failing with %s%s: %s" % (name, at, calls, MODES[mode & 3],
                                                                    " and after" if mode & 4 else "", p), flush=True)
        print("serve_faults: %s: %d I/O points, every %d. failed, runs injected with %s" %
              (name, calls, stride, ", ".join("%s %d" % kv for kv in per.items())), flush=True)
finally:
    if KEEP:
        print("serve_faults: work directory kept: %s" % T)
    else:
        shutil.rmtree(T, ignore_errors=True)
print("serve_faults: %d calls failed in all (a full disk stays full: every later call fails too)" % failed_calls)
print("serve_faults: %d runs, %d with a fault injected, %d violations" % (runs, total_injected, violations))
sys.exit(1 if violations else 0)
PY
