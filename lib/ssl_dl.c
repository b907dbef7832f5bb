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

DL_TABLE_LOADER(ssl_dl, MEMGRANT_SSL_SONAME, SSL_DL_FUNCS, "libssl")
#endif
