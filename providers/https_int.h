/* SPDX-License-Identifier: MIT */
/*
 * Inside the HTTPS provider: what its threads share (https.c: the poller,
 * the sender, start and stop; https_ca.c: the CA parsed once for both) and
 * what one request needs (https_http.c: the connection, the bearer token,
 * backoff, classifying an answer).  Not an interface for other modules; see
 * https.h.
 */
#pragma once

#include "lib/curl_dl.h"
#include <jansson.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "agent/engine/engine.h"
#include "providers/https_backoff.h"
#include "lib/credstore.h"
#include "lib/json.h"
#include "lib/log.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

#define SOURCE "https"
#define BODY_LIMIT (16u << 20)          /* a larger answer is not the protocol */
#define CONNECT_TIMEOUT_MS 10000L
#define REQUEST_TIMEOUT_MS 30000L       /* POST, PUT; the long poll gets wait + this */
#define BACKOFF_FIRST_MS 500u
#define BACKOFF_CAP_MAX_MS 60000u
#define EMPTY_POLL_MIN_MS 1000u         /* a server that ignores wait= is not polled faster */
#define JOURNAL_RETRY_MAX_MS 5000u      /* the journal refused to record (disk full): tried again at least this often */
#define TOKEN_MAX 8192


/* One parse of ca_file (https_ca.c): its certificates, the ones the server
 * is verified with (read only once made), and the curl share that holds the
 * TLS sessions and DNS answers of the connections verified with them, so
 * that no session made with an older CA is resumed (a resumption verifies
 * no certificate).  Shared by both threads; freed by the last of the
 * provider and the conns to let it go. */
struct ca_gen {
	STACK_OF(X509) *certs;
	CURLSH *share;                  /* NULL: a libcurl without shares */
	unsigned refs;                  /* under the provider's ca_lock */
	unsigned n;                     /* which parse: 1, 2, ... (for the log) */
};

/* The file a CA parse was read from: its stat, or when the agent cannot
 * stat it (a root-only folder, read through the helper) the credential
 * generation (reloads) it was read at. */
struct ca_key {
	bool stat_ok;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	unsigned cred_gen;
};

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
	unsigned token_gen;             /* the credential generation it was read at */
	/* the TLS files' contents (credstore.h), read again after a reload */
	char *tls[3];                   /* ca, cert, key; NULL: not configured */
	size_t tls_len[3];
	bool tls_loaded;
	unsigned tls_gen;
	unsigned tls_refused_gen;       /* a reload's pair refused (logged once), 0 none */
	bool ca_refused;                /* a changed ca_file refused (logged once) */
	bool token_refused;             /* a changed token_file refused (logged once) */
	/* the CA handed to curl by path when the agent can read it itself: the
	 * multi handle keeps the parsed store (CURLOPT_CA_CACHE_TIMEOUT) and a
	 * change of the file is seen by its stat, not by parsing it again */
	bool ca_by_path;
	bool ca_alias;                  /* ca_file spelt "..././NAME" this time */
	char *ca_alias_path;            /* that spelling, made once */
	ino_t ca_ino;
	off_t ca_size;
	struct timespec ca_mtime;
	struct ca_gen *ca;              /* the CA parse this thread verifies with (https_ca.c), NULL none */
	bool fresh;                     /* the next request opens a new connection */
	/* backoff (https_backoff.h) and the once-per-change log */
	struct backoff bo;
	unsigned failures;
	char fail_class[64];            /* "" while things work */
	uint32_t seed;                  /* xorshift32 state, never 0 */
};

struct https_provider {
	char *base;                     /* url without trailing '/' */
	char *agent;                    /* URL-escaped agent id */
	char *agent_id;
	char *ca_file, *cert_file, *key_file, *token_file;
	struct cred_store *creds;       /* how they are read (may be NULL) */
	long wait_s;
	bool insecure;
	unsigned backoff_cap_ms;
	enum backoff_rule rule;         /* BACKOFF_EQUAL only for the fleet bench */
	unsigned default_window_ms;     /* 0 (no default window) only for the fleet bench */
	/* the spreading window the control plane announced last (Memgrant-Spread,
	 * ms, 0 none): remembered for the retries of an outage, when it cannot say */
	atomic_uint spread_ms;
	/* the control plane answered either thread since start: a failure now
	 * is the loss of one that worked (the default window, https_backoff.h),
	 * also for the thread whose first long poll was still held */
	atomic_bool answered;
	atomic_bool spread_bad_logged;
	/* both threads' TLS sessions and DNS answers: a reconnect resumes the
	 * session instead of a full handshake */
	CURLSH *share;                  /* NULL when the CA parse's share serves (ca_store) */
	pthread_mutex_t share_lock;
	/* ca_file parsed once per change of the file for both threads, its
	 * certificates the ones each handshake verifies the server with
	 * (https_ca.c): when libcurl is built on OpenSSL 3.  Else (false) each
	 * thread hands curl the path or the contents (ca_watch(),
	 * tls_refresh() in https_http.c). */
	bool ca_store;
	pthread_mutex_t ca_lock;        /* guards what follows and each ca_gen's refs */
	struct ca_gen *ca;              /* the newest parse accepted, NULL none yet */
	struct ca_key ca_key;           /* the file it was parsed from */
	unsigned ca_parses;             /* parses accepted so far */
	bool ca_refused;                /* a changed ca_file refused (logged once) */
	struct engine *d;
	struct engine_source *source; /* SOURCE, reports to its outbox */
	const struct mg_log *log;

	pthread_mutex_t lock;           /* guards what follows and the cond */
	pthread_cond_t cond;            /* stop (the sleeps are in each conn's multi handle) */
	atomic_bool stop;
	uint64_t inventory_fp;          /* fingerprint of the layout last PUT, 0 none */
	bool inventory_dirty;
	uint64_t skip_fp;               /* the last answer's skipped messages (poller only) */

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
	char *location;                 /* a 3xx's Location, for the log */
	long spread_ms;                 /* Memgrant-Spread in ms, -1 none (-2 not a number) */
};

enum outcome {
	OUT_OK,        /* 2xx */
	OUT_RETRY,     /* transport, 408, 429, 5xx, not the protocol: backoff */
	OUT_REFUSED,   /* other 4xx: logged, retried at the cap */
	OUT_STOPPED,
};

void https_response_done(struct response *r);
bool https_stopping(struct https_provider *p);
/* Sleeps MS in C's multi handle or until stop; true when stopping. */
bool https_sleep_ms(struct https_provider *p, struct conn *c, unsigned ms);
bool https_fail_and_wait(struct https_provider *p, struct conn *c, const char *class, bool at_cap,
			 long retry_after_s, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void https_succeeded(struct https_provider *p, struct conn *c);
/* A 32-bit random number from C's own generator. */
uint32_t https_rand(struct conn *c);
void https_token_clear(struct conn *c);
void https_tls_clear(struct conn *c);
/* A CA bundle read from a file: 0 when it holds at least one certificate
 * and none cut short, else -EINVAL with WHY saying which (a rotation read
 * half written keeps the CA in use, https_http.c, https_ca.c); -ENOSYS
 * without libcrypto.  https_ca_parse()
 * also appends the certificates to CERTS (NULL: none; -ENOMEM when one
 * cannot be) and counts them in *COUNT. */
int https_ca_check(const char *ca, size_t ca_len, char *why, size_t whylen);
int https_ca_parse(const char *ca, size_t ca_len, STACK_OF(X509) *certs, unsigned *count, char *why, size_t whylen);
/* A curl share for TLS sessions and DNS answers locked by P's share_lock,
 * or NULL when libcurl cannot share them (https.c). */
CURLSH *https_share_new(struct https_provider *p);
/* The provider's CA certificates (https_ca.c).  https_ca_init(): decides,
 * once at start, whether P parses ca_file itself (P->ca_store; the reason
 * when not is logged), and parses it a first time (a failure is logged; the
 * requests try again).  https_ca_refresh(): before each request of C: a
 * changed file is parsed again by the first thread to see it; C takes the
 * newest parse and its share (C->fresh when it changed).  0, or -errno with
 * WHY when there is no parse at all.  https_ca_ssl_ctx(): the
 * CURLOPT_SSL_CTX_FUNCTION (its data: the conn).  https_ca_put(): lets a reference go (a conn's
 * after its easy handle is cleaned up, P's at free). */
void https_ca_init(struct https_provider *p);
int https_ca_refresh(struct https_provider *p, struct conn *c, char *why, size_t whylen);
void https_ca_put(struct https_provider *p, struct ca_gen *g);
CURLcode https_ca_ssl_ctx(CURL *e, void *sslctx, void *userdata);
/* 0 when CERT and KEY (PEM, the files' contents) both parse and KEY is
 * CERT's; -EINVAL (or -ENOSYS without libcrypto) with WHY saying which. */
int https_pair_check(const char *cert, size_t cert_len, const char *key, size_t key_len, char *why, size_t whylen);
/* Does METHOD URL with BODY (NULL: none) and IDEMPOTENCY_KEY (NULL: none).
 * 0 with RESP filled (a transport failure is RESP->cc != CURLE_OK), or -errno
 * for a local problem (out of memory, token file) described in WHY. */
int https_request(struct https_provider *p, struct conn *c, const char *method, const char *url,
		  const char *body, const char *idempotency_key, long timeout_ms, struct response *resp,
		  char *why, size_t whylen);
/* Classifies RESP after https_request()'s return R; on a failure logs (once
 * per change) and sleeps.  2xx: OUT_OK, the caller checks the body. */
enum outcome https_classify(struct https_provider *p, struct conn *c, int r, const struct response *resp,
			    const char *what, const char *why);
/* OUT_OK only for a 2xx whose body acknowledges (https_ack_body_ok). */
enum outcome https_classify_ack(struct https_provider *p, struct conn *c, int r, const struct response *resp,
				const char *what, const char *why);
