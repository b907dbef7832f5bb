/* SPDX-License-Identifier: MIT */
/*
 * One grant or revocation while it is queued or running (struct op), its
 * status report, and how a change of it is published: journaled (with the
 * report queued for the source's outbox when the state calls for it), put on
 * the event bus, and handed to the subscribers as typed transitions.
 *
 * Contract: op_publish_locked() and op_report() are called with the engine
 * lock held; op_* helpers that only touch O need no lock while O is the
 * caller's alone (not yet queued).
 *
 * Who touches the running op (e->running):
 * - the executor thread sets and clears e->running, and is the only thread
 *   that writes the op's plan and progress (state, blocks_total,
 *   blocks_done, outcomes, busy, budget, the intent); it writes them under
 *   e->lock, since the views, admission and cancel read them under it, and
 *   may read them without it;
 * - other threads write only, and always under e->lock: applied_bytes,
 *   decisions and done[] (the live table's watcher, machine.c, when a block
 *   of the running grant leaves it outside memgrant), cancel_requested and
 *   cancel_by (engine_cancel());
 * - so the executor reads those under e->lock too (applied_bytes_of(),
 *   cancel_requested(), the *_locked record callbacks).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotplug/block.h"
#include "lib/idmap.h"
#include "agent/journal/intentlog.h"
#include "lib/wire/message.h"
#include "lib/wire/report.h"

struct engine;
struct engine_source;

/* What happened to one block of an operation, for the status report. */
struct outcome {
	uint64_t block;
	bool configured;
	int memmap;
	bool failure_told;   /* ENGINE_T_BLOCK_FAILED sent */
	bool changed;        /* changed since the last event: in the next event's "changed_blocks" */
	char state[16];
	char zone[48];
	char err_code[16];
	char err_msg[192];
};

/* A block of a revocation that was busy (EBUSY, or the budget's deadline
 * interrupted it) and is retried while the budget lasts. */
struct busy_block {
	uint64_t block;
	unsigned attempts;     /* failed attempts so far */
	unsigned unlogged;     /* failures since the last log line about it */
	double logged_at;      /* mono_s() of that line */
	char err_code[16];     /* the last failure */
};

struct op {
	struct op *next;
	struct msg *msg;
	const struct engine_source *src;
	enum msg_state state;
	int told_state;               /* last state sent as ENGINE_T_STATE, -1 none */
	uint64_t requested_bytes;
	uint64_t applied_bytes;
	size_t blocks_total;
	size_t blocks_done;           /* brought up (grant) or given back (revocation) */
	struct outcome *outcomes;
	size_t n_outcomes, cap_outcomes;
	/* the outcomes changed since the last event, by index (each once: its
	 * "changed" flag), and how many of them live's blocks already show */
	size_t *changed_at;
	size_t n_changed, cap_changed, live_synced;
	struct idmap outcome_at;      /* block -> index in outcomes (its first) */
	char **decisions;
	size_t n_decisions;
	char err_code[16];
	char err_msg[256];
	/* The operation's open intent (docs/journal.md): the blocks done so far
	 * are the operation's in memory only (brought up: its own; taken down:
	 * nobody's) until op_publish_locked() writes the result. */
	bool intent_open;
	enum intentlog_dir intent_dir;
	struct intentlog_done *done;
	size_t n_done, cap_done;
	struct idmap done_at;         /* block -> index in done */
	struct report live;           /* the current report, for the views: kept up per block */
	size_t live_cap;              /* entries live.blocks has room for */
	bool has_live;
	double live_at;               /* when (CLOCK_MONOTONIC seconds) */
	bool cancel_requested;        /* engine_cancel(): stop after the block in flight */
	char cancel_by[64];           /* who asked, for the report */
	struct busy_block *busy;      /* revocation: blocks retried, not given back yet */
	size_t n_busy;
	double budget_deadline;       /* revocation: mono_s() when its budget ends; 0 none */
	uint64_t budget_ms;
};

/* A new op for M (taken) from SRC; NULL on ENOMEM (M freed). */
struct op *op_new(struct msg *m, const struct engine_source *src);
void op_free(struct op *o);
void op_add_decision(struct op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A new outcome for BLOCK, or the existing one when RETRY; NULL on ENOMEM.
 * Either way it is marked changed (the caller fills it in). */
struct outcome *op_outcome(struct op *o, uint64_t block, bool retry);
/* Outcome AT changed outside op_outcome() (machine.c). */
void op_outcome_changed(struct op *o, size_t at);
void outcome_from_block(struct outcome *oc, const struct mem_block *b);
/* The busy entry of BLOCK, created when CREATE; NULL when none (or ENOMEM). */
struct busy_block *op_busy(struct op *o, uint64_t block, bool create);
/* BLOCK is no longer retried (given back, or failed otherwise). */
void op_busy_drop(struct op *o, uint64_t block);

/* Online and standby bytes of T (NULL: zero). */
void memory_figures(const struct mem_table *t, uint64_t *online, uint64_t *standby);
/* The status report of O (wire v1 plus progress fields): 0 or -ENOMEM. */
int op_report(struct engine *e, const struct op *o, const struct mem_table *t, struct report *out);
/* The same on the heap (a verdict's), NULL on ENOMEM. */
struct report *op_report_new(struct engine *e, const struct op *o, const struct mem_table *t);
/* The outbox O's reports go to, NULL for none. */
const char *op_report_dest(const struct op *o);
/* Sends the transitions REPORT shows for O to the subscribers. */
void op_tell_locked(struct engine *e, struct op *o, const struct report *report);
/* Writes O's intent to bring up (DIR ILOG_UP) or take down the N TARGETS,
 * in that order, durable, with O in_progress and its report queued; then
 * tells everybody.  O's progress stays in memory until its result. */
int op_intent_locked(struct engine *e, struct op *o, enum intentlog_dir dir, const struct intentlog_target *targets,
		     size_t n, const struct mem_table *t);
/* Publishes O's state and report: while O has an open intent and is not
 * final, in memory only (views, event bus, subscribers: the kernel holds the
 * progress); a final state closes the intent with one durable result (the
 * blocks done, applied_bytes, the report queued); without an intent, a
 * durable state record as before.  In progress, the views' report is
 * brought up to date at every call with the outcomes that changed (O(changed
 * blocks), never rebuilt whole); an event of what changed goes out at most
 * every OP_LIVE_INTERVAL seconds, and at once for a block that failed or
 * the last block. */
#define OP_LIVE_INTERVAL 0.1
int op_publish_locked(struct engine *e, struct op *o, const struct mem_table *t);
/* Closes O's open intent with its state as it is (a stop: the operation
 * resumes at the next start from what the result made its own). */
int op_close_intent_locked(struct engine *e, struct op *o, const struct mem_table *t);
/* BLOCK was done under O's open intent (ZONE and MEMMAP: how it came up). */
int op_done_add(struct op *o, uint64_t block, enum mem_zone zone, bool memmap);
/* The entry of BLOCK among O's done blocks, NULL when not done. */
const struct intentlog_done *op_done_find(const struct op *o, uint64_t block);
/* BLOCK is no longer among O's done blocks (it left outside memgrant); true when it was. */
bool op_done_remove(struct op *o, uint64_t block);
/* Puts REPORT on the event bus (as JSON: lib/wire/report_json.h) and
 * tells the subscribers (no journal write).
 * While O is in progress the event carries what changed since the previous
 * one ("changed_blocks" instead of "blocks"); other states the whole report. */
void op_announce_locked(struct engine *e, struct op *o, const struct report *report);
