#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Usage: mkroot.py BUILD SYSROOT OUT

Lays out OUT, the root of the s390x kernel test's guest (tests/s390/run.sh),
from an s390x build of memgrant (BUILD) and the Debian s390x target root that
packaging/s390x-sysroot.sh made (SYSROOT):

  /init                      tests/s390/guest.sh, run by busybox's sh
  /bin/busybox + its applets  the shell and tools of the driver
  /usr/sbin/memgrantd, /usr/sbin/memgrant-helper, /usr/bin/memgrantctl
  /usr/libexec/memgrant/kernel_rules   the rule suite on the real kernel
  SYSCONFDIR/memgrant/memgrant.yaml   the shipped configuration, unchanged, where
                             memgrantd looks by default (the build's config.mk)
  /etc/memgrant-test.env     SYSCONFDIR, LOCALSTATEDIR, RUNSTATEDIR of the build
  /etc/passwd, /etc/group            root and memgrant (as memgrant.sysusers makes it)
  /lib/ld64.so.1, /lib/s390x-linux-gnu/*  every library the programs need:
      their DT_NEEDED entries, and the sonames their ".note.dlopen" notes
      name (libcurl, libcrypto: loaded with dlopen(), lib/dl_table.h), with
      the libraries those need in turn

Everything is owned by root (mkinitrd.py); the guest gives memgrant its
directories as the packages' tmpfiles.d does.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

HOST = "s390x-linux-gnu"
NOTE_DLOPEN = 0x407C0C0A
HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(os.path.dirname(HERE))


def readelf(*args):
    return subprocess.run([HOST + "-readelf", *args], check=True, capture_output=True, text=True).stdout


def needed(path):
    out = []
    for line in readelf("-d", "-W", path).splitlines():
        if "(NEEDED)" in line:
            out.append(line.split("[", 1)[1].split("]", 1)[0])
    return out


def dlopen_sonames(path):
    """The sonames of the FDO .note.dlopen notes in PATH (a big-endian ELF)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    end = ">" if data[5] == 2 else "<"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
    sections = []
    for i in range(shnum):
        name, _type, _flags, _addr, off, size = struct.unpack_from(end + "IIQQQQ", data, shoff + i * shentsize)
        sections.append((name, off, size))
    stroff = sections[shstrndx][1]
    out = []
    for name, off, size in sections:
        sname = data[stroff + name:data.index(b"\0", stroff + name)]
        if sname != b".note.dlopen":
            continue
        pos = off
        while pos + 12 <= off + size:
            namesz, descsz, ntype = struct.unpack_from(end + "III", data, pos)
            pos += 12
            owner = data[pos:pos + namesz].rstrip(b"\0")
            pos += (namesz + 3) & ~3
            desc = data[pos:pos + descsz].rstrip(b"\0")
            pos += (descsz + 3) & ~3
            if owner == b"FDO" and ntype == NOTE_DLOPEN:
                for entry in json.loads(desc):
                    out.extend(entry["soname"])
    return out


def find_lib(sysroot, soname):
    for d in ("lib/" + HOST, "usr/lib/" + HOST, "lib", "usr/lib"):
        p = os.path.join(sysroot, d, soname)
        if os.path.exists(p):
            return os.path.realpath(p)
    sys.exit("mkroot.py: %s is not in the target root %s" % (soname, sysroot))


def install(src, dst, mode=0o755):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    build, sysroot, out = sys.argv[1:]
    if os.path.exists(out):
        shutil.rmtree(out)
    programs = {
        "memgrantd": "usr/sbin/memgrantd",
        "memgrant-helper": "usr/sbin/memgrant-helper",
        "memgrantctl": "usr/bin/memgrantctl",
        "tests/tools/kernel_rules": "usr/libexec/memgrant/kernel_rules",
    }
    todo = []
    for src, dst in programs.items():
        path = os.path.join(build, src)
        if not os.path.exists(path):
            sys.exit("mkroot.py: %s missing: build it first (make -C tests/s390 needs an s390x build)" % path)
        install(path, os.path.join(out, dst))
        todo.append(path)
    # the libraries, to the end of their dependencies
    seen = set()
    while todo:
        path = todo.pop()
        for soname in needed(path) + dlopen_sonames(path):
            if soname in seen or soname == "ld64.so.1":
                continue
            seen.add(soname)
            lib = find_lib(sysroot, soname)
            install(lib, os.path.join(out, "lib", HOST, soname))
            todo.append(lib)
    install(os.path.join(sysroot, "lib/ld64.so.1"), os.path.join(out, "lib/ld64.so.1"))
    # busybox and its applets as links
    install(os.path.join(sysroot, "bin/busybox"), os.path.join(out, "bin/busybox"))
    applets = subprocess.run(["qemu-s390x-static", os.path.join(out, "bin/busybox"), "--list"],
                             check=True, capture_output=True, text=True).stdout.split()
    for a in applets:
        if a != "busybox":
            os.symlink("busybox", os.path.join(out, "bin", a))
    os.symlink("bin", os.path.join(out, "sbin"))
    install(os.path.join(HERE, "guest.sh"), os.path.join(out, "init"))
    dirs = {"SYSCONFDIR": "/usr/local/etc", "LOCALSTATEDIR": "/usr/local/var", "RUNSTATEDIR": "/usr/local/var/run"}
    with open(os.path.join(PROJECT, "config.mk")) as f:
        for line in f:
            key, _, value = line.partition("=")
            if key.strip() in dirs:
                dirs[key.strip()] = value.strip()
    install(os.path.join(PROJECT, "config/memgrant.yaml"),
            os.path.join(out, dirs["SYSCONFDIR"].lstrip("/"), "memgrant/memgrant.yaml"), 0o644)
    os.makedirs(os.path.join(out, "etc"), exist_ok=True)
    with open(os.path.join(out, "etc/memgrant-test.env"), "w") as f:
        f.writelines("%s=%s\n" % kv for kv in sorted(dirs.items()))
    with open(os.path.join(out, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\nmemgrant:x:998:998:memgrant agent:/var/lib/memgrant:/bin/false\n")
    with open(os.path.join(out, "etc/group"), "w") as f:
        f.write("root:x:0:\nmemgrant:x:998:\n")
    for d in ("run", "var/lib", "root"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    print("mkroot.py: %s: %d libraries (%s)" % (out, len(seen), " ".join(sorted(seen))))


if __name__ == "__main__":
    main()
