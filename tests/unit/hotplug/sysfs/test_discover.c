/* SPDX-License-Identifier: MIT */
/*
 * Discovery over generated sysfs trees (tests/fixtures/gentree.h): the
 * merged table for the 6.19 s390 shape, the x86 shape without
 * sys/firmware/memory, going-offline, node links, and clear errors for
 * malformed input.  Rule ids from kernel.md in the test names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "hotplug/backend.h"
#include "hotplug/sysfs/discover.h"
#include "hotplug/sysfs/path.h"
#include "hotplug/sim/sim.h"
#include "lib/util.h"
#include "tests/fixtures/gentree.h"

static int setup(void **state)
{
	*state = gt_mktemp();
	return 0;
}

static int teardown(void **state)
{
	gt_rm(*state);
	return 0;
}

static struct mem_table *discover_with(const char *root, bool lazy_memmap)
{
	_cleanup_hp_path_ struct hp_path *p = NULL;
	struct mem_table *t = NULL;
	char err[256] = "";

	assert_int_equal(hp_path_open(root, &p), 0);
	if (hp_discover_table(p, lazy_memmap, &t, err, sizeof(err)) != 0)
		fail_msg("discover%s: %s", lazy_memmap ? " (lazy)" : "", err);
	return t;
}

static struct mem_table *discover_ok(const char *root)
{
	return discover_with(root, false);
}

static int discover_err(const char *root, char *err, size_t len)
{
	_cleanup_hp_path_ struct hp_path *p = NULL;
	struct mem_table *t = NULL;
	int r;

	assert_int_equal(hp_path_open(root, &p), 0);
	err[0] = '\0';
	r = hp_discover_table(p, false, &t, err, len);
	assert_null(t);
	return r;
}

/* A1 hex block size, A2, P1, C2 boot layout, C14 standby without devices dir. */
static void test_s390_619_tree_A1_A2_P1_C2_C14(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;

	gt_machine(root, 16, 16, 1);
	/* a directory without state or online is no block (memory20 stays standby) */
	gt_put(root, "sys/devices/system/memory/memory20/bogus", "");
	t = discover_ok(root);

	assert_int_equal(t->block_size, 128ull << 20);
	assert_true(t->has_firmware);
	assert_string_equal(t->auto_online, "offline");
	assert_string_equal(t->memmap_param, "Y");
	assert_int_equal(t->n, 32);
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];
		assert_int_equal(b->id, i);
		assert_true(b->in_firmware);
		if (i < 16) {
			assert_true(b->configured);
			assert_int_equal(b->memmap_on_memory, 0);
			assert_int_equal(b->state, MEM_STATE_ONLINE);
			assert_string_equal(MEM_ZONES_TEXT(b->zones), "DMA");
			assert_int_equal(b->removable, 1);
			assert_int_equal(b->node, 0);
			assert_false(mem_block_is_standby(b));
		} else {
			assert_false(b->configured);
			assert_int_equal(b->memmap_on_memory, 1);
			assert_int_equal(b->state, MEM_STATE_OFFLINE);
			assert_string_equal(MEM_ZONES_TEXT(b->zones), "");
			assert_int_equal(b->node, -1);
			assert_true(mem_block_is_standby(b));
		}
	}
	assert_int_equal(mem_block_start(t, mem_table_find(t, 16)), 0x80000000ull);
}

/* C0: no sys/firmware/memory, every present block configured, memmap -1. */
static void test_x86_tree_C0(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;

	gt_put(root, "sys/devices/system/memory/block_size_bytes", "8000000\n");
	for (unsigned i = 0; i < 8; i++)
		gt_dev_block(root, i, "online", "Normal", 0);
	gt_dev_block(root, 40, "offline", "Normal Movable", 1); /* a hot-plugged DIMM (A9) */
	t = discover_ok(root);

	assert_false(t->has_firmware);
	assert_string_equal(t->auto_online, "");  /* absent file: "" */
	assert_string_equal(t->memmap_param, "");
	assert_int_equal(t->n, 9);
	for (size_t i = 0; i < t->n; i++) {
		assert_true(t->blocks[i].configured);
		assert_false(t->blocks[i].in_firmware);
		assert_int_equal(t->blocks[i].memmap_on_memory, -1);
		assert_false(mem_block_is_standby(&t->blocks[i]));
	}
	assert_int_equal(t->blocks[8].id, 40);
	assert_int_equal(t->blocks[8].state, MEM_STATE_OFFLINE);
	assert_string_equal(MEM_ZONES_TEXT(t->blocks[8].zones), "Normal Movable");
	assert_int_equal(t->blocks[8].node, 1);
}

/* A7: going-offline is read from state; online (which would block, A8) is not needed. */
static void test_going_offline_A7_A8(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;

	gt_machine(root, 4, 2, 1);
	gt_put(root, "sys/devices/system/memory/memory2/state", "going-offline\n");
	/* A directory named online makes any read of it fail: discovery must not read it. */
	{
		char path[4096];
		snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory2/online", root);
		assert_int_equal(unlink(path), 0);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	t = discover_ok(root);
	assert_int_equal(mem_table_find(t, 2)->state, MEM_STATE_GOING_OFFLINE);
	assert_true(mem_table_find(t, 2)->configured);
	assert_int_equal(mem_table_find(t, 1)->state, MEM_STATE_ONLINE);
}

/* Without a state file, online decides (fallback); unknown state words stay unknown;
 * neither file: not a block. */
static void test_state_fallback(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	char path[4096];

	gt_machine(root, 3, 0, 0);
	snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory0/state", root);
	assert_int_equal(unlink(path), 0);
	gt_put(root, "sys/devices/system/memory/memory1/state", "frobbed\n");
	gt_put(root, "sys/devices/system/memory/memory7/uevent", "");
	t = discover_ok(root);
	assert_int_equal(t->n, 3);
	assert_int_equal(t->blocks[0].state, MEM_STATE_ONLINE);
	assert_int_equal(t->blocks[1].state, MEM_STATE_UNKNOWN);
	assert_int_equal(t->blocks[2].state, MEM_STATE_ONLINE);
}

static void test_node_link(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;

	gt_put(root, "sys/devices/system/memory/block_size_bytes", "10000000\n"); /* 256M, D2 */
	gt_dev_block(root, 0, "online", "DMA", 3);
	gt_dev_block(root, 1, "online", "DMA", -1);
	gt_dev_block(root, 2, "online", "Normal", 12);
	t = discover_ok(root);
	assert_int_equal(t->block_size, 256ull << 20);
	assert_int_equal(t->blocks[0].node, 3);
	assert_int_equal(t->blocks[1].node, -1);
	assert_int_equal(t->blocks[2].node, 12);
}

/* Configured via config=1 (C7) then onlined Movable; and a config=0 block still
 * having a devices dir (the moment between removal steps) counts as deconfigured. */
static void test_merge_config_value(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;

	gt_machine(root, 2, 3, 1);
	gt_dev_block(root, 2, "online", "Movable", 0);
	gt_fw_block(root, 2, 1, 1);
	t = discover_ok(root);
	assert_int_equal(t->n, 5);
	assert_true(t->blocks[2].configured);
	assert_int_equal(t->blocks[2].memmap_on_memory, 1);
	assert_string_equal(MEM_ZONES_TEXT(t->blocks[2].zones), "Movable");
	assert_false(t->blocks[3].configured);
	/* A devices block without a firmware entry on a firmware host: configured. */
	gt_dev_block(root, 9, "offline", "Normal Movable", 0);
	mem_table_free(t);
	t = discover_ok(root);
	assert_int_equal(t->n, 6);
	assert_true(mem_table_find(t, 9)->configured);
	assert_false(mem_table_find(t, 9)->in_firmware);
	assert_int_equal(mem_table_find(t, 9)->memmap_on_memory, -1);
}

static void gt_rm_rel(const char *root, const char *rel)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	rm_rf(path);
}

static struct mem_table *discover_lazy(const char *root)
{
	return discover_with(root, true);
}

/* C14 read from the names alone: a standby block's firmware files are not
 * opened (here they could not be read), its memmap_on_memory is unread
 * until hp_read_memmap(); a devices block's entry is read as before; with
 * no P1 parameter the blocks' own values say whether memmap on memory is
 * supported (C2), so every entry is read. */
static void test_lazy_memmap_C14_P1(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_backend_ struct hp_backend *be = NULL;
	char err[256] = "";

	gt_machine(root, 2, 3, 1);
	gt_fw_block(root, 1, 1, 1);
	gt_put(root, "sys/firmware/memory/memory2/config", "garbage\n");
	gt_put(root, "sys/firmware/memory/memory4/memmap_on_memory", "0\n");
	t = discover_lazy(root);
	assert_int_equal(t->n, 5);
	assert_int_equal(t->blocks[0].memmap_on_memory, 0);
	assert_int_equal(t->blocks[1].memmap_on_memory, 1);
	for (size_t i = 2; i < 5; i++) {
		assert_true(t->blocks[i].in_firmware);
		assert_false(t->blocks[i].configured);
		assert_true(mem_block_is_standby(&t->blocks[i]));
		assert_int_equal(t->blocks[i].memmap_on_memory, MEM_MEMMAP_UNREAD);
	}
	/* the eager discover opens them all, and says which file is bad */
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "memory2/config"));

	gt_put(root, "sys/firmware/memory/memory2/config", "0\n");
	assert_int_equal(hp_sysfs_open(root, &be), 0);
	assert_int_equal(hp_read_memmap(be, t->blocks, t->n), 3);
	assert_int_equal(t->blocks[2].memmap_on_memory, 1);
	assert_int_equal(t->blocks[3].memmap_on_memory, 1);
	assert_int_equal(t->blocks[4].memmap_on_memory, 0);
	assert_int_equal(hp_read_memmap(be, t->blocks, t->n), 0); /* nothing left */
	/* an entry gone since stays unread, the others are read */
	mem_table_free(t);
	t = discover_lazy(root);
	gt_rm_rel(root, "sys/firmware/memory/memory3");
	assert_int_equal(hp_read_memmap(be, t->blocks, t->n), 2);
	assert_int_equal(t->blocks[3].memmap_on_memory, MEM_MEMMAP_UNREAD);
	assert_int_equal(t->blocks[4].memmap_on_memory, 0);

	/* without P1 every entry is read (policy_memmap_supported()) */
	gt_fw_block(root, 3, 0, 1);
	gt_rm_rel(root, "sys/module/memory_hotplug/parameters/memmap_on_memory");
	mem_table_free(t);
	t = discover_lazy(root);
	for (size_t i = 2; i < 5; i++)
		assert_int_not_equal(t->blocks[i].memmap_on_memory, MEM_MEMMAP_UNREAD);
	assert_int_equal(t->blocks[4].memmap_on_memory, 0);
}

static void test_missing_block_size_ENOENT(void **state)
{
	const char *root = *state;
	char err[256];

	assert_int_equal(discover_err(root, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "block_size_bytes"));
	gt_dev_block(root, 0, "online", "DMA", 0);
	assert_int_equal(discover_err(root, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "missing"));
}

/* A1: lowercase hex, no 0x, a power of two. */
static void test_malformed_block_size_EINVAL(void **state)
{
	const char *root = *state;
	static const char *const bad[] = { "0x8000000\n", "\n", "", "zz\n", "8000001\n", "0\n",
					   " 8000000\n", "-8000000\n",
					   "10000000000000000000\n" };
	char err[256];

	gt_machine(root, 2, 0, 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		gt_put(root, "sys/devices/system/memory/block_size_bytes", bad[i]);
		assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "block_size_bytes"));
	}
}

static void test_malformed_attributes_EINVAL(void **state)
{
	const char *root = *state;
	char err[256];

	gt_machine(root, 2, 2, 1);
	gt_put(root, "sys/firmware/memory/memory3/config", "2\n"); /* C3: 0 or 1 */
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "memory3/config"));
	gt_fw_block(root, 3, 0, 1);

	gt_put(root, "sys/firmware/memory/memory2/memmap_on_memory", "Y\n");
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "memory2/memmap_on_memory"));
	gt_fw_block(root, 2, 0, 1);

	gt_put(root, "sys/devices/system/memory/memory1/phys_index", "00000002\n"); /* A4 */
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "memory1/phys_index"));
	gt_put(root, "sys/devices/system/memory/memory1/phys_index", "00000001\n");

	gt_put(root, "sys/devices/system/memory/memory1/removable", "yes\n"); /* A5 */
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "memory1/removable"));
	gt_put(root, "sys/devices/system/memory/memory1/removable", "1\n");

	gt_put(root, "sys/devices/system/memory/auto_online_blocks",
	       "online_movable_and_then_some_more\n");
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "auto_online_blocks"));
}

/* A3: memoryN decimal without padding; other entries are not blocks. */
static void test_block_names_A3(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	uint64_t id;

	assert_int_equal(hp_parse_block_name("memory0", &id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(hp_parse_block_name("memory123", &id), 0);
	assert_int_equal(id, 123);
	assert_int_equal(hp_parse_block_name("memory05", &id), -EINVAL);
	assert_int_equal(hp_parse_block_name("memory", &id), -EINVAL);
	assert_int_equal(hp_parse_block_name("memory1a", &id), -EINVAL);
	assert_int_equal(hp_parse_block_name("memory_tiers", &id), -EINVAL);
	assert_int_equal(hp_parse_block_name("memory99999999999999999999", &id), -ERANGE);

	gt_machine(root, 2, 0, 0);
	gt_put(root, "sys/devices/system/memory/memory05/state", "online\n");
	gt_put(root, "sys/devices/system/memory/power/state", "online\n");
	t = discover_ok(root);
	assert_int_equal(t->n, 2);
}

/* A block id whose address does not fit 64 bits is malformed, not wrapped. */
static void test_block_id_overflow(void **state)
{
	const char *root = *state;
	char err[256];

	gt_machine(root, 1, 0, 0);
	gt_dev_block(root, UINT64_MAX / (128ull << 20) + 1, "offline", "Normal", -1);
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "larger than the kernel's 32-bit device id"));
}

/* A row keeps 32 bits of id, the kernel's device id: one more is an error
 * that names the block, never a block cut short to another's id. */
static void test_block_id_32_bits(void **state)
{
	const char *root = *state;
	char err[256];
	uint64_t id;

	assert_int_equal(hp_parse_block_name("memory4294967295", &id), 0);
	assert_int_equal(id, UINT32_MAX);
	assert_int_equal(hp_parse_block_name("memory4294967296", &id), -ERANGE);
	gt_machine(root, 1, 0, 0);
	gt_fw_block(root, UINT64_C(1) << 32, 0, 1);
	assert_int_equal(discover_err(root, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "memory4294967296: block number larger than the kernel's 32-bit device id"));
}

static void test_read_block(void **state)
{
	const char *root = *state;
	_cleanup_hp_path_ struct hp_path *p = NULL;
	struct mem_block b;
	char err[256];

	gt_machine(root, 4, 4, 1);
	gt_dev_block(root, 5, "online", "Movable", 2);
	gt_fw_block(root, 5, 1, 1);
	assert_int_equal(hp_path_open(root, &p), 0);

	assert_int_equal(hp_discover_block(p, 1, &b, err, sizeof(err)), 0);
	assert_int_equal(b.id, 1);
	assert_true(b.configured && b.in_firmware);
	assert_int_equal(b.state, MEM_STATE_ONLINE);
	assert_int_equal(b.memmap_on_memory, 0);

	assert_int_equal(hp_discover_block(p, 4, &b, err, sizeof(err)), 0); /* C14 */
	assert_true(mem_block_is_standby(&b));
	assert_int_equal(b.memmap_on_memory, 1);
	assert_int_equal(b.state, MEM_STATE_OFFLINE);
	assert_int_equal(b.node, -1);

	assert_int_equal(hp_discover_block(p, 5, &b, err, sizeof(err)), 0);
	assert_true(b.configured);
	assert_string_equal(MEM_ZONES_TEXT(b.zones), "Movable");
	assert_int_equal(b.node, 2);

	assert_int_equal(hp_discover_block(p, 8, &b, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "memory8"));
}

static void test_read_block_x86_C0(void **state)
{
	const char *root = *state;
	_cleanup_hp_path_ struct hp_path *p = NULL;
	struct mem_block b;

	gt_machine(root, 2, 0, 0);
	assert_int_equal(hp_path_open(root, &p), 0);
	assert_int_equal(hp_discover_block(p, 1, &b, NULL, 0), 0);
	assert_true(b.configured);
	assert_false(b.in_firmware);
	assert_int_equal(b.memmap_on_memory, -1);
	assert_int_equal(hp_discover_block(p, 2, &b, NULL, 0), -ENOENT);
}

/* Thousands of blocks: all found, sorted, merged (one readdir per directory). */
static void test_many_blocks(void **state)
{
	const char *root = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	char rel[128];

	gt_put(root, "sys/devices/system/memory/block_size_bytes", "8000000\n");
	for (unsigned i = 0; i < 3000; i++) {
		if (i % 3 == 0) {
			snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%u/state", i);
			gt_put(root, rel, "online\n");
		}
		gt_fw_block(root, i, i % 3 == 0, 1);
	}
	t = discover_ok(root);
	assert_int_equal(t->n, 3000);
	for (unsigned i = 0; i < 3000; i++) {
		assert_int_equal(t->blocks[i].id, i);
		assert_int_equal(t->blocks[i].configured, i % 3 == 0);
		assert_int_equal(t->blocks[i].state,
				 i % 3 == 0 ? MEM_STATE_ONLINE : MEM_STATE_OFFLINE);
	}
}

static void test_path_read_write(void **state)
{
	const char *root = *state;
	_cleanup_hp_path_ struct hp_path *p = NULL;
	char buf[8], big[64];

	gt_put(root, "a", "hello\n\n");
	gt_put(root, "long", "0123456789abcdef\n");
	assert_int_equal(hp_path_open(root, &p), 0);
	assert_string_equal(hp_path_root(p), root);
	assert_int_equal(hp_path_read(p, "a", buf, sizeof(buf)), 5);
	assert_string_equal(buf, "hello");
	assert_int_equal(hp_path_read(p, "/a", buf, sizeof(buf)), 5); /* leading / stays under root */
	assert_int_equal(hp_path_read(p, "long", buf, sizeof(buf)), -EOVERFLOW);
	assert_int_equal(hp_path_read(p, "long", big, sizeof(big)), 16);
	assert_int_equal(hp_path_read(p, "nope", buf, sizeof(buf)), -ENOENT);
	assert_int_equal(hp_path_write(p, "a", "x"), 0);
	assert_int_equal(gt_get(root, "a", big, sizeof(big)), 1); /* truncated, exactly the value */
	assert_int_equal(hp_path_write(p, "nope", "x"), -ENOENT);
	assert_false(gt_exists(root, "nope"));
	assert_int_equal(hp_path_exists(p, "a"), 0);
	assert_int_equal(hp_path_exists(p, "nope"), -ENOENT);
	assert_int_equal(hp_path_open("/nonexistent-memgrant-root", &(struct hp_path *){ NULL }),
			 -ENOENT);
}


/* Discovery over the sim's tree must give the sim's own table, field by field. */
static void assert_same_table(const struct mem_table *a, const struct mem_table *b)
{
	assert_int_equal(a->block_size, b->block_size);
	assert_int_equal(a->has_firmware, b->has_firmware);
	assert_string_equal(a->auto_online, b->auto_online);
	assert_string_equal(a->memmap_param, b->memmap_param);
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct mem_block *x = &a->blocks[i], *y = &b->blocks[i];
		if (x->id != y->id || x->in_firmware != y->in_firmware ||
		    x->configured != y->configured || x->memmap_on_memory != y->memmap_on_memory ||
		    x->state != y->state || x->removable != y->removable || x->node != y->node ||
		    x->zones != y->zones)
			fail_msg("block %" PRIu64 "/%" PRIu64 ": tree fw=%d conf=%d memmap=%d state=%s "
				 "rm=%d node=%d zones='%s'; sim fw=%d conf=%d memmap=%d state=%s rm=%d "
				 "node=%d zones='%s'", x->id, y->id, x->in_firmware, x->configured,
				 x->memmap_on_memory, mem_state_name(x->state), x->removable, x->node,
				 MEM_ZONES_TEXT(x->zones), y->in_firmware, y->configured, y->memmap_on_memory,
				 mem_state_name(y->state), y->removable, y->node, MEM_ZONES_TEXT(y->zones));
	}
}

static void compare_sim(const char *dir, const struct sim_params *p, const char *steps)
{
	char state[4096], tree[4096], buf[256], *save = NULL;
	_cleanup_backend_ struct hp_backend *sim = NULL;
	_cleanup_mem_table_ struct mem_table *ts = NULL, *tt = NULL;
	struct sim_params q = *p;

	snprintf(state, sizeof(state), "%s/sim.json", dir);
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	q.tree = tree;
	assert_int_equal(sim_init(state, &q), 0);
	assert_int_equal(hp_sim_open(state, &sim), 0);
	/* steps: "c16=1 s16=online_movable ..." as in rules.h */
	snprintf(buf, sizeof(buf), "%s", steps);
	for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		static const enum hp_attr attrs[] = { ['c'] = HP_ATTR_CONFIG, ['m'] = HP_ATTR_MEMMAP,
						      ['o'] = HP_ATTR_ONLINE, ['s'] = HP_ATTR_STATE,
						      ['a'] = HP_ATTR_AUTO_ONLINE };
		char *eq = strchr(tok, '=');
		assert_non_null(eq);
		*eq = '\0';
		assert_int_equal(sim->ops->write_attr(sim, attrs[(unsigned char)tok[0]],
						      strtoull(tok + 1, NULL, 10), eq + 1), 0);
	}
	assert_int_equal(hp_discover(sim, &ts), 0);
	tt = discover_ok(sim->root);
	assert_same_table(tt, ts);
	for (size_t i = 0; i < ts->n; i++) {
		struct mem_block b;
		_cleanup_hp_path_ struct hp_path *hp = NULL;
		assert_int_equal(hp_path_open(sim->root, &hp), 0);
		assert_int_equal(hp_discover_block(hp, ts->blocks[i].id, &b, NULL, 0), 0);
		assert_memory_equal(&b, &tt->blocks[i], sizeof(b));
	}
}

static void test_sim_tree_matches_sim(void **state)
{
	const char *dir = *state;
	struct sim_params p;

	sim_params_default(&p);
	compare_sim(dir, &p, "");
	rm_rf(dir), mkdir(dir, 0700);
	compare_sim(dir, &p, "c16=1 c17=1 s16=online_movable o17=1 c20=1 a=online c21=1 "
			     "o5=0 c5=0 m5=1 c5=1 m22=0");
	rm_rf(dir), mkdir(dir, 0700);
	p.has_firmware = false; /* C0 */
	compare_sim(dir, &p, "o3=0 s16=online_movable");
	rm_rf(dir), mkdir(dir, 0700);
	sim_params_default(&p);
	p.memmap_supported = false;
	p.block_size = 256ull << 20;
	compare_sim(dir, &p, "c9=1");
}

/* hp_reread_block() after each write of a block's life on the sim's tree
 * gives what a whole read gives (the files a write changes are read, the
 * rest kept from the row before); what a write does not leave is -ESTALE. */
static void test_reread_after_writes(void **state)
{
	const char *dir = *state;
	char st[4096], tree[4096];
	_cleanup_backend_ struct hp_backend *sim = NULL;
	_cleanup_hp_path_ struct hp_path *hp = NULL;
	struct sim_params q;
	struct mem_block known, got, whole;

	sim_params_default(&q);
	snprintf(st, sizeof(st), "%s/sim.json", dir);
	snprintf(tree, sizeof(tree), "%s/tree", dir);
	q.tree = tree;
	assert_int_equal(sim_init(st, &q), 0);
	assert_int_equal(hp_sim_open(st, &sim), 0);
	assert_int_equal(hp_path_open(tree, &hp), 0);

	assert_int_equal(hp_discover_block(hp, 16, &known, NULL, 0), 0);
	assert_false(known.configured);
	assert_int_equal(hp_reread_block(hp, HP_REREAD_STATE, &known, -1, true, &got), -ESTALE); /* not configured */
	assert_int_equal(sim->ops->write_attr(sim, HP_ATTR_MEMMAP, 16, known.memmap_on_memory ? "0" : "1"), 0);
	assert_int_equal(hp_reread_block(hp, HP_REREAD_MEMMAP, &known, -1, true, &got), 0);
	assert_int_equal(hp_discover_block(hp, 16, &whole, NULL, 0), 0);
	assert_memory_equal(&got, &whole, sizeof(got));
	assert_int_not_equal(got.memmap_on_memory, known.memmap_on_memory);
	known = got;
	assert_int_equal(sim->ops->write_attr(sim, HP_ATTR_CONFIG, 16, "1"), 0);
	assert_int_equal(hp_reread_block(hp, HP_REREAD_DECONFIGURED, &known, -1, true, &got), -ESTALE); /* config 1 */
	assert_int_equal(hp_reread_block(hp, HP_REREAD_STATE, &known, -1, true, &got), 0);
	assert_true(got.configured);
	assert_int_equal(got.state, MEM_STATE_OFFLINE);
	known = got;
	assert_int_equal(sim->ops->write_attr(sim, HP_ATTR_STATE, 16, "online_movable"), 0);
	assert_int_equal(hp_reread_block(hp, HP_REREAD_DEVICE, &known, -1, true, &got), 0);
	assert_int_equal(hp_discover_block(hp, 16, &whole, NULL, 0), 0);
	assert_memory_equal(&got, &whole, sizeof(got));
	assert_int_equal(got.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(got.zones), "Movable");
	known = got;
	assert_int_equal(sim->ops->write_attr(sim, HP_ATTR_STATE, 16, "offline"), 0);
	assert_int_equal(hp_reread_block(hp, HP_REREAD_DEVICE, &known, -1, true, &got), 0);
	assert_int_equal(hp_discover_block(hp, 16, &whole, NULL, 0), 0);
	assert_memory_equal(&got, &whole, sizeof(got));
	known = got;
	assert_int_equal(sim->ops->write_attr(sim, HP_ATTR_CONFIG, 16, "0"), 0);
	assert_int_equal(hp_reread_block(hp, HP_REREAD_DEVICE, &known, -1, true, &got), -ESTALE); /* no devices dir */
	assert_int_equal(hp_reread_block(hp, HP_REREAD_DECONFIGURED, &known, -1, true, &got), 0);
	assert_int_equal(hp_discover_block(hp, 16, &whole, NULL, 0), 0);
	assert_memory_equal(&got, &whole, sizeof(got));
	assert_false(got.configured);
}

/* The node link: the one KNOWN names, node 0, else the directory scanned;
 * removable from the kernel's value given, else from the file. */
static void test_reread_node_removable(void **state)
{
	const char *root = *state;
	_cleanup_hp_path_ struct hp_path *p = NULL;
	struct mem_block known, got;

	gt_machine(root, 4, 4, 1);
	gt_dev_block(root, 5, "online", "Movable", 2);
	gt_fw_block(root, 5, 1, 1);
	assert_int_equal(hp_path_open(root, &p), 0);
	assert_int_equal(hp_discover_block(p, 5, &known, NULL, 0), 0);
	assert_int_equal(known.node, 2);
	known.node = -1;
	known.removable = -1;
	assert_int_equal(hp_reread_block(p, HP_REREAD_DEVICE, &known, -1, true, &got), 0);
	assert_int_equal(got.node, 2); /* no node0 link: scanned */
	assert_int_equal(got.removable, 1); /* read from the file */
	known.node = 2;
	gt_put(root, "sys/devices/system/memory/memory5/removable", "0\n");
	assert_int_equal(hp_reread_block(p, HP_REREAD_DEVICE, &known, 1, true, &got), 0);
	assert_int_equal(got.node, 2);
	assert_int_equal(got.removable, 1); /* the kernel's value, as given (A5) */
	assert_int_equal(hp_reread_block(p, HP_REREAD_DEVICE, &known, -1, true, &got), 0);
	assert_int_equal(got.removable, 0);
	/* a kernel without NUMA (s390: no sys/devices/system/node) has no
	 * node links: none is looked for */
	assert_int_equal(hp_reread_block(p, HP_REREAD_DEVICE, &known, 1, false, &got), 0);
	assert_int_equal(got.node, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_s390_619_tree_A1_A2_P1_C2_C14, setup, teardown),
		cmocka_unit_test_setup_teardown(test_x86_tree_C0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_going_offline_A7_A8, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_merge_config_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_memmap_C14_P1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_block_size_ENOENT, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_block_size_EINVAL, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_attributes_EINVAL, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_names_A3, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_id_overflow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_id_32_bits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_block_x86_C0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_path_read_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sim_tree_matches_sim, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reread_after_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reread_node_removable, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
