/* SPDX-License-Identifier: MIT */
/*
 * Prometheus counters of the agent: grants and revocations by outcome, block
 * operations (one block added or removed, all its steps) by result, every
 * kernel write by step and result, and a latency histogram of block
 * operations.  docs/operations.md lists every metric (tests/integration/
 * metrics_documented.sh checks it).
 * Gauges (online, standby, granted bytes) are passed in at render time because
 * they are read from the kernel, not counted.  Thread-safe.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum metric_outcome { OUT_APPLIED, OUT_PARTIAL, OUT_FAILED, OUT_REJECTED, OUT_CANCELLED, OUT__MAX };

struct metrics;

int metrics_new(struct metrics **out);
void metrics_free(struct metrics *m);

/* KIND is "grant" or "revoke". */
void metrics_count_request(struct metrics *m, const char *kind, enum metric_outcome o);
/* One block operation: a block added (memmap, configure, online) or removed
 * (offline, deconfigure); ERR 0 or the -errno of the step that failed;
 * SECONDS how long it took. */
enum metric_block_op { METRIC_BLOCK_ADD, METRIC_BLOCK_REMOVE };
void metrics_count_block_op(struct metrics *m, enum metric_block_op op, int err, double seconds);

/* One kernel write of the executor: STEP "memmap_on_memory", "configure",
 * "online", "offline" or "deconfigure"; ERR 0 or -errno. */
void metrics_count_step(struct metrics *m, const char *step, int err);

/* Messages from SOURCE's control plane that its provider skipped without a
 * status report (it logs each one): REASON "generation" (unusable: no
 * status can name it) or "malformed" (not a valid message).  N may be 0
 * (the series then exists at 0).  At most METRICS_SKIP_SOURCES sources. */
#define METRICS_SKIP_SOURCES 8
void metrics_count_skipped(struct metrics *m, const char *source, const char *reason, uint64_t n);

struct metrics_gauges {
	uint64_t block_size;
	uint64_t online_bytes;
	uint64_t standby_bytes;
	uint64_t granted_bytes;
	uint64_t outbox_pending;
	uint64_t journal_syncs;          /* fsync + fdatasync of the journal since start */
	uint64_t journal_bytes_written;  /* appended and compacted since start */
};

/* Renders the text exposition format into a malloc'd string. */
int metrics_render(struct metrics *m, const struct metrics_gauges *g, char **out);
