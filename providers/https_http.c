/* SPDX-License-Identifier: MIT */
/*
 * One request of the HTTPS provider: the bearer token, curl options shared
 * by every request, running a transfer on a thread's multi handle, and what
 * an answer means (success, retry with backoff, refused), logged once per
 * change of state.
 */
#include "providers/https_int.h"
#include "providers/https_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/timeutil.h"
#include "lib/util.h"

void https_response_done(struct response *r)
{
	free(r->body);
	free(r->location);
	*r = (struct response){ .retry_after_s = -1, .spread_ms = -1 };
}

bool https_stopping(struct https_provider *p)
{
	return atomic_load(&p->stop);
}

/* Sleeps MS or until stop; true when stopping.  In C's own multi handle
 * (no transfer in it): woken by its end or by sym_curl_multi_wakeup() at
 * stop, and by nothing the other thread does (a lock and condition shared by
 * both threads woke each one again whenever their steps ended together). */
bool https_sleep_ms(struct https_provider *p, struct conn *c, unsigned ms)
{
	uint64_t end = mono_ms() + ms, now;
	struct timespec t;

	while (!https_stopping(p) && (now = mono_ms()) < end) {
		uint64_t left = end - now;

		if (sym_curl_multi_poll(c->multi, NULL, 0, left > 60000 ? 60000 : (int)left, NULL) == CURLM_OK)
			continue;
		/* not expected; the provider's condition then, as stop signals it too */
		deadline_after_ms(&t, (long)left);
		pthread_mutex_lock(&p->lock);
		if (!https_stopping(p))
			pthread_cond_timedwait(&p->cond, &p->lock, &t);
		pthread_mutex_unlock(&p->lock);
	}
	return https_stopping(p);
}

/* --- failure bookkeeping: backoff with jitter, a log line per change ------- */

uint32_t https_rand(struct conn *c)
{
	uint32_t x = c->seed ? c->seed : 0x9e3779b9u;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return c->seed = x;
}

/* Records a failure of class CLASS (logged in full the first time it differs
 * from the previous one) and sleeps as https_backoff.h says: exponential
 * from BACKOFF_FIRST_MS (or from the announced window) to the cap, full
 * jitter, so that agents that lost the same server do not come back in
 * step.  AT_CAP: jump straight to the cap (answers that retrying soon will
 * not change).  RETRY_AFTER_S (>= 0) is a floor.  True when stopping. */
bool https_fail_and_wait(struct https_provider *p, struct conn *c, const char *class, bool at_cap,
			  long retry_after_s, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
bool https_fail_and_wait(struct https_provider *p, struct conn *c, const char *class, bool at_cap,
			  long retry_after_s, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	unsigned wait, spread = atomic_load(&p->spread_ms);
	uint32_t r1 = https_rand(c), r2 = https_rand(c);

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	c->bo.cap_ms = p->backoff_cap_ms;
	if (atomic_load(&p->answered))
		c->bo.answered = true;
	wait = backoff_next(&c->bo, at_cap, retry_after_s, spread, r1, r2);
	c->failures++;
	if (!streq(c->fail_class, class)) {
		snprintf(c->fail_class, sizeof(c->fail_class), "%s", class);
		log_warn(p->log, "https %s: %s; retrying with backoff (next in %u ms%s)", c->name, msg, wait,
			 spread ? ", spread over the announced window" : "");
	} else {
		log_debug(p->log, "https %s: attempt %u failed: %s; next in %u ms", c->name, c->failures, msg,
			  wait);
	}
	return https_sleep_ms(p, c, wait);
}

void https_succeeded(struct https_provider *p, struct conn *c)
{
	if (c->fail_class[0])
		log_notice(p->log, "https %s: control plane %s answers again after %u failed attempts", c->name,
			   p->base, c->failures);
	c->fail_class[0] = '\0';
	c->failures = 0;
	backoff_reset(&c->bo);
	atomic_store(&p->answered, true);
}

/* --- the bearer token ------------------------------------------------------ */

void https_token_clear(struct conn *c)
{
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	c->token = NULL;
	c->token_loaded = false;
}

/* The token's text checked: printable, no spaces, not empty.  BUF is
 * NUL-terminated at N (trailing white space already cut). */
static int token_check(struct https_provider *p, const char *buf, size_t n, char *why, size_t whylen)
{
	for (size_t i = 0; i < n; i++) {
		/* RFC 6750 b64token characters; anything else would break the header */
		unsigned char ch = (unsigned char)buf[i];
		if (ch <= ' ' || ch >= 0x7f) {
			snprintf(why, whylen, "token_file %s: byte %zu is not a token character (the token is not shown)",
				 p->token_file, i + 1);
			return -EINVAL;
		}
	}
	if (n == 0) {
		snprintf(why, whylen, "token_file %s is empty", p->token_file);
		return -ENODATA;
	}
	return 0;
}

/* Refreshes the token: after a reload, and when a file the agent reads
 * itself changed (a root-only one is read through the helper and cannot be
 * watched).  0 (c->token set), or -errno with WHY filled (never containing
 * the token). */
static int token_refresh(struct https_provider *p, struct conn *c, char *why, size_t whylen)
{
	const struct cred_file *f = cred_store_find(p->creds, p->token_file);
	bool served = f && f->served && p->creds->fetch;
	unsigned gen = cred_generation(p->creds);
	struct stat st = { 0 };
	char *buf = NULL;
	size_t n = 0;
	int r;

	/* a file the agent can see is watched; one in a root-only folder
	 * (served by the helper) is read again at reloads only */
	if (stat(p->token_file, &st) < 0) {
		int e = errno;

		if (!served || e != EACCES) {
			snprintf(why, whylen, "token_file %s: %s", p->token_file, strerror(e));
			https_token_clear(c);
			return -e;
		}
		if (c->token_loaded && c->token_gen == gen)
			return 0;
		st = (struct stat){ 0 };
	} else if (c->token_loaded && c->token_gen == gen && st.st_ino == c->token_ino &&
		   st.st_size == c->token_size && st.st_mtim.tv_sec == c->token_mtime.tv_sec &&
		   st.st_mtim.tv_nsec == c->token_mtime.tv_nsec) {
		return 0;
	}
	r = cred_read(p->creds, p->token_file, TOKEN_MAX, &buf, &n);
	if (r == -EFBIG)
		snprintf(why, whylen, "token_file %s: a token is at most %d bytes", p->token_file, TOKEN_MAX);
	if (r < 0 && r != -EFBIG) {
		https_token_clear(c);
		snprintf(why, whylen, "token_file %s: %s%s", p->token_file, strerror(-r),
			 r == -EACCES ? " (see Credentials in docs/security.md)" : "");
		return r;
	}
	while (r == 0 && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	if (r == 0)
		r = token_check(p, buf, n, why, whylen);
	if (r < 0) {
		cred_free(buf, n);
		if (!c->token_loaded)
			return r;
		/* empty or cut: a rotation read while the file was written.  The
		 * token read before stays in use; the file is read again at the
		 * next request (its stat, or the generation, still differs) */
		if (!c->token_refused)
			log_warn(p->log, "https %s: %s; still sending the token read before, until the file is complete",
				 c->name, why);
		c->token_refused = true;
		return 0;
	}
	https_token_clear(c);
	c->token_refused = false;
	c->token = buf;
	c->token_ino = st.st_ino;
	c->token_size = st.st_size;
	c->token_mtime = st.st_mtim;
	c->token_gen = gen;
	c->token_loaded = true;
	log_info(p->log, "https %s: bearer token read from %s (%zu characters)", c->name, p->token_file, n);
	return 0;
}

/* --- the TLS files ------------------------------------------------------------ */

void https_tls_clear(struct conn *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(c->tls); i++) {
		cred_free(c->tls[i], c->tls_len[i]);
		c->tls[i] = NULL;
		c->tls_len[i] = 0;
	}
	c->tls_loaded = false;
}

/* When the provider does not parse ca_file itself (p->ca_store false:
 * libcurl not on OpenSSL 3, https_ca.c), decides how the CA reaches curl
 * before each request: by path when the agent can read ca_file itself
 * (then curl parses it once and the multi handle keeps the store for every
 * later connection), else as the blob read through the credential store
 * (parsed again at each handshake: curl caches no store made from a blob).  A change of the file (inode, size,
 * time) is seen here: the next request spells the path the other way
 * (".../dir/./NAME"), which curl takes for another file and parses once
 * more, and opens a new connection that verifies with the new CA. */
static void ca_watch(struct https_provider *p, struct conn *c)
{
	struct stat st;
	bool was = c->ca_by_path;

	if (!p->ca_file || p->ca_store)
		return; /* the provider's parse (https_ca.c) */
	if (!c->ca_alias_path) {
		const char *slash = strrchr(p->ca_file, '/');

		if (!slash || asprintf(&c->ca_alias_path, "%.*s/./%s", (int)(slash - p->ca_file), p->ca_file,
				       slash + 1) < 0) {
			c->ca_alias_path = NULL;
			c->ca_by_path = false;
			return;
		}
	}
	c->ca_by_path = stat(p->ca_file, &st) == 0 && S_ISREG(st.st_mode) && access(p->ca_file, R_OK) == 0;
	if (!c->ca_by_path) {
		if (was)
			c->tls_loaded = false; /* the blob is read at the next tls_refresh() */
		return;
	}
	if (was && (st.st_ino != c->ca_ino || st.st_size != c->ca_size || st.st_mtim.tv_sec != c->ca_mtime.tv_sec ||
		    st.st_mtim.tv_nsec != c->ca_mtime.tv_nsec)) {
		char *text = NULL, cwhy[256];
		size_t len = 0;
		int r = cred_read(p->creds, p->ca_file, CRED_FILE_MAX, &text, &len);

		if (r == 0)
			r = https_ca_check(text, len, cwhy, sizeof(cwhy));
		else
			snprintf(cwhy, sizeof(cwhy), "%s", strerror(-r));
		cred_free(text, len);
		if (r < 0 && r != -ENOSYS) {
			/* half written: the spelling curl knows keeps the store it
			 * parsed (the cache never expires); the file is looked at
			 * again at the next request, its stat being still new */
			if (!c->ca_refused)
				log_warn(p->log, "https %s: ca_file %s changed: %s; still verifying with the CA read "
					 "before, until the file is complete", c->name, p->ca_file, cwhy);
			c->ca_refused = true;
			return;
		}
		c->ca_refused = false;
		c->ca_alias = !c->ca_alias;
		c->fresh = true;
		log_info(p->log, "https %s: ca_file %s changed; the next connection verifies with it", c->name,
			 p->ca_file);
	}
	c->ca_ino = st.st_ino;
	c->ca_size = st.st_size;
	c->ca_mtime = st.st_mtim;
}

/* Reads the CA, certificate and key (credstore.h) when not read yet or a
 * reload happened since; after a reload the next request opens a new
 * connection, so that it presents the new certificate.  0, or -errno with
 * WHY naming the key and the file. */
static int tls_refresh(struct https_provider *p, struct conn *c, char *why, size_t whylen)
{
	const char *key[3] = { "ca_file", "cert_file", "key_file" };
	const char *path[3] = { p->ca_file, p->cert_file, p->key_file ? p->key_file : p->cert_file };
	unsigned gen = cred_generation(p->creds);
	char *buf[3] = { NULL };
	size_t len[3] = { 0 };
	int r = 0;

	if (c->tls_loaded && c->tls_gen == gen)
		return 0;
	for (size_t i = 0; i < 3 && r == 0; i++) {
		if (!path[i] || (i == 2 && !p->cert_file) || (i == 0 && (c->ca_by_path || p->ca_store)))
			continue;
		r = cred_read(p->creds, path[i], CRED_FILE_MAX, &buf[i], &len[i]);
		if (r < 0)
			snprintf(why, whylen, "%s %s: %s%s", i == 2 && !p->key_file ? "cert_file (the key)" : key[i],
				 path[i], strerror(-r),
				 r == -EACCES ? " (see Credentials in docs/security.md)" : "");
	}
	if (r < 0) {
		for (size_t i = 0; i < 3; i++)
			cred_free(buf[i], len[i]);
		return r;
	}
	if (c->tls_loaded && buf[0]) {
		char cwhy[256];

		if (https_ca_check(buf[0], len[0], cwhy, sizeof(cwhy)) == -EINVAL) {
			/* as a torn pair below: the set read before stays */
			if (!c->ca_refused)
				log_warn(p->log, "https %s: after the reload, ca_file %s: %s; still verifying with the CA "
					 "read before, until the file is complete", c->name, path[0], cwhy);
			c->ca_refused = true;
			for (size_t i = 0; i < 3; i++)
				cred_free(buf[i], len[i]);
			return 0;
		}
		c->ca_refused = false;
	}
	if (c->tls_loaded && buf[1] && buf[2]) {
		char pwhy[256];

		r = https_pair_check(buf[1], len[1], buf[2], len[2], pwhy, sizeof(pwhy));
		if (r == -EINVAL) {
			/* half written, or of another pair: the old set stays in
			 * use; read again at the next request (tls_gen unchanged),
			 * so the completed files are taken without another reload */
			if (c->tls_refused_gen != gen)
				log_warn(p->log, "https %s: after the reload, cert_file %s and key_file %s: %s; still "
					 "using the certificate and key read before, until both files are complete",
					 c->name, path[1], path[2], pwhy);
			c->tls_refused_gen = gen;
			for (size_t i = 0; i < 3; i++)
				cred_free(buf[i], len[i]);
			return 0;
		}
		c->tls_refused_gen = 0;
	}
	if (c->tls_loaded) {
		c->fresh = true;
		log_info(p->log, "https %s: credential files read again after a reload; the next connection uses them",
			 c->name);
	}
	https_tls_clear(c);
	for (size_t i = 0; i < 3; i++) {
		c->tls[i] = buf[i];
		c->tls_len[i] = len[i];
	}
	c->tls_gen = gen;
	c->tls_loaded = true;
	return 0;
}

/* --- one request ------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct response *r = userdata;
	size_t n = size * nmemb;
	char *nb;

	if (r->len + n > BODY_LIMIT) {
		r->too_large = true;
		return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
	}
	nb = realloc(r->body, r->len + n + 1);
	if (!nb)
		return 0;
	memcpy(nb + r->len, data, n);
	r->len += n;
	nb[r->len] = '\0';
	r->body = nb;
	return n;
}

/* Picks Memgrant-Spread out of the answer's header lines (the last one of
 * the last answer wins: curl calls this for every header of every answer). */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
	static const char name[] = "memgrant-spread:";
	struct response *r = userdata;
	size_t n = size * nmemb;
	char val[32];
	unsigned ms;

	if (n > 8 && strncasecmp(data, "HTTP/", 5) == 0)
		r->spread_ms = -1; /* a new answer (after a 100 Continue, say) */
	if (n <= sizeof(name) - 1 || strncasecmp(data, name, sizeof(name) - 1) != 0)
		return n;
	if (n - (sizeof(name) - 1) >= sizeof(val)) {
		r->spread_ms = -2;
		return n;
	}
	memcpy(val, data + sizeof(name) - 1, n - (sizeof(name) - 1));
	val[n - (sizeof(name) - 1)] = '\0';
	r->spread_ms = backoff_parse_spread(val, &ms) == 0 ? (long)ms : -2;
	return n;
}

static struct curl_slist *add_header(struct curl_slist *l, bool *ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct curl_slist *add_header(struct curl_slist *l, bool *ok, const char *fmt, ...)
{
	char line[TOKEN_MAX + 64];
	struct curl_slist *n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	n = sym_curl_slist_append(l, line);
	explicit_bzero(line, sizeof(line)); /* may have held the token */
	if (!n) {
		*ok = false;
		return l;
	}
	return n;
}

static void slist_freep(struct curl_slist **l)
{
	if (*l) {
		/* the Authorization line holds the token */
		for (struct curl_slist *i = *l; i; i = i->next)
			explicit_bzero(i->data, strlen(i->data));
		sym_curl_slist_free_all(*l);
	}
}

/* Sets the options every request shares on C's (reset) easy handle. */
static void set_common(struct https_provider *p, struct conn *c, struct response *resp, long timeout_ms)
{
	CURL *e = c->easy;

	sym_curl_easy_reset(e); /* keeps the connection, the TLS session and DNS caches */
	c->errbuf[0] = '\0';
	sym_curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	sym_curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	sym_curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, p->insecure ? "http,https" : "https");
	sym_curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	sym_curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	sym_curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	sym_curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
	sym_curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	/* both address families tried at once: a staggered second attempt is
	 * a timer that wakes the thread during a connect that hangs, and stays
	 * armed after the first one connected */
	sym_curl_easy_setopt(e, CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, 0L);
	sym_curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	sym_curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	sym_curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	/* the files' contents, not their paths: the agent may not be able to
	 * open them itself (root-only keys, credstore.h) */
	/* no CA folder: a store that comes from one file alone is the one curl
	 * keeps in the multi handle (the system bundle holds what the folder
	 * holds where update-ca-certificates writes both) */
	sym_curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
	if (p->ca_store) {
		/* the provider's CA certificates, parsed once per change of the
		 * file, verify the server at the handshake (https_ca.c); no CA file
		 * of curl's own, not even its built-in default */
		sym_curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
		sym_curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, https_ca_ssl_ctx);
		sym_curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, c);
	} else if (c->ca_by_path) {
		sym_curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_alias ? c->ca_alias_path : p->ca_file);
	} else if (c->tls[0]) {
		struct curl_blob b = { .data = c->tls[0], .len = c->tls_len[0], .flags = CURL_BLOB_COPY };
		sym_curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	}
	if (c->tls[1] && c->tls[2]) {
		struct curl_blob cb = { .data = c->tls[1], .len = c->tls_len[1], .flags = CURL_BLOB_COPY };
		struct curl_blob kb = { .data = c->tls[2], .len = c->tls_len[2], .flags = CURL_BLOB_COPY };
		sym_curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cb);
		sym_curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &kb);
	}
	if (c->fresh) {
		/* a reload: neither the kept-alive connection nor a TLS session
		 * made with the old certificate serves this request */
		sym_curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
		sym_curl_easy_setopt(e, CURLOPT_SSL_SESSIONID_CACHE, 0L);
		c->fresh = false;
	}
	sym_curl_easy_setopt(e, CURLOPT_USERAGENT, "memgrantd/" MEMGRANT_VERSION);
	sym_curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	sym_curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
	sym_curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	sym_curl_easy_setopt(e, CURLOPT_HEADERDATA, resp);
	/* TLS sessions shared by both threads and kept across reconnects: after
	 * an outage the agent resumes instead of a full handshake (the storm's
	 * cost is the server's signatures) */
	/* with the provider's CA parse, the share that came with it: sessions
	 * made with an older CA are not in it */
	if (p->ca_store)
		sym_curl_easy_setopt(e, CURLOPT_SHARE, c->ca ? c->ca->share : NULL);
	else if (p->share)
		sym_curl_easy_setopt(e, CURLOPT_SHARE, p->share);
#if LIBCURL_VERSION_NUM >= 0x075700
	/* the parsed CA store kept in the multi handle across connections (a
	 * CA file; curl parses a CA blob per handshake); ca_watch() sees a
	 * change of the file, so the store is never older than the file */
	if (!p->ca_store)
		sym_curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, -1L);
#endif
}

/* Remembers the window an answer announced (0 clears it); a value that is
 * not whole seconds is logged once and changes nothing. */
static void spread_record(struct https_provider *p, const struct response *resp)
{
	unsigned was;

	if (resp->spread_ms == -2) {
		if (!p->spread_bad_logged)
			log_warn(p->log, "https: the control plane's Memgrant-Spread header is not whole seconds "
				 "(0..%ld); ignored (docs/protocol.md)", BACKOFF_SPREAD_MAX_S);
		p->spread_bad_logged = true;
		return;
	}
	if (resp->spread_ms < 0 || p->rule == BACKOFF_EQUAL)
		return;
	was = atomic_exchange(&p->spread_ms, (unsigned)resp->spread_ms);
	if (was != (unsigned)resp->spread_ms)
		log_info(p->log, "https: the control plane announces a spreading window of %ld s (was %u s)",
			 resp->spread_ms / 1000, was / 1000);
}

/* Runs the transfer set up on C until it ends or the provider stops. */
static void perform(struct https_provider *p, struct conn *c, struct response *resp)
{
	CURLMcode mc;
	CURLMsg *m;
	int running = 1, left;

	resp->cc = CURLE_FAILED_INIT;
	if (sym_curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
		return;
	for (;;) {
		mc = sym_curl_multi_perform(c->multi, &running);
		if (mc != CURLM_OK || running == 0)
			break;
		if (https_stopping(p)) {
			resp->aborted = true;
			break;
		}
		/* sleeps until a socket is ready, curl's own timer, or sym_curl_multi_wakeup() */
		mc = sym_curl_multi_poll(c->multi, NULL, 0, 60000, NULL);
		if (mc != CURLM_OK)
			break;
	}
	while ((m = sym_curl_multi_info_read(c->multi, &left)))
		if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy)
			resp->cc = m->data.result;
	sym_curl_multi_remove_handle(c->multi, c->easy);
	if (resp->aborted)
		return;
	if (resp->cc == CURLE_OK) {
		curl_off_t ra = -1;
		sym_curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &resp->code);
		if (resp->code >= 300 && resp->code < 400) {
			char *loc = NULL;
			if (sym_curl_easy_getinfo(c->easy, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
				resp->location = strdup(loc);
		}
		resp->retry_after_s = -1;
		if (sym_curl_easy_getinfo(c->easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
			resp->retry_after_s = (long)ra;
		spread_record(p, resp);
	}
}

/* Does METHOD URL with BODY (NULL: none) and IDEMPOTENCY_KEY (NULL: none).
 * 0 with RESP filled (a transport failure is RESP->cc != CURLE_OK), or -errno
 * for a local problem (out of memory, token file) described in WHY. */
int https_request(struct https_provider *p, struct conn *c, const char *method, const char *url,
		   const char *body, const char *idempotency_key, long timeout_ms, struct response *resp,
		   char *why, size_t whylen)
{
	__attribute__((cleanup(slist_freep))) struct curl_slist *h = NULL;
	bool ok = true;
	int r;

	*resp = (struct response){ .retry_after_s = -1, .spread_ms = -1 };
	if (p->token_file) {
		r = token_refresh(p, c, why, whylen);
		if (r < 0)
			return r;
	}
	if (p->ca_store) {
		r = https_ca_refresh(p, c, why, whylen);
		if (r < 0)
			return r;
	}
	ca_watch(p, c);
	r = tls_refresh(p, c, why, whylen);
	if (r < 0)
		return r;
	set_common(p, c, resp, timeout_ms);
	h = add_header(h, &ok, "Accept: application/json");
	if (c->token)
		h = add_header(h, &ok, "Authorization: Bearer %s", c->token);
	if (idempotency_key)
		h = add_header(h, &ok, "Idempotency-Key: %s", idempotency_key);
	if (body) {
		h = add_header(h, &ok, "Content-Type: application/json");
		h = add_header(h, &ok, "Expect:"); /* no 100-continue round trip */
	}
	if (!ok) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	sym_curl_easy_setopt(c->easy, CURLOPT_URL, url);
	sym_curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, h);
	if (body) {
		sym_curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
		sym_curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body);
		if (!streq(method, "POST"))
			sym_curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
	} else {
		sym_curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	}
	perform(p, c, resp);
	/* the header list dies here: make sure curl no longer points at it */
	sym_curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
	return 0;
}

static void server_message(const struct response *r, char *out, size_t outlen)
{
	https_server_message(r->body, r->len, out, outlen);
}

/* What a transport failure means, in words an operator can act on. */
static void transport_message(struct https_provider *p, struct conn *c, const struct response *r,
			      const char *what, char *out, size_t outlen)
{
	const char *hint = "";

	switch (r->cc) {
	case CURLE_PEER_FAILED_VERIFICATION:
		hint = p->ca_file ? " (is ca_file the CA that signed the server's certificate?)"
				  : " (set providers.https.ca_file to the control plane's CA)";
		break;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
		/* TLS 1.3 learns of a refused client certificate only at the first
		 * read or write: an alert, or a socket the server already closed */
		if (!strstr(c->errbuf, "alert") && !strstr(c->errbuf, "getpeername") &&
		    !strstr(c->errbuf, "reset by peer") && !strstr(c->errbuf, "Broken pipe"))
			break;
		if (!p->cert_file)
			hint = " (the server may want a client certificate: set providers.https.cert_file)";
		else
			hint = " (the server refused the TLS handshake: is cert_file signed by a CA it trusts?)";
		break;
	case CURLE_SSL_CERTPROBLEM:
		hint = " (check cert_file and key_file)";
		break;
	case CURLE_SSL_CACERT_BADFILE:
		hint = " (check ca_file)";
		break;
	default:
		break;
	}
	snprintf(out, outlen, "%s: %s (curl error %d)%s", what, c->errbuf[0] ? c->errbuf : sym_curl_easy_strerror(r->cc),
		 (int)r->cc, hint);
}

/* Failures that read the same to an operator share a class, so a flapping
 * errno (send vs receive error on a closed socket) is not a new log line. */
static const char *curl_class(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return "resolve";
	case CURLE_COULDNT_CONNECT:
		return "connect";
	case CURLE_OPERATION_TIMEDOUT:
		return "timeout";
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
		return "tls verify";
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return "connection";
	default:
		return sym_curl_easy_strerror(cc);
	}
}


/* Classifies RESP after REQUEST's return R; on a failure logs (once per
 * change) and sleeps.  2xx: OUT_OK, the caller checks the body. */
enum outcome https_classify(struct https_provider *p, struct conn *c, int r, const struct response *resp,
			     const char *what, const char *why)
{
	char msg[512], cls[64];

	if (https_stopping(p) || resp->aborted)
		return OUT_STOPPED;
	if (r < 0) {
		snprintf(cls, sizeof(cls), "local %d", r);
		https_fail_and_wait(p, c, cls, true, -1, "%s: %s", what, why);
		return https_stopping(p) ? OUT_STOPPED : OUT_REFUSED;
	}
	if (resp->cc != CURLE_OK) {
		if (resp->too_large)
			snprintf(msg, sizeof(msg), "%s: answer larger than %u bytes: not the protocol", what, BODY_LIMIT);
		else
			transport_message(p, c, resp, what, msg, sizeof(msg));
		snprintf(cls, sizeof(cls), "curl %s", resp->too_large ? "too large" : curl_class(resp->cc));
		https_fail_and_wait(p, c, cls, false, -1, "%s", msg);
		return https_stopping(p) ? OUT_STOPPED : OUT_RETRY;
	}
	if (resp->code >= 200 && resp->code < 300)
		return OUT_OK;
	snprintf(cls, sizeof(cls), "http %ld", resp->code);
	if (resp->code >= 300 && resp->code < 400) {
		/* never followed: a redirect could lead the token and the reports to
		 * another host; the operator points providers.https.url elsewhere */
		char where[300];
		snprintf(where, sizeof(where), "%s", resp->location ? resp->location : "(no Location header)");
		for (char *q = where; *q; q++)
			if ((unsigned char)*q < ' ' || (unsigned char)*q >= 0x7f)
				*q = '?';
		if (!streq(c->fail_class, cls))
			log_err(p->log, "https %s: %s: redirect to %s refused (HTTP %ld): memgrantd follows no "
				"redirect; set providers.https.url to the control plane itself; retrying every %u s",
				c->name, what, where, resp->code, p->backoff_cap_ms / 1000);
		snprintf(c->fail_class, sizeof(c->fail_class), "%s", cls);
		https_fail_and_wait(p, c, cls, true, resp->retry_after_s, "%s: redirect to %s refused (HTTP %ld)",
				    what, where, resp->code);
		return https_stopping(p) ? OUT_STOPPED : OUT_REFUSED;
	}
	server_message(resp, msg, sizeof(msg));
	if (resp->code == 408 || resp->code == 429 || resp->code >= 500) {
		https_fail_and_wait(p, c, cls, false, resp->retry_after_s, "%s: HTTP %ld: %s", what, resp->code, msg);
		return https_stopping(p) ? OUT_STOPPED : OUT_RETRY;
	}
	/* 401, 403, 404, 400...: retrying soon will not help; the cap keeps the
	 * agent from hammering a server that refuses it */
	if (!streq(c->fail_class, cls)) {
		log_err(p->log, "https %s: %s refused by the control plane: HTTP %ld: %s%s; retrying every %u s",
			c->name, what, resp->code, msg,
			resp->code == 401 ? " (is the token in token_file valid and not expired?)" : "",
			p->backoff_cap_ms / 1000);
		snprintf(c->fail_class, sizeof(c->fail_class), "%s", cls); /* logged: once is enough */
	}
	https_fail_and_wait(p, c, cls, true, resp->retry_after_s, "%s: HTTP %ld: %s", what, resp->code, msg);
	return https_stopping(p) ? OUT_STOPPED : OUT_REFUSED;
}

/* OUT_OK only for a 2xx whose body acknowledges (see https_ack_body_ok()). */
enum outcome https_classify_ack(struct https_provider *p, struct conn *c, int r, const struct response *resp,
				 const char *what, const char *why)
{
	enum outcome o = https_classify(p, c, r, resp, what, why);

	if (o == OUT_OK && !https_ack_body_ok(resp->body, resp->len)) {
		https_fail_and_wait(p, c, "not the protocol", false, -1,
			      "%s: HTTP %ld with a body that is not a JSON object: not taken as delivered", what,
			      resp->code);
		return https_stopping(p) ? OUT_STOPPED : OUT_RETRY;
	}
	return o;
}
