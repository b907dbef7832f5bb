/* SPDX-License-Identifier: MIT */
/*
 * A rotated certificate and key, checked before they are used (contract in
 * https_int.h): both parse and the key is the certificate's.  A reload that
 * read the files half written, or a key of another pair, would otherwise
 * fail every handshake until the next reload.
 */
#include "providers/https_int.h"

#include <stdio.h>
#include <string.h>

#include "lib/crypto_dl.h"

/* No passphrase prompt: memgrantd cannot answer one. */
static int no_pass(char *buf, int size, int rw, void *u)
{
	(void)buf, (void)size, (void)rw, (void)u;
	return -1;
}

static void crypto_text(char *buf, size_t len)
{
	unsigned long e = sym_ERR_get_error();

	if (e)
		sym_ERR_error_string_n(e, buf, len);
	else
		snprintf(buf, len, "no PEM block found");
	sym_ERR_clear_error();
}

int https_pair_check(const char *cert, size_t cert_len, const char *key, size_t key_len, char *why, size_t whylen)
{
	char text[200] = "";
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	FILE *f;
	int r = 0;

	if (crypto_dl_load(why, whylen) < 0)
		return -ENOSYS;
	/* the blobs as streams: PEM_read_* of the files --check-config reads */
	f = fmemopen((void *)cert, cert_len, "r");
	if (f) {
		x = sym_PEM_read_X509(f, NULL, NULL, NULL);
		fclose(f);
	}
	if (!x) {
		crypto_text(text, sizeof(text));
		snprintf(why, whylen, "the certificate is not a whole PEM certificate (%s)", text);
		return -EINVAL;
	}
	f = fmemopen((void *)key, key_len, "r");
	if (f) {
		k = sym_PEM_read_PrivateKey(f, NULL, no_pass, NULL);
		fclose(f);
	}
	if (!k) {
		crypto_text(text, sizeof(text));
		snprintf(why, whylen, "the key is not a whole PEM private key (%s)", text);
		r = -EINVAL;
	} else if (sym_X509_check_private_key(x, k) != 1) {
		sym_ERR_clear_error();
		snprintf(why, whylen, "the key is not the certificate's (another pair)");
		r = -EINVAL;
	}
	sym_EVP_PKEY_free(k);
	sym_X509_free(x);
	return r;
}
