/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery: what a stop or a crash left behind, made consistent with
 * the kernel before the first request runs.  In order: the takeover of
 * auto_online_blocks (agent/backend_setup.h), the block step the journal's
 * marker says was interrupted (finished or undone through
 * exec_block_step()), blocks the journal calls ours that the kernel no
 * longer has online (no longer counted; a configured but offline one is
 * deconfigured), and every request left accepted or in progress queued
 * again, a revocation with what it had done.
 *
 * Contract: recovery_run() runs on the executor thread (kernel writes),
 * takes the engine lock for journal access only, and returns 0 or the
 * -errno that keeps the engine from starting.
 */
#pragma once

struct engine;

int recovery_run(struct engine *e);
