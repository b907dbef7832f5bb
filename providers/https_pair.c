/* SPDX-License-Identifier: MIT */
/*
 * A rotated certificate and key, checked before they are used (contract in
 * https_int.h): both parse and the key is the certificate's.  A reload that
 * read the files half written, or a key of another pair, would otherwise
 * fail every handshake until the next reload.  Likewise a CA bundle, which
 * is parsed into the provider's list of CA certificates (https_ca.c) by the
 * same pass.
 */
#include "providers/https_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/crypto_dl.h"

int https_ca_parse(const char *ca, size_t ca_len, STACK_OF(X509) *certs, unsigned *count, char *why, size_t whylen)
{
	char text[200] = "";
	unsigned long e;
	unsigned n = 0;
	int added = 1;
	FILE *f;
	X509 *x;

	if (crypto_dl_load(why, whylen) < 0)
		return -ENOSYS;
	f = fmemopen((void *)ca, ca_len, "r");
	if (!f) {
		snprintf(why, whylen, "cannot read it: %s", strerror(errno));
		return -errno;
	}
	sym_ERR_clear_error();
	/* _AUX: also "TRUSTED CERTIFICATE" blocks, as curl's own loading of a
	 * CA file takes them */
	while (added > 0 && (x = sym_PEM_read_X509_AUX(f, NULL, NULL, NULL))) {
		if (certs)
			added = sym_OPENSSL_sk_push((OPENSSL_STACK *)certs, x); /* the list keeps X */
		if (!certs || added <= 0)
			sym_X509_free(x);
		n++;
	}
	fclose(f);
	if (count)
		*count = n;
	/* the bundle ends where no PEM block starts any more; any other error
	 * is a block cut short or damaged (a file read while being written) */
	e = sym_ERR_get_error();
	if (added > 0 && n > 0 &&
	    (e == 0 || (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))) {
		sym_ERR_clear_error();
		return 0;
	}
	if (e)
		sym_ERR_error_string_n(e, text, sizeof(text));
	sym_ERR_clear_error();
	snprintf(why, whylen, "%s",
		 added <= 0 ? "out of memory for its certificates"
		 : n == 0   ? "it holds no whole PEM certificate"
			    : "a certificate in it is cut short");
	if (text[0])
		snprintf(why + strlen(why), whylen - strlen(why), " (%s)", text);
	return added <= 0 ? -ENOMEM : -EINVAL;
}

int https_ca_check(const char *ca, size_t ca_len, char *why, size_t whylen)
{
	return https_ca_parse(ca, ca_len, NULL, NULL, why, whylen);
}

/* No passphrase prompt: memgrantd cannot answer one. */
static int no_pass(char *buf, int size, int rw, void *u)
{
	(void)buf, (void)size, (void)rw, (void)u;
	return -1;
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
		crypto_dl_error_text(text, sizeof(text));
		snprintf(why, whylen, "the certificate is not a whole PEM certificate (%s)", text);
		return -EINVAL;
	}
	f = fmemopen((void *)key, key_len, "r");
	if (f) {
		k = sym_PEM_read_PrivateKey(f, NULL, no_pass, NULL);
		fclose(f);
	}
	if (!k) {
		crypto_dl_error_text(text, sizeof(text));
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
