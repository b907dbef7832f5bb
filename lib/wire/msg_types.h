/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol v1 messages as C types (docs/protocol.md): struct msg, its
 * errors, states and names, without JSON, so that the engine's port
 * (agent/engine/engine.h) carries them without jansson.  The JSON side
 * (parsing from and building jansson values) is lib/wire/message.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hotplug/block.h"

#define MSG_ID_MAX 63                      /* id: 1..63 of [A-Za-z0-9._:-] */
#define MSG_GENERATION_MAX (1ULL << 53)    /* largest integer every JSON reader keeps exact */
#define MSG_LIST_MAX 65536                 /* entries in "blocks" / "ranges" */
#define MSG_RANGE_MAX 40                   /* "0x" + 16 digits, "-", "0x" + 16 digits */

enum msg_type {
	MSG_GRANT,
	MSG_REVOKE,
	MSG_SYNC,
};

/* What a grant or revocation is about: exactly one per message. */
enum msg_target {
	MSG_BY_SIZE,   /* grant, revoke: "size" */
	MSG_BY_BLOCKS, /* grant, revoke: "blocks" */
	MSG_BY_RANGES, /* grant: "ranges" */
	MSG_BY_GRANT,  /* revoke: "grant" (undo that grant) */
};

enum msg_memmap {
	MSG_MEMMAP_AUTO, /* "auto": the policy decides */
	MSG_MEMMAP_ON,   /* true */
	MSG_MEMMAP_OFF,  /* false */
};

/* zones: enum mem_zone (hotplug/block.h) */

/* Life of a grant or revocation, as reported in "state". */
enum msg_state {
	MSG_STATE_ACCEPTED,
	MSG_STATE_IN_PROGRESS,
	MSG_STATE_APPLIED,
	MSG_STATE_PARTIAL,
	MSG_STATE_FAILED,
	MSG_STATE_REJECTED,
	MSG_STATE_CANCELLED, /* cancelled before any block was done */
};

struct msg_error {
	char code[16];     /* "EINVAL", "E2BIG", ... (errno name) */
	char message[256]; /* names the field and says why */
};

struct msg {
	enum msg_type type;
	char id[MSG_ID_MAX + 1];       /* "" for sync */
	uint64_t generation;           /* 1..2^53; 0 for sync */
	uint64_t nonce;                /* sync only */

	enum msg_target target;        /* grant, revoke */
	uint64_t size;                 /* MSG_BY_SIZE: bytes, > 0 */
	uint64_t *blocks;              /* MSG_BY_BLOCKS: ids as given, no duplicates */
	size_t n_blocks;
	char **ranges;                 /* MSG_BY_RANGES: "0xSTART-0xEND" as given (the planner parses) */
	size_t n_ranges;
	char grant[MSG_ID_MAX + 1];    /* MSG_BY_GRANT: id of the grant to undo */

	/* grant only */
	enum msg_memmap memmap;        /* default auto */
	enum mem_zone zone;            /* default auto */
	bool has_not_after;
	time_t not_after;              /* UTC, when has_not_after */
	bool contiguous;               /* default false */
};

int msg_parse(const char *text, size_t len, size_t limit, struct msg **out, struct msg_error *err);
/* MSG_PARSE_UNNUMBERED: a grant or revocation may leave out "id" ("" then)
 * and "generation" (0): an operator's message that the engine numbers. */
#define MSG_PARSE_UNNUMBERED 1u
int msg_parse_opts(const char *text, size_t len, size_t limit, unsigned flags, struct msg **out,
		   struct msg_error *err);
void msg_free(struct msg *m);
static inline void msg_freep(struct msg **m) { msg_free(*m); }
#define _cleanup_msg_ __attribute__((cleanup(msg_freep)))


/* Fill ERR with CODE (a positive or negative errno) and a printf message; returns -|code|. */
int msg_error_set(struct msg_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

const char *msg_type_name(enum msg_type t);       /* "grant", "revoke", "sync" */
const char *msg_state_name(enum msg_state s);     /* "accepted", ... */
int msg_state_parse(const char *s, enum msg_state *out);
bool msg_state_is_final(enum msg_state s);        /* applied, partial, failed, rejected, cancelled */
bool msg_id_valid(const char *s);                 /* 1..63 of [A-Za-z0-9._:-] */

/* RFC 3339 UTC: "2026-12-03T10:00:00Z" (fractional seconds accepted, dropped). */
int msg_time_parse(const char *s, time_t *out);
void msg_time_format(time_t t, char buf[static 32]);

/* ---- agent to control plane ------------------------------------------- */

struct msg_status_block {
	uint64_t block;
	bool configured;
	int memmap_on_memory;      /* 0/1, -1 unknown (null) */
	const char *state;         /* "online", "offline", ...; NULL -> null */
	const char *zone;          /* "Movable", "Normal"; NULL -> null */
	const char *error_code;    /* NULL -> "error": null */
	const char *error_message;
};

struct msg_status {
	const char *agent;
	const char *id;
	uint64_t generation;
	enum msg_state state;
	uint64_t requested_bytes;
	uint64_t applied_bytes;
	const struct msg_status_block *blocks;
	size_t n_blocks;
	const char *error_code;    /* NULL -> "error": null */
	const char *error_message;
	uint64_t block_size;       /* also used to print each block's "range" */
	uint64_t online_bytes;
	uint64_t standby_bytes;
	const char *const *decisions; /* one-line policy reasons */
	size_t n_decisions;
	const char *source;        /* "https", "channel", "local", ...; NULL -> null */
};

