#!/usr/bin/env python3
# Every name a reader is sent to must exist: each `name.c`, `name.h` and
# `function()` cited in a comment of the tree's C files, shell scripts and
# Makefiles, or anywhere in docs/, resolves.
#
# A file resolves when its path exists (from the top, from the citing file's
# folder, or as the tail of a tracked path: `privsep/spawn.c`), or, for a
# bare name, when a tracked file or a system header has that name.  A
# function resolves when some C file of the tree defines, declares or calls
# it (a library's function counts once the code calls it).  Names that
# belong to other programs and that the code never calls are listed in
# tests/truth_names.txt, each with why.
#
# Run from the top of the tree (make check does); exit 1 names every
# reference that points nowhere, as FILE:LINE: NAME.
import os
import re
import subprocess
import sys

TOP = "."
ALLOW_FILE = "tests/truth_names.txt"

FILE_REF = re.compile(r"(?<![\w/.\-~$*])((?:[\w.\-]+/)*[\w\-]+\.[ch])(?![\w/])")
FUNC_REF = re.compile(r"(?<![\w.>$:\-*])([A-Za-z_]\w*)\(\)")
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# a function the code names without calling it: cleanup(json_decrefp)
CLEANUP = re.compile(r"\bcleanup\(\s*([A-Za-z_]\w*)\s*\)")
# placeholders, not names: tests/fuzz/fuzz_NAME.c, test_NAME.c
PLACEHOLDER = re.compile(r"NAME|[A-Z]{2,}\.[ch]$|\.\.\.")


def tracked_files():
    """The tree's files: git's list in a checkout, else every file below the
    top but build output (a source tarball has no .git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout
        files = [f for f in out.decode().split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, fs in os.walk(TOP):
        dirs[:] = [x for x in dirs if not x.startswith((".git", "build"))]
        files += [os.path.relpath(os.path.join(d, f), TOP) for f in fs]
    return files


def split_c(text):
    """(code, [(line, comment text)]) of a C file: comments and string
    literals blanked out of the code, comments kept with their first line."""
    code = []
    comments = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            comments.append((line, text[i:j]))
            line += text.count("\n", i, j)
            code.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            comments.append((line, text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            code.append(c + " " * 0 + c)
            i = j + 1
        else:
            if c == "\n":
                line += 1
            code.append(c)
            i += 1
    return "".join(code), comments


def hash_comments(text):
    """[(line, text)] of the # comments of a shell script or Makefile."""
    out = []
    for k, l in enumerate(text.splitlines(), 1):
        m = re.search(r"(?:^|\s)#(?![!{])(.*)", l)
        if m:
            out.append((k, m.group(1)))
    return out


def system_headers():
    names, paths = set(), set()
    for root in ("/usr/include",):
        for d, _, fs in os.walk(root):
            for f in fs:
                if f.endswith(".h"):
                    names.add(f)
                    paths.add(os.path.relpath(os.path.join(d, f), root))
    # multiarch folders: <curl/curl.h> is /usr/include/x86_64-linux-gnu/curl/curl.h on some
    for p in list(paths):
        parts = p.split("/", 1)
        if len(parts) == 2 and "-linux-" in parts[0]:
            paths.add(parts[1])
    return names, paths


def load_allowed():
    allowed = set()
    try:
        with open(ALLOW_FILE) as f:
            for l in f:
                l = l.split("#", 1)[0].strip()
                if l:
                    allowed.add(l.split()[0])
    except FileNotFoundError:
        pass
    return allowed


def main():
    files = tracked_files()
    tracked = set(files)
    basenames = {os.path.basename(f) for f in files}
    sys_names, sys_paths = system_headers()
    allowed = load_allowed()

    known_funcs = set()
    c_files = [f for f in files if f.endswith((".c", ".h")) and os.path.exists(f)]
    texts = {}
    for f in c_files:
        with open(f, errors="replace") as fh:
            texts[f] = fh.read()
        code, _ = split_c(texts[f])
        known_funcs.update(CALL.findall(code))
        known_funcs.update(CLEANUP.findall(code))

    def file_ok(ref, citing):
        if ref in allowed or PLACEHOLDER.search(ref):
            return True
        if "/" not in ref:
            return ref in basenames or ref in sys_names
        if ref in tracked or ref in sys_paths:
            return True
        rel = os.path.normpath(os.path.join(os.path.dirname(citing), ref))
        if rel in tracked:
            return True
        return any(t.endswith("/" + ref) for t in tracked)

    def func_ok(name):
        return name in known_funcs or name in allowed

    bad = []

    def check(citing, line, text):
        for m in FILE_REF.finditer(text):
            ref = m.group(1)
            if not file_ok(ref, citing):
                bad.append(f"{citing}:{line + text.count(chr(10), 0, m.start())}: {ref}")
        for m in FUNC_REF.finditer(text):
            # "_parse()" after words_zone_kernel_name() is a shorthand of the name before
            if not m.group(1).startswith("_") and not func_ok(m.group(1)):
                bad.append(f"{citing}:{line + text.count(chr(10), 0, m.start())}: {m.group(1)}()")

    for f in c_files:
        for line, text in split_c(texts[f])[1]:
            check(f, line, text)
    for f in files:
        if not os.path.exists(f):
            continue
        if f.startswith("docs/"):
            with open(f, errors="replace") as fh:
                check(f, 1, fh.read())
        elif f.endswith(".sh") or os.path.basename(f) in ("Makefile", "configure") or f.endswith(".mk"):
            with open(f, errors="replace") as fh:
                for line, text in hash_comments(fh.read()):
                    check(f, line, text)

    for b in bad:
        print(f"truth_check: {b} names nothing in the tree (fix the name, or list a foreign one in {ALLOW_FILE})")
    if bad:
        print(f"truth_check: {len(bad)} references point nowhere")
        return 1
    print("truth_check: every cited file and function exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
