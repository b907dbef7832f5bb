/* SPDX-License-Identifier: MIT */
/*
 * The local REST API's parts, shared by api.c (connections, routing, start
 * and stop) and api_stream.c (event streams and the guard thread).  Not a
 * contract for anyone else: see api.h.
 */
#pragma once

#include "providers/api.h"
#include "providers/api_parse.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/engine/events.h"
#include "lib/json.h"
#include "providers/wire/message.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

#define API_THREADS 4                   /* MHD's pool; a handler may wait on an fsync */
#define API_LISTEN_BACKLOG 1024
#define API_OTHERS_MAX_DEFAULT 64       /* connections of all unprivileged uids together */
#define API_RESERVED 64                 /* on top: only for root and the API group */
#define API_UID_CONN_MAX 16             /* connections of one unprivileged uid */
#define API_OTHERS_STREAMS_MAX 32       /* event streams of all unprivileged uids */
#define API_UID_STREAMS_MAX 4           /* event streams of one unprivileged uid */
#define API_REQUEST_DEADLINE_MS 10000   /* a whole request, headers and body */
#define API_KEEPALIVE_MS 15000          /* ": keep-alive" after this much silence */

/* One accepted connection, from MHD_CONNECTION_NOTIFY_STARTED to _CLOSED. */
struct conn {
	struct conn *prev, *next;
	uint64_t id;       /* never 0, never reused: epoll's handle on it */
	struct MHD_Connection *c;
	int fd;
	uid_t uid;
	bool privileged;   /* root, the daemon's user or the API group */
	bool refused;      /* over its uid's share: answered 503, shut down */
	bool answering;    /* a response is queued or streaming: no deadline */
	bool cut;          /* shut down by the guard */
	uint64_t since_ms; /* accepted, or the previous answer ended */
	struct sse *sse;   /* the event stream it carries, or NULL */
};

struct api {
	struct MHD_Daemon *mhd;
	struct engine *e;
	struct engine_source *source; /* "local": the operator's */
	const struct mg_log *log;
	char *socket_path;
	_Atomic size_t body_limit;      /* replaced on reload (api_set_body_limit) */
	gid_t group_gid;
	bool have_group;
	unsigned others_max;

	pthread_mutex_t lock;              /* guards what follows */
	struct conn *conns;
	uint64_t next_id;
	uint64_t refused_since_log, refused_log_ms;
	unsigned n_others, n_streams_others;
	bool stopping;
	int epfd;                          /* suspended streams' sockets, and WAKEFD */
	int wakefd;
	pthread_t guard;
	bool guard_started;
};

/* Per-request state kept between libmicrohttpd's calls for one request. */
struct request {
	struct api_body body;
	bool may_write;
	uid_t uid;
};

struct sse {
	struct api *a;
	struct conn *conn;
	struct event_bus *bus;
	uint64_t after;
	char *grant;       /* only events about this grant id; NULL: all */
	char *pending;     /* formatted bytes not yet handed to MHD */
	size_t pending_len, pending_off;
	uint64_t last_sent_ms;
	bool finish_on_terminal; /* ?until=done: end after the grant's final status */
	bool done;
	bool counted;      /* in n_streams_others */
	bool suspended;    /* out of MHD's loop until resumed; under a->lock */
	bool peer_gone;    /* the client hung up while suspended */
};

/* Each takes the response text or JSON J (and frees it); MHD_NO on failure. */
MHD_Result_t api_send_text(struct MHD_Connection *c, unsigned status, const char *type, char *text);
MHD_Result_t api_send_json(struct MHD_Connection *c, unsigned status, json_t *j);
MHD_Result_t api_send_error(struct MHD_Connection *c, unsigned status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
struct conn *api_conn_of(struct MHD_Connection *c);

/* api_stream.c */
MHD_Result_t api_serve_events(struct api *a, struct MHD_Connection *c); /* GET /v1/events */
void api_on_published(void *arg);        /* the event bus's listener: resumes waiting streams */
void api_sse_resume_locked(struct sse *s); /* with a->lock held */
void api_guard_wake(struct api *a);      /* a deadline may have come nearer */
void *api_guard_main(void *arg);         /* the guard thread */
