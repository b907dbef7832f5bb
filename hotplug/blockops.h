/* SPDX-License-Identifier: MIT */
/*
 * Executor primitives: bring one block up or take it down in the kernel's
 * order, undoing the steps already done when a later one fails.
 *
 * Up:   [memmap_on_memory if it must change] -> config=1 -> online (zone)
 * Down: offline -> config=0
 *
 * Steps already in the wanted state are skipped (read before write).
 * Where the block's state comes from is the caller's (struct block_reader):
 * before the first write and after each write that changes it; the plain
 * block_bring_up()/block_take_down() read the backend every time.  The
 * reader is also told of a memmap_on_memory write (STEP_MEMMAP), which no
 * notification reports, so that the rows it keeps carry the new value, and
 * asked the same for a deconfigured row whose memmap_on_memory is
 * MEM_MEMMAP_UNREAD (a lazily discovered table), which it reads.  A block
 * the caller's reader finds already up (or down) is asked for again with
 * STEP_READ, where the reader must read the backend: "nothing to do" is
 * the kernel's word, never a cached row's.  After a failed step the backend
 * itself is always read.
 * The result says which step failed with which errno and whether the undo
 * succeeded; the return value is 0 or that errno.  A step that fails with
 * HP_EWRITER_GONE (backend.h) is not undone: nothing can be written any more.
 */
#pragma once

#include "hotplug/backend.h"

enum block_step {
	STEP_NONE,
	STEP_READ,
	STEP_MEMMAP,
	STEP_CONFIGURE,
	STEP_ONLINE,
	STEP_OFFLINE,
	STEP_DECONFIGURE,
};

struct block_result {
	enum block_step failed_step; /* STEP_NONE on success */
	int err;                     /* negative errno of the failed step, 0 on success */
	int undo_err;                /* negative errno of a failed undo, 0 when the undo worked or was not needed */
	bool auto_onlined;           /* config=1 onlined the block by itself (auto_online_blocks) */
	bool was_noop;               /* the block already was in the wanted state */
	unsigned steps_done;         /* bit 1u << STEP_x for each kernel write that succeeded (undo writes not counted) */
	struct mem_block after;      /* block as read after the operation */
};

const char *block_step_name(enum block_step s); /* "memmap_on_memory", "configure", ... */

/* The state of block ID before any write (AFTER = STEP_NONE) or after the
 * write AFTER succeeded, into OUT: 0 or -errno, as hp_read_block(). */
struct block_reader {
	int (*read)(void *ctx, struct hp_backend *b, uint64_t id, enum block_step after, struct mem_block *out);
	void *ctx;
};
int block_bring_up_r(struct hp_backend *b, const struct block_reader *rd, uint64_t id, int memmap,
		     enum online_type type, struct block_result *res);
int block_take_down_r(struct hp_backend *b, const struct block_reader *rd, uint64_t id, struct block_result *res);
/* Make block ID online with MEMMAP (0/1; -1 keep whatever it has) in zone TYPE. */
int block_bring_up(struct hp_backend *b, uint64_t id, int memmap, enum online_type type,
		   struct block_result *res);

/* Offline and deconfigure block ID (deconfigure skipped where there is no firmware entry). */
int block_take_down(struct hp_backend *b, uint64_t id, struct block_result *res);
