#!/usr/bin/env python3
"""The fleet bench's driver (run through bench/fleet.sh, which documents the
environment): starts the control plane and FLEET_N memgrantd, runs the
scenarios once per retry rule and prints the figures side by side.  Asserts
nothing; the targets are in issue 24 and docs/https.md."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
N = int(os.environ.get("FLEET_N", "500"))
OUTAGE = int(os.environ.get("FLEET_OUTAGE", "30"))
RESTART = int(os.environ.get("FLEET_RESTART", "3"))
LONG = int(os.environ.get("FLEET_LONG", "0"))
W = int(os.environ.get("FLEET_WINDOW", "30"))
WAIT = os.environ.get("FLEET_WAIT", "20s")
SCEN = os.environ.get("FLEET_SCENARIOS", "steady outage grant 429 window").split()
RULES = os.environ.get("FLEET_RULES", "full equal").split()
SHIPPED = os.environ.get("FLEET_AS_SHIPPED") == "1"
HZ = os.sysconf("SC_CLK_TCK")


def say(fmt, *a):
    print(fmt % a, flush=True)


class CP:
    def __init__(self, t):
        certs = os.path.join(t, "certs")
        subprocess.run(["sh", os.path.join(ROOT, "tests/controlplane/mkcerts.sh"), certs], check=True)
        if SHIPPED:
            os.chmod(t, 0o755)
            os.chmod(certs, 0o755)
            for f in ("ca.pem", "client.pem"):
                os.chmod(os.path.join(certs, f), 0o644)
        self.certs = certs
        d = os.path.join(t, "cp")
        os.makedirs(d)
        self.log = open(os.path.join(t, "cp.log"), "w")
        self.proc = subprocess.Popen(
            ["python3", os.path.join(ROOT, "tests/controlplane/cp.py"), "--dir", d, "--quiet",
             "--cert", certs + "/server.pem", "--key", certs + "/server.key", "--client-ca", certs + "/ca.pem"],
            stdout=self.log, stderr=self.log)
        while not os.path.exists(os.path.join(d, "cp.json")):
            time.sleep(0.1)
        j = json.load(open(os.path.join(d, "cp.json")))
        self.url, self.admin = "https://127.0.0.1:%d" % j["port"], j["admin_port"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.admin, path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)

    def cpu(self):
        return cpu_of([self.proc.pid])


def cpu_of(pids):
    """user+system seconds of PIDS (and their threads)."""
    s = 0
    for p in pids:
        try:
            f = open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()
            s += int(f[11]) + int(f[12])
        except OSError:
            pass
    return s / HZ


def rss_of(pids):
    kb = 0
    for p in pids:
        try:
            for line in open("/proc/%d/status" % p):
                if line.startswith("VmRSS:"):
                    kb += int(line.split()[1])
        except OSError:
            pass
    return kb


def wakeups_of(pids):
    """voluntary context switches of every thread of PIDS: each is a wake-up."""
    n = 0
    for p in pids:
        try:
            for t in os.listdir("/proc/%d/task" % p):
                for line in open("/proc/%d/task/%s/status" % (p, t)):
                    if line.startswith("voluntary_ctxt_switches:"):
                        n += int(line.split()[1])
        except OSError:
            pass
    return n


class Fleet:
    def __init__(self, t, cp, rule):
        self.t, self.cp, self.rule = t, cp, rule
        self.procs, self.logs, self.socks = [], [], []
        env = dict(os.environ)
        env.pop("FLEET_IN_NS", None)
        if rule in ("equal", "nowindow"):
            env["MEMGRANT_HTTPS_BACKOFF_RULE"] = rule
        try:
            self.start(t, cp, rule, env)
        except BaseException:
            self.stop()
            raise

    def start(self, t, cp, rule, env):
        for i in range(1, N + 1):
            d = os.path.join(t, "%s-%d" % (rule, i))
            os.makedirs(d)
            if SHIPPED:
                # the agent's own user (fleet.sh says why not memgrant), its
                # folders made as the package's tmpfiles.d makes memgrant's
                user = group = "mgf%d" % i
                uid = 61000 + i
                run = "/run/memgrant-fleet/%s-%d" % (rule, i)
                # the state folder under root's folders only (as
                # /var/lib/memgrant): root's helper refuses a path through a
                # folder the agent's user could change
                state = "/run/memgrant-fleet/state/%s-%d" % (rule, i)
                os.makedirs(run)
                os.makedirs(state)
                os.chown(run, uid, uid)
                os.chmod(run, 0o755)
                os.chown(state, uid, uid)
                os.chmod(state, 0o700)
                sock = run + "/api.sock"
                sim = "/run/memgrant-sim/%s-%d.json" % (rule, i)
                os.chmod(d, 0o755)
            else:
                state, sock, sim = d + "/state", d + "/api.sock", d + "/sim.json"
                user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
                group = subprocess.run(["id", "-gn"], capture_output=True, text=True).stdout.strip()
            with open(d + "/memgrant.yaml", "w") as f:
                f.write("""agent:
  id: %s-%d
  state_dir: %s
  api_socket: %s
  log_level: notice
  user: %s
  api_group: %s
backend:
  type: sim
  own_onlining: true
  sim:
    state: %s
    online: 1G
    standby: 1G
    block_size: 128M
providers:
  https:
    url: %s
    wait: %s
    ca_file: %s/ca.pem
    cert_file: %s/client.pem
    key_file: %s/client.key
""" % (rule, i, state, sock, user, group, sim, cp.url, WAIT, cp.certs, cp.certs, cp.certs))
            os.chmod(d + "/memgrant.yaml", 0o644)
            self.socks.append(sock)
            lf = d + "/daemon.log"
            self.logs.append(lf)
            self.procs.append(subprocess.Popen([BUILD + "/memgrantd", "-c", d + "/memgrant.yaml", "--foreground"],
                                               stdout=open(lf, "w"), stderr=subprocess.STDOUT, env=env))
            if i == 1:
                # one agent alone first: its RSS is the reference for the fleet's
                end = time.time() + 30
                while time.time() < end and not cp.call("GET", "/stats")["poll_times"].get("%s-1" % rule):
                    time.sleep(0.2)
                time.sleep(1)
                self.rss_alone = rss_of(self.pids())
            if i % 50 == 0:
                time.sleep(0.5)   # the helper's start is the slow part; do not starve the machine
        self.wait_polled(set(), 180, "start")

    def pids(self):
        """the agents and their helpers"""
        out = [p.pid for p in self.procs]
        for p in self.procs:
            try:
                kids = open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
                out += [int(k) for k in kids]
            except OSError:
                pass
        return out

    def agents(self):
        return {"%s-%d" % (self.rule, i) for i in range(1, N + 1)}

    def wait_polled(self, seen_before, secs, what):
        """until every agent polled since the last stats reset; the times"""
        end = time.time() + secs
        while True:
            st = self.cp.call("GET", "/stats")
            have = {a for a in st["poll_times"] if a in self.agents()}
            if len(have) >= N or time.time() > end:
                if len(have) < N:
                    say("  (%s: %d of %d agents polled within %d s)", what, len(have), N, secs)
                return st
            time.sleep(0.5)

    def pending(self, i):
        """the agent's undelivered reports (memgrant_outbox_pending)"""
        r = subprocess.run(["curl", "-s", "--max-time", "10", "--unix-socket", self.socks[i],
                            "http://localhost/metrics"], capture_output=True, text=True)
        m = re.search(r"^memgrant_outbox_pending (\d+)", r.stdout, re.M)
        return int(m.group(1)) if m else 0

    def log_sizes(self):
        return [os.path.getsize(f) for f in self.logs]

    def attempts(self, sizes):
        """per agent, the poller's attempts to get through (failed + 1) since SIZES"""
        out = []
        for f, off in zip(self.logs, sizes):
            with open(f, errors="replace") as fh:
                fh.seek(off)
                txt = fh.read()
            m = re.findall(r"https poll: control plane \S+ answers again after (\d+) failed attempts", txt)
            # failures: the poll the outage cut, then each retry that failed;
            # attempts: the failed retries and the one that got through
            out.append(sum(int(x) for x in m))
        return out

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def pct_times(st, since):
    """seconds after SINCE until 50/99/100 % of the agents polled"""
    firsts = sorted(min(t) for t in st["poll_times"].values())
    if not firsts:
        return (None, None, None)
    def at(q):
        k = max(0, min(len(firsts) - 1, int(q * N + 0.999) - 1))
        return firsts[k] - since if len(firsts) >= int(q * N + 0.999) else None
    return (at(0.5), at(0.99), at(1.0))


def peak5(st, i=0):
    """the busiest 5 s of figure I, per second: a server starved of the CPU
    for a moment counts a second's connections in the next one"""
    d = {int(k): v[i] for k, v in st["per_sec"].items()}
    if not d:
        return 0.0
    return max(sum(d.get(t + j, 0) for j in range(5)) for t in range(min(d), max(d) + 1)) / 5


def histogram(st, i=0, n=40):
    d = {int(k): v[i] for k, v in st["per_sec"].items()}
    if not d:
        return ""
    t0 = min(d)
    return " ".join(str(d.get(t0 + j, 0)) for j in range(n))


def peaks(st):
    rows = list(st["per_sec"].values())
    if not rows:
        return (0, 0, 0, 0, 0, 0)
    return (max(r[0] for r in rows), max(r[1] + r[2] for r in rows), max(r[1] for r in rows),
            sum(r[1] for r in rows), sum(r[2] for r in rows), max(r[3] for r in rows))


def fmt(x, f="%.1f"):
    return "-" if x is None else f % x


def outage(fleet, cp, secs, spread, restart=False):
    cp.call("POST", "/spread", {"spread": spread})
    if spread:
        # every agent hears of the window with its next answer (a long poll ends within the wait)
        cp.call("POST", "/stats/reset")
        fleet.wait_polled(set(), int(WAIT.rstrip("s")) + 10, "window heard")
    sizes = fleet.log_sizes()
    # a restart: back with new TLS ticket keys, as a new server process
    cp.call("POST", "/mode", {"mode": "down", "restart": restart})
    time.sleep(secs)
    cp.call("POST", "/stats/reset")
    up = time.time()
    cpu0 = cp.cpu()
    cp.call("POST", "/mode", {"mode": "ok"})
    st = fleet.wait_polled(set(), max(3 * W, 120), "after the outage")
    time.sleep(2)
    st = cp.call("GET", "/stats")
    cpu = cp.cpu() - cpu0
    # an agent logs its recovery when its first poll after the outage ends:
    # the long-poll wait later
    time.sleep(int(WAIT.rstrip("s")) + 3)
    cp.call("POST", "/spread", {"spread": None})
    att = fleet.attempts(sizes)
    p = peaks(st)
    t = pct_times(st, up)
    say("    connections per second after the %s (%s): %s", "restart" if restart else "outage",
        "window %d s" % spread if spread else "no window", histogram(st))
    if restart:
        say("    full TLS handshakes per second: %s", histogram(st, 1))
    return {"peak conn/s": p[0], "peak conn/s over 5 s": peak5(st), "peak handshakes/s": p[1], "peak full/s": p[2], "full": p[3], "resumed": p[4],
            "peak req/s": p[5], "t50": t[0], "t99": t[1], "t100": t[2],
            "attempts mean": sum(att) / max(1, len(att)), "attempts max": max(att) if att else 0,
            "cp cpu s": cpu}


def steady(fleet, cp, secs=30):
    pids = fleet.pids()
    cp.call("POST", "/stats/reset")
    w0, c0, cc0 = wakeups_of(pids), cpu_of(pids), cp.cpu()
    time.sleep(secs)
    w1, c1, cc1 = wakeups_of(pids), cpu_of(pids), cp.cpu()
    st = cp.call("GET", "/stats")
    req = sum(r[3] for r in st["per_sec"].values())
    return {"wakeups/agent/min": (w1 - w0) / N / secs * 60, "polls/agent/min": req / N / secs * 60,
            "rss MiB (agents+helpers)": rss_of(pids) / 1024, "rss KiB per agent": rss_of(pids) / N,
            "rss KiB of one alone": float(fleet.rss_alone),
            "agents cpu s": c1 - c0, "cp cpu s": cc1 - cc0, "processes": len(pids)}


def reports(fleet, cp, tag):
    """a grant to every agent at once; reports generated vs acknowledged"""
    cp.call("POST", "/stats/reset")
    t0 = time.time()
    for a in sorted(fleet.agents()):
        cp.call("POST", "/agents/%s/grants" % a, {"type": "grant", "id": "%s-%s" % (tag, a), "size": "256M"})
    end = time.time() + 300
    while time.time() < end:
        c = cp.call("GET", "/count/%s-" % tag)
        if c["states"].get("applied", 0) >= N:
            break
        time.sleep(1)
    done = time.time() - t0
    s = cp.call("GET", "/state")
    mine = [x for x in s["statuses"] if x["agent"] in fleet.agents()]
    firsts = [x for x in mine if not x["duplicate"]]
    lost = 0
    by = {}
    for x in firsts:
        by.setdefault(x["agent"], []).append(int(x["key"].rsplit(":", 1)[1]))
    for a in fleet.agents():
        q = by.get(a, [])
        lost += (q[-1] - q[0] + 1 - len(q)) if q else 0   # gaps in the outbox sequence
        if q != sorted(q):
            lost += 1
    applied = len({x["body"]["id"] for x in firsts if x["body"].get("state") == "applied"
                   and str(x["body"].get("id", "")).startswith(tag)})
    st = cp.call("GET", "/stats")
    p = peaks(st)
    pending = sum(fleet.pending(i) for i in range(N))
    return {"reports generated": len(firsts) + pending, "acknowledged": len(firsts),
            "duplicates": len(mine) - len(firsts), "lost (gaps, disorder, grant unreported)": lost + (N - applied),
            "all applied in s": done, "peak req/s": p[5]}


def retry_after(fleet, cp, secs=25, ra=5):
    cp.call("POST", "/stats/reset")
    cp.call("POST", "/mode", {"mode": "429", "retry_after": ra})
    t0 = time.time()
    time.sleep(secs)
    st429 = cp.call("GET", "/stats")
    cp.call("POST", "/stats/reset")
    up = time.time()
    cp.call("POST", "/mode", {"mode": "ok"})
    st = fleet.wait_polled(set(), 120, "after 429")
    time.sleep(2)
    st = cp.call("GET", "/stats")
    p429 = peaks(st429)
    p = peaks(st)
    t = pct_times(st, up)
    return {"req/s during 429 (peak)": p429[5], "req during 429 per agent": sum(r[3] for r in st429["per_sec"].values()) / N,
            "peak req/s after": p[5], "t50": t[0], "t99": t[1], "t100": t[2]}


def main():
    t = tempfile.mkdtemp(prefix="memgrant-fleet.")
    cp = CP(t)
    res = {}
    try:
        for rule in RULES:
            say("fleet: starting %d agents (rule %s%s)", N, rule, ", as shipped" if SHIPPED else "")
            t0 = time.time()
            fl = Fleet(t, cp, rule)
            say("  all %d polling after %.0f s", N, time.time() - t0)
            r = res[rule] = {}
            try:
                if "steady" in SCEN:
                    r["steady"] = steady(fl, cp)
                if "outage" in SCEN:
                    r["outage %ds" % OUTAGE] = outage(fl, cp, OUTAGE, None)
                    if LONG:
                        r["outage %ds" % LONG] = outage(fl, cp, LONG, None)
                if "restart" in SCEN:
                    r["restart %ds, no window" % RESTART] = outage(fl, cp, RESTART, None, restart=True)
                if "grant" in SCEN:
                    r["grant to all"] = reports(fl, cp, "g" + rule)
                if "429" in SCEN:
                    r["429 Retry-After 5"] = retry_after(fl, cp)
                if "window" in SCEN:
                    r["outage %ds, window %ds" % (OUTAGE, W)] = outage(fl, cp, OUTAGE, W)
                if "grant" in SCEN:
                    r["lost over the run"] = reports(fl, cp, "h" + rule)
            finally:
                fl.stop()
            for k, v in r.items():
                say("  %s: %s", k, ", ".join("%s %s" % (a, fmt(b) if isinstance(b, float) else b) for a, b in v.items()))
        say("")
        say("fleet of %d agents%s, wait %s, outage %d s, restart %d s, window %d s: rules %s", N,
            " as shipped" if SHIPPED else "", WAIT, OUTAGE, RESTART, W, " | ".join(RULES))
        for k in res.get(RULES[0], {}):
            for a in res[RULES[0]][k]:
                vals = [res[r].get(k, {}).get(a) for r in RULES]
                say("  %-26s %-28s %s", k[:26], a, " | ".join(fmt(v) if isinstance(v, float) else str(v) for v in vals))
        say("targets: peak reconnects/s <= N/W = %.1f with a window (+20%%), <= N/10 s = %.1f without (a restart "
            "too); 99%% back within 2W = %d s; <= 2 attempts with a window; 0 lost", N / W, N / 10, 2 * W)
    finally:
        cp.proc.terminate()
        cp.proc.wait()
        shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    main()
