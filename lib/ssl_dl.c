/* SPDX-License-Identifier: MIT */
/* libssl's functions, loaded once when first needed (ssl_dl.h). */
#include "lib/ssl_dl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/dl_table.h"

#ifdef MEMGRANT_LINKED_LIBS
int ssl_dl_load(char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	return 0; /* linked: loaded with the program */
}
#else
DL_TABLE_NOTE(ssl_dl_note, "[{\"feature\":\"ssl\",\"description\":\"the HTTPS provider's server verification with its CA "
			    "parsed once\",\"priority\":\"recommended\",\"soname\":[\"" MEMGRANT_SSL_SONAME "\"]}]");

#define SSL_DL_NAME(f) #f,
static const char *const ssl_dl_names[] = { SSL_DL_FUNCS(SSL_DL_NAME) };
#define SSL_DL_N (sizeof(ssl_dl_names) / sizeof(ssl_dl_names[0]))

/* written once, by load() under pthread_once (see ssl_dl.h) */
static struct ssl_dl ssl_dl_table;
static int ssl_dl_result;
static char ssl_dl_why[256];
static pthread_once_t ssl_dl_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *fns[SSL_DL_N];
	size_t i = 0;
	int r;

	r = dl_table_open(MEMGRANT_SSL_SONAME, ssl_dl_names, fns, SSL_DL_N, ssl_dl_why, sizeof(ssl_dl_why));
	if (r < 0) {
		ssl_dl_result = r;
		return;
	}
#define SSL_DL_SET(f) ssl_dl_table.f = (__typeof__(ssl_dl_table.f))fns[i++];
	SSL_DL_FUNCS(SSL_DL_SET)
#undef SSL_DL_SET
}

int ssl_dl_load(char *why, size_t whylen)
{
	pthread_once(&ssl_dl_once, load);
	if (ssl_dl_result < 0 && why && whylen)
		snprintf(why, whylen, "%s", ssl_dl_why);
	return ssl_dl_result;
}

const struct ssl_dl *ssl_dl_fns(void)
{
	pthread_once(&ssl_dl_once, load);
	if (ssl_dl_result < 0) {
		/* a caller went on after ssl_dl_load() failed: a bug, stopped
		 * here rather than as a jump through a NULL pointer */
		fprintf(stderr, "memgrant: a libssl function was called although libssl did not load: %s\n",
			ssl_dl_why);
		abort();
	}
	return &ssl_dl_table;
}
#endif
