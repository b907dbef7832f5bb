/* SPDX-License-Identifier: MIT */
/*
 * The block model: one row per memory block, merged from
 * sys/devices/system/memory (what the kernel has added) and, on s390 with
 * Linux 6.19, sys/firmware/memory (what the hypervisor could give).
 *
 * A block that has a firmware entry but no devices entry is "standby":
 * deconfigured, state offline (kernel.md C14).  On hosts without
 * sys/firmware/memory every present block counts as configured (C0).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* packed: one byte in a row (struct mem_block) */
enum __attribute__((packed)) mem_state {
	MEM_STATE_OFFLINE,
	MEM_STATE_ONLINE,
	MEM_STATE_GOING_OFFLINE,
	MEM_STATE_UNKNOWN,
};

/* How to online a block: the words written to memoryN/state (W1, W5). */
enum online_type {
	ONLINE_DEFAULT, /* "online": the kernel's online policy picks */
	ONLINE_KERNEL,  /* "online_kernel" */
	ONLINE_MOVABLE, /* "online_movable" */
};

/* A zone: the one zone type of memgrant, for every surface.
 * Asked for (auto/movable/normal: a grant, the policy, the configuration;
 * "normal" is online_kernel: Normal or DMA, D3) or read from the kernel
 * (valid_zones, A9: every zone it names, "none" for a block spanning zones;
 * lsmem, the sim).  The asked words are mem_zone_words[]; the kernel's
 * spellings are words_zone_kernel_name()/_parse() (hotplug/words.h). */
enum mem_zone {
	MEM_ZONE_AUTO,    /* asked: the kernel's default; never read from the kernel */
	MEM_ZONE_MOVABLE,
	MEM_ZONE_NORMAL,
	MEM_ZONE_DMA,
	MEM_ZONE_DMA32,
	MEM_ZONE_HIGHMEM,
	MEM_ZONE_DEVICE,
	MEM_ZONE_NONE,    /* the kernel's "none": spans zones; the sim's offline block */
	MEM_ZONE_UNKNOWN, /* a word the kernel wrote that memgrant does not know */
	MEM_ZONE_COUNT,
};

/* memory/auto_online_blocks (kernel.md A2). */
enum mem_auto_online {
	MEM_AUTO_ONLINE_OFFLINE,
	MEM_AUTO_ONLINE_ONLINE,
	MEM_AUTO_ONLINE_KERNEL,
	MEM_AUTO_ONLINE_MOVABLE,
};

/* The words, defined once: NULL-terminated, indexed by the enums. */
extern const char *const mem_zone_words[];        /* "auto", "movable", "normal": the zones one asks for */
extern const char *const mem_auto_online_words[]; /* "offline", "online", "online_kernel", "online_movable" */

/* valid_zones as read (A9), typed: the zones in the kernel's order, 4 bits
 * each (enum mem_zone), the first in the lowest bits, at most MEM_ZONES_MAX;
 * 0 when none were read (deconfigured).  A row keeps these 4 bytes, not the
 * text: the live table holds one row per block of the machine. */
typedef uint32_t mem_zones;
#define MEM_ZONES_MAX 8
#define MEM_ZONES_TEXT_MAX 72 /* 8 words of at most 7 letters, spaces, NUL */
#define MEM_NODE_MAX INT16_MAX /* a row's node; Linux has at most 1024 (NODES_SHIFT 10) */

/* A block id is the kernel's device id of memoryN, 32 bits (struct
 * device's id); a name with a larger number is not a memory block. */
#define MEM_BLOCK_ID_MAX UINT32_MAX

/* One block: 16 bytes (the live table's memory at ready is this per block). */
struct mem_block {
	uint32_t id;             /* memoryN: start address / block size, at most MEM_BLOCK_ID_MAX */
	mem_zones zones;         /* valid_zones ("Movable", "Normal Movable"), 0 when deconfigured */
	int16_t node;            /* NUMA node, -1 unknown */
	enum mem_state state;    /* MEM_STATE_OFFLINE when deconfigured */
	bool in_firmware;        /* has sys/firmware/memory/memoryN */
	bool configured;         /* has sys/devices/system/memory/memoryN */
	int8_t memmap_on_memory; /* 0/1, -1 when there is no firmware entry, MEM_MEMMAP_UNREAD */
	int8_t removable;        /* 0/1, -1 unknown */
};

/* memmap_on_memory of a deconfigured block whose firmware entry was not
 * opened (hp_discover_lazy()): read it with hp_read_memmap() before use. */
#define MEM_MEMMAP_UNREAD ((int8_t)-2)

/* The zones of a valid_zones text (words apart by blanks; a word memgrant
 * does not know is MEM_ZONE_UNKNOWN; words past MEM_ZONES_MAX dropped). */
mem_zones mem_zones_parse(const char *text);
/* The text again, the kernel's spellings apart by one space ("" for 0);
 * BUF of at least MEM_ZONES_TEXT_MAX bytes.  Returns BUF. */
char *mem_zones_format(mem_zones z, char *buf, size_t len);
#define MEM_ZONES_TEXT(z) mem_zones_format((z), (char[MEM_ZONES_TEXT_MAX]){ 0 }, MEM_ZONES_TEXT_MAX)
static inline enum mem_zone mem_zones_first(mem_zones z)
{
	return (enum mem_zone)(z & 0xf);
}
static inline bool mem_zones_has(mem_zones z, enum mem_zone w)
{
	for (; z; z >>= 4)
		if ((enum mem_zone)(z & 0xf) == w)
			return true;
	return false;
}
/* Exactly one zone, W. */
static inline bool mem_zones_is(mem_zones z, enum mem_zone w)
{
	return z == (mem_zones)w;
}

struct mem_table {
	uint64_t block_size;       /* block_size_bytes (A1) */
	bool has_firmware;         /* sys/firmware/memory exists (C0) */
	char auto_online[24];      /* auto_online_blocks (A2), "" when absent */
	char memmap_param[8];      /* module parameter memmap_on_memory (P1), "" when absent */
	/* Boot memory as the backend knows it (not guessed from memmap or
	 * order): blocks below boot_end were memory at boot, the rest standby.
	 * The sim knows its boot size; boot_known false: the backend cannot
	 * tell (the caller falls back on its own rule). */
	bool boot_known;
	uint64_t boot_end;
	size_t n;
	struct mem_block *blocks;  /* sorted by id, ids unique */
};

const char *mem_state_name(enum mem_state s);
int mem_state_parse(const char *s, enum mem_state *out);
const char *online_type_word(enum online_type t); /* "online", "online_kernel", "online_movable" */
const char *mem_zone_name(enum mem_zone z);        /* "auto", "movable", "normal" */
int mem_zone_parse(const char *s, enum mem_zone *out);
const char *mem_auto_online_name(enum mem_auto_online a);
int mem_auto_online_parse(const char *s, enum mem_auto_online *out);
/* The zone an online block sits in: movable when valid_zones starts with "Movable" (A9). */
enum mem_zone mem_block_zone(const struct mem_block *b);
/* How a block is onlined into Z (auto: the kernel's default). */
enum online_type mem_zone_online_type(enum mem_zone z);

struct mem_table *mem_table_new(uint64_t block_size);
void mem_table_free(struct mem_table *t);
static inline void mem_table_freep(struct mem_table **t) { mem_table_free(*t); }
#define _cleanup_mem_table_ __attribute__((cleanup(mem_table_freep)))

/* Appends a zeroed block with this id (ids must be added in any order; call mem_table_sort after). */
struct mem_block *mem_table_add(struct mem_table *t, uint64_t id);
void mem_table_sort(struct mem_table *t);
/* Binary search; NULL when the id is not in the table. */
struct mem_block *mem_table_find(const struct mem_table *t, uint64_t id);
/* The index of the first block whose id is at least ID (t->n when none). */
size_t mem_table_lower_bound(const struct mem_table *t, uint64_t id);
/* The same over the first N blocks of a sorted array (a table being built). */
struct mem_block *mem_blocks_search(struct mem_block *blocks, size_t n, uint64_t id);

static inline uint64_t mem_block_start(const struct mem_table *t, const struct mem_block *b)
{
	return b->id * t->block_size;
}

/* Standby: the hypervisor can give it, the kernel does not have it yet. */
static inline bool mem_block_is_standby(const struct mem_block *b)
{
	return b->in_firmware && !b->configured;
}

/* Where an online block counts in the MOVABLE:NORMAL ratio: MEM_ZONE_MOVABLE,
 * MEM_ZONE_NORMAL (every kernel zone), or MEM_ZONE_UNKNOWN (not online, or
 * a zone memgrant does not know).  An online block's valid_zones is its one
 * zone (A9); x86 has DMA32 below 4 GiB and its first block spans DMA and
 * DMA32 ("none"): boot memory in kernel zones, as the kernel's own
 * auto-movable policy counts it. */
static inline enum mem_zone mem_block_ratio_side(const struct mem_block *b)
{
	if (!b->configured || b->state != MEM_STATE_ONLINE)
		return MEM_ZONE_UNKNOWN;
	if (mem_zones_is(b->zones, MEM_ZONE_MOVABLE))
		return MEM_ZONE_MOVABLE;
	if (mem_zones_is(b->zones, MEM_ZONE_NORMAL) || mem_zones_is(b->zones, MEM_ZONE_DMA) ||
	    mem_zones_is(b->zones, MEM_ZONE_DMA32) || mem_zones_is(b->zones, MEM_ZONE_NONE))
		return MEM_ZONE_NORMAL;
	return MEM_ZONE_UNKNOWN;
}
