/* SPDX-License-Identifier: MIT */
#include "lib/log_journald.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/util.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

/* journald's native protocol (systemd.io/JOURNAL_NATIVE_PROTOCOL), as
 * sd_journal_sendv() speaks it, without libsystemd: one datagram, each
 * field "KEY=value\n", or "KEY\n", its length (64 bits, little endian),
 * the value and "\n" when the value holds a newline.  Ours are at most a
 * few kB, far below the datagram limit, so the memfd fallback is not needed. */
static int journal_sendv(const struct iovec *iov, size_t n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = JOURNAL_SOCKET };
	char buf[4096];
	size_t len = 0;
	ssize_t sent;
	int fd, e;

	for (size_t i = 0; i < n; i++) {
		const char *f = iov[i].iov_base, *eq = memchr(f, '=', iov[i].iov_len);
		size_t klen, vlen;

		if (!eq)
			return -EINVAL;
		klen = (size_t)(eq - f);
		vlen = iov[i].iov_len - klen - 1;
		if (len + klen + vlen + 10 > sizeof(buf))
			return -EMSGSIZE;
		if (!memchr(eq + 1, '\n', vlen)) {
			memcpy(buf + len, f, iov[i].iov_len);
			len += iov[i].iov_len;
		} else {
			uint64_t le = vlen;

			memcpy(buf + len, f, klen);
			len += klen;
			buf[len++] = '\n';
			for (int b = 0; b < 8; b++)
				buf[len++] = (char)((le >> (8 * b)) & 0xff);
			memcpy(buf + len, eq + 1, vlen);
			len += vlen;
		}
		buf[len++] = '\n';
	}
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent = sendto(fd, buf, len, MSG_NOSIGNAL, (struct sockaddr *)&sa, sizeof(sa));
	e = errno;
	close(fd);
	return sent < 0 ? -e : 0;
}

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
	return journal_sendv(iov, k);
}

bool log_journald_use(struct mg_log *l)
{
	struct stat st;

	/* an entry sent to a missing socket is lost: only where journald
	 * listens, else the <N> lines on stderr stay */
	if (!l->journal || stat(JOURNAL_SOCKET, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	l->send = journald_send;
	return true;
}
