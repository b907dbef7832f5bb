/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for msg_parse() (lib/wire/message.h): whatever the bytes,
 * no crash, no leak, and the contract holds:
 *   - a failure returns one of the documented errnos, leaves *out NULL and
 *     fills a non-empty code and a one-line printable message;
 *   - a success survives the canonical round trip: msg_to_json() of the
 *     result parses again to the same canonical JSON;
 *   - text longer than the limit is refused with E2BIG, never parsed.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: lib/wire/message.c
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/message.h"

static void check_error(int r, const struct msg *m, const struct msg_error *err)
{
	if (r != -E2BIG && r != -EBADMSG && r != -EINVAL && r != -ERANGE && r != -ENOMEM)
		abort();
	if (m || !err->code[0] || !err->message[0])
		abort();
	for (const char *c = err->message; *c; c++)
		if (!isprint((unsigned char)*c))
			abort(); /* messages go to logs and JSON replies as one line */
}

static void check_round_trip(const struct msg *m)
{
	json_t *canon = msg_to_json(m), *again_json = NULL;
	struct msg *again = NULL;
	struct msg_error err = { 0 };
	int r;

	if (!canon)
		abort();
	r = msg_from_json(canon, &again, &err);
	if (r < 0 || !again)
		abort(); /* our own canonical form must be accepted */
	again_json = msg_to_json(again);
	if (!again_json || !json_equal(canon, again_json))
		abort();
	json_decref(again_json);
	json_decref(canon);
	msg_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct msg_error err = { 0 };
	struct msg *m = NULL;
	int r;

	r = msg_parse(text, size, 65536, &m, &err);
	if (r < 0) {
		check_error(r, m, &err);
	} else {
		if (r != 0 || !m)
			abort();
		check_round_trip(m);
		msg_free(m);
		m = NULL;
	}

	/* The limit is checked before parsing. */
	if (size > 0) {
		memset(&err, 0, sizeof(err));
		r = msg_parse(text, size, size - 1, &m, &err);
		if (r != -E2BIG)
			abort();
		check_error(r, m, &err);
	}
	return 0;
}
