/* SPDX-License-Identifier: MIT */
/* The event bus (agent/engine/events.c) and the metrics text (agent/engine/metrics.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/engine/events.h"
#include "agent/engine/metrics.h"
#include "lib/util.h"
#include "lib/wire/report_json.h"

static void publish_n(struct event_bus *b, int n, const char *pad)
{
	for (int i = 0; i < n; i++) {
		json_t *ev = json_pack("{s:i,s:s}", "i", i, "pad", pad);
		events_publish(b, ev);
		json_decref(ev);
	}
}

static void test_in_order_with_seq(void **state)
{
	struct event_bus *b;
	char *text = NULL;
	uint64_t seq = 0, missed = 9, after = 0;

	(void)state;
	assert_int_equal(events_new(8, &b), 0);
	publish_n(b, 3, "");
	for (int i = 0; i < 3; i++) {
		json_t *j;
		assert_int_equal(events_wait(b, after, 100, &text, &seq, &missed), 1);
		assert_int_equal(seq, (uint64_t)i + 1);
		assert_int_equal(missed, 0);
		j = json_loads(text, 0, NULL);
		assert_non_null(j);
		assert_int_equal(json_integer_value(json_object_get(j, "i")), i);
		assert_int_equal(json_integer_value(json_object_get(j, "seq")), i + 1);
		json_decref(j);
		free(text);
		after = seq;
	}
	/* nothing new: a timeout, not an event */
	assert_int_equal(events_wait(b, after, 50, &text, &seq, &missed), 0);
	assert_int_equal(events_last_seq(b), 3);
	events_free(b);
}

static void test_slow_reader_is_told_what_it_missed(void **state)
{
	struct event_bus *b;
	char *text = NULL;
	uint64_t seq = 0, missed = 0;

	(void)state;
	assert_int_equal(events_new(4, &b), 0);
	publish_n(b, 10, "");
	assert_int_equal(events_wait(b, 0, 100, &text, &seq, &missed), 1);
	assert_int_equal(seq, 7); /* 7..10 kept */
	assert_int_equal(missed, 6);
	free(text);
	events_free(b);
}

static void test_bounded_in_bytes(void **state)
{
	struct event_bus *b;
	char *text = NULL, *pad = malloc(100 * 1024 + 1);
	uint64_t seq = 0, missed = 0;

	(void)state;
	assert_non_null(pad);
	memset(pad, 'x', 100 * 1024);
	pad[100 * 1024] = '\0';
	assert_int_equal(events_new(1024, &b), 0);
	publish_n(b, 20, pad); /* 2 MB of events: only EVENTS_TEXT_BYTES (two of them) stay */
	assert_int_equal(events_wait(b, 0, 100, &text, &seq, &missed), 1);
	assert_true(missed >= 17);
	assert_true(seq >= 18 && seq <= 20);
	free(text);
	/* the newest is always there */
	assert_int_equal(events_wait(b, 19, 100, &text, &seq, &missed), 1);
	assert_int_equal(seq, 20);
	free(text);
	free(pad);
	events_free(b);
}

/* The kept texts share one buffer that wraps: after thousands of events of
 * every size, the kept ones are the newest, each read back as published,
 * their seqs consecutive, their bytes within the bound. */
static void test_text_buffer_wraps(void **state)
{
	static char pad[50 * 1024 + 1];
	struct event_bus *b;
	char *text = NULL;
	uint64_t seq = 0, missed = 0, after = 0, expect;
	size_t kept_bytes = 0;
	unsigned rnd = 7;

	(void)state;
	assert_int_equal(events_new(1024, &b), 0);
	for (int i = 0; i < 3000; i++) {
		size_t n = (rnd = rnd * 1103515245u + 12345u) % (i % 7 ? 900 : 50 * 1024);
		json_t *ev, *got;

		memset(pad, 'a' + i % 26, n);
		pad[n] = '\0';
		ev = json_pack("{s:i,s:s}", "i", i, "pad", pad);
		events_publish(b, ev);
		json_decref(ev);
		/* the newest, whole */
		assert_int_equal(events_wait(b, (uint64_t)i, 100, &text, &seq, &missed), 1);
		assert_int_equal(seq, (uint64_t)i + 1);
		got = json_loads(text, 0, NULL);
		assert_non_null(got);
		assert_int_equal(json_integer_value(json_object_get(got, "i")), i);
		assert_int_equal(strlen(json_string_value(json_object_get(got, "pad"))), n);
		json_decref(got);
		free(text);
	}
	/* every one kept, from the oldest: consecutive, intact */
	assert_int_equal(events_wait(b, 0, 100, &text, &seq, &missed), 1);
	expect = seq;
	assert_int_equal(missed, seq - 1);
	for (after = 0;; after = seq) {
		json_t *got;

		if (after) {
			if (events_wait(b, after, 0, &text, &seq, &missed) != 1)
				break;
			assert_int_equal(missed, 0);
		}
		assert_int_equal(seq, expect++);
		got = json_loads(text, 0, NULL);
		assert_non_null(got);
		assert_int_equal(json_integer_value(json_object_get(got, "i")), (json_int_t)seq - 1);
		assert_int_equal(json_integer_value(json_object_get(got, "seq")), (json_int_t)seq);
		kept_bytes += strlen(text);
		json_decref(got);
		free(text);
	}
	assert_int_equal(expect, 3001);
	assert_true(kept_bytes <= EVENTS_TEXT_BYTES);
	assert_true(kept_bytes > EVENTS_TEXT_BYTES / 2); /* the buffer is used, not one text at a time */
	events_free(b);
}

/* The final event of a grant of 4,096 blocks (its whole report): readers get
 * the bytes published, and the ring keeps 32 of them (kept as runs: a few
 * hundred bytes each, where the text of one is 700 kB). */
static void test_big_reports_kept_as_runs(void **state)
{
	struct report r = { .agent = "a", .id = "g", .generation = 1, .state = MSG_STATE_APPLIED, .kind = MSG_GRANT,
			    .block_size = 128u << 20 };
	struct event_bus *b;
	uint64_t seq = 0, missed = 9;
	char *text = NULL;

	(void)state;
	r.blocks = calloc(4096, sizeof(*r.blocks));
	assert_non_null(r.blocks);
	for (size_t i = 0; i < 4096; i++) {
		r.blocks[r.n_blocks++] = (struct report_block){ .block = 16 + i, .configured = true,
								.memmap_on_memory = 1 };
		snprintf(r.blocks[i].state, sizeof(r.blocks[i].state), "online");
		snprintf(r.blocks[i].zone, sizeof(r.blocks[i].zone), "Movable");
	}
	snprintf(r.blocks[7].error_code, sizeof(r.blocks[7].error_code), "EBUSY");
	snprintf(r.blocks[7].error_message, sizeof(r.blocks[7].error_message), "online: busy");
	assert_int_equal(events_new(64, &b), 0);
	for (int i = 0; i < 32; i++) {
		/* a hook's event with the report inside, the engine's report itself,
		 * and a progress event: the blocks that changed */
		json_t *ev = i % 3 == 0 ? json_pack("{s:s,s:o,s:i}", "event", "grant.applied", "status", report_to_json(&r),
						  "n", i)
				       : report_to_json(&r);
		char *want;

		assert_non_null(ev);
		if (i % 3 == 2) {
			json_object_set(ev, "changed_blocks", json_object_get(ev, "blocks"));
			json_object_del(ev, "blocks");
		}
		events_publish(b, ev);
		want = json_dumps(ev, JSON_COMPACT);
		json_decref(ev);
		if (i < 3) {
			assert_int_equal(events_wait(b, (uint64_t)i, 100, &text, &seq, &missed), 1);
			assert_string_equal(text, want);
			free(text);
		}
		free(want);
	}
	/* all 32 kept: the first is still there */
	assert_int_equal(events_wait(b, 0, 100, &text, &seq, &missed), 1);
	assert_int_equal(missed, 0);
	assert_int_equal(seq, 1);
	free(text);
	events_free(b);
	report_clear(&r);
}

static void test_close_wakes_readers(void **state)
{
	struct event_bus *b;
	char *text = NULL;
	uint64_t seq = 0, missed = 0;

	(void)state;
	assert_int_equal(events_new(4, &b), 0);
	events_close(b);
	assert_int_equal(events_wait(b, 0, 10000, &text, &seq, &missed), -EPIPE);
	events_close(b); /* twice is fine */
	events_free(b);
}

/* a stopping agent closes the bus right after publishing its last status:
 * a reader still gets what was published, then the end */
static void test_close_keeps_what_was_published(void **state)
{
	struct event_bus *b;
	char *text = NULL;
	uint64_t seq = 0, missed = 0;

	(void)state;
	assert_int_equal(events_new(8, &b), 0);
	publish_n(b, 2, "");
	events_close(b);
	assert_int_equal(events_wait(b, 0, 10000, &text, &seq, &missed), 1);
	assert_int_equal(seq, 1);
	free(text);
	text = NULL;
	assert_int_equal(events_wait(b, 1, 10000, &text, &seq, &missed), 1);
	assert_int_equal(seq, 2);
	free(text);
	text = NULL;
	assert_int_equal(events_wait(b, 2, 10000, &text, &seq, &missed), -EPIPE);
	events_free(b);
}

static void test_metrics_text(void **state)
{
	struct metrics *m;
	struct metrics_gauges g = { .block_size = 134217728, .online_bytes = 3ULL << 30, .standby_bytes = 1ULL << 30,
				    .granted_bytes = 1ULL << 30, .outbox_pending = 2 };
	char *text = NULL;

	(void)state;
	assert_int_equal(metrics_new(&m), 0);
	metrics_count_request(m, "grant", OUT_APPLIED);
	metrics_count_request(m, "grant", OUT_APPLIED);
	metrics_count_request(m, "revoke", OUT_PARTIAL);
	metrics_count_block_op(m, METRIC_BLOCK_ADD, 0, 0.002);
	metrics_count_block_op(m, METRIC_BLOCK_REMOVE, -EBUSY, 7.0);
	metrics_count_step(m, "configure", 0);
	metrics_count_step(m, "online", 0);
	metrics_count_step(m, "offline", -EBUSY);
	assert_int_equal(metrics_render(m, &g, &text), 0);
	assert_non_null(strstr(text, "memgrant_online_bytes 3221225472\n"));
	assert_non_null(strstr(text, "memgrant_requests_total{kind=\"grant\",outcome=\"applied\"} 2\n"));
	assert_non_null(strstr(text, "memgrant_requests_total{kind=\"revoke\",outcome=\"partial\"} 1\n"));
	/* a block operation counts the block, whatever step it ended at */
	assert_non_null(strstr(text, "memgrant_block_operations_total{operation=\"add\",result=\"ok\"} 1\n"));
	assert_non_null(strstr(text, "memgrant_block_operations_total{operation=\"remove\",result=\"EBUSY\"} 1\n"));
	assert_null(strstr(text, "memgrant_block_operations_total{step="));
	/* every kernel write by its step */
	assert_non_null(strstr(text, "memgrant_executor_steps_total{step=\"configure\",result=\"ok\"} 1\n"));
	assert_non_null(strstr(text, "memgrant_executor_steps_total{step=\"online\",result=\"ok\"} 1\n"));
	assert_non_null(strstr(text, "memgrant_executor_steps_total{step=\"offline\",result=\"EBUSY\"} 1\n"));
	/* histogram buckets are cumulative */
	assert_non_null(strstr(text, "memgrant_block_operation_seconds_bucket{le=\"0.01\"} 1\n"));
	assert_non_null(strstr(text, "memgrant_block_operation_seconds_bucket{le=\"5\"} 1\n"));
	assert_non_null(strstr(text, "memgrant_block_operation_seconds_bucket{le=\"30\"} 2\n"));
	assert_non_null(strstr(text, "memgrant_block_operation_seconds_bucket{le=\"+Inf\"} 2\n"));
	assert_non_null(strstr(text, "memgrant_block_operation_seconds_count 2\n"));
	free(text);
	metrics_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_order_with_seq),
		cmocka_unit_test(test_slow_reader_is_told_what_it_missed),
		cmocka_unit_test(test_bounded_in_bytes),
		cmocka_unit_test(test_text_buffer_wraps),
		cmocka_unit_test(test_big_reports_kept_as_runs),
		cmocka_unit_test(test_close_wakes_readers),
		cmocka_unit_test(test_close_keeps_what_was_published),
		cmocka_unit_test(test_metrics_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
