#!/bin/sh
# Crash matrix: SIGKILL at many points of grants, revocations by size, by
# grant and by blocks, and of recovery itself, in three modes taken in turn:
#   agent   memgrantd (its helper dies with it, PR_SET_PDEATHSIG);
#   helper  memgrant-helper alone: memgrantd must stop by itself, non-zero,
#           with one line saying the helper is gone, and fail nothing;
#   both    the helper, then memgrantd at once (back to back);
# restart it and check, once everything it acknowledged has settled:
#   1. every acknowledged request is recorded and applied (nothing here
#      can refuse a block: a partial or failed request is the kill's doing);
#   2. every configured standby block is online, and the grants own exactly
#      the standby blocks that are online, each by a grant (none stranded
#      configured but offline, none online and owned by nobody; nothing is
#      brought up outside memgrantd here, so no block may be foreign);
#   3. online memory = initial + sum(applied_bytes of grants)
#                              - sum(applied_bytes of revocations);
#   4. the operation that finished changed the kernel by exactly its
#      applied_bytes (a grant: blocks that came online; a revocation: blocks
#      that went offline, only ones it may take, never more than its size),
#      and each grant's owned_blocks is the number of blocks it got and
#      still has.
# The sim is used only through memgrantctl and the daemon's config.  One
# python3 process drives everything (the machine may be slow to start one).
#
#   tests/crash/crash_matrix.sh     BUILD=build CRASH_SECONDS=170 CRASH_LATENCY_MS=30
#                                   CRASH_MODES=agent,helper,both (the modes, in turn)
#                                   KEEP=1 keeps the work directory and failing logs
#
# Prints each failure, the points and failures per mode and "crash_matrix: N
# points, F failed"; exit 1 when a
# point failed, 0 otherwise.  A point is deterministic in its operation and
# kill delays (they follow from its number); the exact moment the kill lands
# varies with timing.  After a failure the machine starts over clean, so
# failures are independent.
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
export BUILD
[ -x "$BUILD/memgrantd" ] && [ -x "$BUILD/memgrantctl" ] || { echo "crash_matrix: build first ($BUILD/memgrantd)"; exit 2; }
command -v python3 >/dev/null || { echo "crash_matrix: needs python3"; exit 77; }
exec python3 - <<'PY'
import json, os, pwd, shutil, subprocess, sys, tempfile, time

BUILD = os.environ["BUILD"]
MEMGRANTD, MEMGRANTCTL = BUILD + "/memgrantd", BUILD + "/memgrantctl"
BUDGET = float(os.environ.get("CRASH_SECONDS", "170"))
LATENCY = os.environ.get("CRASH_LATENCY_MS", "30")
RESET_EVERY = int(os.environ.get("CRASH_RESET_EVERY", "20"))
MODES = [x for x in os.environ.get("CRASH_MODES", "agent,helper,both").split(",") if x]
if not MODES or set(MODES) - {"agent", "helper", "both"}:
    sys.exit("crash_matrix: CRASH_MODES is a list of agent, helper, both; not %r" % os.environ.get("CRASH_MODES"))
GONE_LINE = "the privileged helper is gone"  # memgrantd's one line when it loses its helper
KEEP = bool(os.environ.get("KEEP"))
BS = 128 << 20
T = tempfile.mkdtemp(prefix="memgrant-crash.")
SOCK = T + "/api.sock"
SIM = CFG = LOG = None  # of the current machine (Machine.reset)
FINAL = ("applied", "partial", "failed", "rejected")


def run(*args, timeout=60):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def ctl(*args):
    return run(MEMGRANTCTL, "--socket", SOCK, *args)


def ctl_json(*args):
    r = ctl(*args, "--json")
    return json.loads(r.stdout) if r.returncode == 0 else None


class Failure(Exception):
    pass


class Daemon:
    def __init__(self):
        self.proc = None

    def start(self, wait=True):
        """wait=False returns at once: the caller kills it while it recovers"""
        log = open(LOG, "a")
        self.proc = subprocess.Popen([MEMGRANTD, "-c", CFG, "--foreground"], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        if not wait:
            return
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure("memgrantd exited at start with %d: %s" % (self.proc.returncode, log_tail(3)))
            if ctl("status").returncode == 0:
                return
            time.sleep(0.05)
        raise Failure("memgrantd did not answer within 20s")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()  # SIGKILL, this process only
        if self.proc:
            self.proc.wait()
        self.proc = None

    def helper_pid(self, wait_s):
        """memgrant-helper under this memgrantd (None when it has none after WAIT_S seconds)"""
        deadline = time.monotonic() + wait_s
        while self.proc and self.proc.poll() is None:
            for p in os.listdir("/proc"):
                if not p.isdigit():
                    continue
                try:
                    with open("/proc/%s/stat" % p) as f:
                        st = f.read()
                    rest = st[st.rindex(")") + 2:].split()
                    if int(rest[1]) != self.proc.pid or rest[0] == "Z":
                        continue
                    # by its command line: under qemu-user (.ci/s390x.sh) its name is qemu's
                    with open("/proc/%s/cmdline" % p, "rb") as f:
                        if b"memgrant-helper" in f.read():
                            return int(p)
                except (OSError, ValueError, IndexError):
                    continue
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)
        return None

    def kill_helper(self, wait_exit):
        """SIGKILL the helper alone; WAIT_EXIT: memgrantd must then stop by
        itself, non-zero.  Returns problems."""
        pid = self.helper_pid(5)
        if pid is None:
            return [] if self.proc is None or self.proc.poll() is not None else ["memgrantd has no helper to kill"]
        os.kill(pid, 9)
        if not wait_exit:
            return []
        try:
            rc = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
            return ["memgrantd still ran 20 s after its helper was killed"]
        self.proc = None
        return [] if rc != 0 else ["memgrantd exited 0 after its helper was killed"]


def log_tail(n):
    try:
        return " | ".join(open(LOG).read().splitlines()[-n:])
    except OSError:
        return ""


stats = {"again": 0, "again_before_ready": 0}
stats.update({mode: [0, 0] for mode in MODES})  # points, failures


def ready_lines():
    try:
        return open(LOG).read().count(" ready, API on ")
    except OSError:
        return 0


def sim_blocks():
    r = run(MEMGRANTCTL, "--sim", SIM, "lsmem", "-J", "-a", "-o", "BLOCK,STATE,CONFIGURED")
    if r.returncode != 0:
        raise Failure("lsmem on the sim: %s" % r.stderr.strip())
    return {int(e["block"]): (e["state"], e.get("configured")) for e in json.loads(r.stdout)["memory"]}


daemon = Daemon()


class Machine:
    count = 0

    def reset(self):
        """A new machine in a new directory: nothing depends on the sim's file layout."""
        global SIM, CFG, LOG
        daemon.kill()
        if self.count and not KEEP:
            shutil.rmtree(os.path.dirname(SIM), ignore_errors=True)
        self.count += 1
        d = os.path.join(T, "machine-%d" % self.count)
        os.mkdir(d)
        SIM, CFG, LOG = d + "/sim.json", d + "/memgrant.yaml", d + "/daemon.log"
        for args in (("sim", "init", SIM, "--online", "2G", "--standby", "2G", "--block-size", "128M"),
                     ("sim", "fault", SIM, "--latency", LATENCY)):
            r = run(MEMGRANTCTL, *args)
            if r.returncode != 0:
                sys.exit("crash_matrix: %s: %s" % (" ".join(args[:2]), r.stderr))
        with open(CFG, "w") as f:
            f.write("""agent:
  id: crash-guest
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
""" % (d, SOCK, pwd.getpwuid(os.getuid()).pw_name, SIM))
        self.initial = sim_blocks()
        self.boot = sorted(b for b, (st, _) in self.initial.items() if st == "online")
        self.standby = sorted(b for b, (st, _) in self.initial.items() if st != "online")
        self.ops = []          # acknowledged ids, in order
        self.owned = {}        # grant id -> blocks it got and still has (from the kernel)
        self.online = set()    # standby blocks online after the last check
        daemon.start()


m = Machine()


def pick_op(n):
    owned = {k: v for k, v in m.owned.items() if v}
    total = sum(len(v) for v in owned.values())
    k = n % 4
    if total < 3 or (k == 0 and total <= 9):
        size = 128 * (2 + n % 3)
        return "grant", "%dM" % size, ["grant", "%dM" % size]
    if k in (0, 1):
        return "size", "256M", ["revoke", "256M"]
    if k == 2:
        gid = sorted(owned, key=lambda g: (-len(owned[g]), g))[0]
        return "grant_rev", gid, ["revoke", "--grant", gid]
    allb = sorted(b for v in owned.values() for b in v)
    pick = allb[n % len(allb):][:2]
    t = ",".join(str(b) for b in pick)
    return "blocks", t, ["revoke", "--blocks", t]


def daemon_owners():
    """block -> the grant memgrantd says owns it (None: nobody), from its own table"""
    r = ctl("lsmem", "-J", "-a", "-o", "BLOCK,OWNER")
    if r.returncode != 0:
        raise Failure("memgrantctl lsmem: %s" % r.stderr.strip())
    return {int(e["block"]): e.get("owner") for e in json.loads(r.stdout)["memory"]}


def settle():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        g, s = ctl_json("grants"), ctl_json("status")
        if g is not None and s is not None:
            busy = [x["id"] for x in g["grants"] if x.get("state") not in FINAL]
            if not busy and not s.get("running") and not s.get("queued"):
                return g["grants"], s
        time.sleep(0.1)
    raise Failure("not settled within 30s: %s" % [(x["id"], x.get("state")) for x in (g or {"grants": []})["grants"]
                                                    if x.get("state") not in FINAL])


def check(kind, target, op_id, grants, status):
    now = sim_blocks()
    by_id = {g["id"]: g for g in grants}
    problems = []
    m.ops.append(op_id)
    for i in m.ops:
        g = by_id.get(i)
        if g is None:
            problems.append("acknowledged %s is not recorded any more" % i)
        elif g.get("state") not in FINAL:
            problems.append("acknowledged %s is %s, not final" % (i, g.get("state")))
        elif g.get("state") != "applied":
            err = g.get("error") or {}
            problems.append("acknowledged %s ended %s, not applied (%s)" %
                            (i, g.get("state"), err.get("message") if isinstance(err, dict) else err))
    for b in m.boot:
        if now[b][0] != "online":
            problems.append("boot block %d is %s" % (b, now[b][0]))
    online = set(b for b in m.standby if now[b][0] == "online")
    for b in m.standby:
        st, cf = now[b]
        if cf == "yes" and st != "online":
            problems.append("standby block %d is configured but %s (stranded)" % (b, st))
    owners = daemon_owners()
    for b in sorted(online):
        if not owners.get(b):
            problems.append("standby block %d is online, owned by nobody" % b)
    for b, o in sorted(owners.items()):
        if o and b not in online:
            problems.append("block %d is owned by %s but %s" % (b, o, now[b][0]))
    owned_total = sum(int(g.get("owned_blocks") or 0) for g in grants)
    if owned_total != len(online):
        problems.append("the grants own %d blocks, %d standby blocks are online %s" % (owned_total, len(online), sorted(online)))
    if status["memory"].get("granted_bytes") != len(online) * BS:
        problems.append("status says granted %dM, %dM of standby memory is online" %
                        ((status["memory"].get("granted_bytes") or 0) >> 20, (len(online) * BS) >> 20))
    granted = sum(int(g.get("applied_bytes") or 0) for g in grants if g.get("kind") == "grant" and g["id"] in m.ops)
    revoked = sum(int(g.get("applied_bytes") or 0) for g in grants if g.get("kind") == "revoke" and g["id"] in m.ops)
    online_bytes = sum(BS for st, _ in now.values() if st == "online")
    initial_bytes = len(m.boot) * BS
    if online_bytes != initial_bytes + granted - revoked:
        problems.append("online %dM != initial %dM + granted %dM - revoked %dM" %
                        (online_bytes >> 20, initial_bytes >> 20, granted >> 20, revoked >> 20))
    came, went = online - m.online, m.online - online
    g = by_id.get(op_id)
    if g is not None:
        ab = int(g.get("applied_bytes") or 0)
        if kind == "grant":
            if went:
                problems.append("grant %s: blocks %s went offline" % (op_id, sorted(went)))
            if ab != len(came) * BS:
                problems.append("grant %s reports applied_bytes %dM, %dM came online %s" %
                                (op_id, ab >> 20, (len(came) * BS) >> 20, sorted(came)))
            if len(came) * BS > (int(target[:-1]) << 20):
                problems.append("grant %s of %s brought up %s" % (op_id, target, sorted(came)))
            if any(owners.get(b) != op_id for b in came):
                problems.append("grant %s: blocks %s came online, owned by %s" %
                                (op_id, sorted(came), [owners.get(b) for b in sorted(came)]))
            m.owned.setdefault(op_id, set()).update(came)
        else:
            if came:
                problems.append("revocation %s: blocks %s came online" % (op_id, sorted(came)))
            if ab != len(went) * BS:
                problems.append("revocation %s (%s %s) reports applied_bytes %dM, %dM went offline %s" %
                                (op_id, kind, target, ab >> 20, (len(went) * BS) >> 20, sorted(went)))
            if kind == "size" and len(went) * BS > (int(target[:-1]) << 20):
                problems.append("revocation %s of %s took %s" % (op_id, target, sorted(went)))
            if kind == "blocks" and went - set(int(x) for x in target.split(",")):
                problems.append("revocation %s of blocks %s took %s too" %
                                (op_id, target, sorted(went - set(int(x) for x in target.split(",")))))
            if kind == "grant_rev" and went - m.owned.get(target, set()):
                problems.append("revocation %s of grant %s took %s, not that grant's" %
                                (op_id, target, sorted(went - m.owned.get(target, set()))))
            for v in m.owned.values():
                v -= went
    for k, v in m.owned.items():
        n = int(by_id[k].get("owned_blocks") or 0) if k in by_id else 0
        if n != len(v):
            problems.append("grant %s owns %d blocks; it got and still has %d %s" % (k, n, len(v), sorted(v)))
    m.online = online
    return problems


def log_text():
    try:
        return open(LOG).read()
    except OSError:
        return ""


def mode_of(n):
    return MODES[(n // 3) % len(MODES)]  # n % 3 says whether to kill again: every mode gets both


def kill_in(mode, wait_exit=True):
    """The kill of MODE; problems it shows at once."""
    if mode == "agent":
        daemon.kill()
        return []
    if mode == "both":
        problems = daemon.kill_helper(False)
        daemon.kill()  # back to back: before it can react to the helper's end
        return problems
    return daemon.kill_helper(wait_exit)


def point(n):
    kind, target, args = pick_op(n)
    mode = mode_of(n)
    kill_ms = (n * 53) % 480
    again_ms = (n * 17) % 110 if n % 3 == 2 else None
    label = "point %d (%s: %s, kill at %dms%s)" % (n, mode, " ".join(args), kill_ms,
                                                   ", again %dms into recovery" % again_ms if again_ms is not None else "")
    stats.setdefault(mode, [0, 0])[0] += 1
    gone_before = log_text().count(GONE_LINE)
    r = ctl(*args)
    words = r.stdout.split()
    if r.returncode not in (0, 64) or len(words) < 2 or words[0] not in ("grant", "revoke") or "accepted" not in r.stdout:
        return label, ["not acknowledged: %s%s" % (r.stdout.strip(), r.stderr.strip())]
    op_id = words[1].rstrip(":")
    time.sleep(kill_ms / 1000)
    problems = kill_in(mode)
    if mode == "helper" and not problems:
        text = log_text()
        if text.count(GONE_LINE) != gone_before + 1:
            problems.append("memgrantd did not say once that its helper is gone (%d lines)" %
                            (text.count(GONE_LINE) - gone_before))
    if again_ms is not None:
        # the second kill lands while the new process starts and recovers:
        # the API answers only once recovery is done, so do not wait for it
        ready_before = ready_lines()
        daemon.start(wait=False)
        time.sleep(again_ms / 1000)
        problems += kill_in(mode)
        stats["again"] += 1
        if ready_lines() == ready_before:
            stats["again_before_ready"] += 1
    daemon.start()
    grants, status = settle()
    return label, problems + check(kind, target, op_id, grants, status)


points = failed = 0
start = time.monotonic()
try:
    m.reset()
    n = since_reset = 0
    while time.monotonic() - start < BUDGET:
        n += 1
        points += 1
        try:
            label, problems = point(n)
        except Failure as e:
            label, problems = "point %d" % n, [str(e)]
        if problems:
            failed += 1
            stats[mode_of(n)][1] += 1
            for p in problems:
                print("FAIL %s: %s" % (label, p), flush=True)
            if KEEP:
                shutil.copy(LOG, "%s/failed-%d.log" % (T, n))  # the machine's directory stays too
            m.reset()
            since_reset = 0
            continue
        since_reset += 1
        if since_reset >= RESET_EVERY:
            m.reset()
            since_reset = 0
finally:
    daemon.kill()
    if KEEP:
        print("crash_matrix: work directory kept: %s" % T)
    else:
        shutil.rmtree(T, ignore_errors=True)
print("crash_matrix: %d of %d second kills landed before the restarted agent was ready (in start-up or recovery)" %
      (stats["again_before_ready"], stats["again"]))
for mode in MODES:
    p, f = stats.get(mode, [0, 0])
    print("crash_matrix: mode %s: %d points, %d failed" % (mode, p, f))
print("crash_matrix: %d points, %d failed" % (points, failed))
sys.exit(1 if failed else 0)
PY
