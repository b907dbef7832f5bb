/* SPDX-License-Identifier: MIT */
/*
 * Daemon logging.  Lines below the configured level are dropped.  Only the
 * daemon logs; library code returns errors instead.  Thread-safe: one write
 * per line.
 *
 * Where lines go:
 * - a sink set by the program (struct mg_log.send): memgrantd sets the
 *   journald one (lib/log_journald.h) when its stderr is the journal, so
 *   that each entry carries the fields below as journal fields;
 * - otherwise stderr: under journald (JOURNAL_STREAM names stderr) each line
 *   starts with a syslog priority prefix "<3>" so journald keeps the level;
 *   elsewhere lines are plain "2026-12-06T07:05:11.123Z memgrantd: error: ..."
 *   (UTC, as journald would stamp them).  Fields are not
 *   printed there: the message says everything in words.
 *
 * Fields are typed (log_f_grant(), log_f_block(), ...), so a caller cannot
 * misspell a journal field name or give a block number as text:
 *   log_fields(l, LOG_ERR, LOG_FIELDS(log_f_grant(id), log_f_block(17),
 *              log_f_step("configure"), log_f_errno(-EIO)), "grant %s: ...", id);
 * In the journal: GRANT_ID= (the id of the grant or revocation), BLOCK=,
 * STEP= (memmap_on_memory, configure, online, offline, deconfigure),
 * ERRNO= (the number, as systemd's own field) and ERRNO_NAME= (EIO, ...).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>
#include <time.h>

enum log_field_kind { LOG_F_GRANT_ID, LOG_F_BLOCK, LOG_F_STEP, LOG_F_ERRNO };

struct log_field {
	enum log_field_kind kind;
	union {
		const char *str; /* LOG_F_GRANT_ID, LOG_F_STEP; NULL: the field is left out */
		uint64_t block;  /* LOG_F_BLOCK */
		int err;         /* LOG_F_ERRNO: an errno, negative or positive; 0: left out */
	};
};

static inline struct log_field log_f_grant(const char *id)
{
	return (struct log_field){ .kind = LOG_F_GRANT_ID, .str = id };
}
static inline struct log_field log_f_block(uint64_t block)
{
	return (struct log_field){ .kind = LOG_F_BLOCK, .block = block };
}
static inline struct log_field log_f_step(const char *step)
{
	return (struct log_field){ .kind = LOG_F_STEP, .str = step };
}
static inline struct log_field log_f_errno(int err)
{
	return (struct log_field){ .kind = LOG_F_ERRNO, .err = err };
}

/* The array and the count of fields, for log_fields() */
#define LOG_FIELDS(...)                                                                                \
	((const struct log_field[]){ __VA_ARGS__ }),                                                   \
		(sizeof((const struct log_field[]){ __VA_ARGS__ }) / sizeof(struct log_field))

struct mg_log;
/* A sink: takes one message with its priority and fields; 0, or -errno
 * and the line goes to stderr instead. */
typedef int (*log_send_fn)(const struct mg_log *l, int prio, const char *msg, const struct log_field *f,
			   size_t n);

struct mg_log {
	bool journal;  /* stderr is the journal: prefix lines with <N> */
	int level;     /* LOG_ERR .. LOG_DEBUG */
	const char *ident;
	log_send_fn send; /* NULL: stderr */
};

void log_init(struct mg_log *l, const char *ident, int level);
void log_msg(const struct mg_log *l, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_fields(const struct mg_log *l, int prio, const struct log_field *f, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#define log_err(l, ...) log_msg(l, LOG_ERR, __VA_ARGS__)
#define log_warn(l, ...) log_msg(l, LOG_WARNING, __VA_ARGS__)
#define log_notice(l, ...) log_msg(l, LOG_NOTICE, __VA_ARGS__)
#define log_info(l, ...) log_msg(l, LOG_INFO, __VA_ARGS__)
#define log_debug(l, ...) log_msg(l, LOG_DEBUG, __VA_ARGS__)

/* NOW (CLOCK_REALTIME) as "2026-12-06T07:05:11.123Z", the stamp of a line
 * on stderr; no libc time zone code (safe under the helper's filter). */
void log_utc_stamp(struct timespec now, char *buf, size_t len);
