/* SPDX-License-Identifier: MIT */
/*
 * Event bus: a bounded ring of recent events (JSON text; at most CAPACITY
 * events and 4 MiB), each with a
 * sequence number, for GET /v1/events (server-sent events) and `--wait`.
 * Publishers never block on readers; a reader that falls more than the ring's
 * capacity behind is told how many events it missed.  Thread-safe.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct event_bus;

int events_new(size_t capacity, struct event_bus **out);
void events_free(struct event_bus *b);

/* Publishes EV (a JSON object; a "seq" member is added).  Takes no reference. */
uint64_t events_publish(struct event_bus *b, json_t *ev);

/* Waits up to TIMEOUT_MS for an event with seq > AFTER.  Returns 1 with
 * *TEXT (malloc'd JSON) and *SEQ set, 0 on timeout, -EPIPE once the bus is
 * closed, other -errno on error.
 * *MISSED is set to the number of events lost to the ring's wrap-around. */
int events_wait(struct event_bus *b, uint64_t after, int timeout_ms, char **text, uint64_t *seq,
		uint64_t *missed);

uint64_t events_last_seq(struct event_bus *b);

/* Wakes every waiter, which then returns -EPIPE, as do later waits. */
void events_close(struct event_bus *b);

/* FN(ARG) is called after every publish and after events_close(), on the
 * publisher's thread with no lock of the bus held (a reader that does not
 * block, such as a suspended HTTP stream, resumes from there).  One listener;
 * NULL removes it, and returns only once a call in progress has ended. */
void events_set_listener(struct event_bus *b, void (*fn)(void *arg), void *arg);
