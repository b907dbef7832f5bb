/* SPDX-License-Identifier: MIT */
#include "api.h"
#include "../lib/fileio.h"
#include "../lib/util.h"

#include <grp.h>
#include <microhttpd.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

struct api {
	struct MHD_Daemon *mhd;
	struct engine *e;
	struct engine_source *source; /* "local": the operator's */
	const struct mg_log *log;
	char *socket_path;
	_Atomic size_t body_limit;      /* replaced on reload (api_set_body_limit) */
	gid_t group_gid;
	bool have_group;
};

/* Per-request state kept between libmicrohttpd's calls for one request. */
struct request {
	char *body;
	size_t len;
	bool too_large;
	bool may_write;
	uid_t uid;
};

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

static int identify(struct api *a, struct MHD_Connection *c, struct request *rq)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno ? -errno : -EPERM;
	rq->uid = cred.uid;
	rq->may_write = cred.uid == 0 || cred.uid == geteuid() ||
			(a->have_group && (cred.gid == a->group_gid || uid_in_group(cred.uid, a->group_gid)));
	return 0;
}

/* --- server-sent events --------------------------------------------------- */

struct sse {
	struct event_bus *bus;
	uint64_t after;
	char *grant;       /* only events about this grant id; NULL: all */
	char *pending;     /* formatted bytes not yet handed to MHD */
	size_t pending_len, pending_off;
	bool finish_on_terminal; /* ?until=done: end after the grant's final status */
	bool done;
};

static void sse_free(void *cls)
{
	struct sse *s = cls;

	free(s->grant);
	free(s->pending);
	free(s);
}

static bool terminal_state(const char *state)
{
	return streq(state, "applied") || streq(state, "partial") || streq(state, "failed") ||
	       streq(state, "rejected");
}

static bool sse_wants(struct sse *s, const char *text)
{
	json_t *j;
	bool want;

	if (!s->grant)
		return true;
	j = json_loads(text, 0, NULL);
	want = j && streq(json_string_value(json_object_get(j, "id")), s->grant);
	if (want && s->finish_on_terminal && streq(json_string_value(json_object_get(j, "type")), "status") &&
	    terminal_state(json_string_value(json_object_get(j, "state"))))
		s->done = true;
	json_decref(j);
	return want;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;

	while (!s->pending) {
		char *text = NULL;
		uint64_t seq, missed;
		int r;

		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		r = events_wait(s->bus, s->after, 15000, &text, &seq, &missed);
		if (r == -EPIPE)
			return MHD_CONTENT_READER_END_OF_STREAM; /* the agent is stopping */
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0) {
			/* keep-alive comment so proxies and clients see a live stream */
			s->pending = strdup(": keep-alive\n\n");
		} else {
			s->after = seq;
			if (sse_wants(s, text)) {
				if (asprintf(&s->pending, "id: %llu\ndata: %s\n\n", (unsigned long long)seq, text) < 0)
					s->pending = NULL;
			}
			free(text);
			if (!s->pending)
				continue;
		}
		if (!s->pending)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		s->pending_len = strlen(s->pending);
		s->pending_off = 0;
	}
	{
		size_t n = s->pending_len - s->pending_off;
		if (n > max)
			n = max;
		memcpy(buf, s->pending + s->pending_off, n);
		s->pending_off += n;
		if (s->pending_off == s->pending_len) {
			free(s->pending);
			s->pending = NULL;
		}
		return (ssize_t)n;
	}
}

static MHD_Result_t serve_events(struct api *a, struct MHD_Connection *c)
{
	struct sse *s = calloc(1, sizeof(*s));
	const char *grant = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "grant");
	const char *after = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
	const char *until = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "until");
	struct MHD_Response *r;
	MHD_Result_t ret;

	if (!s)
		return MHD_NO;
	s->bus = engine_events(a->e);
	s->after = events_last_seq(s->bus);
	if (after) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(after, &end, 10);
		if (errno || *end || !*after || *after == '-' || *after == '+' || *after == ' ') {
			sse_free(s);
			return send_error(c, 400, "EINVAL", "query \"after\": \"%s\" is not a sequence number", after);
		}
		s->after = v;
	}
	if (grant) {
		json_t *cur = engine_grant_json(a->e, grant);
		if (!cur) {
			sse_free(s);
			return send_error(c, 404, "ENOENT", "no grant or revocation with id \"%s\"", grant);
		}
		s->grant = strdup(grant);
		s->finish_on_terminal = streq(until, "done");
		/* the client learns the current status first, then every change */
		json_object_set_new(cur, "type", json_string("status"));
		{
			char *text = json_dumps(cur, JSON_COMPACT);
			if (text && asprintf(&s->pending, "data: %s\n\n", text) >= 0) {
				s->pending_len = strlen(s->pending);
				if (s->finish_on_terminal &&
				    terminal_state(json_string_value(json_object_get(cur, "state"))))
					s->done = true;
			} else {
				s->pending = NULL;
			}
			free(text);
		}
		json_decref(cur);
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
	case EEXIST: return 409;
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
	struct engine_verdict v;
	struct msg_error err = { 0 };
	struct msg *m = NULL;
	json_t *reply;
	unsigned status;
	int r = msg_parse_opts(rq->body ? rq->body : "", rq->len, a->body_limit, MSG_PARSE_UNNUMBERED, &m, &err);

	if (r < 0)
		return send_error(c, r == -E2BIG ? 413 : 400, err.code, "%s", err.message);
	r = engine_submit(a->e, a->source, m, &v);
	if (r < 0)
		return send_error(c, 500, errno_name(r), "cannot submit: %s", strerror(-r));
	status = http_status_of(&v);
	reply = v.report ? json_incref(v.report) : NULL;
	engine_verdict_done(&v);
	if (reply)
		return send_json(c, status, reply);
	return send_error(c, status, v.error.code, "%s", v.error.message);
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
		if (rq->too_large)
			return send_error(c, 413, "E2BIG", "request body is larger than the limit of %zu bytes",
					  a->body_limit);
		return submit(a, c, rq);
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

	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		if (identify(a, c, rq) < 0) {
			free(rq);
			return MHD_NO; /* cannot tell who is asking: drop the connection */
		}
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		/* Refuse writers early, and never buffer more than the limit. */
		if (!rq->too_large && rq->may_write) {
			if (rq->len + *upload_size > a->body_limit) {
				rq->too_large = true;
				free(rq->body);
				rq->body = NULL;
				rq->len = 0;
			} else {
				char *nb = realloc(rq->body, rq->len + *upload_size + 1);
				if (!nb)
					return MHD_NO;
				memcpy(nb + rq->len, upload, *upload_size);
				rq->len += *upload_size;
				nb[rq->len] = '\0';
				rq->body = nb;
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	return route(a, c, rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct request *rq = *con_cls;

	if (rq) {
		free(rq->body);
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
	if (listen(fd, 64) < 0)
		return -errno;
	*out = TAKE_FD(fd);
	return 0;
}

int api_start(const struct api_params *p, struct engine *e, const struct mg_log *log, struct api **out)
{
	struct api *a = calloc(1, sizeof(*a));
	int fd = -1, r;

	if (!a)
		return -ENOMEM;
	a->e = e;
	a->log = log;
	a->body_limit = p->body_limit;
	r = engine_source_add(e, API_SOURCE, ENGINE_SOURCE_OPERATOR, &a->source);
	if (r < 0) {
		free(a);
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
	if (!a->socket_path) {
		free(a);
		return -ENOMEM;
	}
	r = listen_unix(p->socket_path, p->socket_mode, a->group_gid, a->have_group, &fd);
	if (r < 0) {
		free(a->socket_path);
		free(a);
		return r;
	}
	a->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
					  MHD_USE_ITC,
				  0, NULL, NULL, on_request, a,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
				  MHD_OPTION_CONNECTION_LIMIT, p->max_connections ? p->max_connections : 64,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
				  MHD_OPTION_END);
	if (!a->mhd) {
		close(fd);
		unlink(a->socket_path);
		free(a->socket_path);
		free(a);
		return -EIO;
	}
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
	if (!a)
		return;
	MHD_stop_daemon(a->mhd); /* closes the listening socket it was given */
	unlink(a->socket_path);
	free(a->socket_path);
	free(a);
}
