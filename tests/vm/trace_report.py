#!/usr/bin/env python3
# The figures of one pressure-trace run of tests/vm/libvirt.sh, from the log
# of the guest's tests/vm/trace (its format is in trace.c), and the table
# of several runs side by side.
#
#   trace_report.py run LOG LABEL BOOT_TOTAL_KB RESERVE_KB BURSTS RELEASES PLUGS UNPLUGS > RUN.json
#       BURSTS / RELEASES: the trace's phase numbers, comma-separated
#   trace_report.py table RUN.json...
#
# Per run:
#   relief      per burst: the burst's start to the first MemTotal rise after it
#               (memory granted and online); "n/a" when the burst never took
#               MemAvailable below the reserve and got nothing (it had enough),
#               "never" when it did and got nothing
#   short_s     seconds with MemAvailable below the agent's reserve
#   oom_kills   the rise of /proc/vmstat's oom_kill over the run
#   beyond_mib  memory granted beyond the need (peak use + reserve - boot
#               MemTotal), the most of any burst
#   floor_s     per release: its start to MemTotal back at the boot value
#   reversals   within one phase (a steady or one-way demand), MemTotal
#               turning from rising to falling or back: a change of direction
#               the trace did not cause
import json
import sys


def load(path):
    phases, samples, kills = {}, [], []
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w:
                continue
            if w[0] == "P":
                phases[int(w[2])] = (int(w[1]), int(w[3]))
            elif w[0] == "S":
                samples.append(tuple(int(x) for x in w[1:6]))
            elif w[0] == "K":
                kills.append(int(w[1]))
    return phases, samples, kills


def phase_of(phases, t):
    cur = None
    for n, (start, _) in sorted(phases.items()):
        if t >= start:
            cur = n
    return cur


def run(args):
    path, label, boot_kb, reserve_kb = args[0], args[1], int(args[2]), int(args[3])
    bursts = [int(x) for x in args[4].split(",")]
    releases = [int(x) for x in args[5].split(",")]
    plugs, unplugs = int(args[6]), int(args[7])
    phases, s, kills = load(path)
    if not s:
        sys.exit("no samples in %s" % path)
    ends = {n: phases[n + 1][0] if n + 1 in phases else s[-1][0] for n in phases}
    relief = []
    beyond = 0
    for b in bursts:
        start, end = phases[b][0], ends[b]
        # a burst's need lasts until the next release starts
        nxt = min([r for r in releases if r > b], default=None)
        need_end = phases[nxt][0] if nxt is not None else s[-1][0]
        total0 = next((x[1] for x in s if x[0] >= start), s[-1][1])
        rise = next((x[0] for x in s if start <= x[0] < need_end and x[1] > total0), None)
        during = [x for x in s if start <= x[0] < need_end]
        if rise is not None:
            relief.append((rise - start) / 1000)
        elif any(x[2] < reserve_kb for x in during):
            relief.append(None)   # short, and nothing came
        else:
            relief.append("n/a")  # what it had was enough
        if during:
            need = max(x[1] - x[2] for x in during) + reserve_kb - boot_kb
            granted = max(x[1] for x in during) - boot_kb
            beyond = max(beyond, granted - max(need, 0))
    short_ms = 0
    for a, b in zip(s, s[1:]):
        if a[2] < reserve_kb:
            short_ms += b[0] - a[0]
    floor = []
    for r in releases:
        start = phases[r][0]
        back = next((x[0] for x in s if x[0] >= start and x[1] <= boot_kb), None)
        floor.append(None if back is None else (back - start) / 1000)
    reversals = 0
    for n in phases:
        seq = [x[1] for x in s if phases[n][0] <= x[0] < ends[n]]
        direction = 0
        for a, b in zip(seq, seq[1:]):
            d = (b > a) - (b < a)
            if d and direction and d != direction:
                reversals += 1
            if d:
                direction = d
    out = {
        "label": label,
        "relief_s": relief,
        "short_s": round(short_ms / 1000, 1),
        "oom_kills": s[-1][3] - s[0][3],
        "worker_killed": len(kills),
        "beyond_mib": max(0, beyond // 1024),
        "floor_s": floor,
        "reversals": reversals,
        "plugs": plugs,
        "unplugs": unplugs,
        "peak_granted_mib": (max(x[1] for x in s) - boot_kb) // 1024,
    }
    print(json.dumps(out))


def fmt(v):
    if v == "n/a":
        return v
    if v is None:
        return "never"
    return "%.1f" % v


def table(paths):
    rows = [json.load(open(p)) for p in paths]
    print("%-28s %-20s %7s %4s %7s %-14s %4s %11s" % ("run", "relief per burst (s)", "short s", "OOM",
                                                      "beyond", "floor after (s)", "rev", "plugs/unpl"))
    for r in rows:
        print("%-28s %-20s %7.1f %4d %6dM %-14s %4d %5d/%-5d" % (
            r["label"], "/".join(fmt(x) for x in r["relief_s"]), r["short_s"], r["oom_kills"],
            r["beyond_mib"], "/".join(fmt(x) for x in r["floor_s"]), r["reversals"], r["plugs"],
            r["unplugs"]))


if __name__ == "__main__":
    if len(sys.argv) >= 10 and sys.argv[1] == "run":
        run(sys.argv[2:])
    elif len(sys.argv) >= 3 and sys.argv[1] == "table":
        table(sys.argv[2:])
    else:
        sys.exit(__doc__ or "usage: trace_report.py run ... | table ...")
