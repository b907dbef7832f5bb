/* SPDX-License-Identifier: MIT */
/*
 * engine_cancel() (agent/engine/engine.h): a queued request ends `cancelled` at
 * once (durably, before the answer); a running one is asked to stop after
 * the block in flight and ends `partial` or `cancelled` when it does.
 */
#include <time.h>

#include "hotplug/policy.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/admission.h"
#include "agent/engine/engine_impl.h"


int engine_cancel(struct engine *e, const char *id, const char *who, struct engine_verdict *v)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct intentlog_grant g = { 0 };
	struct op *o = NULL, **link;
	int r;

	if (!v || !id || !who)
		return -EINVAL;
	memset(v, 0, sizeof(*v));
	machine_sync(e);
	pthread_mutex_lock(&e->lock);
	if (e->stopping) {
		r = msg_error_set(&v->error, ESHUTDOWN, "the agent is stopping; what it runs resumes at the next start");
		goto refused;
	}
	r = machine_snapshot(e, &t);
	if (r < 0) {
		msg_error_set(&v->error, r, "cannot read the memory blocks: %s", strerror(-r));
		goto refused;
	}
	if (e->running && streq(e->running->msg->id, id) && !msg_state_is_final(e->running->state)) {
		/* the executor stops after the block in flight and ends it
		 * partial or cancelled, journaled like any final state (one
		 * that has just ended is answered from the journal below) */
		o = e->running;
		if (!o->cancel_requested) {
			o->cancel_requested = true;
			snprintf(o->cancel_by, sizeof(o->cancel_by), "%s", who);
			log_notice(&e->log, "%s %s: cancel requested by %s after %zu of %zu blocks",
				   msg_type_name(o->msg->type), id, who, o->blocks_done, o->blocks_total);
			op_publish_locked(e, o, t);
		}
		v->kind = ENGINE_ACCEPTED;
		v->report = op_report_new(e, o, t);
		pthread_mutex_unlock(&e->lock);
		return 0;
	}
	for (link = &e->queue_head; *link; link = &(*link)->next)
		if (streq((*link)->msg->id, id))
			break;
	if (*link) {
		/* not started: nothing was done, it ends now */
		struct op *prev = NULL;

		o = *link;
		for (struct op *i = e->queue_head; i && i != o; i = i->next)
			prev = i;
		o->cancel_requested = true;
		snprintf(o->cancel_by, sizeof(o->cancel_by), "%s", who);
		o->state = MSG_STATE_CANCELLED;
		snprintf(o->err_code, sizeof(o->err_code), "ECANCELED");
		snprintf(o->err_msg, sizeof(o->err_msg), "cancelled by %s before it started", who);
		r = op_publish_locked(e, o, t);
		if (r < 0) {
			/* not durable: it stays queued, and the cancel is refused */
			o->state = MSG_STATE_ACCEPTED;
			o->cancel_requested = false;
			o->err_code[0] = '\0';
			o->err_msg[0] = '\0';
			msg_error_set(&v->error, r, "cannot journal the cancel of %s: %s", id, strerror(-r));
			goto refused;
		}
		*link = o->next;
		if (e->queue_tail == o)
			e->queue_tail = prev;
		o->next = NULL;
		metrics_count_request(e->metrics, msg_type_name(o->msg->type), OUT_CANCELLED);
		log_notice(&e->log, "%s %s cancelled by %s before it started", msg_type_name(o->msg->type), id, who);
		v->kind = ENGINE_ANSWERED;
		v->report = op_report_new(e, o, t);
		pthread_mutex_unlock(&e->lock);
		op_free(o);
		return 0;
	}
	if (intentlog_get_grant(e->journal, id, &g) < 0) {
		r = msg_error_set(&v->error, ENOENT, "no grant or revocation with id \"%s\"", id);
		goto refused;
	}
	if (msg_state_is_final(g.state)) {
		r = msg_error_set(&v->error, EALREADY, "%s %s is %s already: nothing to cancel%s", msg_type_name(g.type),
				  id, msg_state_name(g.state),
				  g.type == MSG_GRANT && g.n_blocks ? " (revoke it to give its memory back)" : "");
		v->report = calloc(1, sizeof(*v->report));
		if (v->report && intentlog_grant_report(&g, v->report) < 0) {
			report_free(v->report);
			v->report = NULL;
		}
		if (v->report)
			v->report->agent = e->agent_id;
	} else {
		r = msg_error_set(&v->error, EAGAIN, "%s %s is %s but not queued yet; try again", msg_type_name(g.type),
				  id, msg_state_name(g.state));
	}
	intentlog_grant_done(&g);
refused:
	pthread_mutex_unlock(&e->lock);
	return refuse(v, r);
}
