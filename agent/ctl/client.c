/* SPDX-License-Identifier: MIT */
/*
 * The HTTP client memgrantctl uses to talk to memgrantd's local API: HTTP/1.1
 * over the Unix socket (http_unix.c; no HTTP library).  Requests are small;
 * the event stream is read line by line through a callback.
 */
#include "agent/ctl/client.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent/ctl/http_unix.h"
#include "lib/util.h"

#include <getopt.h>
#include <sys/signalfd.h>

#ifndef RUNSTATEDIR
#define RUNSTATEDIR "/run"
#endif

const char *ctl_socket_path(const struct ctl_ctx *ctx)
{
	const char *env = getenv("MEMGRANT_SOCKET");

	if (ctx->socket)
		return ctx->socket;
	if (env && *env)
		return env;
	return RUNSTATEDIR "/memgrant/api.sock";
}

struct body {
	char *p;
	size_t len;
};

static int collect(const char *data, size_t add, void *cls)
{
	struct body *b = cls;
	char *np;

	/* GET /v1/blocks is about 260 bytes a block (17 MB at 65,536 blocks):
	 * far more than that is not the agent talking; stop reading */
	if (b->len + add > (256u << 20))
		return 1;
	np = realloc(b->p, b->len + add + 1);
	if (!np)
		return 1;
	memcpy(np + b->len, data, add);
	b->len += add;
	np[b->len] = '\0';
	b->p = np;
	return 0;
}

char *ctl_url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(3 * strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		/* RFC 3986's unreserved characters stay, as curl_easy_escape() keeps them */
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '-' || ch == '.' || ch == '_' || ch == '~') {
			*o++ = (char)ch;
		} else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

/* A refused or queue-full connect is retried this long, with backoff: a
 * busy agent (its listen queue full) or one restarting answers soon. */
#define CONNECT_RETRY_MS 2000L

/* Connects to the agent's socket, again while the connect fails with
 * EAGAIN (the agent's listen queue is full) or ECONNREFUSED (nothing listens
 * yet) and the socket file exists: 0 with *FD, or the last -errno. */
static int connect_retrying(const struct ctl_ctx *ctx, int *fd)
{
	const char *path = ctl_socket_path(ctx);
	long waited = 0, step = 20;
	int r;

	for (;;) {
		r = hu_connect(path, fd);
		if (r == 0 || (r != -EAGAIN && r != -ECONNREFUSED) || waited >= CONNECT_RETRY_MS ||
		    access(path, F_OK) < 0)
			return r;
		usleep((useconds_t)step * 1000);
		waited += step;
		step = step * 2 > 400 ? 400 : step * 2;
	}
}

static void owner_of(const struct stat *st, char *user, size_t ulen, char *group, size_t glen)
{
	struct passwd pw, *pres = NULL;
	struct group gr, *gres = NULL;
	char buf[4096];

	if (getpwuid_r(st->st_uid, &pw, buf, sizeof(buf), &pres) == 0 && pres)
		snprintf(user, ulen, "%s", pres->pw_name);
	else
		snprintf(user, ulen, "%u", (unsigned)st->st_uid);
	if (getgrgid_r(st->st_gid, &gr, buf, sizeof(buf), &gres) == 0 && gres)
		snprintf(group, glen, "%s", gres->gr_name);
	else
		snprintf(group, glen, "%u", (unsigned)st->st_gid);
}

/* Permission denied on the socket PATH or on a folder on the way to it:
 * say which, its mode and owner, and the group that lets one in.  Whether
 * memgrantd runs cannot be told from here, so nothing says it does not. */
static void say_denied(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	char user[64], group[64];
	struct stat st;

	if (stat(path, &st) == 0) {
		owner_of(&st, user, sizeof(user), group, sizeof(group));
		ctl_err("permission denied on memgrantd's socket %s (mode %04o, owner %s:%s): only root and the "
			"group %s may connect; join it (sudo usermod -aG %s $USER, then log in again) or run as root",
			path, (unsigned)(st.st_mode & 07777), user, group, group, group);
		return;
	}
	/* the first folder on the way this user may not search */
	for (char *s = copy && copy[0] == '/' ? strchr(copy + 1, '/') : NULL; s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (access(copy, X_OK) < 0 && errno == EACCES && stat(copy, &st) == 0) {
			owner_of(&st, user, sizeof(user), group, sizeof(group));
			ctl_err("permission denied: the folder %s (mode %04o, owner %s:%s) keeps you (uid %u) from "
				"memgrantd's socket %s, so whether memgrantd runs cannot be told; join the group %s "
				"(sudo usermod -aG %s $USER, then log in again) or run as root",
				copy, (unsigned)(st.st_mode & 07777), user, group, (unsigned)getuid(), path, group,
				group);
			return;
		}
		*s = '/';
	}
	ctl_err("permission denied on memgrantd's socket %s: run as root or as a member of the API group", path);
}

/* Says why connecting failed (CONNECT_ERR, -errno) and returns -errno. */
static int connect_failure(const struct ctl_ctx *ctx, int connect_err)
{
	const char *path = ctl_socket_path(ctx);
	struct stat st;
	int stat_errno = stat(path, &st) < 0 ? errno : 0;

	if (connect_err == -EACCES || connect_err == -EPERM || stat_errno == EACCES) {
		say_denied(path);
		return -EACCES;
	}
	if (connect_err == -EAGAIN)
		ctl_err("memgrantd at %s is busy: its connection queue stayed full for %ld s; try again",
			path, CONNECT_RETRY_MS / 1000);
	else if (connect_err == -ECONNREFUSED && stat_errno == 0)
		ctl_err("memgrantd is not running: nothing listens on %s (connection refused for %ld s)", path,
			CONNECT_RETRY_MS / 1000);
	else if (stat_errno == ENOENT)
		ctl_err("memgrantd is not running: no socket at %s (--socket PATH)", path);
	else
		ctl_err("cannot connect to memgrantd at %s: %s (is it running? --socket PATH)", path,
			strerror(-connect_err));
	return stat_errno == ENOENT ? -ENOENT : -ECONNREFUSED;
}

/* Says why an exchange with the agent failed (R, -errno of hu_exchange()). */
static int exchange_failure(const struct ctl_ctx *ctx, int r)
{
	const char *why = r == -EBADMSG	     ? "its answer is not HTTP"
			  : r == -ECONNRESET ? "it closed the connection before its answer was complete"
			  : r == -ETIMEDOUT  ? "no answer within 60 s"
					     : strerror(-r);

	ctl_err("talking to memgrantd at %s: %s", ctl_socket_path(ctx), why);
	return r == -ENOENT ? -ECONNREFUSED : r;
}

/* METHOD PATH [BODY] with the body of the answer to ON_DATA: 0 with
 * *STATUS, or -errno after saying why (-ECANCELED: ON_DATA stopped it,
 * -EINTR: INTR_FD became readable; neither said). */
static int exchange(const struct ctl_ctx *ctx, const char *method, const char *path, const char *body,
		    int timeout_ms, int intr_fd, hu_data_fn on_data, void *cls, long *status)
{
	struct hu_request rq = { .method = method, .path = path, .body = body, .timeout_ms = timeout_ms,
				 .intr_fd = intr_fd, .on_data = on_data, .cls = cls };
	int fd, r;

	r = connect_retrying(ctx, &fd);
	if (r < 0)
		return connect_failure(ctx, r);
	r = hu_exchange(fd, &rq, status);
	close(fd);
	if (r < 0 && r != -ECANCELED && r != -EINTR)
		return exchange_failure(ctx, r);
	return r;
}

int ctl_request(const struct ctl_ctx *ctx, const char *method, const char *path, const char *body,
		long *status, json_t **reply)
{
	struct body b = { 0 };
	int r;

	*reply = NULL;
	r = exchange(ctx, method, path, body, 60000, -1, collect, &b, status);
	if (r == -ECANCELED) {
		ctl_err("memgrantd's answer to %s %s is larger than 256 MiB or out of memory", method, path);
		r = -EMSGSIZE;
	} else if (r == 0) {
		json_error_t jerr;
		*reply = b.p ? json_loads(b.p, 0, &jerr) : NULL;
		if (!*reply) {
			ctl_err("memgrantd answered %ld with something that is not JSON", *status);
			r = -EBADMSG;
		}
	}
	free(b.p);
	return r;
}

int ctl_get_json(const struct ctl_ctx *ctx, const char *path, json_t **reply)
{
	long status = 0;
	int r = ctl_request(ctx, "GET", path, NULL, &status, reply);

	if (r < 0)
		return r;
	if (status != 200) {
		ctl_print_error_reply(status, *reply);
		json_decref(*reply);
		*reply = NULL;
		return -EPROTO;
	}
	return 0;
}

void ctl_print_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
}

int ctl_get_text(const struct ctl_ctx *ctx, const char *path, char **text)
{
	struct body b = { 0 };
	long status = 0;
	int r = exchange(ctx, "GET", path, NULL, 60000, -1, collect, &b, &status);

	if (r == -ECANCELED) {
		ctl_err("memgrantd's answer to GET %s is larger than 256 MiB or out of memory", path);
		r = -EMSGSIZE;
	}
	if (r < 0) {
		free(b.p);
		return r;
	}
	if (status != 200) {
		ctl_err("memgrantd answered %ld for %s", status, path);
		free(b.p);
		return -EPROTO;
	}
	*text = b.p ? b.p : strdup("");
	return *text ? 0 : -ENOMEM;
}

/* Server-sent events: "data: {...}" lines, a blank line ends an event.
 * A status of a big grant can be long: the line buffer grows (to 16 MiB). */
#define STREAM_LINE_MAX (16u << 20)

struct stream {
	char *line;
	size_t len, cap;
	int (*on_event)(json_t *ev, void *cls);
	void *cls;
	int stop; /* on_event returned non-zero: its value */
	int err;  /* -EMSGSIZE, -ENOMEM, -EBADMSG */
};

static int stream_line(struct stream *s)
{
	json_t *ev;
	int r;

	s->line[s->len] = '\0';
	if (!startswith(s->line, "data: "))
		return 0;
	ev = json_loads(s->line + 6, 0, NULL);
	if (!ev) {
		s->err = -EBADMSG;
		return -1;
	}
	r = s->on_event(ev, s->cls);
	json_decref(ev);
	if (r) {
		s->stop = r;
		return -1;
	}
	return 0;
}

static int stream_write(const char *data, size_t total, void *cls)
{
	struct stream *s = cls;

	for (size_t i = 0; i < total; i++) {
		char ch = data[i];
		if (ch == '\n') {
			if (stream_line(s) < 0)
				return 1; /* ends the transfer */
			s->len = 0;
			continue;
		}
		if (s->len + 2 > s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 4096;
			char *nl;
			if (cap > STREAM_LINE_MAX) {
				s->err = -EMSGSIZE;
				return 1;
			}
			nl = realloc(s->line, cap);
			if (!nl) {
				s->err = -ENOMEM;
				return 1;
			}
			s->line = nl;
			s->cap = cap;
		}
		s->line[s->len++] = ch;
	}
	return 0;
}

int ctl_follow_events(const struct ctl_ctx *ctx, const char *path, int (*on_event)(json_t *ev, void *cls),
		      void *cls)
{
	struct stream s = { .on_event = on_event, .cls = cls };
	long status = 0;
	sigset_t intr;
	int r, sfd;

	/* a Ctrl-C the caller holds pending (SIGINT blocked) ends the stream:
	 * a signalfd shows it without taking it and without a periodic wake */
	sigemptyset(&intr);
	sigaddset(&intr, SIGINT);
	sfd = signalfd(-1, &intr, SFD_CLOEXEC | SFD_NONBLOCK);
	r = exchange(ctx, "GET", path, NULL, -1, sfd, stream_write, &s, &status);
	if (sfd >= 0)
		close(sfd);
	free(s.line);
	if (s.stop)
		return s.stop > 0 ? s.stop : 0;
	if (r == -EINTR)
		return -EINTR; /* the caller says what goes on */
	if (s.err) {
		ctl_err("event stream from memgrantd: %s", s.err == -EMSGSIZE ? "an event larger than 16 MiB"
							   : s.err == -EBADMSG ? "an event that is not JSON"
									       : strerror(-s.err));
		return s.err;
	}
	if (r < 0)
		return r;
	if (status != 200) {
		ctl_err("memgrantd answered %ld for %s", status, path);
		return -EPROTO;
	}
	return 0;
}

int ctl_print_error_reply(long status, json_t *reply)
{
	json_t *e = json_object_get(reply, "error");
	const char *msg = json_string_value(json_object_get(e, "message"));
	const char *code = json_string_value(json_object_get(e, "code"));

	if (msg)
		ctl_err("%s%s%s%s", msg, code ? " (" : "", code ? code : "", code ? ")" : "");
	else
		ctl_err("memgrantd answered HTTP %ld", status);
	return -EPROTO;
}

int ctl_bad_option(const char *cmd, int ch, char **argv)
{
	/* a short option has optopt set; a long one is the whole previous word */
	char shortopt[3] = { '-', (char)optopt, '\0' };
	const char *prev = argv[optind - 1];
	const char *arg = startswith(prev, "--") || !optopt ? prev : shortopt;

	if (ch == ':')
		ctl_err("%s: option '%s' needs an argument", cmd, arg);
	else if (optopt >= '0' && optopt <= '9')
		ctl_err("%s: negative numbers are not allowed: sizes and block numbers are not negative", cmd);
	else
		ctl_err("%s: unknown option '%s' (see memgrantctl %s --help)", cmd, arg, cmd);
	return CTL_EXIT_FAILURE;
}

int ctl_no_more_args(const char *cmd, int argc, char **argv)
{
	if (optind < argc) {
		ctl_err("%s: unexpected argument '%s'", cmd, argv[optind]);
		return -EINVAL;
	}
	return 0;
}
