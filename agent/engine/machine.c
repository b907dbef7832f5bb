/* SPDX-License-Identifier: MIT */
/*
 * The live block table of the engine and the reconciliation of outside
 * changes.  See machine.h.
 */
#include "agent/engine/machine.h"

#include <poll.h>
#include <sys/eventfd.h>

#include "hotplug/livetable.h"
#include "lib/json.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"


/* The running operation when it has an open intent, else NULL. */
static struct op *intent_op_locked(struct engine *e)
{
	return e->running && e->running->intent_open ? e->running : NULL;
}

int machine_find_owned_locked(struct engine *e, uint64_t block, struct intentlog_block *out)
{
	struct op *o = intent_op_locked(e);
	const struct intentlog_done *d = o ? op_done_find(o, block) : NULL;

	if (d && o->intent_dir == ILOG_DOWN)
		return -ENOENT;
	if (d) {
		if (out) {
			*out = (struct intentlog_block){ .block = block, .seq = UINT64_MAX, .zone = d->zone,
							 .memmap = d->memmap };
			snprintf(out->grant_id, sizeof(out->grant_id), "%s", o->msg->id);
		}
		return 0;
	}
	return intentlog_find_owned_block(e->journal, block, out);
}

int machine_owned_blocks_locked(struct engine *e, struct intentlog_block **out, size_t *n)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	struct op *o = intent_op_locked(e);
	struct intentlog_block *all;
	size_t k = 0, m = 0;
	uint64_t seq = 0;
	int r = intentlog_owned_blocks(e->journal, &jb, &k);

	if (r < 0)
		return r;
	all = calloc(k + (o ? o->n_done : 0) + 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		if (o && o->intent_dir == ILOG_DOWN && op_done_find(o, jb[i].block))
			continue;
		all[m++] = jb[i];
		if (jb[i].seq >= seq)
			seq = jb[i].seq + 1;
	}
	/* brought up under the open intent: the newest, in the order done */
	for (size_t i = 0; o && o->intent_dir == ILOG_UP && i < o->n_done; i++) {
		all[m] = (struct intentlog_block){ .block = o->done[i].block, .seq = seq++, .zone = o->done[i].zone,
						   .memmap = o->done[i].memmap };
		snprintf(all[m].grant_id, sizeof(all[m].grant_id), "%s", o->msg->id);
		m++;
	}
	*out = all;
	*n = m;
	return 0;
}

int machine_forget_block_locked(struct engine *e, uint64_t block)
{
	struct op *o = intent_op_locked(e);

	/* brought up by the running operation and not journaled yet: it just
	 * leaves the operation's result */
	if (o && o->intent_dir == ILOG_UP && op_done_remove(o, block))
		return 0;
	return intentlog_remove_owned_block(e->journal, block);
}

/* Boot memory: the run of online blocks from the lowest id that no grant
 * owns and no open intent names, as found at start (kernel.md: boot memory
 * is online from address 0).  Online blocks above it that no grant owns are
 * foreign.  A block an interrupted intent brought up is not boot memory:
 * recovery decides about it; nor is one with memmap_on_memory=1. */
static uint64_t boot_end_of(struct engine *e, const struct mem_table *t)
{
	struct intentlog_intent *its = NULL;
	size_t n_its = 0;
	uint64_t end = 0, stop = UINT64_MAX;

	pthread_mutex_lock(&e->lock);
	if (intentlog_open_intents(e->journal, &its, &n_its) == 0)
		for (size_t i = 0; i < n_its; i++)
			for (size_t j = 0; j < its[i].n_blocks; j++)
				if (its[i].blocks[j].block < stop)
					stop = its[i].blocks[j].block;
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];
		/* memmap_on_memory=1 is never boot memory (kernel.md C2: boot blocks read 0) */
		if (!b->configured || b->state != MEM_STATE_ONLINE || b->id >= stop || b->memmap_on_memory == 1 ||
		    intentlog_find_owned_block(e->journal, b->id, NULL) == 0)
			break;
		end = b->id + 1;
	}
	pthread_mutex_unlock(&e->lock);
	intentlog_intents_free(its, n_its);
	return end;
}

int machine_open(struct engine *e)
{
	int r;

	pthread_mutex_init(&e->machine_update_lock, NULL);
	e->machine_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->machine_stop_fd < 0)
		return -errno;
	r = livetable_open(e->backend, &e->live);
	if (r < 0)
		return r;
	livetable_lock(e->live);
	e->boot_end = boot_end_of(e, livetable_table(e->live));
	livetable_unlock(e->live);
	return 0;
}

static void tell_block_changed_locked(struct engine *e, const struct intentlog_grant *g, uint64_t block,
				      uint64_t applied, const json_t *report)
{
	struct engine_transition t = {
		.kind = ENGINE_T_BLOCK_CHANGED,
		.type = g->type,
		.id = g->id,
		.generation = g->generation,
		.state = g->state,
		.source = g->source,
		.applied_bytes = applied,
		.block = block,
		.report = report,
	};

	for (size_t i = 0; i < e->n_subs; i++)
		e->subs[i].fn(e->subs[i].ctx, &t);
}

/* BLOCK, owned by GRANT_ID, is found NOW (not online): it leaves the grant. */
static void block_left_locked(struct engine *e, uint64_t block, const char *grant_id, const struct mem_block *now,
			      bool gone)
{
	struct intentlog_grant g = { 0 };
	_cleanup_json_ json_t *status = NULL, *ev = NULL;
	const struct engine_source *src;
	const char *state = gone ? "gone" : !now->configured ? "deconfigured" : mem_state_name(now->state);
	uint64_t bs = 0, applied = 0;
	json_t *decisions, *b;
	size_t i;
	int r;

	r = machine_forget_block_locked(e, block);
	if (r < 0) {
		log_err(&e->log, "block %llu left grant %s outside memgrant but cannot be journaled: %s",
			(unsigned long long)block, grant_id, strerror(-r));
		return;
	}
	log_fields(&e->log, LOG_WARNING, LOG_FIELDS(log_f_grant(grant_id), log_f_block(block)),
		   "block %llu of grant %s was taken down outside memgrant (%s): it left the grant",
		 (unsigned long long)block, grant_id, state);
	livetable_lock(e->live);
	bs = livetable_table(e->live)->block_size;
	livetable_unlock(e->live);
	if (e->running && streq(e->running->msg->id, grant_id)) {
		/* the grant is still being applied: its op publishes the record */
		struct op *o = e->running;
		o->applied_bytes = o->applied_bytes >= bs ? o->applied_bytes - bs : 0;
		op_add_decision(o, "block %llu was taken down outside memgrant (%s)", (unsigned long long)block, state);
		/* its report lists what the grant holds: the block as it is now */
		for (size_t k = 0; k < o->n_outcomes; k++)
			if (o->outcomes[k].block == block) {
				o->outcomes[k].configured = !gone && now->configured;
				snprintf(o->outcomes[k].state, sizeof(o->outcomes[k].state), "%s",
					 gone ? "offline" : mem_state_name(now->state));
				o->outcomes[k].zone[0] = '\0';
				o->outcomes[k].changed = true;
			}
	}
	if (intentlog_get_grant(e->journal, grant_id, &g) < 0)
		return;
	if (g.status && !(e->running && streq(e->running->msg->id, grant_id))) {
		status = json_deep_copy(g.status);
		applied = (uint64_t)json_integer_value(json_object_get(status, "applied_bytes"));
		applied = applied >= bs ? applied - bs : 0;
		json_object_set_new(status, "applied_bytes", json_integer((json_int_t)applied));
		json_array_foreach(json_object_get(status, "blocks"), i, b)
			if ((uint64_t)json_integer_value(json_object_get(b, "block")) == block) {
				json_object_set_new(b, "configured", json_boolean(!gone && now->configured));
				json_object_set_new(b, "state", json_string(gone ? "offline" : mem_state_name(now->state)));
			}
		decisions = json_object_get(status, "decisions");
		if (!json_is_array(decisions)) {
			decisions = json_array();
			json_object_set_new(status, "decisions", decisions);
		}
		json_array_append_new(decisions, json_sprintf("block %llu was taken down outside memgrant (%s)",
							      (unsigned long long)block, state));
		src = engine_source_intern_locked(e, g.source);
		r = intentlog_set_state(e->journal, grant_id, g.state, status,
				      src && (src->flags & ENGINE_SOURCE_REPORTS) ? src->name : NULL);
		if (r < 0)
			log_err(&e->log, "%s: cannot journal that block %llu left it: %s", grant_id,
				(unsigned long long)block, strerror(-r));
	}
	tell_block_changed_locked(e, &g, block, applied, status);
	ev = json_pack("{s:s,s:s,s:I,s:s,s:s,s:I,s:O?}", "event", "block.changed", "agent", e->agent_id, "block",
		       (json_int_t)block, "grant", grant_id, "state", state, "applied_bytes", (json_int_t)applied,
		       "status", status);
	if (ev)
		events_publish(e->events, ev);
	intentlog_grant_done(&g);
	pthread_cond_broadcast(&e->outbox_cond);
	engine_notify(e);
}

/* The table says BLOCK changed: when a grant owns it and the kernel (read
 * now, not the notification's row, which may be older than the executor's
 * last write) says it is not online, it left the grant.  The block the
 * executor is writing to is the executor's to judge. */
static void reconcile_block(struct engine *e, uint64_t block)
{
	struct intentlog_block jb;
	struct mem_block now = { 0 };
	int r;

	pthread_mutex_lock(&e->lock);
	if (!e->recovered || e->recovery_err < 0 || e->stopping)
		goto out;
	if (e->step_active && e->step_block == block)
		goto out;
	/* a block the running revocation took down is nobody's already */
	if (machine_find_owned_locked(e, block, &jb) < 0)
		goto out;
	r = hp_read_block(e->backend, block, &now);
	if (r < 0 && r != -ENOENT)
		goto out;
	if (r == 0 && now.configured && now.state == MEM_STATE_ONLINE)
		goto out;
	block_left_locked(e, block, jb.grant_id, &now, r == -ENOENT);
out:
	pthread_mutex_unlock(&e->lock);
}

static void on_change(const struct lt_change *c, void *data)
{
	const struct mem_block *b = c->nw ? c->nw : c->old;

	if (!c->nw || !c->nw->configured || c->nw->state != MEM_STATE_ONLINE)
		reconcile_block(data, b->id);
	else
		engine_notify(data);
}

void machine_sync(struct engine *e)
{
	struct pollfd p;

	if (!e->live)
		return;
	p = (struct pollfd){ .fd = livetable_fd(e->live), .events = POLLIN };
	if (poll(&p, 1, 0) <= 0)
		return;
	pthread_mutex_lock(&e->machine_update_lock);
	livetable_update(e->live, e->machine_started ? on_change : NULL, e);
	pthread_mutex_unlock(&e->machine_update_lock);
}

static void *watcher_main(void *arg)
{
	struct engine *e = arg;
	struct pollfd p[2] = {
		{ .fd = livetable_fd(e->live), .events = POLLIN },
		{ .fd = e->machine_stop_fd, .events = POLLIN },
	};

	for (;;) {
		int r = poll(p, 2, -1);

		if (r < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		pthread_mutex_lock(&e->machine_update_lock);
		r = livetable_update(e->live, on_change, e);
		pthread_mutex_unlock(&e->machine_update_lock);
		if (r < 0)
			log_warn(&e->log, "live block table: %s (re-read at the next change)", strerror(-r));
	}
	return NULL;
}

int machine_start(struct engine *e)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	size_t n = 0;
	int r;

	if (!e->live || e->machine_started)
		return 0;
	r = -pthread_create(&e->machine_thread, NULL, watcher_main, e);
	if (r < 0)
		return r;
	e->machine_started = true;
	/* what changed while nobody watched (before start, during recovery) */
	pthread_mutex_lock(&e->lock);
	r = machine_owned_blocks_locked(e, &jb, &n);
	pthread_mutex_unlock(&e->lock);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct mem_block b;
		if (livetable_find(e->live, jb[i].block, &b) < 0 || !b.configured || b.state != MEM_STATE_ONLINE)
			reconcile_block(e, jb[i].block);
	}
	return 0;
}

void machine_stop(struct engine *e)
{
	uint64_t one = 1;

	if (!e->machine_started)
		return;
	if (write(e->machine_stop_fd, &one, sizeof(one)) < 0) {
		/* the counter cannot overflow from one write */
	}
	pthread_join(e->machine_thread, NULL);
	e->machine_started = false;
}

void machine_free(struct engine *e)
{
	machine_stop(e);
	livetable_free(e->live);
	e->live = NULL;
	if (e->machine_stop_fd >= 0) {
		close(e->machine_stop_fd);
		pthread_mutex_destroy(&e->machine_update_lock);
	}
	e->machine_stop_fd = -1;
}

int machine_snapshot(struct engine *e, struct mem_table **out)
{
	if (!e->live)
		return -ENODEV;
	return livetable_snapshot(e->live, out);
}

static int by_block(const void *a, const void *b)
{
	uint64_t x = ((const struct intentlog_block *)a)->block, y = ((const struct intentlog_block *)b)->block;

	return x < y ? -1 : x > y;
}

int machine_figures(struct engine *e, struct machine_figures *out, uint64_t *granted_bytes)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	size_t n = 0, k = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (granted_bytes)
		*granted_bytes = 0;
	if (!e->live)
		return -ENODEV;
	machine_sync(e);
	pthread_mutex_lock(&e->lock);
	r = machine_owned_blocks_locked(e, &jb, &n);
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		n = 0;
	/* owned blocks sorted by id, to walk them alongside the table */
	if (n > 1)
		qsort(jb, n, sizeof(*jb), by_block);
	livetable_lock(e->live);
	{
		const struct mem_table *t = livetable_table(e->live);
		out->block_size = t->block_size;
		memory_figures(t, &out->online_bytes, &out->standby_bytes);
		out->total_bytes = (uint64_t)t->n * t->block_size;
		for (size_t i = 0; i < t->n; i++) {
			const struct mem_block *b = &t->blocks[i];
			if (b->configured && b->state != MEM_STATE_ONLINE)
				out->in_flight_bytes += t->block_size;
			while (k < n && jb[k].block < b->id)
				k++;
			if (b->id < e->boot_end || !b->configured || b->state != MEM_STATE_ONLINE)
				continue;
			if (k < n && jb[k].block == b->id)
				continue;
			out->foreign_blocks++;
		}
		if (granted_bytes)
			*granted_bytes = (uint64_t)n * t->block_size;
	}
	livetable_unlock(e->live);
	return 0;
}
