/* SPDX-License-Identifier: MIT */
/*
 * The durable journal of memgrantd (docs/journal.md): grants and revocations,
 * the last generation per source, which blocks each grant owns, the outbox of
 * status reports not yet delivered, and the marker of the block step in
 * flight.
 *
 * Contract:
 * - Every mutating call has reached the disk (write, fsync, rename, fsync of
 *   the directory) when it returns 0; acknowledge a grant only after that.
 *   When it fails (-errno), neither the disk nor the in-memory state changed.
 * - Calls that change two things (a new record and its generation; a state
 *   and the report queued for it) change both or neither.
 * - journal_open() never drops what it cannot read: a corrupt or truncated
 *   file is -EBADMSG with a message saying which file and what is wrong.
 * - Not thread-safe: the caller serializes every call (memgrantd holds one
 *   mutex).  One process at a time: journal_open() takes an exclusive lock
 *   on STATE_DIR/lock and fails with -EBUSY when another holder exists.
 * - Bounded: finished records (final state, owning no block) beyond
 *   history_max are dropped oldest first, so a write costs O(live state),
 *   not O(history).  Their source's generation is kept.
 * - Returns 0 or a negative errno; never prints.
 */
#pragma once

#include "agent/message.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define JOURNAL_HISTORY_DEFAULT 100  /* finished records kept */
#define JOURNAL_OUTBOX_DEFAULT 4096  /* undelivered reports per destination */
#define JOURNAL_FILE_MAX (64u << 20) /* larger journal files are refused on load */

struct journal;

struct journal_options {
	unsigned history_max; /* 0: JOURNAL_HISTORY_DEFAULT */
	unsigned outbox_max;  /* 0: JOURNAL_OUTBOX_DEFAULT */
};

/* A grant's or revocation's record; fill with journal_get_grant(), release with journal_grant_done(). */
struct journal_grant {
	char id[MSG_ID_MAX + 1];
	char source[MSG_ID_MAX + 1];
	enum msg_type type;        /* MSG_GRANT or MSG_REVOKE */
	uint64_t generation;
	enum msg_state state;
	json_t *request;           /* canonical request (msg_to_json), own reference */
	json_t *status;            /* last status report, own reference, NULL when none yet */
	time_t created, updated;
	size_t n_blocks;           /* blocks it owns now */
};

/* A block this agent onlined, as the planner needs it for revocations. */
struct journal_block {
	uint64_t block;
	uint64_t seq;              /* order onlined: larger is newer, never reused */
	enum mem_zone zone;        /* MEM_ZONE_MOVABLE or MEM_ZONE_NORMAL */
	bool memmap;               /* onlined with memmap_on_memory */
	char grant_id[MSG_ID_MAX + 1];
};

enum journal_step_kind {
	JOURNAL_STEP_BRING_UP,     /* configure + online */
	JOURNAL_STEP_TAKE_DOWN,    /* offline + deconfigure */
};

/* The kernel step about to run; written before the sysfs write, cleared after. */
struct journal_step {
	char op[MSG_ID_MAX + 1];   /* grant or revocation id */
	enum journal_step_kind kind;
	uint64_t block;
	char phase[32];            /* optional detail, [a-z_] ("configure", "online"); "" none */
	int memmap;                /* 0/1 wanted, -1 not applicable */
	enum mem_zone zone;        /* wanted zone, MEM_ZONE_AUTO when not applicable */
	time_t started;            /* set by journal_begin_step() */
};

enum journal_gen {
	JOURNAL_GEN_NEW,           /* above the last generation of the source: apply */
	JOURNAL_GEN_REPLAY,        /* at or below, and the record with it is kept: answer with it */
	JOURNAL_GEN_STALE,         /* at or below, no record kept: reject as stale */
};

/* Creates STATE_DIR (0700) when missing, locks it, removes stale temporary
 * files, loads and validates.  ERR (may be NULL) receives a one-line reason
 * on failure. -EBADMSG corrupt, -EBUSY locked by another process. */
int journal_open(const char *state_dir, const struct journal_options *opts, struct journal **out,
		 char *err, size_t errlen);
void journal_close(struct journal *j);
static inline void journal_closep(struct journal **j) { journal_close(*j); }
#define _cleanup_journal_ __attribute__((cleanup(journal_closep)))

/* ---- generations and records -------------------------------------------- */

uint64_t journal_last_generation(struct journal *j, const char *source); /* 0: none yet */
/* Returns an enum journal_gen (>= 0) or -EINVAL for a bad source.  On
 * JOURNAL_GEN_REPLAY, RECORDED (may be NULL) is filled: journal_grant_done() it. */
int journal_lookup_generation(struct journal *j, const char *source, uint64_t generation,
			      struct journal_grant *recorded);

/* Records a new grant or revocation from SOURCE and raises the source's
 * generation to M->generation, in one write.  STATUS (may be NULL) is stored;
 * when OUTBOX_DEST is not NULL it is also queued there (STATUS required).
 * -ESTALE generation not above the last, -EEXIST id already recorded,
 * -EINVAL sync message or bad source, -ENOBUFS outbox full. */
int journal_record_grant(struct journal *j, const char *source, const struct msg *m,
			 enum msg_state state, json_t *status, const char *outbox_dest);

/* Sets the state; STATUS (may be NULL: keep the stored one) replaces the
 * stored report; OUTBOX_DEST (may be NULL) queues the resulting report, all in
 * one write.  -ENOENT unknown id, -EINVAL nothing to queue, -ENOBUFS outbox full. */
int journal_set_state(struct journal *j, const char *id, enum msg_state state, json_t *status,
		      const char *outbox_dest);

/* Fills OUT (journal_grant_done() it). -ENOENT unknown id. */
int journal_get_grant(struct journal *j, const char *id, struct journal_grant *out);
void journal_grant_done(struct journal_grant *g);
/* All records, oldest first; free with journal_grants_free(). */
int journal_list_grants(struct journal *j, struct journal_grant **out, size_t *n);
void journal_grants_free(struct journal_grant *g, size_t n);
/* The stored record(s) as JSON (docs/journal.md "grants" entries), for the API; NULL when unknown/ENOMEM. */
json_t *journal_grant_json(struct journal *j, const char *id);
json_t *journal_grants_json(struct journal *j);

/* ---- owned blocks ---------------------------------------------------------- */

/* GRANT_ID now owns BLOCK; assigns the next seq (SEQ may be NULL).
 * -ENOENT unknown grant, -EEXIST block already owned, -EINVAL zone not movable/normal. */
int journal_add_owned_block(struct journal *j, const char *grant_id, uint64_t block,
			    enum mem_zone zone, bool memmap, uint64_t *seq);
/* Whoever owned BLOCK no longer does. -ENOENT when nobody did. */
int journal_remove_owned_block(struct journal *j, uint64_t block);
/* OUT (may be NULL) filled; -ENOENT when not ours. */
int journal_find_owned_block(struct journal *j, uint64_t block, struct journal_block *out);
/* Every owned block, oldest seq first; free(*out). */
int journal_owned_blocks(struct journal *j, struct journal_block **out, size_t *n);

/* ---- the step in flight ------------------------------------------------------ */

/* -EBUSY a step is already pending, -ENOENT unknown op, -EINVAL bad fields. */
int journal_begin_step(struct journal *j, const struct journal_step *step);
/* -ENOENT when no step is pending. */
int journal_end_step(struct journal *j);
/* 0 and OUT filled, -ENOENT none: what a crash interrupted. */
int journal_pending_step(struct journal *j, struct journal_step *out);

/* ---- outbox ---------------------------------------------------------------------- */

/* Queues a copy of REPORT for DEST; SEQ (may be NULL) gets its sequence
 * (per destination, from 1, never reused). -ENOBUFS when outbox_max are waiting. */
int journal_outbox_push(struct journal *j, const char *dest, json_t *report, uint64_t *seq);
/* Oldest undelivered report for DEST: *REPORT is a new reference. -ENOENT empty. */
int journal_outbox_peek(struct journal *j, const char *dest, uint64_t *seq, json_t **report);
/* Delivered: removes the report with SEQ. -ENOENT when not queued (already acknowledged). */
int journal_outbox_ack(struct journal *j, const char *dest, uint64_t seq);
size_t journal_outbox_count(struct journal *j, const char *dest);
