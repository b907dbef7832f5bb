/* SPDX-License-Identifier: MIT */
/*
 * Discovery: reads a sysfs-shaped tree through struct hp_path and merges
 * sys/devices/system/memory (what the kernel has added) with
 * sys/firmware/memory (what the hypervisor could give, s390 6.19) into a
 * struct mem_table (block.h).
 *
 * What is read:
 *   sys/devices/system/memory/block_size_bytes   A1, hex, required
 *   sys/devices/system/memory/auto_online_blocks A2, "" when absent
 *   sys/devices/system/memory/memoryN/           state (A7), valid_zones (A9),
 *       phys_index (A4, must equal N), removable (A5), nodeX link
 *   sys/firmware/memory/memoryN/                 config, memmap_on_memory (C1, C3);
 *       lazily only the name of an entry without a devices block (C14)
 *   sys/module/memory_hotplug/parameters/memmap_on_memory  P1, "" when absent
 *
 * Merge rules:
 * - `online` is not read: reading it blocks while the block is being
 *   onlined or offlined (A8); `state` says the same without waiting.  Only a
 *   block without a `state` file falls back to `online`; a memoryN directory
 *   with neither is not a block.  An unknown state word is MEM_STATE_UNKNOWN.
 * - With sys/firmware/memory (has_firmware): a block's `configured` is its
 *   firmware `config` value (what lsmem shows); a firmware-only block is
 *   deconfigured standby: state offline, zones "", node/removable -1 (C14).
 *   A devices block without a firmware entry is configured, memmap -1.
 * - Without sys/firmware/memory (C0: x86, s390 before 6.19, kdump): every
 *   present block is configured, memmap_on_memory -1.
 * - A block directory that vanishes while we read it (a concurrent
 *   config=0, C11) is taken as gone, not as an error.
 *
 * Errors (negative errno; ERR, when not NULL, gets one line naming the file
 * and the problem):
 *   -ENOENT  block_size_bytes missing (no memory hotplug here, or wrong root)
 *   -EINVAL  malformed block_size_bytes, config, memmap_on_memory, removable,
 *            phys_index, or a block id whose address overflows 64 bits
 *   other    from open/read
 * Cost: one readdir per directory (the two memory directories and each block
 * directory, for the node link) and one openat per attribute, relative to
 * the already open parent directory; with LAZY_MEMMAP none for a standby
 * block (on a big machine most of them), whose name alone says it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hotplug/backend.h"
#include "hotplug/block.h"
#include "hotplug/sysfs/path.h"

/* Whole table; *out is sorted by id and owned by the caller.
 * LAZY_MEMMAP: a firmware entry without a devices block is taken as what
 * C14 says it is (deconfigured) without opening its files, its
 * memmap_on_memory left MEM_MEMMAP_UNREAD; only where the module parameter
 * (P1) says whether memmap on memory is supported, else the blocks' own
 * values say it (C2) and every entry is read. */
int hp_discover_table(struct hp_path *p, bool lazy_memmap, struct mem_table **out, char *err, size_t errlen);

/* One block, merged the same way; -ENOENT when neither memoryN directory
 * exists.  Does not need block_size_bytes. */
int hp_discover_block(struct hp_path *p, uint64_t id, struct mem_block *out,
		      char *err, size_t errlen);

/* KNOWN->id read again after a write, in the files the write changes
 * (enum hp_reread in backend.h), the rest kept from KNOWN; REMOVABLE is the
 * kernel's removable (A5: the same for every block), -1 when not known yet
 * (then the file is read); NUMA: the kernel has sys/devices/system/node
 * (CONFIG_NUMA), without which no block has a nodeX link (s390) and none is
 * looked for.  0, -ESTALE when the files show what the write does not
 * leave, or -errno. */
int hp_reread_block(struct hp_path *p, enum hp_reread what, const struct mem_block *known, int removable,
		    bool numa, struct mem_block *out);

/* Parses a memoryN directory name: 0 and *id, -EINVAL (also for
 * "memory05": the kernel never pads, A3), or -ERANGE for an N over
 * MEM_BLOCK_ID_MAX (the kernel's device ids are 32 bits). */
int hp_parse_block_name(const char *name, uint64_t *id);
