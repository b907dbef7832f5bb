/* SPDX-License-Identifier: MIT */
/*
 * The engine's small shared services: the state-change eventfd
 * (engine_notify(); memgrantd's main loop waits on engine_notify_fd()), the
 * event bus handle, the queue's append, the sources and the transition
 * subscribers.  engine.c (the life cycle) creates what they hand out; see
 * engine_impl.h for the map.
 */
#include "agent/engine/engine.h"

#include <string.h>
#include <unistd.h>

#include "lib/util.h"
#include "agent/engine/engine_impl.h"

/* One write until the main loop drains it: a grant notifies at each of its
 * blocks, and the loop wakes once for them all. */
void engine_notify(struct engine *e)
{
	uint64_t one = 1;

	if (__atomic_exchange_n(&e->notify_pending, true, __ATOMIC_ACQ_REL))
		return;
	if (write(e->notify_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated or closed: the main loop wakes anyway */
	}
}

int engine_notify_fd(struct engine *e)
{
	return e->notify_fd;
}

void engine_notify_drain(struct engine *e)
{
	uint64_t n;

	if (read(e->notify_fd, &n, sizeof(n)) < 0) {
		/* nothing pending */
	}
	/* after the read: a notification from now on writes again; one that
	 * came between the read and here is seen by the caller, which looks
	 * at the engine after this returns */
	__atomic_store_n(&e->notify_pending, false, __ATOMIC_RELEASE);
}

struct event_bus *engine_events(struct engine *e)
{
	return e->events;
}

void engine_enqueue_locked(struct engine *e, struct op *o)
{
	if (e->queue_tail)
		e->queue_tail->next = o;
	else
		e->queue_head = o;
	e->queue_tail = o;
	pthread_cond_broadcast(&e->cond);
	engine_notify(e);
}

/* ---- sources and subscribers ------------------------------------------------ */

static struct engine_source *source_find_locked(struct engine *e, const char *name)
{
	for (size_t i = 0; i < e->n_sources; i++)
		if (streq(e->sources[i].name, name))
			return &e->sources[i];
	return NULL;
}

static struct engine_source *source_new_locked(struct engine *e, const char *name, unsigned flags)
{
	struct engine_source *s;

	if (e->n_sources >= ENGINE_SOURCES_MAX)
		return NULL;
	s = &e->sources[e->n_sources++];
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->flags = flags;
	if (flags & ENGINE_SOURCE_REPORTS)
		outbox_register_locked(e, name);
	return s;
}

const struct engine_source *engine_source_intern_locked(struct engine *e, const char *name)
{
	struct engine_source *s = source_find_locked(e, name);

	return s ? s : source_new_locked(e, name, ENGINE_SOURCE_REPORTS);
}

int engine_source_add(struct engine *e, const char *name, unsigned flags, struct engine_source **out)
{
	struct engine_source *s;
	int r = 0;

	if (!msg_id_valid(name))
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	s = source_find_locked(e, name);
	if (s && s->flags != flags)
		r = -EEXIST;
	else if (!s && !(s = source_new_locked(e, name, flags)))
		r = -ENOSPC;
	pthread_mutex_unlock(&e->lock);
	if (r == 0 && out)
		*out = s;
	return r;
}

int engine_subscribe(struct engine *e, engine_transition_fn *fn, void *ctx)
{
	int r = 0;

	pthread_mutex_lock(&e->lock);
	if (e->n_subs >= ENGINE_SUBSCRIBERS_MAX) {
		r = -ENOSPC;
	} else {
		e->subs[e->n_subs].fn = fn;
		e->subs[e->n_subs].ctx = ctx;
		e->n_subs++;
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

void engine_unsubscribe(struct engine *e, engine_transition_fn *fn, void *ctx)
{
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < e->n_subs; i++)
		if (e->subs[i].fn == fn && e->subs[i].ctx == ctx) {
			memmove(&e->subs[i], &e->subs[i + 1], (e->n_subs - i - 1) * sizeof(e->subs[0]));
			e->n_subs--;
			break;
		}
	pthread_mutex_unlock(&e->lock);
}
