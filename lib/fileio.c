/* SPDX-License-Identifier: MIT */
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

static int write_full(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int fsync_parent_dir(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	_cleanup_close_ int dfd = -1;

	if (!copy)
		return -ENOMEM;
	dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fsync(dfd) < 0)
		return -errno;
	return 0;
}

/* DATA as a temporary file renamed over PATH; synced first when DURABLE. */
static int replace_file(const char *path, const void *data, size_t len, int mode, bool durable)
{
	char tmp[PATH_MAX];
	_cleanup_close_ int fd = -1;
	int r;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	r = write_full(fd, data, len);
	if (r == 0 && durable && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	return durable ? fsync_parent_dir(path) : 0;
}

int file_write_atomic(const char *path, const void *data, size_t len, int mode)
{
	return replace_file(path, data, len, mode, true);
}

int file_write_view(const char *path, const void *data, size_t len, int mode)
{
	return replace_file(path, data, len, mode, false);
}

int fd_read_all(int fd, size_t max, char **out, size_t *out_len)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 4096;

	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (len == cap) {
			char *nb;
			if (cap >= max)
				return -EFBIG;
			cap = cap * 2 > max ? max : cap * 2;
			nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (out_len)
		*out_len = len;
	*out = TAKE_PTR(buf);
	return 0;
}

int file_read_all(const char *path, size_t max, char **out, size_t *out_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return fd_read_all(fd, max, out, out_len);
}

int mkdir_p(const char *path, int mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, (mode_t)mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, (mode_t)mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int rm_rf_at(int dfd, const char *name)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP)
			return unlinkat(dfd, name, 0) < 0 ? -errno : 0;
		return errno == ENOENT ? 0 : -errno;
	}
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -1; /* owned by d now */
	while ((de = readdir(d))) {
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		r = rm_rf_at(dirfd(d), de->d_name);
		if (r < 0)
			break;
	}
	closedir(d);
	if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

int rm_rf(const char *path)
{
	return rm_rf_at(AT_FDCWD, path);
}
