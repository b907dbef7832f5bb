/* SPDX-License-Identifier: MIT */
/*
 * The HTTPS provider (see https.h for the contract, docs/https.md for the
 * protocol as a control-plane team sees it): its two threads, start and
 * stop.  One request is https_http.c; the answers' contents https_wire.c.
 *
 * Two threads, each with one curl multi handle holding one easy handle that
 * is reused for every request, so each keeps one connection alive (HTTP/2
 * when the server offers it over ALPN, HTTP/1.1 keep-alive otherwise):
 *   poller  GET {url}/v1/agents/{agent}/grants?after=G&wait=S&limit=N, forever,
 *           pausing while the agent's queue or outbox is full (back-pressure);
 *   sender  PUT {url}/v1/agents/{agent} (inventory) when the layout changed,
 *           then POST {url}/v1/agents/{agent}/status for each outbox report.
 * A multi handle rather than sym_curl_easy_perform() because sym_curl_multi_wakeup()
 * lets https_provider_stop() abort a long poll at once, with no periodic
 * progress callback waking the thread while the server holds the poll.
 */
#include "providers/https.h"
#include "providers/https_int.h"
#include "providers/https_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "config/config.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "lib/wire/message.h"
#include "lib/wire/report_json.h"
#include "providers/views/views_json.h"

/* --- inventory ----------------------------------------------------------------- */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

/* The inventory body and the fingerprint of its layout part. */
static int inventory_build(struct https_provider *p, char **body, uint64_t *fp)
{
	_cleanup_json_ json_t *blocks = NULL;
	_cleanup_json_ json_t *inv = NULL;
	_cleanup_free_ char *layout = NULL;
	json_t *st;
	int r;

	r = views_engine_blocks(p->d, false, &blocks);
	if (r < 0)
		return r;
	layout = json_dumps(blocks, JSON_COMPACT | JSON_SORT_KEYS);
	if (!layout)
		return -ENOMEM;
	*fp = fnv1a(layout);
	st = views_engine_status(p->d);
	inv = json_pack("{s:s,s:s,s:s,s:i,s:O,s:O,s:O}", "type", "inventory", "agent", p->agent_id, "version",
			MEMGRANT_VERSION, "protocol", 1, "block_size",
			json_object_get(blocks, "block_size") ? json_object_get(blocks, "block_size")
							      : json_null(),
			"memory", st && json_object_get(st, "memory") ? json_object_get(st, "memory") : json_null(),
			"blocks", json_object_get(blocks, "blocks") ? json_object_get(blocks, "blocks")
								    : json_null());
	json_decref(st);
	if (!inv)
		return -ENOMEM;
	json_object_set_new(inv, "last_generation", json_integer((json_int_t)engine_last_generation(p->d, p->source)));
	*body = json_dumps(inv, JSON_COMPACT | JSON_SORT_KEYS);
	return *body ? 0 : -ENOMEM;
}

/* The current layout's fingerprint, 0 when it cannot be read. */
static uint64_t layout_fp(struct https_provider *p)
{
	_cleanup_json_ json_t *blocks = NULL;
	_cleanup_free_ char *layout = NULL;

	if (views_engine_blocks(p->d, false, &blocks) < 0)
		return 0;
	layout = json_dumps(blocks, JSON_COMPACT | JSON_SORT_KEYS);
	return layout ? fnv1a(layout) : 0;
}

/* True when the inventory must be sent (again). */
static bool inventory_due(struct https_provider *p)
{
	uint64_t fp = layout_fp(p);
	bool due;

	pthread_mutex_lock(&p->lock);
	if (fp && fp != p->inventory_fp)
		p->inventory_dirty = true;
	due = p->inventory_dirty;
	pthread_mutex_unlock(&p->lock);
	return due;
}

/* PUT the inventory; OUT_OK when the server took it. */
static enum outcome inventory_send(struct https_provider *p, struct conn *c)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_free_ char *url = NULL;
	struct response resp;
	char why[512] = "";
	uint64_t fp = 0;
	enum outcome o;
	int r;

	r = inventory_build(p, &body, &fp);
	if (r < 0) {
		log_err(p->log, "https send: cannot read the memory layout for the inventory: %s", strerror(-r));
		return https_sleep_ms(p, c, p->backoff_cap_ms) ? OUT_STOPPED : OUT_RETRY;
	}
	if (asprintf(&url, "%s/v1/agents/%s", p->base, p->agent) < 0)
		return OUT_RETRY;
	r = https_request(p, c, "PUT", url, body, NULL, REQUEST_TIMEOUT_MS, &resp, why, sizeof(why));
	o = https_classify_ack(p, c, r, &resp, "PUT inventory", why);
	if (o == OUT_OK) {
		https_succeeded(p, c);
		pthread_mutex_lock(&p->lock);
		p->inventory_fp = fp;
		p->inventory_dirty = false;
		pthread_mutex_unlock(&p->lock);
		log_info(p->log, "https send: inventory sent (HTTP %ld)", resp.code);
	}
	https_response_done(&resp);
	return o;
}

/* --- the sender: inventory and the outbox, strictly in order ------------------- */

static enum outcome report_send(struct https_provider *p, struct conn *c, uint64_t seq, json_t *report)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_free_ char *url = NULL;
	char key[256], what[160], why[512] = "";
	const char *id = json_string_value(json_object_get(report, "id"));
	/* a status has a state; a pressure request or offer only a type */
	const char *state = json_string_value(json_object_get(report, "state"))
				    ?: json_string_value(json_object_get(report, "type"));
	json_int_t gen = json_integer_value(json_object_get(report, "generation"));
	struct response resp;
	enum outcome o;
	int r;

	id = id ? id : "-";
	state = state ? state : "-";
	/* the same report keeps its key across retries and restarts (seq is durable) */
	snprintf(key, sizeof(key), "%s:%lld:%s:%llu", id, (long long)gen, state, (unsigned long long)seq);
	snprintf(what, sizeof(what), "POST status %s %s (generation %lld)", id, state, (long long)gen);
	/* generation 0 when the message has none (request, offer) */
	body = json_dumps(report, JSON_COMPACT | JSON_SORT_KEYS);
	if (!body || asprintf(&url, "%s/v1/agents/%s/status", p->base, p->agent) < 0)
		return https_sleep_ms(p, c, BACKOFF_FIRST_MS) ? OUT_STOPPED : OUT_RETRY;
	r = https_request(p, c, "POST", url, body, key, REQUEST_TIMEOUT_MS, &resp, why, sizeof(why));
	o = https_classify_ack(p, c, r, &resp, what, why);
	if (o == OUT_OK) {
		unsigned wait_ms = 0;

		https_succeeded(p, c);
		/* delivered: only its removal is left.  A journal that cannot record
		 * it (disk full) is waited out here, not answered by sending the
		 * report again and again; one that broke stops the engine, and the
		 * report goes again, with its key, after the next start. */
		while ((r = engine_outbox_ack(p->d, SOURCE, seq)) < 0 && r != -ENOENT) {
			if (!wait_ms)
				log_err(p->log, "https send: %s delivered but cannot be removed from the outbox: %s; "
					"trying again", key, strerror(-r));
			wait_ms = wait_ms ? wait_ms * 2 : BACKOFF_FIRST_MS;
			if (wait_ms > JOURNAL_RETRY_MAX_MS)
				wait_ms = JOURNAL_RETRY_MAX_MS;
			if (https_sleep_ms(p, c, wait_ms)) {
				o = OUT_STOPPED;
				break;
			}
		}
		if (r == 0)
			log_debug(p->log, "https send: %s delivered (HTTP %ld)%s", key, resp.code,
				  wait_ms ? ", removed from the outbox at last" : "");
	}
	https_response_done(&resp);
	return o;
}

static void *sender_main(void *arg)
{
	struct https_provider *p = arg;
	struct conn *c = &p->send;

	bool inventory_refused = false;

	while (!https_stopping(p)) {
		json_t *report = NULL;
		uint64_t seq = 0;
		enum outcome o;
		int r;

		/* the inventory goes first: the reports that follow refer to that
		 * layout.  A server that refuses the inventory (4xx) still gets the
		 * reports, one between two attempts at the inventory. */
		if (!inventory_refused && inventory_due(p)) {
			o = inventory_send(p, c);
			if (o == OUT_STOPPED)
				break;
			if (o == OUT_RETRY)
				continue; /* backed off already */
			inventory_refused = o == OUT_REFUSED;
		}
		r = views_outbox_peek(p->d, SOURCE, &seq, &report);
		if (r == -ENOENT && inventory_refused) {
			inventory_refused = false; /* nothing else to send: back to the inventory */
			continue;
		}
		if (r == -ENOENT) {
			/* sleeps until a report is queued or the provider is woken */
			engine_outbox_wait(p->d, SOURCE, -1);
			continue;
		}
		if (r < 0) {
			log_err(p->log, "https send: cannot read the outbox: %s", strerror(-r));
			if (https_sleep_ms(p, c, p->backoff_cap_ms))
				break;
			continue;
		}
		o = report_send(p, c, seq, report);
		json_decref(report);
		inventory_refused = false;
		if (o == OUT_STOPPED)
			break;
	}
	return NULL;
}

/* --- the poller: long poll for grants ---------------------------------------- */

/* Back-pressure: while the engine's queue or the outbox of reports is this
 * full the poller takes nothing more (and does not poll), until both are
 * below their low marks.  The outbox holds JOURNAL_OUTBOX_DEFAULT (4096)
 * reports; a batch of HTTPS_BATCH_MAX grants adds at most three each. */
#define QUEUE_HIGH 64u
#define QUEUE_LOW 16u
#define OUTBOX_HIGH 2048u
#define OUTBOX_LOW 1024u
#define BACKPRESSURE_TICK_MS 200u

static size_t queued_grants(struct https_provider *p)
{
	_cleanup_json_ json_t *st = views_engine_status(p->d);

	return (size_t)json_integer_value(json_object_get(st, "queued"));
}

/* Waits while the agent is too busy to take more.  True when stopping. */
static bool backpressure_wait(struct https_provider *p, bool check_queue)
{
	size_t ob = engine_outbox_count(p->d, SOURCE), q = check_queue ? queued_grants(p) : 0;
	uint64_t t0;

	if (ob < OUTBOX_HIGH && q < QUEUE_HIGH)
		return false;
	t0 = mono_ms();
	log_notice(p->log, "https poll: %zu reports wait to be delivered and %zu grants to be applied: taking no more "
		   "from the control plane until fewer than %u and %u wait", ob, q, OUTBOX_LOW, QUEUE_LOW);
	do {
		if (https_sleep_ms(p, &p->poll, BACKPRESSURE_TICK_MS))
			return true;
		ob = engine_outbox_count(p->d, SOURCE);
		q = queued_grants(p);
	} while (ob >= OUTBOX_LOW || q >= QUEUE_LOW);
	log_info(p->log, "https poll: the agent caught up after %llu ms; polling again",
		 (unsigned long long)(mono_ms() - t0));
	return false;
}

/* Logs what an answer skipped: in full when it differs from the last
 * answer's skips (a server that keeps sending the same bad message is not a
 * new line every poll). */
static void log_skips(struct https_provider *p, const struct https_batch *b, uint64_t cursor)
{
	uint64_t fp = 1469598103934665603ull;

	if (b->n_skips == 0) {
		p->skip_fp = 0;
		return;
	}
	for (size_t i = 0; i < b->n_skips_shown; i++) {
		fp = (fp ^ b->skips[i].index) * 1099511628211ull;
		for (const char *q = b->skips[i].why; *q; q++)
			fp = (fp ^ (unsigned char)*q) * 1099511628211ull;
	}
	fp ^= b->n_skips;
	for (size_t i = 0; i < b->n_skips_shown; i++) {
		const struct https_skip *s = &b->skips[i];
		if (fp != p->skip_fp)
			log_warn(p->log, "https poll: grants[%zu] (%s) skipped: %s; the poll's cursor stays at "
				 "generation %llu", s->index, s->id[0] ? s->id : "no id", s->why,
				 (unsigned long long)cursor);
		else
			log_debug(p->log, "https poll: grants[%zu] (%s) skipped again: %s", s->index,
				  s->id[0] ? s->id : "no id", s->why);
	}
	if (fp != p->skip_fp && b->n_skips > b->n_skips_shown)
		log_warn(p->log, "https poll: %zu more messages of this answer skipped for their generation",
			 b->n_skips - b->n_skips_shown);
	p->skip_fp = fp;
}

/*
 * The control plane hears about a request the agent applied nothing for
 * (docs/protocol.md, "Generations"): a replay gets the status recorded for
 * its generation; a stale generation, an id already used or a generation
 * too far ahead (a control plane rolled back to an older copy sends new ids
 * at old generations) gets `rejected` naming why.  Queued on the outbox, so
 * the sender posts it in order with the other statuses.
 */
static void answer_unapplied(struct https_provider *p, const struct engine_verdict *v, const struct msg *m)
{
	_cleanup_report_ struct report rej = { 0 };
	_cleanup_json_ json_t *doc = NULL;
	const struct report *rep = v->report;
	int r;

	if (v->kind == ENGINE_REJECTED && !v->recorded &&
	    (v->err == -ESTALE || v->err == -EEXIST || v->err == -ERANGE)) {
		snprintf(rej.id, sizeof(rej.id), "%s", m->id);
		snprintf(rej.source, sizeof(rej.source), "%s", SOURCE);
		rej.agent = p->agent_id;
		rej.generation = m->generation;
		rej.kind = m->type;
		rej.state = MSG_STATE_REJECTED;
		rej.requested_bytes = m->target == MSG_BY_SIZE ? m->size : 0;
		snprintf(rej.error_code, sizeof(rej.error_code), "%s", v->error.code);
		snprintf(rej.error_message, sizeof(rej.error_message), "%s", v->error.message);
		rep = &rej;
	} else if (v->kind != ENGINE_REPLAY || !rep) {
		return;
	}
	doc = report_to_json(rep);
	r = doc ? views_outbox_push(p->d, SOURCE, doc) : -ENOMEM;
	if (r < 0)
		log_warn(p->log, "https poll: cannot queue the %s status of %s (generation %llu) for the control plane: %s",
			 v->kind == ENGINE_REPLAY ? "recorded" : "rejected", m->id, (unsigned long long)m->generation,
			 strerror(-r));
}

/* Hands the grants of RESP to the engine, the lowest generations first, at
 * most HTTPS_BATCH_MAX.  *CURSOR rises to each generation handled (accepted,
 * replayed, or refused for good), never to one that failed validation nor
 * past one the agent could not take (stopping, outbox full, *UNRECORDABLE:
 * the journal could not record it): the next poll asks for those again.
 * 0, or -EBADMSG with WHY when the body is not {"grants": [...]}. */
static int take_grants(struct https_provider *p, const struct response *resp, uint64_t *cursor,
		       size_t *n_taken, bool *unrecordable, char *why, size_t whylen)
{
	struct https_batch b;
	int r;

	*n_taken = 0;
	*unrecordable = false;
	r = https_parse_grants(resp->body, resp->len, &b, why, whylen);
	if (r < 0)
		return r;
	log_skips(p, &b, *cursor);
	/* no status can name a generation outside 1..2^53: the log and this
	 * counter are all there is (docs/https.md) */
	if (b.n_skips)
		engine_count_skipped(p->d, p->source, "generation", b.n_skips);
	for (size_t i = 0; i < b.n_entries; i++) {
		const struct https_entry *e = &b.entries[i];
		struct engine_verdict v = { 0 };
		struct msg_error err = { 0 };
		struct msg *m = NULL;

		if (https_stopping(p) || backpressure_wait(p, i % 8 == 0))
			break;
		if (msg_from_json(e->obj, &m, &err) < 0) {
			/* malformed: nothing is recorded, the generation is skipped
			 * (400 in the log: what the local API would answer) */
			(*n_taken)++;
			if (e->generation > *cursor)
				*cursor = e->generation;
			engine_count_skipped(p->d, p->source, "malformed", 1);
			log_warn(p->log, "https poll: grants[%zu] (%s) not applied (400): %s", e->index,
				 e->id[0] ? e->id : "no id", err.message);
			continue;
		}
		/* what answer_unapplied() names: engine_submit() takes M */
		struct msg said = { .type = m->type, .generation = m->generation, .target = m->target,
				    .size = m->size };
		snprintf(said.id, sizeof(said.id), "%s", m->id);
		if (engine_submit(p->d, p->source, m, &v) < 0)
			break;
		if (v.kind == ENGINE_REJECTED && (v.err == -ESHUTDOWN || v.err == -ENOBUFS || v.unrecordable)) {
			/* stopping, the journal's outbox is full, or the journal cannot
			 * record it (disk full): not taken, asked again, never "rejected" */
			log_info(p->log, "https poll: %s (generation %llu) not taken now: %s", e->id[0] ? e->id : "?",
				 (unsigned long long)e->generation, v.error.message[0] ? v.error.message : "agent busy");
			*unrecordable = v.unrecordable;
			engine_verdict_done(&v);
			break;
		}
		(*n_taken)++;
		if (e->generation > *cursor)
			*cursor = e->generation;
		if (v.kind != ENGINE_REJECTED) {
			log_debug(p->log, "https poll: %s handed to the agent (%s)", e->id[0] ? e->id : "?",
				  v.kind == ENGINE_ACCEPTED ? "accepted" : "replay");
		} else {
			/* rejected by the planner: a status report is queued; stale:
			 * nothing is recorded, the generation is skipped */
			log_warn(p->log, "https poll: grants[%zu] (%s) not applied (%s): %s", e->index,
				 e->id[0] ? e->id : "no id", v.error.code, v.error.message);
		}
		answer_unapplied(p, &v, &said);
		engine_verdict_done(&v);
	}
	if (b.n_deferred)
		log_debug(p->log, "https poll: %zu more messages of this answer wait for the next poll (at most %u "
			  "per answer)", b.n_deferred, HTTPS_BATCH_MAX);
	https_batch_free(&b);
	return 0;
}

static void *poller_main(void *arg)
{
	struct https_provider *p = arg;
	struct conn *c = &p->poll;
	uint64_t skip_after = 0; /* generations handled but not recorded (malformed ones) */
	unsigned journal_wait_ms = 0; /* the journal refused a grant: doubled up to JOURNAL_RETRY_MAX_MS */
	bool quick_logged = false;

	while (!https_stopping(p)) {
		_cleanup_free_ char *url = NULL;
		struct response resp;
		char why[512] = "";
		uint64_t after, t0;
		unsigned pause;
		size_t taken = 0;
		bool unrecordable = false;
		enum outcome o;
		int r;

		if (backpressure_wait(p, true))
			break;
		after = engine_last_generation(p->d, p->source);
		if (skip_after > after)
			after = skip_after;
		if (asprintf(&url, "%s/v1/agents/%s/grants?after=%llu&wait=%ld&limit=%u", p->base, p->agent,
			     (unsigned long long)after, p->wait_s, HTTPS_BATCH_MAX) < 0) {
			if (https_sleep_ms(p, c, BACKOFF_FIRST_MS))
				break;
			continue;
		}
		t0 = mono_ms();
		r = https_request(p, c, "GET", url, NULL, NULL, p->wait_s * 1000L + REQUEST_TIMEOUT_MS, &resp, why,
				  sizeof(why));
		o = https_classify(p, c, r, &resp, "GET grants", why);
		if (o == OUT_OK && resp.code == 200) {
			uint64_t seen = after;
			r = take_grants(p, &resp, &seen, &taken, &unrecordable, why, sizeof(why));
			if (r < 0) {
				https_fail_and_wait(p, c, "not the protocol", false, -1, "GET grants: %s", why);
				o = OUT_RETRY;
			} else {
				https_succeeded(p, c);
				if (seen > engine_last_generation(p->d, p->source))
					skip_after = seen;
			}
		} else if (o == OUT_OK) {
			https_succeeded(p, c); /* 204: nothing within wait seconds */
		}
		pause = o == OUT_OK && resp.code == 200 && resp.spread_ms > 0
				? backoff_poll_pause(&c->bo, (unsigned)resp.spread_ms, https_rand(c))
				: 0;
		https_response_done(&resp);
		if (o == OUT_STOPPED)
			break;
		if (o != OUT_OK)
			continue;
		if (unrecordable) {
			/* a full disk stays full for a while: the grant is asked for
			 * again 0.5 s later, then 1 s ... (the engine logs each refusal) */
			journal_wait_ms = journal_wait_ms ? journal_wait_ms * 2 : BACKOFF_FIRST_MS;
			if (journal_wait_ms > JOURNAL_RETRY_MAX_MS)
				journal_wait_ms = JOURNAL_RETRY_MAX_MS;
			if (https_sleep_ms(p, c, journal_wait_ms))
				break;
			continue;
		}
		journal_wait_ms = 0;
		/* an answer with grants that announced a window: the fleet got its
		 * grants at once, its next polls spread over the window */
		if (pause) {
			log_debug(p->log, "https poll: next poll in %u ms (the answer's spreading window)", pause);
			if (https_sleep_ms(p, c, pause))
				break;
		}
		/* the memory layout may have changed behind the agent's back: check
		 * once per poll, which the server paces */
		if (inventory_due(p))
			engine_outbox_wake(p->d);
		if (taken == 0 && mono_ms() - t0 < EMPTY_POLL_MIN_MS) {
			/* a server answering at once with nothing (or only with what the
			 * agent skips) would make this a busy loop */
			if (!quick_logged)
				log_warn(p->log, "https poll: the control plane answered the long poll at once with no grant "
					 "the agent could take (does it honour wait=%ld?); polling at most once a second",
					 p->wait_s);
			quick_logged = true;
			if (https_sleep_ms(p, c, EMPTY_POLL_MIN_MS))
				break;
		}
	}
	return NULL;
}

/* --- start / stop ---------------------------------------------------------------- */

static int conn_init(struct https_provider *p, struct conn *c, const char *name)
{
	uint32_t seed = 0;

	c->name = name;
	c->multi = sym_curl_multi_init();
	c->easy = sym_curl_easy_init();
	if (!c->multi || !c->easy)
		return -ENOMEM;
	/* one connection per thread, kept alive between requests */
	sym_curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1L);
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = (uint32_t)mono_ms() ^ (uint32_t)getpid() ^ (uint32_t)(uintptr_t)c;
	c->seed = seed ? seed : 1;
	c->bo = (struct backoff){ .first_ms = BACKOFF_FIRST_MS, .cap_ms = p->backoff_cap_ms, .rule = p->rule,
				  .default_window_ms = p->default_window_ms };
	return 0;
}

static void conn_done(struct https_provider *p, struct conn *c)
{
	if (c->easy)
		sym_curl_easy_cleanup(c->easy);
	if (c->multi)
		sym_curl_multi_cleanup(c->multi);
	/* after the easy handle that used its share */
	https_ca_put(p, c->ca);
	c->ca = NULL;
	https_token_clear(c);
	https_tls_clear(c);
	free(c->ca_alias_path);
	c->ca_alias_path = NULL;
	c->easy = NULL;
	c->multi = NULL;
}

/* The share's lock: one mutex for its few kinds of data (curl holds it
 * for a lookup or an insert, never across I/O). */
static void share_lock(CURL *e, curl_lock_data data, curl_lock_access access, void *user)
{
	struct https_provider *p = user;

	(void)e;
	(void)data;
	(void)access;
	pthread_mutex_lock(&p->share_lock);
}

static void share_unlock(CURL *e, curl_lock_data data, void *user)
{
	struct https_provider *p = user;

	(void)e;
	(void)data;
	pthread_mutex_unlock(&p->share_lock);
}

CURLSH *https_share_new(struct https_provider *p)
{
	CURLSH *s = sym_curl_share_init();

	if (!s)
		return NULL;
	if (sym_curl_share_setopt(s, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    sym_curl_share_setopt(s, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    sym_curl_share_setopt(s, CURLSHOPT_USERDATA, p) != CURLSHE_OK ||
	    sym_curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
	    sym_curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) {
		/* a libcurl without it: each handle keeps its own sessions */
		sym_curl_share_cleanup(s);
		return NULL;
	}
	return s;
}

static void provider_free(struct https_provider *p)
{
	if (!p)
		return;
	conn_done(p, &p->poll);
	conn_done(p, &p->send);
	/* after the easy handles that used them */
	if (p->share)
		sym_curl_share_cleanup(p->share);
	https_ca_put(p, p->ca);
	p->ca = NULL;
	if (p->curl_initialised)
		sym_curl_global_cleanup();
	free(p->base);
	free(p->agent);
	free(p->agent_id);
	free(p->ca_file);
	free(p->cert_file);
	free(p->key_file);
	free(p->token_file);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->share_lock);
	pthread_mutex_destroy(&p->ca_lock);
	free(p);
}

static int dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

/* Read once at start, to say early what will fail (the requests read again). */
static void check_file(struct https_provider *p, const char *key, const char *path)
{
	char *buf = NULL;
	size_t n = 0;
	int r;

	if (!path)
		return;
	r = cred_read(p->creds, path, CRED_FILE_MAX, &buf, &n);
	cred_free(buf, n);
	if (r < 0)
		log_err(p->log, "providers.https.%s %s: %s (requests will fail until it is readable%s)", key, path,
			strerror(-r), r == -EACCES ? "; see Credentials in docs/security.md" : "");
}

int https_provider_start(const struct mg_https_config *cfg, const char *agent_id, struct engine *d,
			 struct cred_store *creds, const struct mg_log *log, struct https_provider **out)
{
	struct https_provider *p;
	pthread_condattr_t ca;
	const char *env;
	char why[300] = "sym_curl_global_init() failed";
	size_t n;
	char *esc;
	int r;

	*out = NULL;
	if (!cfg || !cfg->url || !agent_id || !*agent_id)
		return -EINVAL;
	if (strncasecmp(cfg->url, "https://", 8) != 0 &&
	    !(cfg->insecure_http && strncasecmp(cfg->url, "http://", 7) == 0)) {
		log_err(log, "providers.https.url %s: must start with https:// (http:// only with insecure_http: true)",
			cfg->url);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->share_lock, NULL);
	pthread_mutex_init(&p->ca_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	p->d = d;
	p->creds = creds;
	p->log = log;
	p->insecure = strncasecmp(cfg->url, "http://", 7) == 0;
	p->wait_s = (long)(cfg->wait_ms / 1000);
	if (p->wait_s < 1)
		p->wait_s = 1;
	/* never wait longer between attempts than the long poll would hold the
	 * connection anyway, nor longer than a minute */
	p->backoff_cap_ms = p->wait_s * 1000 < BACKOFF_CAP_MAX_MS ? (unsigned)p->wait_s * 1000 : BACKOFF_CAP_MAX_MS;
	if (p->backoff_cap_ms < 2 * BACKOFF_FIRST_MS)
		p->backoff_cap_ms = 2 * BACKOFF_FIRST_MS;
	p->inventory_dirty = true;
	/* the fleet bench compares with the rule before (docs/https.md): not a
	 * setting, an environment variable only bench/fleet.sh sets */
	env = getenv("MEMGRANT_HTTPS_BACKOFF_RULE");
	p->rule = env && streq(env, "equal") ? BACKOFF_EQUAL : BACKOFF_FULL;
	p->default_window_ms = env && streq(env, "nowindow") ? 0 : BACKOFF_DEFAULT_WINDOW_MS;
	if (p->rule == BACKOFF_EQUAL)
		log_warn(log, "https: MEMGRANT_HTTPS_BACKOFF_RULE=equal: the retry rule before full jitter, and "
			 "Memgrant-Spread ignored (for bench/fleet.sh only)");
	else if (!p->default_window_ms)
		log_warn(log, "https: MEMGRANT_HTTPS_BACKOFF_RULE=nowindow: no default spreading window after "
			 "losing the control plane, the rule before (for bench/fleet.sh only)");
	r = engine_source_add(d, SOURCE, ENGINE_SOURCE_REPORTS, &p->source);
	if (r < 0)
		goto fail;
	engine_count_skipped(d, p->source, "generation", 0); /* the series exist from the start */
	engine_count_skipped(d, p->source, "malformed", 0);

	r = -ENOMEM;
	p->base = strdup(cfg->url);
	p->agent_id = strdup(agent_id);
	if (!p->base || !p->agent_id || dup_opt(cfg->ca_file, &p->ca_file) < 0 ||
	    dup_opt(cfg->cert_file, &p->cert_file) < 0 || dup_opt(cfg->key_file, &p->key_file) < 0 ||
	    dup_opt(cfg->token_file, &p->token_file) < 0)
		goto fail;
	n = strlen(p->base);
	while (n > 0 && p->base[n - 1] == '/')
		p->base[--n] = '\0';

	if (curl_dl_load(why, sizeof(why)) < 0 || sym_curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_err(log, "providers.https: %s (install libcurl to use the HTTPS provider)", why);
		r = -ELIBACC;
		goto fail;
	}
	p->curl_initialised = true;
	esc = sym_curl_easy_escape(NULL, agent_id, 0);
	if (!esc)
		goto fail;
	p->agent = strdup(esc);
	sym_curl_free(esc);
	if (!p->agent)
		goto fail;
	r = conn_init(p, &p->poll, "poll");
	if (r < 0)
		goto fail;
	r = conn_init(p, &p->send, "send");
	if (r < 0)
		goto fail;
	/* ca_file parsed once for both threads when libcurl uses OpenSSL 3;
	 * each parse has its share then (https_ca.c) */
	https_ca_init(p);
	if (!p->ca_store)
		p->share = https_share_new(p);

	if (p->insecure)
		log_warn(log, "providers.https: INSECURE: %s is plain http (insecure_http: true): grants, reports and "
			 "the bearer token travel unencrypted and the server is not authenticated", p->base);
	if (!p->ca_store)
		check_file(p, "ca_file", p->ca_file); /* else https_ca_init() read it */
	check_file(p, "cert_file", p->cert_file);
	check_file(p, "key_file", p->key_file);
	check_file(p, "token_file", p->token_file);

	r = -pthread_create(&p->send_thread, NULL, sender_main, p);
	if (r < 0)
		goto fail;
	p->send_started = true;
	r = -pthread_create(&p->poll_thread, NULL, poller_main, p);
	if (r < 0) {
		https_provider_stop(p);
		return r;
	}
	p->poll_started = true;
	log_notice(log, "https: polling %s as agent %s (wait %lds, after generation %llu)%s%s%s", p->base, agent_id,
		   p->wait_s, (unsigned long long)engine_last_generation(d, p->source), p->ca_file ? ", CA " : "",
		   p->ca_file ? p->ca_file : "", p->cert_file ? ", client certificate" : "");
	*out = p;
	return 0;

fail:
	provider_free(p);
	return r;
}

/* Joins T, waking the sender out of engine_outbox_wait() until it is gone:
 * a single wake could land before it started waiting. */
static void join_waking(struct https_provider *p, pthread_t t)
{
	for (;;) {
		struct timespec ts;

		engine_outbox_wake(p->d);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(t, NULL, &ts) != ETIMEDOUT)
			return;
	}
}

void https_provider_stop(struct https_provider *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	sym_curl_multi_wakeup(p->poll.multi);
	sym_curl_multi_wakeup(p->send.multi);
	if (p->poll_started)
		join_waking(p, p->poll_thread);
	if (p->send_started)
		join_waking(p, p->send_thread);
	provider_free(p);
}
