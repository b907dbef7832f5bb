/* SPDX-License-Identifier: MIT */
/*
 * The HTTP client memgrantctl uses to talk to memgrantd's local API: libcurl
 * over the Unix socket.  Requests are small; the event stream is read line by
 * line through a callback.
 */
#include "agent/ctl/ctl_client.h"

#include "lib/crypto_dl.h"
#include "lib/curl_dl.h"
#include "lib/dl_table.h"
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "lib/util.h"

#include <getopt.h>

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

static size_t collect(char *data, size_t size, size_t n, void *cls)
{
	struct body *b = cls;
	size_t add = size * n;
	char *np;

	/* GET /v1/blocks is about 260 bytes a block (17 MB at 65,536 blocks):
	 * far more than that is not the agent talking; stop reading */
	if (b->len + add > (256u << 20))
		return 0;
	np = realloc(b->p, b->len + add + 1);
	if (!np)
		return 0;
	memcpy(np + b->len, data, add);
	b->len += add;
	np[b->len] = '\0';
	b->p = np;
	return add;
}

char *ctl_url_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(3 * strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		/* RFC 3986's unreserved characters stay, as sym_curl_easy_escape() keeps them */
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

/*
 * memgrantctl speaks plain HTTP over a Unix socket and needs no TLS, but
 * curl_global_init() initialises libssl, which registers every cipher and
 * digest of libcrypto first.  Telling libcrypto beforehand not to build those
 * tables (they serve only name lookups, which nothing here makes) saves that
 * work, and keeps memgrantctl off a code path that freezes the emulated s390x
 * CPU of the kernel test (docs/vm-test.md).  Without libcrypto (a libcurl on
 * another TLS library) there is nothing to skip.
 */
DL_TABLE_NOTE(ctl_crypto_note, "[{\"feature\":\"crypto\",\"description\":\"told to skip its cipher tables before "
				"libcurl loads\",\"priority\":\"suggested\",\"soname\":[\"" MEMGRANT_CRYPTO_SONAME "\"]}]");

static void skip_tls_tables(void)
{
	static const char *const names[] = { "OPENSSL_init_crypto" };
	void *fn[1];
	char why[300];

	if (dl_table_open(MEMGRANT_CRYPTO_SONAME, names, fn, 1, why, sizeof(why)) == 0)
		((int (*)(uint64_t, const OPENSSL_INIT_SETTINGS *))fn[0])(OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
									  OPENSSL_INIT_NO_ADD_ALL_DIGESTS, NULL);
}

/* NULL with the reason said: libcurl cannot be loaded (lib/curl_dl.h) or no memory. */
static CURL *handle_for(const struct ctl_ctx *ctx, const char *path, char *url, size_t urllen)
{
	static pthread_once_t tls_tables_once = PTHREAD_ONCE_INIT;
	char why[300];
	CURL *c;

	pthread_once(&tls_tables_once, skip_tls_tables);
	if (curl_dl_load(why, sizeof(why)) < 0) {
		ctl_err("talking to memgrantd needs libcurl: %s", why);
		return NULL;
	}
	c = sym_curl_easy_init();
	if (!c)
		return NULL;
	snprintf(url, urllen, "http://memgrantd%s", path);
	sym_curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, ctl_socket_path(ctx));
	sym_curl_easy_setopt(c, CURLOPT_URL, url);
	sym_curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	sym_curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	return c;
}

/* A refused or queue-full connect is retried this long, with backoff: a
 * busy agent (its listen queue full) or one restarting answers soon. */
#define CONNECT_RETRY_MS 2000L

/* libcurl connects without blocking and takes the EAGAIN of a Unix
 * socket's full listen queue for "in progress": it then fails with
 * CURLE_COULDNT_CONNECT and errno 0.  A connect of our own tells which it
 * was; one that gets through now means the queue was full a moment ago. */
static long probe_connect_errno(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	int fd, e = 0;

	if (len >= sizeof(sa.sun_path))
		return ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		e = errno;
	close(fd);
	return e == 0 || e == EINPROGRESS ? EAGAIN : e;
}

/* sym_curl_easy_perform(), again while the connect fails with EAGAIN (the
 * agent's listen queue is full) or ECONNREFUSED (nothing listens yet) and
 * the socket file exists.  *OS_ERRNO: the connect's errno of the last try. */
static CURLcode perform_retrying(const struct ctl_ctx *ctx, CURL *c, long *os_errno)
{
	long waited = 0, step = 20;
	CURLcode cc;

	for (;;) {
		*os_errno = 0;
		cc = sym_curl_easy_perform(c);
		if (cc != CURLE_COULDNT_CONNECT)
			return cc;
		sym_curl_easy_getinfo(c, CURLINFO_OS_ERRNO, os_errno);
		if (*os_errno == 0)
			*os_errno = probe_connect_errno(ctl_socket_path(ctx));
		if ((*os_errno != EAGAIN && *os_errno != ECONNREFUSED) || waited >= CONNECT_RETRY_MS ||
		    access(ctl_socket_path(ctx), F_OK) < 0)
			return cc;
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

static int curl_failure(const struct ctl_ctx *ctx, CURLcode cc, long os_errno)
{
	const char *path = ctl_socket_path(ctx);
	struct stat st;
	int stat_errno = stat(path, &st) < 0 ? errno : 0;

	if (cc == CURLE_COULDNT_CONNECT && os_errno == 0)
		os_errno = probe_connect_errno(path);
	if (cc == CURLE_COULDNT_CONNECT && (os_errno == EACCES || os_errno == EPERM || stat_errno == EACCES)) {
		say_denied(path);
		return -EACCES;
	}
	if (cc == CURLE_COULDNT_CONNECT && os_errno == EAGAIN)
		ctl_err("memgrantd at %s is busy: its connection queue stayed full for %ld s; try again",
			path, CONNECT_RETRY_MS / 1000);
	else if (cc == CURLE_COULDNT_CONNECT && os_errno == ECONNREFUSED && stat_errno == 0)
		ctl_err("memgrantd is not running: nothing listens on %s (connection refused for %ld s)", path,
			CONNECT_RETRY_MS / 1000);
	else if (cc == CURLE_COULDNT_CONNECT && stat_errno == ENOENT)
		ctl_err("memgrantd is not running: no socket at %s (--socket PATH)", path);
	else if (cc == CURLE_COULDNT_CONNECT)
		ctl_err("cannot connect to memgrantd at %s (is it running? --socket PATH)", path);
	else
		ctl_err("talking to memgrantd at %s: %s", ctl_socket_path(ctx), sym_curl_easy_strerror(cc));
	return cc == CURLE_COULDNT_CONNECT && stat_errno == ENOENT ? -ENOENT : -ECONNREFUSED;
}

int ctl_request(const struct ctl_ctx *ctx, const char *method, const char *path, const char *body,
		long *status, json_t **reply)
{
	struct body b = { 0 };
	struct curl_slist *hdr = NULL;
	char url[512];
	CURL *c = handle_for(ctx, path, url, sizeof(url));
	CURLcode cc;
	long os_errno = 0;
	int r = 0;

	*reply = NULL;
	if (!c)
		return -ENOMEM;
	sym_curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	sym_curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	sym_curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	sym_curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
	if (body) {
		hdr = sym_curl_slist_append(NULL, "Content-Type: application/json");
		sym_curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		sym_curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		sym_curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	cc = perform_retrying(ctx, c, &os_errno);
	if (cc != CURLE_OK) {
		r = curl_failure(ctx, cc, os_errno);
	} else {
		json_error_t jerr;
		sym_curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
		*reply = b.p ? json_loads(b.p, 0, &jerr) : NULL;
		if (!*reply) {
			ctl_err("memgrantd answered %ld with something that is not JSON", *status);
			r = -EBADMSG;
		}
	}
	free(b.p);
	sym_curl_slist_free_all(hdr);
	sym_curl_easy_cleanup(c);
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

static size_t stream_write(char *data, size_t size, size_t n, void *cls)
{
	struct stream *s = cls;
	size_t total = size * n;

	for (size_t i = 0; i < total; i++) {
		char ch = data[i];
		if (ch == '\n') {
			if (stream_line(s) < 0)
				return 0; /* ends the transfer */
			s->len = 0;
			continue;
		}
		if (s->len + 2 > s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 4096;
			char *nl;
			if (cap > STREAM_LINE_MAX) {
				s->err = -EMSGSIZE;
				return 0;
			}
			nl = realloc(s->line, cap);
			if (!nl) {
				s->err = -ENOMEM;
				return 0;
			}
			s->line = nl;
			s->cap = cap;
		}
		s->line[s->len++] = ch;
	}
	return total;
}

/* A Ctrl-C the caller holds pending (SIGINT blocked) ends the stream. */
static int stream_progress(void *cls, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct stream *s = cls;
	sigset_t pending;

	if (sigpending(&pending) == 0 && sigismember(&pending, SIGINT)) {
		s->err = -EINTR;
		return 1;
	}
	return 0;
}

int ctl_follow_events(const struct ctl_ctx *ctx, const char *path, int (*on_event)(json_t *ev, void *cls),
		      void *cls)
{
	struct stream s = { .on_event = on_event, .cls = cls };
	char url[512];
	CURL *c;
	CURLcode cc;
	long status = 0, os_errno = 0;
	int r = 0;

	c = handle_for(ctx, path, url, sizeof(url));
	if (!c)
		return -ENOMEM;
	sym_curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_write);
	sym_curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	sym_curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stream_progress);
	sym_curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
	sym_curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	cc = perform_retrying(ctx, c, &os_errno);
	sym_curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	sym_curl_easy_cleanup(c);
	free(s.line);
	if (s.stop)
		return s.stop > 0 ? s.stop : 0;
	if (s.err == -EINTR)
		return -EINTR; /* the caller says what goes on */
	if (s.err) {
		ctl_err("event stream from memgrantd: %s", s.err == -EMSGSIZE ? "an event larger than 16 MiB"
							   : s.err == -EBADMSG ? "an event that is not JSON"
									       : strerror(-s.err));
		return s.err;
	}
	if (cc != CURLE_OK)
		r = curl_failure(ctx, cc, os_errno);
	else if (status != 200) {
		ctl_err("memgrantd answered %ld for %s", status, path);
		r = -EPROTO;
	}
	return r;
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
