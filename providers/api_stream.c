/* SPDX-License-Identifier: MIT */
/*
 * The local REST API's event streams (GET /v1/events) and its guard thread.
 *
 * An event stream that has nothing to send is suspended (it leaves MHD's
 * loop) and resumed when the event bus publishes, when its client hangs up
 * (the guard's epoll watches the socket of every suspended stream for
 * EPOLLRDHUP), or when a keep-alive is due.  The guard also enforces the
 * request deadline: a connection that has not delivered a whole request
 * within API_REQUEST_DEADLINE_MS of connecting or of its previous answer is
 * shut down, however steadily it trickles bytes.  It sleeps until the
 * nearest such deadline, so an idle agent never wakes.
 */
#include "providers/api_int.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "providers/views/views_json.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* --- server-sent events --------------------------------------------------- */


/* Called with a->lock held. */
void api_sse_resume_locked(struct sse *s)
{
	if (!s->suspended)
		return;
	epoll_ctl(s->a->epfd, EPOLL_CTL_DEL, s->conn->fd, NULL);
	s->suspended = false;
	MHD_resume_connection(s->conn->c);
	/* MHD runs in the guard's loop: from another thread (the event bus),
	 * nothing of MHD's own wakes that loop for the resumed stream */
	api_guard_wake(s->a);
}

static void sse_free(void *cls)
{
	struct sse *s = cls;
	struct api *a = s->a;

	pthread_mutex_lock(&a->lock);
	if (s->counted)
		a->n_streams[s->cls]--;
	if (s->conn)
		s->conn->sse = NULL;
	pthread_mutex_unlock(&a->lock);
	free(s->grant);
	free(s->pending);
	free(s);
}

/* The event bus published (or closed): every waiting stream looks again. */
void api_on_published(void *arg)
{
	struct api *a = arg;

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = i->next)
		if (i->sse)
			api_sse_resume_locked(i->sse);
	pthread_mutex_unlock(&a->lock);
}

/* Formats the next event into s->pending: 1 one is ready, 0 none yet,
 * MHD_CONTENT_READER_END_* to end the stream. */
static ssize_t sse_next(struct sse *s)
{
	for (;;) {
		char *text = NULL;
		uint64_t seq, missed;
		struct api_event_view v;
		int r;

		if (s->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		r = events_wait(s->bus, s->after, 0, &text, &seq, &missed);
		if (r == -EPIPE)
			return MHD_CONTENT_READER_END_OF_STREAM; /* the agent is stopping */
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0)
			return 0;
		s->after = seq;
		api_event_view(text, strlen(text), s->grant, &v);
		if (v.wanted) {
			if (s->finish_on_terminal && v.terminal)
				s->done = true;
			if (asprintf(&s->pending, "id: %llu\nevent: %s\ndata: %s\n\n", (unsigned long long)seq,
				     v.name, text) < 0)
				s->pending = NULL;
		}
		free(text);
		if (v.wanted) {
			if (!s->pending)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			s->pending_len = strlen(s->pending);
			s->pending_off = 0;
			return 1;
		}
	}
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;
	struct api *a = s->a;
	size_t n;

	(void)pos;
	if (!s->pending) {
		ssize_t r;
		pthread_mutex_lock(&a->lock);
		if (s->peer_gone) {
			pthread_mutex_unlock(&a->lock);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		/* under a->lock: a publish after this look resumes us (api_on_published) */
		r = sse_next(s);
		if (r == 0 && a->stopping) {
			/* what was published before the stop is sent (api_stop() waits
			 * for it, briefly); nothing more comes */
			pthread_mutex_unlock(&a->lock);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		if (r == 0 && mono_ms() - s->last_sent_ms >= API_KEEPALIVE_MS) {
			/* keep-alive comment so proxies and clients see a live stream */
			s->pending = strdup(": keep-alive\n\n");
			r = s->pending ? 1 : MHD_CONTENT_READER_END_WITH_ERROR;
			s->pending_len = s->pending ? strlen(s->pending) : 0;
			s->pending_off = 0;
		}
		if (r == 0) {
			struct epoll_event ev = { .events = EPOLLRDHUP, .data.u64 = s->conn->id };
			/* leave MHD's loop; the guard watches for the client hanging up */
			if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, s->conn->fd, &ev) < 0 && errno != EEXIST) {
				pthread_mutex_unlock(&a->lock);
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			s->suspended = true;
			MHD_suspend_connection(s->conn->c);
			pthread_mutex_unlock(&a->lock);
			api_guard_wake(a);
			return 0;
		}
		pthread_mutex_unlock(&a->lock);
		if (r < 0)
			return r;
	}
	n = s->pending_len - s->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, s->pending + s->pending_off, n);
	s->pending_off += n;
	s->last_sent_ms = mono_ms();
	if (s->pending_off == s->pending_len) {
		free(s->pending);
		s->pending = NULL;
	}
	return (ssize_t)n;
}

/* Takes a stream slot of N's class for N's uid: 0, or -EBUSY with the
 * reason in WHY. */
static int sse_admit(struct api *a, struct conn *n, struct sse *s, char *why, size_t whylen)
{
	const struct api_limits *l = &a->lim[n->cls];
	unsigned same = 0;
	int r = 0;

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = i->next)
		if (i->uid == n->uid && i->cls == n->cls && i->sse)
			same++;
	if (same >= l->uid_streams) {
		snprintf(why, whylen, "uid %u may follow at most %u event streams at once (%s share %u)",
			 (unsigned)n->uid, l->uid_streams, l->who, l->streams);
		r = -EBUSY;
	} else if (a->n_streams[n->cls] >= l->streams) {
		snprintf(why, whylen, "all %u event streams for %s are taken; retry later", l->streams, l->who);
		r = -EBUSY;
	} else {
		a->n_streams[n->cls]++;
		s->counted = true;
		s->cls = n->cls;
		n->sse = s;
		s->conn = n;
	}
	pthread_mutex_unlock(&a->lock);
	if (r < 0)
		api_ratelog(a, &a->refused_log, "event stream refused with 503: %s", why);
	return r;
}

MHD_Result_t api_serve_events(struct api *a, struct MHD_Connection *c)
{
	const char *grant = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "grant");
	const char *after = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
	const char *last_id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
	const char *until = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "until");
	struct conn *n = api_conn_of(c);
	struct MHD_Response *r;
	struct sse *s;
	char why[256];
	MHD_Result_t ret;

	if (!n)
		return MHD_NO;
	s = calloc(1, sizeof(*s));
	if (!s)
		return MHD_NO;
	s->a = a;
	s->bus = engine_events(a->e);
	s->after = events_last_seq(s->bus);
	s->last_sent_ms = mono_ms();
	/* ?after= wins over the header a reconnecting EventSource sends */
	if (after && api_parse_seq(after, &s->after) < 0) {
		free(s);
		return api_send_error(c, 400, "EINVAL", "query \"after\": \"%s\" is not a sequence number", after);
	}
	if (!after && last_id && api_parse_seq(last_id, &s->after) < 0) {
		free(s);
		return api_send_error(c, 400, "EINVAL", "header Last-Event-ID: \"%s\" is not a sequence number", last_id);
	}
	if (grant) {
		json_t *cur = views_engine_grant(a->e, grant);
		if (!cur) {
			free(s);
			return api_send_error(c, 404, "ENOENT", "no grant or revocation with id \"%s\"", grant);
		}
		s->grant = strdup(grant);
		s->finish_on_terminal = streq(until, "done");
		/* the client learns the current status first, then every change */
		json_object_set_new(cur, "type", json_string("status"));
		{
			char *text = json_dumps(cur, JSON_COMPACT);
			if (text && asprintf(&s->pending, "event: status\ndata: %s\n\n", text) >= 0) {
				s->pending_len = strlen(s->pending);
				if (s->finish_on_terminal &&
				    api_state_is_terminal(json_string_value(json_object_get(cur, "state"))))
					s->done = true;
			} else {
				s->pending = NULL;
			}
			free(text);
		}
		json_decref(cur);
	}
	if (sse_admit(a, n, s, why, sizeof(why)) < 0) {
		free(s->grant);
		free(s->pending);
		free(s);
		return api_send_error(c, 503, "EBUSY", "%s", why);
	}
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, s, sse_free);
	if (!r) {
		sse_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	ret = MHD_queue_response(c, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* --- the guard: hung-up streams, keep-alives, request deadlines ------------ */

/* Tells the guard a deadline may have come nearer (a new connection, a
 * stream suspended, a kept-alive connection waiting for its next request). */
void api_guard_wake(struct api *a)
{
	uint64_t one = 1;

	(void)!write(a->wakefd, &one, sizeof(one));
}

/* How long the guard may sleep: until the nearest keep-alive or request
 * deadline or MHD's own timer, forever (-1) when there is none, so an idle
 * agent never wakes. */
static int guard_timeout_ms(struct api *a)
{
	uint64_t now = mono_ms(), next = UINT64_MAX;
	MHD_UNSIGNED_LONG_LONG mhd_ms;

	if (MHD_get_timeout(a->mhd, &mhd_ms) == MHD_YES)
		next = now + (mhd_ms < INT32_MAX ? mhd_ms : INT32_MAX);

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = i->next) {
		if (i->sse && i->sse->suspended && i->sse->last_sent_ms + API_KEEPALIVE_MS < next)
			next = i->sse->last_sent_ms + API_KEEPALIVE_MS;
		if (!i->answering && !i->cut && i->since_ms + API_REQUEST_DEADLINE_MS < next)
			next = i->since_ms + API_REQUEST_DEADLINE_MS;
	}
	pthread_mutex_unlock(&a->lock);
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)(next - now < INT32_MAX ? next - now : INT32_MAX);
}

static void guard_sweep(struct api *a)
{
	uint64_t now = mono_ms();
	struct conn *next;

	pthread_mutex_lock(&a->lock);
	for (struct conn *i = a->conns; i; i = next) {
		next = i->next;
		if (i->sse && i->sse->suspended && now - i->sse->last_sent_ms >= API_KEEPALIVE_MS)
			api_sse_resume_locked(i->sse);
		if (i->answering || i->cut || now - i->since_ms < API_REQUEST_DEADLINE_MS)
			continue;
		if (i->state == CONN_PENDING) {
			uid_t uid = i->uid;
			api_conn_close_pending_locked(a, i, "408 Request Timeout",
						      "no whole request head within 10000 ms of connecting: closed");
			api_ratelog_locked(a, &a->deadline_log,
					   "uid %u sent no whole request head within %u ms: connection closed",
					   (unsigned)uid, API_REQUEST_DEADLINE_MS);
			continue;
		}
		if (!i->c) {
			/* handed to MHD, never taken up: MHD dropped it (out of
			 * memory); a late MHD_CONNECTION_NOTIFY_STARTED finds nothing */
			api_conn_forget_locked(a, i);
			continue;
		}
		i->cut = true;
		/* a slow sender holds nothing past the deadline */
		shutdown(i->fd, SHUT_RDWR);
		api_ratelog_locked(a, &a->deadline_log, "uid %u sent no whole request within %u ms: connection closed",
				   (unsigned)i->uid, API_REQUEST_DEADLINE_MS);
	}
	pthread_mutex_unlock(&a->lock);
}

void *api_guard_main(void *arg)
{
	struct api *a = arg;
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(a->epfd, evs, ARRAY_SIZE(evs), guard_timeout_ms(a));
		bool stop, listen_ready = false;

		pthread_mutex_lock(&a->lock);
		/* not a->stopping: the streams resumed by api_stop() still need
		 * MHD_run() below to send their last events and their end */
		stop = a->guard_exit;
		for (int k = 0; k < n; k++) {
			uint64_t id = evs[k].data.u64, count;
			if (id == 0) { /* the wake eventfd */
				(void)!read(a->wakefd, &count, sizeof(count));
				continue;
			}
			if (id == API_EPOLL_LISTEN) {
				listen_ready = true;
				continue;
			}
			if (id == API_EPOLL_MHD)
				continue; /* MHD_run() below */
			/* by id: the event may be older than a resume that let the
			 * connection end in the meantime */
			for (struct conn *c = a->conns; c; c = c->next) {
				if (c->id != id)
					continue;
				if (c->state == CONN_PENDING)
					api_pending_event_locked(a, c, evs[k].events); /* may free C */
				else if (c->sse && c->sse->suspended) {
					c->sse->peer_gone = true;
					api_sse_resume_locked(c->sse);
				}
				break;
			}
		}
		pthread_mutex_unlock(&a->lock);
		if (stop)
			break;
		/* after the pending connections' news: a head that came in is
		 * promoted before more of the queue can push it out */
		if (listen_ready)
			api_accept_some(a);
		guard_sweep(a);
		/* MHD's requests, answers and streams, in this thread: without a
		 * pool of its own an idle agent has one thread for its API */
		api_handoff(a);
		MHD_run(a->mhd);
	}
	return NULL;
}
