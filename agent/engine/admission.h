/* SPDX-License-Identifier: MIT */
/*
 * Admission: engine_submit() (agent/engine/engine.h) and what it needs.  A request
 * is numbered (operator sources), its generation checked against the
 * journal, checked against the kernel's current table with every block
 * promised to queued requests counted as taken, journaled (fsync) and queued
 * for the executor, in that order, under the engine lock.  Also the
 * translation of a message into planner requests, which the executor uses
 * again when the request runs.
 *
 * The dry run (dryrun.c), adoption (adopt.c) and cancel (cancel.c) share
 * the numbering, the precheck and the refusal below.
 *
 * Contract: the *_locked functions run with the engine lock held; none
 * writes to the kernel.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hotplug/planner.h"
#include "lib/wire/message.h"

struct engine;

struct engine_source;
struct engine_verdict;
struct engine_plan;
struct mem_table;
struct plan;

/* V becomes a rejection with errno R (either sign); returns 0. */
int refuse(struct engine_verdict *v, int r);
/* Releases a dry run's answer (agent/engine/dryrun.c makes it; every
 * verdict is released here, so admission.c calls nothing of dryrun.c). */
void plan_answer_free(struct engine_plan *p);
/* Gives M its id and generation when its source numbers for it (operator
 * sources); -errno with ERR filled when that cannot be done. */
int number_locked(struct engine *e, const struct engine_source *src, struct msg *m, struct msg_error *err);
/* Checks M against the kernel's table T with the blocks promised to queued
 * requests counted as taken: the bytes it asks for and its plan, or
 * -errno with ERR filled. */
int precheck_locked(struct engine *e, const struct msg *m, const struct mem_table *t, uint64_t *requested,
		    struct plan **plan_out, struct msg_error *err);
