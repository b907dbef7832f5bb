/* SPDX-License-Identifier: MIT */
/*
 * What the local REST API reads from a client before the engine sees it:
 * sequence numbers (?after=, Last-Event-ID), the body of a request as it
 * arrives in pieces, and the fields of a published event that decide whether
 * and under which SSE name a stream sends it.  Pure functions on their
 * arguments (fuzzed by tests/fuzz/fuzz_api.c); no I/O, no locks.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A decimal sequence number: digits only, no sign, no blank, fits 64 bits.
 * 0 with *OUT, or -EINVAL. */
int api_parse_seq(const char *s, uint64_t *out);

/* A request body gathered piece by piece, never more than LIMIT bytes. */
struct api_body {
	char *data;        /* NUL-terminated; NULL while empty */
	size_t len;
	bool too_large;    /* a piece would have passed LIMIT: DATA was dropped */
};

/* Appends N bytes; past LIMIT the body is dropped and TOO_LARGE set (0).
 * -ENOMEM when out of memory. */
int api_body_append(struct api_body *b, const char *piece, size_t n, size_t limit);
void api_body_free(struct api_body *b);

/* What one published event (JSON text) means to a stream. */
struct api_event_view {
	bool wanted;       /* passes the stream's grant filter */
	bool terminal;     /* a final status of that grant (for until=done) */
	char name[48];     /* SSE "event:" name: "status", the agent event's name, or "message" */
};

/* Reads TEXT (LEN bytes) for a stream following GRANT (NULL: every event).
 * Text that is not a JSON object is wanted only without a filter, named
 * "message".  Never fails. */
void api_event_view(const char *text, size_t len, const char *grant, struct api_event_view *v);

/* The final states of a grant or revocation. */
bool api_state_is_terminal(const char *state);

/* A query flag: "", 1, true, yes, on -> 1; 0, false, no, off -> 0; else -EINVAL. */
int api_parse_flag(const char *s);
