/* SPDX-License-Identifier: MIT */
/*
 * The control law of memgrant-host serve (docs/autoscaling.md, "The control
 * law").  Pure functions of the policy and what was observed, so the tests
 * and bench/autoscale compare it with other rules on the same trace.
 *
 * - Grow only on the guest's request (the deficit its pressure monitor
 *   measured), by all of it in one step, or to reach the policy's min (at
 *   most `step` at a time); rounded up to whole blocks, never past `max`.
 * - Shrink only on an offer (all of it in one step), or on slack
 *   (MemAvailable above the reserve by at least a block) that lasted
 *   `slack_after` (at most `shrink_step` per decision); never below what the
 *   guest uses plus `reserve` (a virtio-mem
 *   unplug has no floor of its own: asked below the guest's use it OOM-kills
 *   the guest), never below `min`.
 * - Dead band: nothing smaller than one block is done.
 * - Cooldowns and the revocation backoff come in as grow_ok_at/shrink_ok_at.
 */
#include <stdio.h>

#include "lib/size.h"
#include "providers/host/serve/serve.h"

#define BLOCK_DEFAULT (128ull << 20)

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static uint64_t down(uint64_t v, uint64_t g)
{
	return g ? v - v % g : v;
}

static uint64_t up(uint64_t v, uint64_t g)
{
	if (!g || v % g == 0)
		return v;
	return v > UINT64_MAX - g ? down(v, g) : v + (g - v % g);
}

/*
 * The MoM-style baseline (oVirt's Memory Overcommitment Manager balloon
 * rule, as bench/autoscale models it): once per cooldown, 5 % of max more
 * when MemAvailable is below 20 % of MemTotal, 5 % less when above 40 %;
 * requests and offers are not read.  The floor (use + reserve) still holds:
 * a virtio-mem unplug below it kills the guest, whatever the rule.
 */
static void law_mom(const struct serve_policy *p, const struct law_input *in, uint64_t block, struct law_out *out)
{
	uint64_t unit = up(p->max / 20, block), room;

	if (!in->have_usage || !in->mem_total)
		return;
	if (in->mem_available * 5 < in->mem_total && in->now >= in->grow_ok_at && in->granted + in->pending < p->max) {
		out->action = LAW_GROW;
		out->bytes = down(min64(unit, p->max - in->granted - in->pending), block);
		snprintf(out->why, sizeof(out->why), "grow: MemAvailable is below 20%% (mom)");
		if (out->bytes < block)
			out->action = LAW_NONE;
		return;
	}
	if (in->mem_available * 5 > in->mem_total * 2 && in->now >= in->shrink_ok_at && in->granted) {
		room = in->mem_available > p->reserve ? in->mem_available - p->reserve : 0;
		out->bytes = down(min64(min64(unit, in->granted), room), block);
		out->refused_floor = out->bytes < min64(unit, in->granted);
		if (out->bytes >= block) {
			out->action = LAW_SHRINK;
			snprintf(out->why, sizeof(out->why), "shrink: MemAvailable is above 40%% (mom)");
		} else if (out->refused_floor) {
			snprintf(out->why, sizeof(out->why), "shrink refused: the guest's use plus reserve (mom)");
		}
	}
}

/* The naive baseline: whatever the guest asks is plugged and whatever it
 * offers taken back, at once (no cooldown, no shrink step); only max and the
 * floor bound it. */
static void law_naive(const struct serve_policy *p, const struct law_input *in, uint64_t block, struct law_out *out)
{
	if (in->request && in->granted + in->pending < p->max) {
		out->bytes = down(min64(up(in->request, block), p->max - in->granted - in->pending), block);
		if (out->bytes >= block) {
			out->action = LAW_GROW;
			snprintf(out->why, sizeof(out->why), "grow: asked (naive)");
			return;
		}
	}
	if (in->offer && in->granted && in->have_usage) {
		uint64_t room = in->mem_available > p->reserve ? in->mem_available - p->reserve : 0;
		out->bytes = down(min64(min64(in->offer, in->granted), room), block);
		out->refused_floor = out->bytes < min64(in->offer, in->granted);
		if (out->bytes >= block) {
			out->action = LAW_SHRINK;
			snprintf(out->why, sizeof(out->why), "shrink: offered (naive)");
		} else if (out->refused_floor) {
			snprintf(out->why, sizeof(out->why), "offer refused: the guest's use plus reserve (naive)");
		}
	}
}

void law_decide(const struct serve_policy *p, const struct law_input *in, struct law_out *out)
{
	uint64_t block = in->block ? in->block : BLOCK_DEFAULT;
	uint64_t cand = 0, room = UINT64_MAX, keep_min;
	char a[16], b[16], c[16];
	const char *source = NULL;

	*out = (struct law_out){ .action = LAW_NONE };
	if (in->have_usage && in->mem_total >= in->mem_available)
		out->floor_total = in->mem_total - in->mem_available + p->reserve;
	if (p->law == SERVE_LAW_MOM) {
		law_mom(p, in, block, out);
		return;
	}
	if (p->law == SERVE_LAW_NAIVE) {
		law_naive(p, in, block, out);
		return;
	}

	/* ---- grow ---- */
	if (in->now >= in->grow_ok_at && in->granted + in->pending < p->max) {
		uint64_t want = 0, had = in->granted + in->pending;

		/* the guest's request is its deficit: grown in one step */
		if (in->request)
			want = up(in->request, block);
		if (had < p->min && p->min - had > want)
			want = up(min64(p->min - had, p->step), block);
		want = down(min64(want, p->max - had), block);
		if (want >= block) {
			out->action = LAW_GROW;
			out->bytes = want;
			size_format(want, a, sizeof(a));
			size_format(in->request, b, sizeof(b));
			snprintf(out->why, sizeof(out->why), "grow %s: %s%s", a,
				 in->request ? "the guest asked for " : "below the policy's min", in->request ? b : "");
			return;
		}
	}

	/* ---- shrink ---- */
	if (in->now < in->shrink_ok_at || in->granted == 0)
		return;
	if (in->offer) {
		cand = in->offer;
		source = "offer";
	} else if (in->have_usage && in->slack_since >= 0 && in->now - in->slack_since >= p->slack_after &&
		   in->mem_available > p->reserve) {
		cand = in->mem_available - p->reserve;
		source = "slack";
	}
	if (in->granted > p->max && in->granted - p->max > cand) {
		cand = in->granted - p->max;
		source = "above max";
	}
	if (!cand)
		return;
	keep_min = in->granted > p->min ? in->granted - p->min : 0;
	/* an offer is what the guest found idle for its release window: all of
	 * it goes in one step; slack the guest did not offer goes by shrink_step */
	if (!in->offer)
		cand = min64(cand, p->shrink_step);
	cand = min64(cand, keep_min);
	if (in->have_usage)
		room = in->mem_available > p->reserve ? in->mem_available - p->reserve : 0;
	else if (in->granted <= p->max)
		room = 0; /* the floor is unknown: no shrink the guest did not need to have */
	if (cand > room) {
		out->refused_floor = true;
		cand = room;
	}
	cand = down(cand, block);
	if (cand >= block) {
		out->action = LAW_SHRINK;
		out->bytes = cand;
		size_format(cand, a, sizeof(a));
		snprintf(out->why, sizeof(out->why), "shrink %s: %s%s", a, source,
			 out->refused_floor ? ", cut to the guest's use plus reserve" : "");
		return;
	}
	if (out->refused_floor) {
		size_format(in->have_usage ? in->mem_total - in->mem_available : 0, a, sizeof(a));
		size_format(p->reserve, b, sizeof(b));
		size_format(in->offer, c, sizeof(c));
		if (in->have_usage)
			snprintf(out->why, sizeof(out->why),
				 "%s of %s refused: the guest uses %s and keeps a reserve of %s", source, c, a, b);
		else
			snprintf(out->why, sizeof(out->why),
				 "%s of %s refused: the guest's use is unknown (no mem_available from its agent)",
				 source, c);
	}
}

/* Sum of min(want, level rounded down to the granule). */
static uint64_t filled(const uint64_t *want, const uint64_t *granule, size_t n, uint64_t level)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t g = min64(want[i], down(level, granule[i]));
		sum = sum > UINT64_MAX - g ? UINT64_MAX : sum + g;
	}
	return sum;
}

void law_share(const uint64_t *want, const uint64_t *granule, size_t n, uint64_t budget, uint64_t *give)
{
	uint64_t lo = 0, hi = 0, left;
	bool more = true;

	for (size_t i = 0; i < n; i++) {
		give[i] = 0;
		if (want[i] > hi)
			hi = want[i];
	}
	if (filled(want, granule, n, hi) <= budget) {
		for (size_t i = 0; i < n; i++)
			give[i] = want[i];
		return;
	}
	/* the highest water level that fits */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		if (filled(want, granule, n, mid) <= budget)
			lo = mid;
		else
			hi = mid - 1;
	}
	left = budget;
	for (size_t i = 0; i < n; i++) {
		give[i] = min64(want[i], down(lo, granule[i]));
		left -= give[i];
	}
	/* what the rounding left: one granule each, in turn, to those still short */
	while (more) {
		more = false;
		for (size_t i = 0; i < n; i++) {
			uint64_t g = granule[i] ? granule[i] : 1;
			if (give[i] + g <= want[i] && g <= left) {
				give[i] += g;
				left -= g;
				more = true;
			}
		}
	}
}
