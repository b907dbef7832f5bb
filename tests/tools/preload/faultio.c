/* SPDX-License-Identifier: MIT */
/*
 * faultio.so: an LD_PRELOAD layer for tests that counts every durable I/O
 * call on files under the given folders and makes the Nth one fail, the way
 * SQLite's test VFS injects I/O errors.  Never linked into memgrant.
 *
 *   FAULTIO_PATHS    folders, ':'-separated: calls on files under them count
 *   FAULTIO_COUNTER  a file of at least 4096 bytes shared by every process of
 *                    the run (memgrantd, its helper): the call counter
 *   FAULTIO_LOG      a file each counted call is appended to ("N call path"),
 *                    the injected one marked "FAIL errno"
 * The counter file holds four little-endian 64-bit words: the calls counted
 * so far, the calls failed, the number of the call to fail (0: none) and how
 * (0 ENOSPC, 1 EIO, 2 EDQUOT, 3 a short write: the write stops half way and
 * the next write of that file fails with ENOSPC; other calls ENOSPC; plus 4:
 * every later call fails too, as on a disk that stays full).  The test arms
 * a fault at any time by writing the last two.
 *
 * Counted: write, pwrite, writev, fsync, fdatasync, ftruncate on a file
 * opened under a folder; open/openat with O_CREAT, rename/renameat/renameat2,
 * mkdir/mkdirat of a path under one.  The shipped binaries never see it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 65536

struct shared {
	atomic_ulong calls;
	atomic_ulong injected;
	atomic_ulong fail_at;
	atomic_ulong mode;
};

static struct shared *counter;
static char prefixes[8][PATH_MAX];
static size_t n_prefixes;
static int log_fd = -1;
/* 1: the fd's next write fails with ENOSPC (the disk filled during a short write) */
static _Atomic unsigned char fd_full[MAX_FDS];

static void __attribute__((constructor)) faultio_init(void)
{
	const char *paths = getenv("FAULTIO_PATHS"), *cnt = getenv("FAULTIO_COUNTER"), *logp = getenv("FAULTIO_LOG");
	int fd;

	if (!paths || !cnt)
		return;
	fd = (int)syscall(SYS_openat, AT_FDCWD, cnt, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	syscall(SYS_close, fd);
	if (counter == MAP_FAILED) {
		counter = NULL;
		return;
	}
	for (const char *p = paths; *p && n_prefixes < 8;) {
		size_t len = strcspn(p, ":");
		if (len && len < PATH_MAX) {
			memcpy(prefixes[n_prefixes], p, len);
			prefixes[n_prefixes][len] = '\0';
			while (len > 1 && prefixes[n_prefixes][len - 1] == '/')
				prefixes[n_prefixes][--len] = '\0';
			n_prefixes++;
		}
		p += len;
		if (*p == ':')
			p++;
	}
	if (logp)
		log_fd = (int)syscall(SYS_openat, AT_FDCWD, logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

static bool under(const char *path)
{
	for (size_t i = 0; i < n_prefixes; i++) {
		size_t len = strlen(prefixes[i]);
		if (!strncmp(path, prefixes[i], len) && (path[len] == '/' || path[len] == '\0'))
			return true;
	}
	return false;
}

/* The absolute form of DIRFD/PATH into BUF (PATH itself when absolute). */
static bool resolve(int dirfd, const char *path, char *buf, size_t len)
{
	char link[64], dir[PATH_MAX];
	ssize_t n;

	if (!path)
		return false;
	if (path[0] == '/') {
		snprintf(buf, len, "%s", path);
		return true;
	}
	if (dirfd == AT_FDCWD) {
		if (!getcwd(dir, sizeof(dir)))
			return false;
	} else {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		n = (ssize_t)syscall(SYS_readlinkat, AT_FDCWD, link, dir, sizeof(dir) - 1);
		if (n < 0)
			return false;
		dir[n] = '\0';
	}
	return snprintf(buf, len, "%s/%s", dir, path) < (int)len;
}

static bool path_counts(int dirfd, const char *path, char *abs, size_t len)
{
	return counter && resolve(dirfd, path, abs, len) && under(abs);
}

static bool fd_counts(int fd, char *abs, size_t len)
{
	char link[64];
	ssize_t n;

	if (!counter || fd < 0 || fd >= MAX_FDS)
		return false;
	/* read each time: cheap next to a sync, and never stale after a dup2 */
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = (ssize_t)syscall(SYS_readlinkat, AT_FDCWD, link, abs, len - 1);
	if (n <= 0)
		return false;
	abs[n] = '\0';
	return under(abs);
}

static bool fail_short(void)
{
	return (atomic_load(&counter->mode) & 3) == 3;
}

/* The errno of the fault armed now (a short write's other calls: ENOSPC). */
static int fail_errno(void)
{
	static const int errnos[] = { ENOSPC, EIO, EDQUOT, ENOSPC };
	return errnos[atomic_load(&counter->mode) & 3];
}

/* Counts one call; returns true when this one is to fail. */
static bool hit(const char *call, const char *what)
{
	unsigned long n = atomic_fetch_add(&counter->calls, 1) + 1;
	unsigned long at = atomic_load(&counter->fail_at);
	bool fail = at && (n == at || (n > at && (atomic_load(&counter->mode) & 4)));
	char line[PATH_MAX + 96];
	int len;

	if (fail)
		atomic_fetch_add(&counter->injected, 1);
	if (log_fd >= 0) {
		len = snprintf(line, sizeof(line), "%lu %s %s%s%s\n", n, call, what, fail ? " FAIL " : "",
			       fail ? (fail_short() ? "SHORT" : strerrorname_np(fail_errno())) : "");
		if (len > 0)
			(void)!syscall(SYS_write, log_fd, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
	}
	return fail;
}

#define REAL(ret, name, ...)                                                                                  \
	static ret (*real_##name)(__VA_ARGS__);                                                                \
	if (!real_##name)                                                                                      \
		real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

static void forget_fd(int fd)
{
	if (fd >= 0 && fd < MAX_FDS)
		fd_full[fd] = 0;
}

static int open_common(int dirfd, const char *path, int flags, mode_t mode, bool at)
{
	char abs[PATH_MAX];
	int fd;

	if ((flags & O_CREAT) && path_counts(dirfd, path, abs, sizeof(abs)) && hit("open", abs)) {
		errno = fail_errno();
		return -1;
	}
	fd = (int)syscall(SYS_openat, at ? dirfd : AT_FDCWD, path, flags, mode);
	forget_fd(fd);
	return fd;
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_common(AT_FDCWD, path, flags, mode, false);
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_common(dirfd, path, flags, mode, true);
}
int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

int close(int fd)
{
	REAL(int, close, int);
	forget_fd(fd);
	return real_close(fd);
}

/* A write of LEN bytes on FD: -1 (errno set) to fail it, or the length to write. */
static ssize_t write_gate(int fd, size_t len, const char *call)
{
	char abs[PATH_MAX];

	if (!fd_counts(fd, abs, sizeof(abs)))
		return (ssize_t)len;
	if (fd_full[fd]) {
		fd_full[fd] = 0;
		hit(call, abs);
		errno = ENOSPC; /* the disk filled at the short write */
		return -1;
	}
	if (!hit(call, abs))
		return (ssize_t)len;
	if (fail_short() && len > 1) {
		fd_full[fd] = 1;
		return (ssize_t)(len / 2);
	}
	errno = fail_errno();
	return -1;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	REAL(ssize_t, write, int, const void *, size_t);
	ssize_t n = write_gate(fd, len, "write");

	return n < 0 ? -1 : real_write(fd, buf, (size_t)n);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	REAL(ssize_t, pwrite, int, const void *, size_t, off_t);
	ssize_t n = write_gate(fd, len, "pwrite");

	return n < 0 ? -1 : real_pwrite(fd, buf, (size_t)n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off) __attribute__((alias("pwrite")));

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	REAL(ssize_t, writev, int, const struct iovec *, int);
	size_t len = 0;

	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	if (write_gate(fd, len, "writev") != (ssize_t)len && len) {
		if (fd >= 0 && fd < MAX_FDS && fd_full[fd]) { /* no half of a vector: the whole of it fails */
			fd_full[fd] = 0;
			errno = ENOSPC;
		}
		return -1;
	}
	return real_writev(fd, iov, cnt);
}

static int sync_gate(int fd, const char *call)
{
	char abs[PATH_MAX];

	if (fd_counts(fd, abs, sizeof(abs)) && hit(call, abs)) {
		errno = fail_errno();
		return -1;
	}
	return 0;
}

int fsync(int fd)
{
	REAL(int, fsync, int);
	return sync_gate(fd, "fsync") < 0 ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(int, fdatasync, int);
	return sync_gate(fd, "fdatasync") < 0 ? -1 : real_fdatasync(fd);
}

int ftruncate(int fd, off_t len)
{
	REAL(int, ftruncate, int, off_t);
	return sync_gate(fd, "ftruncate") < 0 ? -1 : real_ftruncate(fd, len);
}
int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));

static int path_gate(int dirfd, const char *path, const char *call)
{
	char abs[PATH_MAX];

	if (path_counts(dirfd, path, abs, sizeof(abs)) && hit(call, abs)) {
		errno = fail_errno();
		return -1;
	}
	return 0;
}

int rename(const char *from, const char *to)
{
	REAL(int, rename, const char *, const char *);
	return path_gate(AT_FDCWD, to, "rename") < 0 ? -1 : real_rename(from, to);
}

int renameat(int fd1, const char *from, int fd2, const char *to)
{
	REAL(int, renameat, int, const char *, int, const char *);
	return path_gate(fd2, to, "renameat") < 0 ? -1 : real_renameat(fd1, from, fd2, to);
}

int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned flags)
{
	REAL(int, renameat2, int, const char *, int, const char *, unsigned);
	return path_gate(fd2, to, "renameat2") < 0 ? -1 : real_renameat2(fd1, from, fd2, to, flags);
}

int mkdir(const char *path, mode_t mode)
{
	REAL(int, mkdir, const char *, mode_t);
	return path_gate(AT_FDCWD, path, "mkdir") < 0 ? -1 : real_mkdir(path, mode);
}

int mkdirat(int dirfd, const char *path, mode_t mode)
{
	REAL(int, mkdirat, int, const char *, mode_t);
	return path_gate(dirfd, path, "mkdirat") < 0 ? -1 : real_mkdirat(dirfd, path, mode);
}
