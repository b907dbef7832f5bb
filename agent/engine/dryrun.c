/* SPDX-License-Identifier: MIT */
/*
 * engine_plan() (agent/engine/engine.h): a dry run.  The request is checked and
 * planned exactly as engine_submit() would (same precheck, same planner
 * call, same policy), and the plan is answered as a struct engine_plan
 * (providers/views/views_json.c writes it): the blocks in
 * the order they would be taken, the zone and memmap decisions with their
 * reasons, the cost in online memory.  Nothing is numbered, journaled,
 * queued or written.
 */
#include <time.h>

#include "hotplug/policy.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/admission.h"
#include "agent/engine/engine_impl.h"

static void plan_answer_freep(struct engine_plan **p)
{
	plan_answer_free(*p);
}

static int add_decision(struct engine_plan *pl, const char *text)
{
	char **nd = reallocarray(pl->decisions, pl->n_decisions + 1, sizeof(*nd));

	if (!nd)
		return -ENOMEM;
	pl->decisions = nd;
	nd[pl->n_decisions] = strdup(text);
	return nd[pl->n_decisions++] ? 0 : -ENOMEM;
}

/* What a grant by PD would cost: its memmap (64 bytes of struct page per
 * 4 KiB page, block_size / 64) comes out of the granted blocks when
 * memmap_on_memory is on, out of the memory already online when it is off. */
static void plan_cost(struct engine_plan *pl, const struct policy_decision *pd, const struct mem_table *t)
{
	uint64_t online, standby, memmap = (uint64_t)pd->n * (t->block_size / 64), added = pd->n * t->block_size;
	size_t on = 0, keep = 0;

	memory_figures(t, &online, &standby);
	for (size_t i = 0; i < pd->n; i++) {
		on += pd->blocks[i].memmap == 1;
		keep += pd->blocks[i].memmap < 0;
	}
	pl->memmap_bytes = memmap;
	pl->memmap_in_granted_bytes = (uint64_t)on * (t->block_size / 64);
	pl->online_cost_bytes = memmap - pl->memmap_in_granted_bytes;
	pl->usable_bytes = added - pl->memmap_in_granted_bytes;
	pl->online_bytes_before = online;
	pl->online_bytes_after = online + added;
	pl->memmap_kernel_chose = keep > 0;
}

int engine_plan(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_policy_decision_ struct policy_decision *pd = NULL;
	_cleanup_msg_ struct msg *own = m;
	uint64_t requested = 0, mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;
	_cleanup_(plan_answer_freep) struct engine_plan *pl = NULL;
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

	pl = calloc(1, sizeof(*pl));
	if (pl)
		pl->blocks = calloc(p->n + 1, sizeof(*pl->blocks));
	if (!pl || !pl->blocks) {
		msg_error_set(&v->error, ENOMEM, "out of memory");
		return refuse(v, -ENOMEM);
	}
	pl->kind = m->type;
	pl->requested_bytes = requested;
	pl->block_size = t->block_size;
	snprintf(pl->reason, sizeof(pl->reason), "%s", p->reason);
	if (m->type == MSG_GRANT) {
		struct policy_request preq = {
			.memmap = m->memmap == MSG_MEMMAP_AUTO ? -1 : m->memmap == MSG_MEMMAP_ON,
			.zone = m->zone,
			.contiguous = m->contiguous,
		};
		r = policy_decide(&ps, &preq, t, mem_available, p->blocks, p->n, &pd);
		if (r < 0) {
			msg_error_set(&v->error, r, "the policy cannot decide: %s", strerror(-r));
			return refuse(v, r);
		}
		if (pd->n > p->n) {
			struct engine_plan_block *nb = reallocarray(pl->blocks, pd->n, sizeof(*nb));
			if (!nb) {
				msg_error_set(&v->error, ENOMEM, "out of memory");
				return refuse(v, -ENOMEM);
			}
			pl->blocks = nb;
		}
		for (size_t i = 0; i < pd->n; i++)
			pl->blocks[pl->n_blocks++] = (struct engine_plan_block){
				.block = pd->blocks[i].id,
				.decided = true,
				.memmap = pd->blocks[i].memmap,
				.zone = pd->blocks[i].online == ONLINE_MOVABLE ? "Movable" : "Normal",
			};
		pl->grant = true;
		pl->memmap = pd->memmap;
		pl->zone = pd->online == ONLINE_MOVABLE ? "Movable" : pd->online == ONLINE_KERNEL ? "Normal" : "split";
		if (add_decision(pl, pd->memmap_reason) < 0 || add_decision(pl, pd->zone_reason) < 0) {
			msg_error_set(&v->error, ENOMEM, "out of memory");
			return refuse(v, -ENOMEM);
		}
		plan_cost(pl, pd, t);
	} else {
		uint64_t online, standby;
		/* by size the planner lists every candidate in order and the
		 * executor stops once the size went back: the plan is the first
		 * size / block size of them (the rest are tried only in place of
		 * a block that stays busy); by grant or blocks every one goes */
		size_t take = p->n;

		if (m->target == MSG_BY_SIZE && p->want_bytes / t->block_size < take)
			take = (size_t)(p->want_bytes / t->block_size);
		for (size_t i = 0; i < take; i++)
			pl->blocks[pl->n_blocks++] = (struct engine_plan_block){ .block = p->blocks[i], .memmap = -1 };
		r = add_decision(pl, p->reason);
		if (r == 0 && take < p->n) {
			char line[160];

			snprintf(line, sizeof(line), "takes the first %zu of the %zu candidates; the next only in place "
				 "of a block that stays busy", take, p->n);
			r = add_decision(pl, line);
		}
		if (r < 0) {
			msg_error_set(&v->error, ENOMEM, "out of memory");
			return refuse(v, -ENOMEM);
		}
		memory_figures(t, &online, &standby);
		pl->online_bytes_before = online;
		pl->online_bytes_after = online - (p->want_bytes < online ? p->want_bytes : online);
	}
	v->kind = ENGINE_ANSWERED;
	v->plan = TAKE_PTR(pl);
	return 0;

refused:
	pthread_mutex_unlock(&e->lock);
	return refuse(v, r);
}
