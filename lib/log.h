/* SPDX-License-Identifier: MIT */
/*
 * Daemon logging to stderr.  Under journald (JOURNAL_STREAM names stderr) each
 * line starts with a syslog priority prefix "<3>" so journald keeps the
 * level; otherwise lines are plain "memgrantd: error: ...".  Lines below the
 * configured level are dropped.  Only the daemon logs; library code returns
 * errors instead.  Thread-safe: one fprintf per line.
 */
#pragma once

#include <stdbool.h>
#include <syslog.h>

struct mg_log {
	bool journal;  /* prefix lines with <N> */
	int level;     /* LOG_ERR .. LOG_DEBUG */
	const char *ident;
};

void log_init(struct mg_log *l, const char *ident, int level);
int log_level_parse(const char *s); /* "debug" -> LOG_DEBUG, -EINVAL when unknown */
void log_msg(const struct mg_log *l, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_err(l, ...) log_msg(l, LOG_ERR, __VA_ARGS__)
#define log_warn(l, ...) log_msg(l, LOG_WARNING, __VA_ARGS__)
#define log_notice(l, ...) log_msg(l, LOG_NOTICE, __VA_ARGS__)
#define log_info(l, ...) log_msg(l, LOG_INFO, __VA_ARGS__)
#define log_debug(l, ...) log_msg(l, LOG_DEBUG, __VA_ARGS__)
