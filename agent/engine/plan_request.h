/* SPDX-License-Identifier: MIT */
/*
 * From a message (lib/wire/message.h) to the planner's request
 * (hotplug/planner.h), and the ownership list the planner plans against:
 * what admission's precheck and the executor's run both need.  Admission
 * and the executor depend on this; it depends on neither.
 *
 * Contract: owned_list_locked() runs with the engine lock held; the others
 * are pure.  Nothing here writes to the kernel or the journal.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hotplug/planner.h"
#include "lib/wire/message.h"

struct engine;

/* Ownership list for the planner: the journal's blocks and the running
 * operation's open intent (machine.h); *OUT malloc'd. */
int owned_list_locked(struct engine *e, struct owned_block **out, size_t *n);
/* REQ points into M: valid while M is. */
void fill_grant_request(const struct msg *m, struct grant_request *req);
void fill_revoke_request(const struct msg *m, struct revoke_request *req);
/* The explicit block ids of a grant by blocks or ranges (ranges expanded);
 * -EINVAL for a range that does not parse, -E2BIG for one over 2^20 blocks. */
int explicit_ids(const struct msg *m, uint64_t block_size, uint64_t **out, size_t *n);
