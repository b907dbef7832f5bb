/* SPDX-License-Identifier: MIT */
/*
 * The credential channel, both ends, and which paths the helper may serve
 * (contract in cred_channel.h).
 */
#include "hotplug/privsep/cred_channel.h"
#include "lib/util.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* The helper's reply, with FD (>= 0) attached. */
static int send_answer(int sock, int err, int fd)
{
	struct { uint32_t magic; int32_t err; } rp = { PH_CRED_MAGIC, err < 0 ? -err : err };
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = &rp, .iov_len = sizeof(rp) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.bytes;
		mh.msg_controllen = sizeof(ctl.bytes);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == sizeof(rp) ? 0 : -EIO;
}

int ph_cred_answer(int fd, const char *const *paths, size_t n, uint32_t *said, char *why, size_t whylen)
{
	union {
		struct ph_cred_request rq;
		char bytes[sizeof(struct ph_cred_request) + 1];
	} buf;
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct iovec iov = { .iov_base = buf.bytes, .iov_len = sizeof(buf.bytes) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.bytes,
			     .msg_controllen = sizeof(ctl.bytes) };
	struct stat st;
	ssize_t got;
	int file = -1, err = 0, r;

	memset(&buf, 0, sizeof(buf));
	do
		got = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		r = -errno;
		snprintf(why, whylen, "cannot read a credential request: %s", strerror(errno));
		return r;
	}
	if (got == 0) {
		snprintf(why, whylen, "the unprivileged process closed the credential channel");
		return 0;
	}
	if (mh.msg_controllen > 0 || (mh.msg_flags & MSG_CTRUNC)) {
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
					close(((int *)(void *)CMSG_DATA(c))[i]);
		snprintf(why, whylen, "credential request with ancillary data");
		return -EPROTO;
	}
	if (got != sizeof(buf.rq) || buf.rq.magic != PH_CRED_MAGIC) {
		snprintf(why, whylen, "credential request of %zd bytes with magic 0x%08x, expected %zu bytes, 0x%08x",
			 got, buf.rq.magic, sizeof(buf.rq), PH_CRED_MAGIC);
		return -EPROTO;
	}
	if (buf.rq.index >= n) {
		snprintf(why, whylen, "credential %u requested, there are %zu", buf.rq.index, n);
		return -EPROTO;
	}
	if (!paths[buf.rq.index])
		return send_answer(fd, EPERM, -1) < 0 ? -EPIPE : 1;
	r = ph_cred_open_walk(paths[buf.rq.index], &file, why, whylen);
	if (r == -EACCES && said && !(*said & (UINT32_C(1) << buf.rq.index)))
		*said |= UINT32_C(1) << buf.rq.index; /* WHY stays, for the caller's log */
	else
		why[0] = '\0';
	if (r < 0)
		err = -r;
	else if (fstat(file, &st) < 0)
		err = errno;
	else if (!S_ISREG(st.st_mode))
		err = EINVAL;
	else if (st.st_size > (off_t)PH_CRED_FILE_MAX)
		err = EFBIG;
	r = send_answer(fd, err, err ? -1 : file);
	if (file >= 0)
		close(file);
	if (r < 0) {
		snprintf(why, whylen, "cannot answer a credential request: %s", strerror(-r));
		return r;
	}
	return 1;
}

void ph_cred_client_init(struct ph_cred_client *c, int fd)
{
	c->fd = fd;
	pthread_mutex_init(&c->lock, NULL);
}

void ph_cred_client_done(struct ph_cred_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	pthread_mutex_destroy(&c->lock);
}

int ph_cred_fetch(struct ph_cred_client *c, unsigned index, int *out)
{
	struct ph_cred_request rq = { .magic = PH_CRED_MAGIC, .index = index };
	struct { uint32_t magic; int32_t err; } rp;
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = &rp, .iov_len = sizeof(rp) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.bytes,
			     .msg_controllen = sizeof(ctl.bytes) };
	ssize_t n;
	int r = -EPIPE, fd = -1;

	*out = -1;
	if (c->fd < 0)
		return -EPIPE;
	pthread_mutex_lock(&c->lock);
	do
		n = send(c->fd, &rq, sizeof(rq), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(rq))
		goto out;
	do
		n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	if (n != (ssize_t)sizeof(rp) || rp.magic != PH_CRED_MAGIC || rp.err < 0)
		goto out;
	if (rp.err == 0 && fd < 0)
		goto out;
	r = -rp.err;
	if (r == 0) {
		*out = fd;
		fd = -1;
	}
out:
	pthread_mutex_unlock(&c->lock);
	if (fd >= 0)
		close(fd);
	return r;
}

/* --- the open, one component at a time ---------------------------------------- */

/* May a name in the folder DIR (open) be looked up by root?  Only when no
 * one but this process's user (root, for the helper) can change the folder,
 * or it is sticky and NAME is already this user's. */
static int folder_ok(int dir, const char *shown, const char *name, char *why, size_t whylen)
{
	uid_t me = geteuid();
	struct stat st, entry;

	if (fstat(dir, &st) < 0)
		return -errno;
	if (st.st_uid == me && !(st.st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	if (st.st_uid == me && (st.st_mode & S_ISVTX) && fstatat(dir, name, &entry, AT_SYMLINK_NOFOLLOW) == 0 &&
	    entry.st_uid == me)
		return 0;
	snprintf(why, whylen, "%s, on the way to %s, lies in a folder of uid %u with mode %04o that another user "
		 "may change: root does not open it; make every folder on the path root's and not writable by "
		 "group or others", name, shown, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return -EACCES;
}

/* The process's root, where a walk starts: /proc/self/root names it also
 * under an emulator that maps "/" onto a target root (qemu-user -L, the
 * s390x test step); "/" itself without /proc. */
static int open_root(void)
{
	int fd = open("/proc/self/root", O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd >= 0 ? fd : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int ph_cred_open_walk(const char *path, int *out, char *why, size_t whylen)
{
	/* O_NONBLOCK: a FIFO put there must not hang the helper */
	return ph_open_walk(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, out, why, whylen);
}

int ph_open_walk(const char *path, int flags, int *out, char *why, size_t whylen)
{
	char rest[PATH_MAX], link[PATH_MAX];
	int dir = -1, r, links = 0;
	size_t at = 0;

	*out = -1;
	if (!path || path[0] != '/' || strlen(path) >= sizeof(rest)) {
		snprintf(why, whylen, "%s is not an absolute path", path ? path : "(none)");
		return -EINVAL;
	}
	snprintf(rest, sizeof(rest), "%s", path);
	dir = open_root();
	if (dir < 0)
		return -errno;
	for (;;) {
		char name[NAME_MAX + 1];
		size_t len = 0;
		bool last;
		struct stat st;
		int next;

		while (rest[at] == '/')
			at++;
		while (rest[at + len] && rest[at + len] != '/')
			len++;
		if (len == 0 || len > NAME_MAX) {
			r = len ? -ENAMETOOLONG : -EISDIR;
			snprintf(why, whylen, "%s does not name a file", path);
			goto out;
		}
		memcpy(name, rest + at, len);
		name[len] = '\0';
		at += len;
		last = rest[at + strspn(rest + at, "/")] == '\0';
		if (streq(name, "."))
			continue;
		r = folder_ok(dir, path, name, why, whylen);
		if (r < 0)
			goto out;
		if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			goto out;
		}
		if (S_ISLNK(st.st_mode)) {
			/* the link is followed here, so that its target's folders are checked too */
			ssize_t n = readlinkat(dir, name, link, sizeof(link) - 1);

			if (n < 0 || ++links > 40) {
				r = n < 0 ? -errno : -ELOOP;
				goto out;
			}
			link[n] = '\0';
			{
				char joined[PATH_MAX];
				int k = snprintf(joined, sizeof(joined), "%s%s", link, rest + at);

				if (k < 0 || (size_t)k >= sizeof(joined)) {
					r = -ENAMETOOLONG;
					goto out;
				}
				memcpy(rest, joined, sizeof(rest));
			}
			at = 0;
			if (link[0] == '/') {
				close(dir);
				dir = open_root();
				if (dir < 0) {
					r = -errno;
					goto out;
				}
			}
			continue;
		}
		if (last) {
			*out = openat(dir, name, flags | O_CLOEXEC | O_NOFOLLOW);
			r = *out < 0 ? -errno : 0;
			goto out;
		}
		next = openat(dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (next < 0) {
			r = -errno;
			goto out;
		}
		close(dir);
		dir = next;
	}
out:
	if (dir >= 0)
		close(dir);
	return r;
}

/* --- which paths are served --------------------------------------------------- */

static bool member(gid_t g, const gid_t *groups, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (groups[i] == g)
			return true;
	return false;
}

static bool may_write(const struct stat *st, uid_t uid, const gid_t *groups, size_t n)
{
	if (st->st_uid == uid)
		return true; /* the owner can chmod it writable */
	if (member(st->st_gid, groups, n))
		return st->st_mode & S_IWGRP;
	return st->st_mode & S_IWOTH;
}

__attribute__((format(printf, 3, 4)))
static bool unsafe(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return false;
}

/* Every folder on PATH, root first, with the component after it. */
static bool folders_safe(const char *path, uid_t uid, const gid_t *groups, size_t n, char *why, size_t whylen)
{
	char dir[PATH_MAX];
	size_t len = strlen(path);

	if (path[0] != '/' || len >= sizeof(dir))
		return unsafe(why, whylen, "%s is not an absolute path", path);
	for (size_t i = 0; i < len; i++) {
		struct stat st, next;
		size_t end;

		if (path[i] != '/')
			continue;
		end = i ? i : 1; /* the folder up to this slash ("/" itself first) */
		memcpy(dir, path, end);
		dir[end] = '\0';
		if (stat(dir, &st) < 0)
			return unsafe(why, whylen, "the folder %s: %s", dir, strerror(errno));
		if (st.st_uid == uid)
			return unsafe(why, whylen, "the folder %s belongs to uid %u", dir, (unsigned)uid);
		if (!may_write(&st, uid, groups, n))
			continue;
		if (!(st.st_mode & S_ISVTX))
			return unsafe(why, whylen, "uid %u may write to the folder %s (mode %04o)", (unsigned)uid, dir,
				      (unsigned)(st.st_mode & 07777));
		/* sticky: only a missing next component or one of its own is its to change */
		{
			size_t e = i + 1;
			char sub[PATH_MAX];

			while (e < len && path[e] != '/')
				e++;
			memcpy(sub, path, e);
			sub[e] = '\0';
			if (lstat(sub, &next) < 0 || next.st_uid == uid)
				return unsafe(why, whylen, "uid %u may create or replace %s in the sticky folder %s",
					      (unsigned)uid, sub, dir);
		}
	}
	return true;
}

bool ph_cred_path_safe(const char *path, uid_t uid, const gid_t *groups, size_t n_groups, char *why, size_t whylen)
{
	char real[PATH_MAX];

	if (uid == 0)
		return true;
	if (!folders_safe(path, uid, groups, n_groups, why, whylen))
		return false;
	/* a link on the way leads through other folders: those count too */
	if (realpath(path, real) && !streq(real, path))
		return folders_safe(real, uid, groups, n_groups, why, whylen);
	return true;
}
