/* SPDX-License-Identifier: MIT */
/*
 * The engine's view of the machine: one live block table (hotplug/livetable.h)
 * opened on the engine's backend, kept current by a watcher thread that
 * sleeps in poll() on the backend's change notifications (no timer), and
 * the reconciliation of changes made outside memgrantd.
 *
 * Reads (machine_snapshot, machine_figures) never touch the backend.
 * machine_sync() applies what is already pending, so a reader that just saw
 * the executor finish sees its writes; it must be called without e->lock
 * (the change callback takes it).
 *
 * Outside changes are facts: a block a grant owns that is found not online
 * (offlined, deconfigured or gone) while the executor has no step on it
 * leaves the grant: its owned-block record (or, for a block the running
 * operation brought up, its place in that operation's result), the grant's applied_bytes, a new
 * status report for the source (outbox), and an ENGINE_T_BLOCK_CHANGED
 * transition plus a "block.changed" event on the bus.  A block brought up
 * outside is never recorded as owned: views call it foreign.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hotplug/block.h"
#include "hotplug/blockops.h"

struct engine;

/* Opens the live table on e->backend (one discovery). */
int machine_open(struct engine *e);
/* Starts the watcher thread; after it, outside changes are reconciled. */
int machine_start(struct engine *e);
/* Stops the watcher thread (idempotent). */
void machine_stop(struct engine *e);
void machine_free(struct engine *e);

/* Applies pending notifications now (cheap when none); without e->lock. */
void machine_sync(struct engine *e);
/* The executor's struct block_reader (hotplug/blockops.h): the kernel's
 * state of BLOCK from the live table once pending notifications are
 * applied, before the first write (AFTER = STEP_NONE), and after a write
 * whose effect the table shows (a notification since said so); else read
 * from the backend: the files the write changed (hp_reread()) over the
 * table's row, or the block whole when there is no table, no row, or the
 * files show what the write does not leave.  What is read becomes the
 * table's row.  Without e->lock. */
int machine_block_state(void *engine, struct hp_backend *b, uint64_t block, enum block_step after,
			struct mem_block *out);
/* Reads what the table has not read yet, for a view that shows every
 * block: the memmap_on_memory of standby blocks (livetable_read_memmap(),
 * once per block for the agent's life).  Without e->lock; 0 or -errno. */
int machine_read_memmap(struct engine *e);
/* A copy of the table; -errno when there is no table. */
int machine_snapshot(struct engine *e, struct mem_table **out);
/* The live table itself, read-locked until machine_table_release(): a plan
 * reads it in place instead of copying every row.  NULL (nothing held) when
 * there is no table.  May be taken with e->lock held (that order); while it
 * is held, call nothing that reads the table's lock again (machine_figures(),
 * machine_memory_locked(): a waiting writer would block the second read). */
const struct mem_table *machine_table_hold(struct engine *e);
void machine_table_release(struct engine *e);
/* Bytes online on each side of the MOVABLE:NORMAL ratio, from the live
 * table's counts (no walk), between machine_table_hold() and its release. */
void machine_zone_bytes_locked(struct engine *e, uint64_t *movable, uint64_t *normal);

struct machine_figures {
	bool has_firmware;        /* sys/firmware/memory (C0) */
	uint64_t block_size;
	uint64_t online_bytes, standby_bytes;
	uint64_t in_flight_bytes; /* configured, not online: between two steps of a block */
	uint64_t total_bytes;     /* every block of the table */
	uint64_t foreign_blocks; /* online standby-capable blocks no grant owns */
};
/* Figures from the table; the journal is read under e->lock, which the
 * caller must NOT hold. */
int machine_figures(struct engine *e, struct machine_figures *out, uint64_t *granted_bytes);

/* Block size, online and standby bytes of the live table, O(1) (counts kept
 * as rows change); e->lock may be held.  -ENODEV without a table. */
int machine_memory_locked(struct engine *e, uint64_t *block_size, uint64_t *online, uint64_t *standby);

/* Who owns BLOCK now (e->lock held): the journal's record, corrected by
 * the running operation's open intent: blocks it brought up so far are its
 * own, blocks it took down nobody's, although neither is journaled before
 * its result.  0 (OUT may be NULL) or -ENOENT.  Every reader of ownership
 * (views, figures, planner, reconciliation) goes through these two. */
struct intentlog_block;
int machine_find_owned_locked(struct engine *e, uint64_t block, struct intentlog_block *out);
/* Every owned block, that way: the journal's oldest seq first, then the
 * running operation's, newest last; *OUT freed by the caller. */
int machine_owned_blocks_locked(struct engine *e, struct intentlog_block **out, size_t *n);

/* Of the blocks recovery found foreign at start (configured standby no
 * grant owned: a lost or cut journal may have forgotten them), those T
 * still shows configured and nobody owns; their ids "16-18,24" into LIST
 * (LEN bytes); how many.  While there is one, grants are refused rather
 * than applied on top of memory that may be theirs already.  e->lock held. */
struct mem_table;
size_t machine_start_foreign_locked(struct engine *e, const struct mem_table *t, char *list, size_t len);

/* Whoever owned BLOCK no longer does (the one place the engine forgets a
 * block on the kernel's word): the running operation's result, or the
 * journal; e->lock held. */
int machine_forget_block_locked(struct engine *e, uint64_t block);
