/* SPDX-License-Identifier: MIT */
/*
 * The engine's typed views and reports as the JSON every adapter sends
 * (GET /v1/status, /v1/blocks, the HTTPS inventory, the channel's
 * agent_status; docs/protocol.md, docs/api/): one encoder, so the local API,
 * HTTPS, the channel and the hooks write the same shapes.  The engine
 * (agent/engine/engine.h) writes JSON in one place only, the events it
 * publishes on its bus (ops.c's progress_event(), machine.c's block
 * change), through lib/wire/report_json.c as well.
 *
 * Contract: the *_json() functions return a new reference, NULL on ENOMEM;
 * the views_engine_*() helpers read the view from the engine and encode it.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "agent/engine/engine.h"

/* GET /v1/status. */
json_t *views_status_json(const struct engine_status *s);
/* GET /v1/blocks: the table (lib/wire/blockjson.h) with each online
 * block's "owner" (a grant's id, "foreign", or null).  RUNS: blocks that
 * follow each other with the same values and owner are one entry with a
 * "count" (a machine of 65,536 blocks is a handful of runs). */
int views_blocks_json(const struct engine_blocks *b, bool runs, json_t **out);

/* GET /v1/grants/ID: the row's report with "created_at" and "updated_at". */
json_t *views_grant_json(const struct engine_grant_row *row);
/* GET /v1/grants: {"grants": [...]}, each also with "created" (seconds)
 * and "owned_blocks". */
json_t *views_grants_json(const struct engine_grant_row *rows, size_t n);

/* engine_plan()'s answer: {"type":"plan", "dry_run":true, ...}. */
json_t *views_plan_json(const struct engine_plan *p);
/* What a verdict answers, as the adapters send it: the plan, the sync's
 * reply ({"type":"sync","nonce":N}) or the status report; NULL when the
 * verdict carries none (or ENOMEM). */
json_t *views_verdict_json(const struct engine_verdict *v);

/* engine_status() encoded; NULL when it fails. */
json_t *views_engine_status(struct engine *e);
/* engine_grant() encoded; NULL when there is no such request (or ENOMEM). */
json_t *views_engine_grant(struct engine *e, const char *id);
/* engine_grants() encoded ({"grants": []} when the journal cannot be read). */
json_t *views_engine_grants(struct engine *e);
/* engine_blocks() encoded: 0 or -errno. */
int views_engine_blocks(struct engine *e, bool runs, json_t **out);

/* The engine's outboxes with their documents as jansson values (the engine
 * carries them as text): engine_outbox_peek() parsed, engine_outbox_push()
 * of DOC written compact (member order kept). */
int views_outbox_peek(struct engine *e, const char *dest, uint64_t *seq, json_t **doc);
int views_outbox_push(struct engine *e, const char *dest, const json_t *doc);
