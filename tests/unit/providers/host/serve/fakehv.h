/* SPDX-License-Identifier: MIT */
/*
 * A fake hypervisor and fake guests for memgrant-host serve's controller
 * (serve_ctl.c), injecting what was measured on libvirt 9.0 / QEMU 7.2 TCG:
 * - virtio-mem: <requested> is taken at once; the device moves toward it at
 *   PLUG_RATE bytes per 100 ms; MEMORY_DEVICE_SIZE_CHANGE events come
 *   coalesced, one per second, the last with the final size;
 * - the device cannot unplug below `unplug_floor` (partial unplug) and
 *   never below what the guest has online (it would OOM-kill the guest: the
 *   fake counts that as a panic, which the tests forbid);
 * - DIMM: attach is synchronous; detach is asynchronous: removed after 5 s,
 *   or refused (`detach_fail`), or never answered (`detach_hang`);
 * - the guest's agent: answers sync and query, applies a grant of offline
 *   plugged memory after `online_ms` (or never: `never_online`), revokes by
 *   offlining up to what is not pinned, answers a replayed generation with
 *   the status it recorded; can be `dead` (answers nothing).
 * Time is the test's own clock; fh_run() advances it in 100 ms steps,
 * delivering guest lines and device events, and ticking the controller.
 * Header-only, included by the tests and by bench/serve_scale.c.
 */
#pragma once

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "providers/host/serve/serve.h"

#define FH_MIB (1ull << 20)
#define FH_BLOCK (128 * FH_MIB)
#ifndef FH_MAX_DOMS /* bench/serve_scale.c defines its own */
#define FH_MAX_DOMS 4
#endif
#define FH_STEP_MS 100

struct fh_grant {
	char id[64];
	uint64_t gen, bytes, applied;
	char state[16];
	int64_t done_at;        /* when it turns applied */
	bool is_revoke;
};

struct fh_dom {
	char name[32];
	bool used;
	enum hv_kind kind;
	/* device */
	uint64_t plugged, requested, max, granule;
	uint64_t unplug_floor;  /* the device cannot go below this */
	int64_t last_event_at;
	uint64_t last_event_size;
	/* DIMMs */
	struct hv_range dimms[16];
	size_t n_dimms;
	int64_t detach_at;
	char detach_alias[64];
	bool detach_fail, detach_hang;
	/* guest */
	uint64_t boot, used_mem, online_granted, pinned;
	int64_t online_ms;
	bool never_online, dead, connected;
	bool deaf_revokes;        /* never answers a revocation (a hostile agent) */
	int64_t blocks_delay_ms;  /* virtio-mem: the guest adds its memory block this long after a plug */
	int64_t blocks_at;
	uint64_t last_gen;
	struct fh_grant ops[64];
	size_t n_ops;
	uint64_t seq;
	char *out;              /* lines from the guest, waiting */
	size_t out_len;
	/* what the host sent */
	unsigned grants_seen, revokes_seen, acks_seen, queries_seen, replays_seen;
	bool panicked;
	uint64_t hog_peak;
};

struct fh {
	struct fh_dom d[FH_MAX_DOMS];
	int64_t now;
	uint64_t host_free;
	uint64_t plug_rate;     /* bytes per step */
	struct ctl *ctl;
	struct serve_config cfg;
	unsigned plugs, unplugs;
	json_t *events;         /* every event the controller emitted */
	bool quiet;
};

static inline struct fh_dom *fh_dom(struct fh *f, const char *name)
{
	for (int i = 0; i < FH_MAX_DOMS; i++)
		if (f->d[i].used && streq(f->d[i].name, name))
			return &f->d[i];
	return NULL;
}

static inline void fh_say(struct fh_dom *d, json_t *m)
{
	char *t = json_dumps(m, JSON_COMPACT);
	size_t n = strlen(t);

	json_decref(m);
	d->out = realloc(d->out, d->out_len + n + 1);
	memcpy(d->out + d->out_len, t, n);
	d->out[d->out_len + n] = '\n';
	d->out_len += n + 1;
	free(t);
}

static inline uint64_t fh_offline_plugged(const struct fh_dom *d)
{
	return d->plugged > d->online_granted ? d->plugged - d->online_granted : 0;
}

static inline void fh_status(struct fh_dom *d, struct fh_grant *g)
{
	fh_say(d, json_pack("{s:s,s:s,s:I,s:s,s:I,s:I,s:I,s:s}", "type", "status", "id", g->id, "generation",
			    (json_int_t)g->gen, "state", g->state, "requested_bytes", (json_int_t)g->bytes,
			    "applied_bytes", (json_int_t)g->applied, "seq", (json_int_t)++d->seq, "kind",
			    g->is_revoke ? "revoke" : "grant"));
}

/* The guest's agent reading one line the host sent. */
static inline void fh_guest_reads(struct fh *f, struct fh_dom *d, const char *line, size_t len)
{
	json_t *m = json_loadb(line, len, 0, NULL);
	const char *type = json_string_value(json_object_get(m, "type"));

	if (!m || !type || d->dead) {
		json_decref(m);
		return;
	}
	if (streq(type, "sync")) {
		fh_say(d, json_pack("{s:s,s:O,s:I}", "type", "sync", "nonce", json_object_get(m, "nonce"), "generation",
				    (json_int_t)d->last_gen));
	} else if (streq(type, "query")) {
		uint64_t total = d->boot + d->online_granted;
		d->queries_seen++;
		fh_say(d, json_pack("{s:s,s:{s:I,s:I,s:I,s:I,s:I,s:I}}", "type", "agent_status", "memory", "block_size",
				    (json_int_t)FH_BLOCK, "online_bytes", (json_int_t)total, "granted_bytes",
				    (json_int_t)d->online_granted, "standby_bytes", (json_int_t)fh_offline_plugged(d),
				    "mem_total_bytes", (json_int_t)total, "mem_available_bytes",
				    (json_int_t)(total > d->used_mem ? total - d->used_mem : 0)));
	} else if (streq(type, "ack")) {
		d->acks_seen++;
	} else if (streq(type, "grant") || streq(type, "revoke")) {
		uint64_t gen = (uint64_t)json_integer_value(json_object_get(m, "generation"));
		const char *id = json_string_value(json_object_get(m, "id"));
		bool rv = streq(type, "revoke");
		struct fh_grant *g;

		rv ? d->revokes_seen++ : d->grants_seen++;
		if (rv && d->deaf_revokes) {
			json_decref(m);
			return;
		}
		if (gen <= d->last_gen) {
			/* a replay: the recorded status, nothing applied again */
			d->replays_seen++;
			for (size_t i = 0; i < d->n_ops; i++)
				if (d->ops[i].gen == gen)
					fh_status(d, &d->ops[i]);
			json_decref(m);
			return;
		}
		d->last_gen = gen;
		g = &d->ops[d->n_ops++ % 64];
		*g = (struct fh_grant){ .gen = gen, .is_revoke = rv };
		snprintf(g->id, sizeof(g->id), "%s", id);
		if (json_is_integer(json_object_get(m, "size")))
			g->bytes = (uint64_t)json_integer_value(json_object_get(m, "size"));
		else if (json_object_get(m, "ranges"))
			g->bytes = d->n_dimms ? d->dimms[d->n_dimms - 1].size : 0;
		else if (json_object_get(m, "grant")) {
			const char *gid = json_string_value(json_object_get(m, "grant"));
			for (size_t i = 0; i < d->n_ops; i++)
				if (streq(d->ops[i].id, gid))
					g->bytes = d->ops[i].applied;
		}
		snprintf(g->state, sizeof(g->state), "accepted");
		fh_status(d, g);
		g->done_at = f->now + (rv ? 300 : d->online_ms);
	}
	json_decref(m);
}

/* The agent finishing what is due. */
static inline void fh_guest_work(struct fh *f, struct fh_dom *d)
{
	for (size_t i = 0; i < d->n_ops && i < 64; i++) {
		struct fh_grant *g = &d->ops[i];
		if (!streq(g->state, "accepted") || f->now < g->done_at || d->dead)
			continue;
		if (!g->is_revoke) {
			if (d->never_online)
				continue;
			if (fh_offline_plugged(d) >= g->bytes && f->now >= d->blocks_at) {
				g->applied = g->bytes;
				d->online_granted += g->bytes;
				snprintf(g->state, sizeof(g->state), "applied");
			} else {
				snprintf(g->state, sizeof(g->state), "rejected");
			}
		} else {
			uint64_t can = d->online_granted > d->pinned ? d->online_granted - d->pinned : 0;
			g->applied = g->bytes < can ? g->bytes : can;
			d->online_granted -= g->applied;
			snprintf(g->state, sizeof(g->state), g->applied == g->bytes ? "applied" : g->applied ? "partial" : "failed");
		}
		fh_status(d, g);
	}
}

/* ---- the hypervisor ops ---- */

static inline int fh_query(void *impl, const char *dom, const struct serve_policy *p, struct hv_mem *m, char *why,
			   size_t len)
{
	struct fh *f = impl;
	struct fh_dom *d = fh_dom(f, dom);

	(void)p;
	if (!d) {
		snprintf(why, len, "no domain");
		return -ENOENT;
	}
	*m = (struct hv_mem){ .kind = d->kind, .plugged = d->plugged, .requested = d->requested, .max = d->max,
			      .granule = d->granule, .always_plugged = d->kind == HV_STANDBY,
			      .busy = d->detach_alias[0] != '\0' };
	return 0;
}

static inline int fh_plug(void *impl, const char *dom, const struct serve_policy *p, uint64_t bytes,
			  struct hv_range *out, char *why, size_t len)
{
	struct fh *f = impl;
	struct fh_dom *d = fh_dom(f, dom);

	(void)p;
	if (!d)
		return -ENOENT;
	f->plugs++;
	if (d->kind == HV_DIMM) {
		struct hv_range *r = &d->dimms[d->n_dimms++];
		r->start = (4ull << 30) + (d->n_dimms - 1) * bytes;
		r->size = bytes;
		snprintf(r->alias, sizeof(r->alias), "%s", out ? out->alias : "dimm");
		if (out)
			*out = *r;
		d->plugged += bytes;
		d->requested += bytes;
		d->blocks_at = f->now + d->blocks_delay_ms;
		return 0;
	}
	if (d->requested + bytes > d->max) {
		snprintf(why, len, "above the device's size");
		return -ERANGE;
	}
	d->requested += bytes;
	d->blocks_at = f->now + d->blocks_delay_ms;
	return 0;
}

static inline int fh_unplug(void *impl, const char *dom, const struct serve_policy *p, uint64_t bytes,
			    const struct hv_range *range, char *why, size_t len)
{
	struct fh *f = impl;
	struct fh_dom *d = fh_dom(f, dom);

	(void)p;
	(void)why;
	(void)len;
	if (!d)
		return -ENOENT;
	f->unplugs++;
	if (d->kind == HV_DIMM) {
		if (!range)
			return -EINVAL;
		snprintf(d->detach_alias, sizeof(d->detach_alias), "%s", range->alias);
		d->detach_at = f->now + 5000;
		return 0;
	}
	d->requested = d->requested > bytes ? d->requested - bytes : 0;
	return 0;
}

static inline int fh_host_free(void *impl, uint64_t *out)
{
	struct fh *f = impl;
	*out = f->host_free;
	return 0;
}

static const struct hv_ops fh_ops = {
	.name = "fake", .query = fh_query, .plug = fh_plug, .unplug = fh_unplug, .host_free = fh_host_free,
};

/* ---- the controller's I/O ---- */

static inline int fh_io_send(void *ud, const char *domain, const char *buf, size_t len)
{
	struct fh *f = ud;
	struct fh_dom *d = fh_dom(f, domain);
	const char *p = buf, *e = buf + len;

	if (!d || !d->connected)
		return -ENOTCONN;
	while (p < e) {
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(e - p);
		if (n)
			fh_guest_reads(f, d, p, n);
		p += n + 1;
	}
	return 0;
}

static inline void fh_io_event(void *ud, json_t *ev)
{
	struct fh *f = ud;
	if (!f->quiet) {
		char *t = json_dumps(ev, JSON_COMPACT);
		printf("  event %s\n", t);
		free(t);
	}
	json_array_append(f->events, ev);
}

static inline void fh_io_log(void *ud, int prio, const char *domain, const char *msg)
{
	struct fh *f = ud;
	(void)prio;
	if (!f->quiet)
		printf("  log %s: %s\n", domain ? domain : "-", msg);
}

static inline int fh_events_named(struct fh *f, const char *dom, const char *name)
{
	size_t i;
	json_t *e;
	int n = 0;

	json_array_foreach(f->events, i, e) {
		if (streq(json_string_value(json_object_get(e, "event")), name) &&
		    (!dom || streq(json_string_value(json_object_get(e, "domain")), dom)))
			n++;
	}
	return n;
}

static inline struct fh_dom *fh_add(struct fh *f, const char *name, enum hv_kind kind)
{
	for (int i = 0; i < FH_MAX_DOMS; i++) {
		struct fh_dom *d = &f->d[i];
		if (d->used)
			continue;
		*d = (struct fh_dom){ .used = true, .kind = kind, .max = 4ull << 30, .granule = 2 * FH_MIB,
				      .boot = 1ull << 30, .used_mem = 300 * FH_MIB, .online_ms = 1000, .connected = true };
		if (kind == HV_DIMM)
			d->granule = 256 * FH_MIB;
		snprintf(d->name, sizeof(d->name), "%s", name);
		return d;
	}
	return NULL;
}

/* The controller over the fake (again after a "restart": the same state_dir). */
static inline int fh_start(struct fh *f)
{
	struct ctl_io io = { .send = fh_io_send, .event = fh_io_event, .log = fh_io_log, .ud = f };
	int r = ctl_new(&f->cfg, &fh_ops, f, &io, &f->ctl);

	for (int i = 0; r == 0 && i < FH_MAX_DOMS; i++)
		if (f->d[i].used) {
			r = ctl_domain_add(f->ctl, f->d[i].name, f->now);
			if (r == 0 && f->d[i].connected)
				ctl_channel_up(f->ctl, f->d[i].name, f->now);
		}
	return r;
}

static inline void fh_init(struct fh *f, const char *state_dir)
{
	memset(f, 0, sizeof(*f));
	f->now = 1000000;
	f->host_free = 64ull << 30;
	f->plug_rate = 128 * FH_MIB; /* 1 GiB in 0.8 s, as measured */
	f->events = json_array();
	f->cfg.state_dir = (char *)state_dir;
	f->cfg.interval = 1000;
	f->cfg.host_reserve = 0;
	serve_policy_defaults(&f->cfg.defaults);
	f->cfg.defaults.grow_cooldown = 2000;
	f->cfg.defaults.shrink_cooldown = 5000;
	f->cfg.defaults.slack_after = 30000;
	f->cfg.defaults.online_deadline = 10000;
	f->cfg.defaults.plug_deadline = 10000;
	f->cfg.defaults.unplug_deadline = 10000;
	f->cfg.defaults.revoke_backoff = 10000;
	f->cfg.defaults.query_interval = 1000;
}

/* One step without the controller's tick: devices move, events (coalesced), guests work and talk. */
static inline void fh_step_guests(struct fh *f)
{
	f->now += FH_STEP_MS;
	for (int i = 0; i < FH_MAX_DOMS; i++) {
		struct fh_dom *d = &f->d[i];
		struct hv_event ev = { .kind = HV_EV_SIZE };
		if (!d->used)
			continue;
		if (d->kind == HV_VIRTIO_MEM) {
			if (d->plugged < d->requested)
				d->plugged = d->plugged + f->plug_rate < d->requested ? d->plugged + f->plug_rate : d->requested;
			else if (d->plugged > d->requested) {
				uint64_t want = d->plugged - d->requested > f->plug_rate ? d->plugged - f->plug_rate : d->requested;
				if (want < d->unplug_floor)
					want = d->unplug_floor < d->plugged ? d->unplug_floor : d->plugged;
				d->plugged = want;
				if (d->plugged < d->online_granted) {
					/* the driver offlines online memory itself: no floor */
					d->online_granted = d->plugged;
					if (d->boot + d->online_granted < d->used_mem)
						d->panicked = true; /* as measured: OOM, init killed, panic */
				}
			}
			/* coalesced: at most one event a second, the last with the final size */
			if (d->plugged != d->last_event_size && f->now - d->last_event_at >= 1000) {
				d->last_event_at = f->now;
				d->last_event_size = d->plugged;
				ev.plugged = d->plugged;
				ctl_hv_event(f->ctl, d->name, &ev, f->now);
			}
		}
		if (d->kind == HV_DIMM && d->detach_alias[0] && !d->detach_hang && f->now >= d->detach_at) {
			struct hv_event rv = { .kind = d->detach_fail ? HV_EV_REMOVAL_FAILED : HV_EV_REMOVED };
			if (!d->detach_fail)
				for (size_t k = 0; k < d->n_dimms; k++)
					if (streq(d->dimms[k].alias, d->detach_alias)) {
						d->plugged -= d->dimms[k].size;
						d->requested -= d->dimms[k].size;
						d->dimms[k] = d->dimms[--d->n_dimms];
						break;
					}
			d->detach_alias[0] = '\0';
			ctl_hv_event(f->ctl, d->name, &rv, f->now);
		}
		fh_guest_work(f, d);
		if (d->out_len && d->connected) {
			/* deliver what the guest wrote, line by line, while the controller reads */
			size_t pos = 0;
			while (pos < d->out_len) {
				char *nl = memchr(d->out + pos, '\n', d->out_len - pos);
				size_t n = (size_t)(nl - (d->out + pos));
				int r = ctl_guest_line(f->ctl, d->name, d->out + pos, n, f->now);
				pos += n + 1;
				if (r == -EAGAIN)
					break; /* paused until the next tick, as serve_loop.c does */
			}
			memmove(d->out, d->out + pos, d->out_len - pos);
			d->out_len -= pos;
		}
	}
}

/* One step: fh_step_guests(), then the controller ticks. */
static inline void fh_step(struct fh *f)
{
	fh_step_guests(f);
	ctl_tick(f->ctl, f->now);
}

static inline void fh_run(struct fh *f, int64_t ms)
{
	for (int64_t t = 0; t < ms; t += FH_STEP_MS)
		fh_step(f);
}

/* The guest's agent sends a request (PSI) or an offer. */
static inline void fh_advice(struct fh_dom *d, const char *type, uint64_t bytes)
{
	fh_say(d, json_pack("{s:s,s:s,s:I,s:s,s:I}", "type", type, "id", streq(type, "request") ? "rq-1" : "of-1",
			    "bytes", (json_int_t)bytes, "reason", "test", "seq", (json_int_t)++d->seq));
}

static inline struct dom_view fh_view(struct fh *f, const char *name)
{
	struct dom_view v = { 0 };
	for (size_t i = 0; i < ctl_domains(f->ctl); i++) {
		ctl_view(f->ctl, i, &v);
		if (streq(v.name, name))
			return v;
	}
	memset(&v, 0, sizeof(v));
	return v;
}

static inline void fh_done(struct fh *f)
{
	ctl_free(f->ctl);
	f->ctl = NULL;
	for (int i = 0; i < FH_MAX_DOMS; i++)
		free(f->d[i].out);
	json_decref(f->events);
}
