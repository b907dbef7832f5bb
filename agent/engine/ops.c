/* SPDX-License-Identifier: MIT */
/*
 * Grants and revocations in flight: the record, its status report and its
 * publication (journal, event bus, subscribers).  See ops.h.
 */
#include "agent/engine/ops.h"

#include <stdarg.h>
#include <time.h>

#include "lib/json.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"


struct op *op_new(struct msg *m, const struct engine_source *src)
{
	struct op *o = calloc(1, sizeof(*o));

	if (!o) {
		msg_free(m);
		return NULL;
	}
	o->msg = m;
	o->src = src;
	o->told_state = -1;
	return o;
}

void op_free(struct op *o)
{
	if (!o)
		return;
	msg_free(o->msg);
	free(o->outcomes);
	idmap_free(&o->outcome_at);
	free(o->busy);
	for (size_t i = 0; i < o->n_decisions; i++)
		free(o->decisions[i]);
	free(o->decisions);
	free(o->done);
	idmap_free(&o->done_at);
	json_decref(o->live);
	free(o);
}

void op_add_decision(struct op *o, const char *fmt, ...)
{
	char **nd = reallocarray(o->decisions, o->n_decisions + 1, sizeof(*nd));
	va_list ap;
	char *s;

	if (!nd)
		return;
	o->decisions = nd;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) >= 0)
		o->decisions[o->n_decisions++] = s;
	va_end(ap);
}

struct outcome *op_outcome(struct op *o, uint64_t block, bool retry)
{
	struct outcome *no;
	uint64_t at;

	/* one outcome per block: a retried block updates its entry */
	if (retry && idmap_get(&o->outcome_at, block, &at)) {
		o->outcomes[at].changed = true;
		return &o->outcomes[at];
	}
	if (o->n_outcomes == o->cap_outcomes) {
		size_t cap = o->cap_outcomes ? o->cap_outcomes * 2 : 16;
		no = reallocarray(o->outcomes, cap, sizeof(*no));
		if (!no)
			return NULL;
		o->outcomes = no;
		o->cap_outcomes = cap;
	}
	if (!idmap_get(&o->outcome_at, block, NULL) && idmap_put(&o->outcome_at, block, o->n_outcomes) < 0)
		return NULL;
	no = &o->outcomes[o->n_outcomes++];
	memset(no, 0, sizeof(*no));
	no->block = block;
	no->memmap = -1;
	no->changed = true;
	return no;
}

struct busy_block *op_busy(struct op *o, uint64_t block, bool create)
{
	struct busy_block *nb;

	for (size_t i = 0; i < o->n_busy; i++)
		if (o->busy[i].block == block)
			return &o->busy[i];
	if (!create)
		return NULL;
	nb = reallocarray(o->busy, o->n_busy + 1, sizeof(*nb));
	if (!nb)
		return NULL;
	o->busy = nb;
	nb = &o->busy[o->n_busy++];
	memset(nb, 0, sizeof(*nb));
	nb->block = block;
	return nb;
}

void op_busy_drop(struct op *o, uint64_t block)
{
	for (size_t i = 0; i < o->n_busy; i++)
		if (o->busy[i].block == block) {
			o->busy[i] = o->busy[--o->n_busy];
			return;
		}
}

/* "busy_blocks" and the budget of a revocation that retries blocks. */
static void report_busy(const struct op *o, json_t *j)
{
	json_t *arr;

	if (!o->n_busy)
		return;
	arr = json_array();
	for (size_t i = 0; i < o->n_busy; i++)
		json_array_append_new(arr, json_pack("{s:I,s:I,s:s}", "block", (json_int_t)o->busy[i].block, "attempts",
						     (json_int_t)o->busy[i].attempts, "error", o->busy[i].err_code));
	json_object_set_new(j, "busy_blocks", arr);
	if (o->budget_deadline > 0 && !msg_state_is_final(o->state)) {
		double left = o->budget_deadline - mono_s();
		json_object_set_new(j, "budget_ms", json_integer((json_int_t)o->budget_ms));
		json_object_set_new(j, "budget_left_ms", json_integer(left > 0 ? (json_int_t)(left * 1000) : 0));
	}
}

void outcome_from_block(struct outcome *oc, const struct mem_block *b)
{
	oc->configured = b->configured;
	oc->memmap = b->memmap_on_memory;
	snprintf(oc->state, sizeof(oc->state), "%s", mem_state_name(b->state));
	/* an online block's valid_zones is its zone (A9) */
	if (b->state == MEM_STATE_ONLINE)
		snprintf(oc->zone, sizeof(oc->zone), "%s", b->zones);
	else
		oc->zone[0] = '\0';
}

void memory_figures(const struct mem_table *t, uint64_t *online, uint64_t *standby)
{
	*online = *standby = 0;
	for (size_t i = 0; t && i < t->n; i++) {
		if (t->blocks[i].configured && t->blocks[i].state == MEM_STATE_ONLINE)
			*online += t->block_size;
		else if (mem_block_is_standby(&t->blocks[i]))
			*standby += t->block_size;
	}
}

json_t *op_report(struct engine *e, const struct op *o, const struct mem_table *t)
{
	_cleanup_free_ struct msg_status_block *blocks = calloc(o->n_outcomes + 1, sizeof(*blocks));
	struct msg_status s = {
		.agent = e->agent_id,
		.id = o->msg->id,
		.generation = o->msg->generation,
		.state = o->state,
		.requested_bytes = o->requested_bytes,
		.applied_bytes = o->applied_bytes,
		.n_blocks = o->n_outcomes,
		.error_code = o->err_code[0] ? o->err_code : NULL,
		.error_message = o->err_code[0] ? o->err_msg : NULL,
		.block_size = t ? t->block_size : 0,
		.decisions = (const char *const *)o->decisions,
		.n_decisions = o->n_decisions,
		.source = o->src->name,
	};
	uint64_t bs;
	json_t *j;

	if (!blocks)
		return NULL;
	for (size_t i = 0; i < o->n_outcomes; i++) {
		const struct outcome *oc = &o->outcomes[i];
		blocks[i] = (struct msg_status_block){
			.block = oc->block,
			.configured = oc->configured,
			.memmap_on_memory = oc->memmap,
			.state = oc->state[0] ? oc->state : NULL,
			.zone = oc->zone[0] ? oc->zone : NULL,
			.error_code = oc->err_code[0] ? oc->err_code : NULL,
			.error_message = oc->err_code[0] ? oc->err_msg : NULL,
		};
	}
	s.blocks = blocks;
	/* the live table's counts: O(1), and current (T may be the plan's table) */
	if (machine_memory_locked(e, &bs, &s.online_bytes, &s.standby_bytes) < 0)
		memory_figures(t, &s.online_bytes, &s.standby_bytes);
	else if (!s.block_size)
		s.block_size = bs;
	j = msg_status_to_json(&s);
	if (j) {
		json_object_set_new(j, "kind", json_string(msg_type_name(o->msg->type)));
		json_object_set_new(j, "blocks_total", json_integer((json_int_t)o->blocks_total));
		json_object_set_new(j, "blocks_done", json_integer((json_int_t)o->blocks_done));
		if (o->cancel_requested)
			json_object_set_new(j, "cancel_requested_by", json_string(o->cancel_by));
		report_busy(o, j);
	}
	return j;
}

const char *op_report_dest(const struct op *o)
{
	return o->src->flags & ENGINE_SOURCE_REPORTS ? o->src->name : NULL;
}

/* The entry of block ID in REPORT's "blocks", which op_report() built in the
 * order of the outcomes: AT, ID's outcome index, finds it at once. */
static const json_t *report_block(const json_t *report, size_t at, uint64_t id)
{
	const json_t *list = json_object_get(report, "blocks"), *b = json_array_get(list, at);
	size_t i;

	if (b && (uint64_t)json_integer_value(json_object_get(b, "block")) == id)
		return b;
	json_array_foreach(list, i, b)
		if ((uint64_t)json_integer_value(json_object_get(b, "block")) == id)
			return b;
	return NULL;
}

static void tell(struct engine *e, const struct engine_transition *t)
{
	for (size_t i = 0; i < e->n_subs; i++)
		e->subs[i].fn(e->subs[i].ctx, t);
}

void op_tell_locked(struct engine *e, struct op *o, const json_t *report)
{
	struct engine_transition t = {
		.type = o->msg->type,
		.id = o->msg->id,
		.generation = o->msg->generation,
		.state = o->state,
		.source = o->src->name,
		.requested_bytes = o->requested_bytes,
		.applied_bytes = o->applied_bytes,
		.report = report,
	};

	if (!e->n_subs)
		return;
	t.kind = ENGINE_T_BLOCK_FAILED;
	for (size_t i = 0; i < o->n_outcomes; i++) {
		struct outcome *oc = &o->outcomes[i];
		if (!oc->err_code[0] || oc->failure_told)
			continue;
		oc->failure_told = true;
		t.block = oc->block;
		t.block_report = report_block(report, i, oc->block);
		tell(e, &t);
	}
	if (o->told_state != (int)o->state) {
		o->told_state = (int)o->state;
		t.kind = ENGINE_T_STATE;
		t.block = 0;
		t.block_report = NULL;
		tell(e, &t);
	}
}

/* The event of an operation in progress: the report without its block list,
 * with the blocks that changed since the previous event.  A revocation that
 * retries two busy blocks of 128 publishes on every attempt; each event is
 * then a few hundred bytes instead of the whole list (docs/performance.md). */
static json_t *progress_event(struct op *o, const json_t *report)
{
	json_t *ev = json_object(), *changed = json_array(), *v;
	const char *key;

	if (!ev || !changed) {
		json_decref(ev);
		json_decref(changed);
		return NULL;
	}
	json_object_foreach((json_t *)report, key, v)
		if (!streq(key, "blocks"))
			json_object_set(ev, key, v);
	for (size_t i = 0; i < o->n_outcomes; i++) {
		const json_t *b;
		if (!o->outcomes[i].changed)
			continue;
		b = report_block(report, i, o->outcomes[i].block);
		if (b)
			json_array_append_new(changed, json_deep_copy(b));
	}
	json_object_set_new(ev, "changed_blocks", changed);
	return ev;
}

void op_announce_locked(struct engine *e, struct op *o, json_t *report)
{
	json_t *copy;

	op_tell_locked(e, o, report);
	/* the bus adds its "seq" to what it publishes: it gets a copy */
	copy = o->state == MSG_STATE_IN_PROGRESS ? progress_event(o, report) : json_deep_copy(report);
	for (size_t i = 0; i < o->n_outcomes; i++)
		o->outcomes[i].changed = false;
	if (copy) {
		events_publish(e->events, copy);
		json_decref(copy);
	}
	pthread_cond_broadcast(&e->outbox_cond);
	engine_notify(e);
}

/* No block is done under O's intent (a new intent, or its result written). */
static void done_clear(struct op *o)
{
	o->n_done = 0;
	idmap_clear(&o->done_at);
}

int op_done_add(struct op *o, uint64_t block, enum mem_zone zone, bool memmap)
{
	int r;

	if (o->n_done == o->cap_done) {
		size_t cap = o->cap_done ? o->cap_done * 2 : 16;
		struct intentlog_done *nd = reallocarray(o->done, cap, sizeof(*nd));
		if (!nd)
			return -ENOMEM;
		o->done = nd;
		o->cap_done = cap;
	}
	r = idmap_get(&o->done_at, block, NULL) ? 0 : idmap_put(&o->done_at, block, o->n_done);
	if (r < 0)
		return r;
	o->done[o->n_done++] = (struct intentlog_done){ .block = block, .zone = zone, .memmap = memmap };
	return 0;
}

const struct intentlog_done *op_done_find(const struct op *o, uint64_t block)
{
	uint64_t at;

	return idmap_get(&o->done_at, block, &at) ? &o->done[at] : NULL;
}

bool op_done_remove(struct op *o, uint64_t block)
{
	uint64_t at;

	if (!idmap_get(&o->done_at, block, &at))
		return false;
	/* rare (a block left outside memgrant): the later entries move up */
	memmove(&o->done[at], &o->done[at + 1], (o->n_done - at - 1) * sizeof(*o->done));
	o->n_done--;
	idmap_del(&o->done_at, block);
	for (size_t i = at; i < o->n_done; i++)
		(void)idmap_put(&o->done_at, o->done[i].block, i); /* replaces: no allocation */
	return true;
}

static void keep_live(struct op *o, json_t *report)
{
	json_decref(o->live);
	o->live = json_incref(report);
	o->live_at = mono_s();
}

/* Whether a progress report of O is due now (op_publish_locked). */
static bool progress_due(const struct op *o)
{
	const struct outcome *last = o->n_outcomes ? &o->outcomes[o->n_outcomes - 1] : NULL;

	return !o->live || (last && last->err_code[0] && !last->failure_told) || o->blocks_done >= o->blocks_total ||
	       mono_s() - o->live_at >= OP_LIVE_INTERVAL;
}

int op_intent_locked(struct engine *e, struct op *o, enum intentlog_dir dir, const struct intentlog_target *targets,
		     size_t n, const struct mem_table *t)
{
	_cleanup_json_ json_t *report = NULL;
	enum msg_state was = o->state;
	int r;

	o->state = MSG_STATE_IN_PROGRESS;
	report = op_report(e, o, t);
	r = report ? intentlog_intent(e->journal, o->msg->id, dir, targets, n, report, op_report_dest(o)) : -ENOMEM;
	if (r < 0) {
		o->state = was; /* nothing was written: the caller ends it as it was */
		return r;
	}
	o->intent_open = true;
	o->intent_dir = dir;
	done_clear(o);
	keep_live(o, report);
	op_announce_locked(e, o, report);
	return 0;
}

/* One durable result closing O's intent with REPORT. */
static int write_result_locked(struct engine *e, struct op *o, json_t *report)
{
	int r = intentlog_result(e->journal, o->msg->id, o->state, o->applied_bytes, o->done, o->n_done, report,
				 op_report_dest(o));

	/* on failure the intent stays open on disk: the next start re-reads
	 * the kernel for its blocks, which is what this result would say */
	o->intent_open = false;
	done_clear(o);
	return r;
}

int op_close_intent_locked(struct engine *e, struct op *o, const struct mem_table *t)
{
	_cleanup_json_ json_t *report = NULL;
	int r;

	if (!o->intent_open)
		return 0;
	report = op_report(e, o, t);
	if (!report)
		return -ENOMEM;
	r = write_result_locked(e, o, report);
	if (r < 0)
		log_err(&e->log, "%s: cannot journal its result: %s", o->msg->id, strerror(-r));
	keep_live(o, report);
	return r;
}

int op_publish_locked(struct engine *e, struct op *o, const struct mem_table *t)
{
	_cleanup_json_ json_t *report = NULL;
	int r;

	if (o->intent_open && !msg_state_is_final(o->state) && !progress_due(o)) {
		engine_notify(e); /* status reads the counters from O itself */
		return 0;
	}
	report = op_report(e, o, t);
	if (!report)
		return -ENOMEM;
	if (o->intent_open && !msg_state_is_final(o->state)) {
		/* progress under an open intent: the kernel records it */
		keep_live(o, report);
		op_announce_locked(e, o, report);
		return 0;
	}
	if (o->intent_open)
		r = write_result_locked(e, o, report);
	else
		r = intentlog_set_state(e->journal, o->msg->id, o->state, report,
					msg_state_is_final(o->state) || o->state == MSG_STATE_IN_PROGRESS ? op_report_dest(o)
													   : NULL);
	if (r < 0)
		log_err(&e->log, "%s: cannot journal state %s: %s", o->msg->id, msg_state_name(o->state),
			strerror(-r));
	keep_live(o, report);
	op_announce_locked(e, o, report);
	return r;
}
