/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for what the HTTPS provider reads from a control plane
 * (providers/https_wire.h): the long poll's answer, the words of an error
 * answer, and whether a 2xx acknowledges a report.  Whatever the bytes: no
 * crash, no leak, and the contract holds:
 *   - https_parse_grants() either fails with -EBADMSG/-ENOMEM and a reason,
 *     or returns at most HTTPS_BATCH_MAX entries with generations in 1..2^53,
 *     ascending, max_taken the last one, every skipped message described;
 *   - https_server_message() always yields one printable, non-empty line of
 *     at most 200 characters.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/https_wire.c
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/message.h"
#include "providers/https_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data;
	struct https_batch b;
	char why[256], msg[256];
	int r;

	r = https_parse_grants(body, size, &b, why, sizeof(why));
	if (r < 0) {
		if ((r != -EBADMSG && r != -ENOMEM) || !why[0])
			abort();
	} else {
		uint64_t prev = 0;
		if (b.n_entries > HTTPS_BATCH_MAX || b.n_skips_shown > HTTPS_SKIPS_SHOWN ||
		    b.n_skips_shown > b.n_skips)
			abort();
		for (size_t i = 0; i < b.n_entries; i++) {
			const struct https_entry *e = &b.entries[i];
			if (e->generation < 1 || e->generation > MSG_GENERATION_MAX || e->generation < prev || !json_is_object(e->obj))
				abort();
			prev = e->generation;
		}
		if (b.max_taken != prev)
			abort();
		for (size_t i = 0; i < b.n_skips_shown; i++)
			if (!b.skips[i].why[0])
				abort();
		https_batch_free(&b);
	}
	https_server_message(body, size, msg, sizeof(msg));
	if (!msg[0] || strlen(msg) > 200)
		abort();
	for (const char *c = msg; *c; c++)
		if (!isprint((unsigned char)*c))
			abort();
	(void)https_ack_body_ok(body, size);
	return 0;
}
