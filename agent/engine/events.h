/* SPDX-License-Identifier: MIT */
/*
 * Event bus: a bounded ring of recent events (JSON text; at most CAPACITY
 * events and EVENTS_TEXT_BYTES as kept: reports of many blocks with them as
 * runs), each with a
 * sequence number, for GET /v1/events (server-sent events) and `--wait`.
 * Publishers never block on readers; a reader that falls more than the ring's
 * capacity behind is told how many events it missed.  Thread-safe.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* the reader's half (events_wait(), events_last_seq(), events_set_listener())
 * is the port's: agent/engine/engine.h */
#include "agent/engine/engine.h"

/* The kept texts' bound.  A 4,096-block grant and its revocation keep some
 * 35 kB (51 events as runs): 256 KiB holds several such cycles, ample for
 * a stream that reconnects with Last-Event-ID, and its pages, touched as
 * texts reach them, are not a megabyte that fills over tens of cycles. */
#define EVENTS_TEXT_BYTES (256u << 10)

struct event_bus;

int events_new(size_t capacity, struct event_bus **out);
void events_free(struct event_bus *b);

/* Publishes EV (a JSON object; a "seq" member is added).  Takes no reference. */
uint64_t events_publish(struct event_bus *b, json_t *ev);
/* The same for a status report whose blocks are runs already
 * (report_runs_of_report()): kept so, read with them listed. */
uint64_t events_publish_runs(struct event_bus *b, json_t *ev);

/* Wakes every waiter, which then returns -EPIPE, as do later waits. */
void events_close(struct event_bus *b);
