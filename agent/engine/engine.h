/* SPDX-License-Identifier: MIT */
/*
 * The engine of memgrantd: the one port every adapter (local API, HTTPS,
 * channel, hooks, webhooks, pressure) talks to.  It knows messages (struct
 * msg, lib/wire/message.h), sources and destinations registered by adapters,
 * and the kernel through hotplug/; it knows no transport, no HTTP status and
 * no provider name.
 *
 * Contract:
 * - engine_submit() takes a parsed message from a registered source and
 *   answers with a typed verdict.  An accepted request is in the journal
 *   (fsync'd) before the verdict says so; a replay of a recorded generation
 *   answers with the recorded report and applies nothing; a rejection says
 *   why (errno and reason) and, when the request was recorded as rejected,
 *   carries its status report.
 * - Every kernel write happens on the engine's executor thread, one request
 *   at a time; crash recovery runs there too, before the first request.
 *   Other calls take the engine lock only for bookkeeping, so any thread may
 *   call them and none waits for a block that takes a minute to go offline.
 * - Transitions (a request's state changed, one of its blocks failed) reach
 *   subscribers in the order they happened, called with the engine lock held
 *   from whichever engine thread made them: a subscriber copies what it needs
 *   and returns; it must not call back into the engine.
 * - Outboxes: one durable queue of reports per destination name; a source
 *   registered with ENGINE_SOURCE_REPORTS gets its status reports in the
 *   outbox of its own name.  Reports stay until the destination acknowledges.
 * - Functions return 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "hotplug/block.h"
#include "lib/log.h"
#include "lib/wire/msg_types.h"
#include "lib/wire/report.h"

struct engine;
struct engine_source;
struct event_bus; /* agent/engine/events.h */
struct mg_config;

/* ---- life cycle ----------------------------------------------------------- */

/* Opens the journal and builds the backend (agent/engine/backend_setup.h).  HELPER_FD:
 * the socket of the privileged helper (hotplug/privsep/spawn.h) that does every write,
 * owned by the engine from here on, also on error; -1 writes directly (unit
 * tests). */
int engine_new(const struct mg_config *cfg, const struct mg_log *log, int helper_fd, struct engine **out);
/* Starts the executor thread; returns once it has reconciled the journal
 * with the kernel and queued what a stop or crash left unfinished. */
int engine_start(struct engine *e);
/* Asks the executor to stop after the block operation in progress, joins it,
 * restores what the engine changed at start (auto_online_blocks). */
void engine_stop(struct engine *e);
/* The privileged helper is gone (memgrantd saw its socket hang up, or a
 * write returned HP_EWRITER_GONE): the engine stops as engine_stop() asks,
 * but the operation in progress ends where the kernel is, with its intent
 * left open and nothing final journaled, as after a crash; what is queued
 * stays queued.  The next start reads the kernel for the blocks the intent
 * names and resumes it.  Any thread; engine_stop() still joins. */
void engine_writer_gone(struct engine *e);
/* Whether engine_writer_gone() happened (also from the executor itself). */
bool engine_writer_is_gone(struct engine *e);
/* The -errno with which the journal failed to record an operation's step
 * (the engine then stops as on SIGTERM), or 0. */
int engine_journal_error(struct engine *e);
void engine_free(struct engine *e);
/* Applies CFG's live settings (policy, limits, log level). */
int engine_reload(struct engine *e, const struct mg_config *cfg);

/* ---- sources ----------------------------------------------------------------- */

enum engine_source_flags {
	/* An operator's source: a message without generation gets the next one
	 * of the source, one without id "NAME-<generation>". */
	ENGINE_SOURCE_OPERATOR = 1u << 0,
	/* Status reports of its requests go to the outbox named like the source. */
	ENGINE_SOURCE_REPORTS = 1u << 1,
};

/* Registers source NAME (1..63 of [A-Za-z0-9._:-]) with FLAGS; registering
 * the same name again with the same flags gives the same handle, with other
 * flags -EEXIST.  Register sources with non-default flags before
 * engine_start(): requests that recovery resumes from a source nobody
 * registered are treated as ENGINE_SOURCE_REPORTS. */
int engine_source_add(struct engine *e, const char *name, unsigned flags, struct engine_source **out);
/* The last generation recorded from S (0: none yet). */
uint64_t engine_last_generation(struct engine *e, const struct engine_source *s);

/* ---- requests ------------------------------------------------------------------ */

enum engine_verdict_kind {
	ENGINE_ACCEPTED, /* recorded and queued; REPORT is its first status */
	ENGINE_REPLAY,   /* generation already recorded; REPORT is the recorded status */
	ENGINE_ANSWERED, /* nothing to apply: SYNC (its NONCE), PLAN, or REPORT */
	ENGINE_REJECTED, /* ERR and ERROR say why; REPORT when RECORDED */
};

/* One block of a dry run's plan, in the order it would be taken. */
struct engine_plan_block {
	uint64_t block;
	bool decided;               /* a grant's: MEMMAP and ZONE say how it would come up */
	int memmap;                 /* 0/1, -1 the kernel's choice */
	const char *zone;           /* "Movable" or "Normal" (static) */
};

/* What engine_plan() answers: the plan of a grant or revocation. */
struct engine_plan {
	enum msg_type kind;
	uint64_t requested_bytes, block_size;
	char reason[256];           /* the planner's line */
	struct engine_plan_block *blocks; /* own */
	size_t n_blocks;
	char **decisions;           /* own */
	size_t n_decisions;
	/* a grant's policy and cost in online memory (a memmap is block_size / 64) */
	bool grant;
	int memmap;                 /* 0/1, -1 mixed or the kernel's choice */
	const char *zone;           /* "Movable", "Normal" or "split" (static) */
	uint64_t memmap_bytes, memmap_in_granted_bytes, online_cost_bytes, usable_bytes;
	bool memmap_kernel_chose;   /* no firmware interface: the cost assumes online memory */
	uint64_t online_bytes_before, online_bytes_after;
};

struct engine_verdict {
	enum engine_verdict_kind kind;
	int err;                /* REJECTED: negative errno */
	struct msg_error error; /* REJECTED: code and reason */
	bool recorded;          /* REJECTED: journaled as a rejected request */
	bool unrecordable;      /* REJECTED: the journal could not take it (disk full, I/O error);
				 * nothing was done, the same request may come again */
	struct report *report;  /* own or NULL: the request's status report */
	bool sync;              /* ANSWERED to a sync: NONCE is its nonce */
	uint64_t nonce;
	struct engine_plan *plan; /* own or NULL: ANSWERED to engine_plan() */
};

/*
 * Submits M (taken: freed by the engine in every case) from SRC.  A message
 * of an operator's source may come without id and generation
 * (parsed with MSG_PARSE_UNNUMBERED).  Errors of the request
 * are verdicts, not return values: -errno only when V is NULL or SRC unknown.
 * Rejections not recorded: -ESHUTDOWN stopping, -ESTALE stale generation,
 * -EEXIST id in use, -ERANGE generation too far ahead, -ENOBUFS outbox full,
 * other errno the engine's own failure (journal, kernel read, memory).
 */
int engine_submit(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v);
/* Releases V's REPORT and PLAN. */
void engine_verdict_done(struct engine_verdict *v);

/*
 * An operator adopts the N BLOCKS (found online, owned by no grant: brought
 * up outside memgrant or before its journal) into a new grant record of SRC
 * (numbered like an operator's grant, state applied); they then count as
 * granted and can be revoked.  Durable (one write) before the verdict.
 * Refusals are verdicts (ENGINE_REJECTED, V->error says which block and
 * why): ENOENT unknown block, EPERM boot memory, EINVAL standby or offline
 * or a repeated block, EEXIST owned already, EBUSY being changed now,
 * ESHUTDOWN stopping.  On success ENGINE_ANSWERED with the grant's report.
 */
int engine_adopt(struct engine *e, const struct engine_source *src, const uint64_t *blocks, size_t n,
		 struct engine_verdict *v);

/*
 * The plan of grant or revocation M (taken) as if SRC had sent it, changing
 * nothing: no number, no journal record, no kernel write.  ANSWERED with
 * PLAN (the blocks, the decisions, the memmap and zone, what it costs in
 * online memory), or REJECTED as engine_submit()
 * would reject it (-EAGAIN: a revocation of a grant that has not run yet).
 */
int engine_plan(struct engine *e, const struct engine_source *src, struct msg *m, struct engine_verdict *v);

/*
 * Cancels grant or revocation ID on behalf of WHO (named in the report).
 * Queued: it ends cancelled at once, durably (journal and the sender's
 * outbox) before the verdict, ANSWERED with its final report.  Running:
 * ACCEPTED; the executor stops after the block in flight and ends it
 * partial (blocks done stay done) or cancelled, reported like any final
 * state.  REJECTED: -ENOENT unknown, -EALREADY final already (REPORT its
 * status), -EAGAIN not queued yet, -ESHUTDOWN stopping.  A cancel of a
 * running request that a stop interrupts is not kept: it resumes.
 */
int engine_cancel(struct engine *e, const char *id, const char *who, struct engine_verdict *v);

/* ---- transitions --------------------------------------------------------------- */

enum engine_transition_kind {
	ENGINE_T_STATE,        /* a request reached STATE (once per request and state) */
	ENGINE_T_BLOCK_FAILED, /* BLOCK of the request failed (once per request and block) */
	ENGINE_T_BLOCK_CHANGED, /* BLOCK of grant ID was taken down outside memgrant: it left the grant */
};

struct engine_transition {
	enum engine_transition_kind kind;
	enum msg_type type;          /* MSG_GRANT or MSG_REVOKE */
	const char *id;
	uint64_t generation;
	enum msg_state state;
	const char *source;
	uint64_t requested_bytes, applied_bytes;
	uint64_t block;              /* BLOCK_FAILED, BLOCK_CHANGED */
	const struct report_block *block_report; /* BLOCK_FAILED: the block's entry of REPORT */
	const struct report *report; /* the request's status report, borrowed */
};

typedef void engine_transition_fn(void *ctx, const struct engine_transition *t);
/* At most 8 subscribers; subscribe before engine_start() to see recovery. */
int engine_subscribe(struct engine *e, engine_transition_fn *fn, void *ctx);
/* After it returns, FN is not called with CTX any more. */
void engine_unsubscribe(struct engine *e, engine_transition_fn *fn, void *ctx);

/* ---- views (agent/engine/views.c fills them) ------------------------------------------ */

struct engine_memory {
	bool has_firmware;        /* sys/firmware/memory (C0): standby memory to grant */
	uint64_t block_size;
	uint64_t online_bytes;
	uint64_t standby_bytes;
	uint64_t granted_bytes;
};

/* The machine's memory figures now (from the live table's counts, no walk
 * of it); -errno when the kernel cannot be read.  standby_bytes: what a
 * grant can bring up (without sys/firmware/memory, the blocks the kernel
 * keeps offline). */
int engine_memory(struct engine *e, struct engine_memory *out);
/* Where the backend reads sys/ and proc/ ("/" on a guest, the sim's tree). */
const char *engine_backend_root(struct engine *e);

/* A revocation's block that is busy and retried while its budget lasts. */
struct engine_busy_block {
	uint64_t block;
	unsigned attempts;          /* failed attempts so far */
	char error[16];             /* the last failure's errno name */
};

/* The operation the executor runs now. */
struct engine_running {
	char id[MSG_ID_MAX + 1];
	enum msg_type kind;
	enum msg_state state;
	size_t blocks_done, blocks_total;
	struct engine_busy_block *busy; /* own: engine_status_done() */
	size_t n_busy;
	uint64_t budget_ms, budget_left_ms; /* with N_BUSY: the revocation's budget */
	char cancel_requested_by[64];   /* "" when nobody asked */
};

/* GET /v1/status as a struct (providers/views/views_json.h writes it). */
struct engine_status {
	const char *agent, *version, *backend, *root; /* the engine's: valid while it lives */
	bool stopping;
	bool have_memory;           /* the kernel could be read; figures zero when not */
	struct engine_memory memory;
	uint64_t foreign_blocks;    /* online standby-capable blocks no grant owns */
	uint64_t in_flight_bytes;   /* configured, not online: online + standby + in flight = total */
	uint64_t total_bytes;
	char auto_online_blocks[32]; /* "" unknown */
	bool has_running;
	struct engine_running running;
	size_t queued;
	const char *policy_memmap, *policy_zone; /* static names */
	uint64_t policy_reserve;
	unsigned policy_movable_ratio;
};
int engine_status(struct engine *e, struct engine_status *out);
void engine_status_done(struct engine_status *s);

/* Who holds an online block, for the block table. */
enum engine_owner {
	ENGINE_OWNER_NONE = -1,     /* boot memory, or not online */
	ENGINE_OWNER_FOREIGN = -2,  /* brought up outside memgrant */
};

/* The live block table with each block's owner: OWNER[i] (one per block
 * of TABLE) is an enum engine_owner or an index into GRANTS. */
struct engine_blocks {
	struct mem_table *table;
	int32_t *owner;
	char (*grants)[MSG_ID_MAX + 1];
	size_t n_grants;
};
int engine_blocks(struct engine *e, struct engine_blocks *out);
void engine_blocks_done(struct engine_blocks *b);
/* The id of the grant that owns block I of B, NULL when none. */
static inline const char *engine_blocks_grant(const struct engine_blocks *b, size_t i)
{
	return b->owner[i] >= 0 ? b->grants[b->owner[i]] : NULL;
}
/* A grant or revocation as GET /v1/grants lists it: its last status report
 * (the running operation's progress from memory, others from the journal),
 * when it was recorded and last changed, the blocks it owns now. */
struct engine_given_back {
	uint64_t block;
	char by[64];                /* the revocation that took it; "" outside memgrant */
};
struct engine_grant_row {
	bool has_report;            /* false: recorded without a report */
	struct report report;       /* engine_grant(): what a grant holds now (has_now) */
	time_t created, updated;
	size_t owned_blocks;
	/* engine_grant() of a grant that gave blocks back: REPORT lists only
	 * the blocks it holds, with its figures; HISTORY is its last report */
	bool has_now;
	size_t held_blocks;         /* 0: "revoked", else "reduced" */
	struct report history;
	struct engine_given_back *given_back; /* own */
	size_t n_given_back;
};
/* Releases what a row owns. */
void engine_grant_row_clear(struct engine_grant_row *row);
/* ID's row: 0, -ENOENT no such request, -ENOMEM. */
int engine_grant(struct engine *e, const char *id, struct engine_grant_row *out);
/* Every row the journal keeps, oldest first: 0 or -errno (*OUT freed with
 * engine_grant_rows_free()). */
int engine_grants(struct engine *e, struct engine_grant_row **out, size_t *n);
void engine_grant_rows_free(struct engine_grant_row *rows, size_t n);
int engine_metrics_text(struct engine *e, char **out);
/* Counts N messages of SRC's control plane skipped without a status report
 * (memgrant_messages_skipped_total): REASON "generation" or "malformed". */
void engine_count_skipped(struct engine *e, const struct engine_source *src, const char *reason, uint64_t n);
/* One line for systemd's STATUS= ("idle; 1.0G online, 512M granted"). */
void engine_status_line(struct engine *e, char *buf, size_t len);
/* Status messages as they are published (the SSE stream). */
struct event_bus *engine_events(struct engine *e);
/* Waits up to TIMEOUT_MS for an event with seq > AFTER.  Returns 1 with
 * *TEXT (malloc'd JSON) and *SEQ set, 0 on timeout, -EPIPE once the bus is
 * closed, other -errno on error.
 * *MISSED is set to the number of events lost to the ring's wrap-around. */
int events_wait(struct event_bus *b, uint64_t after, int timeout_ms, char **text, uint64_t *seq,
		uint64_t *missed);

uint64_t events_last_seq(struct event_bus *b);

/* FN(ARG) is called after every publish and after events_close(), on the
 * publisher's thread with no lock of the bus held (a reader that does not
 * block, such as a suspended HTTP stream, resumes from there).  One listener;
 * NULL removes it, and returns only once a call in progress has ended. */
void events_set_listener(struct event_bus *b, void (*fn)(void *arg), void *arg);
/* Readable whenever the state changed; drain it after reading the state. */
int engine_notify_fd(struct engine *e);
void engine_notify_drain(struct engine *e);

/* ---- outboxes ---------------------------------------------------------------------- */

/* Registers destination DEST (counted in metrics from now on; pushing
 * registers it too). */
int engine_outbox_register(struct engine *e, const char *dest);
/* Oldest undelivered document for DEST (a status report, or what an adapter
 * queued): 0 with *DOC (JSON text, malloc'd: the journal's encoding) and
 * *SEQ, -ENOENT none.  providers/views/views_json.h reads it as JSON. */
int engine_outbox_peek(struct engine *e, const char *dest, uint64_t *seq, char **doc);
/* From now on FN's document for each grant's or revocation's status the
 * journal records (STATUS as docs/api/messages.schema.json has it; NULL:
 * none) goes to DEST's outbox in that same record: an event durable exactly
 * when the state it tells of is.  FN runs under the engine's lock. */
struct json_t;
typedef struct json_t *engine_event_fn(void *ctx, const struct json_t *status);
int engine_event_subscribe(struct engine *e, const char *dest, engine_event_fn *fn, void *ctx);
void engine_event_unsubscribe(struct engine *e, engine_event_fn *fn, void *ctx);
/* DEST acknowledged SEQ: removed durably. */
int engine_outbox_ack(struct engine *e, const char *dest, uint64_t seq);
/* How many reports for DEST wait in its outbox (an adapter's back-pressure). */
size_t engine_outbox_count(struct engine *e, const char *dest);
/* Sleeps until a report for DEST waits (1), TIMEOUT_MS passed (-1: no limit),
 * engine_outbox_wake() was called or the engine stops (0). */
int engine_outbox_wait(struct engine *e, const char *dest, int timeout_ms);
/* Queues DOC (a JSON object as text) for DEST durably; -EINVAL not an
 * object, -ENOBUFS when its outbox is full. */
int engine_outbox_push(struct engine *e, const char *dest, const char *doc);
/* Wakes every engine_outbox_wait() (an adapter that stops). */
void engine_outbox_wake(struct engine *e);
