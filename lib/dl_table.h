/* SPDX-License-Identifier: MIT */
/*
 * A table of functions from a shared library opened with dlopen() when first
 * needed, so that a process maps a library (and everything it depends on)
 * only when its configuration uses it: libcurl (lib/curl_dl.h), libcrypto
 * (lib/crypto_dl.h).
 *
 * dl_table_open() opens SONAME and resolves every name of NAMES into FNS:
 * 0, or -ELIBACC with WHY saying which library or which function is missing
 * and what dlerror() said; nothing is kept open on failure.
 */
#ifndef MEMGRANT_LIB_DL_TABLE_H
#define MEMGRANT_LIB_DL_TABLE_H

#include <stddef.h>

int dl_table_open(const char *soname, const char *const *names, void **fns, size_t n, char *why, size_t whylen);

#endif
