/* SPDX-License-Identifier: MIT */
/*
 * A status report (report_to_json()'s JSON) kept with its per-block list
 * "blocks" as "block_runs": runs of consecutive blocks (upwards, as a grant
 * brings them up, or with "down": true as a revocation gives them back)
 * whose entries are the same but for "block" and "range" (which follow from
 * the block and the report's block size).  A grant of 4,096 blocks that all
 * came up alike is one run, not 4,096 objects.  The journal keeps its
 * reports so (docs/journal.md), the event bus its big events; whoever reads
 * them gets the wire form back with the same bytes.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "lib/wire/report.h"

/* STATUS with its "blocks" as "block_runs", in the same place among its
 * members; its other members shared.  NULL on ENOMEM. */
json_t *report_runs_compact(const json_t *status);
/* report_runs_compact(report_to_json(R)), built from R's typed blocks:
 * one small object per run, never one per block.  NULL on ENOMEM. */
json_t *report_runs_of_report(const struct report *r);
/* The wire form of a kept STATUS (a new reference: STATUS itself when it
 * has no runs, as reports kept before runs); NULL on ENOMEM or bad runs. */
json_t *report_runs_expand(const json_t *status);
/* json_dumps(report_runs_expand(STATUS), JSON_COMPACT), the same bytes,
 * written one block entry at a time: an expansion holds one entry's
 * objects, not the whole list's.  NULL on ENOMEM or bad runs. */
char *report_runs_expand_text(const json_t *status);
/* 0, or -EINVAL with ERR (may be NULL) when STATUS's "block_runs" are
 * malformed (a count below 1, more than BLOCKJSON_MAX_BLOCKS blocks). */
int report_runs_check(const json_t *status, char *err, size_t errlen);
/* The block entries STATUS lists ("blocks" and a progress event's
 * "changed_blocks", which become "changed_block_runs" the same way). */
size_t report_runs_blocks(const json_t *status);
