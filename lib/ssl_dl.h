/* SPDX-License-Identifier: MIT */
/*
 * libssl, loaded with dlopen() the first time it is needed: the HTTPS
 * provider has the TLS context libcurl makes for each connection verify the
 * server with its CA certificates, parsed once (providers/https_ca.c).  libcurl built on OpenSSL 3
 * has mapped this very library already; loading it here only resolves its
 * functions.  An agent without the HTTPS provider never maps it.
 *
 * As lib/crypto_dl.h: the code calls sym_NAME, which goes through the loaded
 * table (ssl_dl_fns() loads it first when nobody did, and stops the process
 * with the reason after a failed load), or is NAME in a build configured
 * with --enable-linked-libs.
 * - ssl_dl_load(): loads it once per process (pthread_once, safe from any
 *   thread); 0, or -ELIBACC with WHY naming the library and the reason.
 *   Call it before the first of the functions below; a failed load is not
 *   retried.
 * The soname is in lib/dlopen.list (MEMGRANT_SSL_SONAME).  The table is
 * written once under pthread_once and only read afterwards.
 */
#ifndef MEMGRANT_LIB_SSL_DL_H
#define MEMGRANT_LIB_SSL_DL_H

#include <openssl/opensslv.h>
#include <openssl/ssl.h>
#include <stddef.h>

#if OPENSSL_VERSION_MAJOR < 3
#error "lib/dlopen.list names libssl.so.3: OpenSSL 3 headers are needed"
#endif

int ssl_dl_load(char *why, size_t whylen);

#define SSL_DL_FUNCS(X) X(SSL_CTX_set_cert_verify_callback)

#ifdef MEMGRANT_LINKED_LIBS
#define sym_SSL_CTX_set_cert_verify_callback SSL_CTX_set_cert_verify_callback
#else
struct ssl_dl {
#define SSL_DL_MEMBER(f) __typeof__(&f) f;
	SSL_DL_FUNCS(SSL_DL_MEMBER)
#undef SSL_DL_MEMBER
};

const struct ssl_dl *ssl_dl_fns(void);

#define sym_SSL_CTX_set_cert_verify_callback (ssl_dl_fns()->SSL_CTX_set_cert_verify_callback)
#endif

#endif
