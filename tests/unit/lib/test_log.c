/* SPDX-License-Identifier: MIT */
/*
 * The stamp of a log line on stderr (lib/log.h log_utc_stamp()): the civil
 * date computed by hand, checked against gmtime_r() across leap days,
 * century years and the whole range a machine's clock may show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/log.h"

static void expect_as_gmtime(time_t t, long nsec)
{
	char got[64], want[64];
	struct tm tm;

	assert_non_null(gmtime_r(&t, &tm));
	snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nsec / 1000000);
	log_utc_stamp((struct timespec){ .tv_sec = t, .tv_nsec = nsec }, got, sizeof(got));
	assert_string_equal(got, want);
}

static void test_known_stamps(void **state)
{
	char got[64];

	(void)state;
	log_utc_stamp((struct timespec){ .tv_sec = 0 }, got, sizeof(got));
	assert_string_equal(got, "1970-01-01T00:00:00.000Z");
	log_utc_stamp((struct timespec){ .tv_sec = 951782400, .tv_nsec = 999999999 }, got, sizeof(got));
	assert_string_equal(got, "2000-02-29T00:00:00.999Z");
	log_utc_stamp((struct timespec){ .tv_sec = 1796540711, .tv_nsec = 123000000 }, got, sizeof(got));
	assert_string_equal(got, "2026-12-06T07:05:11.123Z");
}

/* every day from 1900 to 2200 at a moment that moves through the day,
 * and the days around each year's end */
static void test_as_gmtime(void **state)
{
	(void)state;
	for (long long t = -2208988800LL; t < 7258118400LL; t += 86400 + 3607)
		expect_as_gmtime((time_t)t, (long)(t % 1000) * 1000000);
	for (int y = 1901; y < 2200; y++) {
		struct tm tm = { .tm_year = y - 1900, .tm_mon = 0, .tm_mday = 1 };
		time_t t = timegm(&tm);

		expect_as_gmtime(t - 1, 999000000);
		expect_as_gmtime(t, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_stamps),
		cmocka_unit_test(test_as_gmtime),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
