/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for what the local REST API reads from a client before
 * the engine sees it (providers/api_parse.h): sequence numbers (?after=,
 * Last-Event-ID), a body gathered in pieces under a limit, and a published
 * event as a stream filters and names it.  The first byte picks the limit
 * and the piece size; the rest is the input.  Contract: a parsed sequence
 * number prints back to the same digits (no sign, no blank, no overflow);
 * the body is never longer than the limit and equals the input when it
 * fits; an event name is a safe SSE token.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/api_parse.c
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/api_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_body body = { 0 };
	struct api_event_view v;
	size_t limit, piece;
	char *text;
	uint64_t seq;

	if (size < 1)
		return 0;
	limit = (size_t)(data[0] & 0x0f) * 64 + 1;
	piece = (size_t)(data[0] >> 4) + 1;
	data++;
	size--;
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	if (api_parse_seq(text, &seq) == 0) {
		char back[32];
		snprintf(back, sizeof(back), "%" PRIu64, seq);
		/* leading zeros are digits too: compare the value, not the text */
		if (strlen(text) > 20 || strspn(text, "0123456789") != strlen(text))
			abort();
		if (strtoull(text, NULL, 10) != seq)
			abort();
	}
	for (size_t off = 0; off < size; off += piece) {
		size_t n = size - off < piece ? size - off : piece;
		if (api_body_append(&body, (const char *)data + off, n, limit) < 0)
			break;
		if (body.len > limit)
			abort();
	}
	if (!body.too_large && size <= limit && (body.len != size || (size && memcmp(body.data, data, size))))
		abort();
	if (body.too_large && (body.data || body.len))
		abort();
	api_body_free(&body);

	api_event_view(text, size, size % 2 ? "g-1" : NULL, &v);
	if (!v.name[0])
		abort();
	for (const char *c = v.name; *c; c++)
		if (*c == '\n' || *c == '\r' || *c == ':' || *c == ' ')
			abort();
	free(text);
	return 0;
}
