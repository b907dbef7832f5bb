/* SPDX-License-Identifier: MIT */
/*
 * libcrypto, loaded with dlopen() the first time it is needed: a webhook's
 * destination name and HMAC signature, and the client certificate checks of
 * --check-config and the status (config/check_creds.c).  An agent without
 * webhooks or a client certificate never maps it.
 *
 * Include this instead of the <openssl/...> headers it includes: the
 * functions below become calls through the loaded table.
 * - crypto_dl_load(): loads it once per process (pthread_once, safe from any
 *   thread); 0, or -ELIBACC with WHY naming the library and the reason.
 *   Call it before the first of the functions below; a failed load is not
 *   retried.
 * - crypto_dl_fns(): the table; only after crypto_dl_load() returned 0.
 * The table is written once under pthread_once and only read afterwards.
 */
#ifndef MEMGRANT_LIB_CRYPTO_DL_H
#define MEMGRANT_LIB_CRYPTO_DL_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/opensslv.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stddef.h>

#ifndef MEMGRANT_CRYPTO_SONAME
#if OPENSSL_VERSION_MAJOR >= 3
#define MEMGRANT_CRYPTO_SONAME "libcrypto.so.3"
#else
#define MEMGRANT_CRYPTO_SONAME "libcrypto.so.1.1"
#endif
#endif

#define CRYPTO_DL_FUNCS(X)                                                                              \
	X(ASN1_TIME_diff) X(ASN1_TIME_to_tm) X(ERR_clear_error) X(ERR_error_string_n) X(ERR_get_error)     \
	X(EVP_PKEY_free) X(PEM_read_PrivateKey) X(PEM_read_X509) X(X509_check_private_key) X(X509_cmp_time) \
	X(X509_free) X(X509_get0_notAfter) X(X509_get0_notBefore) X(EVP_Digest) X(EVP_sha256) X(HMAC)

struct crypto_dl {
#define CRYPTO_DL_MEMBER(f) __typeof__(&f) f;
	CRYPTO_DL_FUNCS(CRYPTO_DL_MEMBER)
#undef CRYPTO_DL_MEMBER
};

int crypto_dl_load(char *why, size_t whylen);
const struct crypto_dl *crypto_dl_fns(void);

#ifndef CRYPTO_DL_IMPL
#define ASN1_TIME_diff (crypto_dl_fns()->ASN1_TIME_diff)
#define ASN1_TIME_to_tm (crypto_dl_fns()->ASN1_TIME_to_tm)
#define ERR_clear_error (crypto_dl_fns()->ERR_clear_error)
#define ERR_error_string_n (crypto_dl_fns()->ERR_error_string_n)
#define ERR_get_error (crypto_dl_fns()->ERR_get_error)
#define EVP_PKEY_free (crypto_dl_fns()->EVP_PKEY_free)
#define PEM_read_PrivateKey (crypto_dl_fns()->PEM_read_PrivateKey)
#define PEM_read_X509 (crypto_dl_fns()->PEM_read_X509)
#define X509_check_private_key (crypto_dl_fns()->X509_check_private_key)
#define X509_cmp_time (crypto_dl_fns()->X509_cmp_time)
#define X509_free (crypto_dl_fns()->X509_free)
#define X509_get0_notAfter (crypto_dl_fns()->X509_get0_notAfter)
#define X509_get0_notBefore (crypto_dl_fns()->X509_get0_notBefore)
#define EVP_Digest (crypto_dl_fns()->EVP_Digest)
#define EVP_sha256 (crypto_dl_fns()->EVP_sha256)
#define HMAC (crypto_dl_fns()->HMAC)
#endif

#endif
