/* SPDX-License-Identifier: MIT */
/*
 * Views: status, blocks, grants, metrics.  See views.h.
 */
#include "agent/engine/views.h"

#include "hotplug/policy.h"
#include "lib/timeutil.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"


const char *engine_backend_root(struct engine *e)
{
	return e->backend->root;
}

int engine_memory(struct engine *e, struct engine_memory *out)
{
	struct machine_figures f;
	uint64_t granted = 0;
	int r = machine_figures(e, &f, &granted);

	memset(out, 0, sizeof(*out));
	if (r < 0)
		return r;
	out->granted_bytes = granted;
	out->has_firmware = f.has_firmware;
	out->block_size = f.block_size;
	out->online_bytes = f.online_bytes;
	out->standby_bytes = f.standby_bytes;
	return 0;
}

/* Who holds online block MB: a grant's id (in JB), "foreign" (brought up
 * outside memgrant) or NULL (boot memory, or not online).  Engine lock held. */
static const char *block_owner_locked(struct engine *e, const struct mem_block *mb, struct intentlog_block *jb)
{
	if (!mb->configured || mb->state != MEM_STATE_ONLINE)
		return NULL;
	if (machine_find_owned_locked(e, mb->id, jb) == 0)
		return jb->grant_id;
	return mb->id >= e->boot_end ? "foreign" : NULL;
}

void engine_blocks_done(struct engine_blocks *b)
{
	mem_table_free(b->table);
	free(b->owner);
	free(b->grants);
	memset(b, 0, sizeof(*b));
}

/* The index of grant ID in B->grants, added when new; -ENOMEM. */
static int owner_index(struct engine_blocks *b, const char *id)
{
	char(*ng)[MSG_ID_MAX + 1];

	/* blocks of one grant follow each other: the last one first */
	for (size_t k = b->n_grants; k-- > 0;)
		if (streq(b->grants[k], id))
			return (int)k;
	ng = reallocarray(b->grants, b->n_grants + 1, sizeof(*ng));
	if (!ng)
		return -ENOMEM;
	b->grants = ng;
	snprintf(ng[b->n_grants], sizeof(ng[0]), "%s", id);
	return (int)b->n_grants++;
}

int engine_blocks(struct engine *e, struct engine_blocks *out)
{
	struct intentlog_block jb;
	int r;

	memset(out, 0, sizeof(*out));
	machine_sync(e);
	r = machine_read_memmap(e);
	if (r == 0)
		r = machine_snapshot(e, &out->table);
	if (r < 0)
		return r;
	out->owner = calloc(out->table->n + 1, sizeof(*out->owner));
	if (!out->owner) {
		engine_blocks_done(out);
		return -ENOMEM;
	}
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < out->table->n && r >= 0; i++) {
		const char *owner = block_owner_locked(e, &out->table->blocks[i], &jb);

		if (!owner)
			out->owner[i] = ENGINE_OWNER_NONE;
		else if (owner != jb.grant_id)
			out->owner[i] = ENGINE_OWNER_FOREIGN;
		else if ((r = owner_index(out, owner)) >= 0)
			out->owner[i] = r;
	}
	pthread_mutex_unlock(&e->lock);
	if (r < 0) {
		engine_blocks_done(out);
		return r;
	}
	return 0;
}

/* The report of journal record G, or of O when it is G's running operation
 * and has published one; e->lock held. */
static int row_report_locked(const struct op *o, const struct intentlog_grant *g, struct engine_grant_row *row)
{
	int r;

	if (o && o->has_live && streq(o->msg->id, g->id))
		r = report_copy(&row->report, &o->live);
	else if (g->status)
		r = intentlog_grant_report(g, &row->report);
	else
		return 0;
	if (r == -EINVAL)
		return 0; /* not a status report: listed without one */
	if (r < 0)
		return r;
	row->has_report = true;
	return 0;
}

/* The revocation that gave each of GB[0..N) back: the last one, among
 * REVS[FROM..N_REVS) (the journal's requests in the order they were
 * accepted: those after the grant), whose report lists the block done.
 * Empty: none did (it was taken down outside memgrant).  Each report is
 * decoded once and its blocks searched sorted: O(R (B log B)), where one
 * decode per given-back block took 20 s for a 4,096-block grant. */
static void taken_by(const struct intentlog_grant *revs, size_t n_revs, size_t from, struct engine_given_back *gb,
		     size_t n)
{
	for (size_t k = 0; k < n; k++)
		gb[k].by[0] = '\0';
	for (size_t i = from; i < n_revs; i++) {
		_cleanup_report_ struct report rep = { 0 };
		_cleanup_free_ uint64_t *done = NULL;
		size_t n_done = 0;

		if (revs[i].type != MSG_REVOKE || !revs[i].status || intentlog_grant_report(&revs[i], &rep) < 0)
			continue;
		done = calloc(rep.n_blocks + 1, sizeof(*done));
		if (!done)
			return;
		for (size_t b = 0; b < rep.n_blocks; b++)
			if (!rep.blocks[b].error_code[0])
				done[n_done++] = rep.blocks[b].block;
		qsort(done, n_done, sizeof(*done), u64_cmp);
		for (size_t k = 0; k < n; k++)
			if (n_done && bsearch(&gb[k].block, done, n_done, sizeof(*done), u64_cmp))
				snprintf(gb[k].by, sizeof(gb[k].by), "%s", revs[i].id);
	}
}

/*
 * What grant G holds now, in ROW (its report, filled): the blocks it still
 * owns stay in the report, those it had and gave back move to given_back
 * with the revocation that took each ("" for outside memgrant); memory and
 * block counts become what it holds; the state says "revoked" when it holds
 * nothing any more, "reduced" when less than it had.  The report as it was
 * stays in ROW->history.  A grant that holds what its report says is left
 * as it is.  Engine lock held.
 */
static int grant_now_locked(struct engine *e, const struct intentlog_grant *g, struct engine_grant_row *row)
{
	_cleanup_free_ struct intentlog_block *owned = NULL;
	_cleanup_free_ uint64_t *mine_ids = NULL;
	struct intentlog_grant *revs = NULL;
	size_t n_owned = 0, n_mine = 0, n_revs = 0, held = 0, kept = 0, after = 0;
	struct report *r = &row->report;
	int rc = 0;

	if (intentlog_owned_blocks(e->journal, &owned, &n_owned) < 0)
		return 0;
	mine_ids = calloc(n_owned + 1, sizeof(*mine_ids));
	if (!mine_ids)
		return -ENOMEM;
	for (size_t k = 0; k < n_owned; k++)
		if (streq(owned[k].grant_id, g->id))
			mine_ids[n_mine++] = owned[k].block;
	qsort(mine_ids, n_mine, sizeof(*mine_ids), u64_cmp);
	row->given_back = calloc(r->n_blocks + 1, sizeof(*row->given_back));
	if (!row->given_back || report_copy(&row->history, r) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->n_blocks; i++) {
		const struct report_block *b = &r->blocks[i];
		bool mine = n_mine && bsearch(&b->block, mine_ids, n_mine, sizeof(*mine_ids), u64_cmp);

		if (mine || b->error_code[0]) { /* held, or never held: the report's error stays */
			held += mine;
			r->blocks[kept++] = *b;
			continue;
		}
		row->given_back[row->n_given_back++].block = b->block;
	}
	if (!row->n_given_back) {
		report_clear(&row->history);
		free(row->given_back);
		row->given_back = NULL;
		goto out;
	}
	/* who took them: the revocations accepted after G, by the journal's
	 * order, not by time (seconds tie); listed only when some went back */
	if (intentlog_list_grants(e->journal, &revs, &n_revs) < 0)
		n_revs = 0;
	for (size_t k = 0; k < n_revs; k++)
		if (streq(revs[k].id, g->id)) {
			after = k + 1;
			break;
		}
	taken_by(revs, n_revs, after, row->given_back, row->n_given_back);
	r->n_blocks = kept;
	r->applied_bytes = held * r->block_size;
	r->blocks_done = held;
	row->has_now = true;
	row->held_blocks = held;
out:
	intentlog_grants_free(revs, n_revs);
	return rc;
}

int engine_grant(struct engine *e, const char *id, struct engine_grant_row *out)
{
	struct intentlog_grant g = { 0 };
	int r;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&e->lock);
	r = intentlog_get_grant(e->journal, id, &g);
	if (r == 0) {
		out->created = g.created;
		out->updated = g.updated;
		out->owned_blocks = g.n_blocks;
		r = row_report_locked(e->running, &g, out);
		if (r == 0 && !out->has_report)
			r = -ENOENT; /* nothing to show */
		if (r == 0 && g.type == MSG_GRANT && !(e->running && streq(e->running->msg->id, id)))
			r = grant_now_locked(e, &g, out);
		intentlog_grant_done(&g);
	}
	pthread_mutex_unlock(&e->lock);
	if (out->report.agent == NULL)
		out->report.agent = e->agent_id;
	if (out->history.agent == NULL)
		out->history.agent = e->agent_id;
	if (r < 0)
		engine_grant_row_clear(out);
	return r;
}

void engine_grant_row_clear(struct engine_grant_row *row)
{
	report_clear(&row->report);
	report_clear(&row->history);
	free(row->given_back);
	row->given_back = NULL;
	row->n_given_back = 0;
	row->has_now = false;
}

void engine_grant_rows_free(struct engine_grant_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++)
		engine_grant_row_clear(&rows[i]);
	free(rows);
}

int engine_grants(struct engine *e, struct engine_grant_row **out, size_t *n_out)
{
	struct intentlog_grant *gs = NULL;
	struct engine_grant_row *rows = NULL;
	size_t n = 0;
	int r;

	*out = NULL;
	*n_out = 0;
	pthread_mutex_lock(&e->lock);
	r = intentlog_list_grants(e->journal, &gs, &n);
	if (r == 0) {
		struct op *o = e->running && e->running->intent_open ? e->running : NULL;

		rows = calloc(n + 1, sizeof(*rows));
		if (!rows)
			r = -ENOMEM;
		for (size_t i = 0; rows && i < n && r == 0; i++) {
			size_t owned = gs[i].n_blocks;
			/* the running operation's open intent changes ownership in memory */
			if (o && o->intent_dir == ILOG_UP && streq(o->msg->id, gs[i].id))
				owned += o->n_done;
			for (size_t k = 0; o && o->intent_dir == ILOG_DOWN && k < o->n_done; k++) {
				struct intentlog_block jb;
				if (owned && intentlog_find_owned_block(e->journal, o->done[k].block, &jb) == 0 &&
				    streq(jb.grant_id, gs[i].id))
					owned--;
			}
			rows[i].created = gs[i].created;
			rows[i].updated = gs[i].updated;
			rows[i].owned_blocks = owned;
			r = row_report_locked(o, &gs[i], &rows[i]);
			rows[i].report.agent = e->agent_id;
		}
		intentlog_grants_free(gs, n);
	}
	pthread_mutex_unlock(&e->lock);
	if (r < 0) {
		engine_grant_rows_free(rows, n);
		return r;
	}
	*out = rows;
	*n_out = n;
	return 0;
}

void engine_status_done(struct engine_status *s)
{
	free(s->running.busy);
	s->running.busy = NULL;
	s->running.n_busy = 0;
}

/* What the executor runs now; e->lock held. */
static int running_locked(const struct op *o, struct engine_running *out)
{
	snprintf(out->id, sizeof(out->id), "%s", o->msg->id);
	out->kind = o->msg->type;
	out->state = o->state;
	out->blocks_done = o->blocks_done;
	out->blocks_total = o->blocks_total;
	if (o->cancel_requested)
		snprintf(out->cancel_requested_by, sizeof(out->cancel_requested_by), "%s", o->cancel_by);
	/* a revocation retrying busy blocks: which, how often, the budget left */
	if (o->n_busy) {
		double left = o->budget_deadline - mono_s();

		out->busy = calloc(o->n_busy, sizeof(*out->busy));
		if (!out->busy)
			return -ENOMEM;
		for (size_t i = 0; i < o->n_busy; i++) {
			out->busy[i].block = o->busy[i].block;
			out->busy[i].attempts = o->busy[i].attempts;
			snprintf(out->busy[i].error, sizeof(out->busy[i].error), "%s", o->busy[i].err_code);
		}
		out->n_busy = o->n_busy;
		out->budget_ms = o->budget_ms;
		out->budget_left_ms = left > 0 ? (uint64_t)(left * 1000) : 0;
	}
	return 0;
}

int engine_status(struct engine *e, struct engine_status *out)
{
	struct machine_figures f;
	uint64_t granted = 0;
	int r = 0;

	memset(out, 0, sizeof(*out));
	out->have_memory = machine_figures(e, &f, &granted) == 0;
	if (out->have_memory) {
		out->memory = (struct engine_memory){ .block_size = f.block_size,
						      .online_bytes = f.online_bytes,
						      .standby_bytes = f.standby_bytes,
						      .granted_bytes = granted };
		out->foreign_blocks = f.foreign_blocks;
		out->in_flight_bytes = f.in_flight_bytes;
		out->total_bytes = f.total_bytes;
	} else {
		out->memory.granted_bytes = granted;
	}
	if (e->backend->ops->read_auto_online(e->backend, out->auto_online_blocks, sizeof(out->auto_online_blocks)) < 0)
		out->auto_online_blocks[0] = '\0';
	out->agent = e->agent_id;
	out->version = MEMGRANT_VERSION;
	out->backend = e->backend->ops->name;
	out->root = e->backend->root;
	pthread_mutex_lock(&e->lock);
	out->stopping = e->stopping;
	for (struct op *o = e->queue_head; o; o = o->next)
		out->queued++;
	if (e->running) {
		out->has_running = true;
		r = running_locked(e->running, &out->running);
	}
	out->policy_memmap = policy_memmap_name(e->set.policy.memmap);
	out->policy_zone = mem_zone_name(e->set.policy.zone);
	out->policy_reserve = e->set.policy.reserve;
	out->policy_movable_ratio = e->set.policy.movable_ratio;
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		engine_status_done(out);
	return r;
}

void engine_status_line(struct engine *e, char *buf, size_t len)
{
	struct machine_figures f;
	uint64_t online = 0, granted = 0;
	char on[16], gr[16];

	if (machine_figures(e, &f, &granted) == 0)
		online = f.online_bytes;
	pthread_mutex_lock(&e->lock);
	size_format(online, on, sizeof(on));
	size_format(granted, gr, sizeof(gr));
	if (e->running)
		snprintf(buf, len, "%s %s: %zu of %zu blocks; %s online, %s granted",
			 msg_type_name(e->running->msg->type), e->running->msg->id, e->running->blocks_done,
			 e->running->blocks_total, on, gr);
	else
		snprintf(buf, len, "idle; %s online, %s granted", on, gr);
	pthread_mutex_unlock(&e->lock);
}

void engine_count_skipped(struct engine *e, const struct engine_source *src, const char *reason, uint64_t n)
{
	metrics_count_skipped(e->metrics, src->name, reason, n);
}

int engine_metrics_text(struct engine *e, char **out)
{
	struct machine_figures f;
	struct metrics_gauges g = { 0 };

	if (machine_figures(e, &f, &g.granted_bytes) == 0) {
		g.block_size = f.block_size;
		g.online_bytes = f.online_bytes;
		g.standby_bytes = f.standby_bytes;
	}
	pthread_mutex_lock(&e->lock);
	/* every destination: control planes and webhooks alike */
	for (size_t i = 0; i < e->n_outboxes; i++)
		g.outbox_pending += intentlog_outbox_count(e->journal, e->outboxes[i]);
	{
		struct intentlog_stats js;
		intentlog_stats(e->journal, &js);
		g.journal_syncs = js.syncs;
		g.journal_bytes_written = js.bytes_written;
	}
	pthread_mutex_unlock(&e->lock);
	return metrics_render(e->metrics, &g, out);
}
