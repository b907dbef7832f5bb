/* SPDX-License-Identifier: MIT */
/*
 * One grant or revocation while it is queued or running (struct op), its
 * status report, and how a change of it is published: journaled (with the
 * report queued for the source's outbox when the state calls for it), put on
 * the event bus, and handed to the subscribers as typed transitions.
 *
 * Contract: op_publish_locked() and op_report() are called with the engine
 * lock held; op_* helpers that only touch O need no lock when O is owned by
 * the caller (not yet queued, or running on the executor).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../hotplug/block.h"
#include "message.h"

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
	double logged_at;      /* exec_now() of that line */
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
	size_t n_outcomes;
	char **decisions;
	size_t n_decisions;
	char err_code[16];
	char err_msg[256];
	bool cancel_requested;        /* engine_cancel(): stop after the block in flight */
	char cancel_by[64];           /* who asked, for the report */
	struct busy_block *busy;      /* revocation: blocks retried, not given back yet */
	size_t n_busy;
	double budget_deadline;       /* revocation: exec_now() when its budget ends; 0 none */
	uint64_t budget_ms;
};

/* A new op for M (taken) from SRC; NULL on ENOMEM (M freed). */
struct op *op_new(struct msg *m, const struct engine_source *src);
void op_free(struct op *o);
void op_add_decision(struct op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A new outcome for BLOCK, or the existing one when RETRY; NULL on ENOMEM. */
struct outcome *op_outcome(struct op *o, uint64_t block, bool retry);
void outcome_from_block(struct outcome *oc, const struct mem_block *b);
/* The busy entry of BLOCK, created when CREATE; NULL when none (or ENOMEM). */
struct busy_block *op_busy(struct op *o, uint64_t block, bool create);
/* BLOCK is no longer retried (given back, or failed otherwise). */
void op_busy_drop(struct op *o, uint64_t block);

/* Online and standby bytes of T (NULL: zero). */
void memory_figures(const struct mem_table *t, uint64_t *online, uint64_t *standby);
/* The status report of O (wire v1 plus progress fields); NULL on ENOMEM. */
json_t *op_report(struct engine *e, const struct op *o, const struct mem_table *t);
/* The outbox O's reports go to, NULL for none. */
const char *op_report_dest(const struct op *o);
/* Sends the transitions REPORT shows for O to the subscribers. */
void op_tell_locked(struct engine *e, struct op *o, const json_t *report);
/* Journals O's state and report and tells everybody. */
int op_publish_locked(struct engine *e, struct op *o, const struct mem_table *t);
/* Puts REPORT on the event bus and tells the subscribers (no journal write).
 * While O is in progress the event carries what changed since the previous
 * one ("changed_blocks" instead of "blocks"); other states the whole report. */
void op_announce_locked(struct engine *e, struct op *o, json_t *report);
