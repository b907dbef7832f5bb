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

#endif
