/* SPDX-License-Identifier: MIT */
/*
 * A revocation on the executor thread: candidates (owned blocks, movable
 * first, newest first), the intent, blocks taken down one by one through
 * exec_block_step() within the budget, busy blocks retried with growing
 * pauses while it lasts, the result.  See executor_impl.h.
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

/* Blocks a revocation already gave back (restored from its status at a
 * restart): taken down without error, so offline (and deconfigured where
 * there is a firmware interface). */
static bool revoke_done(const struct op *o, uint64_t id)
{
	for (size_t i = 0; i < o->n_outcomes; i++)
		if (o->outcomes[i].block == id && !o->outcomes[i].err_code[0] &&
		    streq(o->outcomes[i].state, "offline"))
			return true;
	return false;
}
/* A block of a revocation went down (or did not): its outcome, in memory. */
struct revoke_step {
	struct op *o;
	uint64_t block;
	const struct mem_table *t;
	uint64_t *busy;
	size_t *n_busy;
};

static void record_revoke_step(struct engine *e, void *ctx, const struct block_result *res)
{
	struct revoke_step *rs = ctx;
	struct op *o = rs->o;
	struct outcome *oc = op_outcome(o, rs->block, true);

	if (oc) {
		memset(oc->err_code, 0, sizeof(oc->err_code));
		outcome_from_block(oc, &res->after);
	}
	if (res->err == 0) {
		if (op_done_add(o, rs->block, MEM_ZONE_AUTO, false) < 0)
			log_fields(&e->log, LOG_ERR, LOG_FIELDS(log_f_grant(o->msg->id), log_f_block(rs->block)),
				   "revocation %s: block %llu went back but out of memory to record it; "
				"the next start credits it from the kernel", o->msg->id, (unsigned long long)rs->block);
		o->applied_bytes += rs->t->block_size;
		o->blocks_done++;
		op_busy_drop(o, rs->block);
	} else {
		bool retried = res->err == -EBUSY || res->err == -EINTR;
		struct busy_block *bb = retried ? op_busy(o, rs->block, true) : NULL;
		char extra[96];
		double now = mono_s();

		if (bb) {
			bb->attempts++;
			bb->unlogged++;
			snprintf(bb->err_code, sizeof(bb->err_code), "%s", errno_name(res->err));
		} else {
			op_busy_drop(o, rs->block);
		}
		snprintf(extra, sizeof(extra), " (%s, %u attempt%s)",
			 res->err == -EINTR ? "the revocation's time budget ran out" : "skipped, still busy",
			 bb ? bb->attempts : 1, bb && bb->attempts > 1 ? "s" : "");
		if (oc)
			set_outcome_error(oc, res, retried ? extra : NULL);
		if (retried)
			rs->busy[(*rs->n_busy)++] = rs->block;
		/* a busy block is retried every second until the budget ends: one
		 * line per block per minute, with how many attempts it stands for */
		if (!bb || bb->attempts == 1 || now - bb->logged_at >= 60.0) {
			double left = o->budget_deadline > now ? o->budget_deadline - now : 0;
			char more[128] = "";

			if (bb && bb->attempts == 1)
				snprintf(more, sizeof(more), "; retrying while the budget lasts (%.0f s left)", left);
			else if (bb)
				snprintf(more, sizeof(more), "; %u failures since the last line, %.0f s of the budget left",
					 bb->unlogged, left);
			log_fields(&e->log, LOG_WARNING,
				   LOG_FIELDS(log_f_grant(o->msg->id), log_f_block(rs->block),
					      log_f_step(block_step_name(res->failed_step)), log_f_errno(res->err)),
				   "revocation %s: %s%s", o->msg->id, oc ? oc->err_msg : "block failed", more);
			if (bb) {
				bb->logged_at = now;
				bb->unlogged = 0;
			}
		}
	}
	op_publish_locked(e, o, rs->t);
}

int exec_run_revoke(struct engine *e, struct op *o)
{
	_cleanup_mem_table_ struct mem_table *copy = NULL;
	struct mem_table head = { 0 }, *t = &head; /* the table's figures, without its rows */
	const struct mem_table *pt;
	_cleanup_free_ struct owned_block *owned = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_free_ uint64_t *busy = NULL;
	_cleanup_free_ struct intentlog_target *targets = NULL;
	struct revoke_request req;
	size_t n_owned = 0, n_busy = 0, k = 0;
	bool resumed = applied_bytes_of(e, o) > 0, early = false;
	uint64_t budget_ms, want;
	double deadline;
	char why[256] = "";
	int r;

	machine_sync(e);
	/* planned on the live table in place (see exec_run_grant()) */
	pthread_mutex_lock(&e->lock);
	pt = plan_table_hold(e, &copy);
	if (!pt) {
		pthread_mutex_unlock(&e->lock);
		return abort_op(e, o, -ENODEV, NULL, "cannot read the memory blocks: %s", strerror(ENODEV));
	}
	r = owned_list_locked(e, &owned, &n_owned);
	budget_ms = e->set.revoke_budget_ms;
	if (r < 0) {
		snprintf(why, sizeof(why), "cannot read the journal's block list");
		goto planned;
	}

	fill_revoke_request(o->msg, &req);
	if (req.by == REVOKE_BY_SIZE) {
		uint64_t applied = o->applied_bytes;

		if (applied >= req.size) {
			early = true;
			goto planned;
		}
		req.size -= applied;
	} else if (req.by == REVOKE_BY_BLOCKS) {
		ids = calloc(o->msg->n_blocks + 1, sizeof(*ids));
		if (!ids) {
			r = -ENOMEM;
			snprintf(why, sizeof(why), "out of memory");
			goto planned;
		}
		for (size_t i = 0; i < o->msg->n_blocks; i++)
			if (!revoke_done(o, o->msg->blocks[i]))
				ids[k++] = o->msg->blocks[i];
		if (k == 0) {
			early = true;
			goto planned;
		}
		req.ids = ids;
		req.n_ids = k;
	}
	r = plan_revoke(pt, &req, owned, n_owned, &p);
	if (r == -ENOENT && req.by == REVOKE_BY_GRANT && resumed) {
		/* the grant's last blocks went back before the restart */
		early = true;
		r = 0;
	} else if (r < 0) {
		snprintf(why, sizeof(why), "%s", p ? p->reason : strerror(-r));
	}
planned:
	head = *pt;
	head.blocks = NULL;
	head.n = 0;
	plan_table_release(e, copy);
	pthread_mutex_unlock(&e->lock);
	if (early) {
		finish_op(e, o, o->blocks_done, o->blocks_done);
		return 0;
	}
	if (r < 0)
		return abort_op(e, o, r, t, "%s", why);

	busy = calloc(p->n + 1, sizeof(*busy));
	targets = calloc(p->n + 1, sizeof(*targets));
	if (!busy || !targets)
		return abort_op(e, o, -ENOMEM, t, "out of memory");
	for (size_t i = 0; i < p->n; i++)
		targets[i] = (struct intentlog_target){ .block = p->blocks[i], .memmap = -1, .zone = MEM_ZONE_AUTO };
	/* one durable record before the first kernel write: every candidate, in
	 * order (by size the revocation stops when enough went back) */
	pthread_mutex_lock(&e->lock);
	if (!resumed)
		o->requested_bytes = p->want_bytes;
	o->blocks_total = (size_t)(o->requested_bytes / t->block_size);
	op_add_decision(o, "revoke: %s", p->reason);
	r = op_intent_locked(e, o, ILOG_DOWN, targets, p->n, t);
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return abort_op(e, o, r, t, "cannot journal the intent: %s", strerror(-r));
	want = o->requested_bytes;
	deadline = mono_s() + (double)budget_ms / 1000.0;
	pthread_mutex_lock(&e->lock);
	o->budget_deadline = deadline;
	o->budget_ms = budget_ms;
	pthread_mutex_unlock(&e->lock);

	/* First pass in the planner's order; blocks that are busy are retried
	 * while the budget lasts, with pauses growing from 250 ms to 1 s, since
	 * pages in use may move away (W6). */
	for (unsigned pass = 0; applied_bytes_of(e, o) < want; pass++) {
		const uint64_t *cand = pass == 0 ? p->blocks : busy;
		size_t n = pass == 0 ? p->n : n_busy, next_busy = 0;

		if (pass > 0) {
			long ms = pass >= 3 ? 1000 : 250L << (pass - 1);
			struct timespec pause = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
			if (engine_writer_is_gone(e))
				return stop_op(e, o, t);
			if (n == 0 || mono_s() + (double)ms / 1000.0 >= deadline || stop_requested(e) ||
			    cancel_requested(e, o))
				break;
			nanosleep(&pause, NULL);
		}
		for (size_t i = 0; i < n && applied_bytes_of(e, o) < want; i++) {
			struct revoke_step rs = { .o = o, .block = cand[i], .t = t, .busy = busy, .n_busy = &next_busy };
			struct exec_step step = { .kind = ILOG_DOWN, .block = cand[i], .deadline = deadline,
						  .owner = o->msg->id, .record_locked = record_revoke_step, .ctx = &rs };
			struct block_result res;

			if (stop_requested(e))
				return stop_op(e, o, t);
			if (cancel_requested(e, o))
				goto done;
			if (mono_s() >= deadline) {
				busy[next_busy++] = cand[i];
				continue;
			}
			exec_block_step(e, &step, &res);
			if (res.err == -HP_EWRITER_GONE)
				return stop_op(e, o, t);
		}
		n_busy = next_busy;
	}
done:
	/* what the last log lines about each busy block did not say yet */
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < o->n_busy; i++)
		if (o->busy[i].unlogged > 0)
			log_fields(&e->log, LOG_WARNING, LOG_FIELDS(log_f_grant(o->msg->id), log_f_block(o->busy[i].block)),
				   "revocation %s: block %llu: still %s after %u attempts (%u since the last line)",
				 o->msg->id, (unsigned long long)o->busy[i].block, o->busy[i].err_code,
				 o->busy[i].attempts, o->busy[i].unlogged);
	pthread_mutex_unlock(&e->lock);
	finish_op(e, o, o->blocks_done, o->blocks_total);
	return 0;
}
