/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for blockjson_to_table() / blockjson_to_block()
 * (lib/wire/blockjson.h): any JSON text either becomes a table that
 * serializes back to JSON which parses to the same table, or is refused with
 * -EINVAL and a message, never a half-filled table.  No crash, no leak.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: lib/wire/blockjson.c
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/wire/blockjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	struct mem_table *t = NULL, *t2 = NULL;
	json_t *out = NULL, *out2 = NULL;
	char err[256] = "";
	int r;

	if (!j)
		return 0;
	r = blockjson_to_table(j, &t, err, sizeof(err));
	if (r < 0) {
		if ((r != -EINVAL && r != -ENOMEM) || t || (r == -EINVAL && !err[0]))
			abort();
	} else {
		if (!t)
			abort();
		if (blockjson_from_table(t, &out) < 0)
			abort();
		if (blockjson_to_table(out, &t2, err, sizeof(err)) < 0)
			abort(); /* our own output must be accepted */
		if (blockjson_from_table(t2, &out2) < 0 || !json_equal(out, out2))
			abort();
		for (size_t i = 0; i < t->n; i++) {
			json_t *bj = NULL;
			struct mem_block b;
			if (blockjson_from_block(t, &t->blocks[i], &bj) < 0)
				abort();
			if (blockjson_to_block(bj, t->block_size, &b, err, sizeof(err)) < 0 || b.id != t->blocks[i].id)
				abort();
			json_decref(bj);
		}
	}
	/* a single block object, checked against a plausible block size */
	{
		struct mem_block b;
		json_t *first = json_is_array(j) ? json_array_get(j, 0) : j;
		if (first) {
			r = blockjson_to_block(first, 134217728, &b, err, sizeof(err));
			if (r < 0 && r != -EINVAL && r != -ENOMEM)
				abort();
		}
	}
	json_decref(out2);
	json_decref(out);
	mem_table_free(t2);
	mem_table_free(t);
	json_decref(j);
	return 0;
}
