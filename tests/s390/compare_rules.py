#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Usage: compare_rules.py KERNEL_OUTPUT SIM_OUTPUT KERNEL_RULES_MD

Compares the rule suite's outcomes on the real kernel (kernel_rules kernel,
in the guest's console log) with the sim's for the same machine
(kernel_rules sim Y|N): one line per case, "RULES: agree NAME: OUTCOME" or
"RULES: DIFFER NAME: kernel OUTCOME; sim OUTCOME", then
"RULES: N cases ran on the real kernel, A agree with the sim, D differ,
S not run".  A difference that docs/kernel-rules.md (KERNEL_RULES_MD) lists,
in the table under "### Differences of the emulation", names its reason
there and is counted as known.  Exit 0 when every difference is known,
1 otherwise (a case that ran on one side only differs too).
"""
import re
import sys

LINE = re.compile(r"^RULES: case (.*?)\t(.*)$")
NOT_RUN = re.compile(r"^RULES: not run (.*?): ")


def outcomes(path):
    out, skipped = {}, set()
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            m = LINE.match(line)
            if m:
                out[m.group(1)] = m.group(2)
            m = NOT_RUN.match(line)
            if m:
                skipped.add(m.group(1))
    return out, skipped


def documented(path):
    """{case name: reason} from the doc's table of differences."""
    known, inside = {}, False
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                inside = line.strip() == "### Differences of the emulation"
            m = re.match(r"^\| `([^`]+)` \| (.*?) \|\s*$", line) if inside else None
            if m:
                known[m.group(1)] = m.group(2)
    return known


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    kernel, skipped = outcomes(sys.argv[1])
    sim, _ = outcomes(sys.argv[2])
    known = documented(sys.argv[3])
    agree = differ = documented_differ = 0
    for name in sorted(set(kernel) | set(sim), key=lambda n: (n not in kernel, n)):
        k, s = kernel.get(name, "(did not run)"), sim.get(name, "(did not run)")
        if k == s:
            agree += 1
            print("RULES: agree %s: %s" % (name, k))
        elif name in known:
            documented_differ += 1
            print("RULES: DIFFER (documented) %s: kernel %s; sim %s; why: %s" % (name, k, s, known[name]))
        else:
            differ += 1
            print("RULES: DIFFER %s: kernel %s; sim %s" % (name, k, s))
    print("RULES: %d cases ran on the real kernel, %d agree with the sim, %d differ (%d of them documented in "
          "docs/kernel-rules.md), %d not run" % (len(kernel), agree, differ + documented_differ, documented_differ,
                                                  len(skipped)))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
