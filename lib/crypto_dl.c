/* SPDX-License-Identifier: MIT */
/* libcrypto's functions, loaded once when first needed (crypto_dl.h). */
#include "lib/crypto_dl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/dl_table.h"

#ifdef MEMGRANT_LINKED_LIBS
int crypto_dl_load(char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	return 0; /* linked: loaded with the program */
}
#else
DL_TABLE_NOTE(crypto_dl_note, "[{\"feature\":\"crypto\",\"description\":\"credentials' certificates and keys, "
			       "signatures\",\"priority\":\"recommended\",\"soname\":[\"" MEMGRANT_CRYPTO_SONAME "\"]}]");

#define CRYPTO_DL_NAME(f) #f,
static const char *const crypto_dl_names[] = { CRYPTO_DL_FUNCS(CRYPTO_DL_NAME) };
#define CRYPTO_DL_N (sizeof(crypto_dl_names) / sizeof(crypto_dl_names[0]))

/* written once, by load() under pthread_once (see crypto_dl.h) */
static struct crypto_dl crypto_dl_table;
static int crypto_dl_result;
static char crypto_dl_why[256];
static pthread_once_t crypto_dl_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *fns[CRYPTO_DL_N];
	size_t i = 0;
	int r;

	r = dl_table_open(MEMGRANT_CRYPTO_SONAME, crypto_dl_names, fns, CRYPTO_DL_N, crypto_dl_why, sizeof(crypto_dl_why));
	if (r < 0) {
		crypto_dl_result = r;
		return;
	}
#define CRYPTO_DL_SET(f) crypto_dl_table.f = (__typeof__(crypto_dl_table.f))fns[i++];
	CRYPTO_DL_FUNCS(CRYPTO_DL_SET)
#undef CRYPTO_DL_SET
}

int crypto_dl_load(char *why, size_t whylen)
{
	pthread_once(&crypto_dl_once, load);
	if (crypto_dl_result < 0 && why && whylen)
		snprintf(why, whylen, "%s", crypto_dl_why);
	return crypto_dl_result;
}

const struct crypto_dl *crypto_dl_fns(void)
{
	pthread_once(&crypto_dl_once, load);
	if (crypto_dl_result < 0) {
		/* a caller went on after crypto_dl_load() failed: a bug, stopped
		 * here rather than as a jump through a NULL pointer */
		fprintf(stderr, "memgrant: a libcrypto function was called although libcrypto did not load: %s\n",
			crypto_dl_why);
		abort();
	}
	return &crypto_dl_table;
}
#endif

void crypto_dl_error_text(char *buf, size_t len)
{
	unsigned long e = sym_ERR_get_error();

	if (e)
		sym_ERR_error_string_n(e, buf, len);
	else
		snprintf(buf, len, "no PEM block found");
	sym_ERR_clear_error();
}
