/* SPDX-License-Identifier: MIT */
/*
 * Line framing of the guest channel (providers/channel.h): lines split at
 * newlines wherever the reads end, '\r' dropped, lines over the limit
 * reported once and skipped up to their newline, the stream resynchronised
 * right after it; callbacks' errors stop the feed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/util.h"
#include "providers/channel.h"

struct rec {
	char lines[16][128];
	size_t n_lines;
	size_t too_long[16];
	size_t n_too_long;
	char order[32]; /* 'L' line, 'T' too long, in the order seen */
	size_t n_order;
	int fail_at;    /* line number (1-based) whose callback fails, 0 never */
};

static int on_line(void *ctx, const char *line, size_t len)
{
	struct rec *r = ctx;

	assert_true(r->n_lines < ARRAY_SIZE(r->lines));
	assert_true(len < sizeof(r->lines[0]));
	assert_null(memchr(line, '\n', len));
	memcpy(r->lines[r->n_lines], line, len);
	r->lines[r->n_lines][len] = '\0';
	r->n_lines++;
	r->order[r->n_order++] = 'L';
	return r->fail_at && (size_t)r->fail_at == r->n_lines ? -EPROTO : 0;
}

static int on_too_long(void *ctx, size_t seen)
{
	struct rec *r = ctx;

	r->too_long[r->n_too_long++] = seen;
	r->order[r->n_order++] = 'T';
	return 0;
}

static const struct channel_reader_ops ops = { .line = on_line, .too_long = on_too_long };

static void feed_all(struct channel_reader *rd, const char *s, size_t len, size_t step, struct rec *r)
{
	for (size_t i = 0; i < len; i += step)
		assert_int_equal(channel_reader_feed(rd, s + i, len - i < step ? len - i : step, &ops, r), 0);
}

static void test_lines_any_split(void **state)
{
	static const char text[] = "{\"a\":1}\n\n{\"b\":2}\r\nxyz\n";
	(void)state;

	/* the same lines whether the bytes come at once, one by one, or in 3s */
	for (size_t step = 1; step <= sizeof(text); step++) {
		struct channel_reader rd;
		struct rec r = { 0 };

		assert_int_equal(channel_reader_init(&rd, 64), 0);
		feed_all(&rd, text, sizeof(text) - 1, step, &r);
		assert_int_equal(r.n_lines, 4);
		assert_string_equal(r.lines[0], "{\"a\":1}");
		assert_string_equal(r.lines[1], "");          /* empty lines reach the caller, who ignores them */
		assert_string_equal(r.lines[2], "{\"b\":2}"); /* CRLF: the '\r' is dropped */
		assert_string_equal(r.lines[3], "xyz");
		assert_int_equal(r.n_too_long, 0);
		channel_reader_done(&rd);
	}
}

static void test_partial_line_waits(void **state)
{
	struct channel_reader rd;
	struct rec r = { 0 };
	(void)state;

	assert_int_equal(channel_reader_init(&rd, 64), 0);
	assert_int_equal(channel_reader_feed(&rd, "abc", 3, &ops, &r), 0);
	assert_int_equal(r.n_lines, 0);
	assert_int_equal(channel_reader_feed(&rd, "def\ng", 5, &ops, &r), 0);
	assert_int_equal(r.n_lines, 1);
	assert_string_equal(r.lines[0], "abcdef");
	/* a reset (new host session) forgets the half line */
	channel_reader_reset(&rd);
	assert_int_equal(channel_reader_feed(&rd, "h\n", 2, &ops, &r), 0);
	assert_string_equal(r.lines[1], "h");
	channel_reader_done(&rd);
}

static void test_limit_exact_and_over(void **state)
{
	enum { MAX = 16 };
	char buf[64];
	(void)state;

	for (size_t step = 1; step <= 40; step++) {
		struct channel_reader rd;
		struct rec r = { 0 };
		size_t n = 0;

		/* exactly MAX bytes: a line; MAX + 1: too long, skipped; then "ok" */
		memset(buf, 'a', MAX);
		n = MAX;
		buf[n++] = '\n';
		memset(buf + n, 'b', MAX + 1);
		n += MAX + 1;
		memcpy(buf + n, "\nok\n", 4);
		n += 4;

		assert_int_equal(channel_reader_init(&rd, MAX), 0);
		feed_all(&rd, buf, n, step, &r);
		assert_int_equal(r.n_lines, 2);
		assert_int_equal(strlen(r.lines[0]), MAX);
		assert_string_equal(r.lines[1], "ok");
		assert_int_equal(r.n_too_long, 1);
		assert_true(r.too_long[0] > MAX);
		assert_memory_equal(r.order, "LTL", 3);
		channel_reader_done(&rd);
	}
}

static void test_too_long_reported_once(void **state)
{
	struct channel_reader rd;
	struct rec r = { 0 };
	char chunk[100];
	(void)state;

	/* 10 000 bytes without a newline in 100-byte reads: one report, not 100 */
	memset(chunk, 'x', sizeof(chunk));
	assert_int_equal(channel_reader_init(&rd, 64), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(channel_reader_feed(&rd, chunk, sizeof(chunk), &ops, &r), 0);
	assert_int_equal(r.n_too_long, 1);
	assert_int_equal(r.n_lines, 0);
	/* the next newline ends it; the glued message right after is read */
	assert_int_equal(channel_reader_feed(&rd, "xx\n{\"t\":1}\n", 11, &ops, &r), 0);
	assert_int_equal(r.n_lines, 1);
	assert_string_equal(r.lines[0], "{\"t\":1}");
	/* a second oversized line is reported again */
	for (int i = 0; i < 2; i++)
		assert_int_equal(channel_reader_feed(&rd, chunk, sizeof(chunk), &ops, &r), 0);
	assert_int_equal(r.n_too_long, 2);
	channel_reader_done(&rd);
}

static void test_callback_error_stops(void **state)
{
	struct channel_reader rd;
	struct rec r = { .fail_at = 2 };
	(void)state;

	assert_int_equal(channel_reader_init(&rd, 64), 0);
	assert_int_equal(channel_reader_feed(&rd, "a\nb\nc\n", 6, &ops, &r), -EPROTO);
	assert_int_equal(r.n_lines, 2); /* "c" was not consumed */
	channel_reader_done(&rd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_any_split),
		cmocka_unit_test(test_partial_line_waits),
		cmocka_unit_test(test_limit_exact_and_over),
		cmocka_unit_test(test_too_long_reported_once),
		cmocka_unit_test(test_callback_error_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
