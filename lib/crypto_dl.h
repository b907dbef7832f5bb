/* SPDX-License-Identifier: MIT */
/*
 * libcrypto, loaded with dlopen() the first time it is needed: a webhook's
 * destination name and HMAC signature, the client certificate checks of
 * --check-config and the status (config/check_creds.c), and the HTTPS
 * provider's checks of rotated files and its CA certificates
 * (providers/https_ca.c).  An agent without
 * webhooks or a client certificate never maps it.
 *
 * As lib/curl_dl.h: the code calls sym_NAME (sym_HMAC(...)), which goes
 * through the loaded table (crypto_dl_fns() loads it first when nobody did,
 * and stops the process with the reason after a failed load), or is NAME in
 * a build configured with --enable-linked-libs.
 * - crypto_dl_load(): loads it once per process (pthread_once, safe from any
 *   thread); 0, or -ELIBACC with WHY naming the library and the reason.
 *   Call it before the first of the functions below; a failed load is not
 *   retried.
 * The soname is in lib/dlopen.list (MEMGRANT_CRYPTO_SONAME).  The table is
 * written once under pthread_once and only read afterwards.
 */
#ifndef MEMGRANT_LIB_CRYPTO_DL_H
#define MEMGRANT_LIB_CRYPTO_DL_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/opensslv.h>
#include <openssl/pem.h>
#include <openssl/stack.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stddef.h>

#if OPENSSL_VERSION_MAJOR < 3
#error "lib/dlopen.list names libcrypto.so.3: OpenSSL 3 headers are needed"
#endif

int crypto_dl_load(char *why, size_t whylen);
/* libcrypto's first queued error as text into BUF ("no PEM block found"
 * when there is none), and the queue cleared.  After crypto_dl_load(). */
void crypto_dl_error_text(char *buf, size_t len);

#define CRYPTO_DL_FUNCS(X)                                                            \
	X(ASN1_TIME_diff) X(ASN1_TIME_to_tm) X(ERR_clear_error) X(ERR_error_string_n) \
	X(ERR_get_error) X(EVP_PKEY_free) X(PEM_read_PrivateKey) X(PEM_read_X509)     \
	X(X509_check_private_key) X(X509_cmp_time) X(X509_free) X(X509_get0_notAfter) \
	X(X509_get0_notBefore) X(EVP_Digest) X(EVP_sha256) X(HMAC) X(PEM_read_X509_AUX)           \
	X(OPENSSL_sk_new_null) X(OPENSSL_sk_push) X(OPENSSL_sk_num) X(OPENSSL_sk_value)                \
	X(OPENSSL_sk_free) X(X509_verify_cert) X(X509_STORE_CTX_set0_trusted_stack)                    \
	X(X509_STORE_CTX_set_flags)

#ifdef MEMGRANT_LINKED_LIBS
#define sym_ASN1_TIME_diff ASN1_TIME_diff
#define sym_ASN1_TIME_to_tm ASN1_TIME_to_tm
#define sym_ERR_clear_error ERR_clear_error
#define sym_ERR_error_string_n ERR_error_string_n
#define sym_ERR_get_error ERR_get_error
#define sym_EVP_PKEY_free EVP_PKEY_free
#define sym_PEM_read_PrivateKey PEM_read_PrivateKey
#define sym_PEM_read_X509 PEM_read_X509
#define sym_X509_check_private_key X509_check_private_key
#define sym_X509_cmp_time X509_cmp_time
#define sym_X509_free X509_free
#define sym_X509_get0_notAfter X509_get0_notAfter
#define sym_X509_get0_notBefore X509_get0_notBefore
#define sym_EVP_Digest EVP_Digest
#define sym_EVP_sha256 EVP_sha256
#define sym_HMAC HMAC
#define sym_PEM_read_X509_AUX PEM_read_X509_AUX
#define sym_OPENSSL_sk_new_null OPENSSL_sk_new_null
#define sym_OPENSSL_sk_push OPENSSL_sk_push
#define sym_OPENSSL_sk_num OPENSSL_sk_num
#define sym_OPENSSL_sk_value OPENSSL_sk_value
#define sym_OPENSSL_sk_free OPENSSL_sk_free
#define sym_X509_verify_cert X509_verify_cert
#define sym_X509_STORE_CTX_set0_trusted_stack X509_STORE_CTX_set0_trusted_stack
#define sym_X509_STORE_CTX_set_flags X509_STORE_CTX_set_flags
#else
struct crypto_dl {
#define CRYPTO_DL_MEMBER(f) __typeof__(&f) f;
	CRYPTO_DL_FUNCS(CRYPTO_DL_MEMBER)
#undef CRYPTO_DL_MEMBER
};

const struct crypto_dl *crypto_dl_fns(void);

#define sym_ASN1_TIME_diff (crypto_dl_fns()->ASN1_TIME_diff)
#define sym_ASN1_TIME_to_tm (crypto_dl_fns()->ASN1_TIME_to_tm)
#define sym_ERR_clear_error (crypto_dl_fns()->ERR_clear_error)
#define sym_ERR_error_string_n (crypto_dl_fns()->ERR_error_string_n)
#define sym_ERR_get_error (crypto_dl_fns()->ERR_get_error)
#define sym_EVP_PKEY_free (crypto_dl_fns()->EVP_PKEY_free)
#define sym_PEM_read_PrivateKey (crypto_dl_fns()->PEM_read_PrivateKey)
#define sym_PEM_read_X509 (crypto_dl_fns()->PEM_read_X509)
#define sym_X509_check_private_key (crypto_dl_fns()->X509_check_private_key)
#define sym_X509_cmp_time (crypto_dl_fns()->X509_cmp_time)
#define sym_X509_free (crypto_dl_fns()->X509_free)
#define sym_X509_get0_notAfter (crypto_dl_fns()->X509_get0_notAfter)
#define sym_X509_get0_notBefore (crypto_dl_fns()->X509_get0_notBefore)
#define sym_EVP_Digest (crypto_dl_fns()->EVP_Digest)
#define sym_EVP_sha256 (crypto_dl_fns()->EVP_sha256)
#define sym_HMAC (crypto_dl_fns()->HMAC)
#define sym_PEM_read_X509_AUX (crypto_dl_fns()->PEM_read_X509_AUX)
#define sym_OPENSSL_sk_new_null (crypto_dl_fns()->OPENSSL_sk_new_null)
#define sym_OPENSSL_sk_push (crypto_dl_fns()->OPENSSL_sk_push)
#define sym_OPENSSL_sk_num (crypto_dl_fns()->OPENSSL_sk_num)
#define sym_OPENSSL_sk_value (crypto_dl_fns()->OPENSSL_sk_value)
#define sym_OPENSSL_sk_free (crypto_dl_fns()->OPENSSL_sk_free)
#define sym_X509_verify_cert (crypto_dl_fns()->X509_verify_cert)
#define sym_X509_STORE_CTX_set0_trusted_stack (crypto_dl_fns()->X509_STORE_CTX_set0_trusted_stack)
#define sym_X509_STORE_CTX_set_flags (crypto_dl_fns()->X509_STORE_CTX_set_flags)
#endif

#endif
