/* SPDX-License-Identifier: MIT */
/*
 * The HTTPS provider (see https.h for the contract, docs/https.md for the
 * protocol as a control-plane team sees it).
 *
 * Two threads, each with one curl multi handle holding one easy handle that
 * is reused for every request, so each keeps one connection alive (HTTP/2
 * when the server offers it over ALPN, HTTP/1.1 keep-alive otherwise):
 *   poller  GET {url}/v1/agents/{agent}/grants?after=G&wait=S, forever;
 *   sender  PUT {url}/v1/agents/{agent} (inventory) when the layout changed,
 *           then POST {url}/v1/agents/{agent}/status for each outbox report.
 * A multi handle rather than curl_easy_perform() because curl_multi_wakeup()
 * lets https_provider_stop() abort a long poll at once, with no periodic
 * progress callback waking the thread while the server holds the poll.
 */
#include "https.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../agent/engine.h"
#include "../agent/log.h"
#include "../config/config.h"
#include "../lib/timeutil.h"
#include "../lib/util.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

#define SOURCE "https"
#define BODY_LIMIT (16u << 20)          /* a larger answer is not the protocol */
#define CONNECT_TIMEOUT_MS 10000L
#define REQUEST_TIMEOUT_MS 30000L       /* POST, PUT; the long poll gets wait + this */
#define BACKOFF_FIRST_MS 500u
#define BACKOFF_CAP_MAX_MS 60000u
#define RETRY_AFTER_MAX_S 600L          /* a larger Retry-After is clamped */
#define EMPTY_POLL_MIN_MS 1000u         /* a server that ignores wait= is not polled faster */
#define TOKEN_MAX 8192

#define _cleanup_json_ _cleanup_(json_decrefp) /* json_decrefp: jansson's own */

/* One thread's connection: a multi handle with its one easy handle. */
struct conn {
	const char *name;               /* "poll", "send": for the log */
	CURLM *multi;
	CURL *easy;
	char errbuf[CURL_ERROR_SIZE];
	/* bearer token cache: re-read when the file changes */
	char *token;
	struct timespec token_mtime;
	ino_t token_ino;
	off_t token_size;
	bool token_loaded;
	int token_err;                  /* last error logged for the token file, 0 none */
	/* backoff and the once-per-change log */
	unsigned backoff_ms;
	unsigned failures;
	char fail_class[64];            /* "" while things work */
	unsigned seed;
};

struct https_provider {
	char *base;                     /* url without trailing '/' */
	char *agent;                    /* URL-escaped agent id */
	char *agent_id;
	char *ca_file, *cert_file, *key_file, *token_file;
	long wait_s;
	bool insecure;
	unsigned backoff_cap_ms;
	struct engine *d;
	struct engine_source *source; /* SOURCE, reports to its outbox */
	const struct mg_log *log;

	pthread_mutex_t lock;           /* guards what follows and the cond */
	pthread_cond_t cond;            /* backoff sleeps */
	atomic_bool stop;
	uint64_t inventory_fp;          /* fingerprint of the layout last PUT, 0 none */
	bool inventory_dirty;

	struct conn poll, send;
	pthread_t poll_thread, send_thread;
	bool poll_started, send_started;
	bool curl_initialised;
};

/* An HTTP answer. */
struct response {
	CURLcode cc;                    /* CURLE_OK: RESPONSE holds an HTTP answer */
	long code;
	char *body;
	size_t len;
	bool too_large;
	long retry_after_s;             /* -1: none */
	bool aborted;                   /* stopped by https_provider_stop() */
};

static void response_done(struct response *r)
{
	free(r->body);
	*r = (struct response){ 0 };
}

static bool stopping(struct https_provider *p)
{
	return atomic_load(&p->stop);
}

/* Sleeps MS or until stop; true when stopping. */
static bool sleep_ms(struct https_provider *p, unsigned ms)
{
	struct timespec t;
	bool s;

	deadline_after_ms(&t, (long)ms);
	pthread_mutex_lock(&p->lock);
	while (!(s = stopping(p)))
		if (pthread_cond_timedwait(&p->cond, &p->lock, &t) == ETIMEDOUT)
			break;
	s = stopping(p);
	pthread_mutex_unlock(&p->lock);
	return s;
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* --- failure bookkeeping: backoff with jitter, a log line per change ------- */

/* Records a failure of class CLASS (logged in full the first time it differs
 * from the previous one) and sleeps: exponential from BACKOFF_FIRST_MS to the
 * cap, the wait drawn in [d/2, d] so agents that lost the same server do not
 * come back in step.  AT_CAP: jump straight to the cap (answers that
 * retrying soon will not change).  RETRY_AFTER_S (>= 0) is a floor.
 * True when stopping. */
static bool fail_and_wait(struct https_provider *p, struct conn *c, const char *class, bool at_cap,
			  long retry_after_s, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static bool fail_and_wait(struct https_provider *p, struct conn *c, const char *class, bool at_cap,
			  long retry_after_s, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	unsigned d, wait;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (at_cap || c->backoff_ms == 0)
		c->backoff_ms = at_cap ? p->backoff_cap_ms : BACKOFF_FIRST_MS;
	else
		c->backoff_ms = c->backoff_ms >= p->backoff_cap_ms / 2 ? p->backoff_cap_ms : c->backoff_ms * 2;
	d = c->backoff_ms;
	wait = d / 2 + (unsigned)(rand_r(&c->seed) % (d / 2 + 1));
	if (retry_after_s >= 0) {
		long ra = retry_after_s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : retry_after_s;
		if ((unsigned long)ra * 1000u > wait)
			wait = (unsigned)ra * 1000u;
	}
	c->failures++;
	if (!streq(c->fail_class, class)) {
		snprintf(c->fail_class, sizeof(c->fail_class), "%s", class);
		log_warn(p->log, "https %s: %s; retrying with backoff (next in %u ms)", c->name, msg, wait);
	} else {
		log_debug(p->log, "https %s: attempt %u failed: %s; next in %u ms", c->name, c->failures, msg,
			  wait);
	}
	return sleep_ms(p, wait);
}

static void succeeded(struct https_provider *p, struct conn *c)
{
	if (c->fail_class[0])
		log_notice(p->log, "https %s: control plane %s answers again after %u failed attempts", c->name,
			   p->base, c->failures);
	c->fail_class[0] = '\0';
	c->failures = 0;
	c->backoff_ms = 0;
}

/* --- the bearer token ------------------------------------------------------ */

static void token_clear(struct conn *c)
{
	if (c->token) {
		explicit_bzero(c->token, strlen(c->token));
		free(c->token);
	}
	c->token = NULL;
	c->token_loaded = false;
}

/* Refreshes the token when the file changed.  0 (c->token set), or -errno
 * with WHY filled (never containing the token). */
static int token_refresh(struct https_provider *p, struct conn *c, char *why, size_t whylen)
{
	struct stat st;
	_cleanup_fclose_ FILE *f = NULL;
	char *buf;
	size_t n;

	if (stat(p->token_file, &st) < 0) {
		int e = errno;
		snprintf(why, whylen, "token_file %s: %s", p->token_file, strerror(e));
		token_clear(c);
		return -e;
	}
	if (c->token_loaded && st.st_ino == c->token_ino && st.st_size == c->token_size &&
	    st.st_mtim.tv_sec == c->token_mtime.tv_sec && st.st_mtim.tv_nsec == c->token_mtime.tv_nsec)
		return 0;
	token_clear(c);
	if (st.st_size > TOKEN_MAX) {
		snprintf(why, whylen, "token_file %s: %lld bytes, a token is at most %d", p->token_file,
			 (long long)st.st_size, TOKEN_MAX);
		return -EFBIG;
	}
	f = fopen(p->token_file, "re");
	if (!f) {
		int e = errno;
		snprintf(why, whylen, "token_file %s: %s", p->token_file, strerror(e));
		return -e;
	}
	buf = calloc(1, TOKEN_MAX + 1);
	if (!buf)
		return -ENOMEM;
	n = fread(buf, 1, TOKEN_MAX, f);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++) {
		/* RFC 6750 b64token characters; anything else would break the header */
		unsigned char ch = (unsigned char)buf[i];
		if (ch <= ' ' || ch >= 0x7f) {
			explicit_bzero(buf, TOKEN_MAX);
			free(buf);
			snprintf(why, whylen, "token_file %s: byte %zu is not a token character (the token is not shown)",
				 p->token_file, i + 1);
			return -EINVAL;
		}
	}
	if (n == 0) {
		free(buf);
		snprintf(why, whylen, "token_file %s is empty", p->token_file);
		return -ENODATA;
	}
	c->token = buf;
	c->token_ino = st.st_ino;
	c->token_size = st.st_size;
	c->token_mtime = st.st_mtim;
	c->token_loaded = true;
	log_info(p->log, "https %s: bearer token read from %s (%zu characters)", c->name, p->token_file, n);
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
	n = curl_slist_append(l, line);
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
		curl_slist_free_all(*l);
	}
}

/* Sets the options every request shares on C's (reset) easy handle. */
static void set_common(struct https_provider *p, struct conn *c, struct response *resp, long timeout_ms)
{
	CURL *e = c->easy;

	curl_easy_reset(e); /* keeps the connection, the TLS session and DNS caches */
	c->errbuf[0] = '\0';
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, p->insecure ? "http,https" : "https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (p->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, p->ca_file);
	if (p->cert_file) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, p->cert_file);
		curl_easy_setopt(e, CURLOPT_SSLKEY, p->key_file ? p->key_file : p->cert_file);
	}
	curl_easy_setopt(e, CURLOPT_USERAGENT, "memgrantd/" MEMGRANT_VERSION);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
}

/* Runs the transfer set up on C until it ends or the provider stops. */
static void perform(struct https_provider *p, struct conn *c, struct response *resp)
{
	CURLMcode mc;
	CURLMsg *m;
	int running = 1, left;

	resp->cc = CURLE_FAILED_INIT;
	if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
		return;
	for (;;) {
		mc = curl_multi_perform(c->multi, &running);
		if (mc != CURLM_OK || running == 0)
			break;
		if (stopping(p)) {
			resp->aborted = true;
			break;
		}
		/* sleeps until a socket is ready, curl's own timer, or curl_multi_wakeup() */
		mc = curl_multi_poll(c->multi, NULL, 0, 60000, NULL);
		if (mc != CURLM_OK)
			break;
	}
	while ((m = curl_multi_info_read(c->multi, &left)))
		if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy)
			resp->cc = m->data.result;
	curl_multi_remove_handle(c->multi, c->easy);
	if (resp->aborted)
		return;
	if (resp->cc == CURLE_OK) {
		curl_off_t ra = -1;
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &resp->code);
		resp->retry_after_s = -1;
		if (curl_easy_getinfo(c->easy, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
			resp->retry_after_s = (long)ra;
	}
}

/* Does METHOD URL with BODY (NULL: none) and IDEMPOTENCY_KEY (NULL: none).
 * 0 with RESP filled (a transport failure is RESP->cc != CURLE_OK), or -errno
 * for a local problem (out of memory, token file) described in WHY. */
static int request(struct https_provider *p, struct conn *c, const char *method, const char *url,
		   const char *body, const char *idempotency_key, long timeout_ms, struct response *resp,
		   char *why, size_t whylen)
{
	__attribute__((cleanup(slist_freep))) struct curl_slist *h = NULL;
	bool ok = true;
	int r;

	*resp = (struct response){ .retry_after_s = -1 };
	if (p->token_file) {
		r = token_refresh(p, c, why, whylen);
		if (r < 0)
			return r;
	}
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
	curl_easy_setopt(c->easy, CURLOPT_URL, url);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, h);
	if (body) {
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body);
		if (!streq(method, "POST"))
			curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
	} else {
		curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	}
	perform(p, c, resp);
	/* the header list dies here: make sure curl no longer points at it */
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
	return 0;
}

/* The server's words for an error answer, one safe line: "message" of a
 * protocol error object, else the start of the body. */
static void server_message(const struct response *r, char *out, size_t outlen)
{
	_cleanup_json_ json_t *j = NULL;
	const char *text = NULL;
	size_t o = 0;

	out[0] = '\0';
	if (r->body && r->len)
		j = json_loadb(r->body, r->len, 0, NULL);
	if (j) {
		json_t *e = json_object_get(j, "error");
		json_t *m = json_object_get(json_is_object(e) ? e : j, "message");
		if (json_is_string(m))
			text = json_string_value(m);
	}
	if (!text)
		text = r->body ? r->body : "";
	for (size_t i = 0; text[i] && o + 2 < outlen && i < 200; i++) {
		unsigned char ch = (unsigned char)text[i];
		out[o++] = ch >= ' ' && ch < 0x7f ? (char)ch : ' ';
	}
	out[o] = '\0';
	if (!out[0])
		snprintf(out, outlen, "(no message)");
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
	snprintf(out, outlen, "%s: %s (curl error %d)%s", what, c->errbuf[0] ? c->errbuf : curl_easy_strerror(r->cc),
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
		return curl_easy_strerror(cc);
	}
}

enum outcome {
	OUT_OK,        /* 2xx */
	OUT_RETRY,     /* transport, 408, 429, 5xx, not the protocol: backoff */
	OUT_REFUSED,   /* other 4xx: logged, retried at the cap */
	OUT_STOPPED,
};

/* Classifies RESP after REQUEST's return R; on a failure logs (once per
 * change) and sleeps.  2xx: OUT_OK, the caller checks the body. */
static enum outcome classify(struct https_provider *p, struct conn *c, int r, const struct response *resp,
			     const char *what, const char *why)
{
	char msg[512], cls[64];

	if (stopping(p) || resp->aborted)
		return OUT_STOPPED;
	if (r < 0) {
		snprintf(cls, sizeof(cls), "local %d", r);
		fail_and_wait(p, c, cls, true, -1, "%s: %s", what, why);
		return stopping(p) ? OUT_STOPPED : OUT_REFUSED;
	}
	if (resp->cc != CURLE_OK) {
		if (resp->too_large)
			snprintf(msg, sizeof(msg), "%s: answer larger than %u bytes: not the protocol", what, BODY_LIMIT);
		else
			transport_message(p, c, resp, what, msg, sizeof(msg));
		snprintf(cls, sizeof(cls), "curl %s", resp->too_large ? "too large" : curl_class(resp->cc));
		fail_and_wait(p, c, cls, false, -1, "%s", msg);
		return stopping(p) ? OUT_STOPPED : OUT_RETRY;
	}
	if (resp->code >= 200 && resp->code < 300)
		return OUT_OK;
	server_message(resp, msg, sizeof(msg));
	snprintf(cls, sizeof(cls), "http %ld", resp->code);
	if (resp->code == 408 || resp->code == 429 || resp->code >= 500) {
		fail_and_wait(p, c, cls, false, resp->retry_after_s, "%s: HTTP %ld: %s", what, resp->code, msg);
		return stopping(p) ? OUT_STOPPED : OUT_RETRY;
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
	fail_and_wait(p, c, cls, true, resp->retry_after_s, "%s: HTTP %ld: %s", what, resp->code, msg);
	return stopping(p) ? OUT_STOPPED : OUT_REFUSED;
}

/* A 2xx to a status or an inventory counts when its body is empty or a JSON
 * object: a proxy or captive portal answering 200 with a page of HTML has
 * not stored the report, and acknowledging it would lose the report. */
static bool ack_body_ok(const struct response *r)
{
	_cleanup_json_ json_t *j = NULL;
	size_t i = 0;

	while (r->body && i < r->len && strchr(" \t\r\n", r->body[i]))
		i++;
	if (!r->body || i == r->len)
		return true;
	j = json_loadb(r->body, r->len, 0, NULL);
	return json_is_object(j);
}

/* OUT_OK only for a 2xx whose body acknowledges (see ack_body_ok). */
static enum outcome classify_ack(struct https_provider *p, struct conn *c, int r, const struct response *resp,
				 const char *what, const char *why)
{
	enum outcome o = classify(p, c, r, resp, what, why);

	if (o == OUT_OK && !ack_body_ok(resp)) {
		fail_and_wait(p, c, "not the protocol", false, -1,
			      "%s: HTTP %ld with a body that is not a JSON object: not taken as delivered", what,
			      resp->code);
		return stopping(p) ? OUT_STOPPED : OUT_RETRY;
	}
	return o;
}

/* --- inventory ----------------------------------------------------------------- */

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

/* The inventory body and the fingerprint of its layout part. */
static int inventory_build(struct https_provider *p, char **body, uint64_t *fp)
{
	_cleanup_json_ json_t *blocks = NULL;
	_cleanup_json_ json_t *inv = NULL;
	_cleanup_free_ char *layout = NULL;
	json_t *st;
	int r;

	r = engine_blocks_json(p->d, &blocks);
	if (r < 0)
		return r;
	layout = json_dumps(blocks, JSON_COMPACT | JSON_SORT_KEYS);
	if (!layout)
		return -ENOMEM;
	*fp = fnv1a(layout);
	st = engine_status_json(p->d);
	inv = json_pack("{s:s,s:s,s:s,s:i,s:O,s:O,s:O}", "type", "inventory", "agent", p->agent_id, "version",
			MEMGRANT_VERSION, "protocol", 1, "block_size",
			json_object_get(blocks, "block_size") ? json_object_get(blocks, "block_size")
							      : json_null(),
			"memory", st && json_object_get(st, "memory") ? json_object_get(st, "memory") : json_null(),
			"blocks", json_object_get(blocks, "blocks") ? json_object_get(blocks, "blocks")
								    : json_null());
	json_decref(st);
	if (!inv)
		return -ENOMEM;
	json_object_set_new(inv, "last_generation", json_integer((json_int_t)engine_last_generation(p->d, p->source)));
	*body = json_dumps(inv, JSON_COMPACT | JSON_SORT_KEYS);
	return *body ? 0 : -ENOMEM;
}

/* The current layout's fingerprint, 0 when it cannot be read. */
static uint64_t layout_fp(struct https_provider *p)
{
	_cleanup_json_ json_t *blocks = NULL;
	_cleanup_free_ char *layout = NULL;

	if (engine_blocks_json(p->d, &blocks) < 0)
		return 0;
	layout = json_dumps(blocks, JSON_COMPACT | JSON_SORT_KEYS);
	return layout ? fnv1a(layout) : 0;
}

/* True when the inventory must be sent (again). */
static bool inventory_due(struct https_provider *p)
{
	uint64_t fp = layout_fp(p);
	bool due;

	pthread_mutex_lock(&p->lock);
	if (fp && fp != p->inventory_fp)
		p->inventory_dirty = true;
	due = p->inventory_dirty;
	pthread_mutex_unlock(&p->lock);
	return due;
}

/* PUT the inventory; OUT_OK when the server took it. */
static enum outcome inventory_send(struct https_provider *p, struct conn *c)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_free_ char *url = NULL;
	struct response resp;
	char why[512] = "";
	uint64_t fp = 0;
	enum outcome o;
	int r;

	r = inventory_build(p, &body, &fp);
	if (r < 0) {
		log_err(p->log, "https send: cannot read the memory layout for the inventory: %s", strerror(-r));
		return sleep_ms(p, p->backoff_cap_ms) ? OUT_STOPPED : OUT_RETRY;
	}
	if (asprintf(&url, "%s/v1/agents/%s", p->base, p->agent) < 0)
		return OUT_RETRY;
	r = request(p, c, "PUT", url, body, NULL, REQUEST_TIMEOUT_MS, &resp, why, sizeof(why));
	o = classify_ack(p, c, r, &resp, "PUT inventory", why);
	if (o == OUT_OK) {
		succeeded(p, c);
		pthread_mutex_lock(&p->lock);
		p->inventory_fp = fp;
		p->inventory_dirty = false;
		pthread_mutex_unlock(&p->lock);
		log_info(p->log, "https send: inventory sent (HTTP %ld)", resp.code);
	}
	response_done(&resp);
	return o;
}

/* --- the sender: inventory and the outbox, strictly in order ------------------- */

static enum outcome report_send(struct https_provider *p, struct conn *c, uint64_t seq, json_t *report)
{
	_cleanup_free_ char *body = NULL;
	_cleanup_free_ char *url = NULL;
	char key[256], what[160], why[512] = "";
	const char *id = json_string_value(json_object_get(report, "id"));
	/* a status has a state; a pressure request or offer only a type */
	const char *state = json_string_value(json_object_get(report, "state"))
				    ?: json_string_value(json_object_get(report, "type"));
	json_int_t gen = json_integer_value(json_object_get(report, "generation"));
	struct response resp;
	enum outcome o;
	int r;

	id = id ? id : "-";
	state = state ? state : "-";
	/* the same report keeps its key across retries and restarts (seq is durable) */
	snprintf(key, sizeof(key), "%s:%lld:%s:%llu", id, (long long)gen, state, (unsigned long long)seq);
	snprintf(what, sizeof(what), "POST status %s %s (generation %lld)", id, state, (long long)gen);
	/* generation 0 when the message has none (request, offer) */
	body = json_dumps(report, JSON_COMPACT | JSON_SORT_KEYS);
	if (!body || asprintf(&url, "%s/v1/agents/%s/status", p->base, p->agent) < 0)
		return sleep_ms(p, BACKOFF_FIRST_MS) ? OUT_STOPPED : OUT_RETRY;
	r = request(p, c, "POST", url, body, key, REQUEST_TIMEOUT_MS, &resp, why, sizeof(why));
	o = classify_ack(p, c, r, &resp, what, why);
	if (o == OUT_OK) {
		succeeded(p, c);
		r = engine_outbox_ack(p->d, SOURCE, seq);
		if (r < 0)
			log_err(p->log, "https send: %s delivered but cannot be removed from the outbox: %s", key,
				strerror(-r));
		else
			log_debug(p->log, "https send: %s delivered (HTTP %ld)", key, resp.code);
	}
	response_done(&resp);
	return o;
}

static void *sender_main(void *arg)
{
	struct https_provider *p = arg;
	struct conn *c = &p->send;

	bool inventory_refused = false;

	while (!stopping(p)) {
		json_t *report = NULL;
		uint64_t seq = 0;
		enum outcome o;
		int r;

		/* the inventory goes first: the reports that follow refer to that
		 * layout.  A server that refuses the inventory (4xx) still gets the
		 * reports, one between two attempts at the inventory. */
		if (!inventory_refused && inventory_due(p)) {
			o = inventory_send(p, c);
			if (o == OUT_STOPPED)
				break;
			if (o == OUT_RETRY)
				continue; /* backed off already */
			inventory_refused = o == OUT_REFUSED;
		}
		r = engine_outbox_peek(p->d, SOURCE, &seq, &report);
		if (r == -ENOENT && inventory_refused) {
			inventory_refused = false; /* nothing else to send: back to the inventory */
			continue;
		}
		if (r == -ENOENT) {
			/* sleeps until a report is queued or the provider is woken */
			engine_outbox_wait(p->d, SOURCE, -1);
			continue;
		}
		if (r < 0) {
			log_err(p->log, "https send: cannot read the outbox: %s", strerror(-r));
			if (sleep_ms(p, p->backoff_cap_ms))
				break;
			continue;
		}
		o = report_send(p, c, seq, report);
		json_decref(report);
		inventory_refused = false;
		if (o == OUT_STOPPED)
			break;
	}
	return NULL;
}

/* --- the poller: long poll for grants ---------------------------------------- */

/* Hands each grant of BODY to the engine.  0, or -EBADMSG with WHY when the
 * body is not {"grants": [...]}.  *NEW_AFTER: the highest generation seen. */
static int take_grants(struct https_provider *p, const struct response *resp, uint64_t *new_after,
		       size_t *n_taken, char *why, size_t whylen)
{
	_cleanup_json_ json_t *j = NULL;
	json_error_t jerr;
	json_t *grants, *g;
	size_t i;

	*n_taken = 0;
	j = json_loadb(resp->body ? resp->body : "", resp->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		snprintf(why, whylen, "answer is not JSON (%s at line %d, column %d)", jerr.text, jerr.line,
			 jerr.column);
		return -EBADMSG;
	}
	grants = json_object_get(j, "grants");
	if (!json_is_object(j) || !json_is_array(grants)) {
		snprintf(why, whylen, "answer is not {\"grants\": [...]}");
		return -EBADMSG;
	}
	json_array_foreach(grants, i, g) {
		struct engine_verdict v;
		struct msg_error err = { 0 };
		struct msg *m = NULL;
		json_t *gen = json_object_get(g, "generation");
		const char *id = json_string_value(json_object_get(g, "id"));

		if (stopping(p))
			break;
		if (json_is_integer(gen) && json_integer_value(gen) > 0 &&
		    (uint64_t)json_integer_value(gen) > *new_after)
			*new_after = (uint64_t)json_integer_value(gen);
		(*n_taken)++;
		if (msg_from_json(g, &m, &err) < 0) {
			/* malformed: nothing is recorded, the generation is skipped
			 * (400 in the log: what the local API would answer) */
			log_warn(p->log, "https poll: grants[%zu] (%s) not applied (400): %s", i, id ? id : "no id",
				 err.message);
			continue;
		}
		if (engine_submit(p->d, p->source, m, &v) < 0) {
			(*n_taken)--;
			continue;
		}
		if (v.kind != ENGINE_REJECTED) {
			log_debug(p->log, "https poll: %s handed to the agent (%s)", id ? id : "?",
				  v.kind == ENGINE_ACCEPTED ? "accepted" : "replay");
		} else if (v.err == -ESHUTDOWN) {
			engine_verdict_done(&v);
			break; /* the agent is stopping */
		} else {
			/* rejected by the planner: a status report is queued; stale: nothing
			 * is recorded, the generation is skipped */
			log_warn(p->log, "https poll: grants[%zu] (%s) not applied (%s): %s", i, id ? id : "no id",
				 v.error.code, v.error.message);
		}
		engine_verdict_done(&v);
	}
	return 0;
}

static void *poller_main(void *arg)
{
	struct https_provider *p = arg;
	struct conn *c = &p->poll;
	uint64_t skip_after = 0; /* generations seen but not recorded (malformed ones) */
	bool quick_logged = false;

	while (!stopping(p)) {
		_cleanup_free_ char *url = NULL;
		struct response resp;
		char why[512] = "";
		uint64_t after = engine_last_generation(p->d, p->source), t0;
		size_t taken = 0;
		enum outcome o;
		int r;

		if (skip_after > after)
			after = skip_after;
		if (asprintf(&url, "%s/v1/agents/%s/grants?after=%llu&wait=%ld", p->base, p->agent,
			     (unsigned long long)after, p->wait_s) < 0) {
			if (sleep_ms(p, BACKOFF_FIRST_MS))
				break;
			continue;
		}
		t0 = now_ms();
		r = request(p, c, "GET", url, NULL, NULL, p->wait_s * 1000L + REQUEST_TIMEOUT_MS, &resp, why,
			    sizeof(why));
		o = classify(p, c, r, &resp, "GET grants", why);
		if (o == OUT_OK && resp.code == 200) {
			uint64_t seen = after;
			r = take_grants(p, &resp, &seen, &taken, why, sizeof(why));
			if (r < 0) {
				fail_and_wait(p, c, "not the protocol", false, -1, "GET grants: %s", why);
				o = OUT_RETRY;
			} else {
				succeeded(p, c);
				if (seen > engine_last_generation(p->d, p->source))
					skip_after = seen;
			}
		} else if (o == OUT_OK) {
			succeeded(p, c); /* 204: nothing within wait seconds */
		}
		response_done(&resp);
		if (o == OUT_STOPPED)
			break;
		if (o != OUT_OK)
			continue;
		/* the memory layout may have changed behind the agent's back: check
		 * once per poll, which the server paces */
		if (inventory_due(p))
			engine_outbox_wake(p->d);
		if (taken == 0 && now_ms() - t0 < EMPTY_POLL_MIN_MS) {
			/* a server answering at once with nothing would make this a busy loop */
			if (!quick_logged)
				log_warn(p->log, "https poll: the control plane answered the long poll at once with no grant "
					 "(does it honour wait=%ld?); polling at most once a second", p->wait_s);
			quick_logged = true;
			if (sleep_ms(p, EMPTY_POLL_MIN_MS))
				break;
		}
	}
	return NULL;
}

/* --- start / stop ---------------------------------------------------------------- */

static int conn_init(struct conn *c, const char *name)
{
	unsigned seed = 0;

	c->name = name;
	c->multi = curl_multi_init();
	c->easy = curl_easy_init();
	if (!c->multi || !c->easy)
		return -ENOMEM;
	/* one connection per thread, kept alive between requests */
	curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 1L);
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = (unsigned)now_ms() ^ (unsigned)getpid();
	c->seed = seed;
	return 0;
}

static void conn_done(struct conn *c)
{
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	token_clear(c);
	c->easy = NULL;
	c->multi = NULL;
}

static void provider_free(struct https_provider *p)
{
	if (!p)
		return;
	conn_done(&p->poll);
	conn_done(&p->send);
	if (p->curl_initialised)
		curl_global_cleanup();
	free(p->base);
	free(p->agent);
	free(p->agent_id);
	free(p->ca_file);
	free(p->cert_file);
	free(p->key_file);
	free(p->token_file);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static void check_file(struct https_provider *p, const char *key, const char *path)
{
	if (path && access(path, R_OK) < 0)
		log_err(p->log, "providers.https.%s %s: %s (requests will fail until it is readable)", key, path,
			strerror(errno));
}

int https_provider_start(const struct mg_https_config *cfg, const char *agent_id, struct engine *d,
			 const struct mg_log *log, struct https_provider **out)
{
	struct https_provider *p;
	pthread_condattr_t ca;
	size_t n;
	char *esc;
	int r;

	*out = NULL;
	if (!cfg || !cfg->url || !agent_id || !*agent_id)
		return -EINVAL;
	if (strncasecmp(cfg->url, "https://", 8) != 0 &&
	    !(cfg->insecure_http && strncasecmp(cfg->url, "http://", 7) == 0)) {
		log_err(log, "providers.https.url %s: must start with https:// (http:// only with insecure_http: true)",
			cfg->url);
		return -EINVAL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	p->d = d;
	p->log = log;
	p->insecure = strncasecmp(cfg->url, "http://", 7) == 0;
	p->wait_s = (long)(cfg->wait_ms / 1000);
	if (p->wait_s < 1)
		p->wait_s = 1;
	/* never wait longer between attempts than the long poll would hold the
	 * connection anyway, nor longer than a minute */
	p->backoff_cap_ms = p->wait_s * 1000 < BACKOFF_CAP_MAX_MS ? (unsigned)p->wait_s * 1000 : BACKOFF_CAP_MAX_MS;
	if (p->backoff_cap_ms < 2 * BACKOFF_FIRST_MS)
		p->backoff_cap_ms = 2 * BACKOFF_FIRST_MS;
	p->inventory_dirty = true;
	r = engine_source_add(d, SOURCE, ENGINE_SOURCE_REPORTS, &p->source);
	if (r < 0)
		goto fail;

	r = -ENOMEM;
	p->base = strdup(cfg->url);
	p->agent_id = strdup(agent_id);
	if (!p->base || !p->agent_id || dup_opt(cfg->ca_file, &p->ca_file) < 0 ||
	    dup_opt(cfg->cert_file, &p->cert_file) < 0 || dup_opt(cfg->key_file, &p->key_file) < 0 ||
	    dup_opt(cfg->token_file, &p->token_file) < 0)
		goto fail;
	n = strlen(p->base);
	while (n > 0 && p->base[n - 1] == '/')
		p->base[--n] = '\0';

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		r = -EIO;
		goto fail;
	}
	p->curl_initialised = true;
	esc = curl_easy_escape(NULL, agent_id, 0);
	if (!esc)
		goto fail;
	p->agent = strdup(esc);
	curl_free(esc);
	if (!p->agent)
		goto fail;
	r = conn_init(&p->poll, "poll");
	if (r < 0)
		goto fail;
	r = conn_init(&p->send, "send");
	if (r < 0)
		goto fail;

	if (p->insecure)
		log_warn(log, "providers.https: INSECURE: %s is plain http (insecure_http: true): grants, reports and "
			 "the bearer token travel unencrypted and the server is not authenticated", p->base);
	check_file(p, "ca_file", p->ca_file);
	check_file(p, "cert_file", p->cert_file);
	check_file(p, "key_file", p->key_file);
	check_file(p, "token_file", p->token_file);

	r = -pthread_create(&p->send_thread, NULL, sender_main, p);
	if (r < 0)
		goto fail;
	p->send_started = true;
	r = -pthread_create(&p->poll_thread, NULL, poller_main, p);
	if (r < 0) {
		https_provider_stop(p);
		return r;
	}
	p->poll_started = true;
	log_notice(log, "https: polling %s as agent %s (wait %lds, after generation %llu)%s%s%s", p->base, agent_id,
		   p->wait_s, (unsigned long long)engine_last_generation(d, p->source), p->ca_file ? ", CA " : "",
		   p->ca_file ? p->ca_file : "", p->cert_file ? ", client certificate" : "");
	*out = p;
	return 0;

fail:
	provider_free(p);
	return r;
}

/* Joins T, waking the sender out of engine_outbox_wait() until it is gone:
 * a single wake could land before it started waiting. */
static void join_waking(struct https_provider *p, pthread_t t)
{
	for (;;) {
		struct timespec ts;

		engine_outbox_wake(p->d);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(t, NULL, &ts) != ETIMEDOUT)
			return;
	}
}

void https_provider_stop(struct https_provider *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	curl_multi_wakeup(p->poll.multi);
	curl_multi_wakeup(p->send.multi);
	if (p->poll_started)
		join_waking(p, p->poll_thread);
	if (p->send_started)
		join_waking(p, p->send_thread);
	provider_free(p);
}
