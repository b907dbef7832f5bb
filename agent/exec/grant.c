/* SPDX-License-Identifier: MIT */
/*
 * A grant on the executor thread: plan against a fresh table, decide memmap
 * and zone (policy), journal the intent, bring the blocks up one by one
 * through exec_block_step(), record the result.  See executor_impl.h.
 */
#include <stdarg.h>
#include <time.h>

#include "hotplug/planner.h"
#include "hotplug/policy.h"
#include "lib/timeutil.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/plan_request.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor.h"
#include "agent/exec/executor_impl.h"

/* A block of a grant went up (or failed): its outcome, in memory. */
struct grant_step {
	struct op *o;
	const struct policy_block *pb;
	const struct mem_table *t;
	size_t *ok;
};

static void record_grant_step(struct engine *e, void *ctx, const struct block_result *res)
{
	struct grant_step *gs = ctx;
	struct op *o = gs->o;
	const struct policy_block *pb = gs->pb;
	struct outcome *oc = op_outcome(o, pb->id, false);

	if (oc)
		outcome_from_block(oc, &res->after);
	o->blocks_done++;
	if (res->err == 0) {
		if (op_done_add(o, pb->id, mem_block_zone(&res->after), res->after.memmap_on_memory == 1) < 0)
			log_fields(&e->log, LOG_ERR, LOG_FIELDS(log_f_grant(o->msg->id), log_f_block(pb->id)),
				   "grant %s: block %llu is online but out of memory to record it; "
				"the next start adopts it from the kernel", o->msg->id, (unsigned long long)pb->id);
		(*gs->ok)++;
		o->applied_bytes += gs->t->block_size;
		if (res->auto_onlined) {
			bool wanted_movable = pb->online == ONLINE_MOVABLE;
			bool got_movable = mem_block_zone(&res->after) == MEM_ZONE_MOVABLE;
			op_add_decision(o, "block %llu: configuring it onlined it at once (auto_online_blocks); "
					"policy wanted %s, the kernel chose %s%s",
					(unsigned long long)pb->id, wanted_movable ? "Movable" : "Normal", MEM_ZONES_TEXT(res->after.zones),
					wanted_movable == got_movable ? "" : " (set backend.own_onlining to let the agent choose)");
			log_fields(&e->log, LOG_WARNING, LOG_FIELDS(log_f_grant(o->msg->id), log_f_block(pb->id)),
				   "grant %s: block %llu was onlined by the kernel at configure time into %s; "
				 "the policy wanted %s", o->msg->id, (unsigned long long)pb->id, MEM_ZONES_TEXT(res->after.zones),
				 wanted_movable ? "Movable" : "Normal");
		}
	} else if (oc) {
		set_outcome_error(oc, res, res->err == -EINTR ? " (policy.block_op_timeout ran out)" : NULL);
		log_fields(&e->log, LOG_ERR,
			   LOG_FIELDS(log_f_grant(o->msg->id), log_f_block(pb->id),
				      log_f_step(block_step_name(res->failed_step)), log_f_errno(res->err)),
			   "grant %s: %s", o->msg->id, oc->err_msg);
	}
	op_publish_locked(e, o, gs->t);
}

/* Every block of O was brought up before (a resumed grant): nothing to do. */
static void finish_grant_early(struct engine *e, struct op *o, size_t mine)
{
	pthread_mutex_lock(&e->lock);
	o->blocks_total = mine;
	pthread_mutex_unlock(&e->lock);
	finish_op(e, o, mine, mine);
}

int exec_run_grant(struct engine *e, struct op *o)
{
	_cleanup_mem_table_ struct mem_table *copy = NULL;
	struct mem_table head = { 0 }, *t = &head; /* the table's figures, without its rows */
	const struct mem_table *pt;
	_cleanup_free_ struct owned_block *owned = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_policy_decision_ struct policy_decision *pd = NULL;
	_cleanup_free_ struct intentlog_target *targets = NULL;
	struct grant_request req;
	struct policy_request preq = { .memmap = -1 };
	struct policy_settings ps;
	uint64_t mem_available = POLICY_MEM_AVAILABLE_UNKNOWN, op_timeout_ms;
	size_t n_owned = 0, n_ids = 0, ok = 0, mine = 0;
	bool early = false;
	char why[256] = "";
	int r;

	r = policy_read_meminfo(e->backend->root, NULL, &mem_available);
	if (r < 0) {
		log_warn(&e->log, "cannot read %s/proc/meminfo (%s): MemAvailable unknown", e->backend->root,
			 strerror(-r));
		mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;
	}
	machine_sync(e);
	/* planned on the live table in place, under its read lock: no copy
	 * of the machine's rows per operation; the rest of the operation
	 * needs only the table's figures (HEAD) */
	pthread_mutex_lock(&e->lock);
	pt = plan_table_hold(e, &copy);
	if (!pt) {
		pthread_mutex_unlock(&e->lock);
		return abort_op(e, o, -ENODEV, NULL, "cannot read the memory blocks: %s", strerror(ENODEV));
	}

	/* Resuming after a restart: blocks this grant already owns are done. */
	r = owned_list_locked(e, &owned, &n_owned);
	if (r == 0) {
		for (size_t i = 0; i < n_owned; i++) {
			const struct mem_block *b;
			struct outcome *oc;
			if (!streq(owned[i].grant_id, o->msg->id))
				continue;
			b = mem_table_find(pt, owned[i].id);
			oc = op_outcome(o, owned[i].id, false);
			if (oc && b)
				outcome_from_block(oc, b);
			mine++;
		}
		o->applied_bytes = mine * pt->block_size;
		o->blocks_done = mine;
	}
	ps = e->set.policy;
	op_timeout_ms = e->set.block_op_timeout_ms;
	if (r < 0) {
		snprintf(why, sizeof(why), "cannot read the journal's block list");
		goto planned;
	}

	fill_grant_request(o->msg, &req);
	if (req.by == GRANT_BY_SIZE) {
		uint64_t applied = o->applied_bytes;

		if (applied >= req.size) {
			early = true;
			goto planned;
		}
		req.size -= applied;
	} else {
		/* by blocks or ranges: what is left are the listed blocks it does not own yet */
		size_t k = 0;
		r = explicit_ids(o->msg, pt->block_size, &ids, &n_ids);
		if (r < 0) {
			snprintf(why, sizeof(why), "cannot expand the blocks of %s", o->msg->id);
			goto planned;
		}
		for (size_t i = 0; i < n_ids; i++) {
			bool done = false;
			for (size_t j = 0; j < n_owned; j++)
				done |= owned[j].id == ids[i] && streq(owned[j].grant_id, o->msg->id);
			if (!done)
				ids[k++] = ids[i];
		}
		if (k == 0) {
			early = true;
			goto planned;
		}
		req.by = GRANT_BY_BLOCKS;
		req.ids = ids;
		req.n_ids = k;
	}
	r = plan_grant(pt, &req, owned, n_owned, &p);
	if (r < 0) {
		snprintf(why, sizeof(why), "%s", p ? p->reason : strerror(-r));
		goto planned;
	}
	preq.memmap = o->msg->memmap == MSG_MEMMAP_AUTO ? -1 : o->msg->memmap == MSG_MEMMAP_ON;
	preq.zone = o->msg->zone;
	preq.contiguous = o->msg->contiguous;
	if (!copy) { /* the live table keeps its zone counts: no walk of it */
		preq.zone_bytes_known = true;
		machine_zone_bytes_locked(e, &preq.movable_bytes, &preq.normal_bytes);
	}
	r = policy_decide(&ps, &preq, pt, mem_available, p->blocks, p->n, &pd);
	if (r < 0)
		snprintf(why, sizeof(why), "the policy cannot decide: %s", strerror(-r));
planned:
	head = *pt;
	head.blocks = NULL;
	head.n = 0;
	plan_table_release(e, copy);
	pthread_mutex_unlock(&e->lock);
	if (early) {
		finish_grant_early(e, o, mine);
		return 0;
	}
	if (r < 0)
		return abort_op(e, o, r, t, "%s", why);
	log_fields(&e->log, LOG_INFO, LOG_FIELDS(log_f_grant(o->msg->id)), "grant %s: %s", o->msg->id, pd->memmap_reason);
	log_fields(&e->log, LOG_INFO, LOG_FIELDS(log_f_grant(o->msg->id)), "grant %s: %s", o->msg->id, pd->zone_reason);

	targets = calloc(p->n + 1, sizeof(*targets));
	if (!targets)
		return abort_op(e, o, -ENOMEM, t, "out of memory");
	for (size_t i = 0; i < p->n; i++)
		targets[i] = (struct intentlog_target){
			.block = pd->blocks[i].id,
			.memmap = pd->blocks[i].memmap,
			.zone = pd->blocks[i].online == ONLINE_MOVABLE ? MEM_ZONE_MOVABLE : MEM_ZONE_NORMAL,
		};
	/* one durable record before the first kernel write; none per block */
	pthread_mutex_lock(&e->lock);
	op_add_decision(o, "%s", pd->memmap_reason);
	op_add_decision(o, "%s", pd->zone_reason);
	o->blocks_total = mine + p->n;
	r = op_intent_locked(e, o, ILOG_UP, targets, p->n, t);
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return abort_op(e, o, r, t, "cannot journal the intent: %s", strerror(-r));

	for (size_t i = 0; i < p->n; i++) {
		const struct policy_block *pb = &pd->blocks[i];
		struct grant_step gs = { .o = o, .pb = pb, .t = t, .ok = &ok };
		struct exec_step step = { .kind = ILOG_UP, .block = pb->id, .memmap = pb->memmap,
					  .online = pb->online, .owner = o->msg->id, .record_locked = record_grant_step,
					  .ctx = &gs };
		struct block_result res;

		if (stop_requested(e))
			return stop_op(e, o, t);
		if (cancel_requested(e, o))
			break;
		if (op_timeout_ms)
			step.deadline = mono_s() + (double)op_timeout_ms / 1000.0;
		exec_block_step(e, &step, &res);
		if (res.err == -HP_EWRITER_GONE)
			return stop_op(e, o, t);
	}
	finish_op(e, o, mine + ok, o->blocks_total);
	return 0;
}
