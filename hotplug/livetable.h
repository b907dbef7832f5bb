/* SPDX-License-Identifier: MIT */
/*
 * The live block table: the current struct mem_block of every block of a
 * backend, built by one discovery and kept current from the backend's
 * change notifications (backend.h: watch_open/watch_read).  Only the blocks
 * a notification names are read again (read_block); a lost-event overflow
 * triggers one re-scan (discover).  Nothing polls.
 *
 * Threads: one thread (the engine's loop) owns the updates: it polls
 * livetable_fd() for POLLIN and calls livetable_update().  Any thread may
 * read at any time; reads never touch the backend:
 *   livetable_find()      one block by id, O(log n), copied out
 *   livetable_snapshot()  a copy of the whole table, O(n) memcpy
 *   livetable_lock()/livetable_unlock() around livetable_table() to read
 *                         the table in place (no copy); keep it short: the
 *                         updater waits for it
 * Updates take the write lock only to apply what was already read, so a
 * reader never waits for a backend read.
 *
 * Changes: livetable_update() and livetable_rescan() call FN once per block
 * whose struct mem_block changed, in id order, after the table shows the
 * change and outside every lock (FN may read the table).  A block that
 * appeared has no OLD, one that vanished no NEW (sysfs without firmware
 * entries, C0).
 *
 * Errors are negative errno from the backend; a block whose re-read fails
 * with anything but ENOENT keeps its old row and forces a re-scan at the
 * next update.
 */
#pragma once

#include "hotplug/backend.h"
#include "hotplug/block.h"

#include <stdbool.h>
#include <stdint.h>

struct livetable;

struct lt_change {
	const struct mem_block *old; /* NULL: the block appeared */
	const struct mem_block *nw;  /* NULL: the block vanished */
};
typedef void (*lt_change_fn)(const struct lt_change *c, void *data);

/* Opens the backend's watch, then discovers (in that order, so that no
 * change falls between).  B stays owned by the caller and must outlive LT. */
int livetable_open(struct hp_backend *b, struct livetable **out);
void livetable_free(struct livetable *lt);
static inline void livetable_freep(struct livetable **lt) { livetable_free(*lt); }
#define _cleanup_livetable_ __attribute__((cleanup(livetable_freep)))

/* Polls readable when livetable_update() has something to do. */
int livetable_fd(const struct livetable *lt);
/* Applies pending notifications; FN may be NULL.  Returns the number of
 * blocks that changed, or -errno. */
int livetable_update(struct livetable *lt, lt_change_fn fn, void *data);
/* Re-reads everything (discover) and reports the differences. */
int livetable_rescan(struct livetable *lt, lt_change_fn fn, void *data);

/* M, read from the backend outside the notifications (a writer's read
 * after its write, before the notification of it came, or one the backend
 * never sends: a tree served over FUSE), becomes its block's row; FN as
 * for livetable_update().  The caller owns the updates (as for
 * livetable_update()) from before that read until this returns, so that
 * no later notification's read is overtaken.  Returns 1 changed, 0 the
 * same, or -errno. */
int livetable_note(struct livetable *lt, const struct mem_block *m, lt_change_fn fn, void *data);

/* The table is discovered lazily (hp_discover_lazy()): a standby block's
 * memmap_on_memory is read when something needs it.  This reads it for
 * the rows that have not, from block *FROM on, a batch at a time; *FROM is
 * set where the next batch starts (UINT64_MAX: the end).  The caller owns
 * the updates as for livetable_note(), and calls again until it returns 0.
 * Returns the number of rows it looked at, or -errno.  No change is
 * reported: the kernel's value was only not read yet. */
int livetable_read_memmap(struct livetable *lt, uint64_t *from);

int livetable_find(struct livetable *lt, uint64_t id, struct mem_block *out); /* -ENOENT */
int livetable_snapshot(struct livetable *lt, struct mem_table **out);
void livetable_lock(struct livetable *lt);
void livetable_unlock(struct livetable *lt);
const struct mem_table *livetable_table(const struct livetable *lt); /* under livetable_lock */

/* Counts of the table's rows, kept as rows change (O(1) to read, never a
 * walk of the table): online = configured and online; standby = in the
 * firmware, not configured; in_flight = configured, not online (between two
 * steps of a block); online_from_mark = online with id >= the mark;
 * online_movable, online_kernel = online blocks on each side of the
 * MOVABLE:NORMAL ratio (mem_block_ratio_side()); memmap_unread = rows
 * livetable_read_memmap() has to read. */
struct livetable_counts {
	uint64_t block_size;
	uint64_t blocks;
	uint64_t online, standby, in_flight, online_from_mark;
	uint64_t online_movable, online_kernel;
	uint64_t memmap_unread; /* rows whose memmap_on_memory is MEM_MEMMAP_UNREAD */
};
void livetable_counts(struct livetable *lt, struct livetable_counts *out);
/* The same under livetable_lock (consistent with livetable_table()). */
void livetable_counts_locked(const struct livetable *lt, struct livetable_counts *out);
/* Sets the mark of online_from_mark (one walk of the table). */
void livetable_set_mark(struct livetable *lt, uint64_t id);

struct livetable_stats {
	uint64_t generation; /* bumped by every update that changed something */
	uint64_t rescans;    /* discovers, the first one included */
	uint64_t rereads;    /* read_block calls */
};
void livetable_stats(struct livetable *lt, struct livetable_stats *out);

/* Field-by-field equality (padding and bytes after zones' NUL ignored). */
bool mem_block_equal(const struct mem_block *a, const struct mem_block *b);
