/* SPDX-License-Identifier: MIT */
/* libcurl's functions, loaded once when first needed (curl_dl.h). */
#include "lib/curl_dl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/dl_table.h"

/* written once, by load() under pthread_once (see curl_dl.h) */
static int curl_dl_result;
static char curl_dl_why[256];
static pthread_once_t curl_dl_once = PTHREAD_ONCE_INIT;

#ifdef MEMGRANT_LINKED_LIBS
static void load(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(curl_dl_why, sizeof(curl_dl_why), "curl_global_init() failed");
		curl_dl_result = -ELIBACC;
	}
}
#else
DL_TABLE_NOTE(curl_dl_note, "[{\"feature\":\"curl\",\"description\":\"HTTPS provider, webhooks, "
			     "memgrantctl's API client\",\"priority\":\"required\",\"soname\":[\"" MEMGRANT_CURL_SONAME "\"]}]");

#define CURL_DL_NAME(f) #f,
static const char *const curl_dl_names[] = { CURL_DL_FUNCS(CURL_DL_NAME) };
#define CURL_DL_N (sizeof(curl_dl_names) / sizeof(curl_dl_names[0]))

static struct curl_dl curl_dl_table;

static void load(void)
{
	void *fns[CURL_DL_N];
	size_t i = 0;
	int r;

	r = dl_table_open(MEMGRANT_CURL_SONAME, curl_dl_names, fns, CURL_DL_N, curl_dl_why, sizeof(curl_dl_why));
	if (r < 0) {
		curl_dl_result = r;
		return;
	}
#define CURL_DL_SET(f) curl_dl_table.f = (__typeof__(curl_dl_table.f))fns[i++];
	CURL_DL_FUNCS(CURL_DL_SET)
#undef CURL_DL_SET
	if (curl_dl_table.curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(curl_dl_why, sizeof(curl_dl_why), "%s: curl_global_init() failed", MEMGRANT_CURL_SONAME);
		curl_dl_result = -ELIBACC;
	}
}

const struct curl_dl *curl_dl_fns(void)
{
	pthread_once(&curl_dl_once, load);
	if (curl_dl_result < 0) {
		/* a caller went on after curl_dl_load() failed: a bug, stopped here
		 * rather than as a jump through a NULL pointer */
		fprintf(stderr, "memgrant: a libcurl function was called although libcurl did not load: %s\n",
			curl_dl_why);
		abort();
	}
	return &curl_dl_table;
}
#endif

int curl_dl_load(char *why, size_t whylen)
{
	pthread_once(&curl_dl_once, load);
	if (curl_dl_result < 0 && why && whylen)
		snprintf(why, whylen, "%s", curl_dl_why);
	return curl_dl_result;
}
