/* SPDX-License-Identifier: MIT */
/*
 * Memory-pressure monitor: one thread that sleeps in poll() on the PSI
 * trigger, the next reading's time (adaptive to the allocation rate) and an
 * eventfd for stopping.
 */
#include "providers/pressure.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <time.h>

#include "hotplug/policy.h"
#include "lib/timeutil.h"
#include "lib/fileio.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/engine.h"
#include "providers/views/views_json.h"

#define PSI_FILE_MAX 4096
#define VMSTAT_MAX 65536

/* memgrantd's wiring (pressure_start_daemon) */
struct glue {
	struct engine *d;
	pressure_fire_fn *fire;
	void *fire_ctx;
	bool https, channel;
	struct mg_log log;
};

struct pressure {
	struct mg_log log;
	struct mg_pressure_config cfg;
	char *root, *agent_id;
	char psi_path[4096], meminfo_path[4096], vmstat_path[4096];
	uint64_t reserve;
	unsigned interval_ms;
	void (*emit)(void *ud, const char *event, json_t *msg, json_t *detail);
	uint64_t (*revocable)(void *ud);
	uint64_t (*clock_ms)(void *ud);
	void *ud;
	struct glue *glue;

	enum pressure_source source;
	int trig_fd;
	int wake_fd;
	pthread_t thread;
	bool started;
	bool trigger_fired;             /* POLLPRI since the last reading */
	int meminfo_err, vmstat_err;    /* last read errors, logged once */

	/* what was measured */
	bool have_mem;
	uint64_t avail, total;
	uint64_t rate;                  /* bytes/s MemAvailable falls (0 when it rises) */
	uint64_t peak_rate, peak_at_ms; /* the fastest of the last PRESSURE_PEAK_MS (see recent_peak()) */
	bool said_waiting;              /* "not answered yet" logged for the current request */
	uint64_t ref_ms, ref_avail, ref_total; /* the rate's reference reading */
	bool have_ref;
	bool have_oom;
	uint64_t oom_kills;
	uint64_t latency_ms;            /* the last answered request's: request to MemTotal grown (0: none yet) */
	uint64_t given_back_ms;         /* when MemTotal last shrank (0: never) */

	/* decisions */
	bool requested, offered;
	uint64_t last_request_ms, last_offer_ms, low_since_ms;
	uint64_t total_at_request, total_at_offer;
	uint64_t last_request_bytes;
	bool asked;                     /* a request was ever sent */
};

static const char *source_name(enum pressure_source s)
{
	switch (s) {
	case PRESSURE_PSI_TRIGGER: return "psi-trigger";
	case PRESSURE_PSI: return "psi";
	case PRESSURE_MEMINFO: return "meminfo";
	}
	return "?";
}

enum pressure_source pressure_source(const struct pressure *p)
{
	return p->source;
}

static const char *kind_name(enum mg_psi_kind k)
{
	return k == MG_PSI_FULL ? "full" : "some";
}


int pressure_trigger_line(const struct mg_psi_trigger *t, uint64_t window_us, char *out, size_t len)
{
	uint64_t stall;

	/* "avgN > X %" as "stalled more than X % of a short window" */
	stall = window_us * t->threshold_centi / 10000;
	if (stall == 0)
		stall = 1;
	if ((size_t)snprintf(out, len, "%s %llu %llu", kind_name(t->kind), (unsigned long long)stall,
			     (unsigned long long)window_us) >= len)
		return -ENOBUFS;
	return 0;
}

/* ---- choosing the source ----------------------------------------------------- */

static void choose_source(struct pressure *p)
{
	struct statfs sf;
	char line[64];
	int fd;

	p->trig_fd = -1;
	fd = open(p->psi_path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS))
		fd = open(p->psi_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		log_notice(&p->log, "pressure: %s: %s; PSI is not available: MemAvailable and the OOM kill count only "
			   "(read at least every %gs)", p->psi_path, strerror(errno), (double)p->interval_ms / 1000);
		p->source = PRESSURE_MEMINFO;
		return;
	}
	if (fstatfs(fd, &sf) < 0 || sf.f_type != PROC_SUPER_MAGIC) {
		/* a trigger written to anything else would only change a file */
		log_notice(&p->log, "pressure: %s is not procfs: no PSI trigger, reading it every %gs",
			   p->psi_path, (double)p->interval_ms / 1000);
		close(fd);
		p->source = PRESSURE_PSI;
		return;
	}
	pressure_trigger_line(&p->cfg.request_above, PRESSURE_TRIGGER_WINDOW_US, line, sizeof(line));
	if (write(fd, line, strlen(line) + 1) < 0 && (errno == EINVAL || errno == EPERM)) {
		/* an unprivileged writer gets windows in multiples of 2 s only */
		pressure_trigger_line(&p->cfg.request_above, PRESSURE_TRIGGER_WINDOW_UNPRIV_US, line, sizeof(line));
		if (write(fd, line, strlen(line) + 1) >= 0)
			errno = 0;
	} else {
		errno = 0;
	}
	if (errno) {
		log_notice(&p->log, "pressure: %s refuses the trigger \"%s\" (%s): reading it every %gs", p->psi_path,
			   line, errno_name(errno), (double)p->interval_ms / 1000);
		close(fd);
		p->source = PRESSURE_PSI;
		return;
	}
	log_info(&p->log, "pressure: PSI trigger \"%s\" on %s", line, p->psi_path);
	p->trig_fd = fd;
	p->source = PRESSURE_PSI_TRIGGER;
}

/* ---- decisions ----------------------------------------------------------------- */

static void make_id(const char *prefix, char *out, size_t len)
{
	uint8_t b[8] = { 0 };

	if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t)sizeof(b)) {
		uint64_t t = mono_ms();
		memcpy(b, &t, sizeof(b));
	}
	snprintf(out, len, "%s-%02x%02x%02x%02x%02x%02x%02x%02x", prefix, b[0], b[1], b[2], b[3], b[4], b[5],
		 b[6], b[7]);
}

/* Gives MSG (stolen) its id, logs it and hands it to emit. */
static void send_msg(struct pressure *p, const char *event, json_t *msg, json_t *detail)
{
	const char *type = json_string_value(json_object_get(msg, "type"));
	char id[40], sz[16];

	if (!msg || !type) {
		log_err(&p->log, "pressure: out of memory, a %s was not sent", event);
		json_decref(msg);
		return;
	}
	make_id(streq(type, "request") ? "rq" : "of", id, sizeof(id));
	json_object_set_new(msg, "id", json_string(id));
	size_format((uint64_t)json_integer_value(json_object_get(msg, "bytes")), sz, sizeof(sz));
	log_notice(&p->log, "pressure: %s %s (%s): %s", streq(type, "request") ? "requesting" : "offering", sz, id,
		   json_string_value(json_object_get(msg, "reason")));
	p->emit(p->ud, event, msg, detail);
	json_decref(msg);
}

/* One reading: PSI's verdicts (psi source) and what it measured. */
struct sample {
	bool psi_high, psi_low;
	bool have_psi_low;       /* release_below applies to this reading */
	uint64_t low_hold_ms;    /* how long idleness must last */
	char psi_high_reason[160], psi_low_reason[160];
	json_t *detail;
};

static void fmt_pct(unsigned centi, char *out, size_t len)
{
	snprintf(out, len, "%u.%02u%%", centi / 100, centi % 100);
}

static int read_psi(struct pressure *p, struct sample *s)
{
	_cleanup_free_ char *text = NULL;
	const struct mg_psi_trigger *ra = &p->cfg.request_above, *rb = &p->cfg.release_below;
	unsigned hv = 0, lv = 0;
	char v[16], t[16];
	size_t n = 0;
	int rc = file_read_all(p->psi_path, PSI_FILE_MAX, &text, &n);

	if (rc < 0)
		return rc;
	rc = pressure_parse_psi(text, ra->kind, ra->window_s, &hv);
	if (rc == 0 && rb->set)
		rc = pressure_parse_psi(text, rb->kind, rb->window_s, &lv);
	if (rc < 0)
		return rc;
	s->psi_high = hv > ra->threshold_centi;
	s->psi_low = rb->set && lv < rb->threshold_centi;
	fmt_pct(hv, v, sizeof(v));
	fmt_pct(ra->threshold_centi, t, sizeof(t));
	snprintf(s->psi_high_reason, sizeof(s->psi_high_reason), "memory pressure %s avg%u %s is above %s",
		 kind_name(ra->kind), ra->window_s, v, t);
	if (p->trigger_fired && !s->psi_high) {
		s->psi_high = true;
		snprintf(s->psi_high_reason, sizeof(s->psi_high_reason),
			 "the PSI trigger fired (%s stalls above %s of a short window; avg%u %s)", kind_name(ra->kind), t,
			 ra->window_s, v);
	}
	if (rb->set) {
		fmt_pct(lv, v, sizeof(v));
		fmt_pct(rb->threshold_centi, t, sizeof(t));
		snprintf(s->psi_low_reason, sizeof(s->psi_low_reason), "memory pressure %s avg%u %s is below %s",
			 kind_name(rb->kind), rb->window_s, v, t);
	}
	json_object_set_new(s->detail, "psi", json_pack("{s:s,s:I,s:f,s:f}", "line", kind_name(ra->kind), "window",
						       (json_int_t)ra->window_s, "value", hv / 100.0, "threshold",
						       ra->threshold_centi / 100.0));
	return 0;
}

static uint64_t now_ms(const struct pressure *p)
{
	return p->clock_ms ? p->clock_ms(p->ud) : mono_ms();
}

/* The fastest allocation rate of the last PRESSURE_PEAK_MS, weighed by how
 * recent it is: full just after, nothing at the end.  The guest keeps the
 * headroom of it, so memory goes back in step with the burst fading; 20 s,
 * not a minute: with the 10 s in which the release must hold first, a
 * longer fade kept a burst's headroom past the 30 s in which a guest should
 * be back at its floor after a release (the libvirt test). */
static uint64_t recent_peak(const struct pressure *p, uint64_t now)
{
	uint64_t age = now > p->peak_at_ms ? now - p->peak_at_ms : 0;

	if (age >= PRESSURE_PEAK_MS)
		return 0;
	return p->peak_rate / 1000 * ((PRESSURE_PEAK_MS - age) * 1000 / PRESSURE_PEAK_MS);
}

/* An offer not answered yet, or memory that left within the grow latency:
 * the guest is giving memory back, and what that does to MemAvailable (and
 * to PSI: offlining migrates pages) is not the workload's. */
static bool giving_back(const struct pressure *p, uint64_t now)
{
	uint64_t lat = p->latency_ms && p->latency_ms < p->cfg.plug_latency_ms ? p->latency_ms : p->cfg.plug_latency_ms;

	if (!p->have_mem)
		return false; /* nothing to tell the workload's from the revocation's */
	if (p->offered && p->total >= p->total_at_offer && now - p->last_offer_ms < p->cfg.cooldown_ms)
		return true;
	return p->given_back_ms && now - p->given_back_ms < lat;
}

/* MemAvailable, MemTotal and the allocation rate; missing files are logged once. */
static void read_memory(struct pressure *p, uint64_t now)
{
	uint64_t total = 0, avail = 0;
	int r = policy_read_meminfo(p->root, &total, &avail);

	if (r < 0) {
		if (r != p->meminfo_err)
			log_warn(&p->log, "pressure: cannot read %s: %s; only PSI can ask for memory", p->meminfo_path,
				 strerror(-r));
		p->meminfo_err = r;
		p->have_mem = false;
		p->have_ref = false;
		return;
	}
	p->meminfo_err = 0;
	if (p->requested && p->have_mem && total > p->total_at_request && p->total <= p->total_at_request &&
	    now >= p->last_request_ms)
		p->latency_ms = now - p->last_request_ms; /* the first rise after a request: it was answered */
	if (p->have_mem && total < p->total)
		p->given_back_ms = now;
	p->have_mem = true;
	p->avail = avail;
	p->total = total;
	if (giving_back(p, now)) {
		/* a revocation isolates its pages before MemTotal drops: MemAvailable
		 * falls, but nothing allocates; no rate sample from it */
		p->have_ref = false;
		p->rate /= 2;
		return;
	}
	if (!p->have_ref || total != p->ref_total || now < p->ref_ms) {
		/* memory came or went: the rate starts over from here */
		p->have_ref = true;
		p->ref_ms = now;
		p->ref_avail = avail;
		p->ref_total = total;
		return;
	}
	if (now - p->ref_ms < PRESSURE_RATE_MIN_DT_MS)
		return;
	{
		uint64_t dt = now - p->ref_ms;
		uint64_t fell = p->ref_avail > avail ? p->ref_avail - avail : 0;
		uint64_t inst = fell > UINT64_MAX / 1000 ? UINT64_MAX / dt : fell * 1000 / dt;

		/* up at once, down by half per sample: a pause in a burst is not its end */
		p->rate = inst >= p->rate ? inst : (p->rate + inst) / 2;
		p->ref_ms = now;
		p->ref_avail = avail;
	}
	if (p->rate >= recent_peak(p, now)) {
		p->peak_rate = p->rate;
		p->peak_at_ms = now;
	}
}

/* OOM kills since the last reading (0 when unknown). */
static uint64_t read_oom_kills(struct pressure *p)
{
	_cleanup_free_ char *text = NULL;
	uint64_t count = 0, more = 0;
	size_t n = 0;
	int r = file_read_all(p->vmstat_path, VMSTAT_MAX, &text, &n);

	if (r == 0)
		r = pressure_parse_oom_kills(text, &count);
	if (r < 0) {
		if (r != p->vmstat_err)
			log_notice(&p->log, "pressure: no OOM kill count in %s (%s)", p->vmstat_path, strerror(-r));
		p->vmstat_err = r;
		return 0;
	}
	p->vmstat_err = 0;
	if (p->have_oom && count > p->oom_kills)
		more = count - p->oom_kills;
	p->have_oom = true;
	p->oom_kills = count;
	return more;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* How long a grow takes: what the last one took, at most plug_latency. */
static uint64_t latency_ms(const struct pressure *p)
{
	if (p->latency_ms && p->latency_ms < p->cfg.plug_latency_ms)
		return p->latency_ms < PRESSURE_LATENCY_MIN_MS ? PRESSURE_LATENCY_MIN_MS : p->latency_ms;
	return p->cfg.plug_latency_ms;
}

/* Memory the guest uses up while a grow is on its way, at RATE bytes/s. */
static uint64_t headroom(const struct pressure *p, uint64_t rate)
{
	return mul_sat(rate, latency_ms(p)) / 1000;
}

unsigned pressure_next_ms(const struct pressure *p)
{
	uint64_t left, ms;

	if (!p->have_mem || p->rate == 0)
		return p->interval_ms;
	left = p->avail > p->reserve ? p->avail - p->reserve : 0;
	ms = mul_sat(left, 1000) / p->rate / 4;
	if (ms < PRESSURE_INTERVAL_MIN_MS)
		ms = PRESSURE_INTERVAL_MIN_MS;
	return ms < p->interval_ms ? (unsigned)ms : p->interval_ms;
}

static void send_request(struct pressure *p, uint64_t now, uint64_t oom_more, const struct sample *s)
{
	uint64_t h = headroom(p, p->rate), deficit = 0, bytes, step = p->cfg.step ? p->cfg.step : 1;
	char reason[320], a[16], r[16], rt[16], hd[16];
	bool low_mem = p->have_mem && p->avail < add_sat(p->reserve, h);
	bool answered = p->have_mem && p->total > p->total_at_request;
	json_t *msg;

	if (!low_mem && !s->psi_high && !oom_more)
		return;
	if (p->have_mem && add_sat(p->reserve, 2 * h) > p->avail)
		deficit = add_sat(p->reserve, 2 * h) - p->avail;
	/* the kernel kills only with nothing left: what the victim freed is
	 * back in MemAvailable now, and the workload takes it again at once */
	if (oom_more && add_sat(p->reserve, 2 * h) > deficit)
		deficit = add_sat(p->reserve, 2 * h);
	bytes = deficit > step ? deficit : step;
	bytes = bytes % step ? add_sat(bytes, step - bytes % step) : bytes;
	/* an unanswered request is repeated only after the cooldown, unless the
	 * need grew past it (the host may have refused the smaller one) */
	if (p->requested && now - p->last_request_ms < p->cfg.cooldown_ms && !answered && !oom_more &&
	    (bytes <= p->last_request_bytes || now - p->last_request_ms < PRESSURE_REQUEST_GAP_MS)) {
		if (!p->said_waiting)
			log_debug(&p->log, "pressure: still short of memory; the request is not answered yet");
		p->said_waiting = true;
		return;
	}
	p->said_waiting = false;
	size_format(p->avail, a, sizeof(a));
	size_format(p->reserve, r, sizeof(r));
	size_format(p->rate, rt, sizeof(rt));
	size_format(h, hd, sizeof(hd));
	if (oom_more)
		snprintf(reason, sizeof(reason), "the OOM killer ran %llu time%s (MemAvailable %s, reserve %s)",
			 (unsigned long long)oom_more, oom_more == 1 ? "" : "s", a, r);
	else if (p->have_mem && p->avail < p->reserve)
		snprintf(reason, sizeof(reason), "MemAvailable %s is below the reserve %s (falling %s/s)", a, r, rt);
	else if (low_mem)
		snprintf(reason, sizeof(reason),
			 "MemAvailable %s falls %s/s: below the reserve %s before a grow could arrive (headroom %s)", a,
			 rt, r, hd);
	else
		snprintf(reason, sizeof(reason), "%s", s->psi_high_reason);
	p->requested = true;
	p->offered = false;
	p->last_request_ms = now;
	p->last_request_bytes = bytes;
	p->asked = true;
	p->total_at_request = p->total;
	p->low_since_ms = 0;
	msg = json_pack("{s:s,s:s,s:s,s:I,s:s,s:I,s:I}", "type", "request", "id", "", "agent", p->agent_id, "bytes",
			(json_int_t)bytes, "reason", reason, "deficit_bytes", (json_int_t)deficit, "alloc_bytes_per_s",
			(json_int_t)p->rate);
	if (msg && p->have_mem)
		json_object_set_new(msg, "mem_available_bytes", json_integer((json_int_t)p->avail));
	send_msg(p, "pressure.high", msg, s->detail);
}

static void send_offer(struct pressure *p, uint64_t now, const struct sample *s)
{
	uint64_t keep = headroom(p, recent_peak(p, now)), step = p->cfg.step ? p->cfg.step : 1, surplus = 0, bytes;
	bool answered = p->have_mem && p->total < p->total_at_offer;
	char reason[320], a[16], k[16];
	json_t *msg;

	if (p->have_mem) {
		uint64_t floor = add_sat(p->reserve, keep);
		surplus = p->avail > floor ? p->avail - floor : 0;
		surplus -= surplus % step;
	} else {
		surplus = step;
	}
	/* idle means not allocating: MemAvailable falling faster than a step a
	 * minute is a ramp in progress, however much is left */
	if (!p->cfg.release_below.set || surplus == 0 || (s->have_psi_low && !s->psi_low) ||
	    mul_sat(p->rate, 60) >= step) {
		p->low_since_ms = 0;
		return;
	}
	if (!p->low_since_ms)
		p->low_since_ms = now;
	if (now - p->low_since_ms < s->low_hold_ms)
		return;
	/* a request not answered within its cooldown (even one forgotten as a
	 * need gone): the memory it asked for may still be on its way */
	if (p->asked && now - p->last_request_ms < p->cfg.cooldown_ms && p->total <= p->total_at_request)
		return;
	if (p->offered && now - p->last_offer_ms < p->cfg.cooldown_ms && !answered)
		return;
	bytes = p->revocable ? p->revocable(p->ud) : 0;
	if (bytes == 0)
		return; /* nothing this agent could give back */
	if (bytes > surplus)
		bytes = surplus;
	size_format(p->avail, a, sizeof(a));
	size_format(keep, k, sizeof(k));
	if (s->have_psi_low && p->have_mem)
		snprintf(reason, sizeof(reason), "%s; MemAvailable %s, keeping the reserve and %s for the recent allocation rate",
			 s->psi_low_reason, a, k);
	else if (p->have_mem)
		snprintf(reason, sizeof(reason),
			 "MemAvailable %s stayed above the reserve and %s (the recent allocation rate) for %llus", a, k,
			 (unsigned long long)(s->low_hold_ms / 1000));
	else
		snprintf(reason, sizeof(reason), "%s", s->psi_low_reason);
	p->offered = true;
	p->last_offer_ms = now;
	p->total_at_offer = p->total;
	msg = json_pack("{s:s,s:s,s:s,s:I,s:s}", "type", "offer", "id", "", "agent", p->agent_id, "bytes",
			(json_int_t)bytes, "reason", reason);
	send_msg(p, "pressure.low", msg, s->detail);
}

static void decide(struct pressure *p, uint64_t now, uint64_t oom_more, const struct sample *s)
{
	uint64_t h = headroom(p, p->rate);
	bool low_mem = p->have_mem && p->avail < add_sat(p->reserve, h);
	struct sample own = *s;

	if (own.psi_high && giving_back(p, now)) {
		/* stalls of the revocation's own page migration */
		log_debug(&p->log, "pressure: %s while giving memory back: not counted", s->psi_high_reason);
		own.psi_high = false;
		s = &own;
	}

	/* the need is gone (back above the watermark, no PSI pressure): an
	 * unanswered request is forgotten, the next shortage is a new need */
	if (p->requested && p->have_mem && !low_mem && !s->psi_high && !oom_more &&
	    p->total <= p->total_at_request) {
		p->requested = false;
		p->last_request_bytes = 0;
	}

	if (oom_more || low_mem || s->psi_high) {
		p->low_since_ms = 0;
		send_request(p, now, oom_more, s);
		return;
	}
	send_offer(p, now, s);
}

int pressure_read_once(struct pressure *p, int *last_err)
{
	struct sample s = { 0 };
	uint64_t now = now_ms(p), oom_more;
	int r = 0;

	s.detail = json_object();
	if (!s.detail)
		return -ENOMEM;
	read_memory(p, now);
	oom_more = read_oom_kills(p);
	if (p->source != PRESSURE_MEMINFO) {
		r = read_psi(p, &s);
		if (r == -EOPNOTSUPP) {
			/* kernel built with PSI but booted with psi=0 */
			log_notice(&p->log, "pressure: %s: PSI is disabled; MemAvailable and the OOM kill count only",
				   p->psi_path);
			if (p->trig_fd >= 0)
				close(p->trig_fd);
			p->trig_fd = -1;
			p->source = PRESSURE_MEMINFO;
			r = 0;
		} else if (r < 0) {
			if (r != *last_err)
				log_warn(&p->log, "pressure: cannot read %s: %s", p->psi_path, strerror(-r));
		}
	}
	p->trigger_fired = false;
	/* the surplus must last release_below's window (with PSI, its average
	 * holding too): memory a ramp is still eating into is not idle */
	s.have_psi_low = r == 0 && p->source != PRESSURE_MEMINFO && p->cfg.release_below.set;
	s.low_hold_ms = (uint64_t)p->cfg.release_below.window_s * 1000;
	if (r < 0 && !p->have_mem) {
		*last_err = r;
		json_decref(s.detail);
		return r;
	}
	*last_err = r;
	json_object_set_new(s.detail, "source", json_string(source_name(p->source)));
	if (p->have_mem) {
		json_object_set_new(s.detail, "mem_available", json_integer((json_int_t)p->avail));
		json_object_set_new(s.detail, "mem_total", json_integer((json_int_t)p->total));
		json_object_set_new(s.detail, "reserve", json_integer((json_int_t)p->reserve));
		json_object_set_new(s.detail, "alloc_bytes_per_s", json_integer((json_int_t)p->rate));
	}
	if (p->have_oom)
		json_object_set_new(s.detail, "oom_kill", json_integer((json_int_t)p->oom_kills));
	decide(p, now, oom_more, &s);
	json_decref(s.detail);
	return 0;
}

static void *pressure_main(void *arg)
{
	struct pressure *p = arg;
	bool first = true;
	int last_err = 0;

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = p->wake_fd, .events = POLLIN },
			{ .fd = p->trig_fd, .events = POLLPRI },
		};
		/* MemAvailable and the OOM kill count have no trigger: read at least this often */
		int timeout = (int)pressure_next_ms(p);
		int r;

		if (first)
			timeout = 0;
		first = false;
		r = poll(pfd, ARRAY_SIZE(pfd), timeout);
		if (r < 0 && errno != EINTR) {
			log_err(&p->log, "pressure: poll: %s; monitor stopped", strerror(errno));
			break;
		}
		if (pfd[0].revents & POLLIN)
			break;
		if (pfd[1].revents & POLLERR) {
			/* the trigger went away (cgroup removed): read at an interval */
			log_warn(&p->log, "pressure: the PSI trigger stopped working; reading %s every %gs",
				 p->psi_path, (double)p->interval_ms / 1000);
			close(p->trig_fd);
			p->trig_fd = -1;
			p->source = PRESSURE_PSI;
		} else if (pfd[1].revents & POLLPRI) {
			p->trigger_fired = true;
		}
		pressure_read_once(p, &last_err);
	}
	return NULL;
}

int pressure_open(const struct pressure_params *pp, const struct mg_log *log, struct pressure **out)
{
	struct pressure *p;
	int r;

	if (!pp->cfg || !pp->cfg->enabled || !pp->emit || !pp->root)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->log = *log;
	p->cfg = *pp->cfg;
	p->trig_fd = -1;
	p->reserve = pp->reserve;
	p->interval_ms = pp->interval_ms ? pp->interval_ms
			 : pp->cfg->interval_ms ? (unsigned)pp->cfg->interval_ms : PRESSURE_INTERVAL_DEFAULT_MS;
	if (!p->cfg.plug_latency_ms)
		p->cfg.plug_latency_ms = 5000;
	p->emit = pp->emit;
	p->revocable = pp->revocable;
	p->clock_ms = pp->clock_ms;
	p->ud = pp->userdata;
	p->root = strdup(pp->root);
	p->agent_id = strdup(pp->agent_id ? pp->agent_id : "");
	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->root || !p->agent_id || p->wake_fd < 0) {
		r = p->wake_fd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	{
		const char *sep = p->root[0] && p->root[strlen(p->root) - 1] == '/' ? "" : "/";
		snprintf(p->psi_path, sizeof(p->psi_path), "%s%sproc/pressure/memory", p->root, sep);
		snprintf(p->meminfo_path, sizeof(p->meminfo_path), "%s%sproc/meminfo", p->root, sep);
		snprintf(p->vmstat_path, sizeof(p->vmstat_path), "%s%sproc/vmstat", p->root, sep);
	}
	choose_source(p);
	*out = p;
	return 0;
fail:
	pressure_stop(p);
	return r;
}

int pressure_start(const struct pressure_params *pp, const struct mg_log *log, struct pressure **out)
{
	struct pressure *p = NULL;
	int r = pressure_open(pp, log, &p);

	if (r < 0)
		return r;
	r = -pthread_create(&p->thread, NULL, pressure_main, p);
	if (r < 0) {
		pressure_stop(p);
		return r;
	}
	p->started = true;
	*out = p;
	return 0;
}

void pressure_stop(struct pressure *p)
{
	uint64_t one = 1;

	if (!p)
		return;
	if (p->started) {
		if (write(p->wake_fd, &one, sizeof(one)) < 0) {
			/* cannot happen with a fresh eventfd */
		}
		pthread_join(p->thread, NULL);
	}
	if (p->trig_fd >= 0)
		close(p->trig_fd);
	if (p->wake_fd >= 0)
		close(p->wake_fd);
	free(p->root);
	free(p->agent_id);
	free(p->glue);
	free(p);
}

/* ---- memgrantd's wiring -------------------------------------------------------------- */

static void glue_emit(void *ud, const char *event, json_t *msg, json_t *detail)
{
	struct glue *g = ud;
	json_t *fields;

	/* the providers deliver outbox entries of any type */
	if (g->https) {
		int r = views_outbox_push(g->d, "https", msg);
		if (r < 0)
			log_err(&g->log, "pressure: cannot queue the %s for https: %s",
				json_string_value(json_object_get(msg, "type")), strerror(-r));
	}
	if (g->channel) {
		int r = views_outbox_push(g->d, "channel", msg);
		if (r < 0)
			log_err(&g->log, "pressure: cannot queue the %s for the channel: %s",
				json_string_value(json_object_get(msg, "type")), strerror(-r));
	}
	if (g->fire) {
		fields = json_pack("{s:O,s:O?}", "message", msg, "pressure", detail);
		if (fields)
			g->fire(g->fire_ctx, event, fields);
		json_decref(fields);
	}
}

static uint64_t glue_revocable(void *ud)
{
	struct glue *g = ud;
	struct engine_memory m;

	return engine_memory(g->d, &m) == 0 ? m.granted_bytes : 0;
}

int pressure_start_daemon(const struct mg_config *cfg, struct engine *d, pressure_fire_fn *fire, void *fire_ctx,
			  const struct mg_log *log, struct pressure **out)
{
	struct glue *g = calloc(1, sizeof(*g));
	struct pressure_params pp = {
		.cfg = &cfg->pressure,
		.agent_id = cfg->agent.id,
		.reserve = cfg->policy.reserve,
		.emit = glue_emit,
		.revocable = glue_revocable,
		.userdata = g,
	};
	int r;

	if (!g)
		return -ENOMEM;
	g->d = d;
	g->fire = fire;
	g->fire_ctx = fire_ctx;
	g->https = cfg->providers.https.enabled;
	g->channel = cfg->providers.channel.enabled;
	g->log = *log;
	if (!g->https && !g->channel)
		log_notice(log, "pressure: no control-plane provider is configured; requests and offers only fire hooks");
	pp.root = engine_backend_root(d);
	r = pressure_start(&pp, log, out);
	if (r < 0) {
		free(g);
		return r;
	}
	(*out)->glue = g;
	return 0;
}
