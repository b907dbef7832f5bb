/* SPDX-License-Identifier: MIT */
/*
 * The planner: turns a grant or a revocation into an ordered list of block
 * ids, or rejects it with a reason.  Pure logic over a struct mem_table and
 * the caller's list of blocks this agent owns; no I/O, no state.
 *
 * Grant candidates (enum plan_source):
 *   PLAN_SOURCE_STANDBY  blocks with a firmware entry and no devices entry
 *                        (mem_block_is_standby(), kernel.md C14);
 *   PLAN_SOURCE_OFFLINE  for hosts without sys/firmware/memory (C0, e.g.
 *                        x86 with hot-plugged DIMMs): blocks the kernel has
 *                        (configured) whose state is offline;
 *   PLAN_SOURCE_AUTO     STANDBY when t->has_firmware, else OFFLINE.
 * In every mode a block that appears in the ownership list is not a
 * candidate: it already belongs to a grant.
 *
 * Revocation candidates come only from the ownership list, in the order the
 * executor must try them: movable before normal, then newest (highest seq)
 * first, ties by descending id.
 *
 * Results: every call allocates *out (except on -ENOMEM, where *out may be
 * NULL) and returns 0 or the negative errno that is also stored in
 * (*out)->err; (*out)->reason is one human line either way.  A rejected
 * plan has no blocks.  Error codes:
 *   -EINVAL  size 0 or not a multiple of the block size, duplicate ids,
 *            malformed or unaligned range, zero block size in the table
 *   -ERANGE  a range or size whose arithmetic overflows 64 bits
 *   -ENOENT  a block id that is not in the table; an unknown grant id
 *   -EBUSY   a block that is not a candidate (configured already, online,
 *            or owned by a grant)
 *   -ENOSPC  more requested than there is (standby for grants, owned for
 *            revocations)
 *   -EPERM   revocation of a block this agent does not own
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotplug/block.h"


/* One block this agent onlined, as the journal remembers it. */
struct owned_block {
	uint64_t id;
	char grant_id[64];
	uint64_t seq;          /* order onlined: higher is newer */
	enum mem_zone zone;
};

enum plan_source {
	PLAN_SOURCE_AUTO,
	PLAN_SOURCE_STANDBY,
	PLAN_SOURCE_OFFLINE,
};

enum grant_by {
	GRANT_BY_SIZE,
	GRANT_BY_BLOCKS,
	GRANT_BY_RANGES,
};

struct grant_request {
	enum grant_by by;
	uint64_t size;               /* GRANT_BY_SIZE: bytes */
	const uint64_t *ids;         /* GRANT_BY_BLOCKS */
	size_t n_ids;
	const char *const *ranges;   /* GRANT_BY_RANGES: "0x80000000-0x87ffffff", inclusive end */
	size_t n_ranges;
	enum plan_source source;     /* which blocks count as candidates */
};

enum revoke_by {
	REVOKE_BY_SIZE,
	REVOKE_BY_GRANT,
	REVOKE_BY_BLOCKS,
};

struct revoke_request {
	enum revoke_by by;
	uint64_t size;               /* REVOKE_BY_SIZE: bytes */
	const char *grant_id;        /* REVOKE_BY_GRANT */
	const uint64_t *ids;         /* REVOKE_BY_BLOCKS */
	size_t n_ids;
};

struct plan {
	int err;                 /* 0, or the negative errno of the rejection */
	char reason[256];        /* one line: what was chosen, or why not */
	uint64_t block_size;
	uint64_t want_bytes;     /* bytes to add or give back (0 when rejected) */
	size_t n;
	uint64_t *blocks;        /* ids in the order to process them */
};

/*
 * Grant: ordered list of candidate block ids.  By size the lowest ids are
 * taken, preferring the lowest contiguous run that is long enough; by
 * blocks or ranges the result is sorted ascending.  want_bytes equals
 * n * block_size.  OWNED (may be NULL when N_OWNED is 0) excludes blocks
 * that already belong to a grant.
 */
int plan_grant(const struct mem_table *t, const struct grant_request *req,
	       const struct owned_block *owned, size_t n_owned, struct plan **out);

/*
 * Revocation: ordered candidates from OWNED.  By size the whole ordered
 * candidate list is returned and want_bytes is the size asked for: the
 * executor takes blocks in order, skips those that stay busy, and stops
 * when want_bytes are given back.  By grant or blocks every listed block
 * must go and want_bytes is n * block_size.
 */
int plan_revoke(const struct mem_table *t, const struct revoke_request *req,
		const struct owned_block *owned, size_t n_owned, struct plan **out);

void plan_free(struct plan *p);
static inline void plan_freep(struct plan **p) { plan_free(*p); }
#define _cleanup_plan_ __attribute__((cleanup(plan_freep)))

/* Whether block B is a grant candidate under SOURCE (ignoring ownership). */
bool plan_block_is_candidate(const struct mem_table *t, const struct mem_block *b,
			     enum plan_source source);

/* Bytes of grant candidates not owned by anyone, counted up to AT_LEAST
 * bytes (UINT64_MAX: all of them): the walk of the table stops there, so
 * that asking whether a grant fits costs the rows up to its blocks, not
 * the machine. */
uint64_t plan_available_bytes(const struct mem_table *t, enum plan_source source,
			      const struct owned_block *owned, size_t n_owned, uint64_t at_least);

/*
 * Parses "0xSTART-0xEND" (inclusive end, hex, the 0x optional) into the
 * first and last block id.  Both ends must lie on block boundaries.
 * 0, -EINVAL (malformed, unaligned, end before start) or -ERANGE
 * (a number or end+1 that does not fit 64 bits); ERR gets the reason.
 */
int plan_parse_range(const char *s, uint64_t block_size, uint64_t *first, uint64_t *last,
		     char *err, size_t errlen);

/* "0x80000000-0x87ffffff" for block ID (the form plan_parse_range takes). */
void plan_format_range(uint64_t block_size, uint64_t id, char *buf, size_t len);
