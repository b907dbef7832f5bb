/* SPDX-License-Identifier: MIT */
/*
 * The live block table of the engine and the reconciliation of outside
 * changes.  See machine.h.
 */
#include "agent/engine/machine.h"

#include <poll.h>
#include <sys/eventfd.h>

#include "hotplug/livetable.h"
#include "hotplug/words.h"
#include "lib/json.h"
#include "lib/wire/report_json.h"
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
	/* the block a grant is bringing up is its own already: the kernel
	 * shows it online before the step's end records it done */
	if (d || (o && o->intent_dir == ILOG_UP && e->step_active && e->step_block == block)) {
		if (out) {
			*out = (struct intentlog_block){ .block = block, .seq = UINT64_MAX,
							 .zone = d ? d->zone : MEM_ZONE_AUTO,
							 .memmap = d ? d->memmap : false };
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

/* Boot memory: what the backend knows was memory at boot (the sim: its
 * boot size), whatever the journal says, so a standby block onlined with
 * memmap_on_memory=0 next to it is never taken for boot memory.  Where the
 * backend cannot tell (sysfs: the kernel's firmware entries look alike for
 * boot memory and configured standby, kernel.md C2), the run of online
 * blocks from the lowest id that no grant owns and no open intent names,
 * as found at start (boot memory is online from address 0), stopping at
 * memmap_on_memory=1.  Online blocks above it that no grant owns are
 * foreign. */
static uint64_t boot_end_of(struct engine *e, const struct mem_table *t)
{
	struct intentlog_intent *its = NULL;
	size_t n_its = 0;
	uint64_t end = 0, stop = UINT64_MAX;

	if (t->boot_known)
		return t->boot_end;
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

size_t machine_start_foreign_locked(struct engine *e, const struct mem_table *t, char *list, size_t len)
{
	_cleanup_free_ uint64_t *still = calloc(e->n_start_foreign + 1, sizeof(*still));
	size_t n = 0;

	if (len)
		list[0] = '\0';
	if (!still)
		return e->n_start_foreign; /* out of memory: hold on */
	for (size_t i = 0; i < e->n_start_foreign; i++) {
		const struct mem_block *b = mem_table_find(t, e->start_foreign[i]);
		if (!b || !b->configured || (!b->in_firmware && b->state == MEM_STATE_OFFLINE) ||
		    machine_find_owned_locked(e, b->id, NULL) == 0)
			continue;
		still[n++] = b->id;
	}
	if (n && len)
		words_block_list_format(still, n, list, len);
	return n;
}

int machine_open(struct engine *e)
{
	int r;

	pthread_mutex_init(&e->machine_update_lock, NULL);
	e->machine_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->machine_stop_fd < 0)
		return -errno;
	r = livetable_open(e->backend, &e->live);
	if (r == -ENOSPC) {
		/* inotify_add_watch() past the per-user limit: name the limit */
		_cleanup_fclose_ FILE *f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
		long max = -1;

		if (!f || fscanf(f, "%ld", &max) != 1)
			max = -1;
		log_err(&e->log, "cannot watch the memory blocks of %s: a tree needs an inotify watch per block (its devices directory, or its firmware one while it has none), "
			"more than fs.inotify.max_user_watches (%ld, for all of this user's processes) allows; "
			"raise it (sysctl fs.inotify.max_user_watches) for a tree of this size",
			e->backend->root, max);
	}
	if (r < 0)
		return r;
	livetable_lock(e->live);
	e->boot_end = boot_end_of(e, livetable_table(e->live));
	livetable_unlock(e->live);
	livetable_set_mark(e->live, e->boot_end); /* foreign blocks are online ones above it */
	return 0;
}

static void tell_block_changed_locked(struct engine *e, const struct intentlog_grant *g, uint64_t block,
				      uint64_t applied, const struct report *report)
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
	_cleanup_report_ struct report rep = { 0 };
	_cleanup_json_ json_t *status = NULL, *ev = NULL;
	const struct engine_source *src;
	const char *state = gone ? "gone" : !now->configured ? "deconfigured" : mem_state_name(now->state);
	uint64_t bs = 0, applied = 0;
	char why[128];
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
				op_outcome_changed(o, k);
			}
	}
	if (intentlog_get_grant(e->journal, grant_id, &g) < 0)
		return;
	snprintf(why, sizeof(why), "block %llu was taken down outside memgrant (%s)", (unsigned long long)block, state);
	if (!(e->running && streq(e->running->msg->id, grant_id)) && intentlog_grant_report(&g, &rep) == 0) {
		rep.agent = e->agent_id;
		applied = rep.applied_bytes >= bs ? rep.applied_bytes - bs : 0;
		rep.applied_bytes = applied;
		for (size_t i = 0; i < rep.n_blocks; i++)
			if (rep.blocks[i].block == block) {
				rep.blocks[i].configured = !gone && now->configured;
				snprintf(rep.blocks[i].state, sizeof(rep.blocks[i].state), "%s",
					 gone ? "offline" : mem_state_name(now->state));
			}
		report_add_decision(&rep, why);
		status = report_to_json(&rep);
		src = engine_source_intern_locked(e, g.source);
		r = status ? intentlog_set_state(e->journal, grant_id, g.state, &rep,
				      src && (src->flags & ENGINE_SOURCE_REPORTS) ? src->name : NULL) : -ENOMEM;
		if (r < 0)
			log_err(&e->log, "%s: cannot journal that block %llu left it: %s", grant_id,
				(unsigned long long)block, strerror(-r));
	}
	tell_block_changed_locked(e, &g, block, applied, status ? &rep : NULL);
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
	/* the lock first: the watcher may have taken the notifications off
	 * the fd and not applied them yet */
	pthread_mutex_lock(&e->machine_update_lock);
	if (poll(&p, 1, 0) > 0)
		livetable_update(e->live, e->machine_started ? on_change : NULL, e);
	pthread_mutex_unlock(&e->machine_update_lock);
}

/* Whether M shows the effect of write STEP (which succeeded). */
static bool shows_write(const struct mem_block *m, enum block_step step)
{
	switch (step) {
	case STEP_NONE: return true;
	case STEP_CONFIGURE: return m->configured;
	case STEP_ONLINE: return m->configured && m->state == MEM_STATE_ONLINE;
	case STEP_OFFLINE: return m->state == MEM_STATE_OFFLINE;
	case STEP_DECONFIGURE: return !m->configured;
	default: return false;
	}
}

/* What the kernel re-reads after write STEP (enum hp_reread). */
static bool reread_of(enum block_step step, enum hp_reread *what)
{
	switch (step) {
	case STEP_MEMMAP: *what = HP_REREAD_MEMMAP; return true;
	case STEP_CONFIGURE: *what = HP_REREAD_STATE; return true;
	case STEP_ONLINE:
	case STEP_OFFLINE: *what = HP_REREAD_DEVICE; return true;
	case STEP_DECONFIGURE: *what = HP_REREAD_DECONFIGURED; return true;
	default: return false;
	}
}

#define WRITE_SYNC_SKIP 63

int machine_block_state(void *engine, struct hp_backend *b, uint64_t block, enum block_step after,
			struct mem_block *out)
{
	struct engine *e = engine;
	struct mem_block m;
	enum hp_reread what;
	bool have, synced = false;
	int r = -ESTALE;

	if (!e->live)
		return hp_read_block(b, block, out);
	/* Before the first write the table's row decides, so the
	 * notifications already queued are taken first.  After a write the
	 * row is the kernel's word only once it shows that write (a
	 * notification since said so), and no wait for later ones helps.
	 * That notification is mostly queued already (the sim's; a kernel's
	 * uevent goes out before the write returns): taken now, it spares a
	 * re-read of the block.  A tree that never notifies (FUSE, a plain
	 * folder) would make that a poll for nothing at every step, so a
	 * miss lets the next WRITE_SYNC_SKIP steps re-read at once. */
	if (after == STEP_NONE) {
		machine_sync(e);
	} else if (after != STEP_MEMMAP) { /* no row shows a memmap write */
		synced = e->write_sync_skip == 0;
		if (synced)
			machine_sync(e);
		else
			e->write_sync_skip--;
	}
	have = livetable_find(e->live, block, &m) == 0;
	if (have && shows_write(&m, after)) {
		*out = m;
		return 0;
	}
	if (synced)
		e->write_sync_skip = WRITE_SYNC_SKIP;
	/* the kernel's word, which the table takes too: its notification
	 * may come later, or never (a tree served over FUSE) */
	pthread_mutex_lock(&e->machine_update_lock);
	if (have && reread_of(after, &what)) {
		/* the files the write changed, the rest from the row read
		 * before it; a configure the kernel onlined (C7) is read whole */
		r = hp_reread(b, what, &m, out);
		if (r == 0 && what == HP_REREAD_STATE && out->state == MEM_STATE_ONLINE)
			r = -ESTALE;
	}
	if (r < 0)
		r = hp_read_block(b, block, out);
	if (r == 0 && livetable_note(e->live, out, e->machine_started ? on_change : NULL, e) < 0)
		log_warn(&e->log, "live block table: block %llu: out of memory to record what was read "
			 "(re-read at its next change)", (unsigned long long)block);
	pthread_mutex_unlock(&e->machine_update_lock);
	return r;
}

/* How long the watcher lets notifications gather after it took some. */
#define WATCH_QUIET_MS 20

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
		/* the notifications of the next WATCH_QUIET_MS wait in the
		 * kernel's queue and are taken together: a running operation's
		 * writes then cost no wake-up of this thread each (the executor
		 * takes what is pending itself before it decides, machine_sync()) */
		r = poll(&p[1], 1, WATCH_QUIET_MS);
		if (r > 0)
			break;
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

int machine_read_memmap(struct engine *e)
{
	struct livetable_counts c;
	uint64_t from = 0;
	int r;

	if (!e->live)
		return -ENODEV;
	/* mostly none (a sim, a view before): no wait for the update lock,
	 * which the HTTPS threads' views would take at the same moments */
	livetable_counts(e->live, &c);
	if (c.memmap_unread == 0)
		return 0;
	do { /* a batch per hold: the watcher and the executor wait no longer */
		pthread_mutex_lock(&e->machine_update_lock);
		r = livetable_read_memmap(e->live, &from);
		pthread_mutex_unlock(&e->machine_update_lock);
	} while (r > 0 && from != UINT64_MAX);
	return r < 0 ? r : 0;
}

int machine_snapshot(struct engine *e, struct mem_table **out)
{
	if (!e->live)
		return -ENODEV;
	return livetable_snapshot(e->live, out);
}

const struct mem_table *machine_table_hold(struct engine *e)
{
	if (!e->live)
		return NULL;
	livetable_lock(e->live);
	return livetable_table(e->live);
}

void machine_table_release(struct engine *e)
{
	if (e->live)
		livetable_unlock(e->live);
}

void machine_zone_bytes_locked(struct engine *e, uint64_t *movable, uint64_t *normal)
{
	struct livetable_counts c;

	livetable_counts_locked(e->live, &c);
	*movable = c.online_movable * c.block_size;
	*normal = c.online_kernel * c.block_size;
}

int machine_figures(struct engine *e, struct machine_figures *out, uint64_t *granted_bytes)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	struct livetable_counts c;
	uint64_t owned_online = 0, step_block = 0;
	bool step_up = false;
	size_t n = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (granted_bytes)
		*granted_bytes = 0;
	if (!e->live)
		return -ENODEV;
	machine_sync(e);
	pthread_mutex_lock(&e->lock);
	r = machine_owned_blocks_locked(e, &jb, &n);
	/* the block a grant is bringing up is its own from its first write,
	 * before its step records it: taken with the owned list, in one look */
	{
		struct op *o = intent_op_locked(e);
		step_up = e->step_active && o && o->intent_dir == ILOG_UP;
		step_block = e->step_block;
	}
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		n = 0;
	/* the table's counts, kept as rows change, and a look-up per owned
	 * block: O(owned), not a walk of the machine; the counts under the
	 * same lock as the look-ups, so both see the same rows */
	livetable_lock(e->live);
	{
		const struct mem_table *t = livetable_table(e->live);
		const struct mem_block *b;
		for (size_t k = 0; k < n; k++) {
			b = jb[k].block >= e->boot_end ? mem_table_find(t, jb[k].block) : NULL;
			owned_online += b && b->configured && b->state == MEM_STATE_ONLINE;
			step_up = step_up && jb[k].block != step_block;
		}
		b = step_up && step_block >= e->boot_end ? mem_table_find(t, step_block) : NULL;
		owned_online += b && b->configured && b->state == MEM_STATE_ONLINE;
		livetable_counts_locked(e->live, &c);
		out->has_firmware = t->has_firmware;
	}
	livetable_unlock(e->live);
	out->block_size = c.block_size;
	out->online_bytes = c.online * c.block_size;
	out->standby_bytes = c.standby * c.block_size;
	out->total_bytes = c.blocks * c.block_size;
	out->in_flight_bytes = c.in_flight * c.block_size;
	out->foreign_blocks = c.online_from_mark >= owned_online ? c.online_from_mark - owned_online : 0;
	if (granted_bytes)
		*granted_bytes = (uint64_t)n * c.block_size;
	return 0;
}

int machine_memory_locked(struct engine *e, uint64_t *block_size, uint64_t *online, uint64_t *standby)
{
	struct livetable_counts c;

	if (!e->live)
		return -ENODEV;
	livetable_counts(e->live, &c);
	*block_size = c.block_size;
	*online = c.online * c.block_size;
	*standby = c.standby * c.block_size;
	return 0;
}
