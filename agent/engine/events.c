/* SPDX-License-Identifier: MIT */
#include "agent/engine/events.h"
#include "lib/heap.h"
#include "lib/json.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "lib/wire/report_runs.h"

#include <pthread.h>
#include <time.h>

/* Where an event's text is kept. */
struct slot {
	uint32_t off, len;   /* in event_bus.text, when in_text */
	bool in_text;
	unsigned char runs;  /* how it keeps block runs (enum kept) */
	char *own;           /* a text longer than the buffer, kept alone; NULL */
};

struct event_bus {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t capacity;
	uint64_t next_seq; /* seq of the next event; the first is 1 */
	uint64_t oldest;   /* oldest seq still kept */
	/* The kept texts one after the other in one buffer of EVENTS_TEXT_BYTES
	 * that wraps.  As many small strings, each allocated while an
	 * operation's freed chunks lay around it, they held a page each
	 * (docs/performance.md, "RSS over cycles").  Its pages are touched
	 * only as texts reach them. */
	char *text;
	size_t wpos;        /* where the next text goes */
	struct slot *slots; /* slots[seq % capacity] */
	bool closed;
	/* the listener has a lock of its own: it runs outside LOCK */
	pthread_mutex_t listener_lock;
	void (*listener)(void *arg);
	void *listener_arg;
};

int events_new(size_t capacity, struct event_bus **out)
{
	struct event_bus *b;
	pthread_condattr_t ca;

	if (capacity == 0)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->slots = calloc(capacity, sizeof(*b->slots));
	b->text = malloc(EVENTS_TEXT_BYTES);
	if (!b->slots || !b->text) {
		free(b->slots);
		free(b->text);
		free(b);
		return -ENOMEM;
	}
	b->capacity = capacity;
	b->next_seq = 1;
	b->oldest = 1;
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->listener_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->cond, &ca);
	pthread_condattr_destroy(&ca);
	*out = b;
	return 0;
}

void events_free(struct event_bus *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->capacity; i++)
		free(b->slots[i].own);
	free(b->slots);
	free(b->text);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->lock);
	pthread_mutex_destroy(&b->listener_lock);
	free(b);
}

/* an event whose report lists more blocks is kept with them as runs: the
 * final event of a 4,096-block grant is a few hundred bytes, not 700 kB */
#define EVENTS_RUNS_MIN 16

static void call_listener(struct event_bus *b)
{
	pthread_mutex_lock(&b->listener_lock);
	if (b->listener)
		b->listener(b->listener_arg);
	pthread_mutex_unlock(&b->listener_lock);
}

void events_set_listener(struct event_bus *b, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&b->listener_lock);
	b->listener = fn;
	b->listener_arg = arg;
	pthread_mutex_unlock(&b->listener_lock);
}

static void drop_oldest(struct event_bus *b)
{
	struct slot *s = &b->slots[b->oldest % b->capacity];

	free(s->own);
	*s = (struct slot){ 0 };
	b->oldest++;
}

/* Makes room for LEN bytes at the write position (the start of the buffer
 * when they do not fit before its end) by dropping the oldest events up to
 * the last one whose text is in the way, or a text kept alone: the texts in
 * the buffer follow each other from the oldest's to the write position,
 * wrapping, so those in the way are always the oldest.  Returns where the
 * text goes. */
static size_t make_room(struct event_bus *b, size_t len)
{
	bool wraps = b->wpos + len > EVENTS_TEXT_BYTES;
	size_t at = wraps ? 0 : b->wpos;

	for (uint64_t k = b->oldest; k < b->next_seq - 1; k++) {
		const struct slot *s = &b->slots[k % b->capacity];
		bool in_way;

		if (!s->in_text && !s->own)
			continue; /* lost to ENOMEM: holds nothing */
		in_way = s->own || (wraps ? s->off >= b->wpos || s->off < len : s->off >= b->wpos && s->off < b->wpos + len);
		if (!in_way)
			break;
		while (b->oldest <= k)
			drop_oldest(b);
	}
	return at;
}

/* How the ring keeps an event's blocks. */
enum kept {
	KEPT_WHOLE,    /* as published */
	KEPT_RUNS,     /* a status report (or a progress event) with its blocks as runs */
	KEPT_STATUS,   /* an event whose "status" member is kept so */
};

/* EV as the ring keeps it: a report of many blocks with them as runs; *HOW
 * says how.  NULL on ENOMEM. */
static char *kept_text(json_t *ev, unsigned char *how)
{
	json_t *status = json_object_get(ev, "status");
	_cleanup_json_ json_t *kept = NULL, *compact = NULL;

	*how = KEPT_WHOLE;
	if (report_runs_blocks(ev) >= EVENTS_RUNS_MIN) {
		kept = report_runs_compact(ev);
		if (!kept)
			return json_dumps(ev, JSON_COMPACT);
		*how = KEPT_RUNS;
		return json_dumps(kept, JSON_COMPACT);
	}
	if (!json_is_object(status) || report_runs_blocks(status) < EVENTS_RUNS_MIN)
		return json_dumps(ev, JSON_COMPACT);
	/* the same members in the same order, the report replaced in place */
	kept = json_copy(ev);
	compact = report_runs_compact(status);
	if (!kept || !compact || json_object_set(kept, "status", compact) < 0)
		return json_dumps(ev, JSON_COMPACT);
	*how = KEPT_STATUS;
	return json_dumps(kept, JSON_COMPACT);
}

/* The event TEXT the ring kept as HOW says, back to what was published: a
 * new string, NULL on ENOMEM. */
static char *published_text(const char *text, unsigned char how)
{
	json_t *ev = json_loads(text, 0, NULL), *wire = NULL;
	char *out = NULL;

	if (!ev)
		return NULL;
	if (how == KEPT_RUNS) {
		out = report_runs_expand_text(ev);
	} else {
		wire = report_runs_expand(json_object_get(ev, "status"));
		if (wire && json_object_set(ev, "status", wire) == 0)
			out = json_dumps(ev, JSON_COMPACT);
	}
	json_decref(wire);
	json_decref(ev);
	heap_trim_after_render(out ? strlen(out) : 0);
	return out;
}

/* Publishes EV, kept as kept_text() says or, when AS_RUNS, as it is (a
 * report whose blocks are runs already). */
static uint64_t publish(struct event_bus *b, json_t *ev, bool as_runs)
{
	char *text;
	uint64_t seq;
	unsigned char runs = KEPT_RUNS;

	pthread_mutex_lock(&b->lock);
	seq = b->next_seq++;
	json_object_set_new(ev, "seq", json_integer((json_int_t)seq));
	text = as_runs ? json_dumps(ev, JSON_COMPACT) : kept_text(ev, &runs);
	if (seq >= b->oldest + b->capacity)
		drop_oldest(b);
	if (text) {
		size_t len = strlen(text);
		struct slot s = { .runs = runs };

		if (len <= EVENTS_TEXT_BYTES) {
			s.off = (uint32_t)make_room(b, len);
			s.len = (uint32_t)len;
			s.in_text = true;
			memcpy(b->text + s.off, text, len);
			b->wpos = s.off + len;
			free(text);
		} else {
			/* kept alone, every older one dropped: the ring is
			 * bounded in bytes */
			while (b->oldest < seq)
				drop_oldest(b);
			s.own = text;
		}
		b->slots[seq % b->capacity] = s;
	} /* else lost to ENOMEM: readers skip it */
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	call_listener(b);
	return seq;
}

uint64_t events_publish(struct event_bus *b, json_t *ev)
{
	return publish(b, ev, false);
}

uint64_t events_publish_runs(struct event_bus *b, json_t *ev)
{
	return publish(b, ev, true);
}

uint64_t events_last_seq(struct event_bus *b)
{
	uint64_t s;

	pthread_mutex_lock(&b->lock);
	s = b->next_seq - 1;
	pthread_mutex_unlock(&b->lock);
	return s;
}

int events_wait(struct event_bus *b, uint64_t after, int timeout_ms, char **text, uint64_t *seq,
		uint64_t *missed)
{
	struct timespec deadline;
	unsigned char runs = KEPT_WHOLE;
	int r = 0;

	deadline_after_ms(&deadline, timeout_ms);
	*missed = 0;
	pthread_mutex_lock(&b->lock);
	for (;;) {
		uint64_t oldest = b->oldest;
		uint64_t want = after + 1;

		if (want < oldest) {
			*missed = oldest - want;
			want = oldest;
		}
		if (want < b->next_seq) {
			const struct slot *s = &b->slots[want % b->capacity];
			*seq = want;
			if (!s->in_text && !s->own) {
				after = want; /* lost to ENOMEM at publish time */
				continue;
			}
			*text = s->own ? strdup(s->own) : strndup(b->text + s->off, s->len);
			runs = s->runs;
			r = *text ? 1 : -ENOMEM;
			break;
		}
		/* closed: what was published before is still read (a stopping
		 * agent's last status reaches the streams), then the end */
		if (b->closed) {
			r = -EPIPE;
			break;
		}
		if (pthread_cond_timedwait(&b->cond, &b->lock, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&b->lock);
	if (r == 1 && runs != KEPT_WHOLE) {
		/* written out whole outside the lock: O(blocks) for this reader only */
		char *whole = published_text(*text, runs);

		free(*text);
		*text = whole;
		r = whole ? 1 : -ENOMEM;
	}
	return r;
}

void events_close(struct event_bus *b)
{
	pthread_mutex_lock(&b->lock);
	b->closed = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	call_listener(b);
}
