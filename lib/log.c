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
		struct timespec now;
		struct tm tm;
		char when[64] = "";

		clock_gettime(CLOCK_REALTIME, &now);
		if (gmtime_r(&now.tv_sec, &tm))
			snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ", tm.tm_year + 1900,
				 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
		fprintf(stderr, "%s%s: %s%s\n", when, l->ident, prio_word(prio), line);
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
