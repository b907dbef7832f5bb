/* SPDX-License-Identifier: MIT */
/*
 * The engine's state, shared by its parts; nothing outside agent/engine/
 * and agent/exec/ includes this.  The map, top to bottom (a part calls only
 * parts below it or beside it):
 *   engine.c         life cycle: new, start, stop, free, reload (the top)
 *   admission.c      engine_submit(): numbering, precheck, journal, queue
 *   dryrun.c         engine_plan(): admission's precheck, nothing kept
 *   adopt.c          engine_adopt(): blocks online outside memgrant into a grant
 *   cancel.c         engine_cancel(): queued ops ended, the running one asked
 *   views.c          the read side: status, grant, blocks, memory
 *   outbox.c         reports waiting for their source, acknowledgements
 *   machine.c        the live table's watcher: blocks that left a grant
 *   backend_setup.c  the backend the configuration names
 *   agent/exec/      executor.c, grant.c, revoke.c, recovery.c: kernel writes
 *   plan_request.c   message to planner request; the ownership list
 *   ops.c            one op: its report, publishing (journal, bus, subscribers)
 *   events.c         the event bus;  metrics.c  the counters
 *   registry.c       the bottom: wake-up, queue, sources, subscribers
 *
 * Locking: e->lock guards the journal, the queue, the sources, the outbox
 * registry, the subscribers, the settings and the running op's shared
 * fields (ops.h says which).  It is never held across a kernel write.
 * Kernel writes happen on the executor thread only.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "hotplug/backend.h"
#include "hotplug/livetable.h"
#include "hotplug/policy.h"
#include "agent/engine/engine.h"
#include "agent/engine/events.h"
#include "agent/journal/intentlog.h"
#include "agent/engine/machine.h"
#include "agent/engine/metrics.h"
#include "agent/engine/ops.h"

#define ENGINE_SOURCES_MAX 16
#define ENGINE_OUTBOXES_MAX 64
#define ENGINE_SUBSCRIBERS_MAX 8

struct engine_source {
	char name[MSG_ID_MAX + 1];
	unsigned flags;
};

/* Settings replaced on reload. */
struct engine_settings {
	struct policy_settings policy;
	uint64_t revoke_budget_ms;
	uint64_t block_op_timeout_ms;
};

struct engine {
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* the executor waits for work; engine_start() for recovery */
	pthread_cond_t outbox_cond; /* adapters wait for reports */
	uint64_t wake_gen;          /* bumped by engine_outbox_wake() */
	struct mg_log log;
	char *agent_id;
	char *state_dir;
	bool own_onlining;
	struct engine_settings set;
	/* parts */
	struct hp_backend *backend;
	struct intentlog *journal;
	bool journal_fresh;         /* the state dir had no journal at all (recovery warns) */
	struct intentlog_opened opened; /* what intentlog_open() found (fresh, a torn tail cut) */
	/* configured standby blocks no grant owned after recovery (recovery.c:
	 * named loudly; grants wait while one is still configured and unowned,
	 * machine_start_foreign_locked()) */
	uint64_t *start_foreign;
	size_t n_start_foreign;
	struct metrics *metrics;
	struct event_bus *events;
	int notify_fd;
	bool notify_pending; /* written to notify_fd and not drained yet (engine_notify()) */
	/* registries */
	struct engine_source sources[ENGINE_SOURCES_MAX];
	size_t n_sources;
	char *outboxes[ENGINE_OUTBOXES_MAX];
	size_t n_outboxes;
	struct {
		engine_transition_fn *fn;
		void *ctx;
	} subs[ENGINE_SUBSCRIBERS_MAX];
	size_t n_subs;
	/* work */
	struct op *queue_head, *queue_tail;
	struct op *running;
	bool step_active;           /* the executor is writing to the kernel for STEP_BLOCK */
	uint64_t step_block;
	bool stopping;
	bool writer_gone;           /* the privileged helper is gone: stop where the kernel is (engine_writer_gone) */
	int journal_err;            /* the journal could not record a step: stop where it is (ops.c) */
	bool executor_started;
	bool recovered;             /* recovery finished (RECOVERY_ERR its result) */
	int recovery_err;
	pthread_t executor;
	char auto_online_saved[24]; /* "" when the engine did not change it */
	/* the machine (machine.c) */
	struct livetable *live;
	pthread_mutex_t machine_update_lock; /* serializes livetable_update() */
	int machine_stop_fd;
	pthread_t machine_thread;
	bool machine_started;
	unsigned write_sync_skip;   /* the executor's: steps that re-read before trying a sync again */
	uint64_t boot_end;          /* blocks below it, online at start and not owned: boot memory */
};

/* Wakes the main loop (the state changed). */
void engine_notify(struct engine *e);
/* The source named NAME; registered with ENGINE_SOURCE_REPORTS when
 * unknown (recovery of an older journal).  NULL when the table is full.
 * Called with e->lock held. */
const struct engine_source *engine_source_intern_locked(struct engine *e, const char *name);
/* Appends O to the queue and wakes the executor; e->lock held. */
void engine_enqueue_locked(struct engine *e, struct op *o);
/* Registers DEST for counting; e->lock held. */
int outbox_register_locked(struct engine *e, const char *dest);
