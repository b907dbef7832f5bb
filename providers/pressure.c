/* SPDX-License-Identifier: MIT */
/*
 * Memory-pressure monitor: one thread that sleeps in poll() on the PSI
 * trigger (or an interval when there is none) and an eventfd for stopping.
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
	char psi_path[4096];
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

	/* decisions */
	bool requested, offered;
	uint64_t last_request_ms, last_offer_ms, low_since_ms;
};

enum pressure_source pressure_source(const struct pressure *p)
{
	return p->source;
}

static const char *kind_name(enum mg_psi_kind k)
{
	return k == MG_PSI_FULL ? "full" : "some";
}


int pressure_trigger_line(const struct mg_psi_trigger *t, char *out, size_t len)
{
	uint64_t window = (uint64_t)t->window_s * 1000000u, stall;

	if (window > PRESSURE_TRIGGER_WINDOW_MAX_US)
		window = PRESSURE_TRIGGER_WINDOW_MAX_US;
	/* "avgN > X %" as "stalled more than X % of the window" */
	stall = window * t->threshold_centi / 10000;
	if (stall == 0)
		stall = 1;
	if ((size_t)snprintf(out, len, "%s %llu %llu", kind_name(t->kind), (unsigned long long)stall,
			     (unsigned long long)window) >= len)
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
		log_notice(&p->log, "pressure: %s: %s; PSI is not available, reading MemAvailable every %gs instead",
			   p->psi_path, strerror(errno), (double)p->interval_ms / 1000);
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
	pressure_trigger_line(&p->cfg.request_above, line, sizeof(line));
	if (write(fd, line, strlen(line) + 1) < 0) {
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

static void send_msg(struct pressure *p, const char *event, const char *type, uint64_t bytes, const char *reason,
		 json_t *detail)
{
	char id[40];
	json_t *msg;

	make_id(streq(type, "request") ? "rq" : "of", id, sizeof(id));
	msg = json_pack("{s:s,s:s,s:s,s:I,s:s}", "type", type, "id", id, "agent", p->agent_id, "bytes",
			(json_int_t)bytes, "reason", reason);
	if (!msg) {
		log_err(&p->log, "pressure: out of memory, %s not sent", type);
		return;
	}
	{
		char sz[16];
		size_format(bytes, sz, sizeof(sz));
		log_notice(&p->log, "pressure: %s %s (%s): %s", streq(type, "request") ? "requesting" : "offering", sz,
			   id, reason);
	}
	p->emit(p->ud, event, msg, detail);
	json_decref(msg);
}

/* One reading: HIGH request_above holds, LOW release_below holds. */
struct sample {
	bool high, low;
	uint64_t low_hold_ms;    /* how long LOW must last */
	char high_reason[160], low_reason[160];
	json_t *detail;
};

static void fmt_pct(unsigned centi, char *out, size_t len)
{
	snprintf(out, len, "%u.%02u%%", centi / 100, centi % 100);
}

static int read_sample(struct pressure *p, struct sample *s)
{
	memset(s, 0, sizeof(*s));
	if (p->source == PRESSURE_MEMINFO) {
		uint64_t avail = 0;
		char a[16], r[16];
		int rc = policy_read_meminfo(p->root, NULL, &avail);

		if (rc < 0)
			return rc;
		size_format(avail, a, sizeof(a));
		size_format(p->reserve, r, sizeof(r));
		s->high = avail < p->reserve;
		s->low = p->cfg.release_below.set && avail > p->reserve + 2 * p->cfg.step;
		s->low_hold_ms = (uint64_t)p->cfg.release_below.window_s * 1000;
		snprintf(s->high_reason, sizeof(s->high_reason), "MemAvailable %s is below the reserve %s", a, r);
		snprintf(s->low_reason, sizeof(s->low_reason), "MemAvailable %s stayed above the reserve %s and two steps for %us",
			 a, r, p->cfg.release_below.window_s);
		s->detail = json_pack("{s:s,s:I,s:I}", "source", "meminfo", "mem_available", (json_int_t)avail,
				      "reserve", (json_int_t)p->reserve);
		return 0;
	} else {
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
		s->high = hv > ra->threshold_centi;
		s->low = rb->set && lv < rb->threshold_centi;
		fmt_pct(hv, v, sizeof(v));
		fmt_pct(ra->threshold_centi, t, sizeof(t));
		snprintf(s->high_reason, sizeof(s->high_reason), "memory pressure %s avg%u %s is above %s",
			 kind_name(ra->kind), ra->window_s, v, t);
		if (rb->set) {
			fmt_pct(lv, v, sizeof(v));
			fmt_pct(rb->threshold_centi, t, sizeof(t));
			snprintf(s->low_reason, sizeof(s->low_reason), "memory pressure %s avg%u %s is below %s",
				 kind_name(rb->kind), rb->window_s, v, t);
		}
		s->detail = json_pack("{s:s,s:s,s:I,s:f,s:f}", "source", "psi", "line", kind_name(ra->kind), "window",
				      (json_int_t)ra->window_s, "value", hv / 100.0, "threshold",
				      ra->threshold_centi / 100.0);
		return 0;
	}
}

static void decide(struct pressure *p, struct sample *s)
{
	uint64_t now = p->clock_ms ? p->clock_ms(p->ud) : mono_ms();

	if (s->high) {
		p->low_since_ms = 0;
		if (!p->requested || now - p->last_request_ms >= p->cfg.cooldown_ms) {
			p->requested = true;
			p->last_request_ms = now;
			send_msg(p, "pressure.high", "request", p->cfg.step, s->high_reason, s->detail);
		} else {
			log_debug(&p->log, "pressure: %s; cooling down, next request in %llus at the earliest",
				  s->high_reason,
				  (unsigned long long)((p->cfg.cooldown_ms - (now - p->last_request_ms) + 999) / 1000));
		}
		return;
	}
	if (!s->low) {
		p->low_since_ms = 0;
		return;
	}
	if (!p->low_since_ms)
		p->low_since_ms = now;
	if (now - p->low_since_ms < s->low_hold_ms)
		return;
	if (p->requested && now - p->last_request_ms < p->cfg.cooldown_ms)
		return;
	if (p->offered && now - p->last_offer_ms < p->cfg.cooldown_ms)
		return;
	{
		uint64_t bytes = p->revocable ? p->revocable(p->ud) : 0;
		if (bytes == 0)
			return; /* nothing this agent could give back */
		if (bytes > p->cfg.step)
			bytes = p->cfg.step;
		p->offered = true;
		p->last_offer_ms = now;
		send_msg(p, "pressure.low", "offer", bytes, s->low_reason, s->detail);
	}
}

int pressure_read_once(struct pressure *p, int *last_err)
{
	struct sample s;
	int r = read_sample(p, &s);

	if (r == -EOPNOTSUPP && p->source != PRESSURE_MEMINFO) {
		/* kernel built with PSI but booted with psi=0 */
		log_notice(&p->log, "pressure: %s: PSI is disabled; reading MemAvailable every %gs instead",
			   p->psi_path, (double)p->interval_ms / 1000);
		if (p->trig_fd >= 0)
			close(p->trig_fd);
		p->trig_fd = -1;
		p->source = PRESSURE_MEMINFO;
		r = read_sample(p, &s);
	}
	if (r < 0) {
		if (r != *last_err)
			log_warn(&p->log, "pressure: cannot read %s: %s",
				 p->source == PRESSURE_MEMINFO ? "meminfo" : p->psi_path, strerror(-r));
		*last_err = r;
		return r;
	}
	*last_err = 0;
	decide(p, &s);
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
		int timeout = (int)p->interval_ms;
		int r;

		if (p->source == PRESSURE_PSI_TRIGGER && !p->cfg.release_below.set)
			timeout = -1; /* only the trigger can matter */
		else if (p->source == PRESSURE_PSI_TRIGGER && timeout < (int)p->cfg.release_below.window_s * 250)
			timeout = (int)p->cfg.release_below.window_s * 250;
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
	p->interval_ms = pp->interval_ms ? pp->interval_ms : PRESSURE_INTERVAL_DEFAULT_MS;
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
	snprintf(p->psi_path, sizeof(p->psi_path), "%s%sproc/pressure/memory", p->root,
		 p->root[0] && p->root[strlen(p->root) - 1] == '/' ? "" : "/");
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
