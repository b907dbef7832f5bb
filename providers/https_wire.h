/* SPDX-License-Identifier: MIT */
/*
 * What the HTTPS provider reads from a control plane's answers, apart from
 * transport: the long poll's {"grants": [...]}, the words of an error
 * answer, and whether a 2xx body acknowledges a report.  Pure functions on
 * the bytes received (fuzzed by tests/fuzz/fuzz_https.c); no I/O.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most messages taken from one answer; the rest come with the next poll
 * (the protocol lets a server answer with a prefix).  Also the poll's
 * limit= hint. */
#define HTTPS_BATCH_MAX 256

/* One message of an answer, in the order the agent handles them. */
struct https_entry {
	size_t index;            /* position in the answer's array */
	uint64_t generation;     /* 1..2^53 */
	json_t *obj;             /* the message as parsed (a reference), for msg_from_json() */
	char id[64];             /* "" when it has no usable id (for the log) */
};

/* A message skipped because its generation is unusable: it never moves the
 * poll's cursor (a generation of 2^62 would otherwise wedge it). */
struct https_skip {
	size_t index;
	char id[64];
	char why[96];            /* "generation 4611686018427387904 is above 2^53", ... */
};

struct https_batch {
	struct https_entry *entries; /* valid generations, ascending, at most HTTPS_BATCH_MAX */
	size_t n_entries;
	size_t n_deferred;       /* valid ones beyond the batch: the next poll brings them */
	struct https_skip *skips;
	size_t n_skips;          /* every skipped message counts ... */
	size_t n_skips_shown;    /* ... the first few are described in SKIPS */
	uint64_t max_taken;      /* highest generation in ENTRIES, 0 none */
};

#define HTTPS_SKIPS_SHOWN 8

/* Parses a 200 answer of LEN bytes.  0 with *B filled (free with
 * https_batch_free), or -EBADMSG (not {"grants": [...]}) / -ENOMEM with WHY
 * saying what was wrong. */
int https_parse_grants(const char *body, size_t len, struct https_batch *b, char *why, size_t whylen);
void https_batch_free(struct https_batch *b);

/* The server's words for an error answer, one printable line of at most 200
 * characters: "message" of a protocol error object, else the start of the
 * body; "(no message)" when there is none.  OUT is always terminated. */
void https_server_message(const char *body, size_t len, char *out, size_t outlen);

/* A 2xx to a status or an inventory counts when its body is empty or a JSON
 * object: a proxy answering 200 with a page of HTML has stored nothing. */
bool https_ack_body_ok(const char *body, size_t len);
