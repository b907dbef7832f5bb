/* SPDX-License-Identifier: MIT */
/*
 * Grants and revocations in flight: the record, its status report and its
 * publication (journal, event bus, subscribers).  See ops.h.
 */
#include "agent/engine/ops.h"

#include <stdarg.h>
#include <time.h>

#include "lib/json.h"
#include "lib/wire/report_json.h"
#include "lib/wire/report_runs.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"


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
	free(o->changed_at);
	idmap_free(&o->outcome_at);
	free(o->busy);
	for (size_t i = 0; i < o->n_decisions; i++)
		free(o->decisions[i]);
	free(o->decisions);
	free(o->done);
	idmap_free(&o->done_at);
	report_clear(&o->live);
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

/* Outcome AT is in the next event and the views' next update; false on ENOMEM. */
static bool mark_changed(struct op *o, size_t at)
{
	if (o->outcomes[at].changed)
		return true;
	if (o->n_changed == o->cap_changed) {
		size_t cap = o->cap_changed ? o->cap_changed * 2 : 16;
		size_t *nc = reallocarray(o->changed_at, cap, sizeof(*nc));
		if (!nc)
			return false;
		o->changed_at = nc;
		o->cap_changed = cap;
	}
	o->changed_at[o->n_changed++] = at;
	o->outcomes[at].changed = true;
	return true;
}

void op_outcome_changed(struct op *o, size_t at)
{
	if (at < o->n_outcomes && !mark_changed(o, at))
		o->has_live = false; /* out of memory: the next publication builds the report whole */
}

struct outcome *op_outcome(struct op *o, uint64_t block, bool retry)
{
	struct outcome *no;
	uint64_t at;

	/* one outcome per block: a retried block updates its entry */
	if (retry && idmap_get(&o->outcome_at, block, &at)) {
		op_outcome_changed(o, at);
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
	op_outcome_changed(o, o->n_outcomes - 1);
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

void outcome_from_block(struct outcome *oc, const struct mem_block *b)
{
	oc->configured = b->configured;
	oc->memmap = b->memmap_on_memory;
	snprintf(oc->state, sizeof(oc->state), "%s", mem_state_name(b->state));
	/* an online block's valid_zones is its zone (A9) */
	if (b->state == MEM_STATE_ONLINE)
		mem_zones_format(b->zones, oc->zone, sizeof(oc->zone));
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

static void block_of(const struct outcome *oc, struct report_block *b)
{
	b->block = oc->block;
	b->configured = oc->configured;
	b->memmap_on_memory = oc->memmap;
	snprintf(b->state, sizeof(b->state), "%s", oc->state);
	snprintf(b->zone, sizeof(b->zone), "%s", oc->zone);
	snprintf(b->error_code, sizeof(b->error_code), "%s", oc->err_code);
	snprintf(b->error_message, sizeof(b->error_message), "%s", oc->err_msg);
}

/* O's report but its blocks (none): what every publication refreshes. */
static int report_head(struct engine *e, const struct op *o, const struct mem_table *t, struct report *r)
{
	uint64_t bs;

	memset(r, 0, sizeof(*r));
	r->agent = e->agent_id;
	snprintf(r->id, sizeof(r->id), "%s", o->msg->id);
	r->generation = o->msg->generation;
	r->state = o->state;
	r->kind = o->msg->type;
	r->requested_bytes = o->requested_bytes;
	r->applied_bytes = o->applied_bytes;
	snprintf(r->error_code, sizeof(r->error_code), "%s", o->err_code);
	snprintf(r->error_message, sizeof(r->error_message), "%s", o->err_msg);
	r->block_size = t ? t->block_size : 0;
	/* the live table's counts: O(1), and current (T may be the plan's table) */
	if (machine_memory_locked(e, &bs, &r->online_bytes, &r->standby_bytes) < 0)
		memory_figures(t, &r->online_bytes, &r->standby_bytes);
	else if (!r->block_size)
		r->block_size = bs;
	snprintf(r->source, sizeof(r->source), "%s", o->src->name);
	r->blocks_total = o->blocks_total;
	r->blocks_done = o->blocks_done;
	if (o->cancel_requested)
		snprintf(r->cancel_requested_by, sizeof(r->cancel_requested_by), "%s", o->cancel_by);
	r->busy = calloc(o->n_busy + 1, sizeof(*r->busy));
	if (!r->busy)
		goto nomem;
	for (size_t i = 0; i < o->n_busy; i++) {
		r->busy[i].block = o->busy[i].block;
		r->busy[i].attempts = o->busy[i].attempts;
		snprintf(r->busy[i].error, sizeof(r->busy[i].error), "%s", o->busy[i].err_code);
	}
	r->n_busy = o->n_busy;
	if (o->n_busy && o->budget_deadline > 0 && !msg_state_is_final(o->state)) {
		double left = o->budget_deadline - mono_s();
		r->has_budget = true;
		r->budget_ms = o->budget_ms;
		r->budget_left_ms = left > 0 ? (uint64_t)(left * 1000) : 0;
	}
	for (size_t i = 0; i < o->n_decisions; i++)
		if (report_add_decision(r, o->decisions[i]) < 0)
			goto nomem;
	return 0;
nomem:
	report_clear(r);
	return -ENOMEM;
}

int op_report(struct engine *e, const struct op *o, const struct mem_table *t, struct report *r)
{
	int rc = report_head(e, o, t, r);

	if (rc < 0)
		return rc;
	r->blocks = calloc(o->n_outcomes + 1, sizeof(*r->blocks));
	if (!r->blocks) {
		report_clear(r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < o->n_outcomes; i++)
		block_of(&o->outcomes[i], &r->blocks[r->n_blocks++]);
	return 0;
}

struct report *op_report_new(struct engine *e, const struct op *o, const struct mem_table *t)
{
	struct report *r = malloc(sizeof(*r));

	if (r && op_report(e, o, t, r) < 0) {
		free(r);
		return NULL;
	}
	return r;
}

const char *op_report_dest(const struct op *o)
{
	return o->src->flags & ENGINE_SOURCE_REPORTS ? o->src->name : NULL;
}

/* The entry of block ID in REPORT, which op_report() built in the order of
 * the outcomes: AT, ID's outcome index, finds it at once. */
static const struct report_block *report_block_at(const struct report *report, size_t at, uint64_t id)
{
	if (at < report->n_blocks && report->blocks[at].block == id)
		return &report->blocks[at];
	return report_find_block(report, id);
}

static void tell(struct engine *e, const struct engine_transition *t)
{
	for (size_t i = 0; i < e->n_subs; i++)
		e->subs[i].fn(e->subs[i].ctx, t);
}

void op_tell_locked(struct engine *e, struct op *o, const struct report *report)
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
	/* a failure is news only on an outcome that changed since the last event */
	for (size_t k = 0; k < o->n_changed; k++) {
		size_t i = o->changed_at[k];
		struct outcome *oc = &o->outcomes[i];
		if (!oc->err_code[0] || oc->failure_told)
			continue;
		oc->failure_told = true;
		t.block = oc->block;
		t.block_report = report_block_at(report, i, oc->block);
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
static json_t *progress_event(struct op *o, const struct report *report)
{
	struct report head = *report;
	json_t *ev, *changed = json_array();

	/* the report's members but its blocks: O(changed), not O(blocks) */
	head.blocks = NULL;
	head.n_blocks = 0;
	ev = report_to_json(&head);
	if (!ev || !changed) {
		json_decref(ev);
		json_decref(changed);
		return NULL;
	}
	json_object_del(ev, "blocks");
	for (size_t k = 0; k < o->n_changed; k++) {
		size_t i = o->changed_at[k];
		const struct report_block *b = report_block_at(report, i, o->outcomes[i].block);

		if (b)
			json_array_append_new(changed, report_block_json(b, report->block_size));
	}
	json_object_set_new(ev, "changed_blocks", changed);
	return ev;
}

void op_announce_locked(struct engine *e, struct op *o, const struct report *report)
{
	json_t *ev;

	bool progress = o->state == MSG_STATE_IN_PROGRESS;

	op_tell_locked(e, o, report);
	/* a whole report goes on the bus with its blocks as runs, made from
	 * the typed blocks: not one object per block */
	ev = progress ? progress_event(o, report) : report_runs_of_report(report);
	for (size_t k = 0; k < o->n_changed; k++)
		o->outcomes[o->changed_at[k]].changed = false;
	o->n_changed = o->live_synced = 0;
	if (ev) {
		if (progress)
			events_publish(e->events, ev);
		else
			events_publish_runs(e->events, ev);
		json_decref(ev);
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

/* REPORT (moved: cleared here) becomes what the views show of O. */
static void keep_live(struct op *o, struct report *report)
{
	report_clear(&o->live);
	o->live = *report;
	o->live_cap = report->n_blocks;
	o->live_synced = o->n_changed;
	memset(report, 0, sizeof(*report));
	o->has_live = true;
	o->live_at = mono_s();
}

/* The views' report of O brought up to date: its members refreshed, the
 * outcomes changed since the last update written into its blocks (an
 * outcome's index is its entry's).  0 or -ENOMEM (then rebuilt whole next). */
static int live_update(struct engine *e, struct op *o, const struct mem_table *t)
{
	struct report head;
	struct report_block *blocks = o->live.blocks;
	size_t n = o->live.n_blocks;

	if (report_head(e, o, t, &head) < 0)
		return -ENOMEM;
	for (; o->live_synced < o->n_changed; o->live_synced++) {
		size_t i = o->changed_at[o->live_synced];

		if (i >= o->live_cap) {
			size_t cap = o->live_cap ? o->live_cap * 2 : 16;
			struct report_block *nb;

			while (cap <= i)
				cap *= 2;
			nb = reallocarray(blocks, cap, sizeof(*nb));
			if (!nb) {
				o->live.blocks = blocks;
				o->has_live = false;
				report_clear(&head);
				return -ENOMEM;
			}
			blocks = o->live.blocks = nb;
			o->live_cap = cap;
		}
		/* a new outcome, and any before it the list no longer names
		 * (an event cleared it while this report was not kept up) */
		for (size_t k = i < n ? i : n; k <= i; k++) {
			memset(&blocks[k], 0, sizeof(blocks[k]));
			block_of(&o->outcomes[k], &blocks[k]);
		}
		if (i >= n)
			n = i + 1;
	}
	o->live.blocks = NULL;
	o->live.n_blocks = 0;
	report_clear(&o->live);
	o->live = head;
	o->live.blocks = blocks;
	o->live.n_blocks = n;
	return 0;
}

/* Whether a progress report of O is due now (op_publish_locked). */
static bool progress_due(const struct op *o)
{
	const struct outcome *last = o->n_outcomes ? &o->outcomes[o->n_outcomes - 1] : NULL;

	return !o->has_live || (last && last->err_code[0] && !last->failure_told) || o->blocks_done >= o->blocks_total ||
	       mono_s() - o->live_at >= OP_LIVE_INTERVAL;
}

/*
 * The journal could not record O's STEP (ERR): no answer may say more than
 * the journal holds.  O goes back to the state the journal has for it, with
 * the failure as its error (a client waiting on it hears why it stopped, not
 * "rejected" or "applied"), and the engine stops as on SIGTERM: what the
 * kernel did is read back at the next start (docs/journal.md, "When the
 * journal cannot record").
 */
static void journal_failed_locked(struct engine *e, struct op *o, int err, const char *step,
				  const struct mem_table *t)
{
	_cleanup_report_ struct report rt = { 0 };
	struct intentlog_grant g = { 0 };
	struct intentlog_stats st;

	intentlog_stats(e->journal, &st);
	o->state = intentlog_get_grant(e->journal, o->msg->id, &g) == 0 ? g.state : MSG_STATE_ACCEPTED;
	intentlog_grant_done(&g);
	snprintf(o->err_code, sizeof(o->err_code), "%s", errno_name(err));
	snprintf(o->err_msg, sizeof(o->err_msg),
		 "the journal in %s cannot record its %s (%s, %llu bytes needed): stopped as on SIGTERM, it "
		 "resumes at the next start; free space there",
		 e->state_dir, step, strerror(-err), (unsigned long long)st.failed_bytes);
	log_fields(&e->log, LOG_ERR, LOG_FIELDS(log_f_grant(o->msg->id), log_f_errno(err)),
		   "%s %s stays %s: %s; memgrantd stops", msg_type_name(o->msg->type), o->msg->id,
		   msg_state_name(o->state), o->err_msg);
	if (!e->journal_err)
		e->journal_err = err;
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	if (op_report(e, o, t, &rt) == 0) {
		op_announce_locked(e, o, &rt);
		keep_live(o, &rt);
	}
	engine_notify(e);
}

int op_intent_locked(struct engine *e, struct op *o, enum intentlog_dir dir, const struct intentlog_target *targets,
		     size_t n, const struct mem_table *t)
{
	_cleanup_report_ struct report rt = { 0 };
	enum msg_state was = o->state;
	int r;

	o->state = MSG_STATE_IN_PROGRESS;
	r = op_report(e, o, t, &rt);
	if (r == 0)
		r = intentlog_intent(e->journal, o->msg->id, dir, targets, n, &rt, op_report_dest(o));
	if (r < 0) {
		o->state = was; /* nothing was written */
		if (r != -ENOMEM && r != -EINVAL && r != -EBUSY && r != -EEXIST) /* not a refusal of the record */
			journal_failed_locked(e, o, r, "intent", t);
		return r;
	}
	o->intent_open = true;
	o->intent_dir = dir;
	done_clear(o);
	op_announce_locked(e, o, &rt);
	keep_live(o, &rt);
	return 0;
}

/* One durable result closing O's intent with REPORT. */
static int write_result_locked(struct engine *e, struct op *o, const struct report *report)
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
	_cleanup_report_ struct report rt = { 0 };
	int r;

	if (!o->intent_open)
		return 0;
	if (op_report(e, o, t, &rt) < 0)
		return -ENOMEM;
	r = write_result_locked(e, o, &rt);
	if (r < 0)
		log_err(&e->log, "%s: cannot journal its result: %s", o->msg->id, strerror(-r));
	keep_live(o, &rt);
	return r;
}

int op_publish_locked(struct engine *e, struct op *o, const struct mem_table *t)
{
	_cleanup_report_ struct report rt = { 0 };
	int r;

	if (o->intent_open && !msg_state_is_final(o->state) && o->has_live) {
		/* progress under an open intent: the kernel records it; the
		 * views' report follows per block, events at most every
		 * OP_LIVE_INTERVAL */
		bool due = progress_due(o);

		if (live_update(e, o, t) < 0)
			return -ENOMEM;
		if (due) {
			op_announce_locked(e, o, &o->live);
			o->live_at = mono_s();
		} else {
			engine_notify(e); /* status reads the counters from O itself */
		}
		return 0;
	}
	if (op_report(e, o, t, &rt) < 0)
		return -ENOMEM;
	if (o->intent_open && !msg_state_is_final(o->state)) {
		/* no report kept yet (or it was lost to ENOMEM): built whole once */
		op_announce_locked(e, o, &rt);
		keep_live(o, &rt);
		return 0;
	}
	if (o->intent_open)
		r = write_result_locked(e, o, &rt);
	else
		r = intentlog_set_state(e->journal, o->msg->id, o->state, &rt,
					msg_state_is_final(o->state) || o->state == MSG_STATE_IN_PROGRESS ? op_report_dest(o)
													   : NULL);
	if (r < 0) {
		/* announced only once journaled: a restart would reverse it */
		journal_failed_locked(e, o, r, msg_state_is_final(o->state) ? "result" : "state", t);
		return r;
	}
	op_announce_locked(e, o, &rt);
	keep_live(o, &rt);
	return r;
}
