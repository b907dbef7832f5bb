/* SPDX-License-Identifier: MIT */
/*
 * Admission: engine_submit() (agent/engine.h) and what it needs.  A request
 * is numbered (operator sources), its generation checked against the
 * journal, checked against the kernel's current table with every block
 * promised to queued requests counted as taken, journaled (fsync) and queued
 * for the executor, in that order, under the engine lock.  Also the
 * translation of a message into planner requests, which the executor uses
 * again when the request runs.
 *
 * Contract: the *_locked functions run with the engine lock held; none
 * writes to the kernel.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "../hotplug/planner.h"
#include "message.h"

struct engine;

/* Ownership list for the planner, from the journal. */
int owned_list_locked(struct engine *e, struct owned_block **out, size_t *n);
void fill_grant_request(const struct msg *m, struct grant_request *req);
void fill_revoke_request(const struct msg *m, struct revoke_request *req);
/* The explicit block ids of a grant by blocks or ranges (ranges expanded). */
int explicit_ids(const struct msg *m, uint64_t block_size, uint64_t **out, size_t *n);
