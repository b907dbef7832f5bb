/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for memgrant-host's session (providers/host/host_session.c):
 * the input is what the agent's side of the channel sends, from just after
 * our sync (the harness's sync carries nonce 4242; session_sync() itself only
 * sends it and reads as below).  The first byte sets how many bytes each read
 * of the transport returns (1 to 64), so lines arrive split anywhere.
 * Whatever the bytes: no crash, no leak; session_next() hands out messages
 * only after the sync's answer, each a JSON object with a string "type",
 * until the stream ends (-EPIPE); the agent's generation taken from the
 * answer is a positive integer or 0; session_ack() answers each line of the
 * agent's outbox (a status report, a request or an offer with a positive
 * integer seq) with one line {"type":"ack","seq":SEQ} and nothing else, and
 * sends nothing for any other message.
 * The transport is a stub in this file.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/host/host_session.c lib/wire/lines.c lib/wire/message.c
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "providers/host/host.h"

struct host_transport {
	const uint8_t *data;
	size_t len, pos, step;
	size_t sent;             /* lines session_send() wrote */
	json_t *last_sent;       /* the last of them, parsed */
};

int transport_send(struct host_transport *t, const char *buf, size_t len, int64_t deadline)
{
	(void)deadline;
	if (len == 0 || buf[len - 1] != '\n' || memchr(buf, '\n', len - 1))
		abort(); /* one line, whole */
	json_decref(t->last_sent);
	t->last_sent = json_loadb(buf, len - 1, 0, NULL);
	if (!t->last_sent)
		abort();
	t->sent++;
	return 0;
}

ssize_t transport_recv(struct host_transport *t, char *buf, size_t cap, int64_t deadline)
{
	size_t n = t->len - t->pos;

	(void)deadline;
	if (n > t->step)
		n = t->step;
	if (n > cap)
		n = cap;
	memcpy(buf, t->data + t->pos, n);
	t->pos += n;
	return (ssize_t)n;
}

void transport_close(struct host_transport *t)
{
	(void)t;
}

/* One session for the run (its reader's 4 MiB buffer allocated once), reset
 * for every input as a new session_sync() would leave it. */
static struct host_session s;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (session_init(&s, NULL) < 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct host_transport t = { 0 };
	json_t *msg;
	int r;

	if (size == 0)
		return 0;
	t.step = 1 + data[0] % 64;
	t.data = data + 1;
	t.len = size - 1;
	s.t = &t;
	channel_reader_reset(&s.rd);
	json_array_clear(s.pending);
	s.skipped = 0;
	s.agent_generation = 0;
	s.synced = false;
	s.syncing = true;
	s.nonce = 4242;
	while ((r = session_next(&s, -1, &msg)) == 0) {
		json_t *seq = json_object_get(msg, "seq");
		const char *type = json_string_value(json_object_get(msg, "type"));
		size_t before = t.sent;

		if (!s.synced || s.syncing || !json_is_object(msg) || !type)
			abort();
		if (session_ack(&s, msg) < 0)
			abort();
		bool outbox = streq(type, "status") || streq(type, "request") || streq(type, "offer");

		if (outbox && json_is_integer(seq) && json_integer_value(seq) > 0) {
			if (t.sent != before + 1 ||
			    !streq(json_string_value(json_object_get(t.last_sent, "type")), "ack") ||
			    !json_equal(json_object_get(t.last_sent, "seq"), seq) || json_object_size(t.last_sent) != 2)
				abort();
		} else if (t.sent != before) {
			abort(); /* only the outbox's lines are acknowledged */
		}
		json_decref(msg);
	}
	if (r != -EPIPE && r != -ENOMEM)
		abort();
	if (!s.synced && s.agent_generation != 0)
		abort();
	if (s.agent_generation > INT64_MAX)
		abort();
	json_decref(t.last_sent);
	return 0;
}
