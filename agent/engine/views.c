/* SPDX-License-Identifier: MIT */
/*
 * Views: status, blocks, grants, metrics.  See views.h.
 */
#include "agent/engine/views.h"

#include "providers/wire/blockjson.h"
#include "hotplug/livetable.h"
#include "hotplug/policy.h"
#include "lib/json.h"
#include "lib/timeutil.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"


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

static bool same_values(const struct mem_block *a, const struct mem_block *b)
{
	return a->in_firmware == b->in_firmware && a->configured == b->configured &&
	       a->memmap_on_memory == b->memmap_on_memory && a->state == b->state && a->removable == b->removable &&
	       a->node == b->node && streq(a->zones, b->zones);
}

static bool same_owner(const char *a, const char *b)
{
	return a == b || (a && b && streq(a, b));
}

int engine_blocks_json(struct engine *e, bool runs, json_t **out)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_json_ json_t *j = NULL;
	json_t *arr, *run = NULL;
	struct intentlog_block jb, prev_jb;
	const char *prev_owner = NULL;
	size_t count = 0;
	int r;

	machine_sync(e);
	r = machine_snapshot(e, &t);
	if (r < 0)
		return r;
	if (!runs) {
		r = blockjson_from_table(t, &j);
		if (r < 0)
			return r;
	} else {
		/* the table's fields without its blocks, then the runs */
		struct mem_table head = *t;

		head.n = 0;
		r = blockjson_from_table(&head, &j);
		if (r < 0)
			return r;
	}
	arr = json_object_get(j, "blocks");
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < t->n && r == 0; i++) {
		const struct mem_block *mb = &t->blocks[i];
		const char *owner = block_owner_locked(e, mb, &jb);
		json_t *b;

		if (runs && run && mb->id == t->blocks[i - 1].id + 1 && same_values(mb, &t->blocks[i - 1]) &&
		    same_owner(owner, prev_owner)) {
			json_object_set_new(run, "count", json_integer((json_int_t)++count));
			continue;
		}
		if (!runs) {
			b = json_array_get(arr, i);
		} else {
			r = blockjson_from_block(t, mb, &b);
			if (r < 0 || json_array_append_new(arr, b) < 0) {
				r = r < 0 ? r : -ENOMEM;
				break;
			}
			run = b;
			count = 1;
			json_object_set_new(run, "count", json_integer(1));
			prev_jb = jb; /* the owner's text outlives the next lookup */
			owner = owner == jb.grant_id ? prev_jb.grant_id : owner;
			prev_owner = owner;
		}
		json_object_set_new(b, "owner", owner ? json_string(owner) : json_null());
	}
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return r;
	*out = TAKE_PTR(j);
	return 0;
}

/* "created_at"/"updated_at" (RFC 3339 UTC) of a journal record. */
static void set_times(json_t *j, const struct intentlog_grant *g)
{
	char when[32];

	msg_time_format(g->created, when);
	json_object_set_new(j, "created_at", json_string(when));
	msg_time_format(g->updated, when);
	json_object_set_new(j, "updated_at", json_string(when));
}

/* The revocation that gave BLOCK back: the last one recorded after the
 * grant (CREATED) whose report lists BLOCK done.  NULL: none did (it was
 * taken down outside memgrant).  Returns into REVS. */
static const char *taken_by(const struct intentlog_grant *revs, size_t n, time_t created, uint64_t block)
{
	const char *by = NULL;
	time_t when = 0;

	for (size_t i = 0; i < n; i++) {
		const json_t *b;
		size_t k;

		if (revs[i].type != MSG_REVOKE || !revs[i].status || revs[i].created < created)
			continue;
		json_array_foreach(json_object_get(revs[i].status, "blocks"), k, b)
			if ((uint64_t)json_integer_value(json_object_get(b, "block")) == block &&
			    !json_is_object(json_object_get(b, "error")) && (!by || revs[i].updated >= when)) {
				by = revs[i].id;
				when = revs[i].updated;
			}
	}
	return by;
}

/*
 * What grant G holds now, from its last REPORT (consumed): the blocks it
 * still owns are listed, those it had and gave back move to "given_back"
 * with the revocation that took each (or "outside memgrant"); memory and
 * block counts are what it holds; the state says "revoked" when it holds
 * nothing any more, "reduced" when less than it had.  The report itself
 * stays as "report" (history).  A grant that holds what its report says is
 * shown as its report.  Engine lock held.
 */
static json_t *grant_now_locked(struct engine *e, const struct intentlog_grant *g, json_t *report)
{
	struct intentlog_block *owned = NULL;
	struct intentlog_grant *revs = NULL;
	size_t n_owned = 0, n_revs = 0, held = 0, i;
	json_t *now = NULL, *blocks = NULL, *back = NULL, *b;
	uint64_t bs = 0;

	if (intentlog_owned_blocks(e->journal, &owned, &n_owned) < 0)
		return report;
	if (intentlog_list_grants(e->journal, &revs, &n_revs) < 0)
		n_revs = 0;
	now = json_deep_copy(report);
	blocks = json_array();
	back = json_array();
	if (!now || !blocks || !back)
		goto out;
	json_array_foreach(json_object_get(report, "blocks"), i, b) {
		uint64_t id = (uint64_t)json_integer_value(json_object_get(b, "block"));
		bool mine = false;
		const char *by;

		for (size_t k = 0; k < n_owned && !mine; k++)
			mine = owned[k].block == id && streq(owned[k].grant_id, g->id);
		if (mine) {
			held++;
			json_array_append(blocks, b);
		} else if (json_is_object(json_object_get(b, "error"))) {
			json_array_append(blocks, b); /* never held: the report's error stays */
		} else {
			by = taken_by(revs, n_revs, g->created, id);
			json_array_append_new(back, json_pack("{s:I,s:s}", "block", (json_int_t)id, "by",
							      by ? by : "outside memgrant"));
		}
	}
	if (json_array_size(back) == 0) {
		json_decref(now);
		now = NULL;
		goto out;
	}
	livetable_lock(e->live);
	bs = livetable_table(e->live)->block_size;
	livetable_unlock(e->live);
	json_object_set(now, "blocks", blocks);
	json_object_set_new(now, "given_back", json_incref(back));
	json_object_set_new(now, "applied_bytes", json_integer((json_int_t)(held * bs)));
	json_object_set_new(now, "blocks_done", json_integer((json_int_t)held));
	json_object_set_new(now, "state", json_string(held ? "reduced" : "revoked"));
	json_object_set_new(now, "report", json_incref(report));
out:
	json_decref(blocks);
	json_decref(back);
	free(owned);
	intentlog_grants_free(revs, n_revs);
	if (!now)
		return report;
	json_decref(report);
	return now;
}

json_t *engine_grant_json(struct engine *e, const char *id)
{
	struct intentlog_grant g = { 0 };
	json_t *j = NULL;

	pthread_mutex_lock(&e->lock);
	if (e->running && e->running->live && streq(e->running->msg->id, id)) {
		/* running: its progress is in memory (the kernel records it);
		 * when it was recorded and last changed, from the journal, as
		 * the list says them */
		j = json_deep_copy(e->running->live);
		if (j && intentlog_get_grant(e->journal, id, &g) == 0) {
			set_times(j, &g);
			intentlog_grant_done(&g);
		}
	} else if (intentlog_get_grant(e->journal, id, &g) == 0) {
		j = g.status ? json_deep_copy(g.status) : NULL;
		if (j && g.type == MSG_GRANT)
			j = grant_now_locked(e, &g, j);
		if (j)
			set_times(j, &g);
		intentlog_grant_done(&g);
	}
	pthread_mutex_unlock(&e->lock);
	return j;
}

json_t *engine_grants_json(struct engine *e)
{
	struct intentlog_grant *gs = NULL;
	size_t n = 0;
	json_t *arr = json_array();

	pthread_mutex_lock(&e->lock);
	if (intentlog_list_grants(e->journal, &gs, &n) == 0) {
		struct op *o = e->running && e->running->intent_open ? e->running : NULL;

		for (size_t i = 0; i < n; i++) {
			bool live = o && o->live && streq(o->msg->id, gs[i].id);
			size_t owned = gs[i].n_blocks;
			json_t *s = live ? json_deep_copy(o->live)
				    : gs[i].status ? json_deep_copy(gs[i].status) : json_object();
			/* the running operation's open intent changes ownership in memory */
			if (o && o->intent_dir == ILOG_UP && streq(o->msg->id, gs[i].id))
				owned += o->n_done;
			for (size_t k = 0; o && o->intent_dir == ILOG_DOWN && k < o->n_done; k++) {
				struct intentlog_block jb;
				if (owned && intentlog_find_owned_block(e->journal, o->done[k].block, &jb) == 0 &&
				    streq(jb.grant_id, gs[i].id))
					owned--;
			}
			json_object_set_new(s, "created", json_integer((json_int_t)gs[i].created));
			set_times(s, &gs[i]);
			json_object_set_new(s, "owned_blocks", json_integer((json_int_t)owned));
			json_array_append_new(arr, s);
		}
		intentlog_grants_free(gs, n);
	}
	pthread_mutex_unlock(&e->lock);
	return json_pack("{s:o}", "grants", arr);
}

json_t *engine_status_json(struct engine *e)
{
	struct machine_figures f;
	uint64_t online = 0, standby = 0, granted = 0;
	char auto_online[32] = "";
	json_t *j, *running = json_null();
	size_t queued = 0;
	bool have = machine_figures(e, &f, &granted) == 0;

	if (have) {
		online = f.online_bytes;
		standby = f.standby_bytes;
	}
	if (e->backend->ops->read_auto_online(e->backend, auto_online, sizeof(auto_online)) < 0)
		auto_online[0] = '\0';
	pthread_mutex_lock(&e->lock);
	for (struct op *o = e->queue_head; o; o = o->next)
		queued++;
	if (e->running) {
		const struct op *o = e->running;
		running = json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", o->msg->id, "kind", msg_type_name(o->msg->type),
				    "state", msg_state_name(o->state), "blocks_done", (json_int_t)o->blocks_done,
				    "blocks_total", (json_int_t)o->blocks_total);
		/* a revocation retrying busy blocks: which, how often, the budget left */
		if (running && o->n_busy) {
			json_t *arr = json_array();
			double left = o->budget_deadline - mono_s();
			for (size_t i = 0; i < o->n_busy; i++)
				json_array_append_new(arr, json_pack("{s:I,s:I,s:s}", "block", (json_int_t)o->busy[i].block,
								     "attempts", (json_int_t)o->busy[i].attempts, "error",
								     o->busy[i].err_code));
			json_object_set_new(running, "busy_blocks", arr);
			json_object_set_new(running, "budget_ms", json_integer((json_int_t)o->budget_ms));
			json_object_set_new(running, "budget_left_ms", json_integer(left > 0 ? (json_int_t)(left * 1000) : 0));
		}
		if (running && o->cancel_requested)
			json_object_set_new(running, "cancel_requested_by", json_string(o->cancel_by));
	}
	j = json_pack("{s:s,s:s,s:s,s:s,s:b,s:{s:I,s:I,s:I,s:I,s:I,s:I},s:s?,s:o,s:I,s:{s:s,s:s,s:I,s:I}}",
		      "agent", e->agent_id, "version", MEMGRANT_VERSION, "backend", e->backend->ops->name, "root",
		      e->backend->root, "stopping", e->stopping, "memory", "block_size",
		      (json_int_t)(have ? f.block_size : 0), "online_bytes", (json_int_t)online, "standby_bytes",
		      (json_int_t)standby, "granted_bytes", (json_int_t)granted, "foreign_blocks",
		      (json_int_t)(have ? f.foreign_blocks : 0), "foreign_bytes",
		      (json_int_t)(have ? f.foreign_blocks * f.block_size : 0), "auto_online_blocks",
		      auto_online[0] ? auto_online : NULL, "running", running, "queued", (json_int_t)queued,
		      "policy", "memmap_on_memory", policy_memmap_name(e->set.policy.memmap), "zone",
		      mem_zone_name(e->set.policy.zone), "reserve", (json_int_t)e->set.policy.reserve,
		      "movable_ratio", (json_int_t)e->set.policy.movable_ratio);
	pthread_mutex_unlock(&e->lock);
	/* mid-operation a block is neither online nor standby: online +
	 * standby + in_flight = total */
	if (have && j) {
		json_t *mem = json_object_get(j, "memory");
		json_object_set_new(mem, "in_flight_bytes", json_integer((json_int_t)f.in_flight_bytes));
		json_object_set_new(mem, "total_bytes", json_integer((json_int_t)f.total_bytes));
	}
	return j;
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
