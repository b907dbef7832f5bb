/* SPDX-License-Identifier: MIT */
/*
 * The local REST API (see api.h for the contract).
 *
 * libmicrohttpd runs a small pool of threads, each with an epoll loop, so a
 * connection costs a socket and a buffer, not a thread.  An event stream
 * that has nothing to send is suspended (it leaves MHD's loop) and resumed
 * when the event bus publishes, when its client hangs up (our own epoll
 * watches the socket of every suspended stream for EPOLLRDHUP), or when a
 * keep-alive is due.  The guard thread behind that epoll also enforces the
 * request deadline: a connection that has not delivered a whole request
 * (headers and body) within API_REQUEST_DEADLINE_MS of connecting or of its
 * previous answer is shut down, however steadily it trickles bytes.
 *
 * Every connection is attributed to its peer's uid (SO_PEERCRED) when it is
 * accepted.  Unprivileged uids share API_OTHERS_MAX connections, at most
 * API_UID_CONN_MAX each, and API_OTHERS_STREAMS_MAX event streams, at most
 * API_UID_STREAMS_MAX each; the rest of MHD's connection limit is reserved
 * for root, the daemon's user and the API group, so others cannot starve
 * them.  A connection over its uid's share is answered 503 at once and
 * closed, so it holds nothing.
 */
#include "api.h"
#include "api_parse.h"
#include "../lib/fileio.h"
#include "../lib/util.h"

#include <grp.h>
#include <microhttpd.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

#define API_THREADS 4                   /* MHD's pool; a handler may wait on an fsync */
#define API_LISTEN_BACKLOG 1024
#define API_OTHERS_MAX_DEFAULT 64       /* connections of all unprivileged uids together */
#define API_RESERVED 64                 /* on top: only for root and the API group */
#define API_UID_CONN_MAX 16             /* connections of one unprivileged uid */
#define API_OTHERS_STREAMS_MAX 32       /* event streams of all unprivileged uids */
#define API_UID_STREAMS_MAX 4           /* event streams of one unprivileged uid */
#define API_REQUEST_DEADLINE_MS 10000   /* a whole request, headers and body */
#define API_KEEPALIVE_MS 15000          /* ": keep-alive" after this much silence */

/* One accepted connection, from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED. */
struct conn {
	struct conn *prev, *next;
	uint64_t id;       /* never 0, never reused: epoll's handle on it */
	struct MHD_Connection *c;
	int fd;
	uid_t uid;
	bool privileged;   /* root, the daemon's user or the API group */
	bool refused;      /* over its uid's share: answered 503, shut down */
	bool answering;    /* a response is queued or streaming: no deadline */
	bool cut;          /* shut down by the guard */
	uint64_t since_ms; /* accepted, or the previous answer ended */
	struct sse *sse;   /* the event stream it carries, or NULL */
};

struct api {
	struct MHD_Daemon *mhd;
	struct engine *e;
	struct engine_source *source; /* "local": the operator's */
	const struct mg_log *log;
	char *socket_path;
	_Atomic size_t body_limit;      /* replaced on reload (api_set_body_limit) */
	gid_t group_gid;
	bool have_group;
	unsigned others_max;

	pthread_mutex_t lock;              /* guards what follows */
	struct conn *conns;
	uint64_t next_id;
	uint64_t refused_since_log, refused_log_ms;
	unsigned n_others, n_streams_others;
	bool stopping;
	int epfd;                          /* suspended streams' sockets, and WAKEFD */
	int wakefd;
	pthread_t guard;
	bool guard_started;
};

/* Per-request state kept between libmicrohttpd's calls for one request. */
struct request {
	struct api_body body;
	bool may_write;
	uid_t uid;
};

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}
static MHD_Result_t send_text(struct MHD_Connection *c, unsigned status, const char *type, char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_Result_t ret;

	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Takes the reference to J. */
static MHD_Result_t send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	size_t n;

	json_decref(j);
	if (!text)
		return MHD_NO;
	n = strlen(text);
	{
		char *withnl = realloc(text, n + 2);
		if (!withnl) {
			free(text);
			return MHD_NO;
		}
		withnl[n] = '\n';
		withnl[n + 1] = '\0';
		text = withnl;
	}
	return send_text(c, status, "application/json", text);
}

static MHD_Result_t send_error(struct MHD_Connection *c, unsigned status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Client text (URLs, query values) can be any bytes; JSON strings must be
 * UTF-8: anything outside printable ASCII is shown as '?'. */
static void make_printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

static MHD_Result_t send_error(struct MHD_Connection *c, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	make_printable(msg);
	return send_json(c, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
}

static bool uid_in_group(uid_t uid, gid_t gid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	gid_t groups[256];
	int n = ARRAY_SIZE(groups);

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return false;
	if (pw.pw_gid == gid)
		return true;
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}


struct sse {
	struct api *a;
	struct conn *conn;
	struct event_bus *bus;
	uint64_t after;
	char *grant;       /* only events about this grant id; NULL: all */
	char *pending;     /* formatted bytes not yet handed to MHD */
	size_t pending_len, pending_off;
	uint64_t last_sent_ms;
	bool finish_on_terminal; /* ?until=done: end after the grant's final status */
	bool done;
	bool counted;      /* in n_streams_others */
	bool suspended;    /* out of MHD's loop until resumed; under a->lock */
	bool peer_gone;    /* the client hung up while suspended */
};

/* --- connection accounting ------------------------------------------------ */

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* What a refused connection reads: written straight to the socket because
 * MHD has not read a request yet and the point is to hold nothing for it. */
static void refuse_busy(int fd, uid_t uid, const char *what, unsigned max)
{
	char body[256], msg[512];
	int bl, ml;

	bl = snprintf(body, sizeof(body),
		      "{\"error\": {\"code\": \"EBUSY\", \"message\": \"uid %u already has %u %s open, the most "
		      "an unprivileged user may; close some and retry\"}}\n",
		      (unsigned)uid, max, what);
	ml = snprintf(msg, sizeof(msg),
		      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
		      "Content-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s",
		      bl, body);
	if (ml > 0 && (size_t)ml < sizeof(msg))
		(void)!send(fd, msg, (size_t)ml, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_RDWR); /* MHD sees the end of the stream and closes it */
}

/* At most one line per 10 s, not one per refused connection: clients that
 * reconnect in a loop must not flood the log. */
static void refuse_log(struct api *a, uid_t uid)
{
	uint64_t now = now_ms(), n = 0;
	bool say = false;

	pthread_mutex_lock(&a->lock);
	a->refused_since_log++;
	if (a->refused_log_ms == 0 || now - a->refused_log_ms >= 10000) {
		n = a->refused_since_log;
		a->refused_since_log = 0;
		a->refused_log_ms = now;
		say = true;
	}
	pthread_mutex_unlock(&a->lock);
	if (say)
		log_warn(a->log, "api: uid %u is over its share of connections (%u per unprivileged uid, %u for "
			 "all of them): refused with 503; %llu refused since the last such line",
			 (unsigned)uid, API_UID_CONN_MAX, a->others_max, (unsigned long long)n);
}

static void guard_wake(struct api *a);

static void conn_admit(struct api *a, struct conn *n)
{
	unsigned same = 0;

	pthread_mutex_lock(&a->lock);
	n->id = ++a->next_id;
	if (!n->privileged) {
		for (struct conn *i = a->conns; i; i = i->next)
			if (i->uid == n->uid && !i->refused)
				same++;
		if (same >= API_UID_CONN_MAX || a->n_others >= a->others_max)
			n->refused = true;
		else
			a->n_others++;
	}
	n->next = a->conns;
	if (a->conns)
		a->conns->prev = n;
	a->conns = n;
	pthread_mutex_unlock(&a->lock);
	if (n->refused) {
		refuse_log(a, n->uid);
		refuse_busy(n->fd, n->uid, "connections",
			    same >= API_UID_CONN_MAX ? API_UID_CONN_MAX : a->others_max);
	}
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;
	struct conn *n = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct ucred cred;
		socklen_t len = sizeof(cred);

		n = calloc(1, sizeof(*n));
		if (!n)
			return; /* on_request finds no context and drops it */
		n->c = c;
		n->fd = ci ? ci->connect_fd : -1;
		n->since_ms = now_ms();
		if (n->fd < 0 || getsockopt(n->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			free(n);
			return;
		}
		n->uid = cred.uid;
		n->privileged = cred.uid == 0 || cred.uid == geteuid() ||
				(a->have_group && (cred.gid == a->group_gid || uid_in_group(cred.uid, a->group_gid)));
		*socket_context = n;
		conn_admit(a, n);
		guard_wake(a);
		return;
	}
	if (!n)
		return;
	pthread_mutex_lock(&a->lock);
	if (!n->privileged && !n->refused)
		a->n_others--;
	if (n->sse)
		n->sse->conn = NULL; /* MHD may free the stream after the connection */
	if (n->prev)
		n->prev->next = n->next;
	else
		a->conns = n->next;
	if (n->next)
		n->next->prev = n->prev;
	pthread_mutex_unlock(&a->lock);
	free(n);
	*socket_context = NULL;
}

/* --- server-sent events --------------------------------------------------- */


/* Called with a->lock held. */
static void sse_resume_locked(struct sse *s)
{
	if (!s->suspended)
		return;
	epoll_ctl(s->a->epfd, EPOLL_CTL_DEL, s->conn->fd, NULL);
	s->suspended = false;
	MHD_resume_connection(s->conn->c);
}

static void sse_free(void *cls)
{
	struct sse *s = cls;
	struct api *a = s->a;

	pthread_mutex_lock(&a->lock);
	if (s->counted)
		a->n_streams_others--;
	if (s->conn)
		s->conn->sse = NULL;
	pthread_mutex_unlock(&a->lock);
	free(s->grant);
	free(s->pending);
	free(s);
}

/* The event bus published (or closed): every waiting stream looks again. */
static void on_published(void *arg)
{
	struct api *a = arg;

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = i->next)
		if (i->sse)
			sse_resume_locked(i->sse);
	pthread_mutex_unlock(&a->lock);
}

/* Formats the next event into s->pending: 1 one is ready, 0 none yet,
 * MHD_CONTENT_READER_END_* to end the stream. */
static ssize_t sse_next(struct sse *s)
{
	for (;;) {
		char *text = NULL;
		uint64_t seq, missed;
		struct api_event_view v;
		int r;

		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		r = events_wait(s->bus, s->after, 0, &text, &seq, &missed);
		if (r == -EPIPE)
			return MHD_CONTENT_READER_END_OF_STREAM; /* the agent is stopping */
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0)
			return 0;
		s->after = seq;
		api_event_view(text, strlen(text), s->grant, &v);
		if (v.wanted) {
			if (s->finish_on_terminal && v.terminal)
				s->done = true;
			if (asprintf(&s->pending, "id: %llu\nevent: %s\ndata: %s\n\n", (unsigned long long)seq,
				     v.name, text) < 0)
				s->pending = NULL;
		}
		free(text);
		if (v.wanted) {
			if (!s->pending)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			s->pending_len = strlen(s->pending);
			s->pending_off = 0;
			return 1;
		}
	}
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;
	struct api *a = s->a;
	size_t n;

	(void)pos;
	if (!s->pending) {
		ssize_t r;
		pthread_mutex_lock(&a->lock);
		if (s->peer_gone || a->stopping) {
			pthread_mutex_unlock(&a->lock);
			return s->peer_gone ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		}
		/* under a->lock: a publish after this look resumes us (on_published) */
		r = sse_next(s);
		if (r == 0 && now_ms() - s->last_sent_ms >= API_KEEPALIVE_MS) {
			/* keep-alive comment so proxies and clients see a live stream */
			s->pending = strdup(": keep-alive\n\n");
			r = s->pending ? 1 : MHD_CONTENT_READER_END_WITH_ERROR;
			s->pending_len = s->pending ? strlen(s->pending) : 0;
			s->pending_off = 0;
		}
		if (r == 0) {
			struct epoll_event ev = { .events = EPOLLRDHUP, .data.u64 = s->conn->id };
			/* leave MHD's loop; the guard watches for the client hanging up */
			if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, s->conn->fd, &ev) < 0 && errno != EEXIST) {
				pthread_mutex_unlock(&a->lock);
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			s->suspended = true;
			MHD_suspend_connection(s->conn->c);
			pthread_mutex_unlock(&a->lock);
			guard_wake(a);
			return 0;
		}
		pthread_mutex_unlock(&a->lock);
		if (r < 0)
			return r;
	}
	n = s->pending_len - s->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, s->pending + s->pending_off, n);
	s->pending_off += n;
	s->last_sent_ms = now_ms();
	if (s->pending_off == s->pending_len) {
		free(s->pending);
		s->pending = NULL;
	}
	return (ssize_t)n;
}

/* Takes a stream slot for C's uid: 0, or -EBUSY with the limit in *MAX. */
static int sse_admit(struct api *a, struct conn *n, struct sse *s, unsigned *max)
{
	unsigned same = 0;
	int r = 0;

	pthread_mutex_lock(&a->lock);
	if (!n->privileged) {
		for (struct conn *i = a->conns; i; i = i->next)
			if (i->uid == n->uid && i->sse)
				same++;
		if (same >= API_UID_STREAMS_MAX) {
			*max = API_UID_STREAMS_MAX;
			r = -EBUSY;
		} else if (a->n_streams_others >= API_OTHERS_STREAMS_MAX) {
			*max = API_OTHERS_STREAMS_MAX;
			r = -EBUSY;
		} else {
			a->n_streams_others++;
			s->counted = true;
		}
	}
	if (r == 0) {
		n->sse = s;
		s->conn = n;
	}
	pthread_mutex_unlock(&a->lock);
	return r;
}

static MHD_Result_t serve_events(struct api *a, struct MHD_Connection *c)
{
	const char *grant = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "grant");
	const char *after = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
	const char *last_id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
	const char *until = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "until");
	struct conn *n = conn_of(c);
	struct MHD_Response *r;
	struct sse *s;
	unsigned max = 0;
	MHD_Result_t ret;

	if (!n)
		return MHD_NO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return MHD_NO;
	s->a = a;
	s->bus = engine_events(a->e);
	s->after = events_last_seq(s->bus);
	s->last_sent_ms = now_ms();
	/* ?after= wins over the header a reconnecting EventSource sends */
	if (after && api_parse_seq(after, &s->after) < 0) {
		free(s);
		return send_error(c, 400, "EINVAL", "query \"after\": \"%s\" is not a sequence number", after);
	}
	if (!after && last_id && api_parse_seq(last_id, &s->after) < 0) {
		free(s);
		return send_error(c, 400, "EINVAL", "header Last-Event-ID: \"%s\" is not a sequence number", last_id);
	}
	if (grant) {
		json_t *cur = engine_grant_json(a->e, grant);
		if (!cur) {
			free(s);
			return send_error(c, 404, "ENOENT", "no grant or revocation with id \"%s\"", grant);
		}
		s->grant = strdup(grant);
		s->finish_on_terminal = streq(until, "done");
		/* the client learns the current status first, then every change */
		json_object_set_new(cur, "type", json_string("status"));
		{
			char *text = json_dumps(cur, JSON_COMPACT);
			if (text && asprintf(&s->pending, "event: status\ndata: %s\n\n", text) >= 0) {
				s->pending_len = strlen(s->pending);
				if (s->finish_on_terminal &&
				    api_state_is_terminal(json_string_value(json_object_get(cur, "state"))))
					s->done = true;
			} else {
				s->pending = NULL;
			}
			free(text);
		}
		json_decref(cur);
	}
	if (sse_admit(a, n, s, &max) < 0) {
		free(s->grant);
		free(s->pending);
		free(s);
		return send_error(c, 503, "EBUSY",
				  "uid %u may follow at most %u event streams at once (unprivileged users share %u)",
				  (unsigned)n->uid, API_UID_STREAMS_MAX, API_OTHERS_STREAMS_MAX);
	}
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
	if (!r) {
		sse_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* --- the guard: hung-up streams, keep-alives, request deadlines ------------ */

/* Tells the guard a deadline may have come nearer (a new connection, a
 * stream suspended, a kept-alive connection waiting for its next request). */
static void guard_wake(struct api *a)
{
	uint64_t one = 1;

	(void)!write(a->wakefd, &one, sizeof(one));
}

/* How long the guard may sleep: until the nearest keep-alive or request
 * deadline, forever (-1) when there is none, so an idle agent never wakes. */
static int guard_timeout_ms(struct api *a)
{
	uint64_t now = now_ms(), next = UINT64_MAX;

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = i->next) {
		if (i->sse && i->sse->suspended && i->sse->last_sent_ms + API_KEEPALIVE_MS < next)
			next = i->sse->last_sent_ms + API_KEEPALIVE_MS;
		if (!i->answering && !i->cut && !i->refused && i->since_ms + API_REQUEST_DEADLINE_MS < next)
			next = i->since_ms + API_REQUEST_DEADLINE_MS;
	}
	pthread_mutex_unlock(&a->lock);
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now < INT32_MAX ? next - now : INT32_MAX);
}

static void guard_sweep(struct api *a)
{
	uint64_t now = now_ms();

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = i->next) {
		if (i->sse && i->sse->suspended && now - i->sse->last_sent_ms >= API_KEEPALIVE_MS)
			sse_resume_locked(i->sse);
		if (!i->answering && !i->cut && !i->refused && now - i->since_ms >= API_REQUEST_DEADLINE_MS) {
			/* a slow sender holds nothing past the deadline */
			i->cut = true;
			shutdown(i->fd, SHUT_RDWR);
			log_debug(a->log, "api: uid %u sent no whole request within %u ms: connection closed",
				  (unsigned)i->uid, API_REQUEST_DEADLINE_MS);
		}
	}
	pthread_mutex_unlock(&a->lock);
}

static void *guard_main(void *arg)
{
	struct api *a = arg;
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(a->epfd, evs, ARRAY_SIZE(evs), guard_timeout_ms(a));
		bool stop;

		pthread_mutex_lock(&a->lock);
		stop = a->stopping;
		for (int k = 0; k < n; k++) {
			uint64_t id = evs[k].data.u64, count;
			if (id == 0) { /* the wake eventfd */
				(void)!read(a->wakefd, &count, sizeof(count));
				continue;
			}
			/* by id: the event may be older than a resume that let the
			 * connection end in the meantime */
			for (struct conn *c = a->conns; c; c = c->next) {
				if (c->id != id)
					continue;
				if (c->sse && c->sse->suspended) {
					c->sse->peer_gone = true;
					sse_resume_locked(c->sse);
				}
				break;
			}
		}
		pthread_mutex_unlock(&a->lock);
		if (stop)
			break;
		guard_sweep(a);
	}
	return NULL;
}

/* --- routing -------------------------------------------------------------- */

static MHD_Result_t method_not_allowed(struct MHD_Connection *c, const char *allow, const char *url,
				       const char *method)
{
	char msg[512];
	json_t *j;
	struct MHD_Response *r;
	char *text;
	MHD_Result_t ret;

	snprintf(msg, sizeof(msg), "method %s is not allowed on %s", method, url);
	make_printable(msg);
	j = json_pack("{s:{s:s,s:s}}", "error", "code", "EOPNOTSUPP", "message", msg);
	text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	if (!text)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Allow", allow);
	ret = MHD_queue_response(c, 405, r);
	MHD_destroy_response(r);
	return ret;
}

/* The HTTP status of a verdict: this adapter alone speaks HTTP. */
static unsigned http_status_of(const struct engine_verdict *v)
{
	switch (v->kind) {
	case ENGINE_ACCEPTED: return 202;
	case ENGINE_REPLAY:
	case ENGINE_ANSWERED: return 200;
	case ENGINE_REJECTED: break;
	}
	if (v->recorded)
		return 409; /* refused by the planner: recorded with its report */
	switch (-v->err) {
	case ESHUTDOWN:
	case ENOBUFS: return 503;
	case ESTALE:
	case EEXIST:
	case EALREADY:
	case EAGAIN: return 409;
	case ENOENT: return 404;
	case E2BIG: return 413;
	case EINVAL:
	case ERANGE:
	case EBADMSG: return 400;
	default: return 500;
	}
}

/* POST /v1/grants: parsed once here, numbered by the engine when the
 * operator left out id and generation. */
static MHD_Result_t submit(struct api *a, struct MHD_Connection *c, struct request *rq)
{
	const char *dry = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "dry_run");
	struct engine_verdict v;
	struct msg_error err = { 0 };
	struct msg *m = NULL;
	json_t *reply;
	unsigned status;
	bool dry_run = false;
	int r;

	/* ?dry_run=1 (true, yes, on; or just ?dry_run): the plan, nothing changed */
	if (dry) {
		int b = api_parse_flag(dry);
		if (b < 0)
			return send_error(c, 400, "EINVAL", "query \"dry_run\": \"%s\" is not one of 1, 0, true, false", dry);
		dry_run = b == 1;
	}
	r = msg_parse_opts(rq->body.data ? rq->body.data : "", rq->body.len, a->body_limit, MSG_PARSE_UNNUMBERED, &m, &err);
	if (r < 0)
		return send_error(c, r == -E2BIG ? 413 : 400, err.code, "%s", err.message);
	r = dry_run ? engine_plan(a->e, a->source, m, &v) : engine_submit(a->e, a->source, m, &v);
	if (r < 0)
		return send_error(c, 500, errno_name(r), "cannot submit: %s", strerror(-r));
	status = http_status_of(&v);
	reply = v.report ? json_incref(v.report) : NULL;
	engine_verdict_done(&v);
	if (reply)
		return send_json(c, status, reply);
	return send_error(c, status, v.error.code, "%s", v.error.message);
}

static bool endswith(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && streq(s + n - k, suffix);
}

/* POST /v1/grants/ID/cancel: 200 with the final report when it ended at
 * once (queued), 202 with the current one when the executor stops it after
 * the block in flight, 409 when it is final already. */
static MHD_Result_t cancel(struct api *a, struct MHD_Connection *c, struct request *rq, const char *id)
{
	struct engine_verdict v;
	char who[64];
	json_t *reply;
	unsigned status;
	int r;

	snprintf(who, sizeof(who), "%s (uid %u)", API_SOURCE, (unsigned)rq->uid);
	r = engine_cancel(a->e, id, who, &v);
	if (r < 0)
		return send_error(c, 500, errno_name(r), "cannot cancel: %s", strerror(-r));
	status = http_status_of(&v);
	if (v.kind == ENGINE_REJECTED) {
		reply = json_pack("{s:{s:s,s:s}}", "error", "code", v.error.code, "message", v.error.message);
		if (reply && v.report)
			json_object_set(reply, "status", v.report);
		engine_verdict_done(&v);
		return send_json(c, status, reply);
	}
	reply = v.report ? json_incref(v.report) : NULL;
	engine_verdict_done(&v);
	if (!reply)
		return send_error(c, 500, "ENOMEM", "out of memory");
	return send_json(c, status, reply);
}

static MHD_Result_t route(struct api *a, struct MHD_Connection *c, struct request *rq, const char *url,
			  const char *method)
{
	bool get = streq(method, "GET") || streq(method, "HEAD");

	if (streq(url, "/v1/status")) {
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		return send_json(c, 200, engine_status_json(a->e));
	}
	if (streq(url, "/v1/blocks")) {
		json_t *j = NULL;
		int r;
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		r = engine_blocks_json(a->e, &j);
		if (r < 0)
			return send_error(c, 500, errno_name(r), "cannot read the memory blocks: %s", strerror(-r));
		return send_json(c, 200, j);
	}
	if (streq(url, "/v1/grants")) {
		if (get)
			return send_json(c, 200, engine_grants_json(a->e));
		if (!streq(method, "POST"))
			return method_not_allowed(c, "GET, POST", url, method);
		if (!rq->may_write)
			return send_error(c, 403, "EPERM",
					  "uid %u may read but not change anything: only root and the API group may",
					  (unsigned)rq->uid);
		if (rq->body.too_large)
			return send_error(c, 413, "E2BIG", "request body is larger than the limit of %zu bytes",
					  a->body_limit);
		return submit(a, c, rq);
	}
	if (startswith(url, "/v1/grants/") && endswith(url, "/cancel")) {
		/* POST /v1/grants/ID/cancel */
		char id[MSG_ID_MAX + 1];
		size_t n = strlen(url) - strlen("/v1/grants/") - strlen("/cancel");
		if (!streq(method, "POST"))
			return method_not_allowed(c, "POST", url, method);
		if (!rq->may_write)
			return send_error(c, 403, "EPERM",
					  "uid %u may read but not change anything: only root and the API group may",
					  (unsigned)rq->uid);
		if (n == 0 || n > MSG_ID_MAX)
			return send_error(c, 400, "EINVAL", "%s: not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)",
					  url, MSG_ID_MAX);
		memcpy(id, url + strlen("/v1/grants/"), n);
		id[n] = '\0';
		if (!msg_id_valid(id))
			return send_error(c, 400, "EINVAL", "\"%s\" is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)",
					  id, MSG_ID_MAX);
		return cancel(a, c, rq, id);
	}
	if (startswith(url, "/v1/grants/")) {
		json_t *j;
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		j = engine_grant_json(a->e, url + strlen("/v1/grants/"));
		if (!j)
			return send_error(c, 404, "ENOENT", "no grant or revocation with id \"%s\"",
					  url + strlen("/v1/grants/"));
		return send_json(c, 200, j);
	}
	if (streq(url, "/v1/events")) {
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		return serve_events(a, c);
	}
	if (streq(url, "/metrics")) {
		char *text = NULL;
		int r;
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		r = engine_metrics_text(a->e, &text);
		if (r < 0)
			return send_error(c, 500, errno_name(r), "cannot render metrics");
		return send_text(c, 200, "text/plain; version=0.0.4", text);
	}
	return send_error(c, 404, "ENOENT", "no such endpoint: %s %s", method, url);
}

static MHD_Result_t on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct api *a = cls;
	struct request *rq = *con_cls;
	struct conn *n;

	(void)version;
	if (!rq) {
		n = conn_of(c);
		if (!n || n->refused)
			return MHD_NO; /* cannot tell who is asking, or over its share: drop it */
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		rq->uid = n->uid;
		rq->may_write = n->privileged;
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		/* Refuse writers early, and never buffer more than the limit. */
		if (rq->may_write && api_body_append(&rq->body, upload, *upload_size, a->body_limit) < 0)
			return MHD_NO;
		*upload_size = 0;
		return MHD_YES;
	}
	n = conn_of(c);
	if (n) {
		pthread_mutex_lock(&a->lock);
		n->answering = true; /* the whole request is in: the deadline is met */
		pthread_mutex_unlock(&a->lock);
	}
	return route(a, c, rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api *a = cls;
	struct request *rq = *con_cls;
	struct conn *n = conn_of(c);

	(void)toe;
	if (n) {
		/* a kept-alive connection has a new deadline for its next request */
		pthread_mutex_lock(&a->lock);
		n->answering = false;
		n->since_ms = now_ms();
		pthread_mutex_unlock(&a->lock);
		guard_wake(a);
	}
	if (rq) {
		api_body_free(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

static int listen_unix(const char *path, int mode, gid_t gid, bool set_group, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *dir = strdup(path);
	char *slash;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		int r = mkdir_p(dir, 0755);
		if (r < 0)
			return r;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a stale socket of an earlier run: only remove sockets, never a file */
	{
		struct stat st;
		if (lstat(path, &st) == 0) {
			if (!S_ISSOCK(st.st_mode))
				return -EEXIST;
			unlink(path);
		}
	}
	/* no window in which the socket is wider open: Linux creates the
	 * socket file with the socket's own mode (masked by the umask, which
	 * is the process's and set once in main) */
	if (fchmod(fd, 0600) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (set_group && chown(path, (uid_t)-1, gid) < 0)
		return -errno;
	if (chmod(path, (mode_t)mode) < 0)
		return -errno;
	if (listen(fd, API_LISTEN_BACKLOG) < 0)
		return -errno;
	*out = TAKE_FD(fd);
	return 0;
}

static void api_free(struct api *a)
{
	if (a->epfd >= 0)
		close(a->epfd);
	if (a->wakefd >= 0)
		close(a->wakefd);
	pthread_mutex_destroy(&a->lock);
	free(a->socket_path);
	free(a);
}

int api_start(const struct api_params *p, struct engine *e, const struct mg_log *log, struct api **out)
{
	struct api *a = calloc(1, sizeof(*a));
	struct epoll_event wake = { .events = EPOLLIN, .data.u64 = 0 };
	int fd = -1, r;

	if (!a)
		return -ENOMEM;
	a->e = e;
	a->log = log;
	a->body_limit = p->body_limit;
	a->others_max = p->max_connections ? p->max_connections : API_OTHERS_MAX_DEFAULT;
	a->epfd = a->wakefd = -1;
	pthread_mutex_init(&a->lock, NULL);
	r = engine_source_add(e, API_SOURCE, ENGINE_SOURCE_OPERATOR, &a->source);
	if (r < 0) {
		api_free(a);
		return r;
	}
	if (p->group && *p->group) {
		struct group gr, *res = NULL;
		char buf[4096];
		if (getgrnam_r(p->group, &gr, buf, sizeof(buf), &res) == 0 && res) {
			a->group_gid = gr.gr_gid;
			a->have_group = true;
		} else {
			log_warn(log, "API group \"%s\" does not exist: only root may change anything", p->group);
		}
	}
	a->socket_path = strdup(p->socket_path);
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!a->socket_path || a->epfd < 0 || a->wakefd < 0 ||
	    epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->wakefd, &wake) < 0) {
		r = a->socket_path ? -errno : -ENOMEM;
		api_free(a);
		return r;
	}
	r = listen_unix(p->socket_path, p->socket_mode, a->group_gid, a->have_group, &fd);
	if (r < 0) {
		api_free(a);
		return r;
	}
	a->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME,
				  0, NULL, NULL, on_request, a,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_THREAD_POOL_SIZE, (unsigned)API_THREADS,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
				  MHD_OPTION_CONNECTION_LIMIT, a->others_max + API_RESERVED,
				  /* idle: the guard's deadline is the shorter one for a request */
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(API_REQUEST_DEADLINE_MS / 1000 * 2),
				  MHD_OPTION_END);
	if (!a->mhd) {
		close(fd);
		unlink(a->socket_path);
		api_free(a);
		return -EIO;
	}
	r = -pthread_create(&a->guard, NULL, guard_main, a);
	if (r < 0) {
		MHD_stop_daemon(a->mhd);
		unlink(a->socket_path);
		api_free(a);
		return r;
	}
	a->guard_started = true;
	events_set_listener(engine_events(e), on_published, a);
	*out = a;
	return 0;
}

void api_set_body_limit(struct api *a, size_t limit)
{
	if (a)
		a->body_limit = limit;
}

void api_stop(struct api *a)
{
	uint64_t one = 1;
	unsigned suspended;

	if (!a)
		return;
	events_set_listener(engine_events(a->e), NULL, NULL);
	/* MHD must not stop with a suspended connection: end every stream */
	for (int tries = 0; tries < 200; tries++) {
		suspended = 0;
		pthread_mutex_lock(&a->lock);
		a->stopping = true;
		for (struct conn *i = a->conns; i; i = i->next)
			if (i->sse && i->sse->suspended) {
				sse_resume_locked(i->sse);
				suspended++;
			}
		for (struct conn *i = a->conns; i; i = i->next)
			if (i->sse)
				suspended++;
		pthread_mutex_unlock(&a->lock);
		if (!suspended)
			break;
		usleep(10000);
	}
	(void)!write(a->wakefd, &one, sizeof(one));
	if (a->guard_started)
		pthread_join(a->guard, NULL);
	MHD_stop_daemon(a->mhd); /* closes the listening socket it was given */
	unlink(a->socket_path);
	api_free(a);
}
