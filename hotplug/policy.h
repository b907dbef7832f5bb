/* SPDX-License-Identifier: MIT */
/*
 * The policy: for the blocks of one grant, whether the memmap goes into the
 * block (memmap_on_memory, kernel.md C8, P6, P7) and which zone each block is
 * onlined into (W5), each decision with a one-line reason for the status and
 * the log.  Pure logic over a struct mem_table and MemAvailable; the only
 * I/O is policy_read_meminfo().
 *
 * Precedence, highest first:
 *   1. impossibility: memmap on memory unsupported -> off; no firmware
 *      interface (C0) -> memmap "keep" (-1, the kernel chose at add time);
 *      a block whose valid_zones lacks Movable -> normal;
 *   2. the grant's explicit request (memmap true/false, zone movable/normal);
 *   3. the settings when not auto (memmap always/never, zone movable/normal);
 *   4. auto:
 *      memmap on when MemAvailable, less the memmap the grant would take from
 *      memory already online (blocks * block_size / 64, P6), falls below the
 *      reserve (or MemAvailable is unknown); otherwise off: memory is
 *      plentiful, or the grant asks for contiguous memory (a hint that loses
 *      against low memory);
 *      zone decided block by block in order: movable while
 *      MOVABLE * 100 <= movable_ratio * (NORMAL + DMA) after adding the block
 *      (exactly at the ratio still counts as within), else normal, so a big
 *      grant can be split.  MOVABLE and NORMAL start from the zones of the
 *      online blocks in the table.
 *
 * Memmap support: memory_hotplug.memmap_on_memory (P1, t->memmap_param) "Y"
 * or "force" -> supported, "N" -> not; when the parameter is absent, any
 * firmware block reading memmap_on_memory=1 shows support (C2 boot default).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotplug/block.h"

#define POLICY_DEFAULT_RESERVE (256ULL << 20)
#define POLICY_DEFAULT_MOVABLE_RATIO 301 /* the kernel's auto_movable_ratio default (P3) */
#define POLICY_MEM_AVAILABLE_UNKNOWN UINT64_MAX

enum policy_memmap {
	POLICY_MEMMAP_AUTO,
	POLICY_MEMMAP_ALWAYS,
	POLICY_MEMMAP_NEVER,
};


/* The agent's settings (config "policy:" section). */
struct policy_settings {
	enum policy_memmap memmap;
	uint64_t reserve;          /* bytes of MemAvailable to keep */
	enum mem_zone zone;
	unsigned movable_ratio;    /* percent of MOVABLE to NORMAL+DMA auto allows */
};

/* What the grant itself asks for. */
struct policy_request {
	int memmap;                /* -1 auto (policy decides), 0 off, 1 on */
	enum mem_zone zone;
	bool contiguous;           /* huge pages / large contiguous allocations wanted */
	/* the table's policy_zone_bytes() when the caller keeps them as rows
	 * change (the live table's counts): no walk of the table */
	bool zone_bytes_known;
	uint64_t movable_bytes, normal_bytes;
};

struct policy_block {
	uint64_t id;
	int memmap;                /* 0/1; -1 keep (no firmware interface, C0) */
	enum online_type online;   /* ONLINE_MOVABLE or ONLINE_KERNEL */
	char zone_reason[256];     /* "zone=movable: ..." */
};

struct policy_decision {
	int memmap;                /* for every block: 0/1, -1 keep */
	char memmap_reason[256];   /* "memmap_on_memory=on: ..." */
	/* ONLINE_MOVABLE or ONLINE_KERNEL when every block agrees; ONLINE_DEFAULT
	 * when the grant is split: then blocks[i].online is what counts (always
	 * use the per-block value to online). */
	enum online_type online;
	char zone_reason[256];     /* the grant's zone summary */
	size_t n_movable, n_normal;
	size_t n;
	struct policy_block *blocks; /* in the order of the ids passed in */
};

/*
 * Decides memmap and zone for blocks IDS (in the order they will be
 * onlined) of table T.  MEM_AVAILABLE in bytes, or
 * POLICY_MEM_AVAILABLE_UNKNOWN.  REQ may be NULL (all auto).
 * 0, -EINVAL (NULL settings/table/out, zero block size, no ids) or -ENOMEM.
 */
int policy_decide(const struct policy_settings *s, const struct policy_request *req,
		  const struct mem_table *t, uint64_t mem_available,
		  const uint64_t *ids, size_t n_ids, struct policy_decision **out);

void policy_decision_free(struct policy_decision *d);
static inline void policy_decision_freep(struct policy_decision **d) { policy_decision_free(*d); }
#define _cleanup_policy_decision_ __attribute__((cleanup(policy_decision_freep)))

/* 1 supported, 0 unsupported, -1 not choosable (no firmware, C0); WHY
 * (may be NULL) gets a short explanation. */
int policy_memmap_supported(const struct mem_table *t, char *why, size_t len);

/* Bytes online in ZONE_MOVABLE and in the kernel zones, from valid_zones
 * of the online blocks (mem_block_ratio_side()): one walk of the table. */
void policy_zone_bytes(const struct mem_table *t, uint64_t *movable, uint64_t *normal);

/* Reads MemTotal and MemAvailable (kB in the file) from ROOT/proc/meminfo
 * (ROOT NULL or "" means "/") into bytes; either pointer may be NULL.
 * 0; -errno of open/read (-ENOENT when missing); -ENODATA when either key
 * is absent; -EINVAL for a malformed value; -ERANGE on overflow. */
int policy_read_meminfo(const char *root, uint64_t *mem_total, uint64_t *mem_available);

/* Config words: "auto" "always" "never" / "auto" "movable" "normal".
 * parse: 0 or -EINVAL. */
const char *policy_memmap_name(enum policy_memmap m);
int policy_memmap_parse(const char *s, enum policy_memmap *out);
