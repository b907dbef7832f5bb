/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl's HTTP/1.1 over memgrantd's Unix socket (http_unix.h): one
 * request per connection ("Connection: close"), the answer's body with a
 * Content-Length, chunked, or up to the end of the stream.
 */
#include "agent/ctl/http_unix.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/util.h"

#define HEAD_MAX 16384 /* status line and headers */

struct reader {
	int fd, intr_fd, timeout_ms;
	char buf[16384];
	size_t off, len;
};

/* Waits until FD is ready for EVENTS: 0, -ETIMEDOUT, or -EINTR when
 * INTR_FD (if any) became readable first. */
static int wait_fd(int fd, short events, int intr_fd, int timeout_ms)
{
	struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = intr_fd, .events = POLLIN } };
	int n;

	for (;;) {
		n = poll(p, intr_fd >= 0 ? 2 : 1, timeout_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		if (intr_fd >= 0 && (p[1].revents & POLLIN))
			return -EINTR;
		return 0;
	}
}

/* More bytes into R's buffer: >0, 0 at the end of the stream, or -errno. */
static ssize_t fill(struct reader *r)
{
	ssize_t n;
	int e;

	if (r->off > 0 && r->off == r->len)
		r->off = r->len = 0;
	if (r->len == sizeof(r->buf)) {
		memmove(r->buf, r->buf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
	}
	for (;;) {
		n = read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
		if (n >= 0) {
			r->len += (size_t)n;
			return n;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		e = wait_fd(r->fd, POLLIN, r->intr_fd, r->timeout_ms);
		if (e < 0)
			return e;
	}
}

/* One line (without its CR LF) into OUT of CAP bytes: 0, -EBADMSG when
 * longer, -ECONNRESET at the end of the stream, or -errno. */
static int read_line(struct reader *r, char *out, size_t cap)
{
	size_t n = 0;

	for (;;) {
		while (r->off < r->len) {
			char ch = r->buf[r->off++];
			if (ch == '\n') {
				if (n > 0 && out[n - 1] == '\r')
					n--;
				out[n] = '\0';
				return 0;
			}
			if (n + 1 >= cap)
				return -EBADMSG;
			out[n++] = ch;
		}
		ssize_t got = fill(r);
		if (got == 0)
			return -ECONNRESET;
		if (got < 0)
			return (int)got;
	}
}

/* Passes up to WANT bytes (SIZE_MAX: to the end of the stream) to ON_DATA. */
static int read_body(struct reader *r, size_t want, hu_data_fn on_data, void *cls)
{
	while (want > 0) {
		if (r->off == r->len) {
			ssize_t got = fill(r);
			if (got == 0)
				return want == SIZE_MAX ? 0 : -ECONNRESET;
			if (got < 0)
				return (int)got;
		}
		size_t n = r->len - r->off;
		if (n > want)
			n = want;
		if (on_data(r->buf + r->off, n, cls))
			return -ECANCELED;
		r->off += n;
		if (want != SIZE_MAX)
			want -= n;
	}
	return 0;
}

static int read_chunked(struct reader *r, hu_data_fn on_data, void *cls)
{
	char line[256];
	int e;

	for (;;) {
		char *end;
		unsigned long long size;

		e = read_line(r, line, sizeof(line));
		if (e < 0)
			return e;
		errno = 0;
		size = strtoull(line, &end, 16);
		if (end == line || errno || (*end && *end != ';'))
			return -EBADMSG;
		if (size == 0)
			return 0; /* trailers, if any, are not needed */
		e = read_body(r, (size_t)size, on_data, cls);
		if (e < 0)
			return e;
		e = read_line(r, line, sizeof(line));
		if (e < 0)
			return e;
		if (line[0])
			return -EBADMSG;
	}
}

static int write_all(int fd, const char *p, size_t n, int timeout_ms)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			int e = wait_fd(fd, POLLOUT, -1, timeout_ms);
			if (e < 0)
				return e;
			continue;
		}
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int hu_connect(const char *path, int *fd_out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(path);
	int fd, e;

	*fd_out = -1;
	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len);
	/* non-blocking: a full listen queue is EAGAIN at once, not a wait */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		close(fd);
		return -e;
	}
	*fd_out = fd;
	return 0;
}

int hu_exchange(int fd, const struct hu_request *rq, long *status)
{
	struct reader *r = calloc(1, sizeof(*r));
	char line[HEAD_MAX], head[1024];
	size_t body_len = rq->body ? strlen(rq->body) : 0, content_length = SIZE_MAX;
	bool chunked = false;
	int e, n;

	*status = 0;
	if (!r)
		return -ENOMEM;
	*r = (struct reader){ .fd = fd, .intr_fd = rq->intr_fd, .timeout_ms = rq->timeout_ms };
	if (rq->body)
		n = snprintf(head, sizeof(head),
			     "%s %s HTTP/1.1\r\nHost: memgrantd\r\nConnection: close\r\n"
			     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
			     rq->method, rq->path, body_len);
	else
		n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: memgrantd\r\nConnection: close\r\n\r\n",
			     rq->method, rq->path);
	e = n < 0 || (size_t)n >= sizeof(head) ? -ENAMETOOLONG : write_all(fd, head, (size_t)n, rq->timeout_ms);
	if (e == 0 && body_len)
		e = write_all(fd, rq->body, body_len, rq->timeout_ms);
	if (e < 0 && e != -EPIPE && e != -ECONNRESET)
		goto out;
	/* a refusal (503) may come before the whole request was read: read on */
	e = read_line(r, line, sizeof(line));
	if (e < 0)
		goto out;
	if (sscanf(line, "HTTP/1.%*[01] %ld", status) != 1 || *status < 100 || *status > 999) {
		e = -EBADMSG;
		goto out;
	}
	for (;;) {
		e = read_line(r, line, sizeof(line));
		if (e < 0)
			goto out;
		if (!line[0])
			break;
		if (!strncasecmp(line, "Content-Length:", 15)) {
			char *end;
			unsigned long long v;
			errno = 0;
			v = strtoull(line + 15, &end, 10);
			while (*end == ' ' || *end == '\t')
				end++;
			if (errno || *end) {
				e = -EBADMSG;
				goto out;
			}
			content_length = (size_t)v;
		} else if (!strncasecmp(line, "Transfer-Encoding:", 18) && strcasestr(line + 18, "chunked")) {
			chunked = true;
		}
	}
	if (!strcmp(rq->method, "HEAD") || *status == 204 || *status == 304)
		e = 0;
	else if (chunked)
		e = read_chunked(r, rq->on_data, rq->cls);
	else
		e = read_body(r, content_length, rq->on_data, rq->cls);
out:
	free(r);
	return e;
}
