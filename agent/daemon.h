/* SPDX-License-Identifier: MIT */
/*
 * The agent's engine: configuration, hotplug backend, journal, the grant
 * queue and the executor thread that applies it, status, events, metrics.
 *
 * Threads: the caller's (main loop, API and provider threads) only queue work
 * and read state under d->lock; all kernel writes happen on the executor
 * thread, one grant at a time, so a minute-long offline never stalls the API.
 * Every accepted grant is in the journal (fsync'd) before the caller learns
 * it was accepted.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "events.h"
#include "log.h"

struct daemon;
struct mg_config;

int daemon_new(const struct mg_config *cfg, const struct mg_log *log, struct daemon **out);
/* Reconciles the journal with the kernel and starts the executor thread. */
int daemon_start(struct daemon *d);
/* Asks the executor to stop after the block operation in progress; joins it;
 * restores what the agent changed at start (auto_online_blocks). */
void daemon_stop(struct daemon *d);
void daemon_free(struct daemon *d);

/* Swaps in a new configuration (SIGHUP); settings that need a restart
 * (backend, state_dir, socket) are kept and a warning names them. */
int daemon_reload(struct daemon *d, const struct mg_config *cfg);

/*
 * A grant or revocation from SOURCE ("local", "https", "channel").  BODY is a
 * wire-protocol message.  Sets *HTTP_STATUS (202 accepted, 200 replay of a
 * recorded generation, 400 malformed, 409 rejected by the planner, 413 too
 * large, 503 stopping) and *REPLY (a status message or an error object).
 * Returns 0 whenever a reply was produced.
 */
int daemon_submit(struct daemon *d, const char *source, const char *body, size_t len,
		  int *http_status, json_t **reply);

/* --- for providers (https, channel): the outbox of reports to deliver ---- */

/* The last generation recorded from SOURCE (0: none yet). */
uint64_t daemon_last_generation(struct daemon *d, const char *source);
/* Oldest undelivered report for DEST: 0 with *REPORT (new reference) and
 * *SEQ, -ENOENT when there is none. */
int daemon_outbox_peek(struct daemon *d, const char *dest, uint64_t *seq, json_t **report);
/* How many reports for DEST wait in the outbox (a provider's back-pressure). */
size_t daemon_outbox_count(struct daemon *d, const char *dest);
/* DEST acknowledged the report SEQ: it is removed (durably). */
int daemon_outbox_ack(struct daemon *d, const char *dest, uint64_t seq);
/* Sleeps until a report for DEST is waiting, TIMEOUT_MS passed (-1: no
 * limit) or daemon_wake_providers() was called.  1 a report is waiting,
 * 0 otherwise. */
int daemon_outbox_wait(struct daemon *d, const char *dest, int timeout_ms);
/* Queues a copy of REPORT for DEST durably and wakes its waiters (hooks,
 * pressure requests).  -ENOBUFS when the destination's outbox is full. */
int daemon_outbox_push(struct daemon *d, const char *dest, json_t *report);
/* Wakes every daemon_outbox_wait() (used by a provider that stops). */
void daemon_wake_providers(struct daemon *d);

json_t *daemon_status_json(struct daemon *d);
int daemon_blocks_json(struct daemon *d, json_t **out);
json_t *daemon_grants_json(struct daemon *d);
json_t *daemon_grant_json(struct daemon *d, const char *id); /* NULL: no such grant */
int daemon_metrics_text(struct daemon *d, char **out);
struct event_bus *daemon_events(struct daemon *d);
/* An eventfd that becomes readable whenever the agent's state changed
 * (the main loop then updates systemd's STATUS=); drain it after reading. */
int daemon_notify_fd(struct daemon *d);
void daemon_notify_drain(struct daemon *d);

/* One line for systemd's STATUS= ("idle; 2 grants applied, 1.0G granted"). */
void daemon_status_line(struct daemon *d, char *buf, size_t len);
