/* SPDX-License-Identifier: MIT */
/*
 * A grant's or revocation's status report as a C struct: what the engine
 * hands its adapters (transitions, verdicts) and what
 * lib/wire/report_json.h writes as {"type":"status", ...}
 * (docs/protocol.md) with the engine's progress fields ("kind",
 * "blocks_total", "blocks_done", "cancel_requested_by", "busy_blocks",
 * the revocation's budget).  No JSON here: the engine's port
 * (agent/engine/engine.h) carries it without jansson.
 *
 * Contract: a report owns its arrays; report_clear() releases them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/wire/msg_types.h"

/* What happened to one block. */
struct report_block {
	uint64_t block;
	bool configured;
	int memmap_on_memory;       /* 0/1, -1 unknown (null) */
	char state[16];             /* "online", "offline", ...; "" unknown (null) */
	char zone[48];              /* an online block's zone; "" none (null) */
	char error_code[16];        /* errno name; "" no error (null) */
	char error_message[192];
};

/* A revocation's block retried while its budget lasts. */
struct report_busy {
	uint64_t block;
	unsigned attempts;          /* failed attempts so far */
	char error[16];             /* the last failure's errno name */
};

struct report {
	const char *agent;          /* the agent's id, borrowed (the engine's) */
	char id[MSG_ID_MAX + 1];
	uint64_t generation;
	enum msg_state state;
	enum msg_type kind;         /* MSG_GRANT or MSG_REVOKE */
	uint64_t requested_bytes, applied_bytes;
	struct report_block *blocks; /* own */
	size_t n_blocks;
	char error_code[16];        /* "" no error (null) */
	char error_message[256];
	uint64_t block_size, online_bytes, standby_bytes;
	char **decisions;           /* own: one-line policy reasons */
	size_t n_decisions;
	char source[MSG_ID_MAX + 1]; /* "" unknown (null) */
	size_t blocks_total, blocks_done;
	char cancel_requested_by[64]; /* "" nobody asked */
	struct report_busy *busy;   /* own: "busy_blocks" when N_BUSY */
	size_t n_busy;
	bool has_budget;            /* a revocation's budget, while it runs */
	uint64_t budget_ms, budget_left_ms;
};

void report_clear(struct report *r);
static inline void report_clearp(struct report *r) { report_clear(r); }
#define _cleanup_report_ __attribute__((cleanup(report_clearp)))
/* A new deep copy of SRC, NULL on ENOMEM; report_free() releases it. */
struct report *report_dup(const struct report *src);
void report_free(struct report *r);
/* A deep copy of SRC into DST: 0 or -ENOMEM (DST cleared). */
int report_copy(struct report *dst, const struct report *src);
/* The entry of BLOCK, NULL when the report has none. */
const struct report_block *report_find_block(const struct report *r, uint64_t block);
/* Appends a decision (a copy of TEXT): 0 or -ENOMEM. */
int report_add_decision(struct report *r, const char *text);
