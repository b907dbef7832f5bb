/* SPDX-License-Identifier: MIT */
/*
 * The HTTPS provider's CA certificates (contract in https_int.h): ca_file
 * read and parsed once per change of the file for both connection threads;
 * each TLS handshake verifies the server with those certificates as they
 * are: no parse per thread nor per handshake, also for a file the agent
 * reads through the root helper (curl parses a CA handed as a blob at every
 * handshake).  Before each request a thread compares the file's stat (or,
 * when the agent cannot stat it, the reload count) with the parse's; the
 * first thread to see a change reads and parses the file under the lock,
 * the other finds the new parse made.  A file read half written keeps the
 * parse in use (warned once per change).  Each parse comes with its own
 * curl share, so that a TLS session made with an older CA is never resumed.
 *
 * How the handshake gets them: CURLOPT_SSL_CTX_FUNCTION sets a certificate
 * verification callback on the TLS context curl makes for the connection,
 * which verifies the server's chain with the parse's list as the trusted
 * certificates (X509_STORE_CTX_set0_trusted_stack()), read only and shared.
 * Not the store of the context (SSL_CTX_set1_cert_store()): libcurl 7.88
 * sets up that store after the callback, caches the first one it finds in
 * the multi handle and puts it back into every later context, so a replaced
 * store went unused; and it would have written into a store both threads
 * share.  curl's own store stays empty (no CAINFO, no CAPATH).
 *
 * Only with libcurl on OpenSSL 3 (the certificates and the context must be
 * of the OpenSSL this process loads); else the threads hand curl the path
 * or the contents as before (https_http.c), and https_ca_init() says why.
 */
#include "providers/https_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/crypto_dl.h"
#include "lib/ssl_dl.h"

static void gen_free(struct ca_gen *g)
{
	if (!g)
		return;
	/* after every easy handle let the share go: curl keeps one in use */
	if (g->share)
		sym_curl_share_cleanup(g->share);
	if (g->certs) {
		for (int i = 0; i < sym_OPENSSL_sk_num((OPENSSL_STACK *)g->certs); i++)
			sym_X509_free(sym_OPENSSL_sk_value((OPENSSL_STACK *)g->certs, i));
		sym_OPENSSL_sk_free((OPENSSL_STACK *)g->certs);
	}
	free(g);
}

void https_ca_put(struct https_provider *p, struct ca_gen *g)
{
	bool last;

	if (!g)
		return;
	pthread_mutex_lock(&p->ca_lock);
	last = --g->refs == 0;
	pthread_mutex_unlock(&p->ca_lock);
	if (last)
		gen_free(g);
}

static void key_now(struct https_provider *p, struct ca_key *k)
{
	struct stat st;

	*k = (struct ca_key){ 0 };
	if (stat(p->ca_file, &st) == 0) {
		k->stat_ok = true;
		k->dev = st.st_dev;
		k->ino = st.st_ino;
		k->size = st.st_size;
		k->mtime = st.st_mtim;
	} else {
		/* a root-only folder: read again at reloads, as the token */
		k->cred_gen = cred_generation(p->creds);
	}
}

static bool key_eq(const struct ca_key *a, const struct ca_key *b)
{
	if (a->stat_ok != b->stat_ok)
		return false;
	if (!a->stat_ok)
		return a->cred_gen == b->cred_gen;
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads ca_file (through the helper when it is served) and parses it: 0
 * with *OUT (one reference), or -errno with WHY. */
static int parse_file(struct https_provider *p, struct ca_gen **out, unsigned *count, char *why, size_t whylen)
{
	struct ca_gen *g;
	char *text = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	r = cred_read(p->creds, p->ca_file, CRED_FILE_MAX, &text, &len);
	if (r < 0) {
		snprintf(why, whylen, "%s%s", strerror(-r), r == -EACCES ? " (see Credentials in docs/security.md)" : "");
		return r;
	}
	g = calloc(1, sizeof(*g));
	if (g)
		g->certs = (STACK_OF(X509) *)sym_OPENSSL_sk_new_null();
	if (!g || !g->certs) {
		free(g);
		cred_free(text, len);
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	r = https_ca_parse(text, len, g->certs, count, why, whylen);
	cred_free(text, len);
	if (r < 0) {
		gen_free(g);
		return r;
	}
	g->share = https_share_new(p);
	g->refs = 1;
	*out = g;
	return 0;
}

/* Parses ca_file again when its key moved since the parse was made, or
 * when there is none; under ca_lock.  WHO: the thread that saw the change
 * ("" at start), for the log.  0 when there is a parse (the one before when
 * the file is refused), else -errno with WHY.  *OLD: the parse replaced,
 * which the caller lets go after the unlock. */
static int update_locked(struct https_provider *p, const char *who, struct ca_gen **old, char *why, size_t whylen)
{
	struct ca_gen *g = NULL;
	struct ca_key k;
	unsigned count = 0;
	int r;

	*old = NULL;
	/* the stat before the read: a change while reading is seen next time */
	key_now(p, &k);
	if (p->ca && key_eq(&k, &p->ca_key))
		return 0;
	r = parse_file(p, &g, &count, why, whylen);
	if (r < 0 && !p->ca)
		return r;
	if (r < 0) {
		/* half written, or gone for a moment: the parse before stays; the
		 * key is not taken, so the file is read again at the next request */
		if (!p->ca_refused)
			log_warn(p->log, "https%s%s: ca_file %s changed: %s; still verifying with the CA read before, "
				 "until the file is complete", *who ? " " : "", who, p->ca_file, why);
		p->ca_refused = true;
		return 0;
	}
	g->n = ++p->ca_parses;
	*old = p->ca;
	p->ca = g;
	p->ca_key = k;
	p->ca_refused = false;
	if (*old)
		log_info(p->log, "https%s%s: ca_file %s changed; parsed again: %u certificates (parse %u); the next "
			 "connections verify with it", *who ? " " : "", who, p->ca_file, count, g->n);
	else
		log_info(p->log, "https: ca_file %s parsed: %u certificates (parse %u), for both connections",
			 p->ca_file, count, g->n);
	return 0;
}

int https_ca_refresh(struct https_provider *p, struct conn *c, char *why, size_t whylen)
{
	struct ca_gen *old = NULL, *was = NULL;
	int r;

	pthread_mutex_lock(&p->ca_lock);
	r = update_locked(p, c->name, &old, why, whylen);
	if (old && --old->refs > 0)
		old = NULL; /* a thread still verifies with it */
	if (r == 0 && c->ca != p->ca) {
		was = c->ca;
		c->ca = p->ca;
		c->ca->refs++;
	}
	pthread_mutex_unlock(&p->ca_lock);
	gen_free(old);
	if (r < 0) {
		char text[400];

		snprintf(text, sizeof(text), "ca_file %s: %s", p->ca_file, why);
		snprintf(why, whylen, "%s", text);
		return r;
	}
	if (was) {
		/* new connections, with the new parse's share: the easy handle lets
		 * the old share go before the old parse may be freed */
		c->fresh = true;
		sym_curl_easy_setopt(c->easy, CURLOPT_SHARE, c->ca->share);
		https_ca_put(p, was);
	}
	return 0;
}

/* OpenSSL's verification of the server's chain, with the certificates of
 * the parse the connection's thread took (ARG: the conn; the handshake
 * runs in its thread, the only one that changes C->ca). */
static int verify(X509_STORE_CTX *x, void *arg)
{
	struct conn *c = arg;

	if (!c->ca)
		return 0; /* not reached: a request needs a parse */
	/* trusted: those, and no store's; read only, so both threads share them */
	sym_X509_STORE_CTX_set0_trusted_stack(x, c->ca->certs);
	/* what curl sets on a store it loads itself for peer verification (no
	 * CRL file, partial chains not refused): the same trust as by path */
	sym_X509_STORE_CTX_set_flags(x, X509_V_FLAG_TRUSTED_FIRST | X509_V_FLAG_PARTIAL_CHAIN);
	return sym_X509_verify_cert(x);
}

CURLcode https_ca_ssl_ctx(CURL *e, void *sslctx, void *userdata)
{
	(void)e;
	/* the context is this connection's: curl makes one per connection */
	sym_SSL_CTX_set_cert_verify_callback(sslctx, verify, userdata);
	return CURLE_OK;
}

void https_ca_init(struct https_provider *p)
{
	const curl_version_info_data *v;
	struct ca_gen *old = NULL;
	char why[300] = "";
	CURLcode cc;
	int r;

	if (!p->ca_file)
		return;
	v = sym_curl_version_info(CURLVERSION_NOW);
	/* the certificates and the TLS context must be of the OpenSSL 3 this
	 * process loads (lib/dlopen.list), the one libcurl uses */
	if (!v || !v->ssl_version || strncmp(v->ssl_version, "OpenSSL/3", 9) != 0) {
		snprintf(why, sizeof(why), "libcurl's TLS library is %s, not OpenSSL 3",
			 v && v->ssl_version ? v->ssl_version : "none");
	} else if (crypto_dl_load(why, sizeof(why)) < 0 || ssl_dl_load(why, sizeof(why)) < 0) {
		/* WHY says which library */
	} else if ((cc = sym_curl_easy_setopt(p->poll.easy, CURLOPT_SSL_CTX_FUNCTION, https_ca_ssl_ctx)) != CURLE_OK) {
		snprintf(why, sizeof(why), "libcurl does not take CURLOPT_SSL_CTX_FUNCTION: %s",
			 sym_curl_easy_strerror(cc));
	}
	if (why[0]) {
		log_notice(p->log, "https: ca_file %s is handed to curl, which parses it once per connection thread, "
			   "or at each handshake when the agent cannot open it itself: %s", p->ca_file, why);
		return;
	}
	sym_curl_easy_setopt(p->poll.easy, CURLOPT_SSL_CTX_FUNCTION, NULL); /* set per request */
	p->ca_store = true;
	/* the first parse now, to say early what will fail; the requests try
	 * again until it succeeds */
	pthread_mutex_lock(&p->ca_lock);
	r = update_locked(p, "", &old, why, sizeof(why));
	pthread_mutex_unlock(&p->ca_lock);
	if (r < 0)
		log_err(p->log, "providers.https.ca_file %s: %s (requests will fail until it is readable)", p->ca_file,
			why);
}
