/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host serve, each tick (serve_ctl.c has the rest of the
 * controller): the deadlines of the phases (a plug that did not arrive, a
 * grant not applied in time, a revocation not answered, a partial unplug),
 * the agent's status asked for, the control law per idle domain, the host
 * budget shared among the domains that grow, and the views for status and
 * metrics.
 */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "lib/json.h"
#include "lib/util.h"
#include "providers/host/serve/serve_ctl_int.h"

/* ---- the tick -------------------------------------------------------------------------- */

static void deadline_passed(struct ctl *c, struct dom *d, int64_t now)
{
	uint64_t extra;

	switch (d->rec.phase) {
	case PH_PLUGGING:
		dc_refresh_hv(c, d);
		extra = d->hv_known && d->hv.plugged > d->rec.granted ? d->hv.plugged - d->rec.granted : 0;
		if (d->hv.kind != HV_DIMM && d->block)
			extra -= extra % d->block;
		if (d->hv.kind == HV_DIMM && d->hv_known && d->hv.plugged >= d->rec.target)
			extra = d->rec.op_bytes;
		else if (d->hv.kind == HV_DIMM)
			extra = 0;
		dc_say(c, d, LOG_WARNING, "the device reached %llu of %llu bytes within the plug deadline",
		    (unsigned long long)(d->hv.plugged > d->rec.granted ? d->hv.plugged - d->rec.granted : 0),
		    (unsigned long long)d->rec.op_bytes);
		if (extra) {
			dc_start_grant(c, d, extra, now);
		} else {
			d->grow_ok_at = now + d->p->revoke_backoff;
			dc_start_unplug(c, d, d->rec.op_bytes, now);
		}
		return;
	case PH_GRANTING:
		if (!d->op_sent && d->synced) {
			dc_send_op(c, d, now); /* the journal write failed before: try again */
			d->deadline = now + d->p->online_deadline;
			return;
		}
		dc_take_back(c, d, now);
		return;
	case PH_REVOKING:
		if (d->rec.take_back && d->late_applied) {
			/* the grant's report came during its take-back and the revocation
			 * went unanswered: what it applied is granted, the rest goes */
			uint64_t kept = d->late_applied < d->rec.op_bytes ? d->late_applied : d->rec.op_bytes;

			d->rec.granted += kept;
			d->late_applied = 0;
			dc_start_unplug(c, d, d->rec.op_bytes - kept, now);
			return;
		}
		if (d->rec.take_back) {
			/* the agent answers neither the grant nor its revocation: the blocks were never
			 * onlined by it, so the device may take them */
			snprintf(d->late_id, sizeof(d->late_id), "%s", d->rec.revoke_grant);
			d->late_phase = PH_GRANTING;
			d->late_bytes = d->rec.op_bytes;
			dc_start_unplug(c, d, d->rec.op_bytes, now);
			return;
		}
		/* no answer: nothing is unplugged (it may still be online); back off, keep it granted */
		d->v.failed_revokes++;
		d->backoff = d->backoff ? d->backoff * 2 : d->p->revoke_backoff;
		if (d->backoff > d->p->revoke_backoff_max)
			d->backoff = d->p->revoke_backoff_max;
		d->shrink_ok_at = now + d->backoff;
		snprintf(d->late_id, sizeof(d->late_id), "%s", d->rec.op_id);
		d->late_phase = PH_REVOKING;
		d->late_bytes = d->rec.op_bytes;
		dc_say(c, d, LOG_WARNING, "revocation %s not answered in time; memory stays granted, next try in %llds",
		    d->rec.op_id, (long long)(d->backoff / 1000));
		dc_emit(c, d, "revoke.timeout", json_pack("{s:s,s:I}", "id", d->rec.op_id, "backoff_ms", (json_int_t)d->backoff));
		dc_go_idle(c, d, now);
		return;
	case PH_UNPLUGGING:
		dc_refresh_hv(c, d);
		if (d->hv_known && d->hv.busy && d->unplug_tries++ < 3) {
			d->deadline = now + d->p->unplug_deadline;
			return;
		}
		extra = d->hv_known && d->hv.plugged > d->rec.granted ? d->hv.plugged - d->rec.granted : 0;
		if (d->hv.kind == HV_DIMM && d->rec.op_has_range)
			extra = d->hv_known && d->hv.plugged > d->rec.target ? d->rec.op_range.size : 0;
		if (!extra) {
			dc_go_idle(c, d, now);
			return;
		}
		/* partial unplug: what the device kept is granted back, never left plugged and unusable */
		if (dc_new_op_id(c, d) < 0) {
			/* no generation for the grant (the state folder takes no write):
			 * tried again after a backoff, not at every tick, and nothing is
			 * said until it goes */
			d->deadline = now + d->p->revoke_backoff;
			return;
		}
		dc_say(c, d, LOG_WARNING, "the device kept %llu bytes after the unplug; granting them back",
		    (unsigned long long)extra);
		dc_emit(c, d, "unplug.partial", json_pack("{s:I,s:I}", "kept", (json_int_t)extra, "plugged",
						       (json_int_t)d->hv.plugged));
		d->shrink_ok_at = now + (d->backoff = d->backoff ? d->backoff * 2 : d->p->revoke_backoff);
		if (d->hv.kind != HV_DIMM) {
			char why[256];
			/* the target back up to what is there (the driver keeps trying otherwise) */
			if (d->hv.plugged > d->hv.requested &&
			    c->hv->plug(c->hv_impl, d->name, d->p, d->hv.plugged - d->hv.requested, NULL, why,
					sizeof(why)) < 0)
				dc_say(c, d, LOG_WARNING, "cannot raise the target back: %s", why);
		}
		d->rec.target = d->rec.granted + extra;
		d->request_at = now;
		dc_start_grant(c, d, extra, now);
		return;
	case PH_IDLE:
		return;
	}
}

void ctl_tick(struct ctl *c, int64_t now)
{
	uint64_t *want = NULL, *gran = NULL, *give = NULL, budget = UINT64_MAX, inflight = 0;
	struct dom **asking = NULL;
	char why_grow[8][192];
	size_t n = 0;

	if (c->n) {
		want = calloc(c->n, sizeof(*want));
		gran = calloc(c->n, sizeof(*gran));
		give = calloc(c->n, sizeof(*give));
		asking = calloc(c->n, sizeof(*asking));
		if (!want || !gran || !give || !asking)
			goto out;
	}
	for (size_t i = 0; i < c->n; i++) {
		struct dom *d = c->doms[i];
		struct law_input in;
		struct law_out lo;

		dc_ack_when_journaled(c, d, now);
		if (d->rec.phase != PH_IDLE && d->deadline >= 0 && now >= d->deadline)
			deadline_passed(c, d, now);
		if (d->rec.phase == PH_PLUGGING)
			inflight += d->rec.op_bytes;
		/* a plug whose size event went to a killed predecessor (resumed in
		 * plugging with the device already there): no event will come */
		if (d->rec.phase == PH_PLUGGING && d->hv_known && d->hv.kind != HV_DIMM && !d->hv.always_plugged &&
		    d->hv.plugged >= d->rec.target)
			dc_start_grant(c, d, d->rec.op_bytes, now);
		/* the same for an unplug: the device got down to its target while
		 * no service ran (killed after it asked), so no event says so */
		if (d->rec.phase == PH_UNPLUGGING && d->hv_known && d->hv.kind != HV_DIMM && !d->hv.always_plugged &&
		    d->hv.plugged <= d->rec.target && !d->hv.busy)
			dc_unplug_done(c, d, now);
		if (d->rec.phase == PH_GRANTING && d->regrant_at > 0 && now >= d->regrant_at && d->synced) {
			d->regrant_at = 0;
			dc_send_op(c, d, now);
		}
		if (d->synced && (now >= d->query_at || (d->query_out && now - d->query_at > 4 * d->p->query_interval))) {
			_cleanup_json_ json_t *q = json_pack("{s:s}", "type", "query");
			if (!d->query_out || now - d->query_at > 4 * d->p->query_interval)
				if (dc_send_json(c, d, q) == 0)
					d->query_out = true;
			d->query_at = now + d->p->query_interval;
		}
		if (d->rec.phase != PH_IDLE || !d->synced || !d->have_status || !d->reconciled || !d->hv_known)
			continue;
		in = (struct law_input){
			.granted = d->rec.granted, .block = d->block, .request = d->request, .offer = d->offer,
			/* a late report of a grant given up on may still add this: it counts
			 * against max until that report comes or a fresh agent status shows
			 * the agent does not hold it (dc_reconcile) */
			.pending = d->late_id[0] && d->late_phase == PH_GRANTING ? d->late_bytes : 0,
			.have_usage = d->have_usage, .mem_total = d->mem_total, .mem_available = d->mem_available,
			.slack_since = d->slack_since, .now = now, .grow_ok_at = d->grow_ok_at,
			.shrink_ok_at = d->shrink_ok_at,
		};
		if (d->hv.max && d->hv.max < d->p->max) {
			struct serve_policy lp = *d->p;
			lp.max = d->hv.max;
			law_decide(&lp, &in, &lo);
		} else {
			law_decide(d->p, &in, &lo);
		}
		/* each offer gets its answer; a standing refusal (slack, above max) is
		 * said once per shrink cooldown, not at every tick */
		if (lo.refused_floor &&
		    (d->offer || d->refused_at < 0 || now - d->refused_at >= d->p->shrink_cooldown)) {
			d->v.refused_floor++;
			dc_emit(c, d, "shrink.refused", json_pack("{s:s,s:I,s:I,s:I}", "why", lo.why, "offer", (json_int_t)d->offer,
							       "floor_total", (json_int_t)lo.floor_total, "allowed",
							       (json_int_t)(lo.action == LAW_SHRINK ? lo.bytes : 0)));
			dc_say(c, d, LOG_NOTICE, "%s", lo.why);
			if (!d->offer)
				d->refused_at = now;
		}
		if (lo.refused_floor && lo.action != LAW_SHRINK)
			d->offer = 0;
		if (lo.action == LAW_SHRINK)
			dc_start_shrink(c, d, lo.bytes, lo.why, now);
		else if (lo.action == LAW_GROW) {
			asking[n] = d;
			want[n] = lo.bytes;
			gran[n] = d->hv.kind == HV_DIMM ? d->p->dimm_size : (d->block ? d->block : 1);
			snprintf(why_grow[n % 8], sizeof(why_grow[0]), "%s", lo.why);
			n++;
		}
	}
	if (n) {
		uint64_t free_b = 0;
		if (c->cfg->host_budget) {
			uint64_t used = 0;
			for (size_t i = 0; i < c->n; i++)
				used += c->doms[i]->rec.granted + (c->doms[i]->rec.phase == PH_PLUGGING ||
								   c->doms[i]->rec.phase == PH_GRANTING
							   ? c->doms[i]->rec.op_bytes : 0);
			budget = c->cfg->host_budget > used ? c->cfg->host_budget - used : 0;
		} else if (c->hv->host_free && c->hv->host_free(c->hv_impl, &free_b) == 0) {
			budget = free_b > c->cfg->host_reserve + inflight ? free_b - c->cfg->host_reserve - inflight : 0;
		}
		law_share(want, gran, n, budget, give);
		for (size_t k = 0; k < n; k++) {
			struct dom *d = asking[k];
			if (give[k] < want[k])
				dc_emit(c, d, "budget.short", json_pack("{s:I,s:I,s:I}", "wanted", (json_int_t)want[k], "given",
								     (json_int_t)give[k], "budget", (json_int_t)budget));
			if (give[k] >= gran[k] && give[k])
				dc_start_grow(c, d, give[k], why_grow[k % 8], now);
		}
	}
out:
	free(want);
	free(gran);
	free(give);
	free(asking);
}

int64_t ctl_next_ms(const struct ctl *c, int64_t now)
{
	int64_t next = c->cfg->interval;

	for (size_t i = 0; i < c->n; i++) {
		const struct dom *d = c->doms[i];
		if (d->rec.phase != PH_IDLE && d->deadline >= 0 && d->deadline - now < next)
			next = d->deadline - now;
	}
	return next < 0 ? 0 : next;
}

size_t ctl_domains(const struct ctl *c)
{
	return c->n;
}

int ctl_view(const struct ctl *c, size_t i, struct dom_view *out)
{
	const struct dom *d;

	if (i >= c->n)
		return -ENOENT;
	d = c->doms[i];
	*out = d->v;
	out->name = d->name;
	out->phase = d->rec.phase;
	out->kind = d->hv_known ? d->hv.kind : d->p->hypervisor;
	out->connected = d->connected;
	out->synced = d->synced;
	out->granted = d->rec.granted;
	out->plugged = d->hv.plugged;
	out->requested = d->hv.requested;
	out->plugged_unusable = d->unusable;
	out->request = d->request;
	out->offer = d->offer;
	out->mem_total = d->mem_total;
	out->mem_available = d->mem_available;
	out->backoff_ms = d->backoff;
	out->last_error = d->last_error[0] ? d->last_error : NULL;
	return 0;
}
