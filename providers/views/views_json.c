/* SPDX-License-Identifier: MIT */
/*
 * The engine's views as JSON.  See views_json.h.
 */
#include "providers/views/views_json.h"

#include <errno.h>
#include <string.h>

#include "lib/json.h"
#include "lib/util.h"
#include "lib/wire/blockjson.h"
#include "lib/wire/message.h"
#include "lib/wire/report_json.h"

static json_t *running_json(const struct engine_running *r)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", r->id, "kind", msg_type_name(r->kind), "state",
			      msg_state_name(r->state), "blocks_done", (json_int_t)r->blocks_done, "blocks_total",
			      (json_int_t)r->blocks_total);

	if (j && r->n_busy) {
		json_t *arr = json_array();
		for (size_t i = 0; arr && i < r->n_busy; i++)
			json_array_append_new(arr, json_pack("{s:I,s:I,s:s}", "block", (json_int_t)r->busy[i].block,
							     "attempts", (json_int_t)r->busy[i].attempts, "error",
							     r->busy[i].error));
		json_object_set_new(j, "busy_blocks", arr);
		json_object_set_new(j, "budget_ms", json_integer((json_int_t)r->budget_ms));
		json_object_set_new(j, "budget_left_ms", json_integer((json_int_t)r->budget_left_ms));
	}
	if (j && r->cancel_requested_by[0])
		json_object_set_new(j, "cancel_requested_by", json_string(r->cancel_requested_by));
	return j;
}

json_t *views_status_json(const struct engine_status *s)
{
	const struct engine_memory *m = &s->memory;
	json_t *running = s->has_running ? running_json(&s->running) : json_null();
	json_t *j;

	if (!running)
		return NULL;
	j = json_pack("{s:s,s:s,s:s,s:s,s:b,s:{s:I,s:I,s:I,s:I,s:I,s:I},s:s?,s:o,s:I,s:{s:s,s:s,s:I,s:I}}",
		      "agent", s->agent, "version", s->version, "backend", s->backend, "root", s->root, "stopping",
		      s->stopping, "memory", "block_size", (json_int_t)m->block_size, "online_bytes",
		      (json_int_t)m->online_bytes, "standby_bytes", (json_int_t)m->standby_bytes, "granted_bytes",
		      (json_int_t)m->granted_bytes, "foreign_blocks", (json_int_t)s->foreign_blocks, "foreign_bytes",
		      (json_int_t)(s->foreign_blocks * m->block_size), "auto_online_blocks",
		      s->auto_online_blocks[0] ? s->auto_online_blocks : NULL, "running", running, "queued",
		      (json_int_t)s->queued, "policy", "memmap_on_memory", s->policy_memmap, "zone", s->policy_zone,
		      "reserve", (json_int_t)s->policy_reserve, "movable_ratio", (json_int_t)s->policy_movable_ratio);
	/* mid-operation a block is neither online nor standby: online +
	 * standby + in_flight = total */
	if (j && s->have_memory) {
		json_t *mem = json_object_get(j, "memory");
		json_object_set_new(mem, "in_flight_bytes", json_integer((json_int_t)s->in_flight_bytes));
		json_object_set_new(mem, "total_bytes", json_integer((json_int_t)s->total_bytes));
	}
	return j;
}

static bool same_values(const struct mem_block *a, const struct mem_block *b)
{
	return a->in_firmware == b->in_firmware && a->configured == b->configured &&
	       a->memmap_on_memory == b->memmap_on_memory && a->state == b->state && a->removable == b->removable &&
	       a->node == b->node && a->zones == b->zones;
}

static json_t *owner_json(const struct engine_blocks *b, size_t i)
{
	if (b->owner[i] == ENGINE_OWNER_FOREIGN)
		return json_string("foreign");
	return b->owner[i] >= 0 ? json_string(engine_blocks_grant(b, i)) : json_null();
}

int views_blocks_json(const struct engine_blocks *b, bool runs, json_t **out)
{
	const struct mem_table *t = b->table;
	_cleanup_json_ json_t *j = NULL;
	json_t *arr, *run = NULL;
	size_t count = 0;
	int r;

	if (!runs) {
		r = blockjson_from_table(t, &j);
	} else {
		/* the table's fields without its blocks, then the runs */
		struct mem_table head = *t;

		head.n = 0;
		r = blockjson_from_table(&head, &j);
	}
	if (r < 0)
		return r;
	arr = json_object_get(j, "blocks");
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *mb = &t->blocks[i];
		json_t *e;

		if (runs && run && mb->id == t->blocks[i - 1].id + 1 && same_values(mb, &t->blocks[i - 1]) &&
		    b->owner[i] == b->owner[i - 1]) {
			json_object_set_new(run, "count", json_integer((json_int_t)++count));
			continue;
		}
		if (!runs) {
			e = json_array_get(arr, i);
		} else {
			r = blockjson_from_block(t, mb, &e);
			if (r < 0)
				return r;
			if (json_array_append_new(arr, e) < 0)
				return -ENOMEM;
			run = e;
			count = 1;
			json_object_set_new(run, "count", json_integer(1));
		}
		json_object_set_new(e, "owner", owner_json(b, i));
	}
	*out = TAKE_PTR(j);
	return 0;
}

/* "created_at"/"updated_at" (RFC 3339 UTC) of a row. */
static void set_times(json_t *j, const struct engine_grant_row *row)
{
	char when[32];

	msg_time_format(row->created, when);
	json_object_set_new(j, "created_at", json_string(when));
	msg_time_format(row->updated, when);
	json_object_set_new(j, "updated_at", json_string(when));
}

json_t *views_grant_json(const struct engine_grant_row *row)
{
	json_t *j = row->has_report ? report_to_json(&row->report) : json_object();

	if (!j)
		return NULL;
	set_times(j, row);
	if (row->has_now) {
		/* what the grant holds now; its last report as history */
		json_t *back = json_array(), *hist = report_to_json(&row->history);

		for (size_t i = 0; back && i < row->n_given_back; i++)
			json_array_append_new(back, json_pack("{s:I,s:s}", "block", (json_int_t)row->given_back[i].block,
							      "by", row->given_back[i].by[0] ? row->given_back[i].by
											    : "outside memgrant"));
		if (!back || !hist) {
			json_decref(back);
			json_decref(hist);
			json_decref(j);
			return NULL;
		}
		json_object_set_new(j, "state", json_string(row->held_blocks ? "reduced" : "revoked"));
		json_object_set_new(j, "given_back", back);
		json_object_set_new(j, "report", hist);
	}
	return j;
}

/* A row as the list shows it. */
static json_t *row_json_list(const struct engine_grant_row *row)
{
	json_t *j = row->has_report ? report_to_json(&row->report) : json_object();

	if (!j)
		return NULL;
	json_object_set_new(j, "created", json_integer((json_int_t)row->created));
	set_times(j, row);
	json_object_set_new(j, "owned_blocks", json_integer((json_int_t)row->owned_blocks));
	return j;
}

json_t *views_grants_json(const struct engine_grant_row *rows, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++) {
		json_t *s = row_json_list(&rows[i]);
		if (!s || json_array_append_new(arr, s) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr ? json_pack("{s:o}", "grants", arr) : NULL;
}

json_t *views_engine_grant(struct engine *e, const char *id)
{
	struct engine_grant_row row;
	json_t *j;

	if (engine_grant(e, id, &row) < 0)
		return NULL;
	j = views_grant_json(&row);
	engine_grant_row_clear(&row);
	return j;
}

json_t *views_engine_grants(struct engine *e)
{
	struct engine_grant_row *rows = NULL;
	size_t n = 0;
	json_t *j;

	if (engine_grants(e, &rows, &n) < 0)
		n = 0;
	j = views_grants_json(rows, n);
	engine_grant_rows_free(rows, n);
	return j;
}

static json_t *plan_block_json(const struct engine_plan_block *b, uint64_t block_size)
{
	char range[MSG_RANGE_MAX + 1];
	uint64_t first = b->block * block_size;
	json_t *j;

	snprintf(range, sizeof(range), "0x%016llx-0x%016llx", (unsigned long long)first,
		 (unsigned long long)(first + block_size - 1));
	j = json_pack("{s:I,s:s}", "block", (json_int_t)b->block, "range", range);
	if (j && b->decided) {
		json_object_set_new(j, "memmap_on_memory", b->memmap < 0 ? json_null() : json_boolean(b->memmap == 1));
		json_object_set_new(j, "zone", json_string(b->zone));
	}
	return j;
}

json_t *views_plan_json(const struct engine_plan *p)
{
	_cleanup_json_ json_t *j = json_pack("{s:s,s:b,s:s,s:I,s:I,s:s}", "type", "plan", "dry_run", 1, "kind",
					     msg_type_name(p->kind), "requested_bytes", (json_int_t)p->requested_bytes,
					     "block_size", (json_int_t)p->block_size, "reason", p->reason);
	json_t *blocks = json_array(), *decisions = json_array();

	if (!j || !blocks || !decisions) {
		json_decref(blocks);
		json_decref(decisions);
		return NULL;
	}
	for (size_t i = 0; i < p->n_blocks; i++)
		json_array_append_new(blocks, plan_block_json(&p->blocks[i], p->block_size));
	for (size_t i = 0; i < p->n_decisions; i++)
		json_array_append_new(decisions, json_string(p->decisions[i]));
	if (p->grant) {
		json_object_set_new(j, "memmap_on_memory", p->memmap < 0 ? json_null() : json_boolean(p->memmap == 1));
		json_object_set_new(j, "zone", json_string(p->zone));
		json_object_set_new(j, "decisions", decisions);
		json_object_set_new(j, "memmap_bytes", json_integer((json_int_t)p->memmap_bytes));
		json_object_set_new(j, "memmap_in_granted_bytes", json_integer((json_int_t)p->memmap_in_granted_bytes));
		json_object_set_new(j, "online_cost_bytes", json_integer((json_int_t)p->online_cost_bytes));
		json_object_set_new(j, "usable_bytes", json_integer((json_int_t)p->usable_bytes));
		json_object_set_new(j, "online_bytes_before", json_integer((json_int_t)p->online_bytes_before));
		json_object_set_new(j, "online_bytes_after", json_integer((json_int_t)p->online_bytes_after));
		if (p->memmap_kernel_chose)
			json_object_set_new(j, "memmap_note",
					    json_string("no firmware interface: the kernel chose memmap_on_memory when it "
							"added the blocks; the cost assumes the memmap is online memory"));
	} else {
		json_object_set_new(j, "decisions", decisions);
		json_object_set_new(j, "online_bytes_before", json_integer((json_int_t)p->online_bytes_before));
		json_object_set_new(j, "online_bytes_after", json_integer((json_int_t)p->online_bytes_after));
	}
	json_object_set_new(j, "blocks", blocks);
	return TAKE_PTR(j);
}

json_t *views_verdict_json(const struct engine_verdict *v)
{
	if (v->plan)
		return views_plan_json(v->plan);
	if (v->sync)
		return msg_sync_reply_json(v->nonce);
	return v->report ? report_to_json(v->report) : NULL;
}

json_t *views_engine_status(struct engine *e)
{
	struct engine_status s;
	json_t *j;

	if (engine_status(e, &s) < 0)
		return NULL;
	j = views_status_json(&s);
	engine_status_done(&s);
	return j;
}

int views_engine_blocks(struct engine *e, bool runs, json_t **out)
{
	struct engine_blocks b;
	int r = engine_blocks(e, &b);

	if (r < 0)
		return r;
	r = views_blocks_json(&b, runs, out);
	engine_blocks_done(&b);
	return r;
}

int views_outbox_peek(struct engine *e, const char *dest, uint64_t *seq, json_t **doc)
{
	_cleanup_free_ char *text = NULL;
	int r = engine_outbox_peek(e, dest, seq, &text);

	if (r < 0)
		return r;
	*doc = json_loads(text, 0, NULL);
	return *doc ? 0 : -EBADMSG;
}

int views_outbox_push(struct engine *e, const char *dest, const json_t *doc)
{
	_cleanup_free_ char *text = json_dumps(doc, JSON_COMPACT);

	return text ? engine_outbox_push(e, dest, text) : -ENOMEM;
}
