/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host serve's controller with 1,000 guests, on the fake hypervisor
 * and agents of the unit tests (tests/unit/providers/host/serve/fakehv.h;
 * every fourth domain DIMM, the others virtio-mem), with serve's default
 * policy (query_interval 5 s).  Each tick does what serve_loop.c's tick_cb()
 * and write_reports() do, at its cadence (200 ms): ctl_tick(), then, when
 * due (serve_views.c, at most once per SERVE_VIEW_MS), the status JSON and
 * the metrics text rendered and each file written when its text changed.
 * The guests' channels come up spread over one query interval, as guests
 * that booted at different times.
 *
 * Measures, once every guest is synced and idle:
 *  - the CPU time of a tick (CLOCK_PROCESS_CPUTIME_ID) per guest, mean over
 *    TICKS ticks, the files' writes included; what the fake guests and
 *    devices do, and serve's reading of the guests' lines (its event loop,
 *    not the tick), is not timed: the controller's sends are queued and the
 *    fake guests read them after;
 *  - the status file's writes in those ticks, while no guest's figures
 *    change (the agents still answer serve's queries);
 *  - the status file's writes after one guest's MemAvailable changes.
 * Prints the figures with the 1-minute load average; with BENCH_FIGS=1 also
 * "FIG KEY VALUE UNIT load=L [REFERENCE LABEL]" lines for bench/run.sh.
 * `make bench-bin`, then build/bench/serve_scale.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_GUESTS 1000
#define FH_MAX_DOMS N_GUESTS
#include "lib/fileio.h"
#include "lib/util.h"
#include "providers/host/serve/serve.h"
#include "tests/unit/providers/host/serve/fakehv.h"

#define TICK_MS 200        /* serve_loop.c: ticks at most 200 ms apart */
#define TICKS 200          /* idle ticks measured (40 s) */
#define WARMUP_MS 60000    /* channels up (spread over one query interval), synced, queried */
#define AFTER_TICKS 50     /* ticks watched after the change (two query intervals) */
#define TARGET_US 119.0    /* the figure: 77-119 us per guest per tick */
#define MAX_KEYS 8

/* what serve sent a guest, read by the fake agent after the tick */
struct inbox {
	char *buf;
	size_t len;
};

/* which keys of the status text differed from the last written, in how many ticks */
struct changed {
	char key[MAX_KEYS][48];
	unsigned ticks[MAX_KEYS];
	size_t n;
};

struct bench {
	struct fh *f;
	struct inbox in[N_GUESTS];
	struct serve_view status, metrics; /* serve's view files, in the bench's folder */
	size_t status_bytes, metrics_bytes;
	unsigned status_writes, metrics_writes, renders;
	struct changed why;
	int64_t ns_ctl, ns_status, ns_metrics, ns_max; /* CPU of the timed ticks */
	unsigned ticks;
	bool figs;
	char *status_path, *metrics_path;
};

static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void load1(char *out, size_t len)
{
	FILE *fp = fopen("/proc/loadavg", "re");

	snprintf(out, len, "?");
	if (fp) {
		if (fscanf(fp, "%15s", out) != 1)
			snprintf(out, len, "?");
		fclose(fp);
	}
}

static int guest_index(const char *domain)
{
	char *end;
	unsigned long i;

	if (domain[0] != 'g')
		return -ENOENT;
	i = strtoul(domain + 1, &end, 10);
	return *end || i >= N_GUESTS ? -ENOENT : (int)i;
}

/* ---- the controller's I/O: sends queued, events and log dropped (serve without an events file) ---- */

static int io_send(void *ud, const char *domain, const char *buf, size_t len)
{
	struct bench *b = ud;
	int i = guest_index(domain);
	struct inbox *in;
	char *n;

	if (i < 0 || !b->f->d[i].connected)
		return -ENOTCONN;
	in = &b->in[i];
	n = realloc(in->buf, in->len + len);
	if (!n)
		return -ENOMEM;
	memcpy(n + in->len, buf, len);
	in->buf = n;
	in->len += len;
	return 0;
}

/* as serve_loop.c's: an event makes the status due at the tick's end */
static void io_event(void *ud, json_t *ev)
{
	struct bench *b = ud;

	(void)ev;
	serve_view_soon(&b->status);
}

static void io_log(void *ud, int prio, const char *domain, const char *msg)
{
	(void)ud;
	(void)prio;
	(void)domain;
	(void)msg;
}

/* The fake agents read what serve sent them. */
static void guests_read(struct bench *b)
{
	for (int i = 0; i < N_GUESTS; i++) {
		struct inbox *in = &b->in[i];
		size_t pos = 0;

		while (pos < in->len) {
			char *nl = memchr(in->buf + pos, '\n', in->len - pos);
			size_t n = nl ? (size_t)(nl - (in->buf + pos)) : in->len - pos;
			if (n)
				fh_guest_reads(b->f, &b->f->d[i], in->buf + pos, n);
			pos += n + 1;
		}
		in->len = 0;
	}
}

/* Notes the keys of the lines where TEXT differs from LAST (same shape: same domains). */
static void note_changes(struct changed *w, const char *last, const char *text)
{
	char seen[MAX_KEYS] = { 0 };

	while (*last && *text) {
		const char *le = strchrnul(last, '\n'), *te = strchrnul(text, '\n');
		if (le - last != te - text || memcmp(last, text, (size_t)(te - text)) != 0) {
			const char *k = text, *c;
			size_t i, n;
			while (k < te && (*k == ' ' || *k == '"'))
				k++;
			c = memchr(k, '"', (size_t)(te - k));
			n = c ? (size_t)(c - k) : (size_t)(te - k);
			if (n >= sizeof(w->key[0]))
				n = sizeof(w->key[0]) - 1;
			for (i = 0; i < w->n; i++)
				if (strlen(w->key[i]) == n && !memcmp(w->key[i], k, n))
					break;
			if (i == w->n && w->n < MAX_KEYS) {
				memcpy(w->key[i], k, n);
				w->key[i][n] = '\0';
				w->n++;
			}
			if (i < w->n && !seen[i]) {
				seen[i] = 1;
				w->ticks[i]++;
			}
		}
		last = *le ? le + 1 : le;
		text = *te ? te + 1 : te;
	}
}

/* One of serve's ticks: ctl_tick() and write_reports() (serve_loop.c), the
 * view files rendered when due and written when changed (serve_views.c),
 * timed when TIMED (the copy that names what changed is not). */
static void serve_tick(struct bench *b, bool timed)
{
	struct fh *f = b->f;
	int64_t t0 = cpu_ns(), t1, t2, t3, tc = 0;
	_cleanup_free_ char *prev = NULL;
	bool w = false, mw = false;

	ctl_tick(f->ctl, f->now);
	t1 = t2 = t3 = cpu_ns();
	if (serve_view_due(&b->status, f->now)) {
		json_t *st = serve_status_json(f->ctl, &f->cfg);
		char *text = st ? json_dumps(st, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;

		json_decref(st);
		if (text)
			b->status_bytes = strlen(text);
		if (timed && text && b->status.last && !streq(b->status.last, text)) {
			int64_t c0 = cpu_ns();

			prev = strdup(b->status.last);
			tc = cpu_ns() - c0;
		}
		w = serve_view_put(&b->status, text) == 1;
		t2 = cpu_ns();
		text = serve_metrics_text(f->ctl);
		if (text)
			b->metrics_bytes = strlen(text);
		mw = serve_view_put(&b->metrics, text) == 1;
		t3 = cpu_ns();
		b->renders += timed;
	}
	if (prev && w)
		note_changes(&b->why, prev, b->status.last);
	if (!timed)
		return;
	b->status_writes += w;
	b->metrics_writes += mw;
	b->ns_ctl += t1 - t0;
	b->ns_status += t2 - t1 - tc;
	b->ns_metrics += t3 - t2;
	if (t3 - t0 - tc > b->ns_max)
		b->ns_max = t3 - t0 - tc;
	b->ticks++;
}

/* TICK_MS of fake time: guests and devices in fakehv.h's steps, then serve's tick. */
static void run_tick(struct bench *b, bool timed)
{
	for (int s = 0; s < TICK_MS / FH_STEP_MS; s++) {
		guests_read(b);
		fh_step_guests(b->f);
	}
	serve_tick(b, timed);
	guests_read(b);
}

static void measure_reset(struct bench *b)
{
	b->status_writes = b->metrics_writes = b->renders = b->ticks = 0;
	b->ns_ctl = b->ns_status = b->ns_metrics = b->ns_max = 0;
	memset(&b->why, 0, sizeof(b->why));
}

static int setup(struct bench *b, const char *dir)
{
	struct ctl_io io = { .send = io_send, .event = io_event, .log = io_log, .ud = b };
	struct fh *f = b->f;
	int r;

	fh_init(f, dir);
	f->quiet = true;
	serve_policy_defaults(&f->cfg.defaults); /* serve's own, not the tests' short times */
	for (int i = 0; i < N_GUESTS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "g%04d", i);
		if (!fh_add(f, name, i % 4 == 3 ? HV_DIMM : HV_VIRTIO_MEM))
			return -ENOSPC;
		f->d[i].connected = false; /* its channel comes up below */
	}
	r = ctl_new(&f->cfg, &fh_ops, f, &io, &f->ctl);
	for (int i = 0; r == 0 && i < N_GUESTS; i++)
		r = ctl_domain_add(f->ctl, f->d[i].name, f->now);
	if (r < 0)
		return r;
	/* the channels come up spread over one query interval; then every
	 * guest is synced and queried */
	for (int64_t t = 0; t < WARMUP_MS; t += TICK_MS) {
		for (int i = 0; i < N_GUESTS; i++)
			if (!f->d[i].connected && i % (f->cfg.defaults.query_interval / TICK_MS) == t / TICK_MS) {
				f->d[i].connected = true;
				ctl_channel_up(f->ctl, f->d[i].name, f->now);
			}
		run_tick(b, false);
	}
	for (size_t i = 0; i < ctl_domains(f->ctl); i++) {
		struct dom_view v;
		ctl_view(f->ctl, i, &v);
		if (!v.synced || v.phase != PH_IDLE || !v.mem_available) {
			fprintf(stderr, "serve_scale: %s not in steady state (synced %d, phase %s)\n", v.name, v.synced,
				dom_phase_name(v.phase));
			return -EAGAIN;
		}
	}
	return 0;
}

static const char *met(bool ok)
{
	return ok ? "met" : "missed";
}

/* A line of text (NOTE: indented), or with BENCH_FIGS=1 after TAG (TARGET, NOTE; HEAD as NOTE) for bench/run.sh. */
static void say(const struct bench *b, const char *tag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(const struct bench *b, const char *tag, const char *fmt, ...)
{
	va_list ap;

	if (b->figs)
		printf("%s ", streq(tag, "HEAD") ? "NOTE" : tag);
	else if (streq(tag, "NOTE"))
		printf("  ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void say_changes(const struct bench *b, const char *when)
{
	char t[MAX_KEYS * 80] = "";
	size_t n = 0;

	for (size_t i = 0; i < b->why.n; i++)
		n += (size_t)snprintf(t + n, sizeof(t) - n, "%s%s (in %u)", i ? ", " : "", b->why.key[i], b->why.ticks[i]);
	if (b->why.n)
		say(b, "NOTE", "status keys that changed %s: %s", when, t);
}

/* CPU of one file_write_view() of TEXT into DIR (mean of 20), in *NS. */
static int write_cost(const char *dir, const char *name, const char *text, int64_t *ns)
{
	char path[256];
	int64_t t0;
	int r = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	t0 = cpu_ns();
	for (int i = 0; i < 20 && r == 0; i++)
		r = file_write_view(path, text, strlen(text), 0644);
	*ns = (cpu_ns() - t0) / 20;
	return r < 0 ? r : 0;
}

static int bench(struct bench *b, const char *dir)
{
	struct fh *f = b->f;
	char ld[16];
	double us, us_ctl, us_st, us_m, us_max;
	unsigned idle_writes, idle_mwrites, idle_ticks, idle_renders, after;
	int64_t ns_sw = 0, ns_mw = 0;
	size_t n_dimm = 0;
	int r;

	for (int i = 0; i < N_GUESTS; i++)
		n_dimm += f->d[i].kind == HV_DIMM;
	say(b, "HEAD", "memgrant-host serve's controller, %d guests (%zu virtio-mem, %zu DIMM; fake hypervisor and agents), "
	    "a tick every %d ms, query_interval %lld ms, %d ticks timed from %d s after the channels came up", N_GUESTS,
	    N_GUESTS - n_dimm, n_dimm, TICK_MS, (long long)f->cfg.defaults.query_interval, TICKS, WARMUP_MS / 1000);
	/* the idle ticks */
	measure_reset(b);
	for (int k = 0; k < TICKS; k++)
		run_tick(b, true);
	load1(ld, sizeof(ld));
	us = (double)(b->ns_ctl + b->ns_status + b->ns_metrics) / 1000 / b->ticks / N_GUESTS;
	us_ctl = (double)b->ns_ctl / 1000 / b->ticks / N_GUESTS;
	us_st = (double)b->ns_status / 1000 / b->ticks / N_GUESTS;
	us_m = (double)b->ns_metrics / 1000 / b->ticks / N_GUESTS;
	us_max = (double)b->ns_max / 1000 / N_GUESTS;
	idle_writes = b->status_writes;
	idle_mwrites = b->metrics_writes;
	idle_ticks = b->ticks;
	idle_renders = b->renders;
	r = write_cost(dir, "status-copy.json", b->status.last, &ns_sw);
	if (r == 0)
		r = write_cost(dir, "metrics-copy.prom", b->metrics.last, &ns_mw);
	if (r < 0)
		return r;

	say(b, "TARGET", "serve_tick_us_per_guest@%d %.2f us   (target: no worse than %.0f us, the issue's figure: %s)   load %s",
	    N_GUESTS, us, TARGET_US, met(us <= TARGET_US), ld);
	say(b, "NOTE", "of which ctl_tick %.2f us, status JSON, compare, write %.2f us, metrics text, compare, write %.2f us; "
	    "slowest tick %.2f us per guest", us_ctl, us_st, us_m, us_max);
	say(b, "NOTE", "status text %zu B, metrics text %zu B; one file_write_view() of each: %.0f us, %.0f us of CPU; "
	    "the views rendered in %u of %u ticks (at most once per %d ms)", b->status_bytes, b->metrics_bytes,
	    (double)ns_sw / 1000, (double)ns_mw / 1000, idle_renders, idle_ticks, SERVE_VIEW_MS);
	say(b, "TARGET", "serve_status_writes_idle@%d %u in %u ticks   (target: 0: %s)   load %s", N_GUESTS, idle_writes,
	    idle_ticks, met(idle_writes == 0), ld);
	say_changes(b, "in the idle ticks");
	say(b, "NOTE", "the metrics text changed in %u of %u ticks", idle_mwrites, idle_ticks);
	if (b->figs) {
		printf("FIG serve_tick_us_per_guest@%d %.2f us load=%s %.0f issue_figure\n", N_GUESTS, us, ld, TARGET_US);
		printf("FIG serve_tick_ctl_us_per_guest@%d %.2f us load=%s\n", N_GUESTS, us_ctl, ld);
		printf("FIG serve_tick_status_us_per_guest@%d %.2f us load=%s\n", N_GUESTS, us_st, ld);
		printf("FIG serve_tick_metrics_us_per_guest@%d %.2f us load=%s\n", N_GUESTS, us_m, ld);
		printf("FIG serve_status_bytes@%d %zu B load=%s\n", N_GUESTS, b->status_bytes, ld);
		printf("FIG serve_status_writes_idle@%d %u in_%u_ticks load=%s 0 target\n", N_GUESTS, idle_writes,
		       idle_ticks, ld);
	}

	/* one guest's use grows: its next answer to a query has a lower MemAvailable */
	f->d[0].used_mem += 64 * FH_MIB;
	measure_reset(b);
	for (int k = 0; k < AFTER_TICKS; k++)
		run_tick(b, true);
	after = b->status_writes;
	load1(ld, sizeof(ld));
	say(b, "TARGET", "serve_status_writes_after_one_change@%d %u in %d ticks   (target: 1: %s; g0000's MemAvailable "
	    "fell by 64 MiB)   load %s", N_GUESTS, after, AFTER_TICKS, met(after == 1), ld);
	say_changes(b, "after the change");
	if (b->figs)
		printf("FIG serve_status_writes_after_one_change@%d %u in_%d_ticks load=%s 1 target\n", N_GUESTS, after,
		       AFTER_TICKS, ld);
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/mg-bench-serve.XXXXXX";
	struct bench *b = calloc(1, sizeof(*b));
	int r;

	if (!b || !(b->f = calloc(1, sizeof(*b->f))))
		return 1;
	b->figs = getenv("BENCH_FIGS") != NULL;
	if (!mkdtemp(dir)) {
		perror("serve_scale: mkdtemp");
		return 1;
	}
	if (asprintf(&b->status_path, "%s/serve-status.json", dir) < 0 ||
	    asprintf(&b->metrics_path, "%s/metrics.prom", dir) < 0)
		return 1;
	b->status.path = b->status_path;
	b->metrics.path = b->metrics_path;
	r = setup(b, dir);
	if (r == 0)
		r = bench(b, dir);
	if (r < 0)
		fprintf(stderr, "serve_scale: %s\n", strerror(-r));
	fh_done(b->f);
	for (int i = 0; i < N_GUESTS; i++)
		free(b->in[i].buf);
	serve_view_done(&b->status);
	serve_view_done(&b->metrics);
	free(b->status_path);
	free(b->metrics_path);
	free(b->f);
	free(b);
	rm_rf(dir);
	return r < 0 ? 1 : 0;
}
