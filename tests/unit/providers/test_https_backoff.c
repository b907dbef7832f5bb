/* SPDX-License-Identifier: MIT */
/* The HTTPS provider's retry pacing (providers/https_backoff.h), with an
 * injected random source (a fixed-seed generator, and the extremes 0 and
 * 2^32-1): full jitter fills [0, step] evenly, the old equal rule stays in
 * [step/2, step], an announced window sets the first step and spreads the
 * next poll and the retries after Retry-After, the step doubles to the cap,
 * without a window a control plane lost after it answered is retried over
 * the default window, and the Memgrant-Spread header parses or is refused.
 * No clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>

#include "providers/https_backoff.h"

#define DRAWS 20000

/* xorshift32: a random source the test controls */
static uint32_t rnd_next(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static void test_uniform_extremes(void **state)
{
	(void)state;
	assert_int_equal(backoff_uniform(1000, 0), 0);
	assert_int_equal(backoff_uniform(1000, UINT32_MAX), 1000);
	assert_int_equal(backoff_uniform(0, UINT32_MAX), 0);
	assert_int_equal(backoff_uniform(UINT_MAX - 1, UINT32_MAX), UINT_MAX - 1);
}

/* N draws of the first retry's wait, for STEP as the first step */
static void draws(enum backoff_rule rule, unsigned spread_ms, unsigned *w, size_t n)
{
	uint32_t seed = 0x2545f491u;

	for (size_t i = 0; i < n; i++) {
		struct backoff b = { .first_ms = 500, .cap_ms = 60000, .rule = rule };
		w[i] = backoff_next(&b, false, -1, spread_ms, rnd_next(&seed), rnd_next(&seed));
	}
}

static void test_full_jitter_fills_the_step(void **state)
{
	static unsigned w[DRAWS];
	unsigned buckets[10] = { 0 };
	unsigned lo = UINT_MAX, hi = 0;
	double sum = 0;

	(void)state;
	draws(BACKOFF_FULL, 0, w, DRAWS);
	for (size_t i = 0; i < DRAWS; i++) {
		assert_true(w[i] <= 500);
		lo = w[i] < lo ? w[i] : lo;
		hi = w[i] > hi ? w[i] : hi;
		sum += w[i];
		buckets[w[i] >= 500 ? 9 : w[i] / 50]++;
	}
	/* the whole of [0, step], not [step/2, step] */
	assert_true(lo <= 5);
	assert_true(hi >= 495);
	assert_true(sum / DRAWS > 240 && sum / DRAWS < 260);
	/* each tenth of the step gets its tenth of the draws, within 10 % */
	for (size_t i = 0; i < 10; i++)
		assert_true(buckets[i] > DRAWS / 10 * 9 / 10 && buckets[i] < DRAWS / 10 * 11 / 10);
}

static void test_equal_jitter_is_the_old_rule(void **state)
{
	static unsigned w[DRAWS];
	unsigned lo = UINT_MAX, hi = 0;

	(void)state;
	/* the old rule ignores a window */
	draws(BACKOFF_EQUAL, 30000, w, DRAWS);
	for (size_t i = 0; i < DRAWS; i++) {
		assert_true(w[i] >= 250 && w[i] <= 500);
		lo = w[i] < lo ? w[i] : lo;
		hi = w[i] > hi ? w[i] : hi;
	}
	assert_true(lo <= 255 && hi >= 495);
}

static void test_window_sets_the_first_step(void **state)
{
	static unsigned w[DRAWS];
	unsigned buckets[10] = { 0 };

	(void)state;
	draws(BACKOFF_FULL, 30000, w, DRAWS);
	for (size_t i = 0; i < DRAWS; i++) {
		assert_true(w[i] <= 30000);
		buckets[w[i] >= 30000 ? 9 : w[i] / 3000]++;
	}
	/* spread evenly over the window: at most N/W per second, within 10 % */
	for (size_t i = 0; i < 10; i++)
		assert_true(buckets[i] > DRAWS / 10 * 9 / 10 && buckets[i] < DRAWS / 10 * 11 / 10);
}

static void test_steps_double_to_the_cap(void **state)
{
	struct backoff b = { .first_ms = 500, .cap_ms = 8000, .rule = BACKOFF_FULL };
	const unsigned want[] = { 500, 1000, 2000, 4000, 8000, 8000 };

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		/* the largest random number draws the step itself */
		assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), want[i]);
		assert_int_equal(b.step_ms, want[i]);
	}
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 500);
	assert_int_equal(backoff_next(&b, true, -1, 0, 0, 0), 0); /* full jitter down to 0 */
	assert_int_equal(b.step_ms, 8000);
	/* a window larger than the cap raises the cap to it */
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, true, -1, 20000, UINT32_MAX, 0), 20000);
}

/* With a window: a uniform phase, then one attempt every W exactly, so
 * that whenever the control plane comes back the fleet's next attempts are
 * spread evenly over the next W: N agents' residues, one second's share
 * of them at most N/W (within 15 %). */
static void test_window_keeps_the_phase(void **state)
{
	enum { AGENTS = 30000, W_MS = 30000 };
	unsigned buckets[30] = { 0 };
	uint32_t seed = 12345;

	(void)state;
	for (int i = 0; i < AGENTS; i++) {
		struct backoff b = { .first_ms = 500, .cap_ms = 20000, .rule = BACKOFF_FULL };
		/* an outage from 0 to 95 s: attempts until one falls after it */
		unsigned long t = backoff_next(&b, false, -1, W_MS, rnd_next(&seed), rnd_next(&seed));
		unsigned attempts = 1;

		assert_true(t <= W_MS);
		while (t < 95000) {
			unsigned w = backoff_next(&b, false, -1, W_MS, rnd_next(&seed), rnd_next(&seed));
			assert_int_equal(w, W_MS);
			t += w;
			attempts++;
		}
		assert_true(t - 95000 <= W_MS);
		assert_true(attempts <= 95000 / W_MS + 2);
		buckets[(t - 95000) / 1000 >= 30 ? 29 : (t - 95000) / 1000]++;
	}
	for (size_t i = 0; i < 30; i++)
		assert_true(buckets[i] < AGENTS / 30 * 115 / 100 && buckets[i] > AGENTS / 30 * 85 / 100);
}

/* No window announced: a fleet whose control plane answered, then
 * restarted (down from 0 to 3 s), comes back over the default window, one
 * second's share at most N / W (within 15 %), not in its first seconds;
 * every agent back within W of the return, in two attempts at most. */
static void test_default_window_after_a_restart(void **state)
{
	enum { AGENTS = 30000, DOWN_MS = 3000, W_MS = BACKOFF_DEFAULT_WINDOW_MS };
	unsigned buckets[W_MS / 1000] = { 0 };
	uint32_t seed = 4242;

	(void)state;
	for (int i = 0; i < AGENTS; i++) {
		struct backoff b = { .first_ms = 500, .cap_ms = 55000, .default_window_ms = W_MS, .rule = BACKOFF_FULL };
		unsigned long t;
		unsigned attempts = 1;

		backoff_reset(&b); /* it answered */
		t = backoff_next(&b, false, -1, 0, rnd_next(&seed), rnd_next(&seed));
		assert_true(t <= W_MS);
		while (t < DOWN_MS) {
			assert_int_equal(backoff_next(&b, false, -1, 0, rnd_next(&seed), rnd_next(&seed)), W_MS);
			t += W_MS;
			attempts++;
		}
		assert_true(attempts <= 2);
		assert_true(t - DOWN_MS <= W_MS);
		buckets[(t - DOWN_MS) / 1000 >= W_MS / 1000 ? W_MS / 1000 - 1 : (t - DOWN_MS) / 1000]++;
	}
	for (size_t i = 0; i < W_MS / 1000; i++)
		assert_true(buckets[i] < AGENTS / (W_MS / 1000) * 115 / 100);
}

/* The default window: only after a success (an agent starting retries
 * from the first step), at most the cap, never under the old rule nor when
 * switched off, and a window announced takes its place. */
static void test_default_window_when(void **state)
{
	struct backoff b = { .first_ms = 500, .cap_ms = 55000, .default_window_ms = 20000, .rule = BACKOFF_FULL };

	(void)state;
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 500); /* never answered */
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 1000);
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 20000);
	assert_int_equal(backoff_next(&b, false, -1, 0, 0, 0), 20000);
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 0, 0, 0), 0); /* uniform from 0 */
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 30000, UINT32_MAX, 0), 30000); /* announced */
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, true, -1, 0, UINT32_MAX, 0), 55000); /* at the cap: as before */
	b = (struct backoff){ .first_ms = 500, .cap_ms = 5000, .default_window_ms = 20000, .rule = BACKOFF_FULL };
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 5000); /* the cap bounds it */
	b = (struct backoff){ .first_ms = 500, .cap_ms = 55000, .default_window_ms = 0, .rule = BACKOFF_FULL };
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 500); /* switched off */
	b = (struct backoff){ .first_ms = 500, .cap_ms = 55000, .default_window_ms = 20000, .rule = BACKOFF_EQUAL };
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, -1, 0, UINT32_MAX, 0), 500); /* the old rule */
	/* Retry-After stays a floor over the default window */
	b = (struct backoff){ .first_ms = 500, .cap_ms = 55000, .default_window_ms = 20000, .rule = BACKOFF_FULL };
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, 5, 0, 0, UINT32_MAX), 5000);
}

static void test_retry_after_is_a_floor(void **state)
{
	struct backoff b = { .first_ms = 500, .cap_ms = 60000, .rule = BACKOFF_FULL };
	uint32_t seed = 7;

	(void)state;
	assert_int_equal(backoff_next(&b, false, 3, 0, UINT32_MAX, UINT32_MAX), 3000);
	assert_int_equal(backoff_next(&b, false, 100000, 0, 0, 0), BACKOFF_RETRY_AFTER_MAX_S * 1000);
	/* with a window: Retry-After, then spread over the window */
	for (int i = 0; i < 1000; i++) {
		unsigned w;

		backoff_reset(&b);
		w = backoff_next(&b, false, 5, 10000, rnd_next(&seed), rnd_next(&seed));
		assert_true(w >= 5000 && w <= 15000);
	}
	backoff_reset(&b);
	assert_int_equal(backoff_next(&b, false, 5, 10000, 0, 0), 5000);
	assert_int_equal(backoff_next(&b, false, 5, 10000, 0, UINT32_MAX), 15000);
}

static void test_poll_pause(void **state)
{
	struct backoff full = { .first_ms = 500, .cap_ms = 60000, .rule = BACKOFF_FULL };
	struct backoff old = { .first_ms = 500, .cap_ms = 60000, .rule = BACKOFF_EQUAL };
	uint32_t seed = 99;
	unsigned hi = 0;

	(void)state;
	assert_int_equal(backoff_poll_pause(&full, 0, UINT32_MAX), 0);
	assert_int_equal(backoff_poll_pause(&old, 10000, UINT32_MAX), 0);
	for (int i = 0; i < DRAWS; i++) {
		unsigned p = backoff_poll_pause(&full, 10000, rnd_next(&seed));
		assert_true(p <= 10000);
		hi = p > hi ? p : hi;
	}
	assert_true(hi >= 9900);
}

static void test_parse_spread(void **state)
{
	unsigned ms = 1;

	(void)state;
	assert_int_equal(backoff_parse_spread("30", &ms), 0);
	assert_int_equal(ms, 30000);
	assert_int_equal(backoff_parse_spread(" 0 \r\n", &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(backoff_parse_spread("99999999999999999999", &ms), 0);
	assert_int_equal(ms, BACKOFF_SPREAD_MAX_S * 1000);
	ms = 42;
	assert_int_equal(backoff_parse_spread("", &ms), -EINVAL);
	assert_int_equal(backoff_parse_spread("-5", &ms), -EINVAL);
	assert_int_equal(backoff_parse_spread("1.5", &ms), -EINVAL);
	assert_int_equal(backoff_parse_spread("10s", &ms), -EINVAL);
	assert_int_equal(ms, 42); /* a refused value changes nothing */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uniform_extremes),
		cmocka_unit_test(test_full_jitter_fills_the_step),
		cmocka_unit_test(test_equal_jitter_is_the_old_rule),
		cmocka_unit_test(test_window_sets_the_first_step),
		cmocka_unit_test(test_steps_double_to_the_cap),
		cmocka_unit_test(test_window_keeps_the_phase),
		cmocka_unit_test(test_default_window_after_a_restart),
		cmocka_unit_test(test_default_window_when),
		cmocka_unit_test(test_retry_after_is_a_floor),
		cmocka_unit_test(test_poll_pause),
		cmocka_unit_test(test_parse_spread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
