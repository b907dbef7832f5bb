/* SPDX-License-Identifier: MIT */
/*
 * Three memory-scaling rules side by side on one pressure trace (a model,
 * not a guest): memgrant-host serve's control law (serve_law.c, fed the
 * agent's requests and offers as memgrantd sends them), a MoM-style balloon
 * rule (every 15 s, 5 % of the maximum per step, grow below 20 % free,
 * shrink above 40 % free) and a naive rule that grants whatever is asked at
 * once and takes back whatever is offered.  The trace: a guest with 1 GiB
 * boot memory and 300 MiB base use gets demand bursts (+900 MiB, +400 MiB,
 * a 30 s blip of +600 MiB, then calm); the hypervisor plugs at 1.25 GiB/s,
 * onlining takes 1 s per grant, unplugging 0.45 GiB/s (the measured
 * figures). Prints for each rule: time to relief per burst (memory short ->
 * MemAvailable back above the guest's reserve), peak overshoot (memory held
 * beyond use + reserve + one step), seconds spent short, and the number of
 * plug and unplug operations.  `make bench-bin`, then build/bench/autoscale.
 */
#include <stdio.h>
#include <string.h>

#include "providers/host/serve/serve.h"

#define MIB (1ull << 20)
#define DT 100 /* ms */

enum rule { R_LOOP, R_MOM, R_NAIVE };
static const char *const rule_names[] = { "memgrant-host serve", "MoM-style balloon (5%, 15 s)", "naive: grant what is asked" };

/* demand (MiB in use) at time t (ms) */
static uint64_t demand(int64_t t)
{
	int64_t s = t / 1000;
	if (s < 20) return 300;
	if (s < 140) return 1200;                   /* burst 1 */
	if (s < 200) return 600;
	if (s < 320) return 1000;                   /* burst 2 */
	if (s < 400) return 400;
	if (s < 430) return 1000;                   /* a short blip */
	return 350;                                 /* calm */
}

struct sim {
	uint64_t boot, granted, pending;            /* MiB */
	int64_t pending_done;                       /* when the pending grow is online */
	uint64_t unplugging;
	int64_t unplug_done;
	unsigned plugs, unplugs;
	/* agent */
	int64_t last_request, idle_since, last_offer;
	/* figures */
	int64_t short_since, short_ms, relief[8];
	int n_relief;
	uint64_t overshoot;
};

int main(void)
{
	const uint64_t reserve = 128, step = 256, maxg = 2048;

	printf("%-32s %-28s %9s %9s %7s %7s\n", "rule", "time to relief per burst (s)", "short (s)", "overshoot", "plugs",
	       "unplugs");
	for (int r = R_LOOP; r <= R_NAIVE; r++) {
		struct sim s = { .boot = 1024, .last_request = -100000, .idle_since = -1, .last_offer = -100000,
				 .short_since = -1 };
		struct serve_policy p;
		int64_t t, grow_ok = 0, shrink_ok = 0, mom_next = 0;
		char rel[64] = "";

		serve_policy_defaults(&p);
		p.max = maxg * MIB;
		p.step = 512 * MIB;
		p.shrink_step = 256 * MIB;
		p.reserve = 256 * MIB;
		p.slack_after = 120000;
		for (t = 0; t < 600000; t += DT) {
			uint64_t use = demand(t), total = s.boot + s.granted;
			uint64_t avail = total > use ? total - use : 0;
			uint64_t request = 0, offer = 0;

			/* the hypervisor and the guest finish what is due */
			if (s.pending && t >= s.pending_done) {
				s.granted += s.pending;
				s.pending = 0;
			}
			if (s.unplugging && t >= s.unplug_done)
				s.unplugging = 0;
			total = s.boot + s.granted;
			avail = total > use ? total - use : 0;
			/* figures */
			if (avail < reserve) {
				if (s.short_since < 0)
					s.short_since = t;
				s.short_ms += DT;
			} else if (s.short_since >= 0) {
				if (s.n_relief < 8 && t - s.short_since >= 1000)
					s.relief[s.n_relief++] = t - s.short_since;
				s.short_since = -1;
			}
			if (total > use + reserve + step && total - use - reserve - step > s.overshoot)
				s.overshoot = total - use - reserve - step;
			/* the guest's agent (memgrantd's meminfo rule, cooldown 10 s) */
			if (avail < reserve && t - s.last_request >= 10000) {
				request = r == R_NAIVE ? use + reserve - total + step : step;
				s.last_request = t;
				s.idle_since = -1;
			}
			if (avail > reserve + 2 * step) {
				if (s.idle_since < 0)
					s.idle_since = t;
				if (t - s.idle_since >= 10000 && t - s.last_offer >= 10000 && s.granted) {
					offer = r == R_NAIVE ? avail - reserve : (s.granted < step ? s.granted : step);
					s.last_offer = t;
				}
			} else {
				s.idle_since = -1;
			}
			if (s.pending || s.unplugging)
				continue; /* one operation at a time, as the service does */
			if (r == R_LOOP) {
				static uint64_t req_kept, off_kept;
				struct law_input in = { .granted = s.granted * MIB, .block = 128 * MIB, .have_usage = true,
							.mem_total = total * MIB, .mem_available = avail * MIB, .now = t,
							.grow_ok_at = grow_ok, .shrink_ok_at = shrink_ok, .slack_since = -1 };
				struct law_out o;
				if (request)
					req_kept = request, off_kept = 0;
				if (offer)
					off_kept = offer, req_kept = 0;
				in.request = req_kept * MIB;
				in.offer = off_kept * MIB;
				law_decide(&p, &in, &o);
				if (o.action == LAW_GROW) {
					s.pending = o.bytes / MIB;
					s.pending_done = t + (int64_t)(s.pending * 1000 / 1280) + 1000;
					s.plugs++;
					req_kept = 0;
					grow_ok = t + p.grow_cooldown;
					shrink_ok = t + p.shrink_cooldown;
				} else if (o.action == LAW_SHRINK) {
					uint64_t b = o.bytes / MIB;
					s.granted -= b;
					s.unplugging = b;
					s.unplug_done = t + 300 + (int64_t)(b * 1000 / 460);
					s.unplugs++;
					off_kept = 0;
					shrink_ok = t + p.shrink_cooldown;
				} else if (o.refused_floor) {
					off_kept = 0;
				}
			} else if (r == R_NAIVE) {
				if (request) {
					uint64_t b = request > maxg - s.granted ? maxg - s.granted : request;
					if (b) {
						s.pending = b;
						s.pending_done = t + (int64_t)(b * 1000 / 1280) + 1000;
						s.plugs++;
					}
				} else if (offer) {
					uint64_t b = offer > s.granted ? s.granted : offer;
					s.granted -= b;
					s.unplugging = b;
					s.unplug_done = t + 300 + (int64_t)(b * 1000 / 460);
					s.unplugs++;
				}
			} else if (t >= mom_next) {
				/* MoM's balloon rule: every 15 s, 5 % of the maximum, thresholds on free memory */
				uint64_t st = (s.boot + maxg) / 20;
				mom_next = t + 15000;
				if (avail * 100 < total * 20 && s.granted < maxg) {
					s.pending = st < maxg - s.granted ? st : maxg - s.granted;
					s.pending_done = t + 500;
					s.plugs++;
				} else if (avail * 100 > total * 40 && s.granted) {
					uint64_t b = st < s.granted ? st : s.granted;
					s.granted -= b;
					s.unplugging = b;
					s.unplug_done = t + 500;
					s.unplugs++;
				}
			}
		}
		for (int k = 0; k < s.n_relief; k++) {
			size_t n = strlen(rel);
			snprintf(rel + n, sizeof(rel) - n, "%s%.1f", k ? " " : "", (double)s.relief[k] / 1000);
		}
		printf("%-32s %-28s %9.1f %7lluM %7u %7u\n", rule_names[r], rel, (double)s.short_ms / 1000,
		       (unsigned long long)s.overshoot, s.plugs, s.unplugs);
	}
	return 0;
}
