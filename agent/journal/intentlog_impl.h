/* SPDX-License-Identifier: MIT */
/*
 * The intent log's parts share this (agent/journal/intentlog.h is the contract):
 * intentlog.c the API (open, the durable calls, batches, compaction),
 * readers.c the readers, replay.c the live state tree and the records
 * applied to it (validation, replay), history.c the finished operations
 * kept out of that tree.  Not for use outside agent/journal/.
 *
 * The live state is a JSON tree shaped like the snapshot record (docs/journal.md):
 * {version, next_order, next_block_seq, sources, grants, outbox, intents}.
 * Every change is one record whose payload says what changed; the same apply
 * function serves the live call and the replay at open, so what memory holds
 * after a call is exactly what a replay of the disk gives.  A live call
 * applies its record to a copy of the tree, writes the record, and only then
 * makes the copy current: a failed write leaves memory as the disk has it.
 * The copy is shallow (new containers, shared members); an apply function
 * takes a grant it changes through ilog_grant_writable(), so a record costs
 * the grants it touches, not the whole state.
 */
#pragma once

#include "lib/idmap.h"
#include "lib/json.h"
#include "agent/journal/intentlog.h"
#include "agent/journal/recordlog.h"
#include "lib/wire/report_runs.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STATE_VERSION 1
#define LOG_FILE "journal.log"
#define LOCK_FILE "lock"


struct pending_rec {
	uint16_t type;
	char *data;
	size_t len;
};

#define INTENTLOG_SUBSCRIBERS_MAX 16

struct intentlog_subscriber {
	char dest[MSG_ID_MAX + 1];
	intentlog_event_fn fn;
	void *ctx;
};

/* A finished operation out of the tree (history.c): its grant object as
 * compact JSON at TEXT + OFF in struct ilog_history. */
struct ilog_past {
	uint64_t order;
	uint64_t generation;
	uint32_t off, len;
	char id[MSG_ID_MAX + 1];
	char source[MSG_ID_MAX + 1];
};

struct ilog_history {
	struct ilog_past *v;    /* by order, oldest first */
	size_t n, cap;
	char *text;             /* the texts back to back */
	size_t used, cap_text;
};

struct intentlog {
	char *dir;
	int dir_fd;
	int lock_fd;
	unsigned history_max;
	unsigned outbox_max;
	uint64_t compact_min;
	json_t *root;
	/* the finished operations the tree no longer holds; together with
	 * ROOT's grants they are the state's (ilog_history_merged()) */
	struct ilog_history history;
	bool revived;             /* since the last settle (history.c) */
	/* block -> (index of its grant in root's "grants") << 32 | its index
	 * in that grant's "blocks"; rebuilt on demand after root changed */
	struct idmap owners;
	bool owners_valid;
	struct recordlog *log;
	uint64_t snapshot_size;   /* payload of the last snapshot: the live state's size */
	uint64_t compactions;
	bool in_batch;
	json_t *batch_saved;
	struct pending_rec *batch;
	size_t n_batch, cap_batch;
	struct intentlog_subscriber subs[INTENTLOG_SUBSCRIBERS_MAX];
	size_t n_subs;
};

/* What an apply function needs besides the tree. */
struct apply_ctx {
	unsigned history_max;
	/* finished operations out of the tree, which a record may name again
	 * (revived into the tree it applies to); NULL at replay, where the
	 * tree holds them all */
	const struct ilog_history *history;
	bool revived;           /* set when a record put one of them back */
	size_t outbox_max;
	char *err;
	size_t errlen;
};

/* The replay callback's context (ilog_replay_cb). */
struct replay {
	json_t *root;
	unsigned history_max;
	char *err;
	size_t errlen;
};

/* ---- replay.c: the state tree and its records ---- */
json_t *ilog_u64_json(uint64_t v);
uint64_t ilog_u64_of(const json_t *o, const char *key);
const char *ilog_str_of(const json_t *o, const char *key);
const char *ilog_zone_word(enum mem_zone z);
int ilog_zone_parse(const char *s, enum mem_zone *out);
json_t *ilog_find_grant(json_t *root, const char *id, size_t *idx);
json_t *ilog_find_owner(json_t *root, uint64_t block, size_t *bidx);
json_t *ilog_find_intent(json_t *root, const char *op, size_t *idx);
/* Grant IDX of ROOT made ROOT's own before a record changes it (state_copy()
 * shares the grants with the tree it copied): a new object and block list
 * in its place, returned; NULL on ENOMEM. */
json_t *ilog_grant_writable(json_t *root, size_t idx);
json_t *ilog_now_json(void);
json_t *ilog_empty_root(void);
bool ilog_phase_valid(const char *s);
int ilog_target_from_json(const json_t *b, struct intentlog_target *t);
int ilog_check_root(json_t *root, char *err, size_t errlen);
int ilog_apply(json_t **rootp, unsigned type, json_t *rec, struct apply_ctx *c);
/* ---- intentlog.c ---- */
/* The owner of BLOCK in IL's current tree, its place in the owner's
 * "blocks" in *BIDX (may be NULL); an index built once per state. */
json_t *ilog_owner_of(struct intentlog *il, uint64_t block, size_t *bidx);

/* ---- history.c: finished operations out of the tree ---- */
void ilog_history_free(struct ilog_history *h);
ssize_t ilog_history_find(const struct ilog_history *h, const char *id);
/* Entry I as a grant object (a new reference), NULL on ENOMEM. */
json_t *ilog_history_get(const struct ilog_history *h, size_t i);
/* Final, owning no block, no open intent: the history's, not the tree's. */
bool ilog_grant_retirable(json_t *root, const json_t *g);
/* After a record is current (never inside a batch, which may roll back):
 * when REVIVED (a record since the last call put one back), entries ROOT
 * holds again leave H; ROOT's retirable grants move to H, the oldest beyond
 * HISTORY_MAX go; *MOVED when ROOT's grants changed. */
void ilog_history_settle(struct ilog_history *h, json_t *root, unsigned history_max, bool revived, bool *moved);
/* ID from H put back into ROOT's grants, in order (*IDX); NULL when H has none. */
json_t *ilog_history_revive(json_t *root, const struct ilog_history *h, const char *id, size_t *idx);
/* ilog_find_grant(), or else ilog_history_revive() from C->history (may
 * be NULL), which sets C->revived. */
json_t *ilog_grant_find_or_revive(json_t *root, struct apply_ctx *c, const char *id, size_t *idx);
/* ID is a grant of ROOT's or kept in H (may be NULL). */
bool ilog_grant_known(json_t *root, const struct ilog_history *h, const char *id);
/* ID's grant object from ROOT or H, a new reference; NULL when neither
 * has it (or it cannot be read back: ENOMEM). */
json_t *ilog_grant_ref(json_t *root, const struct ilog_history *h, const char *id);
/* A shallow copy of ROOT whose grants are the tree's and H's, in order:
 * the state as a snapshot holds it. */
json_t *ilog_history_merged(json_t *root, const struct ilog_history *h);
/* The same as compact JSON text, without parsing H's texts again (a snapshot). */
char *ilog_history_state_text(json_t *root, const struct ilog_history *h);
int ilog_replay_cb(void *ctx, uint64_t offset, uint16_t type, const void *data, size_t len);

