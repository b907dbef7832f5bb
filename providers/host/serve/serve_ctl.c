/* SPDX-License-Identifier: MIT */
/*
 * Per domain: the channel session, the two-phase state machine and the
 * reconciliation of memgrant-host serve (docs/autoscaling.md, "The host
 * side").
 *
 *   grow:   IDLE -plug-> PLUGGING -device reached its size-> GRANTING
 *           -agent: applied-> IDLE (granted += applied)
 *   shrink: IDLE -revoke-> REVOKING -agent: blocks offline-> UNPLUGGING
 *           -device shrank-> IDLE
 * Memory counts as granted only once the agent reports it applied; a
 * revocation is complete only once the agent reported the blocks offline and
 * the device shrank.  Every phase has a deadline: a plug that does not
 * arrive is undone, plugged memory the agent does not apply in time is
 * reported ("plugged, not usable") and taken back, a partial unplug is
 * granted back, a revocation the guest cannot complete backs off.  The
 * journal (serve_journal.c) is written before each action; after a restart
 * the operation in flight is replayed with its own id and generation, and
 * an idle domain is reconciled: the agent's own count bounds what is
 * granted, and whatever is plugged beyond that is unplugged.
 * A guest is untrusted: its lines are rate-limited (a token bucket per
 * domain), its requests capped by the policy and the host budget, its
 * reports matched against the operation the service sent.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <syslog.h>

#include "lib/json.h"
#include "lib/size.h"
#include "lib/util.h"
#include "providers/host/host.h"
#include "providers/host/serve/serve.h"

#include "providers/host/serve/serve_ctl_int.h"

void dc_say(struct ctl *c, struct dom *d, int prio, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (prio <= LOG_WARNING && d)
		snprintf(d->last_error, sizeof(d->last_error), "%.*s", (int)sizeof(d->last_error) - 1, buf);
	if (c->io.log)
		c->io.log(c->io.ud, prio, d ? d->name : NULL, buf);
}

/* An event: {"event": NAME, "domain": ..., fields of FMT (json_pack)}. */
void dc_emit(struct ctl *c, struct dom *d, const char *name, json_t *fields)
{
	json_t *ev = fields ? fields : json_object();

	if (!ev)
		return;
	json_object_set_new(ev, "event", json_string(name));
	if (d) {
		json_object_set_new(ev, "domain", json_string(d->name));
		json_object_set_new(ev, "phase", json_string(dom_phase_name(d->rec.phase)));
		json_object_set_new(ev, "granted_bytes", json_integer((json_int_t)d->rec.granted));
	}
	if (c->cfg->dry_run)
		json_object_set_new(ev, "dry_run", json_true());
	if (c->io.event)
		c->io.event(c->io.ud, ev);
	json_decref(ev);
}

struct dom *dc_find(const struct ctl *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (streq(c->doms[i]->name, name))
			return c->doms[i];
	return NULL;
}

int dc_send_json(struct ctl *c, struct dom *d, json_t *m)
{
	_cleanup_free_ char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
	_cleanup_free_ char *line = NULL;
	size_t n;

	if (!text)
		return -ENOMEM;
	if (!d->connected)
		return -ENOTCONN;
	n = strlen(text);
	line = malloc(n + 2);
	if (!line)
		return -ENOMEM;
	memcpy(line, text, n);
	line[n] = '\n';
	return c->io.send(c->io.ud, d->name, line, n + 1);
}

int dc_journal(struct ctl *c, struct dom *d)
{
	char why[512] = "";
	int r;

	if (c->cfg->dry_run)
		return 0;
	d->rec.grow_ok_at = d->grow_ok_at;
	d->rec.shrink_ok_at = d->shrink_ok_at;
	d->rec.backoff = d->backoff;
	d->rec.grow_backoff = d->grow_backoff;
	d->rec.counts = (struct serve_counts){
		.grows = d->v.grows, .shrinks = d->v.shrinks, .plugs = d->v.plugs, .unplugs = d->v.unplugs,
		.requests = d->v.requests, .offers = d->v.offers, .refused_floor = d->v.refused_floor,
		.failed_revokes = d->v.failed_revokes, .not_onlined = d->v.not_onlined,
	};
	r = serve_journal_store(c->cfg->state_dir, d->name, &d->rec, why, sizeof(why));
	d->journal_behind = r < 0;
	if (r < 0)
		dc_say(c, d, LOG_ERR, "journal: %s", why);
	return r;
}

static uint64_t dc_round_up(uint64_t v, uint64_t g)
{
	return g && v % g ? v + (g - v % g) : v;
}

/* ---- the operation messages ---------------------------------------------------------- */

static json_t *dc_op_message(struct dom *d)
{
	json_t *m;

	if (d->rec.phase == PH_GRANTING) {
		m = json_pack("{s:s,s:s,s:I,s:s}", "type", "grant", "id", d->rec.op_id, "generation",
			      (json_int_t)d->rec.op_generation, "zone", d->p->zone);
		if (!m)
			return NULL;
		json_object_set_new(m, "memmap_on_memory",
				    streq(d->p->memmap, "auto") ? json_string("auto") : json_boolean(streq(d->p->memmap, "on")));
		if (d->rec.op_has_range && d->rec.op_range.start) {
			char r[64];
			snprintf(r, sizeof(r), "0x%llx-0x%llx", (unsigned long long)d->rec.op_range.start,
				 (unsigned long long)(d->rec.op_range.start + d->rec.op_range.size - 1));
			json_object_set_new(m, "ranges", json_pack("[s]", r));
		} else {
			json_object_set_new(m, "size", json_integer((json_int_t)d->rec.op_bytes));
		}
		return m;
	}
	if (d->rec.phase == PH_REVOKING) {
		if (d->rec.revoke_grant[0])
			return json_pack("{s:s,s:s,s:I,s:s}", "type", "revoke", "id", d->rec.op_id, "generation",
					 (json_int_t)d->rec.op_generation, "grant", d->rec.revoke_grant);
		return json_pack("{s:s,s:s,s:I,s:I}", "type", "revoke", "id", d->rec.op_id, "generation",
				 (json_int_t)d->rec.op_generation, "size", (json_int_t)d->rec.op_bytes);
	}
	return NULL;
}

void dc_send_op(struct ctl *c, struct dom *d, int64_t now)
{
	_cleanup_json_ json_t *m = NULL;

	if (!d->synced || d->op_sent || c->cfg->dry_run)
		return;
	/* never an operation the journal does not hold: a restart would not
	 * replay it, and what the guest applied would be granted twice */
	if (d->journal_behind && dc_journal(c, d) < 0)
		return;
	m = dc_op_message(d);
	if (m && dc_send_json(c, d, m) == 0) {
		d->op_sent = true;
		d->op_sent_at = now;
	}
}

int dc_new_op_id(struct ctl *c, struct dom *d)
{
	char why[512] = "";
	uint64_t gen;
	int r;

	if (c->cfg->dry_run) {
		snprintf(d->rec.op_id, sizeof(d->rec.op_id), SERVE_ID_PREFIX "dry");
		return 0;
	}
	r = host_state_next_generation(c->cfg->state_dir, d->name, d->agent_generation, &gen, why, sizeof(why));
	if (r < 0) {
		dc_say(c, d, LOG_ERR, "%s", why);
		return r;
	}
	d->rec.op_generation = gen;
	snprintf(d->rec.op_id, sizeof(d->rec.op_id), SERVE_ID_PREFIX "%llu", (unsigned long long)gen);
	return 0;
}

void dc_set_phase(struct dom *d, enum dom_phase ph, int64_t now, int64_t within)
{
	d->rec.phase = ph;
	d->phase_at = now;
	d->deadline = within > 0 ? now + within : -1;
	d->op_sent = false;
	d->regrant_at = 0;
	d->regrants = 0;
	if (ph == PH_IDLE) {
		d->rec.op_has_range = false;
		d->rec.take_back = false;
		d->rec.revoke_grant[0] = '\0';
		d->unplug_tries = 0;
	}
}

void dc_go_idle(struct ctl *c, struct dom *d, int64_t now)
{
	dc_set_phase(d, PH_IDLE, now, 0);
	dc_journal(c, d);
}

/* ---- transitions --------------------------------------------------------------------- */

void dc_start_grant(struct ctl *c, struct dom *d, uint64_t bytes, int64_t now)
{
	d->rec.op_bytes = bytes;
	dc_set_phase(d, PH_GRANTING, now, d->p->online_deadline);
	if (dc_journal(c, d) < 0)
		return; /* retried at the next tick (the deadline still runs) */
	dc_send_op(c, d, now);
}

/* The device shrinks back to what is granted. */
void dc_start_unplug(struct ctl *c, struct dom *d, uint64_t bytes, int64_t now)
{
	char why[512] = "";
	struct hv_range range = d->rec.op_range;
	bool with_range = d->rec.op_has_range;

	if (d->hv.always_plugged || bytes == 0) {
		d->v.unplugs += bytes ? 1 : 0;
		dc_go_idle(c, d, now);
		return;
	}
	d->rec.target = d->rec.granted;
	dc_set_phase(d, PH_UNPLUGGING, now, d->p->unplug_deadline);
	d->rec.op_bytes = bytes;
	d->rec.op_range = range;
	d->rec.op_has_range = with_range;
	if (dc_journal(c, d) < 0)
		return;
	if (c->hv->unplug(c->hv_impl, d->name, d->p, bytes, with_range ? &range : NULL, why, sizeof(why)) < 0) {
		dc_say(c, d, LOG_WARNING, "unplug of %llu bytes failed: %s", (unsigned long long)bytes, why);
		dc_emit(c, d, "unplug.failed", json_pack("{s:I,s:s}", "bytes", (json_int_t)bytes, "error", why));
		d->deadline = now; /* handled as a partial unplug at the next tick */
	}
}

void dc_start_grow(struct ctl *c, struct dom *d, uint64_t bytes, const char *why_grow, int64_t now)
{
	char why[512] = "";
	struct hv_range range = { 0 };

	if (d->p->hypervisor == HV_DIMM || d->hv.kind == HV_DIMM)
		bytes = d->p->dimm_size; /* one DIMM at a time */
	bytes = dc_round_up(bytes, d->hv.granule);
	dc_emit(c, d, "decision", json_pack("{s:s,s:I,s:s}", "action", "grow", "bytes", (json_int_t)bytes, "why", why_grow));
	d->grow_ok_at = now + d->p->grow_cooldown;
	d->shrink_ok_at = now + d->p->shrink_cooldown;
	if (c->cfg->dry_run) {
		d->request = 0;
		return;
	}
	if (dc_new_op_id(c, d) < 0)
		return;
	d->request_at = d->request ? d->request_at : now;
	d->request = 0;
	d->rec.op_bytes = bytes;
	d->rec.target = d->rec.granted + bytes;
	d->rec.op_has_range = false;
	if (d->hv.kind == HV_DIMM) {
		d->rec.op_has_range = true;
		d->rec.op_range = (struct hv_range){ .size = bytes };
		snprintf(d->rec.op_range.alias, sizeof(d->rec.op_range.alias), "ua-%.58s", d->rec.op_id);
	}
	dc_set_phase(d, PH_PLUGGING, now, d->p->plug_deadline);
	/* counted with the intent: a kill after the plug call must not lose it */
	d->v.plugs += d->hv.always_plugged ? 0 : 1;
	if (dc_journal(c, d) < 0) {
		d->v.plugs -= d->hv.always_plugged ? 0 : 1;
		dc_set_phase(d, PH_IDLE, now, 0);
		return;
	}
	if (d->hv.always_plugged) {
		dc_start_grant(c, d, bytes, now);
		return;
	}
	range = d->rec.op_range;
	if (c->hv->plug(c->hv_impl, d->name, d->p, bytes, &range, why, sizeof(why)) < 0) {
		dc_say(c, d, LOG_WARNING, "plug of %llu bytes failed: %s", (unsigned long long)bytes, why);
		dc_emit(c, d, "plug.failed", json_pack("{s:I,s:s}", "bytes", (json_int_t)bytes, "error", why));
		d->grow_ok_at = now + d->p->revoke_backoff;
		d->v.plugs--;
		/* nothing may have arrived, or part of it: the plug deadline decides */
		d->deadline = now;
		return;
	}
	if (d->rec.op_has_range) {
		/* a DIMM attach is synchronous: its range is known, the grant can go */
		d->rec.op_range = range;
		dc_start_grant(c, d, bytes, now);
	}
}

void dc_start_shrink(struct ctl *c, struct dom *d, uint64_t bytes, const char *why_shrink, int64_t now)
{
	dc_emit(c, d, "decision", json_pack("{s:s,s:I,s:s}", "action", "shrink", "bytes", (json_int_t)bytes, "why",
					 why_shrink));
	d->offer = 0;
	d->shrink_ok_at = now + d->p->shrink_cooldown;
	if (c->cfg->dry_run)
		return;
	if (d->hv.kind == HV_DIMM) {
		/* the most recent DIMM, by its grant; bytes become its size */
		if (d->rec.n_ranges == 0)
			return;
		d->rec.op_range = d->rec.ranges[d->rec.n_ranges - 1];
		d->rec.op_has_range = true;
		bytes = d->rec.op_range.size;
		snprintf(d->rec.revoke_grant, sizeof(d->rec.revoke_grant), "%s", d->rec.op_range.grant);
	}
	if (dc_new_op_id(c, d) < 0)
		return;
	d->rec.op_bytes = bytes;
	d->phase_at = now;
	dc_set_phase(d, PH_REVOKING, now, d->p->unplug_deadline + d->p->online_deadline);
	if (d->hv.kind == HV_DIMM)
		d->rec.op_has_range = true;
	if (dc_journal(c, d) < 0) {
		dc_set_phase(d, PH_IDLE, now, 0);
		return;
	}
	dc_send_op(c, d, now);
}

/* Plugged memory the agent did not apply in time goes back. */
void dc_take_back(struct ctl *c, struct dom *d, int64_t now)
{
	uint64_t plugged_extra = d->rec.target > d->rec.granted ? d->rec.target - d->rec.granted : d->rec.op_bytes;
	char grant[sizeof(d->rec.op_id)];

	snprintf(grant, sizeof(grant), "%s", d->rec.op_id);
	if (d->synced && dc_new_op_id(c, d) < 0) {
		/* no generation for the revocation (the state folder takes no
		 * write): tried again after a backoff, not at every tick, and
		 * nothing is counted or said until it goes */
		d->deadline = now + d->p->revoke_backoff;
		return;
	}
	d->v.not_onlined++;
	d->unusable = plugged_extra;
	/* a guest that does not online what it asked for waits longer each time */
	d->grow_backoff = d->grow_backoff ? d->grow_backoff * 2 : d->p->revoke_backoff;
	if (d->grow_backoff > d->p->revoke_backoff_max)
		d->grow_backoff = d->p->revoke_backoff_max;
	d->grow_ok_at = now + d->grow_backoff;
	dc_say(c, d, LOG_WARNING, "%llu bytes plugged, not usable: grant %s not applied within %llds; taking it back",
	    (unsigned long long)plugged_extra, grant, (long long)(d->p->online_deadline / 1000));
	dc_emit(c, d, "plugged_not_usable", json_pack("{s:I,s:s}", "bytes", (json_int_t)plugged_extra, "grant", grant));
	snprintf(d->rec.revoke_grant, sizeof(d->rec.revoke_grant), "%s", grant);
	d->late_applied = 0;
	if (!d->synced) {
		/* nobody to ask: the agent never onlined it, so the device may take it */
		snprintf(d->late_id, sizeof(d->late_id), "%s", grant);
		d->late_phase = PH_GRANTING;
		d->late_bytes = d->rec.op_bytes;
		dc_start_unplug(c, d, plugged_extra, now);
		return;
	}
	d->rec.op_bytes = plugged_extra;
	dc_set_phase(d, PH_REVOKING, now, d->p->unplug_deadline);
	d->rec.take_back = true;
	if (dc_journal(c, d) < 0)
		return;
	dc_send_op(c, d, now);
}

/* A final report of the operation in flight. */
static void dc_op_final(struct ctl *c, struct dom *d, const struct gmsg *m, int64_t now)
{
	uint64_t got = m->applied < d->rec.op_bytes ? m->applied : d->rec.op_bytes;
	const char *state = msg_state_name(m->state);

	if (d->rec.phase == PH_GRANTING) {
		d->rec.granted += got;
		d->unusable = 0;
		if (got == d->rec.op_bytes)
			d->grow_backoff = 0;
		if (got) {
			d->v.grows++;
			d->v.last_grow_ms = now - d->request_at;
			if (d->rec.op_has_range && d->rec.n_ranges < ARRAY_SIZE(d->rec.ranges) && got == d->rec.op_bytes) {
				snprintf(d->rec.op_range.grant, sizeof(d->rec.op_range.grant), "%s", d->rec.op_id);
				d->rec.ranges[d->rec.n_ranges++] = d->rec.op_range;
			}
		}
		if (!got && m->state == MSG_STATE_REJECTED && !d->hv.always_plugged &&
		    d->deadline >= 0 && now + 500 < d->deadline) {
			/* virtio-mem plugs the device's blocks first and adds the guest's memory
			 * block after, and a DIMM's blocks appear when the guest has handled
			 * the ACPI notification: a grant sent the moment the device reached
			 * its size can find nothing offline yet ("0B offline available",
			 * "block 40 does not exist", both seen under TCG).  Ask again, with a
			 * new generation, until the online deadline. */
			dc_emit(c, d, "grant.retry", json_pack("{s:s,s:s,s:I}", "id", m->id, "state", state, "asked_bytes",
							     (json_int_t)d->rec.op_bytes));
			if (dc_new_op_id(c, d) == 0 && dc_journal(c, d) == 0) {
				/* the block usually comes within a few hundred ms: look again soon
				 * (a guest short of memory is waiting), then every 500 ms */
				int64_t wait = d->regrants < 3 ? 100 << d->regrants : 500;
				d->op_sent = false;
				d->regrants++;
				d->regrant_at = now + (d->p->query_interval < wait ? d->p->query_interval : wait);
				return;
			}
		}
		dc_emit(c, d, m->state == MSG_STATE_APPLIED ? "grant.applied" : "grant.incomplete",
		     json_pack("{s:s,s:s,s:I,s:I,s:I}", "id", m->id, "state", state, "bytes", (json_int_t)got,
			       "asked_bytes", (json_int_t)d->rec.op_bytes, "took_ms", (json_int_t)(now - d->request_at)));
		if (got == d->rec.op_bytes) {
			/* what the guest asked while this grow was in flight was this grow */
			d->request = 0;
			dc_go_idle(c, d, now);
		} else if (d->rec.op_has_range && got) {
			/* a DIMM half applied: its grant goes back whole, then the DIMM */
			d->rec.granted -= got;
			d->late_applied = got;
			snprintf(d->rec.revoke_grant, sizeof(d->rec.revoke_grant), "%s", d->rec.op_id);
			if (dc_new_op_id(c, d) == 0) {
				dc_set_phase(d, PH_REVOKING, now, d->p->unplug_deadline);
				d->rec.take_back = true;
				if (dc_journal(c, d) == 0)
					dc_send_op(c, d, now);
			}
		} else {
			d->grow_ok_at = now + d->p->revoke_backoff;
			dc_start_unplug(c, d, d->rec.op_bytes - got, now);
		}
		return;
	}
	/* REVOKING */
	if (d->rec.take_back) {
		uint64_t kept = d->late_applied > got ? d->late_applied - got : 0;
		d->rec.granted += kept; /* what the grant applied late and could not be revoked */
		dc_emit(c, d, "take_back.revoked", json_pack("{s:s,s:I}", "state", state, "bytes", (json_int_t)got));
		dc_start_unplug(c, d, d->rec.op_bytes > kept ? d->rec.op_bytes - kept : 0, now);
		return;
	}
	d->rec.granted -= got <= d->rec.granted ? got : d->rec.granted;
	if (got < d->rec.op_bytes) {
		d->v.failed_revokes++;
		d->backoff = d->backoff ? d->backoff * 2 : d->p->revoke_backoff;
		if (d->backoff > d->p->revoke_backoff_max)
			d->backoff = d->p->revoke_backoff_max;
		d->shrink_ok_at = now + d->backoff;
		dc_emit(c, d, "revoke.incomplete", json_pack("{s:s,s:s,s:I,s:I,s:I}", "id", m->id, "state", state, "bytes",
							  (json_int_t)got, "asked_bytes", (json_int_t)d->rec.op_bytes,
							  "backoff_ms", (json_int_t)d->backoff));
		if (d->rec.op_has_range) {
			/* a DIMM cannot go while part of it is online: its blocks stay granted */
			d->rec.granted += got;
			dc_go_idle(c, d, now);
			return;
		}
	} else {
		d->backoff = 0;
		dc_emit(c, d, "revoke.offline", json_pack("{s:s,s:I}", "id", m->id, "bytes", (json_int_t)got));
	}
	if (d->rec.op_has_range && got == d->rec.op_bytes && d->rec.n_ranges)
		d->rec.n_ranges--;
	dc_start_unplug(c, d, got, now);
}

/* A late report of an operation given up on, or of a grant being taken back. */
static void dc_late_report(struct ctl *c, struct dom *d, const struct gmsg *m, int64_t now)
{
	if (d->rec.take_back && streq(m->id, d->rec.revoke_grant) && msg_state_is_final(m->state)) {
		d->late_applied = m->applied;
		return;
	}
	if (d->late_id[0] && streq(m->id, d->late_id) && msg_state_is_final(m->state)) {
		uint64_t got = m->applied < d->late_bytes ? m->applied : d->late_bytes;
		if (d->late_phase == PH_GRANTING)
			d->rec.granted += got;
		else
			d->rec.granted -= got <= d->rec.granted ? got : d->rec.granted;
		dc_say(c, d, LOG_NOTICE, "late report of %s: %s, %llu bytes", m->id, msg_state_name(m->state),
		    (unsigned long long)got);
		d->late_id[0] = '\0';
		d->reconciled = false; /* plugged and granted are compared again */
		dc_journal(c, d);
		(void)now;
	}
}

/* ---- reconciliation ------------------------------------------------------------------ */

void dc_refresh_hv(struct ctl *c, struct dom *d)
{
	char why[512] = "";

	if (c->hv->query(c->hv_impl, d->name, d->p, &d->hv, why, sizeof(why)) < 0) {
		dc_say(c, d, LOG_WARNING, "cannot read the domain's memory devices: %s", why);
		d->hv_known = false;
		return;
	}
	d->hv_known = true;
}

/* Idle, synced, agent status known: granted <= agent's count; plugged beyond granted goes. */
static void dc_reconcile(struct ctl *c, struct dom *d, int64_t now)
{
	uint64_t extra;

	dc_refresh_hv(c, d);
	if (!d->hv_known)
		return;
	d->reconciled = true;
	if (d->late_id[0] && d->late_phase == PH_GRANTING && d->agent_granted <= d->rec.granted) {
		/* the agent, asked afresh, holds no more than the journal: the grant
		 * given up on was not applied and no longer counts against max */
		dc_say(c, d, LOG_NOTICE, "grant %s given up on: the agent holds %llu bytes, not more; no longer counted",
		    d->late_id, (unsigned long long)d->agent_granted);
		d->late_id[0] = '\0';
	}
	if (d->agent_granted < d->rec.granted) {
		dc_emit(c, d, "reconciled", json_pack("{s:I,s:I,s:s}", "journal_granted", (json_int_t)d->rec.granted,
						   "agent_granted", (json_int_t)d->agent_granted, "why",
						   "the agent holds less than the journal says (guest reboot or outside revoke)"));
		d->rec.granted = d->agent_granted;
		if (d->hv.kind == HV_DIMM)
			d->rec.n_ranges = 0;
		dc_journal(c, d);
	}
	if (d->hv.always_plugged || c->cfg->dry_run)
		return;
	extra = d->hv.requested > d->rec.granted ? d->hv.requested - d->rec.granted : 0;
	if (d->hv.plugged > d->rec.granted && d->hv.plugged - d->rec.granted > extra)
		extra = d->hv.plugged - d->rec.granted;
	if (d->hv.kind == HV_DIMM)
		return; /* DIMMs the service did not attach are the operator's */
	if (extra >= (d->hv.granule ? d->hv.granule : 1)) {
		dc_emit(c, d, "reconciled", json_pack("{s:I,s:I,s:s}", "plugged", (json_int_t)d->hv.plugged, "requested",
						   (json_int_t)d->hv.requested, "why", "plugged and not granted: unplugged"));
		dc_start_unplug(c, d, extra, now);
	}
}

/* ---- guest lines ---------------------------------------------------------------------- */

static void dc_ack(struct ctl *c, struct dom *d, uint64_t seq)
{
	_cleanup_json_ json_t *a = NULL;

	if (!seq)
		return;
	a = json_pack("{s:s,s:I}", "type", "ack", "seq", (json_int_t)seq);
	dc_send_json(c, d, a);
}

#define ACK_RETRY_MIN_MS 500
#define ACK_RETRY_MAX_MS 5000

void dc_ack_when_journaled(struct ctl *c, struct dom *d, int64_t now)
{
	if (!d->ack_held || now < d->ack_retry_at)
		return;
	if (d->journal_behind && dc_journal(c, d) < 0) {
		d->ack_retry_ms = d->ack_retry_ms ? d->ack_retry_ms * 2 : ACK_RETRY_MIN_MS;
		if (d->ack_retry_ms > ACK_RETRY_MAX_MS)
			d->ack_retry_ms = ACK_RETRY_MAX_MS;
		d->ack_retry_at = now + d->ack_retry_ms;
		return;
	}
	dc_ack(c, d, d->ack_held);
	d->ack_held = 0;
	d->ack_retry_ms = 0;
}

static void dc_on_agent_status(struct ctl *c, struct dom *d, const struct gmsg *m, int64_t now)
{
	d->query_out = false;
	d->have_status = true;
	if (m->block_size)
		d->block = m->block_size;
	d->agent_granted = m->granted;
	d->have_usage = m->have_mem_available;
	d->mem_total = m->mem_total;
	d->mem_available = m->mem_available;
	if (d->have_usage && d->mem_available >= d->p->reserve + (d->block ? d->block : 1)) {
		if (d->slack_since < 0)
			d->slack_since = now;
	} else {
		d->slack_since = -1;
	}
	if (!d->reconciled && d->rec.phase == PH_IDLE)
		dc_reconcile(c, d, now);
}

static void dc_on_message(struct ctl *c, struct dom *d, const struct gmsg *m, int64_t now)
{
	switch (m->kind) {
	case GMSG_SYNC:
		if (d->synced || m->nonce != d->nonce)
			return;
		d->synced = true;
		d->agent_generation = m->generation;
		d->query_out = false;
		d->query_at = now; /* ask for the agent's status now */
		dc_send_op(c, d, now);
		return;
	case GMSG_AGENT_STATUS:
		dc_on_agent_status(c, d, m, now);
		return;
	case GMSG_REQUEST: {
		/* advice: the latest counts, at most the domain's max; the law
		 * bounds it by what is left below max and the budget shares it */
		uint64_t cap = d->p->max;
		d->v.requests++;
		if (m->bytes > cap)
			d->v.requests_capped++;
		if (!d->request)
			d->request_at = now;
		d->request = m->bytes > cap ? cap : m->bytes;
		d->offer = 0;
		dc_ack(c, d, m->seq);
		return;
	}
	case GMSG_OFFER:
		d->v.offers++;
		d->offer = m->bytes;
		d->request = 0;
		dc_ack(c, d, m->seq);
		return;
	case GMSG_STATUS:
		if ((d->rec.phase == PH_GRANTING || d->rec.phase == PH_REVOKING) && streq(m->id, d->rec.op_id) &&
		    m->generation == d->rec.op_generation) {
			if (msg_state_is_final(m->state))
				dc_op_final(c, d, m, now);
		} else {
			dc_late_report(c, d, m, now);
		}
		/* acknowledged once the journal holds what it means: till then the
		 * agent keeps it, and a serve that stops meanwhile gets it again */
		d->ack_held = m->seq;
		d->ack_retry_at = now;
		d->ack_retry_ms = 0;
		dc_ack_when_journaled(c, d, now);
		return;
	case GMSG_ERROR:
		if (d->rec.op_id[0] && streq(m->id, d->rec.op_id)) {
			dc_say(c, d, LOG_WARNING, "the agent refused %s: %s", m->id, m->code);
			if (streq(m->code, "ESTALE") || streq(m->code, "EEXIST")) {
				/* a generation the agent already had: a fresh one next time */
				d->op_sent = true;
				d->deadline = now;
			}
		}
		return;
	default:
		return;
	}
}

/* The token bucket refilled up to NOW: lines_per_s, burst 4x. */
static void dc_refill(struct dom *d, int64_t now)
{
	double rate = d->p->lines_per_s ? d->p->lines_per_s : 50;

	d->tokens += (double)(now - d->tokens_at) * rate / 1000.0;
	if (d->tokens > rate * 4)
		d->tokens = rate * 4;
	d->tokens_at = now;
}

bool ctl_may_read(struct ctl *c, const char *domain, int64_t now)
{
	struct dom *d = dc_find(c, domain);

	if (!d)
		return true;
	dc_refill(d, now);
	return d->tokens > 0;
}

int ctl_guest_line(struct ctl *c, const char *domain, const char *line, size_t len, int64_t now)
{
	struct dom *d = dc_find(c, domain);
	struct gmsg m;
	char why[256];

	if (!d)
		return -ENOENT;
	dc_refill(d, now);
	d->v.lines++;
	gmsg_parse(line, len, &m, why, sizeof(why));
	if (!d->synced && m.kind != GMSG_SYNC) {
		d->tokens -= 1;
		return d->tokens <= 0 ? -EAGAIN : 0; /* stale bytes before our sync's answer */
	}
	if (m.kind == GMSG_BAD) {
		d->v.lines_bad++;
		d->tokens -= 4; /* garbage costs more */
		if (d->v.lines_bad <= 3 || d->v.lines_bad % 1000 == 0)
			dc_say(c, d, LOG_INFO, "unreadable line from the guest (%llu so far): %s",
			    (unsigned long long)d->v.lines_bad, why);
	} else {
		d->tokens -= 1;
		dc_on_message(c, d, &m, now);
	}
	if (d->tokens <= 0) {
		d->v.lines_dropped++; /* not dropped: the caller stops reading until the next tick */
		return -EAGAIN;
	}
	return 0;
}

/* ---- domains, channels, hypervisor events ---------------------------------------------- */

int ctl_new(const struct serve_config *cfg, const struct hv_ops *hv, void *hv_impl, const struct ctl_io *io,
	    struct ctl **out)
{
	struct ctl *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->cfg = cfg;
	c->hv = hv;
	c->hv_impl = hv_impl;
	c->io = *io;
	*out = c;
	return 0;
}

void ctl_free(struct ctl *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->doms[i]);
	free(c->doms);
	free(c);
}

bool ctl_has_domain(const struct ctl *c, const char *domain)
{
	return dc_find(c, domain) != NULL;
}

static int64_t clamp_until(int64_t at, int64_t now, int64_t longest)
{
	if (at < now)
		return now;
	return at - now > longest ? now + longest : at;
}

/* The journal's cooldowns, backoffs and counters after a restart.  The clock
 * is CLOCK_MONOTONIC, which a restart of the service keeps; after a reboot of
 * the host a stored time may lie far ahead, so none waits longer than its
 * longest possible wait from now. */
static void dc_restore_timing(struct dom *d, int64_t now)
{
	const struct serve_policy *p = d->p;
	int64_t g = p->grow_cooldown > p->revoke_backoff_max ? p->grow_cooldown : p->revoke_backoff_max;
	int64_t s = p->shrink_cooldown > p->revoke_backoff_max ? p->shrink_cooldown : p->revoke_backoff_max;
	const struct serve_counts *k = &d->rec.counts;

	d->grow_ok_at = clamp_until(d->rec.grow_ok_at, now, g);
	d->shrink_ok_at = clamp_until(d->rec.shrink_ok_at, now, s);
	d->backoff = d->rec.backoff > p->revoke_backoff_max ? p->revoke_backoff_max : d->rec.backoff;
	d->grow_backoff = d->rec.grow_backoff > p->revoke_backoff_max ? p->revoke_backoff_max : d->rec.grow_backoff;
	d->v.grows = k->grows;
	d->v.shrinks = k->shrinks;
	d->v.plugs = k->plugs;
	d->v.unplugs = k->unplugs;
	d->v.requests = k->requests;
	d->v.offers = k->offers;
	d->v.refused_floor = k->refused_floor;
	d->v.failed_revokes = k->failed_revokes;
	d->v.not_onlined = k->not_onlined;
}

int ctl_domain_add(struct ctl *c, const char *domain, int64_t now)
{
	const struct serve_policy *p = serve_config_policy(c->cfg, domain);
	char why[512] = "";
	bool found;
	struct dom *d;

	if (!p)
		return -EPERM;
	if (dc_find(c, domain))
		return -EEXIST;
	if (strlen(domain) >= SERVE_NAME_MAX)
		return -ENAMETOOLONG;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 8;
		struct dom **n = realloc(c->doms, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->doms = n;
		c->cap = cap;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	snprintf(d->name, sizeof(d->name), "%s", domain);
	d->p = p;
	d->slack_since = -1;
	d->deadline = -1;
	d->refused_at = -1;
	d->tokens = (p->lines_per_s ? p->lines_per_s : 50) * 4.0;
	d->tokens_at = now;
	d->grow_ok_at = d->shrink_ok_at = now;
	if (serve_journal_load(c->cfg->state_dir, domain, &d->rec, &found, why, sizeof(why)) < 0)
		dc_say(c, d, LOG_ERR, "%s", why);
	if (found && d->rec.have_timing)
		dc_restore_timing(d, now);
	c->doms[c->n++] = d;
	dc_refresh_hv(c, d);
	if (found && d->rec.phase != PH_IDLE) {
		/* replay the operation in flight with its own id and generation */
		d->phase_at = now;
		d->deadline = now + (d->rec.phase == PH_GRANTING ? p->online_deadline : p->unplug_deadline);
		d->request_at = now; /* took_ms of the replayed operation counts from here */
		dc_emit(c, d, "resumed", json_pack("{s:s,s:I}", "op", d->rec.op_id, "bytes", (json_int_t)d->rec.op_bytes));
	}
	dc_emit(c, d, "domain.added", json_pack("{s:s}", "hypervisor", d->hv_known ? hv_kind_name(d->hv.kind) : "unknown"));
	return 0;
}

void ctl_domain_gone(struct ctl *c, const char *domain, int64_t now)
{
	struct dom *d = dc_find(c, domain);

	(void)now;
	if (!d)
		return;
	dc_emit(c, d, "domain.gone", json_pack("{s:I}", "granted_bytes_lost", (json_int_t)d->rec.granted));
	/* its memory went with it: nothing stays plugged, nothing granted */
	if (!c->cfg->dry_run)
		serve_journal_remove(c->cfg->state_dir, d->name);
	for (size_t i = 0; i < c->n; i++)
		if (c->doms[i] == d) {
			c->doms[i] = c->doms[--c->n];
			break;
		}
	free(d);
}

void ctl_channel_up(struct ctl *c, const char *domain, int64_t now)
{
	struct dom *d = dc_find(c, domain);
	_cleanup_json_ json_t *s = NULL;

	if (!d)
		return;
	d->connected = true;
	d->synced = false;
	d->op_sent = false;
	d->reconciled = false;
	d->have_status = false;
	d->ack_held = 0; /* a report of the last session comes again */
	if (getrandom(&d->nonce, sizeof(d->nonce), 0) != sizeof(d->nonce))
		d->nonce = (uint64_t)now * 2654435761u;
	d->nonce &= MSG_GENERATION_MAX - 1;
	c->io.send(c->io.ud, d->name, "\n", 1);
	s = msg_sync_reply_json(d->nonce);
	dc_send_json(c, d, s);
	dc_emit(c, d, "channel.up", NULL);
}

void ctl_channel_down(struct ctl *c, const char *domain, int64_t now)
{
	struct dom *d = dc_find(c, domain);

	(void)now;
	if (!d || !d->connected)
		return;
	d->connected = d->synced = false;
	d->op_sent = false;
	d->ack_held = 0; /* the agent sends its report again on the next session */
	dc_emit(c, d, "channel.down", NULL);
}

void dc_unplug_done(struct ctl *c, struct dom *d, int64_t now)
{
	d->v.unplugs++;
	d->v.shrinks++;
	d->v.last_shrink_ms = now - d->phase_at;
	dc_emit(c, d, "unplugged", json_pack("{s:I,s:I}", "plugged", (json_int_t)d->hv.plugged, "took_ms",
					  (json_int_t)(now - d->phase_at)));
	dc_go_idle(c, d, now);
}

void ctl_hv_event(struct ctl *c, const char *domain, const struct hv_event *ev, int64_t now)
{
	struct dom *d = dc_find(c, domain);

	if (!d)
		return;
	switch (ev->kind) {
	case HV_EV_GONE:
		ctl_domain_gone(c, domain, now);
		return;
	case HV_EV_STARTED:
		/* a fresh guest: what the old one had online is gone; the agent's count decides */
		d->reconciled = false;
		d->have_status = false;
		dc_emit(c, d, "domain.started", NULL);
		return;
	case HV_EV_SIZE:
		d->hv.plugged = ev->plugged;
		break;
	case HV_EV_REMOVED:
	case HV_EV_REMOVAL_FAILED:
		break;
	}
	dc_refresh_hv(c, d);
	if (d->rec.phase == PH_PLUGGING && d->hv_known && d->hv.plugged >= d->rec.target)
		dc_start_grant(c, d, d->rec.op_bytes, now);
	else if (d->rec.phase == PH_UNPLUGGING && d->hv_known && d->hv.plugged <= d->rec.target && !d->hv.busy)
		dc_unplug_done(c, d, now);
	else if (d->rec.phase == PH_UNPLUGGING && ev->kind == HV_EV_REMOVAL_FAILED) {
		d->deadline = now; /* the guest refused the detach: handled as a partial unplug */
	}
}

