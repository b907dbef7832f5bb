/* SPDX-License-Identifier: MIT */
/*
 * The durable store of memgrantd as an intent log (docs/journal.md): what it
 * was asked (requests accepted, with their source and generation), what it
 * set out to do (intents: the ordered blocks an operation will bring up or
 * take down), what came of it (results), the outbox of status reports per
 * destination, and the blocks an operator adopted or released.  The kernel
 * records per-block progress; after a crash, recovery compares an open
 * intent with the kernel.  Status reports come in typed (struct report)
 * and are stored in the journal's own JSON (lib/wire/report_json.h);
 * intentlog_grant_report() decodes them.
 *
 * STATE_DIR/journal.log is an append-only recordlog (agent/journal/recordlog.h) of
 * JSON payloads; replaying it at open rebuilds the live state: grants with
 * the blocks they own, operations not finished, open intents, the outbox,
 * the last generation per source.  When the file outgrows
 * max(compact_min, 4 x the last snapshot) it is rewritten as one snapshot.
 * Formats before memgrant 0.1.0 are not read.
 *
 * Contract:
 * - Every mutating call is durable when it returns 0 (one write and one
 *   fdatasync), except between intentlog_batch_begin() and
 *   intentlog_batch_end(), where calls change memory only and
 *   intentlog_batch_end() makes all of them durable with one write and one
 *   fdatasync, or none (memory rolls back).  When a call fails (-errno),
 *   neither the disk nor the in-memory state changed.
 * - The O(1)-per-operation path: intentlog_accept() (before acknowledging),
 *   intentlog_intent() (before the first kernel write), intentlog_result()
 *   (after the last).  Per-block progress is not journaled.
 * - intentlog_open() never drops what it cannot read: corruption in the
 *   middle of the log is -EBADMSG with the file and byte offset; only a torn
 *   tail (the last, unacknowledged append) is cut, and *opened reports it.
 *   A whole record of a future format (flags, type, version) is -EBADMSG
 *   wherever it is; every -EBADMSG message ends with what to do (restore,
 *   move aside and `memgrantctl adopt`, or upgrade memgrant).  A log shorter
 *   than its end mark (journal.log.end) lost acknowledged records:
 *   *opened says so (lost).
 * - Not thread-safe; one process at a time (flock on STATE_DIR/lock, -EBUSY).
 * - Bounded like the old journal: finished records beyond history_max are
 *   dropped, the outbox holds outbox_max reports per destination.
 * - Returns 0 or a negative errno; never prints.
 */
#pragma once

#include "lib/wire/message.h"
#include "lib/wire/report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define INTENTLOG_HISTORY_DEFAULT 100
#define INTENTLOG_OUTBOX_DEFAULT 4096
#define INTENTLOG_COMPACT_MIN_DEFAULT (1u << 20)

/* record types of journal.log (docs/journal.md) */
enum intentlog_rec {
	ILOG_REC_SNAPSHOT = 1,  /* the whole live state; first record after a compaction */
	ILOG_REC_ACCEPT = 2,    /* a request recorded, its source's generation raised */
	ILOG_REC_STATE = 3,     /* state and report of an operation */
	ILOG_REC_INTENT = 4,    /* the blocks an operation will bring up / take down, in order */
	ILOG_REC_RESULT = 5,    /* what an intent did: blocks done, state, applied_bytes */
	ILOG_REC_ADOPT = 6,     /* blocks that become a grant's (operator, or one block at a time) */
	ILOG_REC_RELEASE = 7,   /* blocks that are no longer anybody's */
	ILOG_REC_OUTBOX_PUSH = 8,
	ILOG_REC_OUTBOX_ACK = 9,
};

struct intentlog;

struct intentlog_options {
	unsigned history_max;  /* 0: INTENTLOG_HISTORY_DEFAULT */
	unsigned outbox_max;   /* 0: INTENTLOG_OUTBOX_DEFAULT */
	uint64_t compact_min;  /* 0: INTENTLOG_COMPACT_MIN_DEFAULT; bytes below which it never compacts */
};

/* What intentlog_open() found. */
struct intentlog_opened {
	bool fresh;            /* no log: nothing was ever recorded here */
	bool torn;             /* a torn tail was cut */
	uint64_t torn_offset;  /* where, when torn */
	char torn_why[96];
	/* the log ends before where it had ended (journal.log.end, recordlog.h):
	 * acknowledged records are gone (cut at a record boundary, an older
	 * copy put back); LOST_END is where it had ended */
	bool lost;
	uint64_t lost_end;
	uint64_t records;      /* records replayed */
};

struct intentlog_grant {
	char id[MSG_ID_MAX + 1];
	char source[MSG_ID_MAX + 1];
	enum msg_type type;       /* MSG_GRANT or MSG_REVOKE */
	uint64_t generation;
	enum msg_state state;
	json_t *request;          /* own reference */
	json_t *status;           /* own reference, NULL when none */
	time_t created, updated;
	size_t n_blocks;          /* blocks it owns now */
	uint64_t applied_bytes;   /* as of its last result */
};

struct intentlog_block {
	uint64_t block;
	uint64_t seq;             /* order it became owned; larger is newer, never reused */
	enum mem_zone zone;       /* MEM_ZONE_MOVABLE or MEM_ZONE_NORMAL */
	bool memmap;
	char grant_id[MSG_ID_MAX + 1];
};

enum intentlog_dir {
	ILOG_UP,                  /* configure + online, in order */
	ILOG_DOWN,                /* offline + deconfigure, in order */
};

/* A block an intent names, with the decisions taken for it. */
struct intentlog_target {
	uint64_t block;
	int memmap;               /* 0/1 wanted, -1 not applicable */
	enum mem_zone zone;       /* wanted zone; MEM_ZONE_AUTO when not applicable */
};

struct intentlog_intent {
	char op[MSG_ID_MAX + 1];
	enum intentlog_dir dir;
	struct intentlog_target *blocks;  /* in the order they are to be done */
	size_t n_blocks;
	time_t started;
};

/* A block a result reports done: for ILOG_UP how it came up (zone, memmap). */
struct intentlog_done {
	uint64_t block;
	enum mem_zone zone;       /* MEM_ZONE_MOVABLE or MEM_ZONE_NORMAL (ILOG_UP); ignored for ILOG_DOWN */
	bool memmap;
};

enum intentlog_gen {
	ILOG_GEN_NEW,             /* above the source's last generation */
	ILOG_GEN_REPLAY,          /* at or below, record kept */
	ILOG_GEN_STALE,           /* at or below, record gone */
};

/* Creates STATE_DIR (0700), locks it, replays journal.log (or starts
 * empty); OPENED (may be NULL) says what it found.
 * -EBADMSG corrupt (ERR names the file and offset), -EBUSY locked. */
int intentlog_open(const char *state_dir, const struct intentlog_options *opts, struct intentlog **out,
		   struct intentlog_opened *opened, char *err, size_t errlen);
void intentlog_close(struct intentlog *il);
static inline void intentlog_closep(struct intentlog **il) { intentlog_close(*il); }
#define _cleanup_intentlog_ __attribute__((cleanup(intentlog_closep)))

/* ---- durable on return (or at intentlog_batch_end) ---------------------------- */

/* Records a request from SOURCE and raises its generation; STATUS (may be
 * NULL) stored and, with OUTBOX_DEST, queued.  -ESTALE, -EEXIST, -EINVAL, -ENOBUFS. */
int intentlog_accept(struct intentlog *il, const char *source, const struct msg *m, enum msg_state state,
		     const struct report *status, const char *outbox_dest);
/* State (and report, may be NULL: keep), optionally queued. -ENOENT, -EINVAL, -ENOBUFS. */
int intentlog_set_state(struct intentlog *il, const char *id, enum msg_state state, const struct report *status,
			const char *outbox_dest);
/* Before the first kernel write of OP: the N blocks it will bring up or take
 * down, in that order; OP becomes in_progress with STATUS (may be NULL),
 * optionally queued.  -EBUSY OP has an open intent (close it with a result
 * first), -ENOENT unknown OP, -EINVAL bad blocks (none, repeated, bad zone). */
int intentlog_intent(struct intentlog *il, const char *op, enum intentlog_dir dir,
		     const struct intentlog_target *blocks, size_t n, const struct report *status,
		     const char *outbox_dest);
/* After the last kernel write of OP's open intent: the blocks it really did
 * (each must be named by the intent: brought up ones become OP's, taken down
 * ones nobody's), the new state (final, or not when recovery resumes it),
 * APPLIED_BYTES and STATUS (may be NULL), optionally queued.  Closes the
 * intent.  Without an open intent N must be 0.  -ENOENT, -EINVAL, -EEXIST
 * (a block brought up is owned by another grant), -ENOBUFS. */
int intentlog_result(struct intentlog *il, const char *op, enum msg_state state, uint64_t applied_bytes,
		     const struct intentlog_done *done, size_t n, const struct report *status,
		     const char *outbox_dest);
/* GRANT_ID (a grant, not a revocation) now owns the N blocks (an operator's
 * adoption); each gets the next seq (SEQ, may be NULL, gets the first).
 * -ENOENT, -EEXIST owned already, -EINVAL. */
int intentlog_adopt(struct intentlog *il, const char *grant_id, const struct intentlog_done *blocks, size_t n,
		    uint64_t *seq);
/* The N blocks are nobody's any more (an operator's release, an outside
 * change seen by the engine). -ENOENT when one of them is not owned. */
int intentlog_release(struct intentlog *il, const uint64_t *blocks, size_t n);
/* One block at a time, as the block-by-block engine does (an adoption or a
 * release of one block): same records, same errors. */
int intentlog_add_owned_block(struct intentlog *il, const char *grant_id, uint64_t block, enum mem_zone zone,
			      bool memmap, uint64_t *seq);
int intentlog_remove_owned_block(struct intentlog *il, uint64_t block);
int intentlog_outbox_push(struct intentlog *il, const char *dest, json_t *report, uint64_t *seq);
/* A subscriber's document for STATUS (a grant's or revocation's status as
 * the record holds it), queued for its destination in the same record as
 * that status, so that it is durable exactly when the status is; NULL: none
 * for this one.  Called from the writing thread, under the caller's lock. */
typedef json_t *(*intentlog_event_fn)(void *ctx, const json_t *status);
/* From now on, every record with a status also queues FN's document for
 * DEST (up to INTENTLOG_SUBSCRIBERS_MAX subscribers; -ENOSPC past them). */
int intentlog_subscribe(struct intentlog *il, const char *dest, intentlog_event_fn fn, void *ctx);
void intentlog_unsubscribe(struct intentlog *il, intentlog_event_fn fn, void *ctx);
/* DOC: a JSON object as text; -EINVAL when it is not one. */
int intentlog_outbox_push_text(struct intentlog *il, const char *dest, const char *doc, uint64_t *seq);
int intentlog_outbox_ack(struct intentlog *il, const char *dest, uint64_t seq);

/* Calls until intentlog_batch_end() change memory only; batch_end writes them
 * as one batch (one write, one fdatasync), all or nothing: on failure memory
 * is back to where batch_begin found it.  -EBUSY when a batch is open. */
int intentlog_batch_begin(struct intentlog *il);
int intentlog_batch_end(struct intentlog *il);
/* Drops the open batch: nothing written, memory back to where batch_begin found it. */
void intentlog_batch_abort(struct intentlog *il);

/* Rewrites the log as one snapshot now (it also happens by itself). */
int intentlog_compact(struct intentlog *il);

/* ---- reading (memory only) --------------------------------------------------------- */

uint64_t intentlog_last_generation(struct intentlog *il, const char *source);
/* enum intentlog_gen or -EINVAL; on ILOG_GEN_REPLAY RECORDED (may be NULL) is filled. */
int intentlog_lookup_generation(struct intentlog *il, const char *source, uint64_t generation,
				struct intentlog_grant *recorded);
int intentlog_get_grant(struct intentlog *il, const char *id, struct intentlog_grant *out);
void intentlog_grant_done(struct intentlog_grant *g);
/* G's last status report, decoded from the journal's record into OUT
 * (report_clear() it): 0, -ENOENT none recorded, -EINVAL, -ENOMEM. */
int intentlog_grant_report(const struct intentlog_grant *g, struct report *out);
int intentlog_list_grants(struct intentlog *il, struct intentlog_grant **out, size_t *n);
void intentlog_grants_free(struct intentlog_grant *g, size_t n);
int intentlog_find_owned_block(struct intentlog *il, uint64_t block, struct intentlog_block *out);
int intentlog_owned_blocks(struct intentlog *il, struct intentlog_block **out, size_t *n); /* oldest seq first */
/* Open intents (a crash interrupted them), in the order they were written. */
int intentlog_open_intents(struct intentlog *il, struct intentlog_intent **out, size_t *n);
void intentlog_intents_free(struct intentlog_intent *v, size_t n);
int intentlog_outbox_peek(struct intentlog *il, const char *dest, uint64_t *seq, json_t **report);
/* The same with the report as JSON text (malloc'd), as the engine's port carries it. */
int intentlog_outbox_peek_text(struct intentlog *il, const char *dest, uint64_t *seq, char **doc);
size_t intentlog_outbox_count(struct intentlog *il, const char *dest);
/* The whole live state as JSON (the snapshot's payload), for tests and tools. */
json_t *intentlog_state_json(struct intentlog *il);

struct intentlog_stats {
	uint64_t log_bytes;       /* journal.log now */
	uint64_t bytes_written;   /* since open */
	uint64_t syncs;           /* fsync + fdatasync since open */
	uint64_t compactions;
	uint64_t failed_bytes;    /* what the last failed write needed */
	bool broken;              /* a failed write could not be undone: it may be on disk */
};
void intentlog_stats(struct intentlog *il, struct intentlog_stats *out);

/* Replays a log image without touching files (the fuzzer's entry point):
 * 0 and *STATE (the live state as JSON), or -EBADMSG with ERR. */
int intentlog_replay_image(const void *buf, size_t len, json_t **state, char *err, size_t errlen);
