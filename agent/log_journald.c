/* SPDX-License-Identifier: MIT */
#include "agent/log_journald.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
/* CODE_FILE= and CODE_LINE= would always name this file */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "lib/util.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* at most: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and 2 per field */
#define FIELDS_MAX 8

static int journald_send(const struct mg_log *l, int prio, const char *msg, const struct log_field *f, size_t n)
{
	char text[2100], pri[16], ident[80], vals[FIELDS_MAX][96];
	struct iovec iov[3 + 2 * FIELDS_MAX];
	size_t k = 0, v = 0;

	if (n > FIELDS_MAX)
		n = FIELDS_MAX;
	snprintf(text, sizeof(text), "MESSAGE=%s", msg);
	snprintf(pri, sizeof(pri), "PRIORITY=%d", prio & LOG_PRIMASK);
	snprintf(ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s", l->ident);
	iov[k++] = (struct iovec){ text, strlen(text) };
	iov[k++] = (struct iovec){ pri, strlen(pri) };
	iov[k++] = (struct iovec){ ident, strlen(ident) };
	for (size_t i = 0; i < n; i++) {
		switch (f[i].kind) {
		case LOG_F_GRANT_ID:
			if (!f[i].str)
				continue;
			snprintf(vals[v], sizeof(vals[v]), "GRANT_ID=%s", f[i].str);
			break;
		case LOG_F_STEP:
			if (!f[i].str)
				continue;
			snprintf(vals[v], sizeof(vals[v]), "STEP=%s", f[i].str);
			break;
		case LOG_F_BLOCK:
			snprintf(vals[v], sizeof(vals[v]), "BLOCK=%llu", (unsigned long long)f[i].block);
			break;
		case LOG_F_ERRNO: {
			int e = f[i].err < 0 ? -f[i].err : f[i].err;

			if (!e)
				continue;
			snprintf(vals[v], sizeof(vals[v]), "ERRNO=%d", e);
			iov[k++] = (struct iovec){ vals[v], strlen(vals[v]) };
			v++;
			snprintf(vals[v], sizeof(vals[v]), "ERRNO_NAME=%s", errno_name(e));
			break;
		}
		default:
			continue;
		}
		iov[k++] = (struct iovec){ vals[v], strlen(vals[v]) };
		v++;
		if (v + 2 > FIELDS_MAX)
			break;
	}
	return sd_journal_sendv(iov, (int)k);
}

bool log_journald_use(struct mg_log *l)
{
	struct stat st;

	/* libsystemd drops an entry silently when the socket is missing: only
	 * where journald listens, else the <N> lines on stderr stay */
	if (!l->journal || stat(JOURNAL_SOCKET, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	l->send = journald_send;
	return true;
}
