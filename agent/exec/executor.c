/* SPDX-License-Identifier: MIT */
/*
 * The executor thread: recovery once, then one queued grant or revocation at
 * a time, every kernel write through exec_block_step().  See executor.h.
 */
#include "agent/exec/executor.h"

#include <malloc.h>
#include <stdarg.h>
#include <time.h>

#include "hotplug/planner.h"
#include "hotplug/policy.h"
#include "lib/timeutil.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"
#include "agent/exec/executor_impl.h"
#include "agent/exec/recovery.h"

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

/*
 * The deadline of a step's offline (W6: offlining has no time limit of its
 * own, and Linux ends it only on a fatal signal).  Through the privileged
 * helper the request carries it; on another backend block_offline() writes
 * from a child process killed at the deadline (hp_write_with_deadline()).
 */
static void budget_arm(struct engine *e, double deadline)
{
	double left = deadline - mono_s();
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
	hp_set_write_deadline(e->backend, &end);
}

void set_outcome_error(struct outcome *oc, const struct block_result *res, const char *extra)
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

void count_result(struct engine *e, const struct block_result *res, double secs, bool up)
{
	static const enum block_step steps[] = { STEP_MEMMAP, STEP_CONFIGURE, STEP_ONLINE, STEP_OFFLINE,
						 STEP_DECONFIGURE };

	metrics_count_block_op(e->metrics, up ? METRIC_BLOCK_ADD : METRIC_BLOCK_REMOVE, res->err, secs);
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		if (res->steps_done & (1u << steps[i]))
			metrics_count_step(e->metrics, block_step_name(steps[i]), 0);
		else if (res->failed_step == steps[i])
			metrics_count_step(e->metrics, block_step_name(steps[i]), res->err);
	}
}

int plan_table(struct engine *e, struct mem_table **out)
{
	machine_sync(e);
	if (machine_snapshot(e, out) == 0)
		return 0;
	return hp_discover(e->backend, out);
}

const struct mem_table *plan_table_hold(struct engine *e, struct mem_table **copy)
{
	const struct mem_table *t = machine_table_hold(e);

	if (t || hp_discover(e->backend, copy) < 0)
		return t;
	return *copy;
}

void plan_table_release(struct engine *e, const struct mem_table *copy)
{
	if (!copy)
		machine_table_release(e);
}

bool stop_requested(struct engine *e)
{
	bool s;

	pthread_mutex_lock(&e->lock);
	s = e->stopping;
	pthread_mutex_unlock(&e->lock);
	return s;
}

/* engine_cancel() asked O to stop: checked between blocks. */
bool cancel_requested(struct engine *e, const struct op *o)
{
	bool c;

	pthread_mutex_lock(&e->lock);
	c = o->cancel_requested;
	pthread_mutex_unlock(&e->lock);
	return c;
}

int stop_op(struct engine *e, struct op *o, const struct mem_table *t)
{
	if (engine_journal_error(e))
		return -ECANCELED; /* said by journal_failed_locked() */
	if (engine_writer_is_gone(e)) {
		/* as after a crash: the kernel, not this process, knows what the
		 * last write did; recovery reads it for every block the intent names */
		log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(o->msg->id)),
			   "%s %s: stopped after %zu of %zu blocks, without the privileged helper; its intent stays "
			   "open and it resumes at the next start from the kernel's state",
			   msg_type_name(o->msg->type), o->msg->id, o->blocks_done, o->blocks_total);
		return -HP_EWRITER_GONE;
	}
	log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(o->msg->id)),
		   "%s %s: stopping after %zu of %zu blocks; it resumes at the next start",
		   msg_type_name(o->msg->type), o->msg->id, o->blocks_done, o->blocks_total);
	pthread_mutex_lock(&e->lock);
	op_close_intent_locked(e, o, t);
	pthread_mutex_unlock(&e->lock);
	return -ECANCELED;
}

uint64_t applied_bytes_of(struct engine *e, const struct op *o)
{
	uint64_t a;

	pthread_mutex_lock(&e->lock);
	a = o->applied_bytes;
	pthread_mutex_unlock(&e->lock);
	return a;
}

/* Ends O: applied (OK == TOTAL), partial or failed, with fresh memory
 * figures; cancelled before the end: partial (blocks done stay done) or
 * cancelled (none done). */
void finish_op(struct engine *e, struct op *o, size_t ok, size_t total)
{
	if (engine_journal_error(e))
		return; /* O stopped where the journal is (journal_failed_locked) */
	if (o->intent_open && engine_writer_is_gone(e)) {
		stop_op(e, o, NULL); /* a step failed for the helper's end, not the block's */
		return;
	}
	/* the report's memory figures are the live table's counts: the
	 * executor's last writes applied, no discovery */
	machine_sync(e);
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
	{
		char a[16], q[16];
		size_format(o->applied_bytes, a, sizeof(a));
		size_format(o->requested_bytes, q, sizeof(q));
		/* said once the journal holds it */
		if (op_publish_locked(e, o, NULL) == 0) {
			metrics_count_request(e->metrics, msg_type_name(o->msg->type), metric_of_state(o->state));
			log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(o->msg->id)), "%s %s %s: %s of %s%s%s",
				   msg_type_name(o->msg->type), o->msg->id, msg_state_name(o->state), a, q,
				   o->err_code[0] ? "; " : "", o->err_code[0] ? o->err_msg : "");
		}
	}
	pthread_mutex_unlock(&e->lock);
}

/*
 * Ends O because it cannot go on (ERR, a reason): "rejected" when nothing was
 * done yet, else partial or failed with what was done.
 */
int abort_op(struct engine *e, struct op *o, int err, const struct mem_table *t, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&e->lock);
	if (e->journal_err) {
		/* O stopped where the journal is (journal_failed_locked): no
		 * final state it could not record */
		pthread_mutex_unlock(&e->lock);
		return err;
	}
	snprintf(o->err_code, sizeof(o->err_code), "%s", errno_name(err));
	va_start(ap, fmt);
	vsnprintf(o->err_msg, sizeof(o->err_msg), fmt, ap);
	va_end(ap);
	o->state = o->blocks_done > 0 ? MSG_STATE_PARTIAL
		   : o->state == MSG_STATE_ACCEPTED ? MSG_STATE_REJECTED : MSG_STATE_FAILED;
	if (op_publish_locked(e, o, t) == 0) {
		log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(o->msg->id), log_f_errno(err)), "%s %s %s: %s",
			   msg_type_name(o->msg->type), o->msg->id, msg_state_name(o->state), o->err_msg);
		metrics_count_request(e->metrics, msg_type_name(o->msg->type), metric_of_state(o->state));
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}


int exec_block_step(struct engine *e, const struct exec_step *s, struct block_result *res)
{
	bool up = s->kind == ILOG_UP;
	struct block_reader rd = { .read = machine_block_state, .ctx = e };
	double t0;

	memset(res, 0, sizeof(*res));
	/* nothing durable here: the operation's intent names the block, the
	 * kernel records what became of it */
	pthread_mutex_lock(&e->lock);
	e->step_active = true;
	e->step_block = s->block;
	pthread_mutex_unlock(&e->lock);
	t0 = mono_s();
	if (s->deadline > 0)
		budget_arm(e, s->deadline);
	/* the kernel's answers from the live table where it has them (the
	 * watcher reads each block after each change anyway) */
	if (up)
		block_bring_up_r(e->backend, &rd, s->block, s->memmap, s->online, res);
	else
		block_take_down_r(e->backend, &rd, s->block, res);
	if (s->deadline > 0)
		hp_set_write_deadline(e->backend, NULL);
	if (res->err == -HP_EWRITER_GONE) {
		/* not an outcome of the block: nothing counted or recorded; the
		 * engine stops and the caller ends where the kernel is */
		log_fields(&e->log, LOG_NOTICE, LOG_FIELDS(log_f_grant(s->owner), log_f_block(s->block)),
			   "%s: block %llu: the privileged helper went away during its %s; what became of it is "
			   "read from the kernel at the next start", s->owner ? s->owner : "recovery",
			   (unsigned long long)s->block, block_step_name(res->failed_step));
		pthread_mutex_lock(&e->lock);
		e->step_active = false;
		pthread_mutex_unlock(&e->lock);
		engine_writer_gone(e);
		return 0;
	}
	count_result(e, res, mono_s() - t0, up);

	pthread_mutex_lock(&e->lock);
	if (s->record_locked)
		s->record_locked(e, s->ctx, res);
	e->step_active = false;
	pthread_mutex_unlock(&e->lock);
	return res->err == 0;
}

/* How long the executor waits, once the queue is empty, before it gives
 * the heap's free pages back: the report of the operation that ended is
 * rendered as JSON meanwhile (the API's waiters, hooks, the control
 * plane), and those thousands of small chunks are freed after the
 * executor is done with it. */
#define TRIM_QUIET_MS 50
#define TRIM_LATE_MS 1000

/* An operation over thousands of blocks leaves MBs of freed small chunks
 * between the few that live on; malloc_trim() returns their pages.  Only
 * when no operation follows, once the renderings of its report are freed;
 * and once more TRIM_LATE_MS later, for what other threads freed after
 * that (a waiter's last event, a watcher's late notifications): else a
 * heap of MBs stays until the next operation.  Called and returns with
 * e->lock held. */
static void trim_heap_when_quiet(struct engine *e)
{
	static const unsigned after_ms[] = { TRIM_QUIET_MS, TRIM_LATE_MS };

	for (size_t i = 0; i < ARRAY_SIZE(after_ms); i++) {
		struct timespec until;

		deadline_after_ms(&until, after_ms[i]);
		while (!e->queue_head && !e->stopping)
			if (pthread_cond_timedwait(&e->cond, &e->lock, &until) == ETIMEDOUT)
				break;
		if (e->queue_head || e->stopping)
			return;
		pthread_mutex_unlock(&e->lock);
		malloc_trim(0);
		pthread_mutex_lock(&e->lock);
	}
}

static void *executor_main(void *arg)
{
	struct engine *e = arg;
	int r;

	/* recovery writes to the kernel too: here, before the first request */
	r = recovery_run(e);
	hp_offline_writer_end(e->backend);
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

		if (o->msg->type == MSG_GRANT) {
			exec_run_grant(e, o);
		} else {
			exec_run_revoke(e, o);
			/* the process that wrote its offlines, when not the helper */
			hp_offline_writer_end(e->backend);
		}

		pthread_mutex_lock(&e->lock);
		e->running = NULL;
		op_free(o);
		engine_notify(e);
		trim_heap_when_quiet(e);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int exec_start(struct engine *e)
{
	int r;

	r = -pthread_create(&e->executor, NULL, executor_main, e);
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
