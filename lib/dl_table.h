/* SPDX-License-Identifier: MIT */
/*
 * A table of functions from a shared library opened with dlopen() when first
 * needed, so that a process maps a library (and everything it depends on)
 * only when its configuration uses it: libcurl (lib/curl_dl.h), libcrypto
 * (lib/crypto_dl.h), libssl (lib/ssl_dl.h).
 *
 * dl_table_open() opens SONAME and resolves every name of NAMES into FNS:
 * 0, or -ELIBACC with WHY saying which library or which function is missing
 * and what dlerror() said; nothing is kept open on failure.
 */
#ifndef MEMGRANT_LIB_DL_TABLE_H
#define MEMGRANT_LIB_DL_TABLE_H

#include <stddef.h>
#include <stdint.h>

/*
 * DL_TABLE_NOTE(ident, json): an ELF note ".note.dlopen" (owner "FDO", type
 * 0x407c0c0a: the freedesktop.org format for libraries a program loads with
 * dlopen()) naming the sonames, so that packaging tools and initramfs
 * builders see them although no DT_NEEDED entry does.  JSON is a string
 * literal: an array of {"feature", "description", "priority", "soname": [...]}.
 * tests/s390/mkroot.sh reads it to pack those libraries.
 */
#define DL_TABLE_NOTE_TYPE 0x407c0c0a
#define DL_TABLE_NOTE(ident, json)                                                   \
	__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct { \
		uint32_t n_namesz, n_descsz, n_type;                                     \
		char name[4];                                                            \
		_Alignas(4) char desc[sizeof(json)];                                     \
	} ident = { 4, sizeof(json), DL_TABLE_NOTE_TYPE, "FDO", json }

int dl_table_open(const char *soname, const char *const *names, void **fns, size_t n, char *why, size_t whylen);

/*
 * DL_TABLE_LOADER(PREFIX, SONAME, FUNCS, LIBRARY): the loader of a table
 * struct PREFIX whose members FUNCS(X) names (lib/crypto_dl.h,
 * lib/ssl_dl.h).  It defines PREFIX_load(why, whylen), crypto_dl_load()
 * for instance: SONAME opened once per process (pthread_once), 0 or
 * -ELIBACC with WHY; and the table's accessor, crypto_dl_fns() for
 * instance: it loads first when nobody did, and stops the process naming
 * LIBRARY after a failed load (a caller that went on regardless: a bug,
 * stopped there rather than at a jump through a NULL pointer).  The table
 * is written once under pthread_once and only read afterwards.
 */
#define DL_TABLE_NAME_(f) #f,
#define DL_TABLE_SET_(f) t->f = (__typeof__(t->f))fns[i++];
#define DL_TABLE_LOADER(prefix, soname, FUNCS, library)                                                   \
	static const char *const prefix##_names[] = { FUNCS(DL_TABLE_NAME_) };                           \
	static struct prefix prefix##_table;                                                              \
	static int prefix##_result;                                                                       \
	static char prefix##_why[256];                                                                    \
	static pthread_once_t prefix##_once = PTHREAD_ONCE_INIT;                                          \
                                                                                                          \
	static void prefix##_open(void)                                                                   \
	{                                                                                                 \
		enum { N = sizeof(prefix##_names) / sizeof(prefix##_names[0]) };                          \
		struct prefix *t = &prefix##_table;                                                       \
		void *fns[N];                                                                             \
		size_t i = 0;                                                                             \
                                                                                                          \
		prefix##_result = dl_table_open(soname, prefix##_names, fns, N, prefix##_why,             \
						sizeof(prefix##_why));                                     \
		if (prefix##_result < 0)                                                                  \
			return;                                                                           \
		FUNCS(DL_TABLE_SET_)                                                                      \
	}                                                                                                 \
                                                                                                          \
	int prefix##_load(char *why, size_t whylen)                                                       \
	{                                                                                                 \
		pthread_once(&prefix##_once, prefix##_open);                                              \
		if (prefix##_result < 0 && why && whylen)                                                 \
			snprintf(why, whylen, "%s", prefix##_why);                                        \
		return prefix##_result;                                                                   \
	}                                                                                                 \
                                                                                                          \
	const struct prefix *prefix##_fns(void)                                                           \
	{                                                                                                 \
		pthread_once(&prefix##_once, prefix##_open);                                              \
		if (prefix##_result < 0) {                                                                \
			fprintf(stderr, "memgrant: a " library " function was called although " library " did " \
				"not load: %s\n", prefix##_why);                                         \
			abort();                                                                          \
		}                                                                                         \
		return &prefix##_table;                                                                   \
	}

#endif
