/* SPDX-License-Identifier: MIT */
/*
 * The engine of memgrantd.
 *
 * Accepting (daemon_submit, any thread): parse, check the generation, check
 * the request against the kernel's current table, write it to the journal
 * (fsync), queue it, answer.  Applying (the executor thread): plan against a
 * fresh table, decide memmap and zone, bring blocks up or take them down one
 * at a time, journal every step before the kernel write and every result
 * after it.  d->lock guards the journal, the queue and the counters; it is
 * never held across a kernel write, so the API answers while a block takes
 * a minute to go offline.
 */
#include "daemon.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>

#include "../config/config.h"
#include "../hotplug/backend.h"
#include "../hotplug/blockjson.h"
#include "../hotplug/executor.h"
#include "../hotplug/planner.h"
#include "../hotplug/policy.h"
#include "../hotplug/sim.h"
#include "../lib/fileio.h"
#include "../lib/size.h"
#include "../lib/timeutil.h"
#include "../lib/util.h"
#include "journal.h"
#include "message.h"
#include "metrics.h"

#define SOURCE_LOCAL "local"
#define AUTO_ONLINE_SAVE "auto_online_blocks.orig"

/* What happened to one block of an operation, for the status report. */
struct outcome {
	uint64_t block;
	bool configured;
	int memmap;
	char state[16];
	char zone[48];
	char err_code[16];
	char err_msg[192];
};

/* A grant or revocation that is queued or running. */
struct op {
	struct op *next;
	struct msg *msg;
	char source[MSG_ID_MAX + 1];
	enum msg_state state;
	uint64_t requested_bytes;
	uint64_t applied_bytes;
	size_t blocks_total;
	size_t blocks_done;          /* blocks brought up (grant) or given back (revocation) */
	struct outcome *outcomes;
	size_t n_outcomes;
	char **decisions;
	size_t n_decisions;
	char err_code[16];
	char err_msg[256];
};

struct daemon {
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* the executor waits for work */
	pthread_cond_t outbox_cond; /* providers wait for reports */
	uint64_t wake_gen;          /* bumped by daemon_wake_providers() */
	struct mg_log log;
	/* settings (replaced on reload) */
	char *agent_id;
	char *state_dir;
	struct policy_settings policy;
	uint64_t revoke_budget_ms;
	uint64_t block_op_timeout_ms;
	size_t body_limit;
	bool own_onlining;
	/* parts */
	struct hp_backend *backend;
	struct journal *journal;
	struct metrics *metrics;
	struct event_bus *events;
	int notify_fd;
	/* work */
	struct op *queue_head, *queue_tail;
	struct op *running;
	bool stopping;
	bool executor_started;
	pthread_t executor;
	pid_t executor_tid;
	char auto_online_saved[24]; /* "" when the agent did not change it */
};

/* --- small helpers ---------------------------------------------------------- */

static void notify(struct daemon *d)
{
	uint64_t one = 1;

	if (write(d->notify_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated or closed: the main loop wakes anyway */
	}
}

int daemon_notify_fd(struct daemon *d)
{
	return d->notify_fd;
}

void daemon_notify_drain(struct daemon *d)
{
	uint64_t n;

	if (read(d->notify_fd, &n, sizeof(n)) < 0) {
		/* nothing pending */
	}
}

struct event_bus *daemon_events(struct daemon *d)
{
	return d->events;
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void op_free(struct op *o)
{
	if (!o)
		return;
	msg_free(o->msg);
	free(o->outcomes);
	for (size_t i = 0; i < o->n_decisions; i++)
		free(o->decisions[i]);
	free(o->decisions);
	free(o);
}

static void op_add_decision(struct op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void op_add_decision(struct op *o, const char *fmt, ...)
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

static struct outcome *op_add_outcome(struct op *o, uint64_t block)
{
	struct outcome *no = reallocarray(o->outcomes, o->n_outcomes + 1, sizeof(*no));

	if (!no)
		return NULL;
	o->outcomes = no;
	no = &o->outcomes[o->n_outcomes++];
	memset(no, 0, sizeof(*no));
	no->block = block;
	no->memmap = -1;
	return no;
}

static void outcome_from_block(struct outcome *oc, const struct mem_block *b)
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

static enum msg_zone zone_of_block(const struct mem_block *b)
{
	return strstr(b->zones, "Movable") == b->zones ? MSG_ZONE_MOVABLE : MSG_ZONE_NORMAL;
}

static void memory_figures(const struct mem_table *t, uint64_t *online, uint64_t *standby)
{
	*online = *standby = 0;
	for (size_t i = 0; t && i < t->n; i++) {
		if (t->blocks[i].configured && t->blocks[i].state == MEM_STATE_ONLINE)
			*online += t->block_size;
		else if (mem_block_is_standby(&t->blocks[i]))
			*standby += t->block_size;
	}
}

/* The status report of O as the wire protocol has it, plus progress fields. */
static json_t *op_status_json(struct daemon *d, const struct op *o, const struct mem_table *t)
{
	_cleanup_free_ struct msg_status_block *blocks = calloc(o->n_outcomes + 1, sizeof(*blocks));
	struct msg_status s = {
		.agent = d->agent_id,
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
		.source = o->source,
	};
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
	memory_figures(t, &s.online_bytes, &s.standby_bytes);
	j = msg_status_to_json(&s);
	if (j) {
		json_object_set_new(j, "kind", json_string(msg_type_name(o->msg->type)));
		json_object_set_new(j, "blocks_total", json_integer((json_int_t)o->blocks_total));
		json_object_set_new(j, "blocks_done", json_integer((json_int_t)o->blocks_done));
	}
	return j;
}

/* Where reports of SOURCE go: the provider that sent the grant; none for local. */
static const char *outbox_dest(const char *source)
{
	return streq(source, SOURCE_LOCAL) ? NULL : source;
}

/* Journals O's state and report and tells everybody; called with d->lock held. */
static int op_publish_locked(struct daemon *d, struct op *o, const struct mem_table *t)
{
	json_t *status = op_status_json(d, o, t);
	int r;

	if (!status)
		return -ENOMEM;
	r = journal_set_state(d->journal, o->msg->id, o->state, status,
			      msg_state_is_final(o->state) || o->state == MSG_STATE_IN_PROGRESS
				      ? outbox_dest(o->source) : NULL);
	if (r < 0)
		log_err(&d->log, "%s: cannot journal state %s: %s", o->msg->id, msg_state_name(o->state),
			strerror(-r));
	events_publish(d->events, status);
	json_decref(status);
	pthread_cond_broadcast(&d->outbox_cond);
	notify(d);
	return r;
}

/* Ownership list for the planner from the journal; called with d->lock held. */
static int owned_list_locked(struct daemon *d, struct owned_block **out, size_t *n)
{
	_cleanup_free_ struct journal_block *jb = NULL;
	struct owned_block *ob;
	size_t k = 0;
	int r = journal_owned_blocks(d->journal, &jb, &k);

	if (r < 0)
		return r;
	ob = calloc(k + 1, sizeof(*ob));
	if (!ob)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		ob[i].id = jb[i].block;
		ob[i].seq = jb[i].seq;
		ob[i].zone = jb[i].zone == MSG_ZONE_MOVABLE ? ZONE_KIND_MOVABLE : ZONE_KIND_NORMAL;
		snprintf(ob[i].grant_id, sizeof(ob[i].grant_id), "%s", jb[i].grant_id);
	}
	*out = ob;
	*n = k;
	return 0;
}

static void fill_grant_request(const struct msg *m, struct grant_request *req)
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

static void fill_revoke_request(const struct msg *m, struct revoke_request *req)
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

static uint64_t queued_bytes_locked(struct daemon *d, enum msg_type type)
{
	uint64_t sum = 0;

	for (struct op *o = d->queue_head; o; o = o->next)
		if (o->msg->type == type)
			sum += o->requested_bytes;
	if (d->running && d->running->msg->type == type)
		sum += d->running->requested_bytes - d->running->applied_bytes;
	return sum;
}

/* The explicit block ids of a grant by blocks or ranges (ranges expanded). */
static int explicit_ids(const struct msg *m, uint64_t block_size, uint64_t **out, size_t *n)
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
 * Called with d->lock held.
 */
static int precheck_locked(struct daemon *d, const struct msg *m, const struct mem_table *t,
			   uint64_t *requested, struct msg_error *err)
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
	r = owned_list_locked(d, &owned, &n_owned);
	if (r < 0)
		return msg_error_set(err, r, "cannot read the journal's block list");

	if (m->type == MSG_GRANT) {
		struct grant_request req;
		uint64_t reserved = queued_bytes_locked(d, MSG_GRANT);

		/* blocks named by queued or running grants are promised already */
		for (struct op *o = d->queue_head; o; o = o->next)
			if (reserve_explicit(o, t->block_size, &owned, &n_owned, &reserved) < 0)
				return msg_error_set(err, ENOMEM, "out of memory");
		if (d->running && reserve_explicit(d->running, t->block_size, &owned, &n_owned, &reserved) < 0)
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
	} else {
		struct revoke_request req;
		uint64_t owned_bytes = (uint64_t)n_owned * t->block_size;
		uint64_t pending_grants = queued_bytes_locked(d, MSG_GRANT);
		uint64_t pending_revokes = queued_bytes_locked(d, MSG_REVOKE);

		fill_revoke_request(m, &req);
		r = plan_revoke(t, &req, owned, n_owned, &p);
		/* a revocation of a grant still queued is planned when it runs */
		if (r == -ENOENT && m->target == MSG_BY_GRANT) {
			bool queued = false;
			for (struct op *o = d->queue_head; o; o = o->next)
				queued |= streq(o->msg->id, m->grant);
			if (d->running && streq(d->running->msg->id, m->grant))
				queued = true;
			if (queued) {
				*requested = 0;
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
	}
	return 0;
}

/* The bus adds its "seq" to what it publishes; replies keep the wire format. */
static void publish_copy(struct daemon *d, json_t *status)
{
	json_t *copy = json_deep_copy(status);

	if (copy) {
		events_publish(d->events, copy);
		json_decref(copy);
	}
}

static json_t *error_json(const struct msg_error *e)
{
	return json_pack("{s:{s:s,s:s}}", "error", "code", e->code, "message", e->message);
}

/*
 * Local callers do not track generations: an operator's message without one
 * gets the next local generation, and one without an id gets "local-<gen>".
 */
#define LOCAL_GENERATION_STEP_MAX 1000000 /* how far a local caller may jump ahead */

static bool id_taken(struct daemon *d, const char *id)
{
	struct journal_grant g = { 0 };

	if (journal_get_grant(d->journal, id, &g) < 0)
		return false;
	journal_grant_done(&g);
	return true;
}

static int complete_local_message(struct daemon *d, json_t *obj, struct msg_error *err)
{
	uint64_t last = journal_last_generation(d->journal, SOURCE_LOCAL), gen;
	json_t *g;

	if (!json_is_object(obj) || streq(json_string_value(json_object_get(obj, "type")), "sync"))
		return 0;
	g = json_object_get(obj, "generation");
	if (g) {
		/* a script may number its own requests (to retry them safely),
		 * but not so far ahead that it uses up the local generations */
		if (json_is_integer(g) && json_integer_value(g) > 0 &&
		    (uint64_t)json_integer_value(g) <= MSG_GENERATION_MAX &&
		    (uint64_t)json_integer_value(g) > last + LOCAL_GENERATION_STEP_MAX)
			return msg_error_set(err, ERANGE,
					     "field \"generation\": %lld is more than %d ahead of the last local generation %llu",
					     (long long)json_integer_value(g), LOCAL_GENERATION_STEP_MAX,
					     (unsigned long long)last);
		return 0;
	}
	gen = last + 1;
	if (!json_object_get(obj, "id")) {
		char id[32];
		/* skip generations whose automatic id an operator already chose */
		for (;;) {
			snprintf(id, sizeof(id), "local-%llu", (unsigned long long)gen);
			if (!id_taken(d, id))
				break;
			gen++;
		}
		json_object_set_new(obj, "id", json_string(id));
	}
	json_object_set_new(obj, "generation", json_integer((json_int_t)gen));
	return 0;
}

static enum metric_outcome metric_of_state(enum msg_state s)
{
	switch (s) {
	case MSG_STATE_APPLIED: return OUT_APPLIED;
	case MSG_STATE_PARTIAL: return OUT_PARTIAL;
	case MSG_STATE_REJECTED: return OUT_REJECTED;
	default: return OUT_FAILED;
	}
}

int daemon_submit(struct daemon *d, const char *source, const char *body, size_t len, int *http_status,
		  json_t **reply)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct msg_error err = { 0 };
	struct msg *m = NULL;
	json_t *obj;
	json_error_t jerr;
	struct op *o;
	int r;

	*reply = NULL;
	if (len > d->body_limit) {
		msg_error_set(&err, E2BIG, "message of %zu bytes is larger than the limit of %zu bytes", len,
			      d->body_limit);
		*http_status = 413;
		*reply = error_json(&err);
		return 0;
	}
	obj = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj) {
		/* the same verdict, code and wording as on every other transport */
		struct msg *none = NULL;
		if (msg_parse(body, len, d->body_limit, &none, &err) >= 0) {
			msg_free(none);
			msg_error_set(&err, EBADMSG, "not JSON: %s at line %d, column %d", jerr.text, jerr.line,
				      jerr.column);
		}
		*http_status = 400;
		*reply = error_json(&err);
		return 0;
	}

	pthread_mutex_lock(&d->lock);
	r = streq(source, SOURCE_LOCAL) ? complete_local_message(d, obj, &err) : 0;
	if (r < 0) {
		json_decref(obj);
		*http_status = 400;
		goto out_error;
	}
	r = msg_from_json(obj, &m, &err);
	json_decref(obj);
	if (r < 0) {
		*http_status = r == -E2BIG ? 413 : 400;
		goto out_error;
	}
	if (m->type == MSG_SYNC) {
		*http_status = 200;
		*reply = msg_sync_reply_json(m->nonce);
		goto out;
	}
	if (d->stopping) {
		msg_error_set(&err, ESHUTDOWN, "the agent is stopping; send %s again when it is back", m->id);
		*http_status = 503;
		goto out_error;
	}

	{
		struct journal_grant rec = { 0 };
		r = journal_lookup_generation(d->journal, source, m->generation, &rec);
		if (r == JOURNAL_GEN_REPLAY) {
			/* a replay: the recorded answer, nothing applied */
			*http_status = 200;
			*reply = rec.status ? json_incref(rec.status) : journal_grant_json(d->journal, rec.id);
			journal_grant_done(&rec);
			log_info(&d->log, "%s from %s: generation %llu already seen, answering with the recorded status",
				 m->id, source, (unsigned long long)m->generation);
			goto out;
		}
		if (r == JOURNAL_GEN_STALE) {
			msg_error_set(&err, ESTALE,
				      "generation %llu is not above the last generation %llu from %s: stale, nothing applied",
				      (unsigned long long)m->generation,
				      (unsigned long long)journal_last_generation(d->journal, source), source);
			*http_status = 409;
			goto out_error;
		}
		if (r < 0) {
			msg_error_set(&err, r, "bad source \"%s\"", source);
			*http_status = 400;
			goto out_error;
		}
		if (journal_get_grant(d->journal, m->id, &rec) == 0) {
			journal_grant_done(&rec);
			msg_error_set(&err, EEXIST, "id \"%s\" is already used by another grant or revocation", m->id);
			*http_status = 409;
			goto out_error;
		}
	}

	o = calloc(1, sizeof(*o));
	if (!o) {
		msg_error_set(&err, ENOMEM, "out of memory");
		*http_status = 500;
		goto out_error;
	}
	o->msg = m;
	m = NULL;
	snprintf(o->source, sizeof(o->source), "%s", source);

	r = hp_discover(d->backend, &t);
	if (r < 0) {
		msg_error_set(&err, r, "cannot read the memory blocks: %s", strerror(-r));
		*http_status = 500;
		op_free(o);
		goto out_error;
	}
	o->requested_bytes = requested_of(o->msg, t->block_size); /* what a rejection reports */
	r = precheck_locked(d, o->msg, t, &o->requested_bytes, &err);
	if (r < 0) {
		json_t *status;
		o->state = MSG_STATE_REJECTED;
		snprintf(o->err_code, sizeof(o->err_code), "%s", err.code);
		snprintf(o->err_msg, sizeof(o->err_msg), "%s", err.message);
		status = op_status_json(d, o, t);
		r = journal_record_grant(d->journal, source, o->msg, MSG_STATE_REJECTED, status,
					 outbox_dest(source));
		if (r < 0)
			log_err(&d->log, "%s: cannot journal the rejection: %s", o->msg->id, strerror(-r));
		log_notice(&d->log, "%s %s from %s rejected: %s", msg_type_name(o->msg->type), o->msg->id, source,
			   err.message);
		metrics_count_request(d->metrics, msg_type_name(o->msg->type), OUT_REJECTED);
		publish_copy(d, status);
		*http_status = 409;
		*reply = status;
		op_free(o);
		goto out;
	}

	o->state = MSG_STATE_ACCEPTED;
	{
		json_t *status = op_status_json(d, o, t);
		/* durable before acknowledged */
		r = status ? journal_record_grant(d->journal, source, o->msg, MSG_STATE_ACCEPTED, status,
						  outbox_dest(source))
			   : -ENOMEM;
		if (r < 0) {
			json_decref(status);
			msg_error_set(&err, r, "cannot record %s in the journal: %s", o->msg->id, strerror(-r));
			*http_status = r == -ENOBUFS ? 503 : 500;
			log_err(&d->log, "%s", err.message);
			op_free(o);
			goto out_error;
		}
		publish_copy(d, status);
		*reply = status;
	}
	{
		char sz[16];
		size_format(o->requested_bytes, sz, sizeof(sz));
		log_notice(&d->log, "%s %s from %s accepted (generation %llu, %s)", msg_type_name(o->msg->type),
			   o->msg->id, source, (unsigned long long)o->msg->generation, sz);
	}
	if (d->queue_tail)
		d->queue_tail->next = o;
	else
		d->queue_head = o;
	d->queue_tail = o;
	pthread_cond_signal(&d->cond);
	notify(d);
	*http_status = 202;
	goto out;

out_error:
	*reply = error_json(&err);
out:
	pthread_mutex_unlock(&d->lock);
	msg_free(m);
	return 0;
}

/* --- the executor ------------------------------------------------------------ */

static void interrupt_handler(int sig)
{
	(void)sig; /* only there to make a blocking sysfs write return EINTR */
}

/*
 * A timer that interrupts the executor's blocking write at a deadline (W6:
 * offlining has no time limit of its own; a signal ends it with EINTR).  It
 * keeps firing every 50 ms after the deadline until disarmed, so a signal
 * that lands just before the write starts is not lost.
 */
struct budget_timer {
	timer_t id;
	bool armed;
};

static void budget_arm(struct daemon *d, struct budget_timer *bt, double deadline)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGUSR1 };
	struct itimerspec its = { .it_interval = { .tv_sec = 0, .tv_nsec = 50000000L } };
	double left = deadline - now_seconds();

	sev._sigev_un._tid = d->executor_tid;
	if (left < 0.001)
		left = 0.001;
	if (timer_create(CLOCK_MONOTONIC, &sev, &bt->id) < 0)
		return;
	its.it_value.tv_sec = (time_t)left;
	its.it_value.tv_nsec = (long)((left - (double)(time_t)left) * 1e9);
	timer_settime(bt->id, 0, &its, NULL);
	bt->armed = true;
}

static void budget_disarm(struct budget_timer *bt)
{
	if (bt->armed)
		timer_delete(bt->id);
	bt->armed = false;
}

static void set_outcome_error(struct outcome *oc, const struct block_result *res, const char *extra)
{
	snprintf(oc->err_code, sizeof(oc->err_code), "%s", errno_name(res->err));
	snprintf(oc->err_msg, sizeof(oc->err_msg), "block %llu: %s failed: %s%s%s",
		 (unsigned long long)oc->block, block_step_name(res->failed_step), strerror(-res->err),
		 res->undo_err ? "; undo failed too: " : "", res->undo_err ? strerror(-res->undo_err) : "");
	if (extra) {
		size_t n = strlen(oc->err_msg);
		snprintf(oc->err_msg + n, sizeof(oc->err_msg) - n, "%s", extra);
	}
}

static void count_result(struct daemon *d, const struct block_result *res, double secs, bool up)
{
	const char *step = res->failed_step != STEP_NONE ? block_step_name(res->failed_step)
							 : up ? "online" : "deconfigure";
	metrics_count_block_op(d->metrics, step, res->err, secs);
}

static bool stop_requested(struct daemon *d)
{
	bool s;

	pthread_mutex_lock(&d->lock);
	s = d->stopping;
	pthread_mutex_unlock(&d->lock);
	return s;
}

/* Ends O: applied (OK == TOTAL), partial or failed, with fresh memory figures. */
static void finish_op(struct daemon *d, struct op *o, size_t ok, size_t total)
{
	_cleanup_mem_table_ struct mem_table *now = NULL;

	hp_discover(d->backend, &now);
	pthread_mutex_lock(&d->lock);
	if (total == 0 || ok >= total)
		o->state = MSG_STATE_APPLIED;
	else if (ok > 0)
		o->state = MSG_STATE_PARTIAL;
	else
		o->state = MSG_STATE_FAILED;
	if (o->state != MSG_STATE_APPLIED && !o->err_code[0]) {
		for (size_t i = 0; i < o->n_outcomes; i++)
			if (o->outcomes[i].err_code[0]) {
				snprintf(o->err_code, sizeof(o->err_code), "%s", o->outcomes[i].err_code);
				snprintf(o->err_msg, sizeof(o->err_msg), "%s", o->outcomes[i].err_msg);
				break;
			}
	}
	metrics_count_request(d->metrics, msg_type_name(o->msg->type), metric_of_state(o->state));
	{
		char a[16], q[16];
		size_format(o->applied_bytes, a, sizeof(a));
		size_format(o->requested_bytes, q, sizeof(q));
		log_notice(&d->log, "%s %s %s: %s of %s%s%s", msg_type_name(o->msg->type), o->msg->id,
			   msg_state_name(o->state), a, q, o->err_code[0] ? "; " : "", o->err_code[0] ? o->err_msg : "");
	}
	op_publish_locked(d, o, now);
	pthread_mutex_unlock(&d->lock);
}

/*
 * Ends O because it cannot go on (ERR, a reason): "rejected" when nothing was
 * done yet, else partial or failed with what was done.
 */
static int abort_op(struct daemon *d, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int abort_op(struct daemon *d, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&d->lock);
	snprintf(o->err_code, sizeof(o->err_code), "%s", errno_name(err));
	va_start(ap, fmt);
	vsnprintf(o->err_msg, sizeof(o->err_msg), fmt, ap);
	va_end(ap);
	o->state = o->blocks_done > 0 ? MSG_STATE_PARTIAL
		   : o->state == MSG_STATE_ACCEPTED ? MSG_STATE_REJECTED : MSG_STATE_FAILED;
	log_notice(&d->log, "%s %s %s: %s", msg_type_name(o->msg->type), o->msg->id, msg_state_name(o->state),
		   o->err_msg);
	metrics_count_request(d->metrics, msg_type_name(o->msg->type), metric_of_state(o->state));
	op_publish_locked(d, o, t);
	pthread_mutex_unlock(&d->lock);
	return err;
}

static int run_grant(struct daemon *d, struct op *o)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ struct owned_block *owned = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_policy_decision_ struct policy_decision *pd = NULL;
	struct grant_request req;
	struct policy_request preq = { .memmap = -1 };
	struct policy_settings ps;
	uint64_t mem_available = POLICY_MEM_AVAILABLE_UNKNOWN, op_timeout_ms;
	size_t n_owned = 0, n_ids = 0, ok = 0, mine = 0;
	int r;

	r = hp_discover(d->backend, &t);
	if (r < 0)
		return abort_op(d, o, r, NULL, "cannot read the memory blocks: %s", strerror(-r));

	/* Resuming after a restart: blocks this grant already owns are done. */
	pthread_mutex_lock(&d->lock);
	r = owned_list_locked(d, &owned, &n_owned);
	if (r == 0) {
		for (size_t i = 0; i < n_owned; i++) {
			struct mem_block *b;
			struct outcome *oc;
			if (!streq(owned[i].grant_id, o->msg->id))
				continue;
			b = mem_table_find(t, owned[i].id);
			oc = op_add_outcome(o, owned[i].id);
			if (oc && b)
				outcome_from_block(oc, b);
			mine++;
		}
		o->applied_bytes = mine * t->block_size;
		o->blocks_done = mine;
	}
	ps = d->policy;
	op_timeout_ms = d->block_op_timeout_ms;
	pthread_mutex_unlock(&d->lock);
	if (r < 0)
		return abort_op(d, o, r, t, "cannot read the journal's block list");

	fill_grant_request(o->msg, &req);
	if (req.by == GRANT_BY_SIZE) {
		if (o->applied_bytes >= req.size) {
			o->blocks_total = mine;
			finish_op(d, o, mine, mine);
			return 0;
		}
		req.size -= o->applied_bytes;
	} else {
		/* by blocks or ranges: what is left are the listed blocks it does not own yet */
		size_t k = 0;
		r = explicit_ids(o->msg, t->block_size, &ids, &n_ids);
		if (r < 0)
			return abort_op(d, o, r, t, "cannot expand the blocks of %s", o->msg->id);
		for (size_t i = 0; i < n_ids; i++) {
			bool done = false;
			for (size_t j = 0; j < n_owned; j++)
				done |= owned[j].id == ids[i] && streq(owned[j].grant_id, o->msg->id);
			if (!done)
				ids[k++] = ids[i];
		}
		if (k == 0) {
			o->blocks_total = mine;
			finish_op(d, o, mine, mine);
			return 0;
		}
		req.by = GRANT_BY_BLOCKS;
		req.ids = ids;
		req.n_ids = k;
	}
	r = plan_grant(t, &req, owned, n_owned, &p);
	if (r < 0)
		return abort_op(d, o, r, t, "%s", p ? p->reason : strerror(-r));

	r = policy_read_meminfo(d->backend->root, NULL, &mem_available);
	if (r < 0) {
		log_warn(&d->log, "cannot read %s/proc/meminfo (%s): MemAvailable unknown", d->backend->root,
			 strerror(-r));
		mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;
	}
	preq.memmap = o->msg->memmap == MSG_MEMMAP_AUTO ? -1 : o->msg->memmap == MSG_MEMMAP_ON;
	preq.zone = o->msg->zone == MSG_ZONE_MOVABLE ? POLICY_ZONE_MOVABLE
		    : o->msg->zone == MSG_ZONE_NORMAL ? POLICY_ZONE_NORMAL : POLICY_ZONE_AUTO;
	preq.contiguous = o->msg->contiguous;
	r = policy_decide(&ps, &preq, t, mem_available, p->blocks, p->n, &pd);
	if (r < 0)
		return abort_op(d, o, r, t, "the policy cannot decide: %s", strerror(-r));
	log_info(&d->log, "grant %s: %s", o->msg->id, pd->memmap_reason);
	log_info(&d->log, "grant %s: %s", o->msg->id, pd->zone_reason);

	pthread_mutex_lock(&d->lock);
	op_add_decision(o, "%s", pd->memmap_reason);
	op_add_decision(o, "%s", pd->zone_reason);
	o->blocks_total = mine + p->n;
	o->state = MSG_STATE_IN_PROGRESS;
	op_publish_locked(d, o, t);
	pthread_mutex_unlock(&d->lock);

	for (size_t i = 0; i < p->n; i++) {
		const struct policy_block *pb = &pd->blocks[i];
		struct journal_step step = { .kind = JOURNAL_STEP_BRING_UP, .block = pb->id, .memmap = pb->memmap,
					     .zone = pb->online == ONLINE_MOVABLE ? MSG_ZONE_MOVABLE : MSG_ZONE_NORMAL };
		struct budget_timer bt = { 0 };
		struct block_result res;
		struct outcome *oc;
		double t0;

		if (stop_requested(d)) {
			log_notice(&d->log, "grant %s: stopping after %zu of %zu blocks; it resumes at the next start",
				   o->msg->id, o->blocks_done, o->blocks_total);
			return -ECANCELED;
		}
		snprintf(step.op, sizeof(step.op), "%s", o->msg->id);
		pthread_mutex_lock(&d->lock);
		r = journal_begin_step(d->journal, &step);
		pthread_mutex_unlock(&d->lock);
		if (r < 0) {
			abort_op(d, o, r, t, "cannot journal the step for block %llu: %s", (unsigned long long)pb->id,
				 strerror(-r));
			return r;
		}
		t0 = now_seconds();
		if (op_timeout_ms)
			budget_arm(d, &bt, t0 + (double)op_timeout_ms / 1000.0);
		block_bring_up(d->backend, pb->id, pb->memmap, pb->online, &res);
		budget_disarm(&bt);
		count_result(d, &res, now_seconds() - t0, true);

		pthread_mutex_lock(&d->lock);
		oc = op_add_outcome(o, pb->id);
		if (oc)
			outcome_from_block(oc, &res.after);
		o->blocks_done++;
		if (res.err == 0) {
			enum msg_zone z = zone_of_block(&res.after);
			r = journal_add_owned_block(d->journal, o->msg->id, pb->id, z, res.after.memmap_on_memory == 1,
						    NULL);
			if (r < 0)
				log_err(&d->log, "grant %s: block %llu is online but cannot be journaled: %s",
					o->msg->id, (unsigned long long)pb->id, strerror(-r));
			ok++;
			o->applied_bytes += t->block_size;
			if (res.auto_onlined) {
				bool wanted_movable = pb->online == ONLINE_MOVABLE;
				bool got_movable = z == MSG_ZONE_MOVABLE;
				op_add_decision(o, "block %llu: configuring it onlined it at once (auto_online_blocks); "
						"policy wanted %s, the kernel chose %s%s",
						(unsigned long long)pb->id, wanted_movable ? "Movable" : "Normal",
						res.after.zones, wanted_movable == got_movable ? "" : " (set backend.own_onlining to let the agent choose)");
				log_warn(&d->log, "grant %s: block %llu was onlined by the kernel at configure time into %s; "
					 "the policy wanted %s", o->msg->id, (unsigned long long)pb->id, res.after.zones,
					 wanted_movable ? "Movable" : "Normal");
			}
		} else if (oc) {
			set_outcome_error(oc, &res, res.err == -EINTR ? " (policy.block_op_timeout ran out)" : NULL);
			log_err(&d->log, "grant %s: %s", o->msg->id, oc->err_msg);
		}
		journal_end_step(d->journal);
		op_publish_locked(d, o, t);
		pthread_mutex_unlock(&d->lock);
	}
	finish_op(d, o, mine + ok, o->blocks_total);
	return 0;
}

/* Blocks a revocation already gave back (restored from its status at a
 * restart): taken down without error, so offline (and deconfigured where
 * there is a firmware interface). */
static bool revoke_done(const struct op *o, uint64_t id)
{
	for (size_t i = 0; i < o->n_outcomes; i++)
		if (o->outcomes[i].block == id && !o->outcomes[i].err_code[0] &&
		    streq(o->outcomes[i].state, "offline"))
			return true;
	return false;
}

static int run_revoke(struct daemon *d, struct op *o)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ struct owned_block *owned = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_free_ uint64_t *busy = NULL;
	struct revoke_request req;
	size_t n_owned = 0, n_busy = 0, k = 0;
	bool resumed = o->applied_bytes > 0;
	uint64_t budget_ms, want;
	double deadline;
	int r;

	r = hp_discover(d->backend, &t);
	if (r < 0)
		return abort_op(d, o, r, NULL, "cannot read the memory blocks: %s", strerror(-r));
	pthread_mutex_lock(&d->lock);
	r = owned_list_locked(d, &owned, &n_owned);
	budget_ms = d->revoke_budget_ms;
	pthread_mutex_unlock(&d->lock);
	if (r < 0)
		return abort_op(d, o, r, t, "cannot read the journal's block list");

	fill_revoke_request(o->msg, &req);
	if (req.by == REVOKE_BY_SIZE) {
		if (o->applied_bytes >= req.size) {
			finish_op(d, o, o->blocks_done, o->blocks_done);
			return 0;
		}
		req.size -= o->applied_bytes;
	} else if (req.by == REVOKE_BY_BLOCKS) {
		ids = calloc(o->msg->n_blocks + 1, sizeof(*ids));
		if (!ids)
			return abort_op(d, o, -ENOMEM, t, "out of memory");
		for (size_t i = 0; i < o->msg->n_blocks; i++)
			if (!revoke_done(o, o->msg->blocks[i]))
				ids[k++] = o->msg->blocks[i];
		if (k == 0) {
			finish_op(d, o, o->blocks_done, o->blocks_done);
			return 0;
		}
		req.ids = ids;
		req.n_ids = k;
	}
	r = plan_revoke(t, &req, owned, n_owned, &p);
	if (r == -ENOENT && req.by == REVOKE_BY_GRANT && resumed) {
		/* the grant's last blocks went back before the restart */
		finish_op(d, o, o->blocks_done, o->blocks_done);
		return 0;
	}
	if (r < 0)
		return abort_op(d, o, r, t, "%s", p ? p->reason : strerror(-r));

	pthread_mutex_lock(&d->lock);
	if (!resumed)
		o->requested_bytes = p->want_bytes;
	o->blocks_total = (size_t)(o->requested_bytes / t->block_size);
	op_add_decision(o, "revoke: %s", p->reason);
	o->state = MSG_STATE_IN_PROGRESS;
	op_publish_locked(d, o, t);
	pthread_mutex_unlock(&d->lock);

	busy = calloc(p->n + 1, sizeof(*busy));
	if (!busy)
		return abort_op(d, o, -ENOMEM, t, "out of memory");
	want = o->requested_bytes;
	deadline = now_seconds() + (double)budget_ms / 1000.0;

	/* First pass in the planner's order; blocks that are busy are retried
	 * while the budget lasts, with pauses growing from 250 ms to 1 s, since
	 * pages in use may move away (W6). */
	for (unsigned pass = 0; o->applied_bytes < want; pass++) {
		const uint64_t *cand = pass == 0 ? p->blocks : busy;
		size_t n = pass == 0 ? p->n : n_busy, next_busy = 0;

		if (pass > 0) {
			long ms = pass >= 3 ? 1000 : 250L << (pass - 1);
			struct timespec pause = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
			if (n == 0 || now_seconds() + (double)ms / 1000.0 >= deadline || stop_requested(d))
				break;
			nanosleep(&pause, NULL);
		}
		for (size_t i = 0; i < n && o->applied_bytes < want; i++) {
			struct journal_step step = { .kind = JOURNAL_STEP_TAKE_DOWN, .block = cand[i], .memmap = -1,
						     .zone = MSG_ZONE_AUTO };
			struct block_result res;
			struct budget_timer bt = { 0 };
			struct outcome *oc = NULL;
			double t0;

			if (stop_requested(d)) {
				log_notice(&d->log, "revocation %s: stopping; it resumes at the next start", o->msg->id);
				return -ECANCELED;
			}
			if (now_seconds() >= deadline) {
				busy[next_busy++] = cand[i];
				continue;
			}
			snprintf(step.op, sizeof(step.op), "%s", o->msg->id);
			pthread_mutex_lock(&d->lock);
			r = journal_begin_step(d->journal, &step);
			pthread_mutex_unlock(&d->lock);
			if (r < 0) {
				log_err(&d->log, "revocation %s: cannot journal the step: %s", o->msg->id, strerror(-r));
				goto done;
			}
			t0 = now_seconds();
			budget_arm(d, &bt, deadline);
			block_take_down(d->backend, cand[i], &res);
			budget_disarm(&bt);
			count_result(d, &res, now_seconds() - t0, false);

			pthread_mutex_lock(&d->lock);
			/* one outcome per block: a retried block updates its entry */
			for (size_t j = 0; j < o->n_outcomes; j++)
				if (o->outcomes[j].block == cand[i])
					oc = &o->outcomes[j];
			if (!oc)
				oc = op_add_outcome(o, cand[i]);
			if (oc) {
				memset(oc->err_code, 0, sizeof(oc->err_code));
				outcome_from_block(oc, &res.after);
			}
			if (res.err == 0) {
				journal_remove_owned_block(d->journal, cand[i]);
				o->applied_bytes += t->block_size;
				o->blocks_done++;
			} else {
				if (oc)
					set_outcome_error(oc, &res, res.err == -EINTR ? " (the revocation's time budget ran out)"
										    : res.err == -EBUSY ? " (skipped, still busy)" : NULL);
				if (res.err == -EBUSY || res.err == -EINTR)
					busy[next_busy++] = cand[i];
				log_warn(&d->log, "revocation %s: %s", o->msg->id, oc ? oc->err_msg : "block failed");
			}
			journal_end_step(d->journal);
			op_publish_locked(d, o, t);
			pthread_mutex_unlock(&d->lock);
		}
		n_busy = next_busy;
	}
done:
	finish_op(d, o, o->blocks_done, o->blocks_total);
	return 0;
}

static void *executor_main(void *arg)
{
	struct daemon *d = arg;
	sigset_t unblock;

	d->executor_tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&unblock);
	sigaddset(&unblock, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);

	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct op *o;

		while (!d->queue_head && !d->stopping)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stopping)
			break;
		o = d->queue_head;
		d->queue_head = o->next;
		if (!d->queue_head)
			d->queue_tail = NULL;
		o->next = NULL;
		d->running = o;
		pthread_mutex_unlock(&d->lock);

		if (o->msg->type == MSG_GRANT)
			run_grant(d, o);
		else
			run_revoke(d, o);

		pthread_mutex_lock(&d->lock);
		d->running = NULL;
		op_free(o);
		notify(d);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* --- start, reconcile, stop ---------------------------------------------------- */

static int open_backend(struct daemon *d, const struct mg_config *cfg)
{
	if (cfg->backend.type == MG_BACKEND_SIM) {
		const struct mg_sim_config *s = &cfg->backend.sim;
		int r;

		if (access(s->state, F_OK) < 0) {
			struct sim_params p = {
				.online_bytes = s->online,
				.standby_bytes = s->standby,
				.block_size = s->block_size,
				.memmap_supported = s->memmap_on_memory_supported,
				.has_firmware = s->has_firmware,
				.used_bytes = s->used,
				.auto_online = mg_auto_online_name(s->auto_online_blocks),
				.tree = s->tree,
			};
			r = sim_init(s->state, &p);
			if (r < 0) {
				log_err(&d->log, "cannot create the sim %s: %s", s->state, strerror(-r));
				return r;
			}
			log_notice(&d->log, "created sim machine %s", s->state);
		}
		if (s->faults.configure_eio.n || s->faults.offline_ebusy.n || s->faults.latency_ms) {
			struct sim_faults f = {
				.configure_eio = s->faults.configure_eio.ids,
				.n_configure_eio = s->faults.configure_eio.n,
				.offline_ebusy = s->faults.offline_ebusy.ids,
				.n_offline_ebusy = s->faults.offline_ebusy.n,
				.latency_ms = s->faults.latency_ms,
			};
			r = sim_set_faults(s->state, &f);
			if (r < 0)
				return r;
		}
		r = hp_sim_open(s->state, &d->backend);
		if (r < 0) {
			char why[256] = "";
			sim_check_file(s->state, why, sizeof(why));
			log_err(&d->log, "cannot open the sim %s: %s", s->state, why[0] ? why : strerror(-r));
		}
		return r;
	}
	return hp_sysfs_open(cfg->backend.root, &d->backend);
}

static void apply_settings(struct daemon *d, const struct mg_config *cfg)
{
	d->policy.memmap = cfg->policy.memmap_on_memory == MG_MEMMAP_ALWAYS ? POLICY_MEMMAP_ALWAYS
			   : cfg->policy.memmap_on_memory == MG_MEMMAP_NEVER ? POLICY_MEMMAP_NEVER
									      : POLICY_MEMMAP_AUTO;
	d->policy.zone = cfg->policy.zone == MG_ZONE_MOVABLE ? POLICY_ZONE_MOVABLE
			 : cfg->policy.zone == MG_ZONE_NORMAL ? POLICY_ZONE_NORMAL : POLICY_ZONE_AUTO;
	d->policy.reserve = cfg->policy.reserve;
	d->policy.movable_ratio = cfg->policy.movable_ratio;
	d->revoke_budget_ms = cfg->policy.revoke_budget_ms;
	d->block_op_timeout_ms = cfg->policy.block_op_timeout_ms;
	d->body_limit = (size_t)cfg->agent.api_body_limit;
	d->log.level = (int)cfg->agent.log_level;
}

int daemon_new(const struct mg_config *cfg, const struct mg_log *log, struct daemon **out)
{
	struct daemon *d = calloc(1, sizeof(*d));
	char err[256] = "";
	int r;

	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&d->outbox_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	d->log = *log;
	d->notify_fd = -1;
	d->agent_id = strdup(cfg->agent.id);
	d->state_dir = strdup(cfg->agent.state_dir);
	d->own_onlining = cfg->backend.own_onlining;
	apply_settings(d, cfg);
	if (!d->agent_id || !d->state_dir) {
		r = -ENOMEM;
		goto fail;
	}
	d->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->notify_fd < 0) {
		r = -errno;
		goto fail;
	}
	r = metrics_new(&d->metrics);
	if (r < 0)
		goto fail;
	r = events_new(1024, &d->events);
	if (r < 0)
		goto fail;
	r = journal_open(d->state_dir, NULL, &d->journal, err, sizeof(err));
	if (r < 0) {
		log_err(&d->log, "journal %s: %s", d->state_dir, err[0] ? err : strerror(-r));
		goto fail;
	}
	r = open_backend(d, cfg);
	if (r < 0) {
		log_err(&d->log, "%s backend: %s", mg_backend_type_name(cfg->backend.type), strerror(-r));
		goto fail;
	}
	*out = d;
	return 0;
fail:
	daemon_free(d);
	return r;
}

/* auto_online_blocks: when the agent owns onlining it sets "offline" and puts
 * the old value back at exit.  The old value is saved first, so a crash in
 * between still restores the operator's setting on the next clean stop. */
static void take_over_onlining(struct daemon *d)
{
	char cur[32] = "", path[4096];
	_cleanup_free_ char *saved = NULL;
	int r;

	r = d->backend->ops->read_auto_online(d->backend, cur, sizeof(cur));
	if (r < 0) {
		log_info(&d->log, "auto_online_blocks not present (%s): nothing to take over", strerror(-r));
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", d->state_dir, AUTO_ONLINE_SAVE);
	if (file_read_all(path, 64, &saved, NULL) == 0) {
		saved[strcspn(saved, "\n")] = '\0';
		snprintf(d->auto_online_saved, sizeof(d->auto_online_saved), "%s", saved);
	} else if (!streq(cur, "offline")) {
		r = file_write_atomic(path, cur, strlen(cur), 0600);
		if (r < 0) {
			log_err(&d->log, "cannot save auto_online_blocks=%s to %s: %s; leaving it as it is", cur, path,
				strerror(-r));
			return;
		}
		snprintf(d->auto_online_saved, sizeof(d->auto_online_saved), "%s", cur);
	}
	if (!streq(cur, "offline")) {
		r = hp_set_auto_online(d->backend, "offline");
		if (r < 0) {
			log_err(&d->log, "cannot set auto_online_blocks=offline: %s; the kernel will online "
				"configured blocks itself", strerror(-r));
			return;
		}
		log_notice(&d->log, "auto_online_blocks was %s: set to offline so the policy chooses each zone "
			   "(restored at exit)", cur);
	}
}

static void give_back_onlining(struct daemon *d)
{
	char path[4096];
	int r;

	if (!d->auto_online_saved[0])
		return;
	r = hp_set_auto_online(d->backend, d->auto_online_saved);
	if (r < 0) {
		log_err(&d->log, "cannot restore auto_online_blocks=%s: %s", d->auto_online_saved, strerror(-r));
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", d->state_dir, AUTO_ONLINE_SAVE);
	unlink(path);
	log_notice(&d->log, "auto_online_blocks restored to %s", d->auto_online_saved);
}

/*
 * A revocation's take-down of BLOCK finished although the agent died before
 * it could record it: the revocation's stored report gets the block, so
 * that it resumes with the right count.
 */
static void credit_revocation(struct daemon *d, const char *op, uint64_t block, uint64_t block_size)
{
	struct journal_grant g = { 0 };
	json_t *status, *blocks, *entry = NULL, *e;
	size_t i;

	if (journal_get_grant(d->journal, op, &g) < 0 || g.type != MSG_REVOKE || !g.status) {
		journal_grant_done(&g);
		return;
	}
	status = json_deep_copy(g.status);
	blocks = json_object_get(status, "blocks");
	json_array_foreach(blocks, i, e)
		if ((uint64_t)json_integer_value(json_object_get(e, "block")) == block)
			entry = e;
	if (!entry) {
		char range[64];
		plan_format_range(block_size, block, range, sizeof(range));
		entry = json_pack("{s:I,s:s}", "block", (json_int_t)block, "range", range);
		json_array_append_new(blocks, entry);
	}
	json_object_set_new(entry, "state", json_string("offline"));
	json_object_set_new(entry, "error", json_null());
	json_object_set_new(status, "applied_bytes",
			    json_integer(json_integer_value(json_object_get(status, "applied_bytes")) +
					 (json_int_t)block_size));
	json_object_set_new(status, "blocks_done",
			    json_integer(json_integer_value(json_object_get(status, "blocks_done")) + 1));
	journal_set_state(d->journal, op, g.state, status, NULL);
	json_decref(status);
	journal_grant_done(&g);
}

/* Finishes or undoes the block step a crash interrupted (journal marker). */
static void reconcile_step(struct daemon *d, const struct mem_table *t)
{
	struct journal_step st;
	struct mem_block b;
	struct block_result res;
	int r;

	if (journal_pending_step(d->journal, &st) < 0)
		return;
	r = hp_read_block(d->backend, st.block, &b);
	log_notice(&d->log, "%s of block %llu for %s was interrupted (%s); the block is %s",
		   st.kind == JOURNAL_STEP_BRING_UP ? "bringing up" : "taking down", (unsigned long long)st.block,
		   st.op, st.phase[0] ? st.phase : "no phase recorded",
		   r < 0 ? "unreadable" : !b.configured ? "deconfigured" : mem_state_name(b.state));
	if (st.kind == JOURNAL_STEP_BRING_UP) {
		if (r == 0 && b.configured) {
			/* ours: the marker says we were bringing exactly this block up; finish it */
			enum online_type ot = st.zone == MSG_ZONE_MOVABLE ? ONLINE_MOVABLE : ONLINE_KERNEL;
			if (block_bring_up(d->backend, st.block, -1, ot, &res) == 0) {
				journal_add_owned_block(d->journal, st.op, st.block, zone_of_block(&res.after),
							res.after.memmap_on_memory == 1, NULL);
				log_notice(&d->log, "block %llu: finished bringing it up for %s",
					   (unsigned long long)st.block, st.op);
			} else {
				log_warn(&d->log, "block %llu: cannot finish bringing it up (%s), undoing",
					 (unsigned long long)st.block, strerror(-res.err));
				block_take_down(d->backend, st.block, &res);
			}
		}
	} else if (r == 0) {
		bool done = false;
		if (b.in_firmware && b.configured && b.state == MEM_STATE_OFFLINE)
			done = block_take_down(d->backend, st.block, &res) == 0; /* finish: config=0 */
		else if (mem_block_is_standby(&b) || (!b.in_firmware && b.state == MEM_STATE_OFFLINE))
			done = true; /* the kernel finished it before the agent died */
		if (done && journal_remove_owned_block(d->journal, st.block) == 0 && t) {
			credit_revocation(d, st.op, st.block, t->block_size);
			log_notice(&d->log, "block %llu: given back for %s", (unsigned long long)st.block, st.op);
		}
	}
	journal_end_step(d->journal);
}

/*
 * Blocks the journal says are ours but the kernel no longer has online stop
 * counting as granted.  One that is configured but offline (an undo that
 * failed, or an operator's offline) is deconfigured first, so the storage
 * goes back to the hypervisor instead of being stranded (C13).
 */
static void reconcile_owned(struct daemon *d)
{
	_cleanup_free_ struct journal_block *jb = NULL;
	size_t n = 0;

	if (journal_owned_blocks(d->journal, &jb, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct mem_block b;
		struct block_result res;
		int r = hp_read_block(d->backend, jb[i].block, &b);
		if (r == 0 && b.configured && b.state != MEM_STATE_OFFLINE)
			continue;
		if (r == 0 && b.in_firmware && b.configured && b.state == MEM_STATE_OFFLINE) {
			r = block_take_down(d->backend, jb[i].block, &res);
			log_warn(&d->log, "block %llu of %s was configured but offline: %s", (unsigned long long)jb[i].block,
				 jb[i].grant_id, r == 0 ? "deconfigured it" : "cannot deconfigure it");
		}
		log_warn(&d->log, "block %llu of %s is %s outside the agent's control: no longer counted as granted",
			 (unsigned long long)jb[i].block, jb[i].grant_id,
			 r < 0 ? "gone" : !b.configured ? "deconfigured" : "offline");
		journal_remove_owned_block(d->journal, jb[i].block);
	}
}

/* What a revocation had done before the agent stopped, from its last report. */
static void restore_revocation(struct op *o, json_t *status)
{
	json_t *e;
	size_t i;

	o->applied_bytes = (uint64_t)json_integer_value(json_object_get(status, "applied_bytes"));
	o->blocks_done = (size_t)json_integer_value(json_object_get(status, "blocks_done"));
	json_array_foreach(json_object_get(status, "blocks"), i, e) {
		struct outcome *oc = op_add_outcome(o, (uint64_t)json_integer_value(json_object_get(e, "block")));
		json_t *err = json_object_get(e, "error");
		if (!oc)
			return;
		oc->configured = json_is_true(json_object_get(e, "configured"));
		snprintf(oc->state, sizeof(oc->state), "%s", json_string_value(json_object_get(e, "state")) ?: "");
		snprintf(oc->zone, sizeof(oc->zone), "%s", json_string_value(json_object_get(e, "zone")) ?: "");
		if (json_is_object(err)) {
			snprintf(oc->err_code, sizeof(oc->err_code), "%s",
				 json_string_value(json_object_get(err, "code")) ?: "E?");
			snprintf(oc->err_msg, sizeof(oc->err_msg), "%s",
				 json_string_value(json_object_get(err, "message")) ?: "");
		}
	}
}

/* Grants a crash or stop left accepted or in progress go back into the queue. */
static int requeue_unfinished(struct daemon *d)
{
	struct journal_grant *gs = NULL;
	size_t n = 0;
	int r = journal_list_grants(d->journal, &gs, &n);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		struct msg_error err;
		struct op *o;
		struct msg *m = NULL;

		if (msg_state_is_final(gs[i].state))
			continue;
		if (msg_from_json(gs[i].request, &m, &err) < 0) {
			log_err(&d->log, "%s: journaled request unreadable (%s): marking it failed", gs[i].id, err.message);
			journal_set_state(d->journal, gs[i].id, MSG_STATE_FAILED, NULL, NULL);
			continue;
		}
		o = calloc(1, sizeof(*o));
		if (!o) {
			msg_free(m);
			r = -ENOMEM;
			break;
		}
		o->msg = m;
		snprintf(o->source, sizeof(o->source), "%s", gs[i].source);
		o->state = gs[i].state;
		o->requested_bytes = (uint64_t)json_integer_value(json_object_get(gs[i].status, "requested_bytes"));
		if (m->type == MSG_REVOKE)
			restore_revocation(o, gs[i].status);
		if (d->queue_tail)
			d->queue_tail->next = o;
		else
			d->queue_head = o;
		d->queue_tail = o;
		log_notice(&d->log, "%s %s was %s when the agent stopped: resuming", msg_type_name(m->type), m->id,
			   msg_state_name(gs[i].state));
	}
	journal_grants_free(gs, n);
	return r;
}

int daemon_start(struct daemon *d)
{
	struct sigaction sa = { .sa_handler = interrupt_handler };
	int r;

	/* no SA_RESTART: the budget timer must end a blocking write with EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	if (d->own_onlining)
		take_over_onlining(d);
	pthread_mutex_lock(&d->lock);
	{
		_cleanup_mem_table_ struct mem_table *t = NULL;
		hp_discover(d->backend, &t);
		reconcile_step(d, t);
	}
	reconcile_owned(d);
	r = requeue_unfinished(d);
	pthread_mutex_unlock(&d->lock);
	if (r < 0)
		return r;
	{
		/* the executor gets SIGUSR1 only through its own mask */
		sigset_t block, old;
		sigemptyset(&block);
		sigaddset(&block, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &block, &old);
		r = -pthread_create(&d->executor, NULL, executor_main, d);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (r < 0)
		return r;
	d->executor_started = true;
	return 0;
}

void daemon_stop(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_broadcast(&d->cond);
	pthread_mutex_unlock(&d->lock);
	if (d->executor_started) {
		pthread_join(d->executor, NULL);
		d->executor_started = false;
	}
	events_close(d->events);
	daemon_wake_providers(d);
	if (d->own_onlining && d->backend)
		give_back_onlining(d);
}

void daemon_free(struct daemon *d)
{
	if (!d)
		return;
	while (d->queue_head) {
		struct op *o = d->queue_head;
		d->queue_head = o->next;
		op_free(o);
	}
	hp_backend_close(d->backend);
	journal_close(d->journal);
	events_free(d->events);
	metrics_free(d->metrics);
	if (d->notify_fd >= 0)
		close(d->notify_fd);
	free(d->agent_id);
	free(d->state_dir);
	pthread_cond_destroy(&d->cond);
	pthread_cond_destroy(&d->outbox_cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int daemon_reload(struct daemon *d, const struct mg_config *cfg)
{
	pthread_mutex_lock(&d->lock);
	if (!streq(cfg->agent.state_dir, d->state_dir))
		log_warn(&d->log, "agent.state_dir changed: takes effect at the next start");
	apply_settings(d, cfg);
	pthread_mutex_unlock(&d->lock);
	notify(d);
	return 0;
}

/* --- read side ------------------------------------------------------------------ */

int daemon_blocks_json(struct daemon *d, json_t **out)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	int r = hp_discover(d->backend, &t);

	if (r < 0)
		return r;
	return blockjson_from_table(t, out);
}

json_t *daemon_grant_json(struct daemon *d, const char *id)
{
	struct journal_grant g = { 0 };
	json_t *j = NULL;

	pthread_mutex_lock(&d->lock);
	if (journal_get_grant(d->journal, id, &g) == 0) {
		j = g.status ? json_deep_copy(g.status) : NULL;
		journal_grant_done(&g);
	}
	pthread_mutex_unlock(&d->lock);
	return j;
}

json_t *daemon_grants_json(struct daemon *d)
{
	struct journal_grant *gs = NULL;
	size_t n = 0;
	json_t *arr = json_array();

	pthread_mutex_lock(&d->lock);
	if (journal_list_grants(d->journal, &gs, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			json_t *s = gs[i].status ? json_deep_copy(gs[i].status) : json_object();
			json_object_set_new(s, "created", json_integer((json_int_t)gs[i].created));
			json_object_set_new(s, "owned_blocks", json_integer((json_int_t)gs[i].n_blocks));
			json_array_append_new(arr, s);
		}
		journal_grants_free(gs, n);
	}
	pthread_mutex_unlock(&d->lock);
	return json_pack("{s:o}", "grants", arr);
}

static uint64_t granted_bytes_locked(struct daemon *d, uint64_t block_size)
{
	_cleanup_free_ struct journal_block *jb = NULL;
	size_t n = 0;

	if (journal_owned_blocks(d->journal, &jb, &n) < 0)
		return 0;
	return (uint64_t)n * block_size;
}

json_t *daemon_status_json(struct daemon *d)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	uint64_t online = 0, standby = 0, granted = 0;
	char auto_online[32] = "";
	json_t *j, *running = json_null();
	size_t queued = 0;

	if (hp_discover(d->backend, &t) == 0)
		memory_figures(t, &online, &standby);
	if (d->backend->ops->read_auto_online(d->backend, auto_online, sizeof(auto_online)) < 0)
		auto_online[0] = '\0';
	pthread_mutex_lock(&d->lock);
	if (t)
		granted = granted_bytes_locked(d, t->block_size);
	for (struct op *o = d->queue_head; o; o = o->next)
		queued++;
	if (d->running)
		running = json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", d->running->msg->id, "kind",
				    msg_type_name(d->running->msg->type), "state", msg_state_name(d->running->state),
				    "blocks_done", (json_int_t)d->running->blocks_done, "blocks_total",
				    (json_int_t)d->running->blocks_total);
	j = json_pack("{s:s,s:s,s:s,s:s,s:b,s:{s:I,s:I,s:I,s:I},s:s?,s:o,s:I,s:{s:s,s:s,s:I,s:I}}",
		      "agent", d->agent_id, "version", MEMGRANT_VERSION, "backend", d->backend->ops->name, "root",
		      d->backend->root, "stopping", d->stopping, "memory", "block_size",
		      (json_int_t)(t ? t->block_size : 0), "online_bytes", (json_int_t)online, "standby_bytes",
		      (json_int_t)standby, "granted_bytes", (json_int_t)granted, "auto_online_blocks",
		      auto_online[0] ? auto_online : NULL, "running", running, "queued", (json_int_t)queued,
		      "policy", "memmap_on_memory", policy_memmap_name(d->policy.memmap), "zone",
		      policy_zone_name(d->policy.zone), "reserve", (json_int_t)d->policy.reserve, "movable_ratio",
		      (json_int_t)d->policy.movable_ratio);
	pthread_mutex_unlock(&d->lock);
	return j;
}

void daemon_status_line(struct daemon *d, char *buf, size_t len)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	uint64_t online = 0, standby = 0, granted = 0;
	char on[16], gr[16];

	if (hp_discover(d->backend, &t) == 0)
		memory_figures(t, &online, &standby);
	pthread_mutex_lock(&d->lock);
	if (t)
		granted = granted_bytes_locked(d, t->block_size);
	size_format(online, on, sizeof(on));
	size_format(granted, gr, sizeof(gr));
	if (d->running)
		snprintf(buf, len, "%s %s: %zu of %zu blocks; %s online, %s granted",
			 msg_type_name(d->running->msg->type), d->running->msg->id, d->running->blocks_done,
			 d->running->blocks_total, on, gr);
	else
		snprintf(buf, len, "idle; %s online, %s granted", on, gr);
	pthread_mutex_unlock(&d->lock);
}

int daemon_metrics_text(struct daemon *d, char **out)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct metrics_gauges g = { 0 };

	if (hp_discover(d->backend, &t) == 0) {
		g.block_size = t->block_size;
		memory_figures(t, &g.online_bytes, &g.standby_bytes);
	}
	pthread_mutex_lock(&d->lock);
	if (t)
		g.granted_bytes = granted_bytes_locked(d, t->block_size);
	g.outbox_pending = journal_outbox_count(d->journal, "https") + journal_outbox_count(d->journal, "channel");
	pthread_mutex_unlock(&d->lock);
	return metrics_render(d->metrics, &g, out);
}

/* --- providers ------------------------------------------------------------------- */

uint64_t daemon_last_generation(struct daemon *d, const char *source)
{
	uint64_t g;

	pthread_mutex_lock(&d->lock);
	g = journal_last_generation(d->journal, source);
	pthread_mutex_unlock(&d->lock);
	return g;
}

int daemon_outbox_peek(struct daemon *d, const char *dest, uint64_t *seq, json_t **report)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = journal_outbox_peek(d->journal, dest, seq, report);
	pthread_mutex_unlock(&d->lock);
	return r;
}

size_t daemon_outbox_count(struct daemon *d, const char *dest)
{
	size_t n;

	pthread_mutex_lock(&d->lock);
	n = journal_outbox_count(d->journal, dest);
	pthread_mutex_unlock(&d->lock);
	return n;
}

int daemon_outbox_ack(struct daemon *d, const char *dest, uint64_t seq)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = journal_outbox_ack(d->journal, dest, seq);
	pthread_mutex_unlock(&d->lock);
	if (r == 0)
		notify(d);
	return r;
}

int daemon_outbox_wait(struct daemon *d, const char *dest, int timeout_ms)
{
	struct timespec deadline;
	uint64_t gen;
	int waiting;

	deadline_after_ms(&deadline, timeout_ms >= 0 ? timeout_ms : 0);
	pthread_mutex_lock(&d->lock);
	gen = d->wake_gen;
	for (;;) {
		waiting = journal_outbox_count(d->journal, dest) > 0;
		if (waiting || d->wake_gen != gen || d->stopping)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&d->outbox_cond, &d->lock);
		else if (pthread_cond_timedwait(&d->outbox_cond, &d->lock, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&d->lock);
	return waiting;
}

void daemon_wake_providers(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	d->wake_gen++;
	pthread_cond_broadcast(&d->outbox_cond);
	pthread_mutex_unlock(&d->lock);
}

int daemon_outbox_push(struct daemon *d, const char *dest, json_t *report)
{
	int r;

	pthread_mutex_lock(&d->lock);
	r = journal_outbox_push(d->journal, dest, report, NULL);
	if (r == 0)
		pthread_cond_broadcast(&d->outbox_cond);
	pthread_mutex_unlock(&d->lock);
	if (r == 0)
		notify(d);
	return r;
}
