/* SPDX-License-Identifier: MIT */
/*
 * A report's blocks as runs built from the typed blocks
 * (report_runs_of_report()) are the bytes report_runs_compact() makes of
 * the whole report, and a kept report written out entry by entry
 * (report_runs_expand_text()) is the bytes of report_runs_expand(): over
 * random reports whose blocks go up, down, jump, repeat and differ in one
 * field at a time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/json.h"
#include "lib/util.h"
#include "lib/wire/report_json.h"
#include "lib/wire/report_runs.h"

#define ROUNDS 400

/* xorshift: the same reports every run */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static const char *const states[] = { "", "online", "offline", "going-offline" };
static const char *const zones[] = { "", "Movable", "Normal" };
static const char *const codes[] = { "", "EBUSY", "EIO" };
static const char *const messages[] = { "", "block busy", "write failed: I/O error" };

/* One block entry; mostly like PREV (runs form), sometimes not in one field. */
static void random_block(uint64_t *s, struct report_block *b, const struct report_block *prev)
{
	if (prev && next_rand(s) % 4 != 0) {
		*b = *prev;
		switch (next_rand(s) % 12) {
		case 0: b->configured = !b->configured; break;
		case 1: b->memmap_on_memory = (int)(next_rand(s) % 4) - 1; break; /* 2 is written as true */
		case 2: snprintf(b->state, sizeof(b->state), "%s", states[next_rand(s) % ARRAY_SIZE(states)]); break;
		case 3: snprintf(b->zone, sizeof(b->zone), "%s", zones[next_rand(s) % ARRAY_SIZE(zones)]); break;
		case 4: snprintf(b->error_code, sizeof(b->error_code), "%s", codes[next_rand(s) % ARRAY_SIZE(codes)]); break;
		case 5: /* a message without a code is not written: no new run */
			snprintf(b->error_message, sizeof(b->error_message), "%s",
				 messages[next_rand(s) % ARRAY_SIZE(messages)]);
			break;
		default: break;
		}
	} else {
		memset(b, 0, sizeof(*b));
		b->configured = next_rand(s) % 2;
		b->memmap_on_memory = (int)(next_rand(s) % 4) - 1;
		snprintf(b->state, sizeof(b->state), "%s", states[next_rand(s) % ARRAY_SIZE(states)]);
		snprintf(b->zone, sizeof(b->zone), "%s", zones[next_rand(s) % ARRAY_SIZE(zones)]);
		snprintf(b->error_code, sizeof(b->error_code), "%s", codes[next_rand(s) % ARRAY_SIZE(codes)]);
		snprintf(b->error_message, sizeof(b->error_message), "%s", messages[next_rand(s) % ARRAY_SIZE(messages)]);
	}
}

/* Block ids: runs upwards and downwards (down to 0), jumps, repeats. */
static uint64_t next_block(uint64_t *s, uint64_t prev, bool *down)
{
	switch (next_rand(s) % 16) {
	case 0: *down = !*down; break;
	case 1: return next_rand(s) % 64;
	case 2: return prev;
	default: break;
	}
	if (*down)
		return prev ? prev - 1 : next_rand(s) % 64;
	return prev + 1;
}

static void random_report(uint64_t *s, struct report *r, struct report_block *blocks, size_t max)
{
	bool down = next_rand(s) % 2;
	uint64_t id = next_rand(s) % 40;

	memset(r, 0, sizeof(*r));
	r->agent = "a1";
	snprintf(r->id, sizeof(r->id), "g-%u", (unsigned)(next_rand(s) % 1000));
	r->generation = 7;
	r->state = MSG_STATE_IN_PROGRESS;
	r->kind = next_rand(s) % 2 ? MSG_GRANT : MSG_REVOKE;
	r->block_size = next_rand(s) % 8 ? 134217728 : 0; /* 0: "range" is null */
	r->n_blocks = next_rand(s) % max;
	r->blocks = blocks;
	for (size_t i = 0; i < r->n_blocks; i++) {
		random_block(s, &blocks[i], i ? &blocks[i - 1] : NULL);
		blocks[i].block = id;
		id = next_block(s, id, &down);
	}
	r->blocks_total = r->n_blocks;
}

static char *dump(const json_t *j)
{
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;

	assert_non_null(t);
	return t;
}

static void test_runs_from_typed_blocks(void **state)
{
	static struct report_block blocks[300];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t runs_seen = 0, down_seen = 0;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		struct report r;
		random_report(&seed, &r, blocks, ARRAY_SIZE(blocks));
		_cleanup_json_ json_t *whole = report_to_json(&r);
		_cleanup_json_ json_t *compact = report_runs_compact(whole);
		_cleanup_json_ json_t *typed = report_runs_of_report(&r);
		_cleanup_free_ char *want = dump(compact), *got = dump(typed);

		assert_string_equal(got, want);
		runs_seen += json_array_size(json_object_get(typed, "block_runs"));
		down_seen += strstr(got, "\"down\":true") != NULL;
	}
	/* the reports had runs of both directions to build */
	assert_true(runs_seen > ROUNDS);
	assert_true(down_seen > ROUNDS / 8);
}

static void test_expand_text(void **state)
{
	static struct report_block blocks[300];
	uint64_t seed = 0x2545f4914f6cdd1dull;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		struct report r;
		random_report(&seed, &r, blocks, ARRAY_SIZE(blocks));
		_cleanup_json_ json_t *whole = report_to_json(&r);
		_cleanup_json_ json_t *compact = report_runs_compact(whole);
		_cleanup_json_ json_t *expanded = report_runs_expand(compact);
		_cleanup_free_ char *want = dump(whole), *via_tree = dump(expanded);
		_cleanup_free_ char *got = report_runs_expand_text(compact);

		assert_non_null(got);
		assert_string_equal(via_tree, want);
		assert_string_equal(got, want);
	}
}

/* A progress event's "changed_block_runs", and members after the list. */
static void test_expand_text_changed_blocks(void **state)
{
	_cleanup_json_ json_t *ev = json_loads(
		"{\"type\":\"status\",\"memory\":{\"block_size\":128},\"changed_block_runs\":[{\"first\":5,\"count\":3,"
		"\"state\":\"offline\",\"down\":true}],\"seq\":9,\"note\":\"\\u00e9\\\"\"}", 0, NULL);
	_cleanup_json_ json_t *expanded = report_runs_expand(ev);
	_cleanup_free_ char *want = dump(expanded), *got = report_runs_expand_text(ev);

	(void)state;
	assert_non_null(got);
	assert_string_equal(got, want);
	assert_non_null(strstr(got, "\"changed_blocks\":[{\"block\":5,"));
	assert_non_null(strstr(got, "{\"block\":3,\"range\":\"0x180-0x1ff\",\"state\":\"offline\"}]"));
}

static void test_expand_text_refuses_bad_runs(void **state)
{
	static const char *const bad[] = {
		"{\"block_runs\":[{\"first\":5,\"count\":0}]}",
		"{\"block_runs\":[{\"first\":1,\"count\":3,\"down\":true}]}",
		"{\"block_runs\":{}}",
		"{\"blocks\":[],\"block_runs\":[]}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		_cleanup_json_ json_t *j = json_loads(bad[i], 0, NULL);

		assert_non_null(j);
		assert_null(report_runs_expand_text(j));
	}
	assert_null(report_runs_expand_text(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_from_typed_blocks),
		cmocka_unit_test(test_expand_text),
		cmocka_unit_test(test_expand_text_changed_blocks),
		cmocka_unit_test(test_expand_text_refuses_bad_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
