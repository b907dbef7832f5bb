/* SPDX-License-Identifier: MIT */
/*
 * The words operators already use, as util-linux lsmem/chmem and sysfs write
 * them, parsed in one place for every surface that takes them (memgrantctl,
 * the local API and the wire, the configuration, memgrant-host).
 *
 * Zones: "Movable", "Normal" in any case ("kernel" is Normal, as in sysfs
 * online_kernel); "auto" where the caller allows it.  Printed lowercase.
 * The kernel's zone words (valid_zones) in the kernel's spelling.
 *
 * memmap_on_memory: on/off, 1/0, true/false, always/never in any
 * case; "auto" where the caller allows it.  Printed as on/off/auto.
 *
 * Block lists as chmem's man page writes them: "16,17,20-23".
 * Physical address ranges as chmem takes them: "0x80000000-0x8fffffff",
 * start and end + 1 on block boundaries.
 *
 * Sizes (lib/size.h parses them, "1.5G" included): words_size_in_blocks()
 * checks one is a whole number of blocks and otherwise names the nearest
 * valid sizes; words_size_exact() prints a size without rounding ("1.375G").
 *
 * Every parser returns 0 or -EINVAL/-ERANGE; those taking WHY write a message
 * that quotes the input and says what was expected.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotplug/block.h"

/* Into the one zone type (hotplug/block.h); names print as mem_zone_words[]. */
int words_zone_parse(const char *s, bool allow_auto, enum mem_zone *out);
const char *words_zone_name(enum mem_zone z); /* "auto", "movable", "normal" */

/* The kernel's spellings (valid_zones, A9; lsmem): "DMA", "DMA32", "Normal",
 * "Highmem", "Movable", "Device", "none"; "Unknown" for MEM_ZONE_UNKNOWN,
 * "auto" for MEM_ZONE_AUTO.  The parser takes N characters of S in any case
 * and returns MEM_ZONE_UNKNOWN for a word it does not know (never AUTO). */
const char *words_zone_kernel_name(enum mem_zone z);
enum mem_zone words_zone_kernel_parse(const char *s, size_t n);

#define WORDS_MEMMAP_AUTO (-1)
#define WORDS_MEMMAP_OFF 0
#define WORDS_MEMMAP_ON 1
/* the accepted spellings, for messages */
#define WORDS_MEMMAP_WORDS "on or off (also 1/0, true/false, always/never)"

/* *OUT: WORDS_MEMMAP_ON, _OFF, or _AUTO (only with ALLOW_AUTO). */
int words_memmap_parse(const char *s, bool allow_auto, int *out);
const char *words_memmap_name(int memmap); /* "on", "off", "auto" */

/* "16,17,20-23" into a malloc'd array of at most MAX_IDS ids (*IDS is
 * appended to; the caller frees it on every path). */
int words_block_list(const char *s, size_t max_ids, uint64_t **ids, size_t *n, char *why, size_t len);

/* The other way: "16-23,25,27-28" for N ids in the order given; a list that
 * does not fit LEN ends in "..." rather than half a number. */
void words_block_list_format(const uint64_t *ids, size_t n, char *buf, size_t len);

/* Whether S is written as an address range ("0x...-0x..."), not blocks. */
bool words_is_addr_range(const char *s);
/* "0xSTART-0xEND" into the blocks FIRST..LAST of BLOCK_SIZE bytes. */
int words_addr_range(const char *s, uint64_t block_size, uint64_t *first, uint64_t *last, char *why,
		     size_t len);

/* 0 when SIZE is a non-zero whole number of BLOCK_SIZE blocks; otherwise
 * -EINVAL and WHY names SIZE (as given in SHOWN, or printed) and the nearest
 * valid sizes. */
int words_size_in_blocks(uint64_t size, const char *shown, uint64_t block_size, char *why, size_t len);

/* BYTES in the largest unit that shows it exactly ("1.375G", "1408M", "100B"). */
void words_size_exact(uint64_t bytes, char *buf, size_t len);
