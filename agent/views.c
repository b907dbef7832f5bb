/* SPDX-License-Identifier: MIT */
/*
 * Views: status, blocks, grants, metrics.  See views.h.
 */
#include "views.h"

#include "../hotplug/blockjson.h"
#include "../hotplug/policy.h"
#include "../lib/size.h"
#include "../lib/util.h"
#include "engine_impl.h"

static uint64_t granted_bytes_locked(struct engine *e, uint64_t block_size)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	size_t n = 0;

	if (intentlog_owned_blocks(e->journal, &jb, &n) < 0)
		return 0;
	return (uint64_t)n * block_size;
}

const char *engine_backend_root(struct engine *e)
{
	return e->backend->root;
}

int engine_memory(struct engine *e, struct engine_memory *out)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	int r = hp_discover(e->backend, &t);

	memset(out, 0, sizeof(*out));
	if (r < 0)
		return r;
	out->block_size = t->block_size;
	memory_figures(t, &out->online_bytes, &out->standby_bytes);
	pthread_mutex_lock(&e->lock);
	out->granted_bytes = granted_bytes_locked(e, t->block_size);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int engine_blocks_json(struct engine *e, json_t **out)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	int r = hp_discover(e->backend, &t);

	if (r < 0)
		return r;
	return blockjson_from_table(t, out);
}

json_t *engine_grant_json(struct engine *e, const char *id)
{
	struct intentlog_grant g = { 0 };
	json_t *j = NULL;

	pthread_mutex_lock(&e->lock);
	if (intentlog_get_grant(e->journal, id, &g) == 0) {
		j = g.status ? json_deep_copy(g.status) : NULL;
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
		for (size_t i = 0; i < n; i++) {
			json_t *s = gs[i].status ? json_deep_copy(gs[i].status) : json_object();
			json_object_set_new(s, "created", json_integer((json_int_t)gs[i].created));
			json_object_set_new(s, "owned_blocks", json_integer((json_int_t)gs[i].n_blocks));
			json_array_append_new(arr, s);
		}
		intentlog_grants_free(gs, n);
	}
	pthread_mutex_unlock(&e->lock);
	return json_pack("{s:o}", "grants", arr);
}

json_t *engine_status_json(struct engine *e)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	uint64_t online = 0, standby = 0, granted = 0;
	char auto_online[32] = "";
	json_t *j, *running = json_null();
	size_t queued = 0;

	if (hp_discover(e->backend, &t) == 0)
		memory_figures(t, &online, &standby);
	if (e->backend->ops->read_auto_online(e->backend, auto_online, sizeof(auto_online)) < 0)
		auto_online[0] = '\0';
	pthread_mutex_lock(&e->lock);
	if (t)
		granted = granted_bytes_locked(e, t->block_size);
	for (struct op *o = e->queue_head; o; o = o->next)
		queued++;
	if (e->running)
		running = json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", e->running->msg->id, "kind",
				    msg_type_name(e->running->msg->type), "state", msg_state_name(e->running->state),
				    "blocks_done", (json_int_t)e->running->blocks_done, "blocks_total",
				    (json_int_t)e->running->blocks_total);
	j = json_pack("{s:s,s:s,s:s,s:s,s:b,s:{s:I,s:I,s:I,s:I},s:s?,s:o,s:I,s:{s:s,s:s,s:I,s:I}}",
		      "agent", e->agent_id, "version", MEMGRANT_VERSION, "backend", e->backend->ops->name, "root",
		      e->backend->root, "stopping", e->stopping, "memory", "block_size",
		      (json_int_t)(t ? t->block_size : 0), "online_bytes", (json_int_t)online, "standby_bytes",
		      (json_int_t)standby, "granted_bytes", (json_int_t)granted, "auto_online_blocks",
		      auto_online[0] ? auto_online : NULL, "running", running, "queued", (json_int_t)queued,
		      "policy", "memmap_on_memory", policy_memmap_name(e->set.policy.memmap), "zone",
		      mem_zone_name(e->set.policy.zone), "reserve", (json_int_t)e->set.policy.reserve,
		      "movable_ratio", (json_int_t)e->set.policy.movable_ratio);
	pthread_mutex_unlock(&e->lock);
	return j;
}

void engine_status_line(struct engine *e, char *buf, size_t len)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	uint64_t online = 0, standby = 0, granted = 0;
	char on[16], gr[16];

	if (hp_discover(e->backend, &t) == 0)
		memory_figures(t, &online, &standby);
	pthread_mutex_lock(&e->lock);
	if (t)
		granted = granted_bytes_locked(e, t->block_size);
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

int engine_metrics_text(struct engine *e, char **out)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct metrics_gauges g = { 0 };

	if (hp_discover(e->backend, &t) == 0) {
		g.block_size = t->block_size;
		memory_figures(t, &g.online_bytes, &g.standby_bytes);
	}
	pthread_mutex_lock(&e->lock);
	if (t)
		g.granted_bytes = granted_bytes_locked(e, t->block_size);
	/* every destination: control planes and webhooks alike */
	for (size_t i = 0; i < e->n_outboxes; i++)
		g.outbox_pending += intentlog_outbox_count(e->journal, e->outboxes[i]);
	pthread_mutex_unlock(&e->lock);
	return metrics_render(e->metrics, &g, out);
}
