/* SPDX-License-Identifier: MIT */
/* systemd's notification protocol without libsystemd (sdnotify.h). */
#include "lib/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sdn_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n, len = strlen(state);
	socklen_t salen;
	ssize_t sent;
	int fd, e;

	if (!path || !*path)
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace: the length counts */
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/' ? 1 : 0));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent = sendto(fd, state, len, MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	e = errno;
	close(fd);
	if (sent < 0)
		return -e;
	return (size_t)sent == len ? 1 : -EMSGSIZE;
}

int sdn_watchdog_usec(uint64_t *usec)
{
	const char *s = getenv("WATCHDOG_USEC"), *p = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return 0;
	if (p && *p) {
		errno = 0;
		v = strtoull(p, &end, 10);
		if (errno || *end || v == 0)
			return -EINVAL;
		if (v != (unsigned long long)getpid())
			return 0; /* meant for another process (our parent's) */
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0)
		return -EINVAL;
	*usec = v;
	return 1;
}
