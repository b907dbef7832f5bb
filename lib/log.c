/* SPDX-License-Identifier: MIT */
#include "lib/log.h"
#include "lib/util.h"

#include <stdarg.h>
#include <sys/stat.h>
#include <time.h>

/* JOURNAL_STREAM is "dev:ino" of the stream journald gave us; trust it only
 * when it still is our stderr (a child of ours may have inherited it). */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

void log_init(struct mg_log *l, const char *ident, int level)
{
	l->journal = stderr_is_journal();
	l->level = level;
	l->ident = ident;
	l->send = NULL;
}

static const char *prio_word(int prio)
{
	switch (prio) {
	case LOG_EMERG: case LOG_ALERT: case LOG_CRIT: case LOG_ERR: return "error: ";
	case LOG_WARNING: return "warning: ";
	case LOG_DEBUG: return "debug: ";
	default: return "";
	}
}

/*
 * NOW as "2026-12-06T07:05:11.123Z", computed from the seconds since the
 * epoch (days to a civil date: H. Hinnant's algorithm): not gmtime_r(),
 * whose first call reads /etc/localtime, a file the helper's seccomp filter
 * does not let it open.
 */
void log_utc_stamp(struct timespec now, char *buf, size_t len)
{
	long long days, secs, era, doe, yoe, doy, mp, y;
	unsigned m, d;

	days = (long long)now.tv_sec / 86400;
	secs = (long long)now.tv_sec % 86400;
	if (secs < 0) {
		secs += 86400;
		days--;
	}
	days += 719468; /* from 1970-01-01 to 0000-03-01 */
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	y = yoe + era * 400 + (m <= 2);
	snprintf(buf, len, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%03ldZ", y, m, d, secs / 3600, secs / 60 % 60,
		 secs % 60, now.tv_nsec / 1000000);
}

static void log_vfields(const struct mg_log *l, int prio, const struct log_field *f, size_t n, const char *fmt,
			va_list ap)
{
	char line[2048];

	if (prio > l->level)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	if (l->send && l->send(l, prio, line, f, n) == 0)
		return;
	if (l->journal)
		fprintf(stderr, "<%d>%s\n", prio, line);
	else {
		/* journald and syslog stamp each line themselves; a terminal or a
		 * file does not: UTC to the millisecond, as events' "time" */
		struct timespec now = { 0 };
		char when[64];

		clock_gettime(CLOCK_REALTIME, &now);
		log_utc_stamp(now, when, sizeof(when));
		fprintf(stderr, "%s %s: %s%s\n", when, l->ident, prio_word(prio), line);
	}
}

void log_msg(const struct mg_log *l, int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vfields(l, prio, NULL, 0, fmt, ap);
	va_end(ap);
}

void log_fields(const struct mg_log *l, int prio, const struct log_field *f, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vfields(l, prio, f, n, fmt, ap);
	va_end(ap);
}
