/* SPDX-License-Identifier: MIT */
/*
 * Small helpers every memgrant module uses: cleanup attributes, checked
 * string comparison, array sizes.  Header-only; no state.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline bool streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static inline bool startswith(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* qsort()/bsearch() order of uint64_t values. */
static inline int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno; /* close() must not clobber the caller's errno */
		close(*fd);
		errno = saved;
	}
}

static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Hand ownership out of a _cleanup_ variable. */
#define TAKE_PTR(p)                                                            \
	({                                                                     \
		__typeof__(p) _p = (p);                                        \
		(p) = NULL;                                                    \
		_p;                                                            \
	})
#define TAKE_FD(fd)                                                            \
	({                                                                     \
		int _fd = (fd);                                                \
		(fd) = -1;                                                     \
		_fd;                                                           \
	})

/* errno name for messages ("EBUSY"); "E?" for values it does not know. */
const char *errno_name(int err);

/* Formats a message into ERR (may be NULL or LEN 0: nothing is written) and
 * returns CODE, so that `return errbuf_set(err, len, -EINVAL, "...")` both
 * explains and fails. */
int errbuf_set(char *err, size_t len, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
