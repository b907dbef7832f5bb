/* SPDX-License-Identifier: MIT */
/*
 * The credential files (contract in credstore.h).
 */
#include "lib/credstore.h"
#include "lib/util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cred_store_add(struct cred_store *s, const char *key, const char *path)
{
	struct cred_file *nf;

	if (!path || cred_store_find(s, path))
		return 0;
	nf = realloc(s->files, (s->n + 1) * sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	s->files = nf;
	nf[s->n] = (struct cred_file){ .key = strdup(key), .path = strdup(path) };
	if (!nf[s->n].key || !nf[s->n].path) {
		free(nf[s->n].key);
		free(nf[s->n].path);
		return -ENOMEM;
	}
	s->n++;
	return 0;
}

void cred_store_free(struct cred_store *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->files[i].key);
		free(s->files[i].path);
	}
	free(s->files);
	s->files = NULL;
	s->n = 0;
}

const struct cred_file *cred_store_find(const struct cred_store *s, const char *path)
{
	for (size_t i = 0; s && path && i < s->n; i++)
		if (streq(s->files[i].path, path))
			return &s->files[i];
	return NULL;
}

void cred_free(char *buf, size_t len)
{
	if (!buf)
		return;
	explicit_bzero(buf, len);
	free(buf);
}

static int read_fd(int fd, size_t max, char **out, size_t *len)
{
	struct stat st;
	size_t cap, n = 0;
	char *buf;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (st.st_size > 0 && (size_t)st.st_size > max)
		return -EFBIG;
	cap = (size_t)st.st_size + 1;
	if (cap > max + 1)
		cap = max + 1;
	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;
			cred_free(buf, cap + 1);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			cred_free(buf, cap + 1);
			return -EFBIG;
		}
		if (n == cap) {
			/* the file grew since fstat: read on, in steps, up to max */
			char *nb = malloc(cap * 2 + 1);
			if (!nb) {
				cred_free(buf, cap + 1);
				return -ENOMEM;
			}
			memcpy(nb, buf, n);
			cred_free(buf, cap + 1);
			buf = nb;
			cap *= 2;
		}
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

int cred_read(struct cred_store *s, const char *path, size_t max, char **out, size_t *len)
{
	const struct cred_file *f = cred_store_find(s, path);
	int fd = -1, r;

	*out = NULL;
	*len = 0;
	if (f && f->served && s->fetch) {
		r = s->fetch(s->fetch_ctx, (unsigned)(f - s->files), &fd);
		if (r < 0)
			return r;
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			return -errno;
	}
	r = read_fd(fd, max, out, len);
	close(fd);
	return r;
}
