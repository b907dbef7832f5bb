#!/usr/bin/env python3
# Writes a sysfs-shaped tree of N memory blocks under DIR for the benchmarks
# (never the real /sys: DIR must not exist yet).  The shape is the kernel's
# (kernel.md A1-A9, C1-C3):
#   sys/devices/system/memory/block_size_bytes, auto_online_blocks
#   sys/devices/system/memory/memoryN/{state,removable,valid_zones,phys_index}
#       and a node0 link (what lsmem and discovery read; no online, phys_device)
#   with --firmware: sys/firmware/memory/memoryN/{config,memmap_on_memory};
#       blocks past --online are standby (config 0, no devices entry)
#   sys/module/memory_hotplug/parameters/memmap_on_memory
# Without --firmware every block has a devices entry; those past --online
# are offline.  Blocks in the upper half of the online ones are Movable, so
# lsmem has ranges to split.
#   mktree.py DIR BLOCKS [--online N] [--block-size BYTES] [--firmware]
import argparse
import os
import sys


def put(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("blocks", type=int)
    ap.add_argument("--online", type=int, default=None)
    ap.add_argument("--block-size", type=int, default=128 << 20)
    ap.add_argument("--firmware", action="store_true")
    a = ap.parse_args()
    if os.path.exists(a.dir):
        sys.exit("mktree: %s exists; give a new directory" % a.dir)
    if os.path.realpath(a.dir).startswith(("/sys", "/proc")):
        sys.exit("mktree: refusing to write under /sys or /proc")
    online = a.online if a.online is not None else a.blocks // 4
    mem = os.path.join(a.dir, "sys/devices/system/memory")
    fw = os.path.join(a.dir, "sys/firmware/memory")
    node = os.path.join(a.dir, "sys/devices/system/node/node0")
    os.makedirs(mem)
    os.makedirs(node)
    param = os.path.join(a.dir, "sys/module/memory_hotplug/parameters")
    os.makedirs(param)
    put(os.path.join(param, "memmap_on_memory"), "Y\n")
    put(os.path.join(mem, "block_size_bytes"), "%x\n" % a.block_size)
    put(os.path.join(mem, "auto_online_blocks"), "offline\n")
    if a.firmware:
        os.makedirs(fw)
    for i in range(a.blocks):
        present = i < online or not a.firmware
        if a.firmware:
            e = os.path.join(fw, "memory%d" % i)
            os.mkdir(e)
            put(os.path.join(e, "config"), "1\n" if present else "0\n")
            put(os.path.join(e, "memmap_on_memory"), "0\n" if i < online else "1\n")
        if not present:
            continue
        d = os.path.join(mem, "memory%d" % i)
        os.mkdir(d)
        on = i < online
        put(os.path.join(d, "state"), "online\n" if on else "offline\n")
        put(os.path.join(d, "removable"), "1\n")
        zones = ("Movable" if i >= online // 2 else "Normal") if on else "Normal Movable"
        put(os.path.join(d, "valid_zones"), zones + "\n")
        put(os.path.join(d, "phys_index"), "%08x\n" % i)
        os.symlink("../../node/node0", os.path.join(d, "node0"))


if __name__ == "__main__":
    main()
