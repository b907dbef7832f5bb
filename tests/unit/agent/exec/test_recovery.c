/* SPDX-License-Identifier: MIT */
/* Recovery's decision for each block an interrupted intent names
 * (agent/exec/recovery.h recovery_block_fate(), docs/journal.md "Why every crash
 * point is safe"): what the kernel shows after a crash at each point of a
 * bring-up and of a take-down, and what must never be adopted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "agent/exec/recovery.h"

#define BOOT_END 16

/* A standby-capable block (firmware entry) in the given kernel state. */
static struct mem_block block(uint64_t id, bool configured, enum mem_state st)
{
	return (struct mem_block){ .id = id, .in_firmware = true, .configured = configured, .memmap_on_memory = 0,
				   .state = configured ? st : MEM_STATE_OFFLINE };
}

static void test_up_crash_points(void **state)
{
	struct mem_block untouched = block(20, false, MEM_STATE_OFFLINE);
	struct mem_block half = block(20, true, MEM_STATE_OFFLINE);
	struct mem_block online = block(20, true, MEM_STATE_ONLINE);

	(void)state;
	/* before the first kernel write / a block not reached yet: stays standby */
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &untouched, "", BOOT_END), FATE_UNTOUCHED);
	/* between configure and online: finished (or undone) */
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &half, "", BOOT_END), FATE_HALF);
	/* after online, before the result: adopted */
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &online, "", BOOT_END), FATE_DONE);
	/* gone from the kernel or unreadable: nothing adopted */
	assert_int_equal(recovery_block_fate(ILOG_UP, -ENOENT, &online, "", BOOT_END), FATE_UNTOUCHED);
	assert_int_equal(recovery_block_fate(ILOG_UP, -EIO, &online, "", BOOT_END), FATE_UNTOUCHED);
}

static void test_up_never_adopts_what_is_not_ours(void **state)
{
	struct mem_block boot = block(3, true, MEM_STATE_ONLINE);
	struct mem_block other = block(20, true, MEM_STATE_ONLINE);
	struct mem_block half_boot = block(3, true, MEM_STATE_OFFLINE);

	(void)state;
	/* an intent naming boot memory (a damaged or hand-made journal) */
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &boot, "", BOOT_END), FATE_REFUSED);
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &half_boot, "", BOOT_END), FATE_REFUSED);
	/* a block another grant owns already */
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &other, "g-other", BOOT_END), FATE_REFUSED);
	/* the boundary: the first block above boot memory is adoptable */
	other.id = BOOT_END;
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &other, "", BOOT_END), FATE_DONE);
}

/* Boot memory ends at BOOT_END: its last block, BOOT_END - 1, is as much boot
 * memory as its first, whatever state a crash left it in. */
static void test_up_boot_memory_edges(void **state)
{
	struct mem_block first = block(0, true, MEM_STATE_ONLINE);
	struct mem_block last = block(BOOT_END - 1, true, MEM_STATE_ONLINE);
	struct mem_block last_half = block(BOOT_END - 1, true, MEM_STATE_OFFLINE);
	struct mem_block above = block(BOOT_END, true, MEM_STATE_OFFLINE);

	(void)state;
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &first, "", BOOT_END), FATE_REFUSED);
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &last, "", BOOT_END), FATE_REFUSED);
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &last_half, "", BOOT_END), FATE_REFUSED);
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &above, "", BOOT_END), FATE_HALF);
	/* no boot memory at all (boot_end 0): block 0 is adoptable */
	assert_int_equal(recovery_block_fate(ILOG_UP, 0, &first, "", 0), FATE_DONE);
}

static void test_down_crash_points(void **state)
{
	struct mem_block online = block(20, true, MEM_STATE_ONLINE);
	struct mem_block offline = block(20, true, MEM_STATE_OFFLINE);
	struct mem_block standby = block(20, false, MEM_STATE_OFFLINE);
	struct mem_block nofw = { .id = 20, .in_firmware = false, .configured = true, .memmap_on_memory = -1,
				  .state = MEM_STATE_OFFLINE };

	(void)state;
	/* not reached (or busy): still online, stays owned */
	assert_int_equal(recovery_block_fate(ILOG_DOWN, 0, &online, "g-1", BOOT_END), FATE_UNTOUCHED);
	/* between offline and deconfigure: finished */
	assert_int_equal(recovery_block_fate(ILOG_DOWN, 0, &offline, "g-1", BOOT_END), FATE_HALF);
	/* after deconfigure, before the result: credited */
	assert_int_equal(recovery_block_fate(ILOG_DOWN, 0, &standby, "g-1", BOOT_END), FATE_DONE);
	/* no firmware interface: offline is the end of a take-down */
	assert_int_equal(recovery_block_fate(ILOG_DOWN, 0, &nofw, "g-1", BOOT_END), FATE_DONE);
	/* gone: not credited (reconcile_owned drops it, uncounted) */
	assert_int_equal(recovery_block_fate(ILOG_DOWN, -ENOENT, &standby, "g-1", BOOT_END), FATE_UNTOUCHED);
}

static void test_down_credits_only_owned_blocks(void **state)
{
	struct mem_block standby = block(20, false, MEM_STATE_OFFLINE);
	struct mem_block offline = block(20, true, MEM_STATE_OFFLINE);

	(void)state;
	/* a block that left the grant outside memgrant before the crash was
	 * released already: the revocation did not give it back */
	assert_int_equal(recovery_block_fate(ILOG_DOWN, 0, &standby, "", BOOT_END), FATE_UNTOUCHED);
	assert_int_equal(recovery_block_fate(ILOG_DOWN, 0, &offline, "", BOOT_END), FATE_UNTOUCHED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_up_crash_points),
		cmocka_unit_test(test_up_never_adopts_what_is_not_ours),
		cmocka_unit_test(test_up_boot_memory_edges),
		cmocka_unit_test(test_down_crash_points),
		cmocka_unit_test(test_down_credits_only_owned_blocks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
