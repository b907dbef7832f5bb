/* SPDX-License-Identifier: MIT */
/*
 * The executor's parts (executor.c: the thread and the block step;
 * grant.c; revoke.c) share these.  Executor thread only, as
 * executor.h says; none holds the engine lock across a kernel write.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* The table a grant or revocation plans on, with e->lock held (that order):
 * the live table itself, read-locked, or when there is none a copy read from
 * the backend (*COPY owns it); NULL when neither can be had.  Released with
 * plan_table_release(E, *COPY) before e->lock; call nothing meanwhile that
 * takes the table's lock again (machine.h). */
const struct mem_table *plan_table_hold(struct engine *e, struct mem_table **copy);
void plan_table_release(struct engine *e, const struct mem_table *copy);
/* Someone asked to cancel O. */
bool cancel_requested(struct engine *e, const struct op *o);
/* O stops before its end because memgrantd stops (T: the table it planned
 * on).  On SIGTERM its intent is closed with a result that is not final
 * (the blocks done are its own), -ECANCELED; when the privileged helper is
 * gone (engine_writer_gone) nothing is journaled and the intent stays open,
 * -HP_EWRITER_GONE: whether the last write landed only the kernel knows, and
 * the next start reads it.  Either way O resumes at the next start. */
int stop_op(struct engine *e, struct op *o, const struct mem_table *t);
/* O's applied_bytes, read under the engine lock: the watcher may change it
 * while O runs (ops.h, "who touches the running op"). */
uint64_t applied_bytes_of(struct engine *e, const struct op *o);
/* O ends with OK of TOTAL blocks done: its state, record and report; when
 * the helper is gone under an open intent, stop_op() instead. */
void finish_op(struct engine *e, struct op *o, size_t ok, size_t total);
/* Ends O because it cannot go on (ERR, a reason): "rejected" when nothing
 * was done yet, else partial or failed with what was done. */
int abort_op(struct engine *e, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
