/* SPDX-License-Identifier: MIT */
/*
 * The executor thread: recovery once, then one queued grant or revocation at
 * a time, every kernel write through exec_block_step().  See executor.h.
 */
#include "executor.h"

#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <time.h>

#include "../hotplug/planner.h"
#include "../hotplug/privsep.h"
#include "../hotplug/policy.h"
#include "../lib/size.h"
#include "../lib/util.h"
#include "admission.h"
#include "engine_impl.h"
#include "recovery.h"

double exec_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static enum metric_outcome metric_of_state(enum msg_state s)
{
	switch (s) {
	case MSG_STATE_APPLIED: return OUT_APPLIED;
	case MSG_STATE_PARTIAL: return OUT_PARTIAL;
	case MSG_STATE_REJECTED: return OUT_REJECTED;
	case MSG_STATE_CANCELLED: return OUT_CANCELLED;
	default: return OUT_FAILED;
	}
}

static void interrupt_handler(int sig)
{
	(void)sig; /* only there to make a blocking sysfs write return EINTR */
}

/*
 * The deadline of a blocking write (W6: offlining has no time limit of its
 * own; a signal ends it with EINTR).  Writes through the privileged helper
 * get the deadline with the request, and the helper enforces it with its own
 * timer signal; on another backend a timer interrupts the executor's own
 * write, firing every 50 ms after the deadline until disarmed, so a signal
 * that lands just before the write starts is not lost.
 */
struct budget_timer {
	timer_t id;
	bool armed;
	bool helper;
};

static void budget_arm(struct engine *e, struct budget_timer *bt, double deadline)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGUSR1 };
	struct itimerspec its = { .it_interval = { .tv_sec = 0, .tv_nsec = 50000000L } };
	double left = deadline - exec_now();

	struct timespec end;

	if (left < 0.001)
		left = 0.001;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)left;
	end.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	if (hp_privsep_set_deadline(e->backend, &end) == 0) {
		bt->helper = true;
		return;
	}
	sev._sigev_un._tid = e->executor_tid;
	if (timer_create(CLOCK_MONOTONIC, &sev, &bt->id) < 0)
		return;
	its.it_value.tv_sec = (time_t)left;
	its.it_value.tv_nsec = (long)((left - (double)(time_t)left) * 1e9);
	timer_settime(bt->id, 0, &its, NULL);
	bt->armed = true;
}

static void budget_disarm(struct engine *e, struct budget_timer *bt)
{
	if (bt->helper)
		hp_privsep_set_deadline(e->backend, NULL);
	bt->helper = false;
	if (bt->armed)
		timer_delete(bt->id);
	bt->armed = false;
}

static void set_outcome_error(struct outcome *oc, const struct block_result *res, const char *extra)
{
	snprintf(oc->err_code, sizeof(oc->err_code), "%s", errno_name(res->err));
	snprintf(oc->err_msg, sizeof(oc->err_msg), "block %llu: %s failed: %s%s%s",
		 (unsigned long long)oc->block, block_step_name(res->failed_step), strerror(-res->err),
		 res->undo_err ? "; undo failed too: " : "", res->undo_err ? strerror(-res->undo_err) : "");
	if (extra) {
		size_t n = strlen(oc->err_msg);
		snprintf(oc->err_msg + n, sizeof(oc->err_msg) - n, "%s", extra);
	}
}

static void count_result(struct engine *e, const struct block_result *res, double secs, bool up)
{
	const char *step = res->failed_step != STEP_NONE ? block_step_name(res->failed_step)
							 : up ? "online" : "deconfigure";
	static const enum block_step steps[] = { STEP_MEMMAP, STEP_CONFIGURE, STEP_ONLINE, STEP_OFFLINE,
						 STEP_DECONFIGURE };

	metrics_count_block_op(e->metrics, step, res->err, secs);
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		if (res->steps_done & (1u << steps[i]))
			metrics_count_step(e->metrics, block_step_name(steps[i]), 0);
		else if (res->failed_step == steps[i])
			metrics_count_step(e->metrics, block_step_name(steps[i]), res->err);
	}
}

static bool stop_requested(struct engine *e)
{
	bool s;

	pthread_mutex_lock(&e->lock);
	s = e->stopping;
	pthread_mutex_unlock(&e->lock);
	return s;
}

/* engine_cancel() asked O to stop: checked between blocks. */
static bool cancel_requested(struct engine *e, const struct op *o)
{
	bool c;

	pthread_mutex_lock(&e->lock);
	c = o->cancel_requested;
	pthread_mutex_unlock(&e->lock);
	return c;
}

/* Ends O: applied (OK == TOTAL), partial or failed, with fresh memory
 * figures; cancelled before the end: partial (blocks done stay done) or
 * cancelled (none done). */
static void finish_op(struct engine *e, struct op *o, size_t ok, size_t total)
{
	_cleanup_mem_table_ struct mem_table *now = NULL;

	hp_discover(e->backend, &now);
	pthread_mutex_lock(&e->lock);
	if (o->cancel_requested && total > 0 && ok < total) {
		o->state = ok > 0 ? MSG_STATE_PARTIAL : MSG_STATE_CANCELLED;
		snprintf(o->err_code, sizeof(o->err_code), "ECANCELED");
		snprintf(o->err_msg, sizeof(o->err_msg), "cancelled by %s after %zu of %zu blocks%s", o->cancel_by,
			 ok, total, ok ? " (the blocks done stay done)" : "");
	} else if (total == 0 || ok >= total)
		o->state = MSG_STATE_APPLIED;
	else if (ok > 0)
		o->state = MSG_STATE_PARTIAL;
	else
		o->state = MSG_STATE_FAILED;
	if (o->state != MSG_STATE_APPLIED && !o->err_code[0]) {
		for (size_t i = 0; i < o->n_outcomes; i++)
			if (o->outcomes[i].err_code[0]) {
				snprintf(o->err_code, sizeof(o->err_code), "%s", o->outcomes[i].err_code);
				snprintf(o->err_msg, sizeof(o->err_msg), "%s", o->outcomes[i].err_msg);
				break;
			}
	}
	metrics_count_request(e->metrics, msg_type_name(o->msg->type), metric_of_state(o->state));
	{
		char a[16], q[16];
		size_format(o->applied_bytes, a, sizeof(a));
		size_format(o->requested_bytes, q, sizeof(q));
		log_notice(&e->log, "%s %s %s: %s of %s%s%s", msg_type_name(o->msg->type), o->msg->id,
			   msg_state_name(o->state), a, q, o->err_code[0] ? "; " : "", o->err_code[0] ? o->err_msg : "");
	}
	op_publish_locked(e, o, now);
	pthread_mutex_unlock(&e->lock);
}

/*
 * Ends O because it cannot go on (ERR, a reason): "rejected" when nothing was
 * done yet, else partial or failed with what was done.
 */
static int abort_op(struct engine *e, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int abort_op(struct engine *e, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&e->lock);
	snprintf(o->err_code, sizeof(o->err_code), "%s", errno_name(err));
	va_start(ap, fmt);
	vsnprintf(o->err_msg, sizeof(o->err_msg), fmt, ap);
	va_end(ap);
	o->state = o->blocks_done > 0 ? MSG_STATE_PARTIAL
		   : o->state == MSG_STATE_ACCEPTED ? MSG_STATE_REJECTED : MSG_STATE_FAILED;
	log_notice(&e->log, "%s %s %s: %s", msg_type_name(o->msg->type), o->msg->id, msg_state_name(o->state),
		   o->err_msg);
	metrics_count_request(e->metrics, msg_type_name(o->msg->type), metric_of_state(o->state));
	op_publish_locked(e, o, t);
	pthread_mutex_unlock(&e->lock);
	return err;
}


int exec_block_step(struct engine *e, const struct exec_step *s, struct block_result *res)
{
	bool up = s->kind == ILOG_STEP_BRING_UP;
	struct budget_timer bt = { 0 };
	double t0;

	memset(res, 0, sizeof(*res));
	/* nothing durable here: the operation's intent names the block, the
	 * kernel records what became of it */
	pthread_mutex_lock(&e->lock);
	e->step_active = true;
	e->step_block = s->block;
	pthread_mutex_unlock(&e->lock);
	t0 = exec_now();
	if (s->deadline > 0)
		budget_arm(e, &bt, s->deadline);
	if (up)
		block_bring_up(e->backend, s->block, s->memmap, s->online, res);
	else
		block_take_down(e->backend, s->block, res);
	budget_disarm(e, &bt);
	count_result(e, res, exec_now() - t0, up);

	pthread_mutex_lock(&e->lock);
	if (s->record_locked)
		s->record_locked(e, s->ctx, res);
	e->step_active = false;
	pthread_mutex_unlock(&e->lock);
	return res->err == 0;
}

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
			log_err(&e->log, "grant %s: block %llu is online but out of memory to record it; "
				"the next start adopts it from the kernel", o->msg->id, (unsigned long long)pb->id);
		(*gs->ok)++;
		o->applied_bytes += gs->t->block_size;
		if (res->auto_onlined) {
			bool wanted_movable = pb->online == ONLINE_MOVABLE;
			bool got_movable = mem_block_zone(&res->after) == MEM_ZONE_MOVABLE;
			op_add_decision(o, "block %llu: configuring it onlined it at once (auto_online_blocks); "
					"policy wanted %s, the kernel chose %s%s",
					(unsigned long long)pb->id, wanted_movable ? "Movable" : "Normal", res->after.zones,
					wanted_movable == got_movable ? "" : " (set backend.own_onlining to let the agent choose)");
			log_warn(&e->log, "grant %s: block %llu was onlined by the kernel at configure time into %s; "
				 "the policy wanted %s", o->msg->id, (unsigned long long)pb->id, res->after.zones,
				 wanted_movable ? "Movable" : "Normal");
		}
	} else if (oc) {
		set_outcome_error(oc, res, res->err == -EINTR ? " (policy.block_op_timeout ran out)" : NULL);
		log_err(&e->log, "grant %s: %s", o->msg->id, oc->err_msg);
	}
	op_publish_locked(e, o, gs->t);
}

static int run_grant(struct engine *e, struct op *o)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
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
	int r;

	r = hp_discover(e->backend, &t);
	if (r < 0)
		return abort_op(e, o, r, NULL, "cannot read the memory blocks: %s", strerror(-r));

	/* Resuming after a restart: blocks this grant already owns are done. */
	pthread_mutex_lock(&e->lock);
	r = owned_list_locked(e, &owned, &n_owned);
	if (r == 0) {
		for (size_t i = 0; i < n_owned; i++) {
			struct mem_block *b;
			struct outcome *oc;
			if (!streq(owned[i].grant_id, o->msg->id))
				continue;
			b = mem_table_find(t, owned[i].id);
			oc = op_outcome(o, owned[i].id, false);
			if (oc && b)
				outcome_from_block(oc, b);
			mine++;
		}
		o->applied_bytes = mine * t->block_size;
		o->blocks_done = mine;
	}
	ps = e->set.policy;
	op_timeout_ms = e->set.block_op_timeout_ms;
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return abort_op(e, o, r, t, "cannot read the journal's block list");

	fill_grant_request(o->msg, &req);
	if (req.by == GRANT_BY_SIZE) {
		if (o->applied_bytes >= req.size) {
			o->blocks_total = mine;
			finish_op(e, o, mine, mine);
			return 0;
		}
		req.size -= o->applied_bytes;
	} else {
		/* by blocks or ranges: what is left are the listed blocks it does not own yet */
		size_t k = 0;
		r = explicit_ids(o->msg, t->block_size, &ids, &n_ids);
		if (r < 0)
			return abort_op(e, o, r, t, "cannot expand the blocks of %s", o->msg->id);
		for (size_t i = 0; i < n_ids; i++) {
			bool done = false;
			for (size_t j = 0; j < n_owned; j++)
				done |= owned[j].id == ids[i] && streq(owned[j].grant_id, o->msg->id);
			if (!done)
				ids[k++] = ids[i];
		}
		if (k == 0) {
			o->blocks_total = mine;
			finish_op(e, o, mine, mine);
			return 0;
		}
		req.by = GRANT_BY_BLOCKS;
		req.ids = ids;
		req.n_ids = k;
	}
	r = plan_grant(t, &req, owned, n_owned, &p);
	if (r < 0)
		return abort_op(e, o, r, t, "%s", p ? p->reason : strerror(-r));

	r = policy_read_meminfo(e->backend->root, NULL, &mem_available);
	if (r < 0) {
		log_warn(&e->log, "cannot read %s/proc/meminfo (%s): MemAvailable unknown", e->backend->root,
			 strerror(-r));
		mem_available = POLICY_MEM_AVAILABLE_UNKNOWN;
	}
	preq.memmap = o->msg->memmap == MSG_MEMMAP_AUTO ? -1 : o->msg->memmap == MSG_MEMMAP_ON;
	preq.zone = o->msg->zone;
	preq.contiguous = o->msg->contiguous;
	r = policy_decide(&ps, &preq, t, mem_available, p->blocks, p->n, &pd);
	if (r < 0)
		return abort_op(e, o, r, t, "the policy cannot decide: %s", strerror(-r));
	log_info(&e->log, "grant %s: %s", o->msg->id, pd->memmap_reason);
	log_info(&e->log, "grant %s: %s", o->msg->id, pd->zone_reason);

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
		struct exec_step step = { .kind = ILOG_STEP_BRING_UP, .block = pb->id, .memmap = pb->memmap,
					  .online = pb->online, .owner = o->msg->id, .record_locked = record_grant_step,
					  .ctx = &gs };
		struct block_result res;

		if (stop_requested(e)) {
			log_notice(&e->log, "grant %s: stopping after %zu of %zu blocks; it resumes at the next start",
				   o->msg->id, o->blocks_done, o->blocks_total);
			pthread_mutex_lock(&e->lock);
			op_close_intent_locked(e, o, t);
			pthread_mutex_unlock(&e->lock);
			return -ECANCELED;
		}
		if (cancel_requested(e, o))
			break;
		if (op_timeout_ms)
			step.deadline = exec_now() + (double)op_timeout_ms / 1000.0;
		exec_block_step(e, &step, &res);
	}
	finish_op(e, o, mine + ok, o->blocks_total);
	return 0;
}

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
			log_err(&e->log, "revocation %s: block %llu went back but out of memory to record it; "
				"the next start credits it from the kernel", o->msg->id, (unsigned long long)rs->block);
		o->applied_bytes += rs->t->block_size;
		o->blocks_done++;
		op_busy_drop(o, rs->block);
	} else {
		bool retried = res->err == -EBUSY || res->err == -EINTR;
		struct busy_block *bb = retried ? op_busy(o, rs->block, true) : NULL;
		char extra[96];
		double now = exec_now();

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
			log_warn(&e->log, "revocation %s: %s%s", o->msg->id, oc ? oc->err_msg : "block failed", more);
			if (bb) {
				bb->logged_at = now;
				bb->unlogged = 0;
			}
		}
	}
	op_publish_locked(e, o, rs->t);
}

static int run_revoke(struct engine *e, struct op *o)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ struct owned_block *owned = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_plan_ struct plan *p = NULL;
	_cleanup_free_ uint64_t *busy = NULL;
	_cleanup_free_ struct intentlog_target *targets = NULL;
	struct revoke_request req;
	size_t n_owned = 0, n_busy = 0, k = 0;
	bool resumed = o->applied_bytes > 0;
	uint64_t budget_ms, want;
	double deadline;
	int r;

	r = hp_discover(e->backend, &t);
	if (r < 0)
		return abort_op(e, o, r, NULL, "cannot read the memory blocks: %s", strerror(-r));
	pthread_mutex_lock(&e->lock);
	r = owned_list_locked(e, &owned, &n_owned);
	budget_ms = e->set.revoke_budget_ms;
	pthread_mutex_unlock(&e->lock);
	if (r < 0)
		return abort_op(e, o, r, t, "cannot read the journal's block list");

	fill_revoke_request(o->msg, &req);
	if (req.by == REVOKE_BY_SIZE) {
		if (o->applied_bytes >= req.size) {
			finish_op(e, o, o->blocks_done, o->blocks_done);
			return 0;
		}
		req.size -= o->applied_bytes;
	} else if (req.by == REVOKE_BY_BLOCKS) {
		ids = calloc(o->msg->n_blocks + 1, sizeof(*ids));
		if (!ids)
			return abort_op(e, o, -ENOMEM, t, "out of memory");
		for (size_t i = 0; i < o->msg->n_blocks; i++)
			if (!revoke_done(o, o->msg->blocks[i]))
				ids[k++] = o->msg->blocks[i];
		if (k == 0) {
			finish_op(e, o, o->blocks_done, o->blocks_done);
			return 0;
		}
		req.ids = ids;
		req.n_ids = k;
	}
	r = plan_revoke(t, &req, owned, n_owned, &p);
	if (r == -ENOENT && req.by == REVOKE_BY_GRANT && resumed) {
		/* the grant's last blocks went back before the restart */
		finish_op(e, o, o->blocks_done, o->blocks_done);
		return 0;
	}
	if (r < 0)
		return abort_op(e, o, r, t, "%s", p ? p->reason : strerror(-r));

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
	deadline = exec_now() + (double)budget_ms / 1000.0;
	pthread_mutex_lock(&e->lock);
	o->budget_deadline = deadline;
	o->budget_ms = budget_ms;
	pthread_mutex_unlock(&e->lock);

	/* First pass in the planner's order; blocks that are busy are retried
	 * while the budget lasts, with pauses growing from 250 ms to 1 s, since
	 * pages in use may move away (W6). */
	for (unsigned pass = 0; o->applied_bytes < want; pass++) {
		const uint64_t *cand = pass == 0 ? p->blocks : busy;
		size_t n = pass == 0 ? p->n : n_busy, next_busy = 0;

		if (pass > 0) {
			long ms = pass >= 3 ? 1000 : 250L << (pass - 1);
			struct timespec pause = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
			if (n == 0 || exec_now() + (double)ms / 1000.0 >= deadline || stop_requested(e) ||
			    cancel_requested(e, o))
				break;
			nanosleep(&pause, NULL);
		}
		for (size_t i = 0; i < n && o->applied_bytes < want; i++) {
			struct revoke_step rs = { .o = o, .block = cand[i], .t = t, .busy = busy, .n_busy = &next_busy };
			struct exec_step step = { .kind = ILOG_STEP_TAKE_DOWN, .block = cand[i], .deadline = deadline,
						  .owner = o->msg->id, .record_locked = record_revoke_step, .ctx = &rs };
			struct block_result res;

			if (stop_requested(e)) {
				log_notice(&e->log, "revocation %s: stopping; it resumes at the next start", o->msg->id);
				pthread_mutex_lock(&e->lock);
				op_close_intent_locked(e, o, t);
				pthread_mutex_unlock(&e->lock);
				return -ECANCELED;
			}
			if (cancel_requested(e, o))
				goto done;
			if (exec_now() >= deadline) {
				busy[next_busy++] = cand[i];
				continue;
			}
			exec_block_step(e, &step, &res);
		}
		n_busy = next_busy;
	}
done:
	/* what the last log lines about each busy block did not say yet */
	pthread_mutex_lock(&e->lock);
	for (size_t i = 0; i < o->n_busy; i++)
		if (o->busy[i].unlogged > 0)
			log_warn(&e->log, "revocation %s: block %llu: still %s after %u attempts (%u since the last line)",
				 o->msg->id, (unsigned long long)o->busy[i].block, o->busy[i].err_code,
				 o->busy[i].attempts, o->busy[i].unlogged);
	pthread_mutex_unlock(&e->lock);
	finish_op(e, o, o->blocks_done, o->blocks_total);
	return 0;
}

static void *executor_main(void *arg)
{
	struct engine *e = arg;
	sigset_t unblock;
	int r;

	e->executor_tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&unblock);
	sigaddset(&unblock, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);

	/* recovery writes to the kernel too: here, before the first request */
	r = recovery_run(e);
	pthread_mutex_lock(&e->lock);
	e->recovered = true;
	e->recovery_err = r;
	pthread_cond_broadcast(&e->cond);
	for (;;) {
		struct op *o;

		while ((!e->queue_head || e->recovery_err < 0) && !e->stopping)
			pthread_cond_wait(&e->cond, &e->lock);
		if (e->stopping)
			break;
		o = e->queue_head;
		e->queue_head = o->next;
		if (!e->queue_head)
			e->queue_tail = NULL;
		o->next = NULL;
		e->running = o;
		pthread_mutex_unlock(&e->lock);

		if (o->msg->type == MSG_GRANT)
			run_grant(e, o);
		else
			run_revoke(e, o);

		pthread_mutex_lock(&e->lock);
		e->running = NULL;
		op_free(o);
		engine_notify(e);
		if (!e->queue_head) {
			/* an operation over thousands of blocks frees tens of MB of
			 * reports and tables in many arenas' small chunks; give them
			 * back to the kernel now that the agent goes idle */
			pthread_mutex_unlock(&e->lock);
			malloc_trim(0);
			pthread_mutex_lock(&e->lock);
		}
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int exec_start(struct engine *e)
{
	struct sigaction sa = { .sa_handler = interrupt_handler };
	sigset_t block, old;
	int r;

	/* no SA_RESTART: the budget timer must end a blocking write with EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	/* the executor gets SIGUSR1 only through its own mask */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	r = -pthread_create(&e->executor, NULL, executor_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0)
		return r;
	e->executor_started = true;
	pthread_mutex_lock(&e->lock);
	while (!e->recovered)
		pthread_cond_wait(&e->cond, &e->lock);
	r = e->recovery_err;
	pthread_mutex_unlock(&e->lock);
	return r;
}
