/* SPDX-License-Identifier: MIT */
/*
 * The engine's life cycle, the top of agent/engine/: construction, start
 * (the backend, the machine, the executor), stop, reload.  Nothing below
 * calls in here: the services every part uses (wake-up, queue, sources,
 * subscribers) are registry.c, so the executor depends on the registry and
 * this file on the executor, one way.  The map of the parts is
 * engine_impl.h.
 */
#include "agent/engine/engine.h"

#include <sys/eventfd.h>

#include "config/config.h"
#include "lib/util.h"
#include "agent/engine/backend_setup.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"

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
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->cond, &ca);
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
		log_err(&e->log, "cannot start the engine: %s", strerror(-r));
		goto fail;
	}
	e->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->notify_fd < 0) {
		r = -errno;
		log_err(&e->log, "cannot create the engine's eventfd: %s", strerror(-r));
		goto fail;
	}
	r = metrics_new(&e->metrics);
	if (r == 0)
		r = events_new(1024, &e->events);
	if (r < 0) {
		log_err(&e->log, "cannot set up the metrics and the event bus: %s", strerror(-r));
		goto fail;
	}
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
	if (r < 0)
		goto fail; /* backend_open() said why, with the path */
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

	/* a failed recovery logged its own line (recovery_run()) */
	if (r < 0 && !e->executor_started)
		log_err(&e->log, "cannot start the executor thread: %s", strerror(-r));
	if (r < 0)
		return r;
	/* after recovery, whose writes are the engine's own */
	r = machine_start(e);
	if (r < 0)
		log_err(&e->log, "cannot start the live table's watcher thread: %s", strerror(-r));
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
	if (e->own_onlining && e->backend && engine_writer_is_gone(e) && e->auto_online_saved[0])
		log_info(&e->log, "auto_online_blocks stays offline (no privileged helper to restore it): "
			 "the next start keeps the saved %s and restores it when it stops", e->auto_online_saved);
	else if (e->own_onlining && e->backend)
		backend_give_back_onlining(e);
}

void engine_writer_gone(struct engine *e)
{
	pthread_mutex_lock(&e->lock);
	e->writer_gone = true;
	e->stopping = true;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	engine_notify(e);
}

bool engine_writer_is_gone(struct engine *e)
{
	bool g;

	pthread_mutex_lock(&e->lock);
	g = e->writer_gone;
	pthread_mutex_unlock(&e->lock);
	return g;
}

int engine_journal_error(struct engine *e)
{
	int r;

	pthread_mutex_lock(&e->lock);
	r = e->journal_err;
	pthread_mutex_unlock(&e->lock);
	return r;
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
