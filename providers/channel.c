/* SPDX-License-Identifier: MIT */
/*
 * The guest channel provider (see channel.h and docs/channel.md).
 *
 * Two threads: the I/O thread owns the port and everything on it; a small
 * watcher thread blocks in engine_outbox_wait() only while the outbox of
 * "channel" is empty and the I/O thread asked for it, and turns "a report is
 * waiting" into an eventfd the I/O thread can poll.  (The outbox stays
 * non-empty until the host acknowledges, so waiting on it unconditionally
 * would spin.)
 *
 * Waiting costs nothing while nothing happens (no timer): a port path that
 * is missing or refuses is watched with inotify (its nearest existing
 * directory), and a character device without host (POLLHUP, level
 * triggered) is watched through an edge-triggered epoll of the port, which
 * the driver wakes when the host connects (virtio_console wakes the port's
 * wait queue on VIRTIO_CONSOLE_PORT_OPEN).  A few quick retries follow each
 * change, for a socket that is bound before it listens.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <libgen.h>
#include <limits.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>

#include "agent/engine/engine.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/timeutil.h"
#include "lib/wire/message.h"
#include "providers/views/views_json.h"
#include "config/config.h"
#include "hotplug/policy.h"
#include "lib/util.h"
#include "providers/channel.h"

#define DEST "channel"
#define OUT_MAX (4u << 20)        /* pending output beyond this: the host is not reading */
#define HUP_PROBE_MS 1000         /* without epoll: how often a port without host is looked at */
#define RETRY_MIN_MS 200
#define RETRY_MAX_MS 2000
#define ACK_RETRY_MIN_MS 500u  /* an ack the journal could not record: tried again, doubling */
#define ACK_RETRY_MAX_MS 5000u
#define QUICK_RETRIES 5           /* timed retries after a change, then only events */

/* ---- the provider ---------------------------------------------------------------- */

struct channel_provider {
	struct engine *d;
	struct engine_source *source; /* DEST: reports to its outbox */
	const struct mg_log *log;
	char *path;
	int stop_fd;    /* eventfd: stop now */
	int outbox_fd;  /* eventfd: a report is waiting (from the watcher) */
	pthread_t io_thread, watcher;
	bool io_started, watcher_started;

	pthread_mutex_t lock; /* armed, stopping */
	pthread_cond_t cond;
	bool armed;           /* the I/O thread wants to hear about the next report */
	bool stopping;

	/* I/O thread only */
	int fd;
	bool is_socket;
	bool hup;             /* character device without a host */
	int hup_ep;           /* edge-triggered epoll of fd while hup, -1 none */
	struct channel_reader rd;
	char *out;
	size_t out_len, out_cap;
	uint64_t inflight;    /* seq of the report sent and not yet acknowledged, 0 none */
	uint64_t ack_unrecorded; /* acknowledged, but the journal could not record it yet: 0 none */
	int64_t ack_retry_at;    /* mono_ms() of the next try */
	unsigned ack_retry_ms;
	bool warned_missing;
};

static void watcher_arm(struct channel_provider *p)
{
	pthread_mutex_lock(&p->lock);
	p->armed = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static void *watcher_main(void *arg)
{
	struct channel_provider *p = arg;
	uint64_t one = 1;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		while (!p->armed && !p->stopping)
			pthread_cond_wait(&p->cond, &p->lock);
		p->armed = false;
		if (p->stopping) {
			pthread_mutex_unlock(&p->lock);
			break;
		}
		pthread_mutex_unlock(&p->lock);

		if (engine_outbox_wait(p->d, DEST, -1) > 0) {
			if (write(p->outbox_fd, &one, sizeof(one)) < 0) {
				/* an eventfd only fails when its counter is full: already signalled */
			}
		} else {
			/* woken for another provider or the daemon stopping: look again,
			 * but not faster than once a second when nothing changes */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_mutex_lock(&p->lock);
			if (!p->stopping)
				pthread_cond_timedwait(&p->cond, &p->lock, &ts);
			p->armed = true;
			pthread_mutex_unlock(&p->lock);
		}
	}
	return NULL;
}

/* Queues one JSON message as a line; drops it when the host stopped reading. */
static void send_json(struct channel_provider *p, json_t *j)
{
	_cleanup_free_ char *text = NULL;
	size_t n;

	if (!j)
		return;
	text = json_dumps(j, JSON_COMPACT);
	if (!text)
		return;
	n = strlen(text);
	if (p->out_len + n + 1 > OUT_MAX) {
		log_warn(p->log, "channel: the host is not reading, a %zu-byte message was dropped", n);
		return;
	}
	if (p->out_len + n + 1 > p->out_cap) {
		size_t cap = p->out_cap ? p->out_cap : 4096;
		char *nb;
		while (cap < p->out_len + n + 1)
			cap *= 2;
		nb = realloc(p->out, cap);
		if (!nb)
			return;
		p->out = nb;
		p->out_cap = cap;
	}
	memcpy(p->out + p->out_len, text, n);
	p->out[p->out_len + n] = '\n';
	p->out_len += n + 1;
}

static void send_error(struct channel_provider *p, const char *code, const char *message, const char *id)
{
	struct msg_error e = { 0 };
	json_t *j;

	snprintf(e.code, sizeof(e.code), "%s", code);
	snprintf(e.message, sizeof(e.message), "%s", message);
	j = msg_error_to_json(&e, id);
	send_json(p, j);
	json_decref(j);
}

/* Sends the oldest report of the outbox unless one is waiting for its ack. */
static void pump_outbox(struct channel_provider *p)
{
	json_t *report = NULL;
	uint64_t seq;
	int r;

	if (p->fd < 0 || p->hup || p->inflight)
		return;
	r = views_outbox_peek(p->d, DEST, &seq, &report);
	if (r == -ENOENT) {
		watcher_arm(p);
		return;
	}
	if (r < 0) {
		log_err(p->log, "channel: cannot read the outbox: %s", strerror(-r));
		return;
	}
	json_object_set_new(report, "seq", json_integer((json_int_t)seq));
	send_json(p, report);
	json_decref(report);
	p->inflight = seq;
}

/* Records that the host acknowledged SEQ.  When the journal cannot (disk
 * full), the removal is tried again, 0.5 s later then doubling up to 5 s
 * (io_main()), and nothing more is sent meanwhile: sending the same report
 * again would only bring the same ack back at once, over and over.  A
 * journal that broke stops the engine (engine_outbox_ack()). */
static void handle_ack(struct channel_provider *p, uint64_t seq)
{
	int r = engine_outbox_ack(p->d, DEST, seq);

	/* -ENOENT: a repeated ack, nothing to do */
	if (r < 0 && r != -ENOENT) {
		if (!p->ack_unrecorded)
			log_err(p->log, "channel: cannot remove report %llu from the outbox: %s; trying again",
				(unsigned long long)seq, strerror(-r));
		p->ack_retry_ms = p->ack_unrecorded ? p->ack_retry_ms * 2 : ACK_RETRY_MIN_MS;
		if (p->ack_retry_ms > ACK_RETRY_MAX_MS)
			p->ack_retry_ms = ACK_RETRY_MAX_MS;
		p->ack_unrecorded = seq;
		p->ack_retry_at = (int64_t)mono_ms() + p->ack_retry_ms;
		return;
	}
	p->ack_unrecorded = 0;
	if (seq == p->inflight) {
		p->inflight = 0;
		pump_outbox(p);
	}
}

static void handle_query(struct channel_provider *p)
{
	json_t *j = views_engine_status(p->d);

	if (!j) {
		send_error(p, "ENOMEM", "out of memory", NULL);
		return;
	}
	json_object_set_new(j, "type", json_string("agent_status"));
	{
		/* the host's autoscaler keeps a guest at or above its use plus a
		 * reserve (memgrant-host serve): MemTotal and MemAvailable */
		uint64_t total = 0, avail = 0;
		json_t *mem = json_object_get(j, "memory");
		if (json_is_object(mem) && policy_read_meminfo(engine_backend_root(p->d), &total, &avail) == 0) {
			json_object_set_new(mem, "mem_total_bytes", json_integer((json_int_t)total));
			json_object_set_new(mem, "mem_available_bytes", json_integer((json_int_t)avail));
		}
	}
	send_json(p, j);
	json_decref(j);
}

static int on_line(void *ctx, const char *line, size_t len)
{
	struct channel_provider *p = ctx;
	struct channel_line cl;
	const char *type, *id;

	channel_parse_line(line, len, &cl);
	type = cl.type[0] ? cl.type : NULL;
	id = cl.id[0] ? cl.id : NULL;
	switch (cl.kind) {
	case CHANNEL_LINE_EMPTY:
		return 0; /* an empty line is a harmless keep-alive */
	case CHANNEL_LINE_BAD:
		if (streq(cl.code, "EBADMSG"))
			log_info(p->log, "channel: %s", cl.message);
		send_error(p, cl.code, cl.message, id);
		return 0;
	case CHANNEL_LINE_ACK:
		handle_ack(p, cl.seq);
		return 0;
	case CHANNEL_LINE_QUERY:
		handle_query(p);
		return 0;
	case CHANNEL_LINE_MESSAGE:
		break;
	}
	{
		struct engine_verdict v = { 0 };
		struct msg_error err = { 0 };
		_cleanup_json_ json_t *answer = NULL;

		if (!cl.msg) {
			snprintf(err.code, sizeof(err.code), "%s", cl.code);
			snprintf(err.message, sizeof(err.message), "%s", cl.message);
		}
		if (!cl.msg || engine_submit(p->d, p->source, cl.msg, &v) < 0 ||
		    (v.kind == ENGINE_REJECTED && !v.recorded)) {
			const struct msg_error *e = err.code[0] ? &err : &v.error;
			log_info(p->log, "channel: %s %s refused: %s", type ? type : "message", id ? id : "",
				 e->message);
			send_error(p, e->code[0] ? e->code : "EINVAL", e->message[0] ? e->message : "refused", id);
		} else if (!(answer = views_verdict_json(&v))) {
			send_error(p, "ENOMEM", "out of memory", id);
		} else if (v.kind == ENGINE_ANSWERED) {
			/* the answer goes before anything else; then the unacknowledged report again */
			json_object_set_new(answer, "generation",
					    json_integer((json_int_t)engine_last_generation(p->d, p->source)));
			send_json(p, answer);
			log_debug(p->log, "channel: sync answered");
			p->inflight = 0;
			pump_outbox(p);
		} else {
			send_json(p, answer);
		}
		engine_verdict_done(&v);
	}
	return 0;
}

static int on_too_long(void *ctx, size_t seen)
{
	struct channel_provider *p = ctx;
	char msg[160];

	snprintf(msg, sizeof(msg), "message: line longer than %d bytes (%zu so far), skipped up to the next newline",
		 CHANNEL_LINE_MAX, seen);
	log_info(p->log, "channel: %s", msg);
	send_error(p, "E2BIG", msg, NULL);
	return 0;
}

static const struct channel_reader_ops reader_ops = {
	.line = on_line,
	.too_long = on_too_long,
};

/* The port reports POLLHUP until a host connects: POLLHUP is level triggered,
 * so poll() would return at once; an edge-triggered epoll reports only the
 * wake-up of the port's wait queue.  0, or -errno (the caller probes on a timer). */
static int hup_watch_start(struct channel_provider *p)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET };

	if (p->hup_ep >= 0)
		return 0;
	p->hup_ep = epoll_create1(EPOLL_CLOEXEC);
	if (p->hup_ep < 0)
		return -errno;
	if (epoll_ctl(p->hup_ep, EPOLL_CTL_ADD, p->fd, &ev) < 0) {
		int e = errno;
		close(p->hup_ep);
		p->hup_ep = -1;
		return -e;
	}
	return 0;
}

static void hup_watch_end(struct channel_provider *p)
{
	if (p->hup_ep >= 0)
		close(p->hup_ep);
	p->hup_ep = -1;
	p->hup = false;
}

/* Drains the edge-triggered epoll after it fired (the next edge re-arms it). */
static void hup_watch_drain(struct channel_provider *p)
{
	struct epoll_event ev[4];

	while (epoll_wait(p->hup_ep, ev, 4, 0) > 0) {
	}
}

static void port_close(struct channel_provider *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	hup_watch_end(p);
	p->out_len = 0;
	p->inflight = 0;
	channel_reader_reset(&p->rd);
}

/* A new host session (connected, or HUP gone): fresh framing, the outbox again. */
static void session_start(struct channel_provider *p)
{
	channel_reader_reset(&p->rd);
	p->out_len = 0;
	p->inflight = 0;
	pump_outbox(p);
}

static int port_open(struct channel_provider *p)
{
	struct stat st;
	int fd;

	if (stat(p->path, &st) < 0)
		return -errno;
	if (S_ISSOCK(st.st_mode)) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		if (strlen(p->path) >= sizeof(sa.sun_path))
			return -ENAMETOOLONG;
		memcpy(sa.sun_path, p->path, strlen(p->path) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		p->is_socket = true;
	} else {
		fd = open(p->path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			return -errno;
		if (isatty(fd)) {
			/* a pty standing in for the port: no echo, no line editing, no 4 KiB line limit */
			struct termios tio;
			if (tcgetattr(fd, &tio) == 0) {
				cfmakeraw(&tio);
				tcsetattr(fd, TCSANOW, &tio);
			}
		}
		p->is_socket = false;
	}
	p->fd = fd;
	hup_watch_end(p);
	return 0;
}

/* Waits up to MS or until stop; true when stop was asked. */
static bool sleep_or_stop(struct channel_provider *p, int ms)
{
	struct pollfd pf = { .fd = p->stop_fd, .events = POLLIN };

	return poll(&pf, 1, ms) > 0;
}

/*
 * Waits until the port's path may have changed or stop is asked (true).
 * ERR is why the last open failed: for a missing path (ENOENT, ENOTDIR) the
 * nearest existing directory above it is watched for the next component
 * appearing; otherwise (a socket that refuses, a device that cannot be
 * opened) its own directory for events that name it.  Without inotify, or
 * when nothing can be watched, waits FALLBACK_MS instead.
 */
static bool wait_for_path(struct channel_provider *p, int err, int fallback_ms)
{
	char dir[PATH_MAX], child[NAME_MAX + 1];
	_cleanup_close_ int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	size_t len = strlen(p->path);
	int wd = -1;

	if (ifd < 0 || len >= sizeof(dir) || p->path[0] != '/')
		return sleep_or_stop(p, fallback_ms);
	memcpy(dir, p->path, len + 1);
	/* dir/child: walk up while dir is missing (only for a missing path) */
	for (;;) {
		char *slash = strrchr(dir, '/');

		if (!slash || strlen(slash + 1) > NAME_MAX)
			return sleep_or_stop(p, fallback_ms);
		memcpy(child, slash + 1, strlen(slash + 1) + 1);
		if (slash == dir)
			slash[1] = '\0'; /* "/" */
		else
			*slash = '\0';
		wd = inotify_add_watch(ifd, dir, IN_CREATE | IN_MOVED_TO | IN_ATTRIB | IN_DELETE |
						  IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
		if (wd >= 0)
			break;
		if ((errno != ENOENT && errno != ENOTDIR) || streq(dir, "/"))
			return sleep_or_stop(p, fallback_ms);
	}
	log_debug(p->log, "channel: waiting for %s: inotify on %s for %s", p->path, dir, child);
	/* it may have appeared between the failed open and the watch */
	if ((err == ENOENT || err == ENOTDIR)) {
		char probe[PATH_MAX];
		if (snprintf(probe, sizeof(probe), "%s/%s", streq(dir, "/") ? "" : dir, child) <
			    (int)sizeof(probe) &&
		    access(probe, F_OK) == 0)
			return false;
	}
	for (;;) {
		struct pollfd pf[2] = { { .fd = p->stop_fd, .events = POLLIN }, { .fd = ifd, .events = POLLIN } };
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		ssize_t n;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return sleep_or_stop(p, fallback_ms);
		}
		if (pf[0].revents)
			return true;
		n = read(ifd, buf, sizeof(buf));
		for (ssize_t off = 0; n > 0 && off < n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(buf + off);

			off += (ssize_t)(sizeof(*ev) + ev->len);
			if (ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
				log_debug(p->log, "channel: %s changed: looking for %s again", dir, p->path);
				return false; /* look again from the start */
			}
			if (ev->len && streq(ev->name, child)) {
				log_debug(p->log, "channel: %s/%s changed: trying %s again", dir, child, p->path);
				return false;
			}
		}
	}
}

/* The host went away: a socket is closed and connected again, a device waits for HUP to clear. */
static void host_gone(struct channel_provider *p, const char *why)
{
	if (p->is_socket) {
		log_info(p->log, "channel: %s: %s, reconnecting", p->path, why);
		port_close(p);
	} else {
		if (!p->hup)
			log_info(p->log, "channel: %s: %s, waiting for the host", p->path, why);
		p->hup = true;
		p->out_len = 0;
		p->inflight = 0;
		channel_reader_reset(&p->rd);
	}
}

static void do_read(struct channel_provider *p)
{
	char buf[16384];

	for (int i = 0; i < 64 && p->fd >= 0 && !p->hup; i++) {
		ssize_t n = read(p->fd, buf, sizeof(buf));
		if (n > 0) {
			channel_reader_feed(&p->rd, buf, (size_t)n, &reader_ops, p);
			continue;
		}
		if (n == 0) {
			host_gone(p, "end of stream");
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return;
		host_gone(p, strerror(errno));
		return;
	}
}

static void do_write(struct channel_provider *p)
{
	while (p->out_len > 0 && p->fd >= 0 && !p->hup) {
		ssize_t n = p->is_socket ? send(p->fd, p->out, p->out_len, MSG_NOSIGNAL)
					 : write(p->fd, p->out, p->out_len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			host_gone(p, strerror(errno));
			return;
		}
		memmove(p->out, p->out + n, p->out_len - (size_t)n);
		p->out_len -= (size_t)n;
	}
}

static void *io_main(void *arg)
{
	struct channel_provider *p = arg;
	int retry_ms = RETRY_MIN_MS, quick = 0;

	for (;;) {
		struct pollfd pf[3];
		int n, r, timeout = -1;

		if (p->fd < 0) {
			r = port_open(p);
			if (r < 0) {
				if (!p->warned_missing)
					log_info(p->log, "channel: cannot open %s: %s; trying again when it changes",
						 p->path, strerror(-r));
				p->warned_missing = true;
				if (quick < QUICK_RETRIES) {
					/* just started or just changed: it may be on its way */
					quick++;
					if (sleep_or_stop(p, retry_ms))
						break;
					retry_ms = retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : retry_ms * 2;
				} else {
					if (wait_for_path(p, -r, RETRY_MAX_MS))
						break;
					quick = 0;
					retry_ms = RETRY_MIN_MS;
				}
				continue;
			}
			retry_ms = RETRY_MIN_MS;
			quick = 0;
			p->warned_missing = false;
			log_info(p->log, "channel: %s open", p->path);
			session_start(p);
		}
		if (p->hup) {
			/* a port without host keeps reporting POLLHUP: wait for its edge */
			struct pollfd probe = { .fd = p->fd, .events = POLLIN };
			if (p->hup_ep >= 0)
				hup_watch_drain(p);
			if (poll(&probe, 1, 0) >= 0 && !(probe.revents & (POLLHUP | POLLERR | POLLNVAL))) {
				hup_watch_end(p);
				log_info(p->log, "channel: host connected to %s", p->path);
				session_start(p);
			} else if (p->hup_ep < 0 && hup_watch_start(p) < 0) {
				timeout = HUP_PROBE_MS;
			}
		}

		if (p->ack_unrecorded) {
			int64_t left = p->ack_retry_at - (int64_t)mono_ms();
			if (left <= 0) {
				handle_ack(p, p->ack_unrecorded);
				continue;
			}
			if (timeout < 0 || left < timeout)
				timeout = (int)left;
		}
		pf[0] = (struct pollfd){ .fd = p->stop_fd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = p->outbox_fd, .events = POLLIN };
		pf[2] = (struct pollfd){ .fd = p->hup ? p->hup_ep : p->fd,
					 .events = (short)(POLLIN | (!p->hup && p->out_len ? POLLOUT : 0)) };
		n = poll(pf, 3, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err(p->log, "channel: poll: %s", strerror(errno));
			sleep_or_stop(p, 1000);
			continue;
		}
		if (pf[0].revents)
			break;
		if (pf[1].revents & POLLIN) {
			uint64_t v;
			if (read(p->outbox_fd, &v, sizeof(v)) < 0) {
				/* EAGAIN: drained already */
			}
			pump_outbox(p);
		}
		if (p->hup || p->fd < 0)
			continue;
		if (pf[2].revents & POLLIN)
			do_read(p);
		if (p->fd >= 0 && !p->hup && (pf[2].revents & (POLLHUP | POLLERR)) && !(pf[2].revents & POLLIN))
			host_gone(p, "hang-up");
		if (p->fd >= 0 && !p->hup && p->out_len)
			do_write(p);
		if (p->fd < 0 && sleep_or_stop(p, RETRY_MIN_MS))
			break; /* do not reconnect in a tight loop to a peer that closes at once */
	}
	return NULL;
}

static void provider_free(struct channel_provider *p)
{
	if (p->fd >= 0)
		close(p->fd);
	if (p->hup_ep >= 0)
		close(p->hup_ep);
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	if (p->outbox_fd >= 0)
		close(p->outbox_fd);
	channel_reader_done(&p->rd);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p->out);
	free(p->path);
	free(p);
}

int channel_provider_start(const struct mg_channel_config *cfg, struct engine *d, const struct mg_log *log,
			   struct channel_provider **out)
{
	struct channel_provider *p;
	int r;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->d = d;
	p->log = log;
	p->fd = p->stop_fd = p->outbox_fd = p->hup_ep = -1;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	r = engine_source_add(d, DEST, ENGINE_SOURCE_REPORTS, &p->source);
	if (r < 0) {
		provider_free(p);
		return r;
	}
	p->path = strdup(cfg && cfg->path && cfg->path[0] ? cfg->path : CHANNEL_DEFAULT_PATH);
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->outbox_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!p->path || p->stop_fd < 0 || p->outbox_fd < 0) {
		r = p->path ? -errno : -ENOMEM;
		provider_free(p);
		return r;
	}
	r = channel_reader_init(&p->rd, CHANNEL_LINE_MAX);
	if (r < 0) {
		provider_free(p);
		return r;
	}
	r = -pthread_create(&p->watcher, NULL, watcher_main, p);
	if (r < 0) {
		provider_free(p);
		return r;
	}
	p->watcher_started = true;
	r = -pthread_create(&p->io_thread, NULL, io_main, p);
	if (r < 0) {
		channel_provider_stop(p);
		return r;
	}
	p->io_started = true;
	*out = p;
	return 0;
}

void channel_provider_stop(struct channel_provider *p)
{
	uint64_t one = 1;

	if (!p)
		return;
	if (write(p->stop_fd, &one, sizeof(one)) < 0) {
		/* cannot fail on a fresh eventfd */
	}
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	if (p->io_started)
		pthread_join(p->io_thread, NULL);
	if (p->watcher_started) {
		/* the watcher may sit in engine_outbox_wait(), or be about to enter
		 * it and miss a single wake-up: wake until it is gone */
		for (;;) {
			struct timespec ts;
			engine_outbox_wake(p->d);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 20 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			if (pthread_timedjoin_np(p->watcher, NULL, &ts) != ETIMEDOUT)
				break;
		}
	}
	provider_free(p);
}
