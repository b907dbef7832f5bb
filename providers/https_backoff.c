/* SPDX-License-Identifier: MIT */
/*
 * The HTTPS provider's retry pacing (see https_backoff.h): pure arithmetic
 * on the step, the announced window, Retry-After and injected random numbers.
 */
#include "providers/https_backoff.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

unsigned backoff_uniform(unsigned max_ms, uint32_t rnd)
{
	/* 64-bit product: uniform enough, and no modulo bias worth naming */
	return (unsigned)(((uint64_t)rnd * ((uint64_t)max_ms + 1)) >> 32);
}

static unsigned draw(enum backoff_rule rule, unsigned step, uint32_t rnd)
{
	if (rule == BACKOFF_EQUAL)
		return step / 2 + backoff_uniform(step - step / 2, rnd);
	return backoff_uniform(step, rnd);
}

unsigned backoff_next(struct backoff *b, bool at_cap, long retry_after_s, unsigned spread_ms, uint32_t rnd1,
		      uint32_t rnd2)
{
	unsigned first = b->first_ms, cap = b->cap_ms, wait;

	unsigned window = spread_ms;

	if (b->rule == BACKOFF_EQUAL)
		window = spread_ms = 0; /* the agents before did not know of it */
	if (b->step_ms == 0)
		b->lost = b->answered;
	if (!window && b->lost && b->rule == BACKOFF_FULL)
		window = b->default_window_ms < cap ? b->default_window_ms : cap;
	if (window && !at_cap) {
		/* a window: the first retry at a uniform phase within it, then
		 * one every W.  At any moment of an outage the fleet's next
		 * attempts are then spread evenly over the next W seconds, so
		 * it comes back at N / W a second whenever the outage ends,
		 * all within W, after about outage / W + 1 attempts each (a
		 * doubling step would leave the most agents waiting on the
		 * shortest residues when the control plane comes back) */
		wait = b->step_ms == window ? window : backoff_uniform(window, rnd1);
		b->step_ms = window;
	} else {
		if (spread_ms > cap)
			cap = spread_ms;
		if (first > cap)
			first = cap;
		if (at_cap)
			b->step_ms = cap;
		else if (b->step_ms == 0 || b->step_ms < first)
			b->step_ms = first;
		else
			b->step_ms = b->step_ms >= cap / 2 ? cap : b->step_ms * 2;
		wait = draw(b->rule, b->step_ms, rnd1);
	}
	if (retry_after_s >= 0) {
		unsigned ra_ms = (unsigned)(retry_after_s > BACKOFF_RETRY_AFTER_MAX_S ? BACKOFF_RETRY_AFTER_MAX_S
										      : retry_after_s) * 1000u;
		if (spread_ms)
			wait = ra_ms + backoff_uniform(spread_ms, rnd2);
		else if (ra_ms > wait)
			wait = ra_ms;
	}
	return wait;
}

void backoff_reset(struct backoff *b)
{
	b->step_ms = 0;
	b->answered = true;
}

unsigned backoff_poll_pause(const struct backoff *b, unsigned spread_ms, uint32_t rnd)
{
	if (b->rule == BACKOFF_EQUAL || spread_ms == 0)
		return 0;
	return backoff_uniform(spread_ms, rnd);
}

int backoff_parse_spread(const char *value, unsigned *ms)
{
	const char *s = value;
	unsigned long v = 0;
	bool digits = false;

	while (*s == ' ' || *s == '\t')
		s++;
	for (; isdigit((unsigned char)*s); s++) {
		digits = true;
		if (v <= (unsigned long)BACKOFF_SPREAD_MAX_S)
			v = v * 10 + (unsigned long)(*s - '0');
	}
	while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
		s++;
	if (!digits || *s)
		return -EINVAL;
	if (v > (unsigned long)BACKOFF_SPREAD_MAX_S)
		v = BACKOFF_SPREAD_MAX_S;
	*ms = (unsigned)v * 1000u;
	return 0;
}
