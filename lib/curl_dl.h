/* SPDX-License-Identifier: MIT */
/*
 * libcurl, loaded with dlopen() the first time a configuration needs it (the
 * HTTPS provider, a webhook, a URL check, memgrantctl talking to the daemon):
 * an agent with the local API only never maps libcurl nor the TLS, Kerberos,
 * LDAP and SSH libraries it brings.  memgrantd and memgrantctl do not link it.
 *
 * Include this instead of <curl/curl.h>: the curl_* functions below become
 * calls through the loaded table, so the code calling them reads as before.
 * - curl_dl_load(): loads libcurl and runs curl_global_init() once per
 *   process (pthread_once, safe from any thread); 0, or -ELIBACC with WHY
 *   naming the library and dlerror()'s reason.  Call it where the feature is
 *   configured, so that a missing libcurl is a clear error there; a failed
 *   load is not retried.
 * - curl_dl_fns(): the table; only after curl_dl_load() returned 0.
 * The table is written once under pthread_once and only read afterwards:
 * the dynamic linker's work, deferred, not mutable state.
 */
#ifndef MEMGRANT_LIB_CURL_DL_H
#define MEMGRANT_LIB_CURL_DL_H

/* curl.h's type-checking macros would wrap the names redefined below */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <stddef.h>

#ifndef MEMGRANT_CURL_SONAME
#define MEMGRANT_CURL_SONAME "libcurl.so.4"
#endif

#define CURL_DL_FUNCS(X)                                                                                  \
	X(curl_global_init) X(curl_global_cleanup) X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_setopt) \
	X(curl_easy_getinfo) X(curl_easy_perform) X(curl_easy_reset) X(curl_easy_strerror)                  \
	X(curl_easy_escape) X(curl_free) X(curl_slist_append) X(curl_slist_free_all) X(curl_multi_init)    \
	X(curl_multi_cleanup) X(curl_multi_add_handle) X(curl_multi_remove_handle) X(curl_multi_perform)   \
	X(curl_multi_poll) X(curl_multi_wakeup) X(curl_multi_info_read) X(curl_multi_setopt) X(curl_url)   \
	X(curl_url_cleanup) X(curl_url_get) X(curl_url_set) X(curl_url_strerror) X(curl_share_init)        \
	X(curl_share_setopt) X(curl_share_cleanup) X(curl_share_strerror)

struct curl_dl {
#define CURL_DL_MEMBER(f) __typeof__(&f) f;
	CURL_DL_FUNCS(CURL_DL_MEMBER)
#undef CURL_DL_MEMBER
};

int curl_dl_load(char *why, size_t whylen);
const struct curl_dl *curl_dl_fns(void);

#ifndef CURL_DL_IMPL
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#undef curl_share_setopt
#define curl_global_init (curl_dl_fns()->curl_global_init)
#define curl_global_cleanup (curl_dl_fns()->curl_global_cleanup)
#define curl_easy_init (curl_dl_fns()->curl_easy_init)
#define curl_easy_cleanup (curl_dl_fns()->curl_easy_cleanup)
#define curl_easy_setopt (curl_dl_fns()->curl_easy_setopt)
#define curl_easy_getinfo (curl_dl_fns()->curl_easy_getinfo)
#define curl_easy_perform (curl_dl_fns()->curl_easy_perform)
#define curl_easy_reset (curl_dl_fns()->curl_easy_reset)
#define curl_easy_strerror (curl_dl_fns()->curl_easy_strerror)
#define curl_easy_escape (curl_dl_fns()->curl_easy_escape)
#define curl_free (curl_dl_fns()->curl_free)
#define curl_slist_append (curl_dl_fns()->curl_slist_append)
#define curl_slist_free_all (curl_dl_fns()->curl_slist_free_all)
#define curl_multi_init (curl_dl_fns()->curl_multi_init)
#define curl_multi_cleanup (curl_dl_fns()->curl_multi_cleanup)
#define curl_multi_add_handle (curl_dl_fns()->curl_multi_add_handle)
#define curl_multi_remove_handle (curl_dl_fns()->curl_multi_remove_handle)
#define curl_multi_perform (curl_dl_fns()->curl_multi_perform)
#define curl_multi_poll (curl_dl_fns()->curl_multi_poll)
#define curl_multi_wakeup (curl_dl_fns()->curl_multi_wakeup)
#define curl_multi_info_read (curl_dl_fns()->curl_multi_info_read)
#define curl_multi_setopt (curl_dl_fns()->curl_multi_setopt)
#define curl_url (curl_dl_fns()->curl_url)
#define curl_url_cleanup (curl_dl_fns()->curl_url_cleanup)
#define curl_url_get (curl_dl_fns()->curl_url_get)
#define curl_url_set (curl_dl_fns()->curl_url_set)
#define curl_url_strerror (curl_dl_fns()->curl_url_strerror)
#define curl_share_init (curl_dl_fns()->curl_share_init)
#define curl_share_setopt (curl_dl_fns()->curl_share_setopt)
#define curl_share_cleanup (curl_dl_fns()->curl_share_cleanup)
#define curl_share_strerror (curl_dl_fns()->curl_share_strerror)
#endif

#endif
