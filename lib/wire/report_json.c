/* SPDX-License-Identifier: MIT */
/*
 * The typed status report as JSON, both ways.  See report_json.h.
 */
#include "lib/wire/report_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "lib/util.h"
#include "lib/wire/message.h"

static const char *or_null(const char *s)
{
	return s[0] ? s : NULL;
}

json_t *report_to_json(const struct report *r)
{
	_cleanup_free_ struct msg_status_block *blocks = calloc(r->n_blocks + 1, sizeof(*blocks));
	struct msg_status s = {
		.agent = r->agent,
		.id = r->id,
		.generation = r->generation,
		.state = r->state,
		.requested_bytes = r->requested_bytes,
		.applied_bytes = r->applied_bytes,
		.n_blocks = r->n_blocks,
		.error_code = or_null(r->error_code),
		.error_message = r->error_code[0] ? r->error_message : NULL,
		.block_size = r->block_size,
		.online_bytes = r->online_bytes,
		.standby_bytes = r->standby_bytes,
		.decisions = (const char *const *)r->decisions,
		.n_decisions = r->n_decisions,
		.source = or_null(r->source),
	};
	json_t *j;

	if (!blocks)
		return NULL;
	for (size_t i = 0; i < r->n_blocks; i++) {
		const struct report_block *b = &r->blocks[i];
		blocks[i] = (struct msg_status_block){
			.block = b->block,
			.configured = b->configured,
			.memmap_on_memory = b->memmap_on_memory,
			.state = or_null(b->state),
			.zone = or_null(b->zone),
			.error_code = or_null(b->error_code),
			.error_message = b->error_code[0] ? b->error_message : NULL,
		};
	}
	s.blocks = blocks;
	j = msg_status_to_json(&s);
	if (!j)
		return NULL;
	json_object_set_new(j, "kind", json_string(msg_type_name(r->kind)));
	json_object_set_new(j, "blocks_total", json_integer((json_int_t)r->blocks_total));
	json_object_set_new(j, "blocks_done", json_integer((json_int_t)r->blocks_done));
	if (r->cancel_requested_by[0])
		json_object_set_new(j, "cancel_requested_by", json_string(r->cancel_requested_by));
	/* "busy_blocks" and the budget of a revocation that retries blocks */
	if (r->n_busy) {
		json_t *arr = json_array();
		for (size_t i = 0; arr && i < r->n_busy; i++)
			json_array_append_new(arr, json_pack("{s:I,s:I,s:s}", "block", (json_int_t)r->busy[i].block,
							     "attempts", (json_int_t)r->busy[i].attempts, "error",
							     r->busy[i].error));
		json_object_set_new(j, "busy_blocks", arr);
		if (r->has_budget) {
			json_object_set_new(j, "budget_ms", json_integer((json_int_t)r->budget_ms));
			json_object_set_new(j, "budget_left_ms", json_integer((json_int_t)r->budget_left_ms));
		}
	}
	return j;
}

json_t *report_block_json(const struct report_block *b, uint64_t block_size)
{
	struct report one = { .blocks = (struct report_block *)b, .n_blocks = 1, .block_size = block_size };
	_cleanup_json_ json_t *j = report_to_json(&one);
	json_t *e = json_array_get(json_object_get(j, "blocks"), 0);

	return e ? json_incref(e) : NULL;
}

static void copy_str(char *dst, size_t len, const json_t *v)
{
	snprintf(dst, len, "%s", json_string_value(v) ?: "");
}

static uint64_t uint_of(const json_t *j, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(j, key));

	return v > 0 ? (uint64_t)v : 0;
}

static void error_of(const json_t *err, char *code, size_t code_len, char *message, size_t message_len)
{
	if (!json_is_object(err))
		return;
	snprintf(code, code_len, "%s", json_string_value(json_object_get(err, "code")) ?: "E?");
	copy_str(message, message_len, json_object_get(err, "message"));
}

int report_from_json(const json_t *j, struct report *out)
{
	const json_t *v, *mem = json_object_get(j, "memory");
	const char *kind = json_string_value(json_object_get(j, "kind"));
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(j) || !streq(json_string_value(json_object_get(j, "type")) ?: "", "status"))
		return -EINVAL;
	copy_str(out->id, sizeof(out->id), json_object_get(j, "id"));
	copy_str(out->source, sizeof(out->source), json_object_get(j, "source"));
	out->generation = uint_of(j, "generation");
	if (msg_state_parse(json_string_value(json_object_get(j, "state")) ?: "", &out->state) < 0)
		return -EINVAL;
	out->kind = kind && streq(kind, "revoke") ? MSG_REVOKE : MSG_GRANT;
	out->requested_bytes = uint_of(j, "requested_bytes");
	out->applied_bytes = uint_of(j, "applied_bytes");
	error_of(json_object_get(j, "error"), out->error_code, sizeof(out->error_code), out->error_message,
		 sizeof(out->error_message));
	out->block_size = uint_of(mem, "block_size");
	out->online_bytes = uint_of(mem, "online_bytes");
	out->standby_bytes = uint_of(mem, "standby_bytes");
	out->blocks_total = (size_t)uint_of(j, "blocks_total");
	out->blocks_done = (size_t)uint_of(j, "blocks_done");
	copy_str(out->cancel_requested_by, sizeof(out->cancel_requested_by), json_object_get(j, "cancel_requested_by"));
	v = json_object_get(j, "blocks");
	if (json_array_size(v)) {
		out->blocks = calloc(json_array_size(v), sizeof(*out->blocks));
		if (!out->blocks)
			goto nomem;
	}
	json_array_foreach(v, i, mem) {
		struct report_block *b = &out->blocks[out->n_blocks++];
		const json_t *mm = json_object_get(mem, "memmap_on_memory");

		b->block = uint_of(mem, "block");
		b->configured = json_is_true(json_object_get(mem, "configured"));
		b->memmap_on_memory = json_is_boolean(mm) ? json_is_true(mm) : -1;
		copy_str(b->state, sizeof(b->state), json_object_get(mem, "state"));
		copy_str(b->zone, sizeof(b->zone), json_object_get(mem, "zone"));
		error_of(json_object_get(mem, "error"), b->error_code, sizeof(b->error_code), b->error_message,
			 sizeof(b->error_message));
	}
	json_array_foreach(json_object_get(j, "decisions"), i, v)
		if (report_add_decision(out, json_string_value(v)) < 0)
			goto nomem;
	v = json_object_get(j, "busy_blocks");
	if (json_array_size(v)) {
		const json_t *e;
		out->busy = calloc(json_array_size(v), sizeof(*out->busy));
		if (!out->busy)
			goto nomem;
		json_array_foreach(v, i, e) {
			struct report_busy *bb = &out->busy[out->n_busy++];
			bb->block = uint_of(e, "block");
			bb->attempts = (unsigned)uint_of(e, "attempts");
			copy_str(bb->error, sizeof(bb->error), json_object_get(e, "error"));
		}
	}
	if (json_object_get(j, "budget_ms")) {
		out->has_budget = true;
		out->budget_ms = uint_of(j, "budget_ms");
		out->budget_left_ms = uint_of(j, "budget_left_ms");
	}
	return 0;
nomem:
	report_clear(out);
	return -ENOMEM;
}
