/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery: what a stop or a crash left behind, made consistent with
 * the kernel before the first request runs.  In order: the takeover of
 * auto_online_blocks (agent/engine/backend_setup.h), every intent a crash left open (each block it names read from
 * the kernel: recovery_block_fate(); half-done blocks finished or undone;
 * one result with the blocks found done), blocks the journal calls ours that the kernel no
 * longer has online (no longer counted; a configured but offline one is
 * deconfigured, one whose memmap or zone changed released), the configured
 * standby blocks no grant owns then (named in one loud line, kept foreign,
 * e->start_foreign: grants wait while they stay), and every request left
 * accepted or in progress queued again, a revocation with what it had
 * done, unless the journal may have lost its work: then it is ended, not
 * run a second time (a grant next to foreign blocks, a revocation after
 * owned blocks were found given back, anything when the journal is short of
 * its end mark).
 *
 * Contract: recovery_run() runs on the executor thread (kernel writes),
 * takes the engine lock for journal access only, and returns 0 or the
 * -errno that keeps the engine from starting.  -HP_EWRITER_GONE: the
 * privileged helper went away; the intent being recovered stays open and
 * nothing that needed a write is forgotten, so the next start does it all.
 */
#pragma once

#include <stdint.h>

#include "hotplug/block.h"
#include "agent/journal/intentlog.h"

struct engine;

int recovery_run(struct engine *e);

/* What recovery decides for one block an open intent names, from the kernel. */
enum intent_block_fate {
	FATE_UNTOUCHED,  /* as the intent found it, gone, or (down) still online: nothing to do */
	FATE_DONE,       /* in the state the intent leads to: in the result (adopted / given back) */
	FATE_HALF,       /* configured but offline: to finish (up: or undo when that fails) */
	FATE_REFUSED,    /* up and online, but not ours to adopt: boot memory or another grant's */
};

/* The decision for block B of an intent in direction DIR; RB is
 * hp_read_block()'s result for it (B unused when negative), OWNER the grant
 * the journal says owns it ("" for none), BOOT_END the first block above
 * boot memory.  Only blocks an intent names are ever passed here, so
 * nothing outside an intent is adopted; pure, for the unit tests. */
enum intent_block_fate recovery_block_fate(enum intentlog_dir dir, int rb, const struct mem_block *b,
					   const char *owner, uint64_t boot_end);
