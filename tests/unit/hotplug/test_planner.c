/* SPDX-License-Identifier: MIT */
/*
 * Planner: grants and revocations become ordered block lists or are
 * rejected with a reason and an errno (issue 3, "Grants and revocations").
 * The machine is the seed's (kernel.md, acceptance data): 2G online in
 * blocks 0-15, 2G standby in blocks 16-31, 128M blocks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hotplug/planner.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define BS (128 * MiB)

/* Seed machine; on C0 hosts (no firmware) 16-31 are present but offline. */
static struct mem_table *seed_table(bool firmware)
{
	struct mem_table *t = mem_table_new(BS);

	assert_non_null(t);
	t->has_firmware = firmware;
	for (uint64_t id = 0; id < 32; id++) {
		struct mem_block *b = mem_table_add(t, id);

		assert_non_null(b);
		b->in_firmware = firmware;
		b->configured = id < 16 || !firmware;
		b->memmap_on_memory = firmware ? (id >= 16) : -1;
		b->state = id < 16 ? MEM_STATE_ONLINE : MEM_STATE_OFFLINE;
		b->zones = mem_zones_parse(id < 16 ? "DMA" : (firmware ? "" : "Normal Movable"));
	}
	mem_table_sort(t);
	return t;
}

static void assert_blocks(const struct plan *p, const uint64_t *want, size_t n)
{
	assert_int_equal(p->n, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(p->blocks[i], want[i]);
}

static int grant_size(const struct mem_table *t, uint64_t size, const struct owned_block *o,
		      size_t no, struct plan **p)
{
	struct grant_request req = { .by = GRANT_BY_SIZE, .size = size };

	return plan_grant(t, &req, o, no, p);
}

static int grant_ids(const struct mem_table *t, const uint64_t *ids, size_t n, struct plan **p)
{
	struct grant_request req = { .by = GRANT_BY_BLOCKS, .ids = ids, .n_ids = n };

	return plan_grant(t, &req, NULL, 0, p);
}

static int grant_ranges(const struct mem_table *t, const char *const *r, size_t n, struct plan **p)
{
	struct grant_request req = { .by = GRANT_BY_RANGES, .ranges = r, .n_ranges = n };

	return plan_grant(t, &req, NULL, 0, p);
}

/* --- grants by size ----------------------------------------------------- */

static void grant_size_lowest_standby_first(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t want[] = { 16, 17, 18, 19, 20, 21, 22, 23 };

	assert_int_equal(grant_size(t, 1 * GiB, NULL, 0, &p), 0);
	assert_int_equal(p->err, 0);
	assert_blocks(p, want, 8);
	assert_int_equal(p->want_bytes, 1 * GiB);
	assert_int_equal(p->block_size, BS);
	assert_string_equal(p->reason, "1G: 8 standby blocks 16-23");
}

static void grant_size_all_standby(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;

	assert_int_equal(grant_size(t, 2 * GiB, NULL, 0, &p), 0);
	assert_int_equal(p->n, 16);
	assert_int_equal(p->blocks[0], 16);
	assert_int_equal(p->blocks[15], 31);
}

static void grant_size_zero_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;

	assert_int_equal(grant_size(t, 0, NULL, 0, &p), -EINVAL);
	assert_int_equal(p->err, -EINVAL);
	assert_int_equal(p->n, 0);
	assert_null(p->blocks);
	assert_non_null(strstr(p->reason, "size 0"));
}

static void grant_size_not_multiple_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;

	assert_int_equal(grant_size(t, 200 * MiB, NULL, 0, &p), -EINVAL);
	assert_string_equal(p->reason, "size 200M is not a multiple of the block size 128M: "
					    "the nearest valid sizes are 128M and 256M");
	assert_int_equal(p->n, 0);
}

static void grant_size_more_than_standby_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;

	assert_int_equal(grant_size(t, 3 * GiB, NULL, 0, &p), -ENOSPC);
	assert_string_equal(p->reason, "3G requested, 2G standby available");
	assert_int_equal(p->n, 0);
}

static void grant_size_prefers_contiguous_run(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	_cleanup_plan_ struct plan *r = NULL;
	const uint64_t run[] = { 18, 19, 20, 21 };

	/* Block 17 was configured by someone: standby is 16, 18-31. */
	mem_table_find(t, 17)->configured = true;

	assert_int_equal(grant_size(t, 4 * BS, NULL, 0, &p), 0);
	assert_blocks(p, run, 4);

	/* 14 blocks: 18-31 is exactly long enough. */
	assert_int_equal(grant_size(t, 14 * BS, NULL, 0, &q), 0);
	assert_int_equal(q->blocks[0], 18);
	assert_int_equal(q->blocks[13], 31);

	/* 15 blocks: no run is long enough, lowest ids. */
	assert_int_equal(grant_size(t, 15 * BS, NULL, 0, &r), 0);
	assert_int_equal(r->blocks[0], 16);
	assert_int_equal(r->blocks[1], 18);
	assert_int_equal(r->n, 15);
}

static void grant_size_skips_owned_blocks(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	struct owned_block o[] = { { .id = 16, .grant_id = "g-1", .seq = 1 } };

	assert_int_equal(grant_size(t, BS, o, 1, &p), 0);
	assert_int_equal(p->n, 1);
	assert_int_equal(p->blocks[0], 17);

	assert_int_equal(grant_size(t, 2 * GiB, o, 1, &q), -ENOSPC);
	assert_string_equal(q->reason, "2G requested, 1.9G standby available");
	assert_int_equal(plan_available_bytes(t, PLAN_SOURCE_AUTO, o, 1, UINT64_MAX), 15 * BS);
	/* counted up to what is asked: the walk stops there */
	assert_int_equal(plan_available_bytes(t, PLAN_SOURCE_AUTO, o, 1, 2 * BS), 2 * BS);
	assert_int_equal(plan_available_bytes(t, PLAN_SOURCE_AUTO, o, 1, 2 * BS - 1), 2 * BS);
	assert_int_equal(plan_available_bytes(t, PLAN_SOURCE_AUTO, o, 1, 40 * BS), 15 * BS);
}

/* --- grants by block ids -------------------------------------------------- */

static void grant_blocks_sorted(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t ids[] = { 20, 16 };
	const uint64_t want[] = { 16, 20 };

	assert_int_equal(grant_ids(t, ids, 2, &p), 0);
	assert_blocks(p, want, 2);
	assert_int_equal(p->want_bytes, 2 * BS);
	assert_string_equal(p->reason, "256M: 2 standby blocks 16,20");
}

static void grant_blocks_unknown_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t ids[] = { 16, 40 };

	assert_int_equal(grant_ids(t, ids, 2, &p), -ENOENT);
	assert_string_equal(p->reason, "block 40 does not exist");
	assert_int_equal(p->n, 0);
	assert_null(p->blocks);
}

/* C14: a configured block is not standby. */
static void grant_blocks_configured_rejected_C14(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t ids[] = { 5 };

	assert_int_equal(grant_ids(t, ids, 1, &p), -EBUSY);
	assert_string_equal(p->reason, "block 5 is not standby: configured already (online)");
}

static void grant_blocks_without_firmware_entry_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t ids[] = { 20 };

	/* C2: partial blocks at the edge of standby get no firmware entry. */
	mem_table_find(t, 20)->in_firmware = false;
	assert_int_equal(grant_ids(t, ids, 1, &p), -EBUSY);
	assert_non_null(strstr(p->reason, "block 20 is not standby"));
}

static void grant_blocks_duplicate_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t ids[] = { 17, 16, 17 };

	assert_int_equal(grant_ids(t, ids, 3, &p), -EINVAL);
	assert_string_equal(p->reason, "block 17 is given twice");
}

static void grant_blocks_empty_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;

	assert_int_equal(grant_ids(t, NULL, 0, &p), -EINVAL);
	assert_string_equal(p->reason, "no blocks given");
}

static void grant_blocks_owned_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	struct owned_block o[] = { { .id = 16, .grant_id = "g-1", .seq = 1 } };
	const uint64_t ids[] = { 16 };
	struct grant_request req = { .by = GRANT_BY_BLOCKS, .ids = ids, .n_ids = 1 };

	assert_int_equal(plan_grant(t, &req, o, 1, &p), -EBUSY);
	assert_string_equal(p->reason, "block 16 already belongs to grant g-1");
}

/* --- grants by ranges ------------------------------------------------------ */

static void grant_ranges_ok(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const char *r[] = { "0x90000000-0x9fffffff", "0x80000000-0x87ffffff" };
	const uint64_t want[] = { 16, 18, 19 };

	assert_int_equal(grant_ranges(t, r, 2, &p), 0);
	assert_blocks(p, want, 3);
}

static void grant_ranges_malformed_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	const char *bad[] = { "", "abc", "0x80000000", "0x80000000-", "-0x87ffffff",
			      "0x80000000-0x87ffffffz", "0x80000000 - 0x87ffffff", "0x-0x1" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		_cleanup_plan_ struct plan *p = NULL;
		const char *r[] = { bad[i] };

		assert_int_equal(grant_ranges(t, r, 1, &p), -EINVAL);
		assert_non_null(strstr(p->reason, "expected START-END"));
		assert_int_equal(p->n, 0);
	}
}

static void grant_ranges_unaligned_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	const char *r1[] = { "0x80000000-0x88000000" }; /* exclusive end given */
	const char *r2[] = { "0x80001000-0x87ffffff" };

	assert_int_equal(grant_ranges(t, r1, 1, &p), -EINVAL);
	assert_non_null(strstr(p->reason, "not aligned to the block size 128M"));
	assert_int_equal(grant_ranges(t, r2, 1, &q), -EINVAL);
	assert_non_null(strstr(q->reason, "not aligned"));
}

static void grant_ranges_reversed_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const char *r[] = { "0x88000000-0x87ffffff" };

	assert_int_equal(grant_ranges(t, r, 1, &p), -EINVAL);
	assert_non_null(strstr(p->reason, "end is below start"));
}

static void grant_ranges_overflow_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	const char *bad[] = { "0x10000000000000000-0x10007ffffffffffff",
			      "0x0-0x1ffffffffffffffff",
			      "0xfffffffff8000000-0xffffffffffffffff" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		_cleanup_plan_ struct plan *p = NULL;
		const char *r[] = { bad[i] };

		assert_int_equal(grant_ranges(t, r, 1, &p), -ERANGE);
		assert_int_equal(p->n, 0);
	}
}

static void grant_ranges_overlap_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const char *r[] = { "0x80000000-0x8fffffff", "0x88000000-0x8fffffff" };

	assert_int_equal(grant_ranges(t, r, 2, &p), -EINVAL);
	assert_string_equal(p->reason, "block 17 is given twice (ranges overlap)");
}

static void grant_ranges_beyond_table_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	/* A range up to 2^63: must stop at the first missing block, not loop. */
	const char *r1[] = { "0x80000000-0x7fffffffffffffff" };
	const char *r2[] = { "0x100000000-0x107ffffff" };

	assert_int_equal(grant_ranges(t, r1, 1, &p), -ENOENT);
	assert_non_null(strstr(p->reason, "block 32 does not exist"));
	assert_int_equal(grant_ranges(t, r2, 1, &q), -ENOENT);
}

static void grant_ranges_configured_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(true);
	_cleanup_plan_ struct plan *p = NULL;
	const char *r[] = { "0x78000000-0x87ffffff" }; /* blocks 15 and 16 */

	assert_int_equal(grant_ranges(t, r, 1, &p), -EBUSY);
	assert_string_equal(p->reason, "block 15 is not standby: configured already (online)");
}

static void range_parse_and_format(void **state)
{
	uint64_t first = 0, last = 0;
	char buf[64], err[128];

	assert_int_equal(plan_parse_range("80000000-FFFFFFFF", BS, &first, &last, err, sizeof(err)), 0);
	assert_int_equal(first, 16);
	assert_int_equal(last, 31);
	plan_format_range(BS, 16, buf, sizeof(buf));
	assert_string_equal(buf, "0x80000000-0x87ffffff");
	plan_format_range(BS, 0, buf, sizeof(buf));
	assert_string_equal(buf, "0x00000000-0x07ffffff");
	assert_int_equal(plan_parse_range("0x0-0x7ffffff", 0, &first, &last, err, sizeof(err)), -EINVAL);
}

/* --- C0: no sys/firmware/memory ------------------------------------------- */

static void grant_c0_offline_unowned_blocks_C0(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_table(false);
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	_cleanup_plan_ struct plan *s = NULL;
	_cleanup_plan_ struct plan *u = NULL;
	struct owned_block o[] = { { .id = 17, .grant_id = "g-1", .seq = 1 } };
	const uint64_t want[] = { 18, 19 };
	const uint64_t online[] = { 3 };
	struct grant_request standby = { .by = GRANT_BY_SIZE, .size = BS,
					 .source = PLAN_SOURCE_STANDBY };

	mem_table_find(t, 16)->state = MEM_STATE_ONLINE; /* onlined by someone else */
	assert_int_equal(grant_size(t, 2 * BS, o, 1, &p), 0);
	assert_blocks(p, want, 2);
	assert_non_null(strstr(p->reason, "offline blocks"));

	assert_int_equal(grant_size(t, 15 * BS, o, 1, &q), -ENOSPC);
	assert_string_equal(q->reason, "1.9G requested, 1.8G offline available");

	/* Forcing the s390 notion on such a host finds nothing. */
	assert_int_equal(plan_grant(t, &standby, NULL, 0, &s), -ENOSPC);

	assert_int_equal(grant_ids(t, online, 1, &u), -EBUSY);
	assert_string_equal(u->reason, "block 3 is not offline (online)");
}

/* --- revocations ------------------------------------------------------------ */

static const struct owned_block owned4[] = {
	{ .id = 16, .grant_id = "g-1", .seq = 1, .zone = MEM_ZONE_NORMAL },
	{ .id = 17, .grant_id = "g-1", .seq = 2, .zone = MEM_ZONE_MOVABLE },
	{ .id = 18, .grant_id = "g-2", .seq = 3, .zone = MEM_ZONE_MOVABLE },
	{ .id = 19, .grant_id = "g-2", .seq = 4, .zone = MEM_ZONE_NORMAL },
};

static struct mem_table *granted_table(void)
{
	struct mem_table *t = seed_table(true);

	for (uint64_t id = 16; id < 20; id++) {
		struct mem_block *b = mem_table_find(t, id);

		b->configured = true;
		b->state = MEM_STATE_ONLINE;
	}
	return t;
}

static void revoke_size_movable_then_newest(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	struct revoke_request req = { .by = REVOKE_BY_SIZE, .size = 2 * BS };
	const uint64_t want[] = { 18, 17, 19, 16 };

	assert_int_equal(plan_revoke(t, &req, owned4, 4, &p), 0);
	/* The whole candidate list: the executor skips busy blocks. */
	assert_blocks(p, want, 4);
	assert_int_equal(p->want_bytes, 2 * BS);
	assert_non_null(strstr(p->reason, "18,17,19,16"));
}

static void revoke_order_ties_by_id(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	const struct owned_block o[] = {
		{ .id = 16, .grant_id = "g", .seq = 7, .zone = MEM_ZONE_MOVABLE },
		{ .id = 17, .grant_id = "g", .seq = 7, .zone = MEM_ZONE_MOVABLE },
		{ .id = 18, .grant_id = "g", .seq = 9, .zone = MEM_ZONE_NORMAL },
	};
	struct revoke_request req = { .by = REVOKE_BY_SIZE, .size = BS };
	const uint64_t want[] = { 17, 16, 18 };

	assert_int_equal(plan_revoke(t, &req, o, 3, &p), 0);
	assert_blocks(p, want, 3);
	assert_int_equal(p->want_bytes, BS);
}

static void revoke_size_rejects(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	_cleanup_plan_ struct plan *r = NULL;
	_cleanup_plan_ struct plan *s = NULL;
	struct revoke_request zero = { .by = REVOKE_BY_SIZE, .size = 0 };
	struct revoke_request odd = { .by = REVOKE_BY_SIZE, .size = 200 * MiB };
	struct revoke_request big = { .by = REVOKE_BY_SIZE, .size = 1 * GiB };

	assert_int_equal(plan_revoke(t, &zero, owned4, 4, &p), -EINVAL);
	assert_non_null(strstr(p->reason, "size 0"));
	assert_int_equal(plan_revoke(t, &odd, owned4, 4, &q), -EINVAL);
	assert_string_equal(q->reason, "size 200M is not a multiple of the block size 128M: "
					    "the nearest valid sizes are 128M and 256M");
	assert_int_equal(plan_revoke(t, &big, owned4, 4, &r), -ENOSPC);
	assert_string_equal(r->reason, "1G requested, 512M owned by memgrant");
	assert_int_equal(r->n, 0);
	assert_int_equal(plan_revoke(t, &big, NULL, 0, &s), -ENOSPC);
	assert_string_equal(s->reason, "1G requested, 0B owned by memgrant");
}

static void revoke_grant_id(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	struct revoke_request g1 = { .by = REVOKE_BY_GRANT, .grant_id = "g-1" };
	struct revoke_request g9 = { .by = REVOKE_BY_GRANT, .grant_id = "g-9" };
	const uint64_t want[] = { 17, 16 };

	assert_int_equal(plan_revoke(t, &g1, owned4, 4, &p), 0);
	assert_blocks(p, want, 2);
	assert_int_equal(p->want_bytes, 2 * BS);
	assert_string_equal(p->reason, "grant g-1: 256M in 2 blocks 17,16");

	assert_int_equal(plan_revoke(t, &g9, owned4, 4, &q), -ENOENT);
	assert_string_equal(q->reason, "grant g-9 owns no blocks");
}

static void revoke_blocks(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	const uint64_t ids[] = { 16, 18 };
	struct revoke_request req = { .by = REVOKE_BY_BLOCKS, .ids = ids, .n_ids = 2 };
	const uint64_t want[] = { 18, 16 };

	assert_int_equal(plan_revoke(t, &req, owned4, 4, &p), 0);
	assert_blocks(p, want, 2);
	assert_int_equal(p->want_bytes, 2 * BS);
}

static void revoke_blocks_rejects(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	_cleanup_plan_ struct plan *r = NULL;
	_cleanup_plan_ struct plan *s = NULL;
	const uint64_t boot[] = { 16, 5 };
	const uint64_t none[] = { 99 };
	const uint64_t dup[] = { 16, 16 };
	struct revoke_request r1 = { .by = REVOKE_BY_BLOCKS, .ids = boot, .n_ids = 2 };
	struct revoke_request r2 = { .by = REVOKE_BY_BLOCKS, .ids = none, .n_ids = 1 };
	struct revoke_request r3 = { .by = REVOKE_BY_BLOCKS, .ids = dup, .n_ids = 2 };
	struct revoke_request r4 = { .by = REVOKE_BY_BLOCKS };

	assert_int_equal(plan_revoke(t, &r1, owned4, 4, &p), -EPERM);
	/* the cause as the table shows it: online, held by no grant */
	assert_string_equal(p->reason, "block 5 is online and no grant holds it (brought up outside memgrant: "
			    "'memgrantctl adopt 5' makes it a grant)");
	assert_int_equal(p->n, 0);
	assert_int_equal(plan_revoke(t, &r2, owned4, 4, &q), -ENOENT);
	assert_string_equal(q->reason, "block 99 does not exist");
	assert_int_equal(plan_revoke(t, &r3, owned4, 4, &r), -EINVAL);
	assert_string_equal(r->reason, "block 16 is given twice");
	assert_int_equal(plan_revoke(t, &r4, owned4, 4, &s), -EINVAL);
}

/* A block a revocation gave back is standby again, boot memory is boot
 * memory: neither is called "not onlined by memgrant". */
static void revoke_blocks_names_the_cause(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	const uint64_t standby[] = { 27 };
	const uint64_t boot[] = { 3 };
	struct revoke_request r1 = { .by = REVOKE_BY_BLOCKS, .ids = standby, .n_ids = 1 };
	struct revoke_request r2 = { .by = REVOKE_BY_BLOCKS, .ids = boot, .n_ids = 1 };

	(void)state;
	assert_int_equal(plan_revoke(t, &r1, owned4, 4, &p), -EPERM);
	assert_string_equal(p->reason, "block 27 is standby memory (not configured): no grant holds it, "
			    "there is nothing to give back");
	t->boot_known = true;
	t->boot_end = 16;
	assert_int_equal(plan_revoke(t, &r2, owned4, 4, &q), -EPERM);
	assert_string_equal(q->reason, "block 3 is boot memory: memgrant gives back only blocks its grants hold");
}

static void revoke_corrupt_ownership_rejected(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = granted_table();
	_cleanup_plan_ struct plan *p = NULL;
	const struct owned_block o[] = {
		{ .id = 16, .grant_id = "g-1", .seq = 1 },
		{ .id = 16, .grant_id = "g-2", .seq = 2 },
	};
	struct revoke_request req = { .by = REVOKE_BY_SIZE, .size = BS };

	assert_int_equal(plan_revoke(t, &req, o, 2, &p), -EINVAL);
	assert_string_equal(p->reason, "the ownership list names block 16 twice");
}

static void plan_rejects_zero_block_size(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = mem_table_new(0);
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_plan_ struct plan *q = NULL;
	struct revoke_request req = { .by = REVOKE_BY_SIZE, .size = BS };

	assert_int_equal(grant_size(t, BS, NULL, 0, &p), -EINVAL);
	assert_int_equal(plan_revoke(t, &req, NULL, 0, &q), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(grant_size_lowest_standby_first),
		cmocka_unit_test(grant_size_all_standby),
		cmocka_unit_test(grant_size_zero_rejected),
		cmocka_unit_test(grant_size_not_multiple_rejected),
		cmocka_unit_test(grant_size_more_than_standby_rejected),
		cmocka_unit_test(grant_size_prefers_contiguous_run),
		cmocka_unit_test(grant_size_skips_owned_blocks),
		cmocka_unit_test(grant_blocks_sorted),
		cmocka_unit_test(grant_blocks_unknown_rejected),
		cmocka_unit_test(grant_blocks_configured_rejected_C14),
		cmocka_unit_test(grant_blocks_without_firmware_entry_rejected),
		cmocka_unit_test(grant_blocks_duplicate_rejected),
		cmocka_unit_test(grant_blocks_empty_rejected),
		cmocka_unit_test(grant_blocks_owned_rejected),
		cmocka_unit_test(grant_ranges_ok),
		cmocka_unit_test(grant_ranges_malformed_rejected),
		cmocka_unit_test(grant_ranges_unaligned_rejected),
		cmocka_unit_test(grant_ranges_reversed_rejected),
		cmocka_unit_test(grant_ranges_overflow_rejected),
		cmocka_unit_test(grant_ranges_overlap_rejected),
		cmocka_unit_test(grant_ranges_beyond_table_rejected),
		cmocka_unit_test(grant_ranges_configured_rejected),
		cmocka_unit_test(range_parse_and_format),
		cmocka_unit_test(grant_c0_offline_unowned_blocks_C0),
		cmocka_unit_test(revoke_size_movable_then_newest),
		cmocka_unit_test(revoke_order_ties_by_id),
		cmocka_unit_test(revoke_size_rejects),
		cmocka_unit_test(revoke_grant_id),
		cmocka_unit_test(revoke_blocks),
		cmocka_unit_test(revoke_blocks_rejects),
		cmocka_unit_test(revoke_blocks_names_the_cause),
		cmocka_unit_test(revoke_corrupt_ownership_rejected),
		cmocka_unit_test(plan_rejects_zero_block_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
