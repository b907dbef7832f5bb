/* SPDX-License-Identifier: MIT */
/*
 * The engine's life cycle and registries: construction, start, stop,
 * reload, sources, subscribers, the queue and the main loop's wake-up.
 * The parts: admission.c (submit), executor.c (the kernel writes),
 * recovery.c (after a crash), views.c (read side), outbox.c (reports),
 * backend_setup.c (the backend), ops.c (requests in flight).
 */
#include "agent/engine/engine.h"

#include <sys/eventfd.h>

#include "config/config.h"
#include "lib/util.h"
#include "agent/engine/backend_setup.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"

void engine_notify(struct engine *e)
{
	uint64_t one = 1;

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

const char *engine_source_name(const struct engine_source *s)
{
	return s->name;
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

/* ---- life cycle ------------------------------------------------------------------ */

static void settings_from(struct engine_settings *s, const struct mg_config *cfg)
{
	s->policy.memmap = cfg->policy.memmap_on_memory == MG_MEMMAP_ALWAYS ? POLICY_MEMMAP_ALWAYS
			   : cfg->policy.memmap_on_memory == MG_MEMMAP_NEVER ? POLICY_MEMMAP_NEVER
									      : POLICY_MEMMAP_AUTO;
	s->policy.zone = cfg->policy.zone;
	s->policy.reserve = cfg->policy.reserve;
	s->policy.movable_ratio = cfg->policy.movable_ratio;
	s->revoke_budget_ms = cfg->policy.revoke_budget_ms;
	s->block_op_timeout_ms = cfg->policy.block_op_timeout_ms;
}

int engine_new(const struct mg_config *cfg, const struct mg_log *log, int helper_fd, struct engine **out)
{
	struct engine *e = calloc(1, sizeof(*e));
	pthread_condattr_t ca;
	char err[1024] = "";
	struct intentlog_opened opened = { 0 };
	int r;

	if (!e) {
		if (helper_fd >= 0)
			close(helper_fd);
		return -ENOMEM;
	}
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->outbox_cond, &ca);
	pthread_condattr_destroy(&ca);
	e->log = *log;
	e->log.level = (int)cfg->agent.log_level;
	e->notify_fd = -1;
	e->machine_stop_fd = -1;
	e->agent_id = strdup(cfg->agent.id);
	e->state_dir = strdup(cfg->agent.state_dir);
	e->own_onlining = cfg->backend.own_onlining;
	settings_from(&e->set, cfg);
	if (!e->agent_id || !e->state_dir) {
		r = -ENOMEM;
		goto fail;
	}
	e->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->notify_fd < 0) {
		r = -errno;
		goto fail;
	}
	r = metrics_new(&e->metrics);
	if (r < 0)
		goto fail;
	r = events_new(1024, &e->events);
	if (r < 0)
		goto fail;
	r = intentlog_open(e->state_dir, NULL, &e->journal, &opened, err, sizeof(err));
	if (r < 0) {
		log_err(&e->log, "journal %s: %s", e->state_dir, err[0] ? err : strerror(-r));
		goto fail;
	}
	e->journal_fresh = opened.fresh;
	e->opened = opened;
	if (opened.lost)
		log_warn(&e->log, "journal %s: journal.log ends at byte %llu but had reached byte %llu (journal.log.end): "
			 "acknowledged records are gone (cut, or an older copy put back); nothing unfinished is resumed "
			 "and the blocks no grant owns are named below; restore the newest journal.log from a backup, or "
			 "`memgrantctl adopt` those blocks", e->state_dir, (unsigned long long)opened.torn_offset,
			 (unsigned long long)opened.lost_end);
	if (opened.torn)
		log_warn(&e->log, "journal %s: cut a torn last record at byte %llu (%s)", e->state_dir,
			 (unsigned long long)opened.torn_offset, opened.torn_why);
	r = backend_open(cfg, &e->log, helper_fd, &e->backend);
	helper_fd = -1;
	if (r < 0) {
		log_err(&e->log, "%s backend: %s", mg_backend_type_name(cfg->backend.type), strerror(-r));
		goto fail;
	}
	r = machine_open(e);
	if (r < 0) {
		log_err(&e->log, "cannot read the memory blocks: %s", strerror(-r));
		goto fail;
	}
	*out = e;
	return 0;
fail:
	if (helper_fd >= 0)
		close(helper_fd);
	engine_free(e);
	return r;
}

int engine_start(struct engine *e)
{
	int r = exec_start(e);

	/* after recovery, whose writes are the engine's own */
	if (r == 0)
		r = machine_start(e);
	return r;
}

void engine_stop(struct engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	if (e->executor_started) {
		pthread_join(e->executor, NULL);
		e->executor_started = false;
	}
	machine_stop(e);
	events_close(e->events);
	engine_outbox_wake(e);
	if (e->own_onlining && e->backend)
		backend_give_back_onlining(e);
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	while (e->queue_head) {
		struct op *o = e->queue_head;
		e->queue_head = o->next;
		op_free(o);
	}
	machine_free(e);
	hp_backend_close(e->backend);
	intentlog_close(e->journal);
	events_free(e->events);
	metrics_free(e->metrics);
	if (e->notify_fd >= 0)
		close(e->notify_fd);
	for (size_t i = 0; i < e->n_outboxes; i++)
		free(e->outboxes[i]);
	free(e->agent_id);
	free(e->state_dir);
	free(e->start_foreign);
	pthread_cond_destroy(&e->cond);
	pthread_cond_destroy(&e->outbox_cond);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

int engine_reload(struct engine *e, const struct mg_config *cfg)
{
	pthread_mutex_lock(&e->lock);
	settings_from(&e->set, cfg);
	e->log.level = (int)cfg->agent.log_level;
	pthread_mutex_unlock(&e->lock);
	engine_notify(e);
	return 0;
}
