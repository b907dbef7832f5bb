/* SPDX-License-Identifier: MIT */
/*
 * The HTTPS provider's retry pacing, as pure arithmetic (no clock, no
 * randomness of its own: the caller passes the random numbers, so a test
 * can inject them): how long to wait before the next attempt after a
 * failure, and before the next poll after an answer that announced a
 * spreading window (Memgrant-Spread, docs/protocol.md).
 *
 * Rules (docs/https.md, "Failures" and "Pacing a fleet"):
 * - without a window: the step grows exponentially from FIRST_MS,
 *   doubling, up to CAP_MS (AT_CAP jumps straight to the cap, at least W),
 *   and the wait is uniform in [0, step] (full jitter; BACKOFF_EQUAL, kept
 *   for the fleet bench only: uniform in [step/2, step], the rule before);
 * - with a window W the control plane announced: the first retry uniform
 *   in [0, W], then one every W, so that a fleet that lost the control
 *   plane at once comes back at N / W a second, within W of its return;
 * - without one, after losing a control plane that answered (a success
 *   since start, then a failure): the same with DEFAULT_WINDOW_MS (at most
 *   the cap), so that a fleet whose control plane restarts does not come
 *   back in the first seconds of its return; a control plane never reached
 *   since start is retried from FIRST_MS as above (an agent starting);
 * - Retry-After (seconds, at most BACKOFF_RETRY_AFTER_MAX_S honoured) is a
 *   floor; with a window announced the agents that got it also spread over
 *   W after it, rather than all coming back on the same second.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define BACKOFF_RETRY_AFTER_MAX_S 600L
#define BACKOFF_SPREAD_MAX_S 3600L      /* a larger announced window is clamped */
/* The window without an announced one (docs/https.md, "Pacing a fleet"):
 * a fleet of N comes back at about N / 20 a second (50 for 1,000), one
 * agent 10 s later on average, at most 20 s, than right after the blip */
#define BACKOFF_DEFAULT_WINDOW_MS 20000u

enum backoff_rule {
	BACKOFF_FULL,   /* uniform in [0, step] */
	BACKOFF_EQUAL,  /* uniform in [step/2, step]: the rule before, for the bench */
};

struct backoff {
	unsigned first_ms, cap_ms;
	unsigned default_window_ms;     /* without an announced window; 0: none */
	enum backoff_rule rule;
	unsigned step_ms;               /* 0: no failure since the last success */
	bool answered;                  /* a success since start (backoff_reset) */
	bool lost;                      /* these failures began after a success */
};

/* Uniform in [0, max_ms] from a 32-bit random number. */
unsigned backoff_uniform(unsigned max_ms, uint32_t rnd);

/* The wait before the next attempt after a failure; advances B's step.
 * SPREAD_MS: the window last announced (0: none).  RETRY_AFTER_S: -1 none.
 * RND1, RND2: independent 32-bit random numbers. */
unsigned backoff_next(struct backoff *b, bool at_cap, long retry_after_s, unsigned spread_ms, uint32_t rnd1,
		      uint32_t rnd2);

/* A success: the next failure starts from the first step again, or from
 * the default window. */
void backoff_reset(struct backoff *b);

/* The pause before the next poll after an answer announcing SPREAD_MS
 * (0: none, no pause): uniform in [0, SPREAD_MS]; the old rule ignores it. */
unsigned backoff_poll_pause(const struct backoff *b, unsigned spread_ms, uint32_t rnd);

/* Parses a Memgrant-Spread header's value (whole seconds, optional white
 * space around): 0 with *MS set (clamped to BACKOFF_SPREAD_MAX_S), or
 * -EINVAL for anything else (ignored by the caller, logged once). */
int backoff_parse_spread(const char *value, unsigned *ms);
