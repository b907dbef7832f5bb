/* SPDX-License-Identifier: MIT */
/*
 * mem_table <-> JSON (jansson), the shape of GET /v1/blocks and of
 * `memgrantctl ... --json` output:
 *
 *   { "block_size": 134217728, "has_firmware": true,
 *     "auto_online_blocks": "offline" | null,
 *     "memmap_on_memory_param": "Y" | null,
 *     "blocks": [ { "id": 16, "start": 2147483648, "in_firmware": true,
 *                   "configured": false, "memmap_on_memory": true | null,
 *                   "state": "offline", "removable": true | null,
 *                   "node": 0 | null, "zones": "" } ] }
 *
 * A block may carry "count": N, a run of N blocks from "id" on with the same
 * values (GET /v1/blocks?runs=1); a table holds at most BLOCKJSON_MAX_BLOCKS.
 *
 * null stands for "unknown / no such file" (the -1 of struct mem_block).
 * from_json checks every type and value and returns -EINVAL with a message
 * naming the offending field ("blocks[3].state: expected one of ...");
 * it never returns a half-filled table.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "hotplug/block.h"

/* 2^24 blocks: 2 PiB in 128M blocks, 4 TiB in 256K ones */
#define BLOCKJSON_MAX_BLOCKS (1u << 24)

/* New reference in *OUT.  0 or -ENOMEM. */
int blockjson_from_table(const struct mem_table *t, json_t **out);
int blockjson_from_block(const struct mem_table *t, const struct mem_block *b, json_t **out);

/* Parses J into a new table (sorted by id).  0, -EINVAL (ERR says why), -ENOMEM. */
int blockjson_to_table(const json_t *j, struct mem_table **out, char *err, size_t errlen);
/* One block object; START is checked against BLOCK_SIZE when present. */
int blockjson_to_block(const json_t *j, uint64_t block_size, struct mem_block *out,
		       char *err, size_t errlen);
