/* SPDX-License-Identifier: MIT */
/*
 * engine_plan() (agent/engine/engine.h): a dry run.  The request is checked and
 * planned exactly as engine_submit() would (same precheck, same planner
 * call, same policy), and the plan is answered as a report: the blocks in
 * the order they would be taken, the zone and memmap decisions with their
 * reasons, the cost in online memory.  Nothing is numbered, journaled,
 * queued or written.
 */
#include <time.h>

#include "hotplug/policy.h"
#include "lib/json.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/admission.h"
#include "agent/engine/engine_impl.h"


static json_t *plan_block_json(const struct mem_table *t, uint64_t id, const struct policy_block *pb)
{
	char range[MSG_RANGE_MAX + 1];
	uint64_t first = id * t->block_size;
	json_t *b;

	snprintf(range, sizeof(range), "0x%016llx-0x%016llx", (unsigned long long)first,
		 (unsigned long long)(first + t->block_size - 1));
	b = json_pack("{s:I,s:s}", "block", (json_int_t)id, "range", range);
	if (b && pb) {
		json_object_set_new(b, "memmap_on_memory", pb->memmap < 0 ? json_null() : json_boolean(pb->memmap == 1));
		json_object_set_new(b, "zone", json_string(pb->online == ONLINE_MOVABLE ? "Movable" : "Normal"));
	}
	return b;
}

/* What a grant by P would cost: its memmap (64 bytes of struct page per
 * 4 KiB page, block_size / 64) comes out of the granted blocks when
 * memmap_on_memory is on, out of the memory already online when it is off. */
static void plan_cost_json(json_t *j, const struct policy_decision *pd, const struct mem_table *t)
{
	uint64_t online, standby, memmap = (uint64_t)pd->n * (t->block_size / 64), added = pd->n * t->block_size;
	size_t on = 0, keep = 0;

	memory_figures(t, &online, &standby);
	for (size_t i = 0; i < pd->n; i++) {
		on += pd->blocks[i].memmap == 1;
		keep += pd->blocks[i].memmap < 0;
	}
	{
		uint64_t in_blocks = (uint64_t)on * (t->block_size / 64);
		uint64_t from_online = memmap - in_blocks;
		json_object_set_new(j, "memmap_bytes", json_integer((json_int_t)memmap));
		json_object_set_new(j, "memmap_in_granted_bytes", json_integer((json_int_t)in_blocks));
		json_object_set_new(j, "online_cost_bytes", json_integer((json_int_t)from_online));
		json_object_set_new(j, "usable_bytes", json_integer((json_int_t)(added - in_blocks)));
		json_object_set_new(j, "online_bytes_before", json_integer((json_int_t)online));
		json_object_set_new(j, "online_bytes_after", json_integer((json_int_t)(online + added)));
		if (keep)
			json_object_set_new(j, "memmap_note",
					    json_string("no firmware interface: the kernel chose memmap_on_memory when it "
							"added the blocks; the cost assumes the memmap is online memory"));
	}
}

int engine_plan(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_policy_decision_ struct policy_decision *pd = NULL;
	_cleanup_msg_ struct msg *own = m;
	uint64_t requested = 0, mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;
	json_t *j = NULL, *blocks;
	struct policy_settings ps;
	int r;

	if (!v || !src || !m)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	machine_sync(e);
	if (m->type == MSG_SYNC) {
		msg_error_set(&v->error, EINVAL, "field \"type\": a sync has no plan");
		return refuse(v, -EINVAL);
	}
	/* read before e->lock: a file read, and nothing of the engine */
	if (m->type == MSG_GRANT && policy_read_meminfo(e->backend->root, NULL, &mem_available) < 0)
		mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;

	pthread_mutex_lock(&e->lock);
	/* nothing is numbered, journaled or queued: the generation stays unused */
	r = machine_snapshot(e, &t);
	if (r < 0) {
		msg_error_set(&v->error, r, "cannot read the memory blocks: %s", strerror(-r));
		goto refused;
	}
	r = precheck_locked(e, m, t, &requested, &p, &v->error);
	if (r < 0)
		goto refused;
	ps = e->set.policy;
	pthread_mutex_unlock(&e->lock);

	j = json_pack("{s:s,s:b,s:s,s:I,s:I,s:s}", "type", "plan", "dry_run", 1, "kind", msg_type_name(m->type),
		      "requested_bytes", (json_int_t)requested, "block_size", (json_int_t)t->block_size, "reason",
		      p->reason);
	blocks = json_array();
	if (!j || !blocks) {
		json_decref(j);
		json_decref(blocks);
		msg_error_set(&v->error, ENOMEM, "out of memory");
		return refuse(v, -ENOMEM);
	}
	if (m->type == MSG_GRANT) {
		struct policy_request preq = {
			.memmap = m->memmap == MSG_MEMMAP_AUTO ? -1 : m->memmap == MSG_MEMMAP_ON,
			.zone = m->zone,
			.contiguous = m->contiguous,
		};
		r = policy_decide(&ps, &preq, t, mem_available, p->blocks, p->n, &pd);
		if (r < 0) {
			json_decref(j);
			json_decref(blocks);
			msg_error_set(&v->error, r, "the policy cannot decide: %s", strerror(-r));
			return refuse(v, r);
		}
		for (size_t i = 0; i < pd->n; i++)
			json_array_append_new(blocks, plan_block_json(t, pd->blocks[i].id, &pd->blocks[i]));
		json_object_set_new(j, "memmap_on_memory", pd->memmap < 0 ? json_null() : json_boolean(pd->memmap == 1));
		json_object_set_new(j, "zone", json_string(pd->online == ONLINE_MOVABLE ? "Movable"
							   : pd->online == ONLINE_KERNEL ? "Normal" : "split"));
		json_object_set_new(j, "decisions", json_pack("[s,s]", pd->memmap_reason, pd->zone_reason));
		plan_cost_json(j, pd, t);
	} else {
		uint64_t online, standby;
		/* by size the planner lists every candidate in order and the
		 * executor stops once the size went back: the plan is the first
		 * size / block size of them (the rest are tried only in place of
		 * a block that stays busy); by grant or blocks every one goes */
		size_t take = p->n;
		json_t *decisions = json_pack("[s]", p->reason);

		if (m->target == MSG_BY_SIZE && p->want_bytes / t->block_size < take)
			take = (size_t)(p->want_bytes / t->block_size);
		for (size_t i = 0; i < take; i++)
			json_array_append_new(blocks, plan_block_json(t, p->blocks[i], NULL));
		if (decisions && take < p->n) {
			char line[160];

			snprintf(line, sizeof(line), "takes the first %zu of the %zu candidates; the next only in place "
				 "of a block that stays busy", take, p->n);
			json_array_append_new(decisions, json_string(line));
		}
		memory_figures(t, &online, &standby);
		json_object_set_new(j, "decisions", decisions);
		json_object_set_new(j, "online_bytes_before", json_integer((json_int_t)online));
		json_object_set_new(j, "online_bytes_after",
				    json_integer((json_int_t)(online - (p->want_bytes < online ? p->want_bytes : online))));
	}
	json_object_set_new(j, "blocks", blocks);
	v->kind = ENGINE_ANSWERED;
	v->report = j;
	return 0;

refused:
	pthread_mutex_unlock(&e->lock);
	return refuse(v, r);
}
