/* SPDX-License-Identifier: MIT */
/*
 * The libvirt test's pressure trace (tests/vm/libvirt.sh, section 5) in a
 * model, under three laws side by side: memgrant-host serve's control law
 * (serve_law.c), the MoM-style rule and the naive one (law: mom / naive).
 * The guest's side is memgrantd's own pressure monitor (providers/pressure.c,
 * configured as docs/autoscaling.md's example), reading stand-in
 * /proc files that the model writes; the host's side is law_decide().
 *
 * Calibrated with what the libvirt test measured under TCG (docs/vm-test.md,
 * "The pressure trace"): boot MemTotal 393M with 58M in use, the workload
 * faulting anonymous memory in at FAULT_MIB_S (its step from 352M to 640M
 * took 1.3-2.4 s), a grow taking GROW_MS from the request to memory online,
 * a shrink SHRINK_MS from decision to unplugged,
 * serve's tick TICK_MS, the channel CHANNEL_MS, the agent's MemTotal and
 * MemAvailable as serve sees them: its query every query_interval (5 s).  The OOM killer is modelled:
 * when the workload would take MemTotal below MIN_FREE it is killed (its
 * memory freed, a kill counted) and started again, and it faults its way
 * back to the trace.
 *
 * Prints per law: relief per burst (a burst's start to the first grant
 * online), seconds below the agent's reserve, OOM kills, memory granted
 * beyond the need, time back to the boot memory after each release,
 * plugs/unplugs and reversals, as tests/vm/trace_report.py prints them for
 * the VM.  `make bench-bin`, then build/bench/autoscale.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/util.h"
#include "providers/host/serve/serve.h"
#include "providers/pressure.h"

#define MIB (1ull << 20)
#define DT 10 /* ms */

/* measured by tests/vm/libvirt.sh (see the header) */
#define BOOT_MIB 393
#define BASE_MIB 58
#define FAULT_MIB_S 120
#define GROW_MS 900  /* grant.applied took_ms in the libvirt test: 83-2274 ms, median 900 */
#define SHRINK_MS 1000 /* revoke.offline to unplugged: 1005-1278 ms, or 5-57 ms when unplugged at once */
#define CHANNEL_MS 20
#define TICK_MS 200 /* serve_loop.c ticks at most 200 ms apart */
#define MIN_FREE_MIB 16
#define RESERVE_MIB 256

/* the trace: phase length (s), MiB, ramp (s) */
static const struct { int s, mib, ramp; } trace[] = {
	{ 12, 352, 8 }, { 10, 640, 0 }, { 32, 0, 0 }, { 10, 448, 0 }, { 32, 0, 0 },
};
#define N_PHASES ((int)ARRAY_SIZE(trace))
static bool verbose; /* VERBOSE=1: each decision on stderr */
static const int bursts[] = { 0, 1, 3 }, releases[] = { 2, 4 };
static const int release_after[] = { 2, 2, 4 }; /* each burst's need lasts until this release */

struct model {
	int64_t now;
	/* the guest */
	uint64_t granted;            /* MiB */
	uint64_t worker;             /* KiB the workload holds */
	unsigned oom_kills;
	/* messages on their way to the host */
	uint64_t msg_request, msg_offer;
	int64_t msg_at;
	/* the host */
	uint64_t request, offer;
	int64_t busy_until, grow_ok, shrink_ok;
	uint64_t pending;            /* MiB of a grow on its way */
	unsigned plugs, unplugs;
	char root[64];
};

static uint64_t clock_of(void *ud)
{
	return (uint64_t)((struct model *)ud)->now;
}

static uint64_t revocable_of(void *ud)
{
	return ((struct model *)ud)->granted * MIB;
}

static void emit(void *ud, const char *event, json_t *msg, json_t *detail)
{
	struct model *m = ud;
	uint64_t b = (uint64_t)json_integer_value(json_object_get(msg, "bytes")) / MIB;

	(void)detail;
	if (streq(event, "pressure.high"))
		m->msg_request = b, m->msg_offer = 0;
	else
		m->msg_offer = b, m->msg_request = 0;
	m->msg_at = m->now + CHANNEL_MS;
}

static int phase_at(int64_t t, int64_t *start)
{
	int64_t s = 0;

	for (int i = 0; i < N_PHASES; i++) {
		if (t < s + trace[i].s * 1000) {
			*start = s;
			return i;
		}
		s += trace[i].s * 1000;
	}
	*start = s;
	return N_PHASES;
}

static uint64_t target_at(int64_t t)
{
	int64_t start;
	int i = phase_at(t, &start);
	int from = i > 0 ? trace[i - 1].mib : 0;

	if (i >= N_PHASES)
		return 0;
	if (!trace[i].ramp || t - start >= trace[i].ramp * 1000)
		return (uint64_t)trace[i].mib;
	return (uint64_t)(from + (trace[i].mib - from) * (t - start) / (trace[i].ramp * 1000));
}

static void write_proc(const struct model *m)
{
	char path[128], text[256];
	uint64_t total = BOOT_MIB + m->granted, used = BASE_MIB + m->worker / 1024;
	uint64_t avail = total > used ? total - used : 0;

	snprintf(path, sizeof(path), "%s/proc/meminfo", m->root);
	snprintf(text, sizeof(text), "MemTotal: %llu kB\nMemFree: %llu kB\nMemAvailable: %llu kB\n",
		 (unsigned long long)total * 1024, (unsigned long long)avail * 1024, (unsigned long long)avail * 1024);
	file_write_atomic(path, text, strlen(text), 0644);
	snprintf(path, sizeof(path), "%s/proc/vmstat", m->root);
	snprintf(text, sizeof(text), "nr_free_pages 1\noom_kill %u\n", m->oom_kills);
	file_write_atomic(path, text, strlen(text), 0644);
}

static int run(enum serve_law law, const char *name)
{
	struct model m = { .grow_ok = 0 };
	struct mg_pressure_config cfg = {
		.enabled = true,
		.request_above = { .set = true, .kind = MG_PSI_SOME, .window_s = 10, .above = true, .threshold_centi = 500 },
		.release_below = { .set = true, .kind = MG_PSI_SOME, .window_s = 10, .threshold_centi = 100 },
		.step = 128 * MIB, .cooldown_ms = 30000, .plug_latency_ms = 5000, .interval_ms = 1000,
	};
	struct pressure_params pp = { .cfg = &cfg, .agent_id = "bench", .reserve = RESERVE_MIB * MIB, .emit = emit,
				      .revocable = revocable_of, .clock_ms = clock_of, .userdata = &m };
	struct serve_policy pol;
	struct pressure *p = NULL;
	struct mg_log log;
	char path[128], rel[64] = "", flo[64] = "";
	int64_t next_read = 0, next_tick = 100, next_query = 0, end = 0, short_ms = 0, start;
	uint64_t seen_total = BOOT_MIB, seen_avail = BOOT_MIB - BASE_MIB;
	int64_t relief[3] = { -1, -1, -1 }, floor_at[2] = { -1, -1 };
	uint64_t total_at_burst[3] = { 0 }, beyond = 0, need_peak[3] = { 0 }, granted_peak[3] = { 0 };
	int last_dir = 0, last_phase = -1, reversals = 0, last_err = 0;
	uint64_t last_total = BOOT_MIB;

	for (int i = 0; i < N_PHASES; i++)
		end += trace[i].s * 1000;
	snprintf(m.root, sizeof(m.root), "/tmp/mg-bench-autoscale.XXXXXX");
	if (!mkdtemp(m.root))
		return -1;
	snprintf(path, sizeof(path), "%s/proc/pressure", m.root);
	mkdir_p(path, 0755);
	snprintf(path, sizeof(path), "%s/proc/pressure/memory", m.root);
	/* no stall: anonymous memory without swap (measured: some avg10 <= 0.55 %) */
	{
		static const char idle[] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
					   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
		file_write_atomic(path, idle, strlen(idle), 0644);
	}
	pp.root = m.root;
	log_init(&log, "autoscale", LOG_WARNING);
	write_proc(&m);
	if (pressure_open(&pp, &log, &p) < 0)
		return -1;
	serve_policy_defaults(&pol);
	pol.law = law;
	pol.max = 1024 * MIB;
	pol.step = 128 * MIB;
	pol.shrink_step = 1024 * MIB;
	pol.reserve = 256 * MIB;
	pol.grow_cooldown = law == SERVE_LAW_MOM ? 15000 : 2000;
	pol.shrink_cooldown = law == SERVE_LAW_MOM ? 15000 : 5000;
	pol.slack_after = 3600000;

	for (m.now = 0; m.now < end; m.now += DT) {
		uint64_t want = target_at(m.now) * 1024, total, avail, used;
		int ph = phase_at(m.now, &start);

		/* the workload faults in at its rate; the OOM killer when MemTotal runs out */
		if (m.worker < want) {
			uint64_t add = FAULT_MIB_S * 1024 * DT / 1000;
			m.worker = m.worker + add < want ? m.worker + add : want;
		} else {
			m.worker = want;
		}
		if (BASE_MIB + m.worker / 1024 + MIN_FREE_MIB > BOOT_MIB + m.granted) {
			m.oom_kills++;
			m.worker = 0;
		}
		/* the host finishes its operation */
		if (m.pending && m.now >= m.busy_until) {
			m.granted += m.pending;
			m.pending = 0;
		}
		total = BOOT_MIB + m.granted;
		used = BASE_MIB + m.worker / 1024;
		avail = total > used ? total - used : 0;
		/* figures */
		if (avail < RESERVE_MIB)
			short_ms += DT;
		for (int b = 0; b < 3; b++) {
			if (ph == bursts[b] && m.now == start)
				total_at_burst[b] = total;
			if (ph >= bursts[b] && ph < release_after[b]) {
				if (relief[b] < 0 && total > total_at_burst[b] && total_at_burst[b])
					relief[b] = m.now;
				if (used + RESERVE_MIB > need_peak[b])
					need_peak[b] = used + RESERVE_MIB;
				if (total > granted_peak[b])
					granted_peak[b] = total;
			}
		}
		for (int r = 0; r < 2; r++)
			if (ph == releases[r] && floor_at[r] < 0 && total <= BOOT_MIB)
				floor_at[r] = m.now - start;
		if (ph != last_phase)
			last_dir = 0, last_phase = ph;
		if (total != last_total) {
			int dir = total > last_total ? 1 : -1;
			if (last_dir && dir != last_dir)
				reversals++;
			last_dir = dir;
			last_total = total;
		}
		/* the guest's monitor */
		if (m.now >= next_read) {
			write_proc(&m);
			pressure_read_once(p, &last_err);
			next_read = m.now + pressure_next_ms(p);
		}
		if (m.msg_at && m.now >= m.msg_at) {
			if (m.msg_request)
				m.request = m.msg_request, m.offer = 0;
			if (m.msg_offer)
				m.offer = m.msg_offer, m.request = 0;
			m.msg_request = m.msg_offer = 0;
			m.msg_at = 0;
		}
		/* the host sees MemTotal/MemAvailable as of its last query of the agent */
		if (m.now >= next_query) {
			seen_total = total;
			seen_avail = avail;
			next_query = m.now + pol.query_interval;
		}
		/* the host's tick */
		if (m.now >= next_tick) {
			struct law_input in = { .granted = m.granted * MIB, .block = 128 * MIB, .request = m.request * MIB,
						.offer = m.offer * MIB, .have_usage = true, .mem_total = seen_total * MIB,
						.mem_available = seen_avail * MIB, .slack_since = -1, .now = m.now,
						.grow_ok_at = m.grow_ok, .shrink_ok_at = m.shrink_ok };
			struct law_out o;

			next_tick += TICK_MS;
			if (m.pending || m.now < m.busy_until)
				continue; /* one operation at a time */
			law_decide(&pol, &in, &o);
			if (verbose && o.action != LAW_NONE)
				fprintf(stderr, "%s %6.1fs phase %d use %lluM total %lluM avail %lluM: %s\n", name,
					(double)m.now / 1000, ph, (unsigned long long)used, (unsigned long long)total,
					(unsigned long long)avail, o.why);
			if (o.action == LAW_GROW) {
				m.pending = o.bytes / MIB;
				m.busy_until = m.now + GROW_MS;
				m.plugs++;
				m.request = 0;
				m.grow_ok = m.now + pol.grow_cooldown;
				m.shrink_ok = m.now + pol.shrink_cooldown;
			} else if (o.action == LAW_SHRINK) {
				m.granted -= o.bytes / MIB;
				m.busy_until = m.now + SHRINK_MS;
				m.unplugs++;
				m.offer = 0;
				m.shrink_ok = m.now + pol.shrink_cooldown;
			} else if (o.refused_floor) {
				m.offer = 0;
			}
		}
	}
	for (int b = 0; b < 3; b++) {
		int64_t s0 = 0;
		size_t n = strlen(rel);
		for (int i = 0; i < bursts[b]; i++)
			s0 += trace[i].s * 1000;
		if (relief[b] >= 0)
			snprintf(rel + n, sizeof(rel) - n, "%s%.1f", b ? "/" : "", (double)(relief[b] - s0) / 1000);
		else
			snprintf(rel + n, sizeof(rel) - n, "%snever", b ? "/" : "");
		if (granted_peak[b] > need_peak[b] && granted_peak[b] - need_peak[b] > beyond)
			beyond = granted_peak[b] - need_peak[b];
	}
	for (int r = 0; r < 2; r++) {
		size_t n = strlen(flo);
		if (floor_at[r] >= 0)
			snprintf(flo + n, sizeof(flo) - n, "%s%.1f", r ? "/" : "", (double)floor_at[r] / 1000);
		else
			snprintf(flo + n, sizeof(flo) - n, "%snever", r ? "/" : "");
	}
	printf("%-28s %-20s %7.1f %4u %6lluM %-14s %4d %5u/%-5u\n", name, rel, (double)short_ms / 1000, m.oom_kills,
	       (unsigned long long)beyond, flo, reversals, m.plugs, m.unplugs);
	pressure_stop(p);
	rm_rf(m.root);
	return 0;
}

int main(void)
{
	verbose = getenv("VERBOSE") != NULL;
	printf("model of tests/vm/libvirt.sh's trace: boot %dM (%dM in use), faults %d MiB/s, grow %d ms, shrink %d ms, tick %d ms\n",
	       BOOT_MIB, BASE_MIB, FAULT_MIB_S, GROW_MS, SHRINK_MS, TICK_MS);
	printf("%-28s %-20s %7s %4s %7s %-14s %4s %11s\n", "law", "relief per burst (s)", "short s", "OOM", "beyond",
	       "floor after (s)", "rev", "plugs/unpl");
	if (run(SERVE_LAW_MEMGRANT, "memgrant") < 0 || run(SERVE_LAW_MOM, "mom") < 0 || run(SERVE_LAW_NAIVE, "naive") < 0)
		return 1;
	return 0;
}
