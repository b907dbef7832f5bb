/* SPDX-License-Identifier: MIT */
/*
 * libcurl, loaded with dlopen() the first time a configuration needs it (the
 * HTTPS provider, a webhook, a URL check, memgrantctl talking to the daemon):
 * an agent with the local API only never maps libcurl nor the TLS, Kerberos,
 * LDAP and SSH libraries it brings.  memgrantd and memgrantctl do not link it.
 *
 * The code calls each function by an explicit name, sym_NAME
 * (sym_curl_easy_setopt(...)): libcurl's own names keep their meaning, and
 * curl.h's type checks of curl_easy_setopt() and friends stay on.  A build
 * configured with --enable-linked-libs links libcurl, libcrypto and libssl instead
 * (sym_NAME is NAME), so that gcc checks every option's argument type there;
 * CI builds it (.ci/run).
 * - curl_dl_load(): loads libcurl and runs curl_global_init() once per
 *   process (pthread_once, safe from any thread); 0, or -ELIBACC with WHY
 *   naming the library and dlerror()'s reason.  Call it where the feature is
 *   configured, so that a missing libcurl is a clear error there; a failed
 *   load is not retried.
 * - every sym_NAME goes through curl_dl_fns(), which loads the library
 *   first when nobody did: no call can reach a function before the load.
 *   After a failed load it stops the process with the load's reason (a
 *   caller that skipped curl_dl_load()'s answer is a bug, not an input).
 * The library's soname is in lib/dlopen.list (the Makefile passes it as
 * MEMGRANT_CURL_SONAME; packaging reads the same line).  The table is
 * written once under pthread_once and only read afterwards: the dynamic
 * linker's work, deferred, not mutable state.
 */
#ifndef MEMGRANT_LIB_CURL_DL_H
#define MEMGRANT_LIB_CURL_DL_H

#include <curl/curl.h>
#include <stddef.h>

int curl_dl_load(char *why, size_t whylen);

#define CURL_DL_FUNCS(X)                                                                          \
	X(curl_global_init) X(curl_global_cleanup) X(curl_easy_init) X(curl_easy_cleanup)         \
	X(curl_easy_setopt) X(curl_easy_getinfo) X(curl_easy_perform) X(curl_easy_reset)          \
	X(curl_easy_strerror) X(curl_easy_escape) X(curl_free) X(curl_slist_append)               \
	X(curl_slist_free_all) X(curl_multi_init) X(curl_multi_cleanup) X(curl_multi_add_handle)  \
	X(curl_multi_remove_handle) X(curl_multi_perform) X(curl_multi_poll) X(curl_multi_wakeup) \
	X(curl_multi_info_read) X(curl_multi_setopt) X(curl_url) X(curl_url_cleanup)              \
	X(curl_url_get) X(curl_url_set) X(curl_url_strerror) X(curl_share_init)                   \
	X(curl_share_setopt) X(curl_share_cleanup) X(curl_share_strerror) X(curl_version_info)

#ifdef MEMGRANT_LINKED_LIBS
#define sym_curl_global_init curl_global_init
#define sym_curl_global_cleanup curl_global_cleanup
#define sym_curl_easy_init curl_easy_init
#define sym_curl_easy_cleanup curl_easy_cleanup
#define sym_curl_easy_setopt curl_easy_setopt
#define sym_curl_easy_getinfo curl_easy_getinfo
#define sym_curl_easy_perform curl_easy_perform
#define sym_curl_easy_reset curl_easy_reset
#define sym_curl_easy_strerror curl_easy_strerror
#define sym_curl_easy_escape curl_easy_escape
#define sym_curl_free curl_free
#define sym_curl_slist_append curl_slist_append
#define sym_curl_slist_free_all curl_slist_free_all
#define sym_curl_multi_init curl_multi_init
#define sym_curl_multi_cleanup curl_multi_cleanup
#define sym_curl_multi_add_handle curl_multi_add_handle
#define sym_curl_multi_remove_handle curl_multi_remove_handle
#define sym_curl_multi_perform curl_multi_perform
#define sym_curl_multi_poll curl_multi_poll
#define sym_curl_multi_wakeup curl_multi_wakeup
#define sym_curl_multi_info_read curl_multi_info_read
#define sym_curl_multi_setopt curl_multi_setopt
#define sym_curl_url curl_url
#define sym_curl_url_cleanup curl_url_cleanup
#define sym_curl_url_get curl_url_get
#define sym_curl_url_set curl_url_set
#define sym_curl_url_strerror curl_url_strerror
#define sym_curl_share_init curl_share_init
#define sym_curl_share_setopt curl_share_setopt
#define sym_curl_share_cleanup curl_share_cleanup
#define sym_curl_share_strerror curl_share_strerror
#define sym_curl_version_info curl_version_info
#else
struct curl_dl {
#define CURL_DL_MEMBER(f) __typeof__(&f) f;
	CURL_DL_FUNCS(CURL_DL_MEMBER)
#undef CURL_DL_MEMBER
};

const struct curl_dl *curl_dl_fns(void);

#define sym_curl_global_init (curl_dl_fns()->curl_global_init)
#define sym_curl_global_cleanup (curl_dl_fns()->curl_global_cleanup)
#define sym_curl_easy_init (curl_dl_fns()->curl_easy_init)
#define sym_curl_easy_cleanup (curl_dl_fns()->curl_easy_cleanup)
#define sym_curl_easy_setopt (curl_dl_fns()->curl_easy_setopt)
#define sym_curl_easy_getinfo (curl_dl_fns()->curl_easy_getinfo)
#define sym_curl_easy_perform (curl_dl_fns()->curl_easy_perform)
#define sym_curl_easy_reset (curl_dl_fns()->curl_easy_reset)
#define sym_curl_easy_strerror (curl_dl_fns()->curl_easy_strerror)
#define sym_curl_easy_escape (curl_dl_fns()->curl_easy_escape)
#define sym_curl_free (curl_dl_fns()->curl_free)
#define sym_curl_slist_append (curl_dl_fns()->curl_slist_append)
#define sym_curl_slist_free_all (curl_dl_fns()->curl_slist_free_all)
#define sym_curl_multi_init (curl_dl_fns()->curl_multi_init)
#define sym_curl_multi_cleanup (curl_dl_fns()->curl_multi_cleanup)
#define sym_curl_multi_add_handle (curl_dl_fns()->curl_multi_add_handle)
#define sym_curl_multi_remove_handle (curl_dl_fns()->curl_multi_remove_handle)
#define sym_curl_multi_perform (curl_dl_fns()->curl_multi_perform)
#define sym_curl_multi_poll (curl_dl_fns()->curl_multi_poll)
#define sym_curl_multi_wakeup (curl_dl_fns()->curl_multi_wakeup)
#define sym_curl_multi_info_read (curl_dl_fns()->curl_multi_info_read)
#define sym_curl_multi_setopt (curl_dl_fns()->curl_multi_setopt)
#define sym_curl_url (curl_dl_fns()->curl_url)
#define sym_curl_url_cleanup (curl_dl_fns()->curl_url_cleanup)
#define sym_curl_url_get (curl_dl_fns()->curl_url_get)
#define sym_curl_url_set (curl_dl_fns()->curl_url_set)
#define sym_curl_url_strerror (curl_dl_fns()->curl_url_strerror)
#define sym_curl_share_init (curl_dl_fns()->curl_share_init)
#define sym_curl_share_setopt (curl_dl_fns()->curl_share_setopt)
#define sym_curl_share_cleanup (curl_dl_fns()->curl_share_cleanup)
#define sym_curl_share_strerror (curl_dl_fns()->curl_share_strerror)
#define sym_curl_version_info (curl_dl_fns()->curl_version_info)
#endif

#endif
