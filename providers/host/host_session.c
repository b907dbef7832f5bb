/* SPDX-License-Identifier: MIT */
/*
 * The host's side of the channel's line protocol (docs/channel.md): frames
 * the byte stream into lines with the agent's own reader, discards what comes
 * before the answer to our sync, hands out parsed messages, acknowledges
 * reports.
 */
#include <sys/random.h>

#include "lib/wire/message.h"
#include "lib/timeutil.h"
#include "lib/util.h"
#include "providers/host/host.h"

static int on_line(void *ctx, const char *line, size_t len)
{
	struct host_session *s = ctx;
	json_t *m;

	if (len == 0)
		return 0;
	m = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(m) || !json_is_string(json_object_get(m, "type"))) {
		/* stale bytes of an earlier session, or noise: never a message */
		json_decref(m);
		s->skipped++;
		return 0;
	}
	if (s->syncing) {
		json_t *nonce = json_object_get(m, "nonce");
		if (streq(json_string_value(json_object_get(m, "type")), "sync") && json_is_integer(nonce) &&
		    (uint64_t)json_integer_value(nonce) == s->nonce) {
			json_t *g = json_object_get(m, "generation");
			s->syncing = false;
			s->synced = true;
			s->agent_generation = json_is_integer(g) && json_integer_value(g) > 0
						      ? (uint64_t)json_integer_value(g) : 0;
			/* everything before the answer is stale */
			json_array_clear(s->pending);
		} else {
			s->skipped++;
		}
		json_decref(m);
		return 0;
	}
	return json_array_append_new(s->pending, m) < 0 ? -ENOMEM : 0;
}

static int on_too_long(void *ctx, size_t seen)
{
	struct host_session *s = ctx;
	(void)seen;
	s->skipped++;
	return 0;
}

static const struct channel_reader_ops ops = { .line = on_line, .too_long = on_too_long };

int session_init(struct host_session *s, struct host_transport *t)
{
	int r;

	*s = (struct host_session){ .t = t };
	s->pending = json_array();
	if (!s->pending)
		return -ENOMEM;
	r = channel_reader_init(&s->rd, HOST_LINE_MAX);
	if (r < 0) {
		json_decref(s->pending);
		return r;
	}
	return 0;
}

void session_done(struct host_session *s)
{
	channel_reader_done(&s->rd);
	json_decref(s->pending);
	s->pending = NULL;
}

int session_send(struct host_session *s, json_t *msg)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	_cleanup_free_ char *line = NULL;
	size_t n;

	if (!text)
		return -ENOMEM;
	n = strlen(text);
	line = malloc(n + 1);
	if (!line)
		return -ENOMEM;
	memcpy(line, text, n);
	line[n] = '\n';
	return transport_send(s->t, line, n + 1, -1);
}

/* Reads once from the transport into the reader. */
static int fill(struct host_session *s, int64_t deadline)
{
	char buf[16384];
	ssize_t n = transport_recv(s->t, buf, sizeof(buf), deadline);

	if (n == 0)
		return -EPIPE;
	if (n < 0)
		return (int)n;
	return channel_reader_feed(&s->rd, buf, (size_t)n, &ops, s);
}

int session_sync(struct host_session *s, int64_t deadline)
{
	json_t *msg;
	uint64_t nonce = 0;
	int r;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = (uint64_t)((int64_t)mono_ms()) ^ (uint64_t)getpid() << 20;
	nonce &= (1ULL << 53) - 1; /* the protocol's range for integers */
	s->nonce = nonce;
	s->syncing = true;
	s->synced = false;
	json_array_clear(s->pending);
	msg = msg_sync_reply_json(nonce); /* the same shape as the request */
	if (!msg)
		return -ENOMEM;
	/* a newline first ends whatever half line an earlier session left behind */
	r = transport_send(s->t, "\n", 1, deadline);
	if (r == 0)
		r = session_send(s, msg);
	json_decref(msg);
	if (r < 0)
		return r;
	while (!s->synced) {
		r = fill(s, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

int session_next(struct host_session *s, int64_t deadline, json_t **msg)
{
	int r;

	while (json_array_size(s->pending) == 0) {
		r = fill(s, deadline);
		if (r < 0)
			return r;
	}
	*msg = json_incref(json_array_get(s->pending, 0));
	json_array_remove(s->pending, 0);
	return 0;
}

int session_ack(struct host_session *s, json_t *msg)
{
	json_t *seq = json_object_get(msg, "seq");
	json_t *ack;
	int r;

	const char *type = json_string_value(json_object_get(msg, "type"));

	/* every line of the agent's outbox carries a seq: reports, and the
	 * pressure monitor's requests and offers; one unacknowledged line holds
	 * back all later ones */
	if (!(streq(type, "status") || streq(type, "request") || streq(type, "offer")) || !json_is_integer(seq) ||
	    json_integer_value(seq) <= 0)
		return 0;
	ack = json_pack("{s:s,s:I}", "type", "ack", "seq", json_integer_value(seq));
	if (!ack)
		return -ENOMEM;
	r = session_send(s, ack);
	json_decref(ack);
	return r;
}
