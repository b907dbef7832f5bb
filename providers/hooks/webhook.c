/* SPDX-License-Identifier: MIT */
/*
 * Webhook delivery from the durable outbox.  One thread per webhook: wait
 * for an event in the outbox, POST it, acknowledge on 2xx, otherwise sleep
 * the backoff (interruptible by webhook_stop()) and try the same event again.
 */
#include "providers/hooks/webhook.h"

#include "lib/curl_dl.h"
#include <jansson.h>
#include <pthread.h>
#include <time.h>

#include "lib/credstore.h"
#include "lib/crypto_dl.h"
#include "lib/fileio.h"
#include "lib/util.h"
#include "agent/engine/engine.h"
#include "providers/views/views_json.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

struct webhook {
	struct mg_log log;
	struct engine *daemon;
	char *url;
	bool insecure_http;
	uint64_t timeout_ms;
	unsigned char *secret;   /* NULL: unsigned */
	size_t secret_len;
	char dest[WEBHOOK_DEST_MAX];

	pthread_mutex_t lock;
	pthread_cond_t cond;     /* backoff sleep; webhook_stop() signals it */
	bool stopping;
	bool started, exited;
	pthread_t thread;
};

static void hex(const unsigned char *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

int webhook_dest_for(const char *url, char *out, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char h[2 * EVP_MAX_MD_SIZE + 1];

	if (crypto_dl_load(NULL, 0) < 0) /* webhook_new() says why */
		return -ELIBACC;
	if (!sym_EVP_Digest(url, strlen(url), md, &mdlen, sym_EVP_sha256(), NULL))
		return -EIO;
	hex(md, 8, h);
	if ((size_t)snprintf(out, len, "webhook:%s", h) >= len)
		return -ENOBUFS;
	return 0;
}

int webhook_sign(const void *key, size_t key_len, const void *body, size_t body_len, char *out,
		 size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (len < 7 + 64 + 1)
		return -ENOBUFS;
	if (crypto_dl_load(NULL, 0) < 0)
		return -ELIBACC;
	if (!sym_HMAC(sym_EVP_sha256(), key, (int)key_len, body, body_len, md, &mdlen) || mdlen != 32)
		return -EIO;
	memcpy(out, "sha256=", 7);
	hex(md, mdlen, out + 7);
	return 0;
}

const char *webhook_dest(const struct webhook *w)
{
	return w->dest;
}

int webhook_new(const struct webhook_params *p, struct engine *d, const struct mg_log *log,
		struct webhook **out)
{
	struct webhook *w;
	pthread_condattr_t ca;
	int r;

	char why[300];

	if (!p->url)
		return -EINVAL;
	r = curl_dl_load(why, sizeof(why));
	if (r == 0)
		r = crypto_dl_load(why, sizeof(why)); /* its name and signature */
	if (r < 0) {
		log_err(log, "webhook: %s (install it to use webhooks)", why);
		return r;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->log = *log;
	w->daemon = d;
	w->insecure_http = p->insecure_http;
	w->timeout_ms = p->timeout_ms ? p->timeout_ms : 10000;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	w->url = strdup(p->url);
	if (!w->url) {
		r = -ENOMEM;
		goto fail;
	}
	r = webhook_dest_for(p->url, w->dest, sizeof(w->dest));
	if (r == 0 && d)
		r = engine_outbox_register(d, w->dest); /* counted with the other outboxes */
	if (r < 0)
		goto fail;
	if (p->secret_file) {
		char *buf = NULL;
		size_t n = 0;

		/* a root-only secret comes through the helper (credstore.h) */
		r = cred_read(p->creds, p->secret_file, WEBHOOK_SECRET_MAX, &buf, &n);
		if (r < 0) {
			log_err(log, "webhook %s: cannot read the secret %s: %s%s", p->url, p->secret_file,
				strerror(-r), r == -EACCES ? " (see Credentials in docs/security.md)" : "");
			goto fail;
		}
		/* `echo key > file` is the common way to write one */
		if (n > 0 && buf[n - 1] == '\n')
			n--;
		if (n == 0) {
			cred_free(buf, 1);
			log_err(log, "webhook %s: the secret %s is empty", p->url, p->secret_file);
			r = -EINVAL;
			goto fail;
		}
		w->secret = (unsigned char *)buf;
		w->secret_len = n;
	}
	*out = w;
	return 0;
fail:
	webhook_free(w);
	return r;
}

static size_t discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
	(void)ptr;
	(void)ud;
	return size * nmemb;
}

static int progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct webhook *w = ud;
	bool stop;

	(void)dt, (void)dn, (void)ut, (void)un;
	pthread_mutex_lock(&w->lock);
	stop = w->stopping;
	pthread_mutex_unlock(&w->lock);
	return stop; /* non-zero aborts the transfer */
}

/* One attempt: 0 delivered (2xx), -EAGAIN try again later; WHY says what went wrong. */
static int post(struct webhook *w, json_t *ev, char *why, size_t whylen)
{
	_cleanup_free_ char *body = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
	const char *id = json_string_value(json_object_get(ev, "event_id"));
	const char *name = json_string_value(json_object_get(ev, "event"));
	struct curl_slist *hdr = NULL, *nh;
	char line[160], sig[80];
	CURL *c;
	CURLcode cr;
	long code = 0;
	int r = -EAGAIN;
	bool ok = true;

	if (!body) {
		snprintf(why, whylen, "out of memory");
		return -EAGAIN;
	}
	c = sym_curl_easy_init();
	if (!c) {
		snprintf(why, whylen, "cannot create a curl handle");
		return -EAGAIN;
	}
#define ADD_HEADER(...)                                                  \
	do {                                                             \
		snprintf(line, sizeof(line), __VA_ARGS__);               \
		nh = sym_curl_slist_append(hdr, line);                       \
		if (nh)                                                  \
			hdr = nh;                                        \
		else                                                     \
			ok = false;                                      \
	} while (0)
	ADD_HEADER("Content-Type: application/json");
	ADD_HEADER("X-Memgrant-Event: %s", name ? name : "");
	ADD_HEADER("X-Memgrant-Delivery: %s", id ? id : "");
	ADD_HEADER("Idempotency-Key: %s", id ? id : "");
	if (w->secret) {
		if (webhook_sign(w->secret, w->secret_len, body, strlen(body), sig, sizeof(sig)) < 0)
			ok = false;
		else
			ADD_HEADER("X-Memgrant-Signature: %s", sig);
	}
	ADD_HEADER("Expect:"); /* no 100-continue round trip for a small body */
#undef ADD_HEADER
	if (!ok) {
		snprintf(why, whylen, "cannot build the request");
		goto out;
	}
	sym_curl_easy_setopt(c, CURLOPT_URL, w->url);
	sym_curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, w->insecure_http ? "http,https" : "https");
	sym_curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	sym_curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	sym_curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	sym_curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	sym_curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	sym_curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
	sym_curl_easy_setopt(c, CURLOPT_USERAGENT, "memgrant/" MEMGRANT_VERSION);
	sym_curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	sym_curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	sym_curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress);
	sym_curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
	cr = sym_curl_easy_perform(c);
	if (cr != CURLE_OK) {
		snprintf(why, whylen, "%s", sym_curl_easy_strerror(cr));
		goto out;
	}
	sym_curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300)
		r = 0;
	else
		snprintf(why, whylen, "HTTP status %ld", code);
out:
	sym_curl_slist_free_all(hdr);
	sym_curl_easy_cleanup(c);
	return r;
}

/* Sleeps MS unless webhook_stop() comes first; true when stopping. */
static bool sleep_or_stop(struct webhook *w, uint64_t ms)
{
	struct timespec dl;
	bool stop;

	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += (time_t)(ms / 1000);
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->stopping && pthread_cond_timedwait(&w->cond, &w->lock, &dl) != ETIMEDOUT) {
	}
	stop = w->stopping;
	pthread_mutex_unlock(&w->lock);
	return stop;
}

static bool stopping(struct webhook *w)
{
	bool s;

	pthread_mutex_lock(&w->lock);
	s = w->stopping;
	pthread_mutex_unlock(&w->lock);
	return s;
}

static void *webhook_main(void *arg)
{
	struct webhook *w = arg;
	uint64_t backoff = 0;
	unsigned failures = 0;

	while (!stopping(w)) {
		json_t *ev = NULL;
		uint64_t seq = 0;
		char why[256] = "";
		int r;

		if (engine_outbox_wait(w->daemon, w->dest, -1) <= 0)
			continue; /* woken: look at the stop flag */
		if (views_outbox_peek(w->daemon, w->dest, &seq, &ev) < 0)
			continue;
		r = post(w, ev, why, sizeof(why));
		if (r == 0) {
			uint64_t wait_ms = 0;

			/* delivered: a journal that cannot record its removal (disk full)
			 * is waited out, not answered by delivering it again and again */
			while ((r = engine_outbox_ack(w->daemon, w->dest, seq)) < 0 && r != -ENOENT) {
				if (!wait_ms)
					log_err(&w->log, "webhook %s: delivered event %s but cannot remove it from the "
						"outbox: %s; trying again", w->url,
						json_string_value(json_object_get(ev, "event_id")) ?: "?", strerror(-r));
				wait_ms = wait_ms ? wait_ms * 2 : WEBHOOK_BACKOFF_MIN_MS;
				if (wait_ms > WEBHOOK_ACK_RETRY_MAX_MS)
					wait_ms = WEBHOOK_ACK_RETRY_MAX_MS;
				if (sleep_or_stop(w, wait_ms))
					break;
			}
			if (r == 0)
				log_debug(&w->log, "webhook %s: delivered %s %s", w->url,
					  json_string_value(json_object_get(ev, "event")) ?: "?",
					  json_string_value(json_object_get(ev, "event_id")) ?: "?");
			if (failures)
				log_notice(&w->log, "webhook %s: delivering again after %u failed attempts", w->url,
					   failures);
			backoff = 0;
			failures = 0;
		} else if (!stopping(w)) {
			backoff = backoff ? backoff * 2 : WEBHOOK_BACKOFF_MIN_MS;
			if (backoff > WEBHOOK_BACKOFF_MAX_MS)
				backoff = WEBHOOK_BACKOFF_MAX_MS;
			failures++;
			/* the first failure and then every tenth: an outage is one line, not a flood */
			if (failures == 1 || failures % 10 == 0)
				log_warn(&w->log, "webhook %s: cannot deliver %s (%s); attempt %u, next in %.0fs", w->url,
					 json_string_value(json_object_get(ev, "event_id")) ?: "?", why, failures,
					 (double)backoff / 1000);
			json_decref(ev);
			if (sleep_or_stop(w, backoff))
				break;
			continue;
		}
		json_decref(ev);
	}
	pthread_mutex_lock(&w->lock);
	w->exited = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int webhook_start(struct webhook *w)
{
	int r;

	if (!w->daemon)
		return -EINVAL;
	r = -pthread_create(&w->thread, NULL, webhook_main, w);
	if (r == 0)
		w->started = true;
	return r;
}

void webhook_stop(struct webhook *w)
{
	if (!w || !w->started)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->cond);
	/* engine_outbox_wait() may be entered just after a wake-up: wake until
	 * the thread says it is out */
	while (!w->exited) {
		struct timespec dl;

		pthread_mutex_unlock(&w->lock);
		engine_outbox_wake(w->daemon);
		pthread_mutex_lock(&w->lock);
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += 50 * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		if (!w->exited)
			pthread_cond_timedwait(&w->cond, &w->lock, &dl);
	}
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->started = false;
}

void webhook_free(struct webhook *w)
{
	if (!w)
		return;
	webhook_stop(w);
	if (w->secret) {
		explicit_bzero(w->secret, w->secret_len);
		free(w->secret);
	}
	free(w->url);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
