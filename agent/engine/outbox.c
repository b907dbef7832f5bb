/* SPDX-License-Identifier: MIT */
/*
 * Outboxes per destination.  See outbox.h.
 */
#include "agent/engine/outbox.h"

#include "lib/timeutil.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"

int outbox_register_locked(struct engine *e, const char *dest)
{
	for (size_t i = 0; i < e->n_outboxes; i++)
		if (streq(e->outboxes[i], dest))
			return 0;
	if (e->n_outboxes >= ENGINE_OUTBOXES_MAX)
		return -ENOSPC;
	e->outboxes[e->n_outboxes] = strdup(dest);
	if (!e->outboxes[e->n_outboxes])
		return -ENOMEM;
	e->n_outboxes++;
	return 0;
}

int engine_outbox_register(struct engine *e, const char *dest)
{
	int r;

	pthread_mutex_lock(&e->lock);
	r = outbox_register_locked(e, dest);
	pthread_mutex_unlock(&e->lock);
	return r;
}

int engine_event_subscribe(struct engine *e, const char *dest, engine_event_fn *fn, void *ctx)
{
	int r;

	pthread_mutex_lock(&e->lock);
	r = outbox_register_locked(e, dest);
	if (r == 0)
		r = intentlog_subscribe(e->journal, dest, fn, ctx);
	pthread_mutex_unlock(&e->lock);
	return r;
}

void engine_event_unsubscribe(struct engine *e, engine_event_fn *fn, void *ctx)
{
	pthread_mutex_lock(&e->lock);
	intentlog_unsubscribe(e->journal, fn, ctx);
	pthread_mutex_unlock(&e->lock);
}

uint64_t engine_last_generation(struct engine *e, const struct engine_source *s)
{
	uint64_t g;

	pthread_mutex_lock(&e->lock);
	g = intentlog_last_generation(e->journal, s->name);
	pthread_mutex_unlock(&e->lock);
	return g;
}

int engine_outbox_peek(struct engine *e, const char *dest, uint64_t *seq, char **doc)
{
	int r;

	pthread_mutex_lock(&e->lock);
	r = intentlog_outbox_peek_text(e->journal, dest, seq, doc);
	pthread_mutex_unlock(&e->lock);
	return r;
}

int engine_outbox_ack(struct engine *e, const char *dest, uint64_t seq)
{
	bool stop = false;
	int r;

	pthread_mutex_lock(&e->lock);
	r = intentlog_outbox_ack(e->journal, dest, seq);
	if (r < 0 && r != -ENOENT) {
		struct intentlog_stats st;

		intentlog_stats(e->journal, &st);
		if (st.broken) {
			/* the failed write could not be cut back: nothing more can be
			 * recorded; the engine stops as on SIGTERM, and the report,
			 * still queued, goes again (the same key) after the next start */
			log_err(&e->log, "the journal in %s cannot record that %s received report %llu (%s), and the "
				"failed write could not be undone: memgrantd stops; free space there and start it again",
				e->state_dir, dest, (unsigned long long)seq, strerror(-r));
			if (!e->journal_err)
				e->journal_err = r;
			e->stopping = stop = true;
			pthread_cond_broadcast(&e->cond);
			pthread_cond_broadcast(&e->outbox_cond);
		}
	}
	pthread_mutex_unlock(&e->lock);
	if (r == 0 || stop)
		engine_notify(e);
	return r;
}

size_t engine_outbox_count(struct engine *e, const char *dest)
{
	size_t n;

	pthread_mutex_lock(&e->lock);
	n = intentlog_outbox_count(e->journal, dest);
	pthread_mutex_unlock(&e->lock);
	return n;
}

int engine_outbox_wait(struct engine *e, const char *dest, int timeout_ms)
{
	struct timespec deadline;
	uint64_t gen;
	int waiting;

	deadline_after_ms(&deadline, timeout_ms >= 0 ? timeout_ms : 0);
	pthread_mutex_lock(&e->lock);
	gen = e->wake_gen;
	for (;;) {
		waiting = intentlog_outbox_count(e->journal, dest) > 0;
		if (waiting || e->wake_gen != gen || e->stopping)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&e->outbox_cond, &e->lock);
		else if (pthread_cond_timedwait(&e->outbox_cond, &e->lock, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&e->lock);
	return waiting;
}

void engine_outbox_wake(struct engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->wake_gen++;
	pthread_cond_broadcast(&e->outbox_cond);
	pthread_mutex_unlock(&e->lock);
}

int engine_outbox_push(struct engine *e, const char *dest, const char *doc)
{
	int r;

	pthread_mutex_lock(&e->lock);
	outbox_register_locked(e, dest);
	r = intentlog_outbox_push_text(e->journal, dest, doc, NULL);
	if (r == 0)
		pthread_cond_broadcast(&e->outbox_cond);
	pthread_mutex_unlock(&e->lock);
	if (r == 0)
		engine_notify(e);
	return r;
}
