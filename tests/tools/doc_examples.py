#!/usr/bin/env python3
"""Runs the examples of memgrant's documentation as written.

    doc_examples.py --top SRC --build BUILD [--list] [--only FILE[:LINE]] [DOC...]

An example is a code block of README.md, docs/*.md (```sh, ```console, or
any block with a "$ " prompt line) or of a man page's EXAMPLES section
(docs/man/*.scd: ``` blocks and tab-indented lines).  Diagrams, output,
YAML and JSON blocks are not examples.

Each example runs in a mount namespace of its own (unshare -m): /usr, /var,
/sys, the source tree and the build read-only (an example that would install
something or write the real sysfs fails instead), a private copy of /etc
with the shipped memgrant.yaml in /etc/memgrant, fresh tmpfs on /tmp, /run
and /var/lib/memgrant, the packages' user, /run/memgrant and
/run/memgrant-sim made by their sysusers.d/tmpfiles.d files: nothing of this
machine changes and two examples never see each other's files.  The
build's programs stand in for the installed ones (a wrapper per program in
PATH; memgrantd gets the shipped memgrant.yaml and the packages' folders,
as the packages' build has them).  The commands run one by one in one shell
(variables, cd and $? carry over), in a scratch folder with a copy of the
source tree; `memgrantd --foreground` (or -f) goes to the background and the
next command waits for its API socket; whatever is still running is stopped
at the end.

Where a block shows output ("$ " prompts, lines without one after a
command), each line shown must appear in the command's output, in order,
spaces squeezed; "..." matches anything and times are not compared.  A
command that shows no output must exit 0.

Marks, on the lines just before a block (Markdown: an HTML comment; scdoc:
a comment line starting with ";"), one directive each:
    doc-example: not-run: REASON      counted and listed, not run
    doc-example: before: COMMAND      run first, silently (repeatable; -COMMAND
                                      may fail, as in make)
    doc-example: as: root,user        run as root, then again as uid 65534
    doc-example: output: REASON       run; the output shown is not compared
The summary prints how many examples ran, how many are marked and why, and
each failure with its file:line, the command, what was expected and what
came.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

PROMPT = re.compile(r"^(\$|[a-z]+#) (.*)$")
MARK_MD = re.compile(r"^<!--\s*doc-example:\s*(.*?)\s*-->\s*$")
MARK_SCD = re.compile(r"^;\s*doc-example:\s*(.*?)\s*$")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?|\b\d\d:\d\d:\d\d(\.\d+)?\b")
USER_UID = 65534


class Example:
    def __init__(self, doc, line, text, console):
        self.doc, self.line, self.text, self.console = doc, line, text, console
        self.marks = []  # (kind, value)

    def where(self):
        return "%s:%d" % (self.doc, self.line)

    def mark(self, kind):
        return [v for k, v in self.marks if k == kind]


def parse_marks(lines, i, pattern):
    """Directives on the lines just before line I (blank lines skipped)."""
    marks = []
    j = i - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    while j >= 0:
        m = pattern.match(lines[j].strip())
        if not m:
            break
        kind, _, value = m.group(1).partition(":")
        marks.insert(0, (kind.strip(), value.strip()))
        j -= 1
    return marks


def examples_of(path, rel):
    lines = open(path, encoding="utf-8").read().split("\n")
    scd = path.endswith(".scd")
    out = []
    in_examples = not scd
    i = 0
    while i < len(lines):
        line = lines[i]
        if scd and line.startswith("# "):
            in_examples = line.strip() == "# EXAMPLES"
        if line.startswith("```"):
            lang = line[3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            prompts = any(PROMPT.match(b) for b in body)
            script = bool(body) and body[0].startswith("#!")  # a file's text (a hook), not commands
            # an untagged block that starts with one of memgrant's programs is a command too
            ours = lang == "" and bool(body) and re.match(r"(memgrantd|memgrantctl|memgrant-host)( |$)", body[0]) \
                and not any(c in "".join(body) for c in "─│▶◀┐┘")  # a diagram
            if in_examples and not script and (lang in ("sh", "console") or prompts or ours or
                                               (scd and lang == "" and body and not body[0].startswith(("[", "<")))):
                ex = Example(rel, i + 1, body, console=prompts)
                ex.marks = parse_marks(lines, i, MARK_SCD if scd else MARK_MD)
                out.append(ex)
            i = j + 1
            continue
        if scd and in_examples and line.startswith("\t"):
            j = i
            while j < len(lines) and lines[j].startswith("\t"):
                j += 1
            ex = Example(rel, i + 1, [l[1:] for l in lines[i:j]], console=False)
            ex.marks = parse_marks(lines, i, MARK_SCD)
            out.append(ex)
            i = j
            continue
        i += 1
    return out


def steps_of(ex):
    """[(command, expected output lines)]: continuation lines joined (the
    scdoc source writes a shell's backslash as two), comments dropped."""
    steps = []
    pending = ""
    body = ex.text
    for raw in body:
        text = raw.replace("\\\\", "\\") if ex.doc.endswith(".scd") else raw
        if ex.console:
            m = PROMPT.match(text)
            if m and not pending:
                steps.append([m.group(2), []])
                cmd = m.group(2)
            elif pending:
                cmd = text
            else:
                if steps:
                    steps[-1][1].append(text)
                continue
        else:
            cmd = text
            if not pending and (not cmd.strip() or cmd.lstrip().startswith("#")):
                continue
            if not pending:
                steps.append([cmd, []])
        if pending:
            steps[-1][0] = pending + cmd
        if steps[-1][0].rstrip().endswith("\\"):
            pending = steps[-1][0].rstrip()[:-1] + " "
        else:
            pending = ""
    return [(c.strip(), out) for c, out in steps]


def squeeze(s):
    return " ".join(TIME.sub("T", s).split())


def matches(want, got_lines):
    """Each line of WANT in GOT_LINES, in order; '...' matches anything."""
    k = 0
    for w in want:
        w = squeeze(w)
        if not w:
            continue
        pat = re.compile("^" + ".*".join(re.escape(p) for p in w.split("...")) + "$")
        while k < len(got_lines) and not pat.match(squeeze(got_lines[k])):
            k += 1
        if k == len(got_lines):
            return w
        k += 1
    return None


WRAPPERS = {
    "memgrantctl": ': "${MEMGRANT_SOCKET:=/run/memgrant/api.sock}"; export MEMGRANT_SOCKET\n'
                   'exec "$BUILD/memgrantctl" "$@"\n',
    "memgrant-host": 'exec "$BUILD/memgrant-host" "$@"\n',
}


def write_wrappers(bindir, top, build):
    os.makedirs(bindir, exist_ok=True)
    for name, body in WRAPPERS.items():
        p = os.path.join(bindir, name)
        with open(p, "w") as f:
            f.write('#!/bin/sh\nTOP=%s BUILD=%s\n%s' % (shlex.quote(top), shlex.quote(build), body))
        os.chmod(p, 0o755)
    # memgrantd: the shipped memgrant.yaml (installed in the namespace's
    # /etc as the packages do) unless the caller gives -c, and
    # the packages' folders (packaging/debian/rules builds with them)
    p = os.path.join(bindir, "memgrantd")
    with open(p, "w") as f:
        f.write('#!/bin/sh\nTOP=%s BUILD=%s\n'
                'c="-c /etc/memgrant/memgrant.yaml"\n'
                'for a; do case $a in -c|--config|--config=*|--help|-h|--version) c= ;; esac; done\n'
                '# shellcheck disable=SC2086\n'
                'sim=\n'
                'for a; do case $a in backend.type=sim) sim="-o backend.sim.state=/run/memgrant-sim/sim.json" ;; esac; done\n'
                'exec "$BUILD/memgrantd" $c -o agent.state_dir=/var/lib/memgrant '
                '-o agent.api_socket=/run/memgrant/api.sock $sim "$@"\n'
                % (shlex.quote(top), shlex.quote(build)))
    os.chmod(p, 0o755)


def is_daemon(cmd):
    try:
        w = shlex.split(cmd, comments=True)
    except ValueError:  # an unbalanced quote: the shell will say so
        w = cmd.split()
    return bool(w) and os.path.basename(w[0]) == "memgrantd" and ("--foreground" in w or "-f" in w) and \
        "--check-config" not in w


def socket_of(cmd):
    m = re.search(r"agent\.api_socket=(\S+)", cmd)
    return m.group(1) if m else "/run/memgrant/api.sock"


def inner_script(ex, steps, before, work, stage, top, build, as_user):
    """The shell script that runs inside the namespace."""
    q = shlex.quote
    s = ["set -u", "exec </dev/null"]
    # nothing an example does reaches this machine: the system's folders,
    # the source tree and /sys read-only (an example that would install,
    # or write the real sysfs, fails here instead), the results folder kept
    # writable below its read-only parent
    s.append("mount --bind %s %s" % (q(stage), q(stage)))
    for d in ("/usr", "/var", "/boot", "/opt", "/srv", "/home", "/root", "/sys", top, build):
        s.append("if [ -d %s ] && [ ! -L %s ]; then mount --rbind %s %s && mount -o remount,bind,ro %s; fi"
                 % ((q(d),) * 5))
    s += [
        "mount -t tmpfs -o mode=1777 doc-tmp /tmp",
        "mount -t tmpfs -o mode=0755 doc-run /run",
        "if [ -d /var/lib/memgrant ]; then mount -t tmpfs -o mode=0700 doc-state /var/lib/memgrant; "
        "else mount -t tmpfs -o mode=0755 doc-varlib /var/lib && mkdir -m 0700 /var/lib/memgrant; fi",
        # a private copy of /etc: the packages' user and configuration go there
        "mkdir -p %s/etc && mount -t tmpfs -o mode=0755 doc-etc %s/etc && cp -a /etc/. %s/etc/ && "
        "mount --bind %s/etc /etc" % (q(stage), q(stage), q(stage), q(stage)),
        "mkdir -p /etc/memgrant && install -m 0644 %s /etc/memgrant/memgrant.yaml"
        % q(top + "/config/memgrant.yaml"),
        "systemd-sysusers %s >/dev/null 2>&1 || true" % q(top + "/packaging/systemd/memgrant.sysusers"),
        "systemd-tmpfiles --create %s >/dev/null 2>&1 || true" % q(top + "/packaging/systemd/memgrant.tmpfiles"),
        "mkdir -p /run/memgrant-sim && chmod 0755 /run/memgrant-sim",
        "mkdir -p %s && cd %s" % (q(work), q(work)),
        "(cd %s && tar --exclude=./build --exclude=./config.mk --exclude=./.git -cf - .) | tar -xf -" % q(top),
    ]
    if as_user:
        s.append("chown -R %d:%d %s && chmod 0755 %s" % (USER_UID, USER_UID, q(work), q(work)))
    s += ["export PATH=%s:$PATH HOME=%s LC_ALL=C.UTF-8" % (q(stage + "/bin"), q(work)),
          "bg=", "n=0"]
    run_as = "setpriv --reuid=%d --regid=%d --clear-groups " % (USER_UID, USER_UID) if as_user else ""

    def one(i, cmd, visible):
        out = []
        cmd = re.sub(r"^sudo\s+", "", cmd) if not as_user else cmd
        o, r = q("%s/out.%s" % (stage, i)), q("%s/rc.%s" % (stage, i))
        if is_daemon(cmd):
            sock = socket_of(cmd)
            cmd = re.sub(r"\s*&\s*$", "", cmd)
            # exec: $! is the daemon itself, which the TERM at the end
            # stops (not a shell whose child, another user's, lives on)
            out.append("{ exec %s%s ; } >%s 2>&1 & bg=\"$bg $!\"; d=$!" % (run_as, cmd if not run_as else
                                                                           "sh -c " + q("exec " + cmd), o))
            # up (it answers on its socket) or gone (its log says why)
            probe = "%s/memgrantctl --socket %s status >/dev/null 2>&1" % (q(build), q(sock))
            out.append("i=0; while ! %s && kill -0 $d 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; "
                       "i=$((i+1)); done; if %s; then echo 0; else wait $d; echo \"daemon-$?\"; fi >%s"
                       % (probe, probe, r))
        elif run_as:
            out.append("%ssh -c %s >%s 2>&1; st=$?; echo $st >%s; (exit $st)" % (run_as, q(cmd), o, r))
        else:
            # $? of the command stays for the next one ("echo $?")
            out.append("{ %s\n} >%s 2>&1; st=$?; echo $st >%s; bg=\"$bg ${!:-}\"; (exit $st)" % (cmd, o, r))
        if cmd.rstrip().endswith("&") and not cmd.rstrip().endswith("&&"):
            # started in the background: as someone typing the next line
            # would, wait (10 s at most) for the files it names to be there
            paths = [x for x in re.findall(r"(?:^|[\s=])(/[^\s'\"]+)", cmd) if not x.startswith(("/usr/", "/bin/"))]
            if paths:
                test = " && ".join("[ -e %s ]" % q(x) for x in paths)
                out.append("i=0; until %s || [ $i -ge 100 ]; do sleep 0.1; i=$((i+1)); done" % test)
        return out

    for i, cmd in enumerate(before):
        s += one("b%d" % i, cmd, False)
    for i, (cmd, _) in enumerate(steps):
        s += one(i, cmd, True)
    s.append("for p in $bg; do kill -TERM $p 2>/dev/null; done; wait")
    return "\n".join(s) + "\n"


def run_example(ex, args, as_user):
    steps = steps_of(ex)
    before = [b[1:] if b.startswith("-") else b for b in ex.mark("before")]  # "-": may fail, as in make
    stage = tempfile.mkdtemp(prefix="doc-example.", dir="/var/tmp")
    try:
        os.chmod(stage, 0o755)
        write_wrappers(stage + "/bin", args.top, args.build)
        work = "/tmp/doc"
        script = inner_script(ex, steps, before, work, stage, args.top, args.build, as_user)
        with open(stage + "/run.sh", "w") as f:
            f.write(script)
        problems = []
        p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", stage + "/run.sh"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            p.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            problems.append("timed out after %d s (--timeout)" % args.timeout)
        # everything it started goes, whatever the script's end stopped;
        # what ran so far is reported below
        try:
            os.killpg(p.pid, 9)
        except ProcessLookupError:
            pass
        p.wait()
        unchecked = bool(ex.mark("output"))
        for i, cmd in enumerate(before):
            rc = read(stage + "/rc.b%d" % i)
            if rc != "0" and not ex.mark("before")[i].startswith("-"):
                problems.append("set-up `%s` failed (exit %s):\n%s" % (cmd, rc, indent(read(stage + "/out.b%d" % i))))
                return problems
        for i, (cmd, want) in enumerate(steps):
            rc = read(stage + "/rc.%d" % i)
            got = read(stage + "/out.%d" % i)
            if rc is None:
                problems.append("`%s` did not finish:\n%s" % (cmd, indent(got)) if got is not None else
                                "`%s` did not run (an earlier command ended the shell)" % cmd)
                break
            shown = [w for w in want if w.strip()]
            if shown and not unchecked:
                miss = matches(shown, got.split("\n"))
                if miss is not None:
                    problems.append("`%s` (exit %s): the doc shows\n    %s\nwhich is not in its output:\n%s"
                                    % (cmd, rc, miss, indent(got)))
            elif rc != "0" and not (shown and unchecked):
                problems.append("`%s` failed (exit %s):\n%s" % (cmd, rc, indent(got)))
        if problems:  # what the programs in the background said: often the cause
            for i, (cmd, _) in enumerate(steps):
                if is_daemon(cmd) or cmd.rstrip().endswith("&"):
                    problems.append("(background) `%s` said:\n%s" % (cmd, indent(read(stage + "/out.%d" % i))))
        return problems
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def read(p):
    try:
        with open(p, errors="replace") as f:
            return f.read().rstrip("\n")
    except OSError:
        return None


def indent(s):
    s = s or "(nothing)"
    lines = s.split("\n")
    if len(lines) > 25:
        lines = lines[:25] + ["... (%d more lines)" % (len(lines) - 25)]
    return "\n".join("    | " + l for l in lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--list", action="store_true", help="list the examples and their marks, run nothing")
    ap.add_argument("--only", help="FILE or FILE:LINE: run only that example")
    ap.add_argument("--timeout", type=int, default=120, help="seconds for one example")
    ap.add_argument("--in-place", metavar="FILE:LINE", action="append", default=[],
                    help="run this example even when marked not-run, in the source tree itself, as root, "
                         "without a namespace: for a disposable root (CI's fresh root) only")
    ap.add_argument("docs", nargs="*")
    args = ap.parse_args()
    args.top, args.build = os.path.abspath(args.top), os.path.abspath(args.build)
    for d in (args.top, args.build):
        if d == "/tmp" or d.startswith("/tmp/"):
            print("doc_examples: %s is below /tmp, which each example gets a fresh one of: "
                  "use a source tree and build folder elsewhere" % d)
            return 1
    docs = args.docs or (["README.md"] + sorted("docs/" + f for f in os.listdir(args.top + "/docs") if f.endswith(".md"))
                         + sorted("docs/man/" + f for f in os.listdir(args.top + "/docs/man") if f.endswith(".scd")))
    exs = [e for d in docs for e in examples_of(os.path.join(args.top, d), d)]
    if args.in_place:
        bad = 0
        for w in args.in_place:
            ex = [e for e in exs if e.where() == w]
            if not ex:
                print("FAIL %s: no example there (--list shows them)" % w)
                bad += 1
                continue
            for cmd, _ in steps_of(ex[0]):
                print("%s$ %s" % (w, cmd), flush=True)
                r = subprocess.run(["sh", "-c", cmd], cwd=args.top).returncode
                if r != 0:
                    print("FAIL %s: `%s` exited with %d" % (w, cmd, r))
                    bad += 1
                    break
            else:
                print("ok   %s (in place)" % w)
        return 1 if bad else 0
    if args.only:
        exs = [e for e in exs if e.where() == args.only or e.doc == args.only]
    ran = failed = 0
    marked = {}
    for ex in exs:
        bad = [k for k, _ in ex.marks if k not in ("not-run", "before", "as", "output")]
        if bad:
            print("FAIL %s: unknown doc-example directive '%s' (not-run, before, as, output)" % (ex.where(), bad[0]))
            failed += 1
            continue
        why = ex.mark("not-run")
        if why:
            marked.setdefault(why[0], []).append(ex.where())
            if args.list:
                print("%s: not run: %s" % (ex.where(), why[0]))
            continue
        whos = (ex.mark("as") or ["root"])[0].split(",")
        for who in whos:
            if args.list:
                print("%s: runs as %s: %s" % (ex.where(), who, "; ".join(c for c, _ in steps_of(ex))))
                continue
            ran += 1
            problems = run_example(ex, args, who.strip() == "user")
            label = "%s (as %s)" % (ex.where(), who.strip()) if len(whos) > 1 or who.strip() != "root" else ex.where()
            if problems:
                failed += 1
                print("FAIL %s" % label, flush=True)
                for p in problems:
                    print("  " + p.replace("\n", "\n  "))
            else:
                print("ok   %s (%d commands)" % (label, len(steps_of(ex))), flush=True)
    n_marked = sum(len(v) for v in marked.values())
    print("doc examples: %d run, %d failed, %d marked not runnable here:" % (ran, failed, n_marked))
    for why, where in sorted(marked.items()):
        print("  %s: %s" % (why, ", ".join(where)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
