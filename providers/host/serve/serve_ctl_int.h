/* SPDX-License-Identifier: MIT */
/*
 * Inside the per-domain controller: serve_ctl.c (sessions, messages, the
 * two-phase transitions) and serve_tick.c (deadlines, the control law and
 * the budget each tick, the views) share the domain's state and the
 * transitions.  Nothing outside these two files includes this.
 */
#pragma once

#include "providers/host/serve/serve.h"

struct dom {
	char name[SERVE_NAME_MAX];
	const struct serve_policy *p;
	struct dom_record rec;
	struct hv_mem hv;
	bool hv_known;
	/* session */
	bool connected, synced;
	uint64_t nonce, agent_generation;
	bool op_sent;
	int64_t op_sent_at;
	bool journal_behind;         /* the last journal write failed: the record on disk is an older one */
	uint64_t ack_held;           /* a report's seq, acknowledged once the journal holds what it meant (0 none) */
	int64_t ack_retry_at;        /* when the journal is tried again for it */
	int64_t ack_retry_ms;        /* 0.5 s, doubling to 5 s */
	int64_t regrant_at;          /* >0: send the grant again then (its blocks were not there yet) */
	unsigned regrants;           /* of the operation in flight: the wait doubles from 100 ms to 500 ms */
	int64_t refused_at;          /* the last shrink.refused without an offer (-1 none) */
	/* what the agent said */
	bool have_status, reconciled;
	uint64_t block, agent_granted, mem_total, mem_available;
	bool have_usage;
	int64_t query_at;
	bool query_out;
	/* advice */
	uint64_t request, offer;
	int64_t request_at;
	int64_t slack_since;
	/* timing */
	int64_t grow_ok_at, shrink_ok_at, backoff, grow_backoff;
	int64_t deadline, phase_at;
	uint64_t late_applied;       /* what that grant applied after all */
	char late_id[MSG_ID_MAX + 1];  /* an operation given up on: its late report still counts */
	enum dom_phase late_phase;
	uint64_t late_bytes;
	int unplug_tries;
	uint64_t unusable;
	/* the guest's line budget */
	double tokens;
	int64_t tokens_at;
	struct dom_view v;           /* counters; v.name etc. filled by ctl_view */
	char last_error[192];
};

struct ctl {
	const struct serve_config *cfg;
	const struct hv_ops *hv;
	void *hv_impl;
	struct ctl_io io;
	struct dom **doms;
	size_t n, cap;
};


void dc_say(struct ctl *c, struct dom *d, int prio, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void dc_emit(struct ctl *c, struct dom *d, const char *name, json_t *fields);
struct dom *dc_find(const struct ctl *c, const char *name);
int dc_send_json(struct ctl *c, struct dom *d, json_t *m);
int dc_journal(struct ctl *c, struct dom *d);
void dc_send_op(struct ctl *c, struct dom *d, int64_t now);
int dc_new_op_id(struct ctl *c, struct dom *d);
void dc_set_phase(struct dom *d, enum dom_phase ph, int64_t now, int64_t within);
void dc_go_idle(struct ctl *c, struct dom *d, int64_t now);
/* The held ack sent once the journal holds what its report meant (retried
 * from ctl_tick()). */
void dc_ack_when_journaled(struct ctl *c, struct dom *d, int64_t now);
void dc_start_grant(struct ctl *c, struct dom *d, uint64_t bytes, int64_t now);
void dc_start_unplug(struct ctl *c, struct dom *d, uint64_t bytes, int64_t now);
/* The device is down to the unplug's target: counted, said ("unplugged"), idle. */
void dc_unplug_done(struct ctl *c, struct dom *d, int64_t now);
void dc_start_grow(struct ctl *c, struct dom *d, uint64_t bytes, const char *why_grow, int64_t now);
void dc_start_shrink(struct ctl *c, struct dom *d, uint64_t bytes, const char *why_shrink, int64_t now);
void dc_take_back(struct ctl *c, struct dom *d, int64_t now);
void dc_refresh_hv(struct ctl *c, struct dom *d);
