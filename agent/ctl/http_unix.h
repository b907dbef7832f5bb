/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 over a Unix socket, as much as memgrantctl needs to talk to
 * memgrantd's local API, so that memgrantctl maps no HTTP library (libcurl
 * and its TLS, Kerberos, LDAP and SSH libraries) for a status.
 * - hu_connect(): a connected, non-blocking socket in *FD, or -errno of the
 *   socket or the connect (EAGAIN: the listen queue is full).
 * - hu_exchange(): sends RQ (one request, "Connection: close") and reads the
 *   answer: *STATUS, and the body in pieces to RQ->ON_DATA (returning
 *   non-zero stops: -ECANCELED).  0 when the whole answer came; -ETIMEDOUT
 *   after RQ->TIMEOUT_MS (-1: none) without a byte; -EINTR when RQ->INTR_FD
 *   (-1: none) became readable; -EBADMSG for what is not HTTP;
 *   -ECONNRESET when the stream ended early; else -errno.  Does not close FD.
 */
#pragma once

#include <stddef.h>

typedef int (*hu_data_fn)(const char *data, size_t n, void *cls);

struct hu_request {
	const char *method, *path;
	const char *body; /* JSON, or NULL */
	int timeout_ms;
	int intr_fd;
	hu_data_fn on_data;
	void *cls;
};

int hu_connect(const char *path, int *fd);
int hu_exchange(int fd, const struct hu_request *rq, long *status);
