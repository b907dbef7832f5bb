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

DL_TABLE_LOADER(crypto_dl, MEMGRANT_CRYPTO_SONAME, CRYPTO_DL_FUNCS, "libcrypto")
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
