/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host serve: libvirt's default event loop runs everything on one
 * thread.  Each running domain whose XML has the channel org.memgrant.0 gets
 * a non-blocking stream (virDomainOpenChannel); its bytes are framed into
 * lines and handed to the controller (serve_ctl.c), whose answers go into a
 * per-domain output buffer.  Domain events (lifecycle, reboot,
 * MEMORY_DEVICE_SIZE_CHANGE, DEVICE_REMOVED, DEVICE_REMOVAL_FAILED) go to the
 * controller; a timer ticks it, writes the status and metrics files, resumes
 * channels paused for their line budget and looks for new domains.
 * With `channel: socket` the channel is the UNIX socket named by the
 * channel's <source mode='bind' path=...> instead (QEMU's chardev server
 * listens there), watched with virEventAddHandle: the same framing, budget
 * and controller, for connections that cannot open channels (libvirt's
 * test:///FILE.xml driver; tests/integration/serve_hostile.sh).
 * A guest over its line budget is simply not read until the tick that finds
 * its debt paid (ctl_may_read): its
 * writes wait in its own virtio-serial queue; nothing is dropped that the
 * agent sent, and nothing it sends costs another domain.
 */
#include <getopt.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <syslog.h>
#include <time.h>

#include "lib/fileio.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "providers/host/host.h"
#include "providers/host/serve/serve.h"
#include "providers/host/serve/serve_libvirt.h"
#include "lib/wire/lines.h"

#define OUT_MAX (1u << 20)  /* a guest that does not read its channel is dropped past this */
#define READ_CHUNK 16384
#define RESCAN_MS 5000

struct chan {
	char name[SERVE_NAME_MAX];
	virStreamPtr st;
	int fd, watch;            /* channel: socket (else -1) */
	struct channel_reader rd;
	char *out;
	size_t out_len;
	bool paused, want_write, dead;
	struct serve *sv;
};

struct serve {
	struct serve_config *cfg;
	struct mg_log log;
	virConnectPtr conn;
	struct hvl *hvl;
	struct ctl *ctl;
	struct chan **ch;
	size_t n_ch, cap_ch;
	FILE *events;
	int64_t last_rescan;
	int tick_timer;
	int cb_ids[6];
	struct serve_view status, metrics;
};

static volatile sig_atomic_t stop_sig;

static void on_signal(int sig)
{
	stop_sig = sig;
}

static struct chan *chan_find(struct serve *sv, const char *name)
{
	for (size_t i = 0; i < sv->n_ch; i++)
		if (streq(sv->ch[i]->name, name))
			return sv->ch[i];
	return NULL;
}

static void chan_close(struct serve *sv, struct chan *c)
{
	if (c->st) {
		virStreamEventRemoveCallback(c->st);
		virStreamAbort(c->st);
		virStreamFree(c->st);
		c->st = NULL;
	}
	if (c->watch >= 0)
		virEventRemoveHandle(c->watch);
	if (c->fd >= 0)
		close(c->fd);
	channel_reader_done(&c->rd);
	free(c->out);
	for (size_t i = 0; i < sv->n_ch; i++)
		if (sv->ch[i] == c) {
			sv->ch[i] = sv->ch[--sv->n_ch];
			break;
		}
	free(c);
}

static void chan_update_events(struct chan *c)
{
	int ev = VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP;

	if (c->watch >= 0) {
		virEventUpdateHandle(c->watch, VIR_EVENT_HANDLE_ERROR | VIR_EVENT_HANDLE_HANGUP |
						       (c->paused ? 0 : VIR_EVENT_HANDLE_READABLE) |
						       (c->out_len ? VIR_EVENT_HANDLE_WRITABLE : 0));
		return;
	}
	if (!c->st)
		return;
	if (!c->paused)
		ev |= VIR_STREAM_EVENT_READABLE;
	if (c->out_len)
		ev |= VIR_STREAM_EVENT_WRITABLE;
	virStreamEventUpdateCallback(c->st, ev);
}

static int chan_flush(struct chan *c)
{
	while (c->out_len) {
		ssize_t n;
		if (c->fd >= 0) {
			n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				break;
		} else {
			n = virStreamSend(c->st, c->out, c->out_len);
			if (n == -2)
				break;
		}
		if (n < 0)
			return -EPIPE;
		memmove(c->out, c->out + n, c->out_len - (size_t)n);
		c->out_len -= (size_t)n;
	}
	chan_update_events(c);
	return 0;
}

/* ---- the controller's I/O ---------------------------------------------------------------- */

static int io_send(void *ud, const char *domain, const char *buf, size_t len)
{
	struct serve *sv = ud;
	struct chan *c = chan_find(sv, domain);
	char *n;

	if (!c || (!c->st && c->fd < 0) || c->dead)
		return -ENOTCONN;
	if (c->out_len + len > OUT_MAX) {
		log_warn(&sv->log, "%s: the guest does not read its channel (%zu bytes waiting); closing it", domain,
			 c->out_len);
		c->dead = true;
		return -ENOBUFS;
	}
	n = realloc(c->out, c->out_len + len);
	if (!n)
		return -ENOMEM;
	c->out = n;
	memcpy(c->out + c->out_len, buf, len);
	c->out_len += len;
	if (chan_flush(c) < 0)
		c->dead = true;
	return 0;
}

static void io_event(void *ud, json_t *ev)
{
	struct serve *sv = ud;
	_cleanup_free_ char *text = NULL;
	char ts[80];
	struct timespec now;
	struct tm tm;

	/* the state the event tells of is in the status file at this tick's
	 * end; an event outside a tick (a device's, a guest's line) brings
	 * the tick forward, so that a reader of the events finds it there */
	serve_view_soon(&sv->status);
	if (sv->tick_timer >= 0)
		virEventUpdateTimeout(sv->tick_timer, 0);
	if (!sv->events)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
	json_object_set_new(ev, "time", json_string(ts));
	json_object_set_new(ev, "mono_ms", json_integer((json_int_t)mono_ms()));
	text = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
	if (text) {
		fprintf(sv->events, "%s\n", text);
		fflush(sv->events);
	}
}

static void io_log(void *ud, int prio, const char *domain, const char *msg)
{
	struct serve *sv = ud;

	if (domain)
		log_msg(&sv->log, prio, "domain=%s %s", domain, msg);
	else
		log_msg(&sv->log, prio, "%s", msg);
}

/* ---- channels ------------------------------------------------------------------------------ */

static int on_line(void *ctx, const char *line, size_t len)
{
	struct chan *c = ctx;

	if (ctl_guest_line(c->sv->ctl, c->name, line, len, (int64_t)mono_ms()) == -EAGAIN)
		c->paused = true; /* the rest of this read is handled; then nothing until the next tick */
	return 0;
}

static int on_too_long(void *ctx, size_t seen)
{
	struct chan *c = ctx;
	(void)seen;
	/* counted as an unreadable line */
	if (ctl_guest_line(c->sv->ctl, c->name, "\x01", 1, (int64_t)mono_ms()) == -EAGAIN)
		c->paused = true;
	return 0;
}

static const struct channel_reader_ops line_ops = { .line = on_line, .too_long = on_too_long };

/* The channel is writable, readable, or broke (a stream's or a socket's events). */
static void chan_io(struct chan *c, bool writable, bool readable, bool broken)
{
	char buf[READ_CHUNK];

	if (writable && chan_flush(c) < 0)
		c->dead = true;
	if (readable && !c->paused && !c->dead) {
		ssize_t n;
		if (c->fd >= 0) {
			n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				n = -2;
		} else {
			n = virStreamRecv(c->st, buf, sizeof(buf));
		}
		if (n > 0)
			channel_reader_feed(&c->rd, buf, (size_t)n, &line_ops, c);
		else if (n == 0 || n == -1)
			c->dead = true;
	}
	/* a hang-up with bytes still to read is read first */
	if (broken && !(readable && !c->paused && !c->dead))
		c->dead = true;
	if (c->dead) {
		/* closed at the next tick, outside the channel's own callback */
		if (c->watch >= 0)
			virEventUpdateHandle(c->watch, 0);
		else
			virStreamEventUpdateCallback(c->st, 0);
		return;
	}
	chan_update_events(c);
}

static void stream_cb(virStreamPtr st, int events, void *opaque)
{
	(void)st;
	chan_io(opaque, events & VIR_STREAM_EVENT_WRITABLE, events & VIR_STREAM_EVENT_READABLE,
		events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP));
}

static void socket_cb(int watch, int fd, int events, void *opaque)
{
	(void)watch;
	(void)fd;
	chan_io(opaque, events & VIR_EVENT_HANDLE_WRITABLE, events & VIR_EVENT_HANDLE_READABLE,
		events & (VIR_EVENT_HANDLE_ERROR | VIR_EVENT_HANDLE_HANGUP));
}

/* channel: socket: connect to the channel's bind path, where QEMU's chardev server listens. */
static int chan_connect_socket(struct serve *sv, struct chan *c, const char *xml)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[sizeof(sa.sun_path)];
	int r = xml ? host_xml_channel_path(xml, path, sizeof(path)) : -EBADMSG;

	if (r == 0 || r == -ENAMETOOLONG) {
		log_err(&sv->log, "domain=%s channel: socket needs the channel %s as <channel type='unix'> with "
				  "<source mode='bind' path='...'/> (a path of at most %zu bytes) in the domain XML; %s",
			c->name, HOST_CHANNEL_NAME, sizeof(path) - 1, r ? "its path is too long" : "it has no such path");
		return -ENODEV;
	}
	if (r < 0) {
		log_err(&sv->log, "domain=%s cannot read the channel's path from the domain XML: %s", c->name, strerror(-r));
		return r;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0) {
		r = -errno;
		log_info(&sv->log, "domain=%s cannot connect to the channel's socket %s yet: %s", c->name, path,
			 strerror(-r));
		return r;
	}
	c->watch = virEventAddHandle(c->fd, VIR_EVENT_HANDLE_READABLE | VIR_EVENT_HANDLE_ERROR | VIR_EVENT_HANDLE_HANGUP,
				     socket_cb, c, NULL);
	if (c->watch < 0) {
		log_err(&sv->log, "domain=%s cannot watch the channel's socket %s", c->name, path);
		return -EIO;
	}
	return 0;
}

static int chan_open(struct serve *sv, virDomainPtr dom, const char *name, const char *xml)
{
	struct chan *c;

	if (sv->n_ch == sv->cap_ch) {
		size_t cap = sv->cap_ch ? sv->cap_ch * 2 : 8;
		struct chan **n = realloc(sv->ch, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		sv->ch = n;
		sv->cap_ch = cap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->sv = sv;
	c->fd = c->watch = -1;
	if (channel_reader_init(&c->rd, HOST_LINE_MAX) < 0) {
		free(c);
		return -ENOMEM;
	}
	if (sv->cfg->channel == SERVE_CHANNEL_SOCKET) {
		int r = chan_connect_socket(sv, c, xml);
		if (r < 0) {
			if (c->fd >= 0)
				close(c->fd);
			channel_reader_done(&c->rd);
			free(c);
			return r;
		}
		sv->ch[sv->n_ch++] = c;
		ctl_channel_up(sv->ctl, name, (int64_t)mono_ms());
		return 0;
	}
	c->st = virStreamNew(sv->conn, VIR_STREAM_NONBLOCK);
	if (!c->st || virDomainOpenChannel(dom, HOST_CHANNEL_NAME, c->st, 0) < 0 ||
	    virStreamEventAddCallback(c->st, VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR |
						     VIR_STREAM_EVENT_HANGUP, stream_cb, c, NULL) < 0) {
		virErrorPtr e = virGetLastError();
		log_info(&sv->log, "domain=%s cannot open channel %s yet: %s", name, HOST_CHANNEL_NAME,
			 e && e->message ? e->message : "?");
		if (c->st)
			virStreamFree(c->st);
		channel_reader_done(&c->rd);
		free(c);
		return -EIO;
	}
	sv->ch[sv->n_ch++] = c;
	ctl_channel_up(sv->ctl, name, (int64_t)mono_ms());
	return 0;
}

/* Every running domain with the channel: known to the controller, its channel open. */
static void rescan(struct serve *sv)
{
	virDomainPtr *doms = NULL;
	int n = virConnectListAllDomains(sv->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);

	sv->last_rescan = (int64_t)mono_ms();
	if (n < 0) {
		virErrorPtr e = virGetLastError();
		log_err(&sv->log, "cannot list domains: %s", e && e->message ? e->message : "?");
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *name = virDomainGetName(doms[i]);
		char *xml;
		int has;

		if (!name || chan_find(sv, name)) {
			virDomainFree(doms[i]);
			continue;
		}
		xml = virDomainGetXMLDesc(doms[i], 0);
		has = xml ? host_xml_has_channel(xml) : 0;
		if (has == 1) {
			if (!ctl_has_domain(sv->ctl, name)) {
				int r = ctl_domain_add(sv->ctl, name, (int64_t)mono_ms());
				if (r == 0)
					log_notice(&sv->log, "domain=%s managed", name);
				else if (r != -EPERM)
					log_err(&sv->log, "domain=%s cannot be managed: %s", name, strerror(-r));
			}
			if (ctl_has_domain(sv->ctl, name))
				chan_open(sv, doms[i], name, xml);
		}
		free(xml);
		virDomainFree(doms[i]);
	}
	free(doms);
}

/* ---- domain events ---------------------------------------------------------------------------- */

static void gone(struct serve *sv, const char *name)
{
	struct chan *c = chan_find(sv, name);
	struct hv_event ev = { .kind = HV_EV_GONE };

	if (c)
		chan_close(sv, c);
	ctl_hv_event(sv->ctl, name, &ev, (int64_t)mono_ms());
}

static int ev_lifecycle(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
	struct serve *sv = opaque;
	const char *name = virDomainGetName(dom);

	(void)conn;
	(void)detail;
	if (!name)
		return 0;
	if (event == VIR_DOMAIN_EVENT_STOPPED || event == VIR_DOMAIN_EVENT_UNDEFINED ||
	    event == VIR_DOMAIN_EVENT_CRASHED) {
		log_notice(&sv->log, "domain=%s stopped: its memory went with it", name);
		gone(sv, name);
	} else if (event == VIR_DOMAIN_EVENT_STARTED) {
		sv->last_rescan = 0; /* look at once */
	}
	return 0;
}

static void ev_reboot(virConnectPtr conn, virDomainPtr dom, void *opaque)
{
	struct serve *sv = opaque;
	struct hv_event ev = { .kind = HV_EV_STARTED };
	const char *name = virDomainGetName(dom);

	(void)conn;
	if (name)
		ctl_hv_event(sv->ctl, name, &ev, (int64_t)mono_ms());
}

static void ev_size(virConnectPtr conn, virDomainPtr dom, const char *alias, unsigned long long size_kib, void *opaque)
{
	struct serve *sv = opaque;
	struct hv_event ev = { .kind = HV_EV_SIZE, .plugged = size_kib * 1024 };
	const char *name = virDomainGetName(dom);

	(void)conn;
	if (!name)
		return;
	log_debug(&sv->log, "domain=%s device=%s size=%llu", name, alias ? alias : "?", size_kib * 1024);
	ctl_hv_event(sv->ctl, name, &ev, (int64_t)mono_ms());
}

static void ev_removed(virConnectPtr conn, virDomainPtr dom, const char *alias, void *opaque)
{
	struct serve *sv = opaque;
	struct hv_event ev = { .kind = HV_EV_REMOVED };
	const char *name = virDomainGetName(dom);

	(void)conn;
	if (!name || !alias)
		return;
	hvl_detach_done(sv->hvl, name, alias);
	ctl_hv_event(sv->ctl, name, &ev, (int64_t)mono_ms());
}

static void ev_removal_failed(virConnectPtr conn, virDomainPtr dom, const char *alias, void *opaque)
{
	struct serve *sv = opaque;
	struct hv_event ev = { .kind = HV_EV_REMOVAL_FAILED };
	const char *name = virDomainGetName(dom);

	(void)conn;
	if (!name || !alias)
		return;
	log_warn(&sv->log, "domain=%s device=%s the guest refused the detach", name, alias);
	hvl_detach_done(sv->hvl, name, alias);
	ctl_hv_event(sv->ctl, name, &ev, (int64_t)mono_ms());
}

/* ---- the tick ------------------------------------------------------------------------------------ */

/* The status and metrics files, when due (serve_views.c); FORCE: now (at the end). */
static void write_reports(struct serve *sv, int64_t now, bool force)
{
	_cleanup_json_ json_t *st = NULL;

	if (!serve_view_due(&sv->status, now) && !force)
		return;
	st = serve_status_json(sv->ctl, sv->cfg);
	if (serve_view_put(&sv->status, st ? json_dumps(st, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL) < 0)
		log_debug(&sv->log, "cannot write %s", sv->status.path);
	if (sv->metrics.path && serve_view_put(&sv->metrics, serve_metrics_text(sv->ctl)) < 0)
		log_debug(&sv->log, "cannot write %s", sv->metrics.path);
}

static void tick_cb(int timer, void *opaque)
{
	struct serve *sv = opaque;
	int64_t now = (int64_t)mono_ms();

	(void)timer;
	for (size_t i = 0; i < sv->n_ch;) {
		struct chan *c = sv->ch[i];
		if (c->dead) {
			char name[SERVE_NAME_MAX];
			snprintf(name, sizeof(name), "%s", c->name);
			chan_close(sv, c);
			ctl_channel_down(sv->ctl, name, now);
			continue; /* reopened by the next rescan */
		}
		if (c->paused && ctl_may_read(sv->ctl, c->name, now)) {
			c->paused = false;
			chan_update_events(c);
		}
		i++;
	}
	ctl_tick(sv->ctl, now);
	write_reports(sv, now, false);
	if (now - sv->last_rescan >= RESCAN_MS)
		rescan(sv);
	virEventUpdateTimeout(sv->tick_timer, (int)(ctl_next_ms(sv->ctl, now) > 200 ? 200 : ctl_next_ms(sv->ctl, now)));
}

static void quiet(void *data, virErrorPtr err)
{
	(void)data;
	(void)err;
}

static void usage_serve(FILE *f)
{
	fprintf(f, "Usage: memgrant-host [-c URI] serve [--config FILE] [--dry-run] [--state-dir DIR] [--events FILE]\n"
		   "Runs the autoscaling loop for every running domain with the channel " HOST_CHANNEL_NAME
		   " (docs/autoscaling.md).\n");
}

int cmd_serve(const struct host_opts *o, int argc, char **argv)
{
	enum { OPT_CONFIG = 1, OPT_DRY, OPT_STATE, OPT_EVENTS, OPT_HELP };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, OPT_CONFIG }, { "dry-run", no_argument, NULL, OPT_DRY },
		{ "state-dir", required_argument, NULL, OPT_STATE }, { "events", required_argument, NULL, OPT_EVENTS },
		{ "help", no_argument, NULL, OPT_HELP }, { 0 }
	};
	const char *config = getenv("MEMGRANT_HOST_CONFIG"), *state = NULL, *events = NULL;
	struct serve sv = { .tick_timer = -1 };
	struct ctl_io io = { .send = io_send, .event = io_event, .log = io_log, .ud = &sv };
	struct sigaction sa = { .sa_handler = on_signal };
	char why[1024] = "";
	bool dry = false;
	int c, r, rc = HOST_EXIT_OK;

	optind = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_CONFIG: config = optarg; break;
		case OPT_DRY: dry = true; break;
		case OPT_STATE: state = optarg; break;
		case OPT_EVENTS: events = optarg; break;
		case OPT_HELP: usage_serve(stdout); return 0;
		default: usage_serve(stderr); return HOST_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage_serve(stderr);
		return HOST_EXIT_USAGE;
	}
	log_init(&sv.log, "memgrant-host", LOG_INFO);
	if (getenv("MEMGRANT_HOST_DEBUG"))
		sv.log.level = LOG_DEBUG;
	r = serve_config_load(config && *config ? config : NULL, &sv.cfg, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s\n", why[0] ? why : strerror(-r));
		return HOST_EXIT_USAGE;
	}
	if (dry)
		sv.cfg->dry_run = true;
	if (state) {
		free(sv.cfg->state_dir);
		free(sv.cfg->status_file);
		sv.cfg->state_dir = strdup(state);
		if (asprintf(&sv.cfg->status_file, "%s/serve-status.json", state) < 0)
			sv.cfg->status_file = NULL;
		if (!sv.cfg->state_dir || !sv.cfg->status_file) {
			serve_config_free(sv.cfg);
			return HOST_EXIT_STATE;
		}
	}
	sv.status.path = sv.cfg->status_file;
	sv.metrics.path = sv.cfg->metrics_file;
	if (events) {
		free(sv.cfg->events);
		sv.cfg->events = strdup(events);
	}
	if (o->uri) {
		free(sv.cfg->connect);
		sv.cfg->connect = strdup(o->uri);
	}
	r = mkdir_p(sv.cfg->state_dir, 0750);
	if (r < 0) {
		fprintf(stderr, "memgrant-host: cannot create the state directory %s: %s\n", sv.cfg->state_dir,
			strerror(-r));
		serve_config_free(sv.cfg);
		return HOST_EXIT_STATE;
	}
	if (sv.cfg->events)
		sv.events = streq(sv.cfg->events, "-") ? stdout : fopen(sv.cfg->events, "ae");
	if (sv.cfg->events && !sv.events) {
		fprintf(stderr, "memgrant-host: events %s: %s\n", sv.cfg->events, strerror(errno));
		serve_config_free(sv.cfg);
		return HOST_EXIT_STATE;
	}
	virSetErrorFunc(NULL, quiet);
	if (virEventRegisterDefaultImpl() < 0) {
		rc = HOST_EXIT_CONNECT;
		goto out;
	}
	sv.conn = virConnectOpen(sv.cfg->connect);
	if (!sv.conn) {
		virErrorPtr e = virGetLastError();
		fprintf(stderr, "memgrant-host: cannot connect to %s: %s\n", sv.cfg->connect ? sv.cfg->connect : "libvirt's default URI",
			e && e->message ? e->message : "?");
		rc = HOST_EXIT_CONNECT;
		goto out;
	}
	if (hvl_new(sv.conn, &sv.hvl) < 0 || ctl_new(sv.cfg, &hvl_ops, sv.hvl, &io, &sv.ctl) < 0) {
		rc = HOST_EXIT_REFUSED;
		goto out;
	}
	sv.cb_ids[0] = virConnectDomainEventRegisterAny(sv.conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
							VIR_DOMAIN_EVENT_CALLBACK(ev_lifecycle), &sv, NULL);
	sv.cb_ids[1] = virConnectDomainEventRegisterAny(sv.conn, NULL, VIR_DOMAIN_EVENT_ID_REBOOT,
							VIR_DOMAIN_EVENT_CALLBACK(ev_reboot), &sv, NULL);
	sv.cb_ids[2] = virConnectDomainEventRegisterAny(sv.conn, NULL, VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE,
							VIR_DOMAIN_EVENT_CALLBACK(ev_size), &sv, NULL);
	sv.cb_ids[3] = virConnectDomainEventRegisterAny(sv.conn, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
							VIR_DOMAIN_EVENT_CALLBACK(ev_removed), &sv, NULL);
	sv.cb_ids[4] = virConnectDomainEventRegisterAny(sv.conn, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED,
							VIR_DOMAIN_EVENT_CALLBACK(ev_removal_failed), &sv, NULL);
	sv.cb_ids[5] = -1;
	sa.sa_flags = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	log_notice(&sv.log, "serving %s%s%s, state in %s, every %lldms", sv.cfg->connect ? sv.cfg->connect : "libvirt's default URI",
		   sv.cfg->channel == SERVE_CHANNEL_SOCKET ? " (channels: the domains' UNIX sockets)" : "",
		   sv.cfg->dry_run ? " (dry run: nothing is plugged or granted)" : "", sv.cfg->state_dir,
		   (long long)sv.cfg->interval);
	rescan(&sv);
	sv.tick_timer = virEventAddTimeout(200, tick_cb, &sv, NULL);
	while (!stop_sig) {
		if (virEventRunDefaultImpl() < 0)
			break;
	}
	log_notice(&sv.log, "stopping (signal %d); the journal keeps what is in flight", (int)stop_sig);
	write_reports(&sv, (int64_t)mono_ms(), true);
out:
	if (sv.tick_timer >= 0)
		virEventRemoveTimeout(sv.tick_timer);
	while (sv.n_ch)
		chan_close(&sv, sv.ch[0]);
	free(sv.ch);
	serve_view_done(&sv.status);
	serve_view_done(&sv.metrics);
	for (size_t i = 0; sv.conn && i < 5; i++)
		if (sv.cb_ids[i] >= 0)
			virConnectDomainEventDeregisterAny(sv.conn, sv.cb_ids[i]);
	ctl_free(sv.ctl);
	hvl_free(sv.hvl);
	if (sv.conn)
		virConnectClose(sv.conn);
	if (sv.events && sv.events != stdout)
		fclose(sv.events);
	serve_config_free(sv.cfg);
	return rc;
}

int serve_show_status(const char *config, const char *state_dir, bool json)
{
	struct serve_config *cfg = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *st = NULL;
	char why[1024] = "";
	size_t len;
	int r;

	r = serve_config_load(config && *config ? config : NULL, &cfg, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s\n", why);
		return HOST_EXIT_USAGE;
	}
	if (state_dir) { /* where "serve --state-dir DIR" writes it */
		free(cfg->status_file);
		if (asprintf(&cfg->status_file, "%s/serve-status.json", state_dir) < 0) {
			cfg->status_file = NULL;
			serve_config_free(cfg);
			return HOST_EXIT_STATE;
		}
	}
	r = file_read_all(cfg->status_file, 16u << 20, &text, &len);
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s: %s (is memgrant-host serve running? 'memgrant-host status DOMAIN' asks a guest directly)\n",
			cfg->status_file, strerror(-r));
		serve_config_free(cfg);
		return HOST_EXIT_STATE;
	}
	serve_config_free(cfg);
	st = json_loadb(text, len, 0, NULL);
	if (!st) {
		fprintf(stderr, "memgrant-host: the service's status file is not JSON\n");
		return HOST_EXIT_STATE;
	}
	if (json)
		printf("%s\n", text);
	else
		serve_print_status(stdout, st);
	return HOST_EXIT_OK;
}
