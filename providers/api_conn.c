/* SPDX-License-Identifier: MIT */
/*
 * The local REST API's admission: who may hold which connection.
 *
 * The guard thread accepts on the listening socket itself (MHD never sees
 * it) and attributes each connection to its peer's uid (SO_PEERCRED) and
 * class: root, the operators (the daemon's user and the API group, by the
 * peer's own gid or groups: SO_PEERGROUPS), or
 * everyone else.  Each class has slots of its own, so no uid outside it
 * can take them; within a class each uid has a share (api_limits_init).
 *
 * A connection first waits here, "pending", until its whole request head
 * is in the socket (MSG_PEEK, no byte read): only then is it handed to MHD
 * (MHD_add_connection) and takes a slot.  A slow sender (slowloris) never
 * takes a slot; when its class's pending list is full, the oldest pending
 * connection of the uid with the most of them makes room (503, closed), so
 * a client that sends its request at once always gets through.  A ready
 * connection over its uid's or class's slots evicts an idle one (a kept-
 * alive connection between requests, or a body still trickling) of that
 * uid, or of the class's most-connected uid; when all are busy answering it
 * is refused with 503 and a reason.  Refusals, evictions and deadlines are
 * logged at most once per 10 s per kind.
 */
#include "providers/api_int.h"
#include "lib/timeutil.h"
#include "lib/util.h"

#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void api_limits_init(struct api *a, unsigned others_max)
{
	/* root: its own 32, half of them for requests whatever it follows */
	a->lim[API_ROOT] = (struct api_limits){ 32, 32, 16, 16, 64, "root" };
	a->lim[API_OPERATOR] = (struct api_limits){ 64, 16, 32, 8, 64, "the daemon's user and the API group" };
	a->lim[API_OTHER] = (struct api_limits){ others_max, 16, 32, 4, 64, "unprivileged users" };
	if (a->lim[API_OTHER].uid_conns > others_max)
		a->lim[API_OTHER].uid_conns = others_max;
}

unsigned api_limits_total(const struct api *a)
{
	unsigned n = 0;

	for (int k = 0; k < API_CLASSES; k++)
		n += a->lim[k].conns;
	return n;
}

static void ratelog_va_locked(struct api *a, struct api_ratelog *rl, const char *fmt, va_list ap)
{
	uint64_t now = mono_ms();
	char msg[512];

	rl->since++;
	if (rl->last_ms != 0 && now - rl->last_ms < 10000)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	log_warn(a->log, "api: %s (%llu more like it since the last such line)", msg,
		 (unsigned long long)(rl->since - 1));
	rl->since = 0;
	rl->last_ms = now;
}

/* With a->lock held: the line is rare (once per 10 s), the lock short. */
void api_ratelog_locked(struct api *a, struct api_ratelog *rl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ratelog_va_locked(a, rl, fmt, ap);
	va_end(ap);
}

void api_ratelog(struct api *a, struct api_ratelog *rl, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&a->lock);
	va_start(ap, fmt);
	ratelog_va_locked(a, rl, fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&a->lock);
}

/* --- who is asking -------------------------------------------------------- */

/* The peer's groups as the kernel holds them for it (SO_PEERGROUPS, the
 * supplementary groups when it connected): the same credentials the socket
 * file's mode was checked against, read without the user database (NSS
 * modules, userdb), so a connecting loop costs no lookup and loads nothing. */
static bool peer_in_group(int fd, gid_t gid)
{
	gid_t small[64];
	_cleanup_free_ gid_t *big = NULL;
	gid_t *groups = small;
	socklen_t len = sizeof(small);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0) {
		if (errno != ERANGE || len == 0 || !(big = malloc(len)))
			return false;
		groups = big;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
			return false;
	}
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == gid)
			return true;
	return false;
}

static enum api_class class_of(const struct api *a, int fd, uid_t uid, gid_t gid)
{
	if (uid == 0)
		return API_ROOT;
	if (uid == geteuid())
		return API_OPERATOR;
	if (!a->have_group)
		return API_OTHER;
	return gid == a->group_gid || peer_in_group(fd, a->group_gid) ? API_OPERATOR : API_OTHER;
}

/* --- the connection list --------------------------------------------------- */

struct conn *api_conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static void unlink_locked(struct api *a, struct conn *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		a->conns = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->prev = n->next = NULL;
}

static void uncount_locked(struct api *a, struct conn *n)
{
	if (n->counted) {
		a->n_conns[n->cls]--;
		n->counted = false;
	}
}

void api_conn_forget_locked(struct api *a, struct conn *n)
{
	uncount_locked(a, n);
	unlink_locked(a, n);
	free(n);
}

/* Writes an HTTP answer straight to a socket MHD does not have (or has not
 * read from): what a refused or evicted client reads. */
static void say_http(int fd, const char *status, const char *code, const char *message)
{
	char body[512], msg[1024];
	int bl, ml;

	bl = snprintf(body, sizeof(body), "{\"error\": {\"code\": \"%s\", \"message\": \"%s\"}}\n", code, message);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		return;
	ml = snprintf(msg, sizeof(msg),
		      "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		      "Content-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n%s",
		      status, bl, body);
	if (ml > 0 && (size_t)ml < sizeof(msg))
		(void)!send(fd, msg, (size_t)ml, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Ends a connection that is still ours (pending): answer, close, forget. */
void api_conn_close_pending_locked(struct api *a, struct conn *n, const char *http_status, const char *why)
{
	if (http_status)
		say_http(n->fd, http_status, http_status[0] == '4' ? "ETIMEDOUT" : "EBUSY", why);
	a->n_pending[n->cls]--;
	unlink_locked(a, n);
	close(n->fd); /* leaves the guard's epoll with it */
	free(n);
}

/* The oldest of CANDIDATES (a predicate) among the connections of class
 * CLS, of UID when ANY_UID is false, else of the uid that has the most of
 * them (ties: the one whose candidate is oldest). */
static struct conn *pick_victim_locked(struct api *a, enum api_class cls, uid_t uid, bool any_uid,
				       bool (*candidate)(const struct conn *))
{
	struct {
		uid_t uid;
		unsigned count;
		struct conn *oldest;
	} per[128];
	unsigned used = 0, best = UINT32_MAX;

	for (struct conn *i = a->conns; i; i = i->next) {
		unsigned k;
		if (i->cls != cls || !candidate(i) || (!any_uid && i->uid != uid))
			continue;
		for (k = 0; k < used && per[k].uid != i->uid; k++)
			;
		if (k == used) {
			if (used == ARRAY_SIZE(per))
				continue;
			per[used++] = (typeof(per[0])){ i->uid, 0, NULL };
		}
		per[k].count++;
		per[k].oldest = i; /* the list is newest first */
	}
	for (unsigned k = 0; k < used; k++)
		if (best == UINT32_MAX || per[k].count > per[best].count ||
		    (per[k].count == per[best].count && per[k].oldest->accepted_ms < per[best].oldest->accepted_ms))
			best = k;
	return best == UINT32_MAX ? NULL : per[best].oldest;
}

static bool is_pending(const struct conn *n)
{
	return n->state == CONN_PENDING;
}

/* Holds a slot without using it: between requests, or its body still
 * trickling.  Not one that came with a whole head and was not answered yet,
 * not an event stream, not one MHD has not taken up. */
static bool is_idle(const struct conn *n)
{
	return n->state == CONN_MHD && n->c && n->counted && !n->answering && !n->fresh && !n->sse && !n->cut;
}

static unsigned uid_conns_locked(struct api *a, const struct conn *n)
{
	unsigned same = 0;

	for (struct conn *i = a->conns; i; i = i->next)
		if (i->counted && i->uid == n->uid && i->cls == n->cls)
			same++;
	return same;
}

static void evict_locked(struct api *a, struct conn *v, const struct conn *by)
{
	uint64_t age = mono_ms() - v->since_ms;

	v->cut = true;
	uncount_locked(a, v);
	shutdown(v->fd, SHUT_RDWR); /* MHD sees the end of the stream and closes it */
	api_ratelog_locked(a, &a->evicted_log, "connection of uid %u (%s) closed after %llu ms %s: uid %u needed its slot",
			   (unsigned)v->uid, a->lim[v->cls].who, (unsigned long long)age,
			   v->served ? "idle between requests" : "without a whole request", (unsigned)by->uid);
}

/* N's whole head is in: give it a slot and MHD, or refuse it. */
static void promote_locked(struct api *a, struct conn *n)
{
	const struct api_limits *l = &a->lim[n->cls];
	struct conn *victim = NULL;
	char why[300];
	int fd = n->fd;

	epoll_ctl(a->epfd, EPOLL_CTL_DEL, fd, NULL);
	if (uid_conns_locked(a, n) >= l->uid_conns) {
		victim = pick_victim_locked(a, n->cls, n->uid, false, is_idle);
		if (!victim) {
			snprintf(why, sizeof(why),
				 "uid %u already has %u connections open, the most one uid of %s may, and none is "
				 "idle (each has a request in or an answer under way); close some and retry",
				 (unsigned)n->uid, l->uid_conns, l->who);
			goto refuse;
		}
	} else if (a->n_conns[n->cls] >= l->conns) {
		victim = pick_victim_locked(a, n->cls, 0, true, is_idle);
		if (!victim) {
			snprintf(why, sizeof(why),
				 "all %u connections for %s are taken and none is idle (each has a request in or an "
				 "answer under way); retry",
				 l->conns, l->who);
			goto refuse;
		}
	}
	if (victim)
		evict_locked(a, victim, n);
	a->n_pending[n->cls]--;
	a->n_conns[n->cls]++;
	n->counted = true;
	n->fresh = true;
	n->state = CONN_MHD; /* since_ms stays: the deadline counts from connecting */
	/* MHD runs in the guard's thread and calls api_on_connection() from
	 * MHD_add_connection(), which takes the lock: api_handoff() adds it */
	n->handoff = true;
	return;
refuse:
	{
		uid_t uid = n->uid;
		api_conn_close_pending_locked(a, n, "503 Service Unavailable", why);
		api_ratelog_locked(a, &a->refused_log, "uid %u refused with 503: %s", (unsigned)uid, why);
	}
}

/* 1: a whole head (or more than we look at) is in; 0: not yet; -1: the
 * peer is gone. */
static int head_ready(struct api *a, int fd)
{
	ssize_t got = recv(fd, a->peek, API_HEAD_PEEK, MSG_PEEK | MSG_DONTWAIT);

	if (got == 0)
		return -1;
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if ((size_t)got == API_HEAD_PEEK)
		return 1; /* MHD refuses what is too long, with a status */
	return memmem(a->peek, (size_t)got, "\r\n\r\n", 4) || memmem(a->peek, (size_t)got, "\n\n", 2) ? 1 : 0;
}

/* Called with a->lock held, from the guard, for a pending connection's
 * epoll event (edge-triggered: new bytes, or the peer hung up). */
void api_pending_event_locked(struct api *a, struct conn *n, uint32_t events)
{
	int r = head_ready(a, n->fd);

	/* a peer that hung up with half a head in the socket sends no more:
	 * what it left would keep MSG_PEEK answering until the deadline */
	if (r == 0 && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		r = -1;
	if (r < 0)
		api_conn_close_pending_locked(a, n, NULL, NULL);
	else if (r > 0)
		promote_locked(a, n);
}

static void accept_one(struct api *a, int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct conn *n, *victim = NULL;
	const struct api_limits *l;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET };
	int r;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || !(n = calloc(1, sizeof(*n)))) {
		close(fd); /* cannot tell who is asking */
		return;
	}
	n->fd = fd;
	n->uid = cred.uid;
	n->cls = class_of(a, fd, cred.uid, cred.gid);
	n->privileged = n->cls != API_OTHER;
	n->state = CONN_PENDING;
	n->accepted_ms = n->since_ms = mono_ms();
	l = &a->lim[n->cls];

	pthread_mutex_lock(&a->lock);
	n->id = ++a->next_id;
	if (a->stopping) {
		pthread_mutex_unlock(&a->lock);
		close(fd);
		free(n);
		return;
	}
	if (a->n_pending[n->cls] >= l->pending)
		victim = pick_victim_locked(a, n->cls, 0, true, is_pending);
	if (victim) {
		char why[300];
		uid_t vu = victim->uid;
		uint64_t age = n->accepted_ms - victim->accepted_ms;

		snprintf(why, sizeof(why),
			 "no whole request head after %llu ms while %u other connections of %s waited: closed to "
			 "make room; send the request at once",
			 (unsigned long long)age, l->pending, l->who);
		api_conn_close_pending_locked(a, victim, "503 Service Unavailable", why);
		api_ratelog_locked(a, &a->evicted_log, "uid %u: %s", (unsigned)vu, why);
	}
	n->next = a->conns;
	if (a->conns)
		a->conns->prev = n;
	a->conns = n;
	a->n_pending[n->cls]++;
	/* most clients have sent the whole head before they are accepted */
	r = head_ready(a, fd);
	if (r < 0) {
		api_conn_close_pending_locked(a, n, NULL, NULL);
	} else if (r > 0) {
		promote_locked(a, n);
	} else {
		ev.data.u64 = n->id;
		if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			api_conn_close_pending_locked(a, n, "503 Service Unavailable", "the agent is out of resources");
	}
	pthread_mutex_unlock(&a->lock);
}

void api_handoff(struct api *a)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	for (;;) {
		struct conn *n = NULL;
		uint64_t id = 0;
		int fd = -1;

		pthread_mutex_lock(&a->lock);
		for (struct conn *i = a->conns; i; i = i->next)
			if (i->handoff) {
				i->handoff = false;
				id = i->id;
				fd = i->fd;
				n = i;
				break;
			}
		pthread_mutex_unlock(&a->lock);
		if (!n)
			return;
		/* MHD closes the socket itself when it fails */
		if (MHD_add_connection(a->mhd, fd, (struct sockaddr *)&sa, sizeof(sa.sun_family)) == MHD_YES)
			continue;
		pthread_mutex_lock(&a->lock);
		for (struct conn *i = a->conns; i; i = i->next)
			if (i->id == id && !i->c) { /* still ours: MHD never took it up */
				uncount_locked(a, i);
				unlink_locked(a, i);
				free(i);
				break;
			}
		pthread_mutex_unlock(&a->lock);
	}
}

void api_accept_some(struct api *a)
{
	/* a bounded batch: a pending connection whose head came meanwhile is
	 * looked at before more of the queue can push it out */
	for (int k = 0; k < API_ACCEPT_BATCH; k++) {
		int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				api_ratelog(a, &a->refused_log, "cannot accept on %s: %s", a->socket_path,
					    strerror(errno));
			return;
		}
		accept_one(a, fd);
	}
}

/* MHD took up (or let go of) a connection the guard handed it. */
void api_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
		       enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;
	struct conn *n = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		int fd = ci ? ci->connect_fd : -1;
		struct conn *next;

		pthread_mutex_lock(&a->lock);
		for (struct conn *i = a->conns; i; i = next) {
			next = i->next;
			if (i->state != CONN_MHD || i->c || i->fd != fd)
				continue;
			if (!n) {
				n = i; /* the newest handed with this fd */
				n->c = c;
				continue;
			}
			/* an older one with the same fd: MHD dropped it unseen */
			uncount_locked(a, i);
			unlink_locked(a, i);
			free(i);
		}
		pthread_mutex_unlock(&a->lock);
		*socket_context = n; /* none: on_request drops it */
		api_guard_wake(a);
		return;
	}
	if (!n)
		return;
	pthread_mutex_lock(&a->lock);
	uncount_locked(a, n);
	if (n->sse)
		n->sse->conn = NULL; /* MHD may free the stream after the connection */
	unlink_locked(a, n);
	pthread_mutex_unlock(&a->lock);
	free(n);
	*socket_context = NULL;
}
