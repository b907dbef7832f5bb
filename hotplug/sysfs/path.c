/* SPDX-License-Identifier: MIT */
#include "hotplug/sysfs/path.h"
#include "lib/util.h"

#include <fcntl.h>
#include <sys/stat.h>

struct hp_path {
	char *root;
	int fd;
};

/* openat() wants names relative to the root fd; "/sys/..." would escape it. */
static const char *rel_name(const char *rel)
{
	while (*rel == '/')
		rel++;
	return *rel ? rel : ".";
}

int hp_path_open(const char *root, struct hp_path **out)
{
	_cleanup_free_ struct hp_path *p = NULL;

	if (!root)
		root = "/";
	if (!*root)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->root = strdup(root);
	if (!p->root)
		return -ENOMEM;
	p->fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (p->fd < 0) {
		int err = -errno;
		free(p->root);
		return err;
	}
	*out = TAKE_PTR(p);
	return 0;
}

void hp_path_free(struct hp_path *p)
{
	if (!p)
		return;
	closep(&p->fd);
	free(p->root);
	free(p);
}

const char *hp_path_root(const struct hp_path *p)
{
	return p->root;
}

int hp_read_at(int dirfd, const char *rel, char *buf, size_t len)
{
	_cleanup_close_ int fd = -1;
	size_t n = 0;

	if (len == 0)
		return -EINVAL;
	fd = openat(dirfd, rel_name(rel), O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t r;

		if (n == len - 1) {
			/* Full: fine only when the file ends here. */
			char c;
			do
				r = read(fd, &c, 1);
			while (r < 0 && errno == EINTR);
			if (r < 0)
				return -errno;
			if (r > 0)
				return -EOVERFLOW;
			break;
		}
		r = read(fd, buf + n, len - 1 - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		/* A short read that ends a line is the whole value: sysfs hands
		 * out an attribute in one read, a regular file reads short only
		 * at its end.  Saves the read of the end per file (a discovery
		 * reads two files per block). */
		if (n < len - 1 && buf[n - 1] == '\n')
			break;
	}
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return (int)n;
}

int hp_write_at(int dirfd, const char *rel, const char *value)
{
	_cleanup_close_ int fd = -1;
	size_t len = strlen(value);
	ssize_t r;

	/* No O_CREAT: a missing attribute must stay missing (and be ENOENT). */
	fd = openat(dirfd, rel_name(rel), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	/* One write(2) of the whole value: sysfs parses each write on its own. */
	r = write(fd, value, len);
	if (r < 0)
		return -errno;
	if ((size_t)r != len)
		return -EIO;
	return 0;
}

int hp_open_dir_at(int dirfd, const char *rel)
{
	int fd = openat(dirfd, rel_name(rel), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int hp_path_read(struct hp_path *p, const char *rel, char *buf, size_t len)
{
	return hp_read_at(p->fd, rel, buf, len);
}

int hp_path_write(struct hp_path *p, const char *rel, const char *value)
{
	return hp_write_at(p->fd, rel, value);
}

int hp_path_exists(struct hp_path *p, const char *rel)
{
	struct stat st;

	if (fstatat(p->fd, rel_name(rel), &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int hp_path_open_dir(struct hp_path *p, const char *rel)
{
	return hp_open_dir_at(p->fd, rel);
}

int hp_path_opendir(struct hp_path *p, const char *rel, DIR **out)
{
	int fd = hp_open_dir_at(p->fd, rel);
	DIR *d;

	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		int err = -errno;
		close(fd);
		return err;
	}
	*out = d;
	return 0;
}
