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
 * leaves the grant: its owned-block record, the grant's applied_bytes, a new
 * status report for the source (outbox), and an ENGINE_T_BLOCK_CHANGED
 * transition plus a "block.changed" event on the bus.  A block brought up
 * outside is never recorded as owned: views call it foreign.
 */
#pragma once

#include <stdint.h>

#include "../hotplug/block.h"

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
/* A copy of the table; -errno when there is no table. */
int machine_snapshot(struct engine *e, struct mem_table **out);

struct machine_figures {
	uint64_t block_size;
	uint64_t online_bytes, standby_bytes;
	uint64_t in_flight_bytes; /* configured, not online: between two steps of a block */
	uint64_t total_bytes;     /* every block of the table */
	uint64_t foreign_blocks; /* online standby-capable blocks no grant owns */
};
/* Figures from the table; the journal is read under e->lock, which the
 * caller must NOT hold. */
int machine_figures(struct engine *e, struct machine_figures *out, uint64_t *granted_bytes);

/* Whoever owned BLOCK in the journal no longer does (the one place the
 * engine forgets a block on the kernel's word); e->lock held. */
int machine_forget_block_locked(struct engine *e, uint64_t block);
