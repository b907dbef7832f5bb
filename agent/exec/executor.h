/* SPDX-License-Identifier: MIT */
/*
 * The executor: the one thread that writes to the kernel.  It runs recovery
 * (agent/exec/recovery.h) once, then takes queued grants and revocations one at a
 * time: plans against a fresh table, decides memmap and zone (policy), and
 * brings blocks up or takes them down through exec_block_step(), the one
 * block-step function grants, revocations and recovery share.
 *
 * Contract: exec_* functions run on the executor thread only; they take the
 * engine lock for bookkeeping and never hold it across a kernel write.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hotplug/blockops.h"
#include "agent/journal/intentlog.h"

struct engine;
struct op;

/* One block step: the kernel write bounded by DEADLINE (monotonic seconds,
 * 0: none), the metrics, then the caller's RECORD_LOCKED (may be NULL: the
 * block's outcome in the operation's memory, under the engine lock).
 * Nothing is journaled per block: the operation's intent (written before
 * its first step) names the block, and after a crash recovery reads from
 * the kernel what became of it.  While the write runs, e->step_block names
 * the block, so the watcher leaves it to the executor.  Returns 1 when the
 * block changed as asked (RES->err 0), else 0; RES->err is the -errno of
 * the failed step (-EINTR: the deadline ran out). */
struct exec_step {
	enum intentlog_dir kind;
	uint64_t block;
	int memmap;                 /* bring-up: 0/1, -1 as it is */
	enum online_type online;    /* bring-up */
	double deadline;
	const char *owner;          /* the grant or revocation */
	void (*record_locked)(struct engine *e, void *ctx, const struct block_result *res);
	void *ctx;
};
int exec_block_step(struct engine *e, const struct exec_step *s, struct block_result *res);

/* Starts the executor thread (recovery first); engine_start() waits for
 * the recovery's result. */
int exec_start(struct engine *e);
