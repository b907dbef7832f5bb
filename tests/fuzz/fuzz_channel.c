/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for what the channel reads from the host
 * (providers/channel.h): the byte stream is cut into lines by
 * channel_reader_feed() (in pieces whose size the first byte picks, with a
 * line limit of 256 bytes) and each line is classified by
 * channel_parse_line() (ack, query, sync and other messages, framing
 * errors).  Whatever the bytes: no crash, no leak; a line is never longer
 * than the limit and holds no newline; a line over the limit is reported
 * once; a bad line carries a code and a message, an ack a seq of at least 1.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/channel_line.c lib/wire/lines.c lib/wire/message.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/message.h"
#include "providers/channel.h"

#define LINE_MAX_FUZZ 256

static int on_line(void *ctx, const char *line, size_t len)
{
	struct channel_line cl;

	(void)ctx;
	if (len > LINE_MAX_FUZZ || memchr(line, '\n', len))
		abort();
	channel_parse_line(line, len, &cl);
	switch (cl.kind) {
	case CHANNEL_LINE_EMPTY:
		if (len != 0)
			abort();
		break;
	case CHANNEL_LINE_BAD:
		if (!cl.code[0] || !cl.message[0])
			abort();
		break;
	case CHANNEL_LINE_ACK:
		if (cl.seq < 1)
			abort();
		break;
	case CHANNEL_LINE_QUERY:
		break;
	case CHANNEL_LINE_MESSAGE:
		if (!cl.msg && (!cl.code[0] || !cl.message[0]))
			abort();
		msg_free(cl.msg);
		break;
	default:
		abort();
	}
	return 0;
}

static int on_too_long(void *ctx, size_t seen)
{
	(void)ctx;
	if (seen <= LINE_MAX_FUZZ)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct channel_reader_ops ops = { .line = on_line, .too_long = on_too_long };
	struct channel_reader r;
	size_t piece;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 64 + 1;
	if (channel_reader_init(&r, LINE_MAX_FUZZ) < 0)
		return 0;
	for (size_t off = 1; off < size; off += piece) {
		size_t n = size - off < piece ? size - off : piece;
		if (channel_reader_feed(&r, (const char *)data + off, n, &ops, NULL) < 0)
			abort();
	}
	channel_reader_done(&r);
	return 0;
}
