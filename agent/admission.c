/* SPDX-License-Identifier: MIT */
/*
 * Admission of grants and revocations: numbering, generations, the precheck
 * against the kernel's table, the journal record, the queue.  See admission.h.
 */
#include "admission.h"

#include <time.h>

#include "../hotplug/policy.h"
#include "../lib/size.h"
#include "../lib/util.h"
#include "engine_impl.h"

#define _cleanup_json_ _cleanup_(json_decrefp) /* json_decrefp comes with jansson */

/* How far an operator's own numbering may jump ahead of the last generation. */
#define OPERATOR_GENERATION_STEP_MAX 1000000

/* Ownership list for the planner (the journal and the running operation's
 * open intent, machine.h); called with e->lock held. */
int owned_list_locked(struct engine *e, struct owned_block **out, size_t *n)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	struct owned_block *ob;
	size_t k = 0;
	int r = machine_owned_blocks_locked(e, &jb, &k);

	if (r < 0)
		return r;
	ob = calloc(k + 1, sizeof(*ob));
	if (!ob)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		ob[i].id = jb[i].block;
		ob[i].seq = jb[i].seq;
		ob[i].zone = jb[i].zone;
		snprintf(ob[i].grant_id, sizeof(ob[i].grant_id), "%s", jb[i].grant_id);
	}
	*out = ob;
	*n = k;
	return 0;
}

void fill_grant_request(const struct msg *m, struct grant_request *req)
{
	memset(req, 0, sizeof(*req));
	switch (m->target) {
	case MSG_BY_BLOCKS:
		req->by = GRANT_BY_BLOCKS;
		req->ids = m->blocks;
		req->n_ids = m->n_blocks;
		break;
	case MSG_BY_RANGES:
		req->by = GRANT_BY_RANGES;
		req->ranges = (const char *const *)m->ranges;
		req->n_ranges = m->n_ranges;
		break;
	default:
		req->by = GRANT_BY_SIZE;
		req->size = m->size;
		break;
	}
	req->source = PLAN_SOURCE_AUTO;
}

void fill_revoke_request(const struct msg *m, struct revoke_request *req)
{
	memset(req, 0, sizeof(*req));
	switch (m->target) {
	case MSG_BY_BLOCKS:
		req->by = REVOKE_BY_BLOCKS;
		req->ids = m->blocks;
		req->n_ids = m->n_blocks;
		break;
	case MSG_BY_GRANT:
		req->by = REVOKE_BY_GRANT;
		req->grant_id = m->grant;
		break;
	default:
		req->by = REVOKE_BY_SIZE;
		req->size = m->size;
		break;
	}
}

static uint64_t queued_bytes_locked(struct engine *e, enum msg_type type)
{
	uint64_t sum = 0;

	for (struct op *o = e->queue_head; o; o = o->next)
		if (o->msg->type == type)
			sum += o->requested_bytes;
	if (e->running && e->running->msg->type == type)
		sum += e->running->requested_bytes - e->running->applied_bytes;
	return sum;
}

/* The explicit block ids of a grant by blocks or ranges (ranges expanded). */
int explicit_ids(const struct msg *m, uint64_t block_size, uint64_t **out, size_t *n)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (m->target == MSG_BY_BLOCKS) {
		ids = calloc(m->n_blocks + 1, sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		memcpy(ids, m->blocks, m->n_blocks * sizeof(*ids));
		k = m->n_blocks;
	} else if (m->target == MSG_BY_RANGES) {
		for (size_t i = 0; i < m->n_ranges; i++) {
			uint64_t first, last;
			char why[128];
			uint64_t *more;
			if (plan_parse_range(m->ranges[i], block_size, &first, &last, why, sizeof(why)) < 0)
				return -EINVAL;
			if (last - first >= (1u << 20))
				return -E2BIG;
			more = reallocarray(ids, k + (size_t)(last - first) + 2, sizeof(*ids));
			if (!more)
				return -ENOMEM;
			ids = more;
			for (uint64_t b = first; b <= last; b++)
				ids[k++] = b;
		}
	}
	*out = TAKE_PTR(ids);
	*n = k;
	return 0;
}


/* Bytes a message asks for, as far as it says by itself (0 for "undo grant X"). */
static uint64_t requested_of(const struct msg *m, uint64_t block_size)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0;

	if (m->target == MSG_BY_SIZE)
		return m->size;
	if (m->target == MSG_BY_GRANT || explicit_ids(m, block_size, &ids, &n) < 0)
		return 0;
	return (uint64_t)n * block_size;
}

/* Adds the blocks O names explicitly to the ownership list *OWNED: promised,
 * so no other grant may be planned onto them. */
static int reserve_explicit(const struct op *o, uint64_t block_size, struct owned_block **owned, size_t *n_owned,
			    uint64_t *reserved)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0;
	struct owned_block *more;

	if (o->msg->type != MSG_GRANT || explicit_ids(o->msg, block_size, &ids, &n) < 0 || n == 0)
		return 0;
	more = reallocarray(*owned, *n_owned + n + 1, sizeof(*more));
	if (!more)
		return -ENOMEM;
	*owned = more;
	for (size_t i = 0; i < n; i++) {
		bool dup = false;
		for (size_t j = 0; j < *n_owned && !dup; j++)
			dup = more[j].id == ids[i];
		if (dup)
			continue;
		memset(&more[*n_owned], 0, sizeof(more[*n_owned]));
		more[*n_owned].id = ids[i];
		snprintf(more[*n_owned].grant_id, sizeof(more[*n_owned].grant_id), "%s", o->msg->id);
		(*n_owned)++;
	}
	/* its bytes are counted as blocks now, not as an anonymous reservation */
	*reserved -= *reserved >= (uint64_t)n * block_size ? (uint64_t)n * block_size : *reserved;
	return 0;
}

/*
 * Checks M against the kernel's current table before it is accepted.  Blocks
 * promised to queued grants count as taken, so two grants are never promised
 * the same memory.  Returns 0 with *REQUESTED set, or -errno with ERR filled.
 * Called with e->lock held.
 */
static int precheck_locked(struct engine *e, const struct msg *m, const struct mem_table *t,
			   uint64_t *requested, struct plan **plan_out, struct msg_error *err)
{
	_cleanup_free_ struct owned_block *owned = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	size_t n_owned = 0;
	int r;

	if (m->has_not_after && m->not_after <= time(NULL)) {
		char when[32];
		msg_time_format(m->not_after, when);
		return msg_error_set(err, ETIME, "%s %s expired at %s (not_after): nothing applied",
				     msg_type_name(m->type), m->id, when);
	}
	r = owned_list_locked(e, &owned, &n_owned);
	if (r < 0)
		return msg_error_set(err, r, "cannot read the journal's block list");

	if (m->type == MSG_GRANT) {
		struct grant_request req;
		uint64_t reserved = queued_bytes_locked(e, MSG_GRANT);

		/* blocks named by queued or running grants are promised already */
		for (struct op *o = e->queue_head; o; o = o->next)
			if (reserve_explicit(o, t->block_size, &owned, &n_owned, &reserved) < 0)
				return msg_error_set(err, ENOMEM, "out of memory");
		if (e->running && reserve_explicit(e->running, t->block_size, &owned, &n_owned, &reserved) < 0)
			return msg_error_set(err, ENOMEM, "out of memory");
		uint64_t avail = plan_available_bytes(t, PLAN_SOURCE_AUTO, owned, n_owned);

		fill_grant_request(m, &req);
		r = plan_grant(t, &req, owned, n_owned, &p);
		if (r < 0)
			return msg_error_set(err, r, "%s", p ? p->reason : "cannot plan the grant");
		if (p->want_bytes > avail - (reserved < avail ? reserved : avail)) {
			char a[16], q[16], w[16];
			size_format(p->want_bytes, w, sizeof(w));
			size_format(avail, a, sizeof(a));
			size_format(reserved, q, sizeof(q));
			return msg_error_set(err, ENOSPC,
					     "%s requested, %s standby available of which %s is promised to queued grants",
					     w, a, q);
		}
		*requested = p->want_bytes;
		if (plan_out)
			*plan_out = TAKE_PTR(p);
	} else {
		struct revoke_request req;
		uint64_t owned_bytes = (uint64_t)n_owned * t->block_size;
		uint64_t pending_grants = queued_bytes_locked(e, MSG_GRANT);
		uint64_t pending_revokes = queued_bytes_locked(e, MSG_REVOKE);

		fill_revoke_request(m, &req);
		r = plan_revoke(t, &req, owned, n_owned, &p);
		/* a revocation of a grant still queued is planned when it runs */
		if (r == -ENOENT && m->target == MSG_BY_GRANT) {
			bool queued = false;
			for (struct op *o = e->queue_head; o; o = o->next)
				queued |= streq(o->msg->id, m->grant);
			if (e->running && streq(e->running->msg->id, m->grant))
				queued = true;
			if (queued) {
				*requested = 0;
				if (plan_out)
					return msg_error_set(err, EAGAIN, "grant %s has not run yet: its revocation is planned "
							     "when it runs", m->grant);
				return 0;
			}
		}
		if (r < 0)
			return msg_error_set(err, r, "%s", p ? p->reason : "cannot plan the revocation");
		if (m->target == MSG_BY_SIZE &&
		    m->size > owned_bytes + pending_grants - (pending_revokes < owned_bytes + pending_grants
								      ? pending_revokes : owned_bytes + pending_grants)) {
			char w[16], o[16];
			size_format(m->size, w, sizeof(w));
			size_format(owned_bytes, o, sizeof(o));
			return msg_error_set(err, ENOSPC,
					     "%s to revoke, the agent owns %s and queued revocations already take part of it",
					     w, o);
		}
		*requested = p->want_bytes;
		if (plan_out)
			*plan_out = TAKE_PTR(p);
	}
	return 0;
}

static bool id_taken(struct engine *e, const char *id)
{
	struct intentlog_grant g = { 0 };

	if (intentlog_get_grant(e->journal, id, &g) < 0)
		return false;
	intentlog_grant_done(&g);
	return true;
}

/*
 * An operator does not track generations: a message without one gets the
 * next generation of its source, one without an id "<source>-<generation>"
 * (skipping ids an operator chose already).  A script may number its own
 * requests to retry them safely, but not so far ahead that it uses up the
 * generations.
 */
static int number_locked(struct engine *e, const struct engine_source *src, struct msg *m, struct msg_error *err)
{
	uint64_t last = intentlog_last_generation(e->journal, src->name), gen;

	if (m->generation) {
		/* numbered by the operator: then the id is theirs to give too */
		if (!m->id[0])
			return msg_error_set(err, EINVAL, "field \"id\": missing");
		if (m->generation > last + OPERATOR_GENERATION_STEP_MAX)
			return msg_error_set(err, ERANGE,
					     "field \"generation\": %llu is more than %d ahead of the last local generation %llu",
					     (unsigned long long)m->generation, OPERATOR_GENERATION_STEP_MAX,
					     (unsigned long long)last);
		return 0;
	}
	gen = last + 1;
	if (!m->id[0]) {
		for (;;) {
			char id[MSG_ID_MAX + 32];
			snprintf(id, sizeof(id), "%s-%llu", src->name, (unsigned long long)gen);
			if (strlen(id) > MSG_ID_MAX)
				return msg_error_set(err, ENAMETOOLONG, "field \"id\": missing, and \"%s\" is too long", id);
			if (!id_taken(e, id)) {
				memcpy(m->id, id, strlen(id) + 1);
				break;
			}
			gen++;
		}
	}
	m->generation = gen;
	return 0;
}

void engine_verdict_done(struct engine_verdict *v)
{
	if (!v)
		return;
	json_decref(v->report);
	v->report = NULL;
}

static int refuse(struct engine_verdict *v, int r)
{
	v->kind = ENGINE_REJECTED;
	v->err = r < 0 ? r : -r;
	return 0;
}

/* The generation and the id of M against the journal: 0 new, 1 a replay
 * (V filled), -errno refused (V->error filled). */
static int check_generation_locked(struct engine *e, const struct engine_source *src, const struct msg *m,
				   struct engine_verdict *v)
{
	struct intentlog_grant rec = { 0 };
	int r = intentlog_lookup_generation(e->journal, src->name, m->generation, &rec);

	if (r == ILOG_GEN_REPLAY) {
		/* a replay: the recorded answer, nothing applied */
		v->kind = ENGINE_REPLAY;
		v->report = rec.status ? json_incref(rec.status) : intentlog_grant_json(e->journal, rec.id);
		intentlog_grant_done(&rec);
		log_info(&e->log, "%s from %s: generation %llu already seen, answering with the recorded status", m->id,
			 src->name, (unsigned long long)m->generation);
		return 1;
	}
	if (r == ILOG_GEN_STALE)
		return msg_error_set(&v->error, ESTALE,
				     "generation %llu is not above the last generation %llu from %s: stale, nothing applied",
				     (unsigned long long)m->generation,
				     (unsigned long long)intentlog_last_generation(e->journal, src->name), src->name);
	if (r < 0)
		return msg_error_set(&v->error, r, "bad source \"%s\"", src->name);
	if (intentlog_get_grant(e->journal, m->id, &rec) == 0) {
		intentlog_grant_done(&rec);
		return msg_error_set(&v->error, EEXIST, "id \"%s\" is already used by another grant or revocation",
				     m->id);
	}
	return 0;
}

/* Records O, which the precheck refused with ERR, as rejected. */
static void record_rejection_locked(struct engine *e, struct op *o, const struct mem_table *t,
				    const struct msg_error *err, struct engine_verdict *v)
{
	json_t *report;
	int r;

	o->state = MSG_STATE_REJECTED;
	snprintf(o->err_code, sizeof(o->err_code), "%s", err->code);
	snprintf(o->err_msg, sizeof(o->err_msg), "%s", err->message);
	report = op_report(e, o, t);
	r = intentlog_accept(e->journal, o->src->name, o->msg, MSG_STATE_REJECTED, report, op_report_dest(o));
	if (r < 0)
		log_err(&e->log, "%s: cannot journal the rejection: %s", o->msg->id, strerror(-r));
	log_notice(&e->log, "%s %s from %s rejected: %s", msg_type_name(o->msg->type), o->msg->id, o->src->name,
		   err->message);
	metrics_count_request(e->metrics, msg_type_name(o->msg->type), OUT_REJECTED);
	if (report)
		op_announce_locked(e, o, report);
	v->recorded = true;
	v->report = report;
}

int engine_submit(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct op *o = NULL;
	json_t *report;
	char sz[16];
	int r;

	if (!v || !src) {
		msg_free(m);
		return -EINVAL;
	}
	memset(v, 0, sizeof(*v));
	machine_sync(e); /* the table as of now: before e->lock, which its callback takes */
	if (m->type == MSG_SYNC) {
		v->kind = ENGINE_ANSWERED;
		v->report = msg_sync_reply_json(m->nonce);
		msg_free(m);
		return 0;
	}

	pthread_mutex_lock(&e->lock);
	if (src->flags & ENGINE_SOURCE_OPERATOR) {
		r = number_locked(e, src, m, &v->error);
		if (r < 0)
			goto refused;
	} else if (!m->id[0] || !m->generation) {
		r = msg_error_set(&v->error, EINVAL, "field \"%s\": missing", m->id[0] ? "generation" : "id");
		goto refused;
	}
	if (e->stopping) {
		r = msg_error_set(&v->error, ESHUTDOWN, "the agent is stopping; send %s again when it is back", m->id);
		goto refused;
	}
	r = check_generation_locked(e, src, m, v);
	if (r < 0)
		goto refused;
	if (r > 0) {
		r = 0;
		goto out;
	}

	o = op_new(m, src);
	m = NULL;
	if (!o) {
		r = msg_error_set(&v->error, ENOMEM, "out of memory");
		goto refused;
	}
	r = machine_snapshot(e, &t);
	if (r < 0) {
		msg_error_set(&v->error, r, "cannot read the memory blocks: %s", strerror(-r));
		goto refused;
	}
	o->requested_bytes = requested_of(o->msg, t->block_size); /* what a rejection reports */
	{
		struct msg_error err = { 0 };
		r = precheck_locked(e, o->msg, t, &o->requested_bytes, NULL, &err);
		if (r < 0) {
			record_rejection_locked(e, o, t, &err, v);
			v->kind = ENGINE_REJECTED;
			v->err = r;
			v->error = err;
			r = 0;
			goto out;
		}
	}

	o->state = MSG_STATE_ACCEPTED;
	report = op_report(e, o, t);
	/* durable before acknowledged */
	r = report ? intentlog_accept(e->journal, src->name, o->msg, MSG_STATE_ACCEPTED, report,
					  op_report_dest(o))
		   : -ENOMEM;
	if (r < 0) {
		json_decref(report);
		msg_error_set(&v->error, r, "cannot record %s in the journal: %s", o->msg->id, strerror(-r));
		log_err(&e->log, "%s", v->error.message);
		goto refused;
	}
	op_announce_locked(e, o, report);
	v->kind = ENGINE_ACCEPTED;
	v->report = report;
	size_format(o->requested_bytes, sz, sizeof(sz));
	log_notice(&e->log, "%s %s from %s accepted (generation %llu, %s)", msg_type_name(o->msg->type), o->msg->id,
		   src->name, (unsigned long long)o->msg->generation, sz);
	engine_enqueue_locked(e, o);
	o = NULL;
	r = 0;
	goto out;

refused:
	refuse(v, r);
	r = 0;
out:
	pthread_mutex_unlock(&e->lock);
	op_free(o);
	msg_free(m);
	return r;
}

/* Why block B (RB: hp_read_block's result) cannot be adopted, into ERR: -errno, or 0 when it can. */
static int adoptable_locked(struct engine *e, uint64_t id, int rb, const struct mem_block *b, struct msg_error *err)
{
	struct intentlog_block jb;

	if (rb == -ENOENT)
		return msg_error_set(err, ENOENT, "block %llu: no such memory block", (unsigned long long)id);
	if (rb < 0)
		return msg_error_set(err, -rb, "block %llu: cannot read it: %s", (unsigned long long)id, strerror(-rb));
	if (id < e->boot_end)
		return msg_error_set(err, EPERM, "block %llu is boot memory (online since the start): not memgrant's to adopt",
				     (unsigned long long)id);
	if (!b->configured)
		return msg_error_set(err, EINVAL, "block %llu is standby (not configured): there is nothing to adopt; "
				     "grant it instead", (unsigned long long)id);
	if (b->state != MEM_STATE_ONLINE)
		return msg_error_set(err, EINVAL, "block %llu is configured but %s: only an online block can be adopted "
				     "(bring it online, or release it: memgrantctl block deconfigure %llu)",
				     (unsigned long long)id, mem_state_name(b->state), (unsigned long long)id);
	if (e->step_active && e->step_block == id)
		return msg_error_set(err, EBUSY, "block %llu is being changed by memgrantd right now", (unsigned long long)id);
	if (machine_find_owned_locked(e, id, &jb) == 0)
		return msg_error_set(err, EEXIST, "block %llu is owned by %s already", (unsigned long long)id, jb.grant_id);
	return 0;
}

int engine_adopt(struct engine *e, const struct engine_source *src, const uint64_t *blocks, size_t n,
		 struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ struct intentlog_done *done = NULL;
	_cleanup_free_ struct mem_block *kb = NULL;
	_cleanup_free_ int *rb = NULL;
	struct msg_error merr;
	struct msg *m = NULL;
	struct op *o = NULL;
	json_t *report = NULL, *req, *arr;
	int r;

	if (!v || !src || !blocks || n == 0)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	machine_sync(e);
	/* a grant by blocks, as an operator would have asked for them: the parser
	 * checks the list (no repeats) */
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_integer((json_int_t)blocks[i]));
	req = arr ? json_pack("{s:s,s:o}", "type", "grant", "blocks", arr) : NULL;
	r = req ? msg_from_json_opts(req, MSG_PARSE_UNNUMBERED, &m, &merr) : -ENOMEM;
	json_decref(req);
	if (r < 0) {
		if (r == -ENOMEM)
			msg_error_set(&v->error, ENOMEM, "out of memory");
		else
			v->error = merr;
		return refuse(v, r);
	}
	done = calloc(n, sizeof(*done));
	kb = calloc(n, sizeof(*kb));
	rb = calloc(n, sizeof(*rb));
	r = done && kb && rb ? machine_snapshot(e, &t) : -ENOMEM;
	if (r < 0) {
		msg_free(m);
		msg_error_set(&v->error, -r, "cannot read the memory blocks: %s", strerror(-r));
		return refuse(v, r);
	}
	/* the kernel as it is now, not the table's last notification */
	for (size_t i = 0; i < n; i++)
		rb[i] = hp_read_block(e->backend, blocks[i], &kb[i]);

	pthread_mutex_lock(&e->lock);
	if (e->stopping) {
		r = msg_error_set(&v->error, ESHUTDOWN, "the agent is stopping; adopt again when it is back");
		goto refused;
	}
	for (size_t i = 0; i < n; i++) {
		r = adoptable_locked(e, blocks[i], rb[i], &kb[i], &v->error);
		if (r < 0)
			goto refused;
		done[i] = (struct intentlog_done){ .block = blocks[i], .zone = mem_block_zone(&kb[i]),
						   .memmap = kb[i].memmap_on_memory == 1 };
	}
	r = number_locked(e, src, m, &v->error);
	if (r < 0)
		goto refused;
	o = op_new(m, src);
	m = NULL;
	if (!o) {
		r = msg_error_set(&v->error, ENOMEM, "out of memory");
		goto refused;
	}
	o->state = MSG_STATE_APPLIED;
	o->requested_bytes = o->applied_bytes = (uint64_t)n * t->block_size;
	o->blocks_total = o->blocks_done = n;
	for (size_t i = 0; i < n; i++) {
		struct outcome *oc = op_outcome(o, blocks[i], false);
		if (oc)
			outcome_from_block(oc, &kb[i]);
	}
	op_add_decision(o, "adopted by an operator: %zu block%s found online outside memgrant", n, n == 1 ? "" : "s");
	report = op_report(e, o, t);
	/* the record and the ownership in one write, durable before the answer */
	r = report ? intentlog_batch_begin(e->journal) : -ENOMEM;
	if (r == 0) {
		r = intentlog_accept(e->journal, src->name, o->msg, MSG_STATE_APPLIED, report, op_report_dest(o));
		if (r == 0)
			r = intentlog_adopt(e->journal, o->msg->id, done, n, NULL);
		if (r == 0)
			r = intentlog_batch_end(e->journal);
		else
			intentlog_batch_abort(e->journal);
	}
	if (r < 0) {
		msg_error_set(&v->error, -r, "cannot record the adoption in the journal: %s", strerror(-r));
		log_err(&e->log, "%s", v->error.message);
		goto refused;
	}
	op_announce_locked(e, o, report);
	log_notice(&e->log, "grant %s: %zu block%s adopted by an operator (first %llu)", o->msg->id, n,
		   n == 1 ? "" : "s", (unsigned long long)blocks[0]);
	v->kind = ENGINE_ANSWERED;
	v->report = report;
	report = NULL;
	r = 0;
	goto out;
refused:
	refuse(v, r);
	r = 0;
out:
	pthread_mutex_unlock(&e->lock);
	json_decref(report);
	op_free(o);
	msg_free(m);
	return r;
}

/* ---- dry run ---------------------------------------------------------------- */

static json_t *plan_block_json(const struct mem_table *t, uint64_t id, const struct policy_block *pb)
{
	char range[MSG_RANGE_MAX + 1];
	uint64_t first = id * t->block_size;
	json_t *b;

	snprintf(range, sizeof(range), "0x%016llx-0x%016llx", (unsigned long long)first,
		 (unsigned long long)(first + t->block_size - 1));
	b = json_pack("{s:I,s:s}", "block", (json_int_t)id, "range", range);
	if (b && pb) {
		json_object_set_new(b, "memmap_on_memory", pb->memmap < 0 ? json_null() : json_boolean(pb->memmap == 1));
		json_object_set_new(b, "zone", json_string(pb->online == ONLINE_MOVABLE ? "Movable" : "Normal"));
	}
	return b;
}

/* What a grant by P would cost: its memmap (64 bytes of struct page per
 * 4 KiB page, block_size / 64) comes out of the granted blocks when
 * memmap_on_memory is on, out of the memory already online when it is off. */
static void plan_cost_json(json_t *j, const struct policy_decision *pd, const struct mem_table *t)
{
	uint64_t online, standby, memmap = (uint64_t)pd->n * (t->block_size / 64), added = pd->n * t->block_size;
	size_t on = 0, keep = 0;

	memory_figures(t, &online, &standby);
	for (size_t i = 0; i < pd->n; i++) {
		on += pd->blocks[i].memmap == 1;
		keep += pd->blocks[i].memmap < 0;
	}
	{
		uint64_t in_blocks = (uint64_t)on * (t->block_size / 64);
		uint64_t from_online = memmap - in_blocks;
		json_object_set_new(j, "memmap_bytes", json_integer((json_int_t)memmap));
		json_object_set_new(j, "memmap_in_granted_bytes", json_integer((json_int_t)in_blocks));
		json_object_set_new(j, "online_cost_bytes", json_integer((json_int_t)from_online));
		json_object_set_new(j, "usable_bytes", json_integer((json_int_t)(added - in_blocks)));
		json_object_set_new(j, "online_bytes_before", json_integer((json_int_t)online));
		json_object_set_new(j, "online_bytes_after", json_integer((json_int_t)(online + added)));
		if (keep)
			json_object_set_new(j, "memmap_note",
					    json_string("no firmware interface: the kernel chose memmap_on_memory when it "
							"added the blocks; the cost assumes the memmap is online memory"));
	}
}

int engine_plan(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_policy_decision_ struct policy_decision *pd = NULL;
	_cleanup_msg_ struct msg *own = m;
	uint64_t requested = 0, mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;
	json_t *j = NULL, *blocks;
	struct policy_settings ps;
	int r;

	if (!v || !src || !m)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	machine_sync(e);
	if (m->type == MSG_SYNC) {
		msg_error_set(&v->error, EINVAL, "field \"type\": a sync has no plan");
		return refuse(v, -EINVAL);
	}
	/* read before e->lock: a file read, and nothing of the engine */
	if (m->type == MSG_GRANT && policy_read_meminfo(e->backend->root, NULL, &mem_available) < 0)
		mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;

	pthread_mutex_lock(&e->lock);
	/* nothing is numbered, journaled or queued: the generation stays unused */
	r = machine_snapshot(e, &t);
	if (r < 0) {
		msg_error_set(&v->error, r, "cannot read the memory blocks: %s", strerror(-r));
		goto refused;
	}
	r = precheck_locked(e, m, t, &requested, &p, &v->error);
	if (r < 0)
		goto refused;
	ps = e->set.policy;
	pthread_mutex_unlock(&e->lock);

	j = json_pack("{s:s,s:b,s:s,s:I,s:I,s:s}", "type", "plan", "dry_run", 1, "kind", msg_type_name(m->type),
		      "requested_bytes", (json_int_t)requested, "block_size", (json_int_t)t->block_size, "reason",
		      p->reason);
	blocks = json_array();
	if (!j || !blocks) {
		json_decref(j);
		json_decref(blocks);
		msg_error_set(&v->error, ENOMEM, "out of memory");
		return refuse(v, -ENOMEM);
	}
	if (m->type == MSG_GRANT) {
		struct policy_request preq = {
			.memmap = m->memmap == MSG_MEMMAP_AUTO ? -1 : m->memmap == MSG_MEMMAP_ON,
			.zone = m->zone,
			.contiguous = m->contiguous,
		};
		r = policy_decide(&ps, &preq, t, mem_available, p->blocks, p->n, &pd);
		if (r < 0) {
			json_decref(j);
			json_decref(blocks);
			msg_error_set(&v->error, r, "the policy cannot decide: %s", strerror(-r));
			return refuse(v, r);
		}
		for (size_t i = 0; i < pd->n; i++)
			json_array_append_new(blocks, plan_block_json(t, pd->blocks[i].id, &pd->blocks[i]));
		json_object_set_new(j, "memmap_on_memory", pd->memmap < 0 ? json_null() : json_boolean(pd->memmap == 1));
		json_object_set_new(j, "zone", json_string(pd->online == ONLINE_MOVABLE ? "Movable"
							   : pd->online == ONLINE_KERNEL ? "Normal" : "split"));
		json_object_set_new(j, "decisions", json_pack("[s,s]", pd->memmap_reason, pd->zone_reason));
		plan_cost_json(j, pd, t);
	} else {
		uint64_t online, standby;
		/* by size the planner lists every candidate in order and the
		 * executor stops once the size went back: the plan is the first
		 * size / block size of them (the rest are tried only in place of
		 * a block that stays busy); by grant or blocks every one goes */
		size_t take = p->n;
		json_t *decisions = json_pack("[s]", p->reason);

		if (m->target == MSG_BY_SIZE && p->want_bytes / t->block_size < take)
			take = (size_t)(p->want_bytes / t->block_size);
		for (size_t i = 0; i < take; i++)
			json_array_append_new(blocks, plan_block_json(t, p->blocks[i], NULL));
		if (decisions && take < p->n) {
			char line[160];

			snprintf(line, sizeof(line), "takes the first %zu of the %zu candidates; the next only in place "
				 "of a block that stays busy", take, p->n);
			json_array_append_new(decisions, json_string(line));
		}
		memory_figures(t, &online, &standby);
		json_object_set_new(j, "decisions", decisions);
		json_object_set_new(j, "online_bytes_before", json_integer((json_int_t)online));
		json_object_set_new(j, "online_bytes_after",
				    json_integer((json_int_t)(online - (p->want_bytes < online ? p->want_bytes : online))));
	}
	json_object_set_new(j, "blocks", blocks);
	v->kind = ENGINE_ANSWERED;
	v->report = j;
	return 0;

refused:
	pthread_mutex_unlock(&e->lock);
	return refuse(v, r);
}

/* ---- cancel ------------------------------------------------------------------- */

int engine_cancel(struct engine *e, const char *id, const char *who, struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct intentlog_grant g = { 0 };
	struct op *o = NULL, **link;
	int r;

	if (!v || !id || !who)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	machine_sync(e);
	pthread_mutex_lock(&e->lock);
	if (e->stopping) {
		r = msg_error_set(&v->error, ESHUTDOWN, "the agent is stopping; what it runs resumes at the next start");
		goto refused;
	}
	r = machine_snapshot(e, &t);
	if (r < 0) {
		msg_error_set(&v->error, r, "cannot read the memory blocks: %s", strerror(-r));
		goto refused;
	}
	if (e->running && streq(e->running->msg->id, id) && !msg_state_is_final(e->running->state)) {
		/* the executor stops after the block in flight and ends it
		 * partial or cancelled, journaled like any final state (one
		 * that has just ended is answered from the journal below) */
		o = e->running;
		if (!o->cancel_requested) {
			o->cancel_requested = true;
			snprintf(o->cancel_by, sizeof(o->cancel_by), "%s", who);
			log_notice(&e->log, "%s %s: cancel requested by %s after %zu of %zu blocks",
				   msg_type_name(o->msg->type), id, who, o->blocks_done, o->blocks_total);
			op_publish_locked(e, o, t);
		}
		v->kind = ENGINE_ACCEPTED;
		v->report = op_report(e, o, t);
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	for (link = &e->queue_head; *link; link = &(*link)->next)
		if (streq((*link)->msg->id, id))
			break;
	if (*link) {
		/* not started: nothing was done, it ends now */
		struct op *prev = NULL;

		o = *link;
		for (struct op *i = e->queue_head; i && i != o; i = i->next)
			prev = i;
		o->cancel_requested = true;
		snprintf(o->cancel_by, sizeof(o->cancel_by), "%s", who);
		o->state = MSG_STATE_CANCELLED;
		snprintf(o->err_code, sizeof(o->err_code), "ECANCELED");
		snprintf(o->err_msg, sizeof(o->err_msg), "cancelled by %s before it started", who);
		r = op_publish_locked(e, o, t);
		if (r < 0) {
			/* not durable: it stays queued, and the cancel is refused */
			o->state = MSG_STATE_ACCEPTED;
			o->cancel_requested = false;
			o->err_code[0] = '\0';
			o->err_msg[0] = '\0';
			msg_error_set(&v->error, r, "cannot journal the cancel of %s: %s", id, strerror(-r));
			goto refused;
		}
		*link = o->next;
		if (e->queue_tail == o)
			e->queue_tail = prev;
		o->next = NULL;
		metrics_count_request(e->metrics, msg_type_name(o->msg->type), OUT_CANCELLED);
		log_notice(&e->log, "%s %s cancelled by %s before it started", msg_type_name(o->msg->type), id, who);
		v->kind = ENGINE_ANSWERED;
		v->report = op_report(e, o, t);
		pthread_mutex_unlock(&e->lock);
		op_free(o);
		return 0;
	}
	if (intentlog_get_grant(e->journal, id, &g) < 0) {
		r = msg_error_set(&v->error, ENOENT, "no grant or revocation with id \"%s\"", id);
		goto refused;
	}
	if (msg_state_is_final(g.state)) {
		r = msg_error_set(&v->error, EALREADY, "%s %s is %s already: nothing to cancel%s", msg_type_name(g.type),
				  id, msg_state_name(g.state),
				  g.type == MSG_GRANT && g.n_blocks ? " (revoke it to give its memory back)" : "");
		v->report = g.status ? json_incref(g.status) : NULL;
	} else {
		r = msg_error_set(&v->error, EAGAIN, "%s %s is %s but not queued yet; try again", msg_type_name(g.type),
				  id, msg_state_name(g.state));
	}
	intentlog_grant_done(&g);
refused:
	pthread_mutex_unlock(&e->lock);
	return refuse(v, r);
}
