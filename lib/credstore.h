/* SPDX-License-Identifier: MIT */
/*
 * The credential files of one memgrantd (TLS keys, certificates, CA, bearer
 * token, webhook secrets) and how the agent reads them (docs/security.md,
 * "Credentials").
 *
 * The list is fixed at start, by path.  A file marked served is read
 * through FETCH (the privileged helper's credential channel, which hands
 * out a read-only descriptor of file INDEX of the list); any other file,
 * and a path not in the list (a reload named a new one), is opened by the
 * agent itself, as its own user.  cred_read() returns the whole file.
 *
 * The generation counts reloads (SIGHUP): a reader that cached a file reads
 * it again when the generation moved, so new files in place take effect at
 * the next connection without a restart.
 *
 * Thread-safe once built: the list never changes, the generation is atomic,
 * FETCH must be.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define CRED_FILE_MAX (1u << 20) /* a certificate chain, a key, a token: far less */

struct cred_file {
	char *key;   /* "providers.https.key_file", "hooks[0].secret_file": for messages */
	char *path;
	bool served; /* read through fetch */
};

typedef int (*cred_fetch_fn)(void *ctx, unsigned index, int *fd);

struct cred_store {
	struct cred_file *files;
	size_t n;
	cred_fetch_fn fetch; /* NULL: every file is read directly */
	void *fetch_ctx;
	atomic_uint generation;
};

/* Adds KEY = PATH to the list (a path already there is not added twice). */
int cred_store_add(struct cred_store *s, const char *key, const char *path);
void cred_store_free(struct cred_store *s); /* the list; S itself is the caller's */

/* The entry for PATH, or NULL. */
const struct cred_file *cred_store_find(const struct cred_store *s, const char *path);

/* The whole of PATH (at most MAX bytes, -EFBIG beyond) in *OUT (malloc'd,
 * NUL-terminated, LEN without the NUL), through the helper when PATH is a
 * served file of S (S may be NULL).  -errno as open(2) and read(2) give
 * them; -EPIPE when the helper is gone. */
int cred_read(struct cred_store *s, const char *path, size_t max, char **out, size_t *len);

/* Wipes and frees a buffer cred_read() filled. */
void cred_free(char *buf, size_t len);

static inline unsigned cred_generation(struct cred_store *s)
{
	return s ? atomic_load(&s->generation) : 0;
}

static inline void cred_store_bump(struct cred_store *s)
{
	if (s)
		atomic_fetch_add(&s->generation, 1);
}
