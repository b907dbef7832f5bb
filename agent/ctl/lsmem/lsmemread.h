/* SPDX-License-Identifier: MIT */
/*
 * lsmemread: the direct form of `memgrantctl lsmem` (--sysroot): reads a
 * sysfs-shaped tree into a struct mem_table for lsmem_print(), reading only
 * the attributes the requested output needs and nothing else.
 *
 * Why not hotplug discovery: discovery reads every attribute of every block
 * (state, valid_zones, phys_index, removable, the node link) because the
 * agent needs all of them; lsmem with its default columns needs two per
 * block.  At 65,536 blocks the difference is most of lsmem's time, all of
 * it in the kernel.
 *
 * What is read, as util-linux lsmem reads it (sys-utils/lsmem.c):
 *   sys/devices/system/memory/block_size_bytes   always
 *   sys/firmware/memory/                         when it exists, the rows are its
 *       memoryN/config                           entries; config always,
 *       memoryN/memmap_on_memory                 only for need.memmap; a block
 *                                                whose config is not 1 is not
 *                                                read further (no devices entry)
 *   sys/devices/system/memory/memoryN/           otherwise the rows
 *       state                                    always
 *       removable                                need.removable
 *       valid_zones                              need.zones
 *       nodeX link                               need.node: one faccessat of the
 *                                                previous block's node name, a
 *                                                getdents of the dir otherwise
 *   sys/module/memory_hotplug/parameters/memmap_on_memory   need.memmap_param
 *
 * How: one directory fd per memory directory, then per attribute one
 * openat(dirfd, "memoryN/attr"), one read(2) and one close(2): no stat, no
 * stdio, no path built from the root.  The directory itself is listed with
 * getdents64 into one large buffer.
 *
 * Values lsmem would not parse are taken as lsmem takes them (state words
 * other than online/offline/going-offline are "?", a removable that is not a
 * number is "no"); a block whose directory vanishes while it is read (a
 * concurrent config=0, C11) keeps its row with what could be read, as in
 * lsmem.
 *
 * Returns 0 and a new table (sorted by id), or -errno with ERR naming the
 * file: -ENOENT without block_size_bytes, -EINVAL when it is not hex.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hotplug/block.h"

struct lsmem_need {
	bool removable;
	bool node;
	bool zones;
	bool memmap;       /* firmware memmap_on_memory per block */
	bool memmap_param; /* the summary's "Memmap on memory parameter:" */
};

int lsmem_read_tree(const char *root, const struct lsmem_need *need, struct mem_table **out,
		    char *err, size_t errlen);
