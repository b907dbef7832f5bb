/* SPDX-License-Identifier: MIT */
/*
 * The local REST API: libmicrohttpd on a Unix socket.
 *
 * The socket is created here with mode SOCKET_MODE and group GROUP; every
 * request is attributed with SO_PEERCRED: root, the daemon's own user and
 * members of GROUP may change things (POST), anyone who can connect may read.
 * Request bodies above BODY_LIMIT bytes are refused with 413.  Errors are
 * {"error": {"code": ..., "message": ...}}.
 *
 * Event-driven (a small pool of epoll threads, event streams suspended while
 * idle), so neither slow clients nor many /v1/events followers hold threads.
 * Connections are admitted per class of peer (root, the daemon's user and
 * GROUP, others), each with slots of its own and a share per uid, and take a
 * slot only once their request head is in (api_conn.c); a whole request
 * must arrive within 10 s (docs/operations.md, "Local API limits"; the API
 * itself: docs/api/local.openapi.yaml).
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "agent/engine/engine.h"
#include "lib/log.h"

struct api_params {
	const char *socket_path;
	int socket_mode;      /* 0660 */
	const char *group;    /* NULL or "": no group access */
	size_t body_limit;    /* bytes */
	unsigned max_connections; /* of all unprivileged uids together; 0: 64 */
};

struct api;

/* The source name of requests that arrive here (ENGINE_SOURCE_OPERATOR). */
#define API_SOURCE "local"

int api_start(const struct api_params *p, struct engine *e, const struct mg_log *log, struct api **out);
/* A new body limit for the requests that arrive from now on (reload). */
void api_set_body_limit(struct api *a, size_t limit);
void api_stop(struct api *a);
