/* SPDX-License-Identifier: MIT */
/*
 * Memory-pressure monitor: asks the control plane for the memory the guest is
 * about to miss and offers back what it has not needed for a while
 * (docs/autoscaling.md, "Memory pressure").
 *
 * Contract:
 * - Every reading takes MemAvailable and MemTotal (ROOT/proc/meminfo), the
 *   OOM kill count (`oom_kill` in ROOT/proc/vmstat) and, with PSI, the
 *   averages of ROOT/proc/pressure/memory.  Readings come at most
 *   `interval` apart, sooner when the guest allocates fast: the next one is
 *   due within a quarter of the time the observed allocation rate needs to
 *   use up what is left above the reserve (never sooner than 50 ms).
 * - PSI source, chosen once at start and logged once:
 *   "psi-trigger": the file is procfs and takes a trigger; the trigger has
 *     request_above's ratio over a 1 s window (2 s where the kernel wants
 *     that of unprivileged users), and its firing wakes the thread at once
 *     and counts as pressure.
 *   "psi": readable, no trigger (not procfs, or the kernel refused it).
 *   "meminfo": no PSI (no file, or psi=0): MemAvailable and oom_kill only.
 * - Pressure is any of: the OOM killer ran since the last reading;
 *   MemAvailable is below reserve + headroom, headroom = allocation rate x
 *   grow latency (what the guest uses up while a grow is on its way; the
 *   latency is the time from the last answered request to MemTotal's rise,
 *   at most plug_latency, which is also used until a request was answered);
 *   request_above holds (its average, or its trigger fired).  It sends
 *   emit("pressure.high", request), the request's `bytes` being the deficit
 *   (reserve + 2 x headroom - MemAvailable: above the reserve with a
 *   headroom left when the memory arrives) rounded up to `step`, at least
 *   one step.  Once per cooldown, unless MemTotal grew since the last
 *   request (it was answered, so a deficit still there is new), the need
 *   grew past the last request's bytes (the host may have refused that one)
 *   (at most once a second) or the OOM killer ran (always asks).  An
 *   unanswered request is forgotten once MemAvailable is above the
 *   watermark again.  While the guest gives memory back (an offer not
 *   answered yet, or MemTotal shrank within the grow latency) MemAvailable's
 *   fall is the revocation isolating its pages, not an allocation, and PSI
 *   stalls are its page migration: neither counts.
 * - Idle: MemAvailable not falling (less than a step a minute) and above
 *   reserve + keep by at least a step, keep = the
 *   fastest allocation rate of the last PRESSURE_PEAK_MS, weighed by its
 *   age (full at once, none at the end), x the grow latency (an offer never takes
 *   the guest below its own request watermark), all of it for
 *   release_below's window (with PSI, its average holding too), no request
 *   unanswered; then
 *   emit("pressure.low", offer) of that surplus rounded down to `step`, at
 *   most the revocable bytes.  Once per cooldown unless MemTotal shrank
 *   since the last offer (answered).  Without MemAvailable (unreadable) an
 *   offer is min(step, revocable).
 * - Everything happens on the monitor's own thread; callbacks are called
 *   there.  Returns 0 or -errno; logs through the agent's log.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "lib/log.h"

#define PRESSURE_INTERVAL_DEFAULT_MS 250
#define PRESSURE_INTERVAL_MIN_MS 50
#define PRESSURE_TRIGGER_WINDOW_US 1000000u /* short: a burst without swap stalls briefly */
#define PRESSURE_TRIGGER_WINDOW_UNPRIV_US 2000000u /* unprivileged triggers: multiples of 2 s (Linux 6.5+) */
#define PRESSURE_RATE_MIN_DT_MS 200 /* rate samples span at least this */
#define PRESSURE_PEAK_MS 20000     /* the fastest allocation rate fades over this */
#define PRESSURE_LATENCY_MIN_MS 500 /* a measured grow latency is taken as at least this */
#define PRESSURE_REQUEST_GAP_MS 1000 /* a growing need is asked again at most this often */

struct engine;
struct pressure;

enum pressure_source {
	PRESSURE_PSI_TRIGGER,
	PRESSURE_PSI,
	PRESSURE_MEMINFO,
};

struct pressure_params {
	const struct mg_pressure_config *cfg; /* copied */
	const char *root;                     /* "/" or a test/sim tree */
	const char *agent_id;
	uint64_t reserve;                     /* MemAvailable kept above this (policy.reserve) */
	unsigned interval_ms;                 /* 0: cfg->interval_ms, else PRESSURE_INTERVAL_DEFAULT_MS */
	/* EVENT is "pressure.high" or "pressure.low"; MSG the request or offer;
	 * DETAIL what was measured ({"source":..., "value":..., ...}). */
	void (*emit)(void *ud, const char *event, json_t *msg, json_t *detail);
	/* Bytes that could be given back now (0: nothing to offer). */
	uint64_t (*revocable)(void *ud);
	/* Now in milliseconds, for the cool-down and the idle periods; NULL:
	 * CLOCK_MONOTONIC (mono_ms()).  Tests inject theirs. */
	uint64_t (*clock_ms)(void *ud);
	void *userdata;
};

int pressure_start(const struct pressure_params *p, const struct mg_log *log, struct pressure **out);
/* Joins the thread and frees P. */
void pressure_stop(struct pressure *p);
enum pressure_source pressure_source(const struct pressure *p);

/* Where pressure.high / pressure.low go (memgrantd passes hooks_fire()). */
typedef int pressure_fire_fn(void *ctx, const char *event, json_t *fields);

/* memgrantd's wiring: requests and offers go to the engine's outboxes of the
 * enabled control-plane sources ("https", "channel"), events to FIRE (may be
 * NULL), revocable bytes are what the engine granted; the root is the
 * backend's (engine_backend_root()). */
int pressure_start_daemon(const struct mg_config *cfg, struct engine *d, pressure_fire_fn *fire, void *fire_ctx,
			  const struct mg_log *log, struct pressure **out);

/* ---- pieces, exposed for tests ---------------------------------------------- */

/* pressure_start() without the thread: the source chosen, nothing read. */
int pressure_open(const struct pressure_params *p, const struct mg_log *log, struct pressure **out);
/* One reading and its decision, as the thread makes at each wake-up (the
 * thread calls this); *LAST_ERR (0 at first) keeps a repeated read error to
 * one log line.  0, or the read's -errno. */
int pressure_read_once(struct pressure *p, int *last_err);

/* From /proc/pressure/memory text: the KIND line's avg<WINDOW> in percent * 100. */
int pressure_parse_psi(const char *text, enum mg_psi_kind kind, unsigned window_s, unsigned *centi);
/* The trigger line for T over WINDOW_US: "some 200000 1000000" for avg10>20. */
int pressure_trigger_line(const struct mg_psi_trigger *t, uint64_t window_us, char *out, size_t len);
/* `oom_kill N` from /proc/vmstat text: 0, -ENOENT (no such line), -EBADMSG. */
int pressure_parse_oom_kills(const char *text, uint64_t *count);
/* ms until the monitor's next reading is due (adaptive, see the contract). */
unsigned pressure_next_ms(const struct pressure *p);
