/* SPDX-License-Identifier: MIT */
/*
 * Admission of grants and revocations: numbering, generations, the precheck
 * against the kernel's table, the journal record, the queue.  See admission.h.
 */
#include "agent/engine/admission.h"

#include <time.h>

#include "hotplug/policy.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"
#include "agent/engine/plan_request.h"

/* How far an operator's own numbering may jump ahead of the last generation. */
#define OPERATOR_GENERATION_STEP_MAX 1000000

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
int precheck_locked(struct engine *e, const struct msg *m, const struct mem_table *t, uint64_t *requested,
		    struct plan **plan_out, struct msg_error *err)
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
		char foreign[96];

		/* after a lost or cut journal, a control plane sends again what it
		 * was granted: never apply it on top of memory that may be it */
		if (machine_start_foreign_locked(e, t, foreign, sizeof(foreign)))
			return msg_error_set(err, EEXIST,
					     "blocks %s were online at start, owned by no grant (journal lost or cut?): "
					     "no grant on top of them until `memgrantctl adopt %s`, a restored journal, "
					     "or they are taken down", foreign, foreign);

		/* blocks named by queued or running grants are promised already */
		for (struct op *o = e->queue_head; o; o = o->next)
			if (reserve_explicit(o, t->block_size, &owned, &n_owned, &reserved) < 0)
				return msg_error_set(err, ENOMEM, "out of memory");
		if (e->running && reserve_explicit(e->running, t->block_size, &owned, &n_owned, &reserved) < 0)
			return msg_error_set(err, ENOMEM, "out of memory");
		uint64_t avail;

		fill_grant_request(m, &req);
		r = plan_grant(t, &req, owned, n_owned, &p);
		if (r < 0)
			return msg_error_set(err, r, "%s", p ? p->reason : "cannot plan the grant");
		/* the grant fits when its bytes and the queued grants' are there */
		avail = plan_available_bytes(t, PLAN_SOURCE_AUTO, owned, n_owned,
					     reserved > UINT64_MAX - p->want_bytes ? UINT64_MAX : p->want_bytes + reserved);
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
int number_locked(struct engine *e, const struct engine_source *src, struct msg *m, struct msg_error *err)
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

void plan_answer_free(struct engine_plan *p)
{
	if (!p)
		return;
	free(p->blocks);
	for (size_t i = 0; i < p->n_decisions; i++)
		free(p->decisions[i]);
	free(p->decisions);
	free(p);
}

void engine_verdict_done(struct engine_verdict *v)
{
	if (!v)
		return;
	report_free(v->report);
	v->report = NULL;
	plan_answer_free(v->plan);
	v->plan = NULL;
}

int refuse(struct engine_verdict *v, int r)
{
	v->kind = ENGINE_REJECTED;
	v->err = r < 0 ? r : -r;
	return 0;
}

/* The recorded status of REC, answered to a replay: its report, or (none
 * recorded) what the record itself says.  NULL on ENOMEM. */
static struct report *replay_report(struct engine *e, const struct intentlog_grant *rec)
{
	struct report *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (intentlog_grant_report(rec, r) < 0) {
		report_clear(r);
		snprintf(r->id, sizeof(r->id), "%s", rec->id);
		snprintf(r->source, sizeof(r->source), "%s", rec->source);
		r->generation = rec->generation;
		r->state = rec->state;
		r->kind = rec->type;
		r->applied_bytes = rec->applied_bytes;
	}
	r->agent = e->agent_id;
	return r;
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
		v->report = replay_report(e, &rec);
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
	_cleanup_report_ struct report rt = { 0 };
	bool have;
	int r;

	o->state = MSG_STATE_REJECTED;
	snprintf(o->err_code, sizeof(o->err_code), "%s", err->code);
	snprintf(o->err_msg, sizeof(o->err_msg), "%s", err->message);
	have = op_report(e, o, t, &rt) == 0;
	r = intentlog_accept(e->journal, o->src->name, o->msg, MSG_STATE_REJECTED, have ? &rt : NULL,
			     op_report_dest(o));
	if (r < 0)
		log_err(&e->log, "%s: cannot journal the rejection: %s", o->msg->id, strerror(-r));
	log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(o->msg->id)), "%s %s from %s rejected: %s",
		   msg_type_name(o->msg->type), o->msg->id, o->src->name,
		   err->message);
	metrics_count_request(e->metrics, msg_type_name(o->msg->type), OUT_REJECTED);
	if (have)
		op_announce_locked(e, o, &rt);
	v->recorded = true;
	v->report = have ? report_dup(&rt) : NULL;
}

int engine_submit(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v)
{
	struct mem_table head = { 0 }, *t = &head; /* the table's figures, without its rows */
	const struct mem_table *live;
	_cleanup_report_ struct report rt = { 0 };
	struct op *o = NULL;
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
		v->sync = true;
		v->nonce = m->nonce;
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
	if (e->journal_err) {
		r = msg_error_set(&v->error, -e->journal_err,
				  "the journal in %s cannot record (%s): the agent is stopping; free space there and send "
				  "%s again when it is back", e->state_dir, strerror(-e->journal_err),
				  m->id);
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
	/* planned on the live table in place: no copy of its rows per request */
	live = machine_table_hold(e);
	if (!live) {
		r = msg_error_set(&v->error, ENODEV, "cannot read the memory blocks: %s", strerror(ENODEV));
		goto refused;
	}
	head = *live;
	head.blocks = NULL;
	head.n = 0;
	o->requested_bytes = requested_of(o->msg, live->block_size); /* what a rejection reports */
	{
		struct msg_error err = { 0 };
		r = precheck_locked(e, o->msg, live, &o->requested_bytes, NULL, &err);
		machine_table_release(e);
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
	/* durable before acknowledged */
	r = op_report(e, o, t, &rt);
	if (r == 0)
		r = intentlog_accept(e->journal, src->name, o->msg, MSG_STATE_ACCEPTED, &rt, op_report_dest(o));
	if (r < 0) {
		struct intentlog_stats st;

		intentlog_stats(e->journal, &st);
		if (st.broken) {
			/* the failed write could not be cut back: the accept may be
			 * on disk, so "refused" could be reversed by the next start;
			 * the engine stops and the next start decides, from the file */
			msg_error_set(&v->error, r,
				      "cannot record %s in the journal in %s: %s, and the failed write could not be "
				      "undone: %s may be recorded; memgrantd stops: once it runs again, memgrantctl "
				      "wait %s says whether it was",
				      o->msg->id, e->state_dir, strerror(-r), o->msg->id, o->msg->id);
			if (!e->journal_err)
				e->journal_err = r;
			e->stopping = true;
			pthread_cond_broadcast(&e->cond);
			engine_notify(e);
		} else {
			/* refused up front: nothing was recorded, nothing will be done */
			msg_error_set(&v->error, r,
				      "cannot record %s in the journal in %s: %s (%llu bytes needed); nothing was done: "
				      "free space there and send it again",
				      o->msg->id, e->state_dir, strerror(-r), (unsigned long long)st.failed_bytes);
		}
		log_err(&e->log, "%s", v->error.message);
		v->unrecordable = true;
		goto refused;
	}
	op_announce_locked(e, o, &rt);
	v->kind = ENGINE_ACCEPTED;
	v->report = report_dup(&rt);
	size_format(o->requested_bytes, sz, sizeof(sz));
	log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(o->msg->id)), "%s %s from %s accepted (generation %llu, %s)",
		   msg_type_name(o->msg->type), o->msg->id,
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
