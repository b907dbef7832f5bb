/* SPDX-License-Identifier: MIT */
/*
 * Memory-pressure monitor: asks the control plane for memory when the guest
 * is short of it and offers memory back when the guest has been idle.
 *
 * Contract:
 * - Source, chosen once at start and logged once:
 *   "psi-trigger": ROOT/proc/pressure/memory is procfs and takes a trigger
 *     ("some|full STALL_US WINDOW_US" from request_above, window at most the
 *     kernel's 10 s); the thread sleeps in poll() for POLLPRI and reads the
 *     averages when it fires, and every interval while release_below is set.
 *   "psi": the file is readable but takes no trigger (not procfs, e.g. a test
 *     stand-in; EINVAL/EOPNOTSUPP/EPERM on the trigger write): averages read
 *     every interval.
 *   "meminfo": no PSI file: MemAvailable from ROOT/proc/meminfo every
 *     interval; below `reserve` is pressure, above reserve + 2 * step for the
 *     release window is idle.
 * - High (request_above holds): emit("pressure.high", request) where request
 *   is {"type":"request","agent":ID,"bytes":step,"reason":"..."}, at most once
 *   per cooldown, so one spike is one request.
 * - Idle (release_below holds, after the cooldown since the last request,
 *   and the revocable callback names bytes): emit("pressure.low", offer)
 *   with {"type":"offer","agent":ID,"bytes":min(revocable, step),"reason":...},
 *   once per idle period (a new request starts a new period).
 * - Everything happens on the monitor's own thread; callbacks are called
 *   there.  Returns 0 or -errno; logs through the agent's log.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "lib/log.h"

#define PRESSURE_INTERVAL_DEFAULT_MS 10000
#define PRESSURE_TRIGGER_WINDOW_MAX_US 10000000u /* the kernel refuses longer trigger windows */

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
	uint64_t reserve;                     /* meminfo source: MemAvailable below this is pressure */
	unsigned interval_ms;                 /* 0: PRESSURE_INTERVAL_DEFAULT_MS */
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
/* The trigger line for T: "some 2000000 10000000". */
int pressure_trigger_line(const struct mg_psi_trigger *t, char *out, size_t len);
