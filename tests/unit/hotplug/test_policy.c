/* SPDX-License-Identifier: MIT */
/*
 * Policy: memmap_on_memory and zone per grant and block, each with its
 * reason (issue 3 "Policy", brief "Policy", kernel.md P1, P3, P6, P7, C0,
 * C2, C8, D3), and reading MemAvailable from ROOT/proc/meminfo.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "hotplug/policy.h"
#include "lib/fileio.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define BS (128 * MiB)

static const uint64_t standby16[] = { 16, 17, 18, 19, 20, 21, 22, 23,
				      24, 25, 26, 27, 28, 29, 30, 31 };

/*
 * N_ONLINE boot blocks online (DMA below 2G, D3), then standby up to block
 * 31 with memmap_on_memory=1 (C2 when supported); PARAM is the P1 module
 * parameter as read ("" when absent).
 */
static struct mem_table *table(unsigned n_online, const char *param)
{
	struct mem_table *t = mem_table_new(BS);

	assert_non_null(t);
	t->has_firmware = true;
	snprintf(t->memmap_param, sizeof(t->memmap_param), "%s", param);
	for (uint64_t id = 0; id < 32; id++) {
		struct mem_block *b = mem_table_add(t, id);

		assert_non_null(b);
		b->in_firmware = true;
		b->configured = id < n_online;
		b->memmap_on_memory = id < n_online ? 0 : 1;
		b->state = id < n_online ? MEM_STATE_ONLINE : MEM_STATE_OFFLINE;
		b->zones = mem_zones_parse(id < n_online ? (id < 16 ? "DMA" : "Normal") : "");
	}
	mem_table_sort(t);
	return t;
}

static const struct policy_settings defaults = {
	.memmap = POLICY_MEMMAP_AUTO,
	.reserve = 256 * MiB,
	.zone = MEM_ZONE_AUTO,
	.movable_ratio = POLICY_DEFAULT_MOVABLE_RATIO,
};

static const struct policy_request auto_req = { .memmap = -1, .zone = MEM_ZONE_AUTO };

/* --- memmap_on_memory ------------------------------------------------------ */

static void memmap_auto_low_memory_on_P7(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;

	assert_int_equal(policy_decide(&defaults, &auto_req, t, 180 * MiB, standby16, 8, &d), 0);
	assert_int_equal(d->memmap, 1);
	assert_string_equal(d->memmap_reason,
			    "memmap_on_memory=on: MemAvailable 180M is below the 256M reserve");
	for (size_t i = 0; i < d->n; i++)
		assert_int_equal(d->blocks[i].memmap, 1);
}

/* P6: 16 blocks of 128M take 16 * 2M = 32M of memmap from outside. */
static void memmap_auto_memmap_cost_crosses_reserve_P6(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *on = NULL;
	_cleanup_policy_decision_ struct policy_decision *off = NULL;

	/* 287M - 32M = 255M < 256M */
	assert_int_equal(policy_decide(&defaults, &auto_req, t, 287 * MiB, standby16, 16, &on), 0);
	assert_int_equal(on->memmap, 1);
	assert_string_equal(on->memmap_reason,
			    "memmap_on_memory=on: MemAvailable 287M less the 32M memmap of 16 blocks would fall below the 256M reserve");
	/* 288M - 32M = 256M: exactly at the reserve is not below it */
	assert_int_equal(policy_decide(&defaults, &auto_req, t, 288 * MiB, standby16, 16, &off), 0);
	assert_int_equal(off->memmap, 0);
}

static void memmap_auto_plenty_off_P7(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;

	assert_int_equal(policy_decide(&defaults, &auto_req, t, 3 * GiB + 100 * MiB, standby16, 8, &d), 0);
	assert_int_equal(d->memmap, 0);
	assert_string_equal(d->memmap_reason,
			    "memmap_on_memory=off: 3.1G available, the 2M memmap per block fits outside the block");
}

static void memmap_auto_contiguous_hint(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *plenty = NULL;
	_cleanup_policy_decision_ struct policy_decision *low = NULL;
	struct policy_request req = { .memmap = -1, .contiguous = true };

	assert_int_equal(policy_decide(&defaults, &req, t, 3 * GiB, standby16, 8, &plenty), 0);
	assert_int_equal(plenty->memmap, 0);
	assert_non_null(strstr(plenty->memmap_reason, "memmap_on_memory=off: the grant asks for contiguous memory"));

	/* Low memory outranks the hint: taking the memmap from outside could run the guest out. */
	assert_int_equal(policy_decide(&defaults, &req, t, 100 * MiB, standby16, 8, &low), 0);
	assert_int_equal(low->memmap, 1);
	assert_string_equal(low->memmap_reason,
			    "memmap_on_memory=on: MemAvailable 100M is below the 256M reserve (contiguous hint overridden)");
}

static void memmap_auto_unknown_available_on(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;

	assert_int_equal(policy_decide(&defaults, NULL, t, POLICY_MEM_AVAILABLE_UNKNOWN, standby16, 1, &d), 0);
	assert_int_equal(d->memmap, 1);
	assert_non_null(strstr(d->memmap_reason, "MemAvailable is unknown"));
}

static void memmap_explicit_request_wins_over_auto(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *on = NULL;
	_cleanup_policy_decision_ struct policy_decision *off = NULL;
	struct policy_request want_on = { .memmap = 1 };
	struct policy_request want_off = { .memmap = 0 };

	assert_int_equal(policy_decide(&defaults, &want_on, t, 3 * GiB, standby16, 2, &on), 0);
	assert_int_equal(on->memmap, 1);
	assert_string_equal(on->memmap_reason, "memmap_on_memory=on: requested by the grant");

	assert_int_equal(policy_decide(&defaults, &want_off, t, 100 * MiB, standby16, 2, &off), 0);
	assert_int_equal(off->memmap, 0);
	assert_string_equal(off->memmap_reason,
			    "memmap_on_memory=off: requested by the grant (MemAvailable 100M, 4M memmap, 256M reserve)");
}

static void memmap_settings_always_never(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *a = NULL;
	_cleanup_policy_decision_ struct policy_decision *n = NULL;
	_cleanup_policy_decision_ struct policy_decision *g = NULL;
	struct policy_settings always = defaults, never = defaults;
	struct policy_request want_on = { .memmap = 1 };

	always.memmap = POLICY_MEMMAP_ALWAYS;
	never.memmap = POLICY_MEMMAP_NEVER;
	assert_int_equal(policy_decide(&always, &auto_req, t, 3 * GiB, standby16, 2, &a), 0);
	assert_int_equal(a->memmap, 1);
	assert_string_equal(a->memmap_reason, "memmap_on_memory=on: policy memmap_on_memory is always");
	assert_int_equal(policy_decide(&never, &auto_req, t, 3 * GiB, standby16, 2, &n), 0);
	assert_int_equal(n->memmap, 0);
	assert_string_equal(n->memmap_reason, "memmap_on_memory=off: policy memmap_on_memory is never");
	/* The grant's own request is more specific than the setting. */
	assert_int_equal(policy_decide(&never, &want_on, t, 3 * GiB, standby16, 2, &g), 0);
	assert_int_equal(g->memmap, 1);
}

/* P1: memmap_on_memory=N; impossibility beats every request. */
static void memmap_unsupported_forces_off_P1(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "N");
	_cleanup_policy_decision_ struct policy_decision *req_on = NULL;
	_cleanup_policy_decision_ struct policy_decision *always_on = NULL;
	_cleanup_policy_decision_ struct policy_decision *low = NULL;
	struct policy_request want_on = { .memmap = 1 };
	struct policy_settings always = defaults;

	always.memmap = POLICY_MEMMAP_ALWAYS;
	assert_int_equal(policy_decide(&defaults, &want_on, t, 3 * GiB, standby16, 2, &req_on), 0);
	assert_int_equal(req_on->memmap, 0);
	assert_string_equal(req_on->memmap_reason,
			    "memmap_on_memory=off: requested on by the grant, but the kernel does not support memmap on memory (memory_hotplug.memmap_on_memory=N)");
	assert_int_equal(policy_decide(&always, NULL, t, 3 * GiB, standby16, 2, &always_on), 0);
	assert_int_equal(always_on->memmap, 0);
	assert_non_null(strstr(always_on->memmap_reason, "policy memmap_on_memory is always, but"));
	assert_int_equal(policy_decide(&defaults, NULL, t, 100 * MiB, standby16, 2, &low), 0);
	assert_int_equal(low->memmap, 0);
	assert_non_null(strstr(low->memmap_reason, "MemAvailable 100M is low for the 256M reserve, but"));
}

/* C2: without the P1 parameter, the firmware's boot values tell. */
static void memmap_support_from_firmware_C2(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "");
	char why[128];

	assert_int_equal(policy_memmap_supported(t, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "firmware block 16"));
	for (size_t i = 0; i < t->n; i++)
		t->blocks[i].memmap_on_memory = 0;
	assert_int_equal(policy_memmap_supported(t, why, sizeof(why)), 0);
	strcpy(t->memmap_param, "force");
	assert_int_equal(policy_memmap_supported(t, NULL, 0), 1);
}

/* C0: no firmware interface, the memmap cannot be chosen any more. */
static void memmap_keep_without_firmware_C0(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;
	struct policy_request want_on = { .memmap = 1 };

	t->has_firmware = false;
	assert_int_equal(policy_decide(&defaults, &want_on, t, 3 * GiB, standby16, 2, &d), 0);
	assert_int_equal(d->memmap, -1);
	assert_int_equal(d->blocks[1].memmap, -1);
	assert_non_null(strstr(d->memmap_reason, "memmap_on_memory=keep: no sys/firmware/memory"));
}

/* --- zones ------------------------------------------------------------------ */

static void zone_auto_movable_within_ratio_P3(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;

	assert_int_equal(policy_decide(&defaults, &auto_req, t, 3 * GiB, standby16, 16, &d), 0);
	assert_int_equal(d->online, ONLINE_MOVABLE);
	assert_int_equal(d->n_movable, 16);
	assert_int_equal(d->n_normal, 0);
	for (size_t i = 0; i < d->n; i++) {
		assert_int_equal(d->blocks[i].id, standby16[i]);
		assert_int_equal(d->blocks[i].online, ONLINE_MOVABLE);
	}
	assert_string_equal(d->blocks[0].zone_reason,
			    "zone=movable: grant may be revoked; MOVABLE:NORMAL stays 6% <= 301%");
	assert_string_equal(d->zone_reason,
			    "zone=movable: grant may be revoked; MOVABLE:NORMAL stays 100% <= 301%");
}

/* 4 blocks Normal/DMA, ratio 150: 6 movable blocks are exactly at the ratio
 * (600 <= 600), the 7th would be 175% and goes normal, after which the 8th
 * fits again (700 <= 750): the grant is split block by block. */
static void zone_auto_ratio_boundary_and_split(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(4, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;
	struct policy_settings s = defaults;
	const enum online_type want[] = { ONLINE_MOVABLE, ONLINE_MOVABLE, ONLINE_MOVABLE,
					  ONLINE_MOVABLE, ONLINE_MOVABLE, ONLINE_MOVABLE,
					  ONLINE_KERNEL, ONLINE_MOVABLE };

	s.movable_ratio = 150;
	assert_int_equal(policy_decide(&s, &auto_req, t, 3 * GiB, standby16, 8, &d), 0);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(d->blocks[i].online, want[i]);
	assert_string_equal(d->blocks[5].zone_reason,
			    "zone=movable: grant may be revoked; MOVABLE:NORMAL stays 150% <= 150%");
	assert_string_equal(d->blocks[6].zone_reason,
			    "zone=normal: movable would reach 175% of normal, above the 150% ratio");
	assert_string_equal(d->blocks[7].zone_reason,
			    "zone=movable: grant may be revoked; MOVABLE:NORMAL stays 140% <= 150%");
	assert_int_equal(d->online, ONLINE_DEFAULT);
	assert_int_equal(d->n_movable, 7);
	assert_int_equal(d->n_normal, 1);
	assert_string_equal(d->zone_reason,
			    "zone=split: 7 movable, 1 normal: movable would reach 175% of normal, above the 150% ratio");
}

/* Movable memory already online counts against the ratio. */
static void zone_auto_counts_online_movable(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(20, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;
	struct policy_settings s = defaults;
	uint64_t m, k;
	const uint64_t ids[] = { 24 };

	/* 16 DMA + 4 Normal = 20 kernel blocks; make 16-19 Movable: 16 kernel, 4 movable. */
	for (uint64_t id = 16; id < 20; id++)
		mem_table_find(t, id)->zones = mem_zones_parse("Movable");
	policy_zone_bytes(t, &m, &k);
	assert_int_equal(m, 4 * BS);
	assert_int_equal(k, 16 * BS);

	s.movable_ratio = 30; /* (4+1)*100 = 500 > 16*30 = 480 */
	assert_int_equal(policy_decide(&s, NULL, t, 3 * GiB, ids, 1, &d), 0);
	assert_int_equal(d->online, ONLINE_KERNEL);
	assert_string_equal(d->zone_reason,
			    "zone=normal: movable would reach 32% of normal, above the 30% ratio");

	/* the caller's counts (the live table's) stand for the walk */
	{
		_cleanup_policy_decision_ struct policy_decision *e = NULL;
		struct policy_request rq = { .memmap = -1, .zone_bytes_known = true, .movable_bytes = 0,
					     .normal_bytes = 16 * BS };

		assert_int_equal(policy_decide(&s, &rq, t, 3 * GiB, ids, 1, &e), 0);
		assert_int_equal(e->online, ONLINE_MOVABLE);
	}
}

static void zone_auto_no_normal_memory(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(0, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;

	assert_int_equal(policy_decide(&defaults, NULL, t, 3 * GiB, standby16, 1, &d), 0);
	assert_int_equal(d->online, ONLINE_KERNEL);
	assert_string_equal(d->zone_reason, "zone=normal: no Normal/DMA memory is online");
}

/* x86 (C0): boot memory is DMA32, and block 0 spans DMA and DMA32 so the
 * kernel reports its zone as "none" (A9); both count as kernel memory. */
static void zone_auto_counts_dma32_and_spanning_blocks(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = mem_table_new(BS);
	_cleanup_policy_decision_ struct policy_decision *d = NULL;
	static const uint64_t plugged[] = { 32, 33 };

	assert_non_null(t);
	t->has_firmware = false;
	for (uint64_t id = 0; id < 34; id++) {
		struct mem_block *b = mem_table_add(t, id);
		assert_non_null(b);
		b->configured = id < 4 || id >= 32;
		b->state = id < 4 ? MEM_STATE_ONLINE : MEM_STATE_OFFLINE;
		b->zones = mem_zones_parse(id == 0 ? "none" : id < 4 ? "DMA32" : id >= 32 ? "Normal Movable" : "");
		if (id >= 4 && id < 32)
			b->configured = false;
	}
	mem_table_sort(t);
	assert_int_equal(policy_decide(&defaults, NULL, t, 3 * GiB, plugged, 2, &d), 0);
	assert_int_equal(d->online, ONLINE_MOVABLE);
	assert_int_equal(d->n_movable, 2);
	assert_string_equal(d->zone_reason, "zone=movable: grant may be revoked; MOVABLE:NORMAL stays 50% <= 301%");
}

static void zone_explicit_requests(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(1, "Y");
	_cleanup_policy_decision_ struct policy_decision *mov = NULL;
	_cleanup_policy_decision_ struct policy_decision *nor = NULL;
	_cleanup_policy_decision_ struct policy_decision *set = NULL;
	_cleanup_policy_decision_ struct policy_decision *over = NULL;
	struct policy_request want_mov = { .memmap = -1, .zone = MEM_ZONE_MOVABLE };
	struct policy_request want_nor = { .memmap = -1, .zone = MEM_ZONE_NORMAL };
	struct policy_settings normal = defaults;

	/* 1 kernel block: 4 movable would be 400%, above 301%, but asked for. */
	assert_int_equal(policy_decide(&defaults, &want_mov, t, 3 * GiB, standby16, 4, &mov), 0);
	assert_int_equal(mov->online, ONLINE_MOVABLE);
	assert_int_equal(mov->n_movable, 4);
	assert_string_equal(mov->blocks[3].zone_reason,
			    "zone=movable: requested by the grant (movable would reach 400% of normal, above the 301% ratio)");
	assert_string_equal(mov->blocks[0].zone_reason, "zone=movable: requested by the grant");

	assert_int_equal(policy_decide(&defaults, &want_nor, t, 3 * GiB, standby16, 2, &nor), 0);
	assert_int_equal(nor->online, ONLINE_KERNEL);
	assert_string_equal(nor->zone_reason, "zone=normal: requested by the grant");

	normal.zone = MEM_ZONE_NORMAL;
	assert_int_equal(policy_decide(&normal, &auto_req, t, 3 * GiB, standby16, 2, &set), 0);
	assert_int_equal(set->online, ONLINE_KERNEL);
	assert_string_equal(set->zone_reason, "zone=normal: policy zone is normal");

	assert_int_equal(policy_decide(&normal, &want_mov, t, 3 * GiB, standby16, 1, &over), 0);
	assert_int_equal(over->online, ONLINE_MOVABLE);
}

/* A9: an offline block lists the zones it may join; no Movable -> normal. */
static void zone_movable_impossible_A9(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_policy_decision_ struct policy_decision *d = NULL;
	struct policy_request want_mov = { .memmap = -1, .zone = MEM_ZONE_MOVABLE };
	const uint64_t ids[] = { 16 };
	struct mem_block *b = mem_table_find(t, 16);

	b->configured = true;
	b->zones = mem_zones_parse("Normal");
	assert_int_equal(policy_decide(&defaults, &want_mov, t, 3 * GiB, ids, 1, &d), 0);
	assert_int_equal(d->online, ONLINE_KERNEL);
	assert_string_equal(d->zone_reason, "zone=normal: block 16 cannot be movable (valid_zones Normal)");
}

static void decide_rejects_bad_arguments(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = table(16, "Y");
	_cleanup_mem_table_ struct mem_table *z = mem_table_new(0);
	struct policy_decision *d = (void *)1;

	assert_int_equal(policy_decide(&defaults, NULL, t, GiB, standby16, 0, &d), -EINVAL);
	assert_null(d);
	assert_int_equal(policy_decide(NULL, NULL, t, GiB, standby16, 1, &d), -EINVAL);
	assert_int_equal(policy_decide(&defaults, NULL, z, GiB, standby16, 1, &d), -EINVAL);
}

static void words_parse(void **state)
{
	enum policy_memmap m;
	enum mem_zone z;

	assert_int_equal(policy_memmap_parse("never", &m), 0);
	assert_int_equal(m, POLICY_MEMMAP_NEVER);
	assert_string_equal(policy_memmap_name(m), "never");
	assert_int_equal(policy_memmap_parse("on", &m), -EINVAL);
	assert_int_equal(mem_zone_parse("movable", &z), 0);
	assert_int_equal(z, MEM_ZONE_MOVABLE);
	assert_string_equal(mem_zone_name(z), "movable");
	assert_int_equal(mem_zone_parse("Movable", &z), -EINVAL);
	assert_int_equal(mem_zone_parse(NULL, &z), -EINVAL);
}

/* --- meminfo ------------------------------------------------------------------ */

struct tmp {
	char dir[64];
};

static int tmp_setup(void **state)
{
	struct tmp *t = calloc(1, sizeof(*t));
	char proc[96];

	if (!t)
		return -1;
	strcpy(t->dir, "/tmp/memgrant-policy-XXXXXX");
	if (!mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	snprintf(proc, sizeof(proc), "%s/proc", t->dir);
	if (mkdir(proc, 0755) < 0) {
		rm_rf(t->dir);
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int tmp_teardown(void **state)
{
	struct tmp *t = *state;

	rm_rf(t->dir);
	free(t);
	return 0;
}

static void write_meminfo(const struct tmp *t, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/meminfo", t->dir);
	f = fopen(path, "we");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void meminfo_reads_kb_as_bytes(void **state)
{
	struct tmp *t = *state;
	uint64_t total = 0, avail = 0;
	char slash[80];

	write_meminfo(t, "MemTotal:        4194304 kB\nMemFree:         1000000 kB\n"
			 "MemAvailable:     184320 kB\nBuffers:            1234 kB\nHugePages_Total:       0\n");
	assert_int_equal(policy_read_meminfo(t->dir, &total, &avail), 0);
	assert_int_equal(total, 4 * GiB);
	assert_int_equal(avail, 180 * MiB);

	snprintf(slash, sizeof(slash), "%s/", t->dir);
	avail = 0;
	assert_int_equal(policy_read_meminfo(slash, NULL, &avail), 0);
	assert_int_equal(avail, 180 * MiB);
}

static void meminfo_missing_file(void **state)
{
	struct tmp *t = *state;
	char nowhere[96];
	uint64_t avail = 7;

	snprintf(nowhere, sizeof(nowhere), "%s/nowhere", t->dir);
	assert_int_equal(policy_read_meminfo(nowhere, NULL, &avail), -ENOENT);
	assert_int_equal(avail, 7);
}

static void meminfo_missing_memavailable(void **state)
{
	struct tmp *t = *state;
	uint64_t total = 7, avail = 7;

	write_meminfo(t, "MemTotal:        4194304 kB\nMemFree:         1000000 kB\n");
	assert_int_equal(policy_read_meminfo(t->dir, &total, &avail), -ENODATA);
	assert_int_equal(total, 7);
	assert_int_equal(avail, 7);
	write_meminfo(t, "");
	assert_int_equal(policy_read_meminfo(t->dir, &total, &avail), -ENODATA);
}

static void meminfo_malformed(void **state)
{
	struct tmp *t = *state;
	uint64_t avail = 7;
	const char *bad[] = {
		"MemTotal: 4194304 kB\nMemAvailable: abc kB\n",
		"MemTotal: 4194304 kB\nMemAvailable: 184320\n",
		"MemTotal: 4194304 kB\nMemAvailable: 184320 MB\n",
		"MemTotal: 4194304 kB\nMemAvailable: -5 kB\n",
		"MemTotal: 4194304 kB\nMemAvailable: 18 4320 kB\n",
		"MemTotal: kB\nMemAvailable: 184320 kB\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_meminfo(t, bad[i]);
		assert_int_equal(policy_read_meminfo(t->dir, NULL, &avail), -EINVAL);
		assert_int_equal(avail, 7);
	}
	write_meminfo(t, "MemTotal: 4194304 kB\nMemAvailable: 99999999999999999999 kB\n");
	assert_int_equal(policy_read_meminfo(t->dir, NULL, &avail), -ERANGE);
	write_meminfo(t, "MemTotal: 4194304 kB\nMemAvailable: 18014398509481984 kB\n"); /* 2^54 kB */
	assert_int_equal(policy_read_meminfo(t->dir, NULL, &avail), -ERANGE);
	assert_int_equal(avail, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(memmap_auto_low_memory_on_P7),
		cmocka_unit_test(memmap_auto_memmap_cost_crosses_reserve_P6),
		cmocka_unit_test(memmap_auto_plenty_off_P7),
		cmocka_unit_test(memmap_auto_contiguous_hint),
		cmocka_unit_test(memmap_auto_unknown_available_on),
		cmocka_unit_test(memmap_explicit_request_wins_over_auto),
		cmocka_unit_test(memmap_settings_always_never),
		cmocka_unit_test(memmap_unsupported_forces_off_P1),
		cmocka_unit_test(memmap_support_from_firmware_C2),
		cmocka_unit_test(memmap_keep_without_firmware_C0),
		cmocka_unit_test(zone_auto_movable_within_ratio_P3),
		cmocka_unit_test(zone_auto_ratio_boundary_and_split),
		cmocka_unit_test(zone_auto_counts_online_movable),
		cmocka_unit_test(zone_auto_no_normal_memory),
		cmocka_unit_test(zone_auto_counts_dma32_and_spanning_blocks),
		cmocka_unit_test(zone_explicit_requests),
		cmocka_unit_test(zone_movable_impossible_A9),
		cmocka_unit_test(decide_rejects_bad_arguments),
		cmocka_unit_test(words_parse),
		cmocka_unit_test_setup_teardown(meminfo_reads_kb_as_bytes, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(meminfo_missing_file, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(meminfo_missing_memavailable, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(meminfo_malformed, tmp_setup, tmp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
