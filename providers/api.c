/* SPDX-License-Identifier: MIT */
/*
 * The local REST API (see api.h for the contract).
 *
 * libmicrohttpd runs a small pool of threads, each with an epoll loop, so a
 * connection costs a socket and a buffer, not a thread.  Event streams and
 * the guard thread that enforces request deadlines are in api_stream.c.
 *
 * Who may hold which connection, and for how long, is api_conn.c's: the
 * guard accepts on the socket and hands MHD only connections whose request
 * head is in, within per-uid and per-class limits (root keeps slots of its
 * own).  This file routes the requests MHD parses.
 */
#include "providers/api_int.h"
#include "providers/api_parse.h"
#include "providers/views/views_json.h"
#include "lib/timeutil.h"
#include "lib/fileio.h"
#include "lib/heap.h"
#include "lib/util.h"

#include <grp.h>
#include <pwd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

MHD_Result_t api_send_text(struct MHD_Connection *c, unsigned status, const char *type, char *text)
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
MHD_Result_t api_send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	size_t n;

	json_decref(j);
	if (!text)
		return MHD_NO;
	n = strlen(text);
	heap_trim_after_render(n);
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
	return api_send_text(c, status, "application/json", text);
}

/* Client text (URLs, query values) can be any bytes; JSON strings must be
 * UTF-8: anything outside printable ASCII is shown as '?'. */
static void make_printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

MHD_Result_t api_send_error(struct MHD_Connection *c, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	make_printable(msg);
	return api_send_json(c, status, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
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
			return api_send_error(c, 400, "EINVAL", "query \"dry_run\": \"%s\" is not one of 1, 0, true, false", dry);
		dry_run = b == 1;
	}
	r = msg_parse_opts(rq->body.data ? rq->body.data : "", rq->body.len, a->body_limit, MSG_PARSE_UNNUMBERED, &m, &err);
	if (r < 0)
		return api_send_error(c, r == -E2BIG ? 413 : 400, err.code, "%s", err.message);
	r = dry_run ? engine_plan(a->e, a->source, m, &v) : engine_submit(a->e, a->source, m, &v);
	if (r < 0)
		return api_send_error(c, 500, errno_name(r), "cannot submit: %s", strerror(-r));
	status = http_status_of(&v);
	reply = views_verdict_json(&v);
	engine_verdict_done(&v);
	if (reply)
		return api_send_json(c, status, reply);
	return api_send_error(c, status, v.error.code, "%s", v.error.message);
}

/* POST /v1/adopt {"blocks": [N, ...]}: online blocks no grant owns become
 * a local grant record (engine_adopt). */
static MHD_Result_t adopt(struct api *a, struct MHD_Connection *c, struct request *rq)
{
	_cleanup_free_ uint64_t *ids = NULL;
	struct engine_verdict v;
	json_error_t jerr;
	json_t *body, *list, *it, *reply;
	unsigned status;
	size_t n, i;
	int r;

	body = json_loadb(rq->body.data ? rq->body.data : "", rq->body.len, JSON_REJECT_DUPLICATES, &jerr);
	if (!body)
		return api_send_error(c, 400, "EBADMSG", "body is not JSON: %s (line %d, column %d)", jerr.text,
				      jerr.line, jerr.column);
	list = json_object_get(body, "blocks");
	if (!json_is_object(body) || json_object_size(body) != 1 || !json_is_array(list) || json_array_size(list) == 0) {
		json_decref(body);
		return api_send_error(c, 400, "EINVAL", "body must be {\"blocks\": [N, ...]} with at least one block number");
	}
	n = json_array_size(list);
	if (n > 65536) {
		json_decref(body);
		return api_send_error(c, 413, "E2BIG", "%zu blocks: at most 65536 at a time", n);
	}
	ids = calloc(n, sizeof(*ids));
	if (!ids) {
		json_decref(body);
		return api_send_error(c, 500, "ENOMEM", "out of memory");
	}
	json_array_foreach(list, i, it) {
		if (!json_is_integer(it) || json_integer_value(it) < 0) {
			json_decref(body);
			return api_send_error(c, 400, "EINVAL", "blocks[%zu]: not a block number (a non-negative integer)", i);
		}
		ids[i] = (uint64_t)json_integer_value(it);
	}
	json_decref(body);
	r = engine_adopt(a->e, a->source, ids, n, &v);
	if (r < 0)
		return api_send_error(c, 500, errno_name(r), "cannot adopt: %s", strerror(-r));
	status = v.kind == ENGINE_ANSWERED ? 200 : -v.err == ENOENT ? 404 : -v.err == EPERM ? 403
		 : -v.err == EEXIST || -v.err == EBUSY ? 409 : http_status_of(&v);
	reply = views_verdict_json(&v);
	engine_verdict_done(&v);
	if (reply)
		return api_send_json(c, status, reply);
	return api_send_error(c, status, v.error.code, "%s", v.error.message);
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
		return api_send_error(c, 500, errno_name(r), "cannot cancel: %s", strerror(-r));
	status = http_status_of(&v);
	if (v.kind == ENGINE_REJECTED) {
		reply = json_pack("{s:{s:s,s:s}}", "error", "code", v.error.code, "message", v.error.message);
		if (reply && v.report)
			json_object_set_new(reply, "status", views_verdict_json(&v));
		engine_verdict_done(&v);
		return api_send_json(c, status, reply);
	}
	reply = views_verdict_json(&v);
	engine_verdict_done(&v);
	if (!reply)
		return api_send_error(c, 500, "ENOMEM", "out of memory");
	return api_send_json(c, status, reply);
}

static MHD_Result_t route(struct api *a, struct MHD_Connection *c, struct request *rq, const char *url,
			  const char *method)
{
	bool get = streq(method, "GET") || streq(method, "HEAD");

	if (streq(url, "/v1/status")) {
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		return api_send_json(c, 200, views_engine_status(a->e));
	}
	if (streq(url, "/v1/blocks")) {
		json_t *j = NULL;
		int r;
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		const char *runs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "runs");
		int rf = runs ? api_parse_flag(runs) : 0;

		if (rf < 0)
			return api_send_error(c, 400, "EINVAL", "query \"runs\": \"%s\" is not one of 1, 0, true, false",
					      runs);
		r = views_engine_blocks(a->e, rf == 1, &j);
		if (r < 0)
			return api_send_error(c, 500, errno_name(r), "cannot read the memory blocks: %s", strerror(-r));
		return api_send_json(c, 200, j);
	}
	if (streq(url, "/v1/grants")) {
		if (get)
			return api_send_json(c, 200, views_engine_grants(a->e));
		if (!streq(method, "POST"))
			return method_not_allowed(c, "GET, POST", url, method);
		if (!rq->may_write)
			return api_send_error(c, 403, "EPERM",
					  "uid %u may read but not change anything: only root and the API group may",
					  (unsigned)rq->uid);
		if (rq->body.too_large)
			return api_send_error(c, 413, "E2BIG", "request body is larger than the limit of %zu bytes",
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
			return api_send_error(c, 403, "EPERM",
					  "uid %u may read but not change anything: only root and the API group may",
					  (unsigned)rq->uid);
		if (n == 0 || n > MSG_ID_MAX)
			return api_send_error(c, 400, "EINVAL", "%s: not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)",
					  url, MSG_ID_MAX);
		memcpy(id, url + strlen("/v1/grants/"), n);
		id[n] = '\0';
		if (!msg_id_valid(id))
			return api_send_error(c, 400, "EINVAL", "\"%s\" is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)",
					  id, MSG_ID_MAX);
		return cancel(a, c, rq, id);
	}
	if (startswith(url, "/v1/grants/")) {
		json_t *j;
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		j = views_engine_grant(a->e, url + strlen("/v1/grants/"));
		if (!j)
			return api_send_error(c, 404, "ENOENT", "no grant or revocation with id \"%s\"",
					  url + strlen("/v1/grants/"));
		return api_send_json(c, 200, j);
	}
	if (streq(url, "/v1/adopt")) {
		if (!streq(method, "POST"))
			return method_not_allowed(c, "POST", url, method);
		if (!rq->may_write)
			return api_send_error(c, 403, "EPERM",
					      "uid %u may read but not change anything: only root and the API group may",
					      (unsigned)rq->uid);
		if (rq->body.too_large)
			return api_send_error(c, 413, "E2BIG", "request body is larger than the limit of %zu bytes",
					      a->body_limit);
		return adopt(a, c, rq);
	}
	if (streq(url, "/v1/events")) {
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		return api_serve_events(a, c);
	}
	if (streq(url, "/metrics")) {
		char *text = NULL;
		int r;
		if (!get)
			return method_not_allowed(c, "GET", url, method);
		r = engine_metrics_text(a->e, &text);
		if (r < 0)
			return api_send_error(c, 500, errno_name(r), "cannot render metrics");
		return api_send_text(c, 200, "text/plain; version=0.0.4", text);
	}
	return api_send_error(c, 404, "ENOENT", "no such endpoint: %s %s", method, url);
}

static MHD_Result_t on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct api *a = cls;
	struct request *rq = *con_cls;
	struct conn *n;

	(void)version;
	if (!rq) {
		n = api_conn_of(c);
		if (!n)
			return MHD_NO; /* cannot tell who is asking: drop it */
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
	n = api_conn_of(c);
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
	struct conn *n = api_conn_of(c);

	(void)toe;
	if (n) {
		/* a kept-alive connection has a new deadline for its next request */
		pthread_mutex_lock(&a->lock);
		n->answering = false;
		n->fresh = false; /* served: an idle one may yield its slot from now on */
		n->served = true;
		n->since_ms = mono_ms();
		pthread_mutex_unlock(&a->lock);
		api_guard_wake(a);
	}
	if (rq) {
		api_body_free(&rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

static int listen_unix(const char *path, int mode, const char *group, gid_t gid, bool set_group,
		       const struct mg_log *log, int *out)
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
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0); /* the guard accepts until EAGAIN */
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
	/* from here on a failure leaves no socket behind for the next start */
	if (set_group && chown(path, (uid_t)-1, gid) < 0) {
		int r = -errno;

		unlink(path);
		if (r == -EPERM)
			log_err(log, "agent.api_group: this process (uid %u) is not in group %s (gid %u), so it "
				"cannot give the API socket %s to that group (EPERM); add the user to the group, or "
				"set agent.api_group to one of the user's own groups (-o agent.api_group=$(id -gn))",
				(unsigned)geteuid(), group, (unsigned)gid, path);
		return r;
	}
	if (chmod(path, (mode_t)mode) < 0 || listen(fd, API_LISTEN_BACKLOG) < 0) {
		int r = -errno;

		unlink(path);
		return r;
	}
	*out = TAKE_FD(fd);
	return 0;
}

static void api_free(struct api *a)
{
	if (a->listen_fd >= 0)
		close(a->listen_fd);
	if (a->epfd >= 0)
		close(a->epfd);
	if (a->wakefd >= 0)
		close(a->wakefd);
	pthread_mutex_destroy(&a->lock);
	free(a->socket_path);
	free(a->peek);
	free(a);
}

int api_start(const struct api_params *p, struct engine *e, const struct mg_log *log, struct api **out)
{
	struct api *a = calloc(1, sizeof(*a));
	struct epoll_event wake = { .events = EPOLLIN, .data.u64 = 0 };
	struct epoll_event listen_ev = { .events = EPOLLIN, .data.u64 = API_EPOLL_LISTEN };
	struct epoll_event mhd_ev = { .events = EPOLLIN, .data.u64 = API_EPOLL_MHD };
	const union MHD_DaemonInfo *info;
	int r;

	if (!a)
		return -ENOMEM;
	a->e = e;
	a->log = log;
	a->body_limit = p->body_limit;
	api_limits_init(a, p->max_connections ? p->max_connections : API_OTHERS_MAX_DEFAULT);
	a->epfd = a->wakefd = a->listen_fd = -1;
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
	a->peek = malloc(API_HEAD_PEEK);
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!a->socket_path || !a->peek || a->epfd < 0 || a->wakefd < 0 ||
	    epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->wakefd, &wake) < 0) {
		r = a->socket_path ? -errno : -ENOMEM;
		api_free(a);
		return r;
	}
	r = listen_unix(p->socket_path, p->socket_mode, p->group, a->group_gid, a->have_group, log, &a->listen_fd);
	if (r < 0) {
		api_free(a);
		return r;
	}
	/* the guard accepts (api_conn.c) and hands MHD only connections whose
	 * request head is in; MHD's own limit is never the one that bites,
	 * api_conn.c's per class are.  No thread of MHD's own: the guard runs
	 * its loop (MHD_run() when MHD's epoll set is ready); the handlers
	 * answer from memory or after one journal write, and streams suspend */
	a->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
				  0, NULL, NULL, on_request, a,
				  MHD_OPTION_NOTIFY_CONNECTION, api_on_connection, a,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
				  MHD_OPTION_CONNECTION_LIMIT, api_limits_total(a) + 64,
				  /* idle: the guard's deadline is the shorter one for a request */
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(API_REQUEST_DEADLINE_MS / 1000 * 2),
				  MHD_OPTION_END);
	info = a->mhd ? MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (!a->mhd || !info || epoll_ctl(a->epfd, EPOLL_CTL_ADD, info->epoll_fd, &mhd_ev) < 0 ||
	    epoll_ctl(a->epfd, EPOLL_CTL_ADD, a->listen_fd, &listen_ev) < 0) {
		if (a->mhd)
			MHD_stop_daemon(a->mhd);
		unlink(a->socket_path);
		api_free(a);
		return -EIO;
	}
	r = -pthread_create(&a->guard, NULL, api_guard_main, a);
	if (r < 0) {
		MHD_stop_daemon(a->mhd);
		unlink(a->socket_path);
		api_free(a);
		return r;
	}
	a->guard_started = true;
	events_set_listener(engine_events(e), api_on_published, a);
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
				api_sse_resume_locked(i->sse);
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
	pthread_mutex_lock(&a->lock);
	a->guard_exit = true;
	pthread_mutex_unlock(&a->lock);
	(void)!write(a->wakefd, &one, sizeof(one));
	if (a->guard_started)
		pthread_join(a->guard, NULL);
	/* the connections still waiting for their request head are ours */
	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns, *next; i; i = next) {
		next = i->next;
		if (i->state == CONN_PENDING)
			api_conn_close_pending_locked(a, i, NULL, NULL);
	}
	pthread_mutex_unlock(&a->lock);
	MHD_stop_daemon(a->mhd);
	unlink(a->socket_path);
	api_free(a);
}
