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

#include "agent/engine/engine.h"
#include "lib/json.h"
#include "lib/wire/message.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_Result_t;
#else
typedef enum MHD_Result MHD_Result_t;
#endif

#define API_LISTEN_BACKLOG 1024
#define API_OTHERS_MAX_DEFAULT 64       /* connections of all unprivileged uids together */
#define API_REQUEST_DEADLINE_MS 10000   /* a whole request, headers and body */
#define API_KEEPALIVE_MS 15000          /* ": keep-alive" after this much silence */
#define API_HEAD_PEEK 16384             /* a head this long is handed to MHD unfinished */
#define API_ACCEPT_BATCH 32             /* accepts per guard round (< any pending cap) */

/* Who is asking, from SO_PEERCRED: each class has its own connection slots,
 * so none can take another's (api_conn.c). */
enum api_class {
	API_ROOT,     /* uid 0 */
	API_OPERATOR, /* the daemon's user and members of the API group */
	API_OTHER,    /* everyone else the socket's mode lets in */
	API_CLASSES
};

struct api_limits {
	unsigned conns;       /* connections served by MHD, all uids of the class */
	unsigned uid_conns;   /* ... of one uid */
	unsigned streams;     /* /v1/events streams, all uids of the class */
	unsigned uid_streams; /* ... of one uid */
	unsigned pending;     /* accepted, request head not in yet */
	const char *who;      /* for messages: "root", "unprivileged users", ... */
};

enum conn_state {
	CONN_PENDING, /* ours: accepted, waiting for a whole request head */
	CONN_MHD      /* handed to MHD (bound once MHD_CONNECTION_NOTIFY_STARTED came) */
};

/* One accepted connection, from accept() to MHD_CONNECTION_NOTIFY_CLOSED. */
struct conn {
	struct conn *prev, *next;
	uint64_t id;       /* never 0, never reused: epoll's handle on it */
	struct MHD_Connection *c; /* NULL until MHD has it */
	int fd;
	uid_t uid;
	enum api_class cls;
	enum conn_state state;
	bool privileged;   /* root, the daemon's user or the API group: may write */
	bool counted;      /* holds one of its class's MHD slots */
	bool fresh;        /* handed to MHD with a whole head: not evictable until answered */
	bool answering;    /* a response is queued or streaming: no deadline */
	bool cut;          /* shut down by the guard or evicted */
	bool served;       /* answered at least one request (an idle keep-alive now) */
	bool handoff;      /* its head is in: the guard hands it to MHD once unlocked */
	uint64_t accepted_ms;
	uint64_t since_ms; /* accepted, or the previous answer ended */
	struct sse *sse;   /* the event stream it carries, or NULL */
};

/* At most one log line per 10 s per kind; the rest are counted. */
struct api_ratelog {
	uint64_t last_ms, since;
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
	struct api_limits lim[API_CLASSES];
	int listen_fd;                     /* accepted by the guard, not by MHD */
	char *peek;                        /* API_HEAD_PEEK bytes: the guard's */

	pthread_mutex_t lock;              /* guards what follows */
	struct conn *conns;                /* newest first */
	uint64_t next_id;
	unsigned n_conns[API_CLASSES], n_streams[API_CLASSES], n_pending[API_CLASSES];
	struct api_ratelog refused_log, evicted_log, deadline_log;
	bool stopping;                     /* streams end once drained */
	bool guard_exit;                   /* the guard leaves: streams drained */
	int epfd;                          /* WAKEFD, the listening socket, pending
					    * connections, suspended streams */
	int wakefd;
	pthread_t guard;
	bool guard_started;
};

#define API_EPOLL_LISTEN UINT64_MAX        /* epoll data of the listening socket */
#define API_EPOLL_MHD (UINT64_MAX - 1)     /* epoll data of MHD's own epoll set */

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
	bool counted;      /* in a->n_streams[cls] */
	enum api_class cls;
	bool suspended;    /* out of MHD's loop until resumed; under a->lock */
	bool peer_gone;    /* the client hung up while suspended */
};

/* Each takes the response text or JSON J (and frees it); MHD_NO on failure. */
MHD_Result_t api_send_text(struct MHD_Connection *c, unsigned status, const char *type, char *text);
MHD_Result_t api_send_json(struct MHD_Connection *c, unsigned status, json_t *j);
MHD_Result_t api_send_error(struct MHD_Connection *c, unsigned status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
struct conn *api_conn_of(struct MHD_Connection *c);

/* api_conn.c: admission */
void api_limits_init(struct api *a, unsigned others_max);
unsigned api_limits_total(const struct api *a); /* MHD slots of all classes */
void api_accept_some(struct api *a);     /* the listening socket is readable */
void api_handoff(struct api *a);         /* without the lock: promoted connections to MHD */
void api_pending_event_locked(struct api *a, struct conn *n, uint32_t events);
void api_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe);
void api_conn_forget_locked(struct api *a, struct conn *n); /* MHD has no socket of it */
void api_conn_close_pending_locked(struct api *a, struct conn *n, const char *http_status, const char *why);
void api_ratelog(struct api *a, struct api_ratelog *rl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void api_ratelog_locked(struct api *a, struct api_ratelog *rl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* api_stream.c */
MHD_Result_t api_serve_events(struct api *a, struct MHD_Connection *c); /* GET /v1/events */
void api_on_published(void *arg);        /* the event bus's listener: resumes waiting streams */
void api_sse_resume_locked(struct sse *s); /* with a->lock held */
void api_guard_wake(struct api *a);      /* a deadline may have come nearer */
void *api_guard_main(void *arg);         /* the guard thread, MHD's loop too */
