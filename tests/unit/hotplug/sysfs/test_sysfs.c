/* SPDX-License-Identifier: MIT */
/*
 * The sysfs backend over a generated tree in a temporary directory: each
 * write goes, raw, to exactly the kernel's file; errno comes back
 * unchanged; nothing is ever created.  (The kernel's reactions to those
 * writes are tested over simfs in tests/unit/hotplug/sysfs/test_rules_sysfs.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "hotplug/backend.h"
#include "hotplug/sysfs/discover.h"
#include "lib/util.h"
#include "tests/fixtures/gentree.h"

struct fx {
	char *root;
	struct hp_backend *b;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->root = gt_mktemp();
	gt_machine(f->root, 4, 4, 1);
	if (hp_sysfs_open(f->root, &f->b) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	hp_backend_close(f->b);
	gt_rm(f->root);
	free(f);
	return 0;
}

static void assert_file(const char *root, const char *rel, const char *want)
{
	char buf[256];

	assert_true(gt_get(root, rel, buf, sizeof(buf)) >= 0);
	assert_string_equal(buf, want);
}

static void test_open(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b = NULL;

	assert_string_equal(f->b->ops->name, "sysfs");
	assert_string_equal(f->b->root, f->root);
	assert_int_equal(hp_sysfs_open("/nonexistent-memgrant-root", &b), -ENOENT);
	assert_null(b);
}

/* Each attribute goes to its own file, byte for byte (C1, A2, A3). */
static void test_write_attr_targets(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b = f->b;

	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 5, "1"), 0);
	assert_file(f->root, "sys/firmware/memory/memory5/config", "1");
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_MEMMAP, 6, "0\n"), 0);
	assert_file(f->root, "sys/firmware/memory/memory6/memmap_on_memory", "0\n");
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_ONLINE, 2, "yes"), 0); /* raw: the kernel judges (K1) */
	assert_file(f->root, "sys/devices/system/memory/memory2/online", "yes");
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_STATE, 3, "online_movable"), 0);
	assert_file(f->root, "sys/devices/system/memory/memory3/state", "online_movable");
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_AUTO_ONLINE, 99, "online_kernel"), 0);
	assert_file(f->root, "sys/devices/system/memory/auto_online_blocks", "online_kernel");
	/* the empty value goes out as "\n" (see sysfs.c; K1/W1 reject both) */
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 4, ""), 0);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "\n");
	/* nothing else changed */
	assert_file(f->root, "sys/firmware/memory/memory5/memmap_on_memory", "1\n");
	assert_file(f->root, "sys/devices/system/memory/memory3/online", "1\n");
	assert_file(f->root, "sys/devices/system/memory/memory2/state", "online\n");
}

/* The typed helpers write the canonical words (W1, C7, C11, C12). */
static void test_typed_helpers(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b = f->b;

	assert_int_equal(block_configure(b, 4), 0);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "1");
	assert_int_equal(block_deconfigure(b, 4), 0);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "0");
	assert_int_equal(block_set_memmap(b, 4, true), 0);
	assert_file(f->root, "sys/firmware/memory/memory4/memmap_on_memory", "1");
	assert_int_equal(block_online(b, 1, ONLINE_MOVABLE), 0);
	assert_file(f->root, "sys/devices/system/memory/memory1/state", "online_movable");
	assert_int_equal(block_online(b, 1, ONLINE_KERNEL), 0);
	assert_file(f->root, "sys/devices/system/memory/memory1/state", "online_kernel");
	assert_int_equal(block_offline(b, 1), 0);
	assert_file(f->root, "sys/devices/system/memory/memory1/state", "offline");
	assert_int_equal(hp_set_auto_online(b, "online"), 0);
	assert_file(f->root, "sys/devices/system/memory/auto_online_blocks", "online");
}

/* A missing memoryN is ENOENT and nothing is created (C14: standby has no devices dir). */
static void test_never_creates(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b = f->b;
	char path[4096];

	assert_int_equal(b->ops->write_attr(b, HP_ATTR_STATE, 6, "online"), -ENOENT);
	assert_false(gt_exists(f->root, "sys/devices/system/memory/memory6"));
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_ONLINE, 6, "1"), -ENOENT);
	assert_false(gt_exists(f->root, "sys/devices/system/memory/memory6"));
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 100, "1"), -ENOENT);
	assert_false(gt_exists(f->root, "sys/firmware/memory/memory100"));

	/* the directory exists but not the file */
	snprintf(path, sizeof(path), "%s/sys/firmware/memory/memory7/memmap_on_memory", f->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_MEMMAP, 7, "1"), -ENOENT);
	assert_false(gt_exists(f->root, "sys/firmware/memory/memory7/memmap_on_memory"));

	snprintf(path, sizeof(path), "%s/sys/devices/system/memory/auto_online_blocks", f->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(hp_set_auto_online(b, "online"), -ENOENT);
	assert_false(gt_exists(f->root, "sys/devices/system/memory/auto_online_blocks"));
	{
		char buf[32];
		assert_int_equal(b->ops->read_auto_online(b, buf, sizeof(buf)), -ENOENT);
	}
}

/* errno from open and from write(2) itself comes back unchanged. */
static void test_errno_passthrough(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b = f->b;
	char path[4096];

	/* EISDIR from open */
	snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory0/state", f->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(block_offline(b, 0), -EISDIR);

	/* ENOSPC from write(2): the attribute is a link to /dev/full */
	snprintf(path, sizeof(path), "%s/sys/firmware/memory/memory1/config", f->root);
	assert_int_equal(unlink(path), 0);
	if (symlink("/dev/full", path) == 0 && access("/dev/full", W_OK) == 0)
		assert_int_equal(block_deconfigure(b, 1), -ENOSPC);

	/* ENOTDIR: memoryN is a file */
	gt_put(f->root, "sys/firmware/memory/memory50", "");
	assert_int_equal(block_configure(b, 50), -ENOTDIR);

	/* an unknown attribute is the caller's mistake */
	assert_int_equal(b->ops->write_attr(b, (enum hp_attr)42, 0, "1"), -EINVAL);
}

static void test_discover_and_read_block(void **state)
{
	struct fx *f = *state;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct mem_block blk;
	char buf[32];

	assert_int_equal(hp_discover(f->b, &t), 0);
	assert_int_equal(t->n, 8);
	assert_true(t->has_firmware);
	assert_true(mem_block_is_standby(&t->blocks[6]));
	assert_int_equal(hp_read_block(f->b, 2, &blk), 0);
	assert_int_equal(blk.state, MEM_STATE_ONLINE);
	assert_int_equal(hp_read_block(f->b, 8, &blk), -ENOENT);
	assert_int_equal(f->b->ops->read_auto_online(f->b, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "offline");

	gt_put(f->root, "sys/devices/system/memory/block_size_bytes", "0x8000000\n");
	assert_int_equal(hp_discover(f->b, &(struct mem_table *){ NULL }), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_attr_targets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_typed_helpers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_never_creates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errno_passthrough, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discover_and_read_block, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
