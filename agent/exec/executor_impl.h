/* SPDX-License-Identifier: MIT */
/*
 * The executor's parts (executor.c: the thread and the block step;
 * exec_grant.c; exec_revoke.c) share these.  Executor thread only, as
 * executor.h says; none holds the engine lock across a kernel write.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hotplug/blockops.h"

struct engine;
struct mem_table;
struct op;
struct outcome;

/* Runs the queued grant / revocation O to its end (its state final). */
int exec_run_grant(struct engine *e, struct op *o);
int exec_run_revoke(struct engine *e, struct op *o);

/* OC's error from RES ("EBUSY" and the message), EXTRA appended. */
void set_outcome_error(struct outcome *oc, const struct block_result *res, const char *extra);
/* The metrics of one block step of SECS seconds (UP: a bring-up). */
void count_result(struct engine *e, const struct block_result *res, double secs, bool up);
/* memgrantd is stopping: the operation ends after the block in flight. */
bool stop_requested(struct engine *e);
/* The table an operation plans from: the live table as of now (pending
 * notifications applied), copied; a discovery only without one. */
int plan_table(struct engine *e, struct mem_table **out);
/* Someone asked to cancel O. */
bool cancel_requested(struct engine *e, const struct op *o);
/* O ends with OK of TOTAL blocks done: its state, record and report. */
void finish_op(struct engine *e, struct op *o, size_t ok, size_t total);
/* Ends O because it cannot go on (ERR, a reason): "rejected" when nothing
 * was done yet, else partial or failed with what was done. */
int abort_op(struct engine *e, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
