/* SPDX-License-Identifier: MIT */
/*
 * How the sim touches its files: never through a path that someone else
 * could change (docs/security.md, "The sim").
 *
 * The folder of the descriptor and the tree are opened once (struct
 * sim_fs, O_PATH directory descriptors) and must belong to this process's
 * user or to root and be writable by nobody else.  The descriptor's folder
 * may also be a sticky one that others may write (/tmp): nobody but its
 * owner removes or renames what another user made there, so the sim's own
 * entries in it (FILE, FILE.lock, FILE.d, the default tree) are created
 * with O_EXCL|O_NOFOLLOW relative to its descriptor and used only when they
 * belong to this user or root, are no link and have one name (checked on
 * the open descriptor).  sim_check_private() keeps the stricter rule for
 * memgrantd, whose helper writes as root.  Every file below them is
 * reached relative to those descriptors, one component at a time and never
 * through a symbolic link (openat2() with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, or O_NOFOLLOW on each component where the kernel has
 * no openat2()).  Files are replaced through a NAME.new created with O_EXCL
 * (a stale one is unlinked first, never opened), folders are removed with
 * unlinkat() on descriptors (rm_rf_at()).  So a process of another user
 * that can write somewhere on the way (the agent's user, whose folders the
 * sim's may sit next to) cannot make a writer of the sim write, truncate,
 * chown or delete anything outside the sim's own files.
 */
#include "hotplug/sim/sim_impl.h"

#include "lib/fileio.h"
#include "lib/util.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>

#ifndef RUNSTATEDIR
#define RUNSTATEDIR "/run" /* the build sets it (Makefile) */
#endif

void sim_fs_free(struct sim_fs *fs)
{
	if (!fs)
		return;
	closep(&fs->top);
	closep(&fs->tree);
	free(fs->top_path);
	free(fs->name);
	free(fs->tree_path);
	free(fs);
}

/* Component-by-component walk, for kernels without openat2() (before 5.6)
 * or a filter that refuses it. */
static int open_walk(int dfd, const char *rel, int flags, mode_t mode)
{
	_cleanup_free_ char *copy = strdup(rel);
	_cleanup_close_ int cur = -1;
	char *save = NULL, *comp, *next;
	int at = dfd, fd;

	if (!copy)
		return -ENOMEM;
	comp = strtok_r(copy, "/", &save);
	if (!comp)
		comp = ".";
	for (;;) {
		next = strtok_r(NULL, "/", &save);
		if (streq(comp, ".."))
			return -EXDEV; /* as RESOLVE_BENEATH says it */
		if (!next)
			break;
		fd = openat(at, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOTDIR ? -ELOOP : -errno;
		closep(&cur);
		at = cur = fd;
		comp = next;
	}
	fd = openat(at, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (flags & O_PATH) { /* O_PATH|O_NOFOLLOW opens a link itself: refuse it */
		struct stat st;
		if (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode)) {
			close(fd);
			return -ELOOP;
		}
	}
	return fd;
}

int sim_openat(int dfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	if (dfd < 0)
		return -EBADF;
	while (*rel == '/')
		rel++;
	if (!*rel)
		rel = ".";
	fd = syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS && errno != EPERM)
		return -errno;
	return open_walk(dfd, rel, flags, mode);
}

int sim_put_at(int dfd, const char *name, const char *data, size_t len)
{
	char tmp[NAME_MAX + 1];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	int r;

	if (strchr(name, '/') || snprintf(tmp, sizeof(tmp), "%s.new", name) >= (int)sizeof(tmp))
		return -EINVAL;
	/* left by a writer that was killed, or planted: unlinked, never opened */
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, data, len);
	if (n < 0 || (size_t)n != len) {
		r = n < 0 ? -errno : -EIO;
		unlinkat(dfd, tmp, 0);
		return r;
	}
	if (renameat(dfd, tmp, dfd, name) < 0) {
		r = -errno;
		unlinkat(dfd, tmp, 0);
		return r;
	}
	return 0;
}

int sim_put_rel(int root, const char *dir, const char *name, const char *data, size_t len)
{
	_cleanup_close_ int fd = sim_openat(root, dir, O_PATH | O_DIRECTORY, 0);

	if (fd < 0)
		return fd;
	return sim_put_at(fd, name, data, len);
}

int sim_mkdirs_at(int root, const char *rel, mode_t mode)
{
	_cleanup_free_ char *copy = strdup(rel);
	_cleanup_close_ int cur = -1;
	char *save = NULL;
	int at = root;

	if (!copy)
		return -ENOMEM;
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int fd;

		if (streq(c, "..") || streq(c, "."))
			return -EINVAL;
		if (mkdirat(at, c, mode) < 0 && errno != EEXIST)
			return -errno;
		fd = openat(at, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOTDIR ? -ELOOP : -errno;
		closep(&cur);
		at = cur = fd;
	}
	return 0;
}

int sim_rm_rf_rel(int root, const char *rel)
{
	_cleanup_free_ char *copy = strdup(rel);
	_cleanup_close_ int parent = -1;
	char *slash;

	if (!copy)
		return -ENOMEM;
	slash = strrchr(copy, '/');
	if (!slash)
		return rm_rf_at(root, copy);
	*slash = '\0';
	parent = sim_openat(root, copy, O_PATH | O_DIRECTORY, 0);
	if (parent < 0)
		return parent == -ENOENT ? 0 : parent;
	return rm_rf_at(parent, slash + 1);
}

/* Only this process's user (or root) may change what is in a sim folder:
 * anyone else who could would choose what the sim's writer writes.  With
 * SHARED non-NULL, a sticky folder of this user or root that others may
 * write is accepted too (*SHARED set): see the top of this file. */
static int trusted(int fd, const char *path, const char *what, bool *shared, char *err, size_t errlen)
{
	uid_t me = geteuid();
	struct stat st;
	bool mine;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: %s is not a folder", path, what);
		return -ENOTDIR;
	}
	mine = st.st_uid == me || st.st_uid == 0;
	if (mine && !(st.st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	if (mine && shared && (st.st_mode & S_ISVTX)) {
		*shared = true;
		return 0;
	}
	if (!mine)
		snprintf(err, errlen,
			 "%s: %s belongs to uid %u (mode %04o), who could change the sim's files in it; the sim "
			 "(uid %u) uses a folder of its own user or root: choose one (mkdir -p -m 0755 "
			 "$HOME/memgrant-sim), or a sticky shared folder such as /tmp",
			 path, what, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)me);
	else if (st.st_mode & S_ISVTX)
		snprintf(err, errlen,
			 "%s: %s is a shared folder (mode %04o) and memgrantd's helper writes the sim as root: it "
			 "writes only in a folder that nobody but root or memgrantd's user may write, such as the "
			 "packages' " RUNSTATEDIR "/memgrant-sim (the default) or a new one of your own "
			 "(mkdir -m 0755 %s/memgrant-sim)",
			 path, what, (unsigned)(st.st_mode & 07777), path);
	else
		snprintf(err, errlen,
			 "%s: %s (uid %u, mode %04o) may be written by others, who could change the sim's files; "
			 "choose a folder that only you may write (mkdir -p -m 0755 $HOME/memgrant-sim) or a "
			 "sticky shared one such as /tmp",
			 path, what, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return -EPERM;
}

int sim_fs_entry_ok(const struct sim_fs *fs, int fd)
{
	struct stat st;

	if (!fs->shared)
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0) ||
	    (S_ISREG(st.st_mode) && st.st_nlink != 1) || (S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH))))
		return -EPERM;
	return 0;
}

/* In a shared folder: the sim's own entries there, when they exist, must be
 * its own (sim_fs_entry_ok() checks again on each descriptor); this one
 * says which is not, and a fix that touches nobody else's file. */
static int shared_entries_ok(const struct sim_fs *fs, const char *state_path, char *err, size_t errlen)
{
	static const char *const suffix[] = { "", ".lock", ".d", ".new" };

	for (size_t i = 0; fs->shared && i < ARRAY_SIZE(suffix); i++) {
		char name[NAME_MAX + 1];
		struct stat st;
		const char *why = NULL;

		if (snprintf(name, sizeof(name), "%s%s", fs->name, suffix[i]) >= (int)sizeof(name))
			return -ENAMETOOLONG;
		if (fstatat(fs->top, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISLNK(st.st_mode))
			why = "is a symbolic link";
		else if (st.st_uid != geteuid() && st.st_uid != 0)
			why = "belongs to another user";
		else if (S_ISREG(st.st_mode) && st.st_nlink != 1)
			why = "has more than one name (a hard link)";
		else if (S_ISDIR(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)))
			why = "is a folder that others may write";
		if (!why)
			continue;
		snprintf(err, errlen,
			 "%s: %s/%s %s (uid %u, mode %04o); in a shared folder (%s) the sim uses only entries of its "
			 "own user (uid %u) or root: give the sim another name, or ask uid %u to remove it",
			 state_path, streq(fs->top_path, "/") ? "" : fs->top_path, name, why, (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 07777), fs->top_path, (unsigned)geteuid(), (unsigned)st.st_uid);
		return -EPERM;
	}
	return 0;
}

/* The tree must never be a real sysfs or procfs (sim.h). */
static int tree_safe(int fd)
{
	static const struct { const char *rel; long magic; } no[] = {
		{ ".", SYSFS_MAGIC }, { ".", PROC_SUPER_MAGIC }, { "sys", SYSFS_MAGIC }, { "proc", PROC_SUPER_MAGIC },
	};

	for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
		_cleanup_close_ int sub = sim_openat(fd, no[i].rel, O_PATH | O_DIRECTORY, 0);
		struct statfs sf;

		if (sub >= 0 && fstatfs(sub, &sf) == 0 && sf.f_type == no[i].magic)
			return -EINVAL;
	}
	return 0;
}

int sim_fs_read_desc(const struct sim_fs *fs, size_t max, char **out, size_t *len)
{
	_cleanup_close_ int fd = sim_openat(fs->top, fs->name, O_RDONLY, 0);
	int r;

	if (fd < 0)
		return fd;
	r = sim_fs_entry_ok(fs, fd);
	if (r < 0)
		return r;
	return fd_read_all(fd, max, out, len);
}

/* fs->tree: the folder of the tree is opened, then the tree's last
 * component; in a sticky folder that others may write (the default tree
 * next to a FILE in /tmp) that component is made with mkdirat() and never
 * followed if it is a link.  0, -ENOENT (missing, not created) or -errno. */
static int open_tree(struct sim_fs *fs, bool create)
{
	_cleanup_free_ char *dir = strdup(fs->tree_path), *base = strdup(fs->tree_path);
	_cleanup_close_ int parent = -1;
	const char *name;
	struct stat st;
	int nofollow = 0, r;

	if (!dir || !base)
		return -ENOMEM;
	name = basename(base);
	parent = open(dirname(dir), O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0 && errno == ENOENT && create) {
		r = mkdir_p(dir, 0755);
		if (r < 0)
			return r;
		parent = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (parent < 0)
		return -errno;
	if (fstat(parent, &st) == 0 && (st.st_mode & S_ISVTX) && (st.st_mode & (S_IWGRP | S_IWOTH)))
		nofollow = O_NOFOLLOW;
	fs->tree = openat(parent, name, O_PATH | O_DIRECTORY | O_CLOEXEC | nofollow);
	if (fs->tree < 0 && errno == ENOENT && create) {
		if (mkdirat(parent, name, 0755) < 0 && errno != EEXIST)
			return -errno;
		fs->tree = openat(parent, name, O_PATH | O_DIRECTORY | O_CLOEXEC | nofollow);
	}
	if (fs->tree < 0)
		return errno == ENOTDIR && nofollow ? -ELOOP : -errno;
	return 0;
}

int sim_fs_open(const char *state_path, const char *tree, bool create_tree, struct sim_fs **out, char *err,
		size_t errlen)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_free_ char *abs = sim_absolute(state_path), *dir = NULL, *base = NULL;
	char dummy[8];
	int r;

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	fs = calloc(1, sizeof(*fs));
	if (!fs || !abs || !(dir = strdup(abs)) || !(base = strdup(abs)))
		return -ENOMEM;
	fs->top = fs->tree = -1;
	fs->top_path = strdup(dirname(dir));
	fs->name = strdup(basename(base));
	if (!fs->top_path || !fs->name)
		return -ENOMEM;
	if (!*fs->name || streq(fs->name, ".") || streq(fs->name, "..") || streq(fs->name, "/"))
		return -EINVAL;
	fs->top = open(fs->top_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs->top < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: cannot open the sim's folder %s: %s", state_path, fs->top_path, strerror(-r));
		return r;
	}
	r = trusted(fs->top, fs->top_path, "the sim's folder", &fs->shared, err, errlen);
	if (r == 0)
		r = shared_entries_ok(fs, state_path, err, errlen);
	if (r < 0)
		return r;
	if (!tree) {
		/* the tree named by the descriptor when it is opened, then never again */
		_cleanup_settings_ struct sim_settings *s = NULL;
		_cleanup_free_ char *text = NULL;
		size_t len;

		r = sim_fs_read_desc(fs, SIM_MAX_FILE, &text, &len);
		if (r < 0) {
			snprintf(err, errlen, "%s: cannot read sim state: %s", state_path, strerror(-r));
			return r;
		}
		r = sim_settings_parse(text, len, state_path, &s, err, errlen);
		if (r < 0)
			return r;
		fs->tree_path = TAKE_PTR(s->tree);
	} else {
		fs->tree_path = sim_absolute(tree);
		if (!fs->tree_path)
			return -ENOMEM;
	}
	if (streq(fs->tree_path, "/"))
		return -EINVAL;
	r = open_tree(fs, create_tree);
	if (r == -ELOOP) {
		snprintf(err, errlen, "%s: the sim's tree is a symbolic link in a shared folder, which the sim never "
			 "follows: give the sim another name or its tree another place (--tree DIR)", fs->tree_path);
		return r;
	}
	if (r < 0 && r != -ENOENT) {
		snprintf(err, errlen, "%s: cannot open or create the sim's tree: %s", fs->tree_path, strerror(-r));
		return r;
	}
	if (fs->tree >= 0) {
		r = tree_safe(fs->tree);
		if (r == 0)
			r = trusted(fs->tree, fs->tree_path, "the sim's tree", NULL, err, errlen);
		if (r < 0)
			return r;
	} else if (create_tree) {
		snprintf(err, errlen, "%s: cannot open the sim's tree: %s", fs->tree_path, strerror(-r));
		return r;
	}
	*out = TAKE_PTR(fs);
	return 0;
}

int sim_check_private(const char *state_path, char *err, size_t errlen)
{
	_cleanup_free_ char *abs = sim_absolute(state_path);
	_cleanup_close_ int fd = -1;
	char dummy[8];

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (!abs)
		return -ENOMEM;
	fd = open(dirname(abs), O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* memgrantd makes it, 0755, its own */
	return trusted(fd, abs, "the sim's folder", NULL, err, errlen);
}

int sim_fs_lock_open(const struct sim_fs *fs, bool create)
{
	char name[NAME_MAX + 1];
	struct stat st;
	int fd;

	if (snprintf(name, sizeof(name), "%s.lock", fs->name) >= (int)sizeof(name))
		return -ENAMETOOLONG;
	/* in a shared folder made only anew (O_EXCL), else opened as it is and
	 * checked below */
	fd = !create ? -EACCES
		     : sim_openat(fs->top, name, O_RDWR | O_CREAT | (fs->shared ? O_EXCL : 0), 0644);
	if (fd == -EEXIST)
		fd = sim_openat(fs->top, name, O_RDWR, 0);
	/* a reader that may not write the sim (the unprivileged agent, whose
	 * helper writes) still takes the lock to read a consistent state */
	if (fd == -EACCES)
		fd = sim_openat(fs->top, name, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	/* a second name for some other file (a hard link) is not the lock */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || sim_fs_entry_ok(fs, fd) < 0) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int sim_fs_state_dir(const struct sim_fs *fs, const char *component, bool create, char **path_out, int *fd_out)
{
	char name[NAME_MAX + 1];
	_cleanup_close_ int base = -1;
	int fd;

	if (snprintf(name, sizeof(name), "%s.d", fs->name) >= (int)sizeof(name))
		return -ENAMETOOLONG;
	if (create && mkdirat(fs->top, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	base = sim_openat(fs->top, name, O_PATH | O_DIRECTORY, 0);
	if (base < 0)
		return base;
	if (sim_fs_entry_ok(fs, base) < 0)
		return -EPERM;
	if (!component) { /* a new one, as mkdtemp() makes it, but 0755 */
		static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
		char comp[16];

		for (int tries = 0;; tries++) {
			unsigned char rnd[6];

			if (tries == 100)
				return -EEXIST;
			if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
				return -errno;
			memcpy(comp, "s.", 2);
			for (size_t i = 0; i < sizeof(rnd); i++)
				comp[2 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
			comp[8] = '\0';
			if (mkdirat(base, comp, 0755) == 0)
				break;
			if (errno != EEXIST)
				return -errno;
		}
		return sim_fs_state_dir(fs, comp, false, path_out, fd_out);
	}
	if (!startswith(component, "s.") || strchr(component, '/') || !component[2])
		return -EINVAL;
	fd = sim_openat(base, component, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	if (path_out && asprintf(path_out, "%s/%s/%s", streq(fs->top_path, "/") ? "" : fs->top_path, name,
				 component) < 0) {
		close(fd);
		return -ENOMEM;
	}
	*fd_out = fd;
	return 0;
}
