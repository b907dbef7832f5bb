/* SPDX-License-Identifier: MIT */
/*
 * simfs: serves a memgrant sim as a sysfs tree over FUSE, so that the sysfs
 * backend can be tested against kernel semantics without touching /sys.
 *
 *   simfs [-f] [-d] STATE_FILE MOUNTPOINT     unmount: fusermount3 -u MOUNTPOINT
 *
 * Reads, directory listings and links come from the sim's tree (the sim
 * rewrites it after every change).  Writes to config, memmap_on_memory,
 * online, state and auto_online_blocks go through the sim backend's
 * write_attr and its errno goes back to the writer, as a kernel store
 * method's would.  As on sysfs: other files cannot be opened for writing
 * (EACCES), nothing can be created (EACCES) or removed (EPERM), O_TRUNC is
 * accepted and ignored, and every read is uncached (direct_io), so a read
 * after a write sees the new value.
 *
 * The loop is multi-threaded with FUSE interrupts enabled: a writer killed
 * in a long offline ends it, as on Linux, while a signal it catches does
 * not (W6; writer_killed()), and reads
 * go on while a write is running (A7).  Writers serialise on the sim's own
 * lock (W4).
 *
 * Exit status: 0 once mounted (the server goes on in the background unless
 * -f), 2 usage, 10 the sim cannot be opened, 77 built without libfuse3
 * (a stub), else libfuse's (4: the mount failed).
 * Test tool: prints to stderr, exits on errors.
 */
#define FUSE_USE_VERSION 31

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HAVE_FUSE3
int main(void)
{
	fprintf(stderr, "simfs: built without libfuse3 (apt-get install libfuse3-dev fuse3)\n");
	return 77;
}
#else

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotplug/backend.h"
#include "hotplug/sim/sim.h"
#include "hotplug/sysfs/discover.h"
#include "lib/util.h"

struct simfs {
	struct hp_backend *sim;
	const char *tree; /* the sim's tree, b->root */
};

static struct simfs *ctx(void)
{
	return fuse_get_context()->private_data;
}

/* PATH inside the tree. */
static int real_path(const char *path, char *buf, size_t len)
{
	if (snprintf(buf, len, "%s%s", ctx()->tree, path) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* Which writable attribute PATH is: 0 with ATTR and ID set, or -1 (read-only). */
static int writable(const char *path, enum hp_attr *attr, uint64_t *id)
{
	static const struct {
		const char *dir, *file;
		enum hp_attr attr;
	} map[] = {
		{ "/sys/firmware/memory/", "config", HP_ATTR_CONFIG },
		{ "/sys/firmware/memory/", "memmap_on_memory", HP_ATTR_MEMMAP },
		{ "/sys/devices/system/memory/", "online", HP_ATTR_ONLINE },
		{ "/sys/devices/system/memory/", "state", HP_ATTR_STATE },
	};
	char name[64];
	const char *slash;

	if (streq(path, "/sys/devices/system/memory/auto_online_blocks")) {
		*attr = HP_ATTR_AUTO_ONLINE;
		*id = 0;
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		const char *rest;
		size_t n;

		if (!startswith(path, map[i].dir))
			continue;
		rest = path + strlen(map[i].dir);
		slash = strchr(rest, '/');
		if (!slash || !streq(slash + 1, map[i].file))
			continue;
		n = (size_t)(slash - rest);
		if (n >= sizeof(name))
			continue;
		memcpy(name, rest, n);
		name[n] = '\0';
		if (hp_parse_block_name(name, id) < 0)
			continue;
		*attr = map[i].attr;
		return 0;
	}
	return -1;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	char rp[PATH_MAX];
	enum hp_attr a;
	uint64_t id;
	int r = real_path(path, rp, sizeof(rp));

	(void)fi;
	if (r < 0)
		return r;
	if (lstat(rp, st) < 0)
		return -errno;
	if (S_ISREG(st->st_mode)) {
		/* sysfs modes: 0644 for attributes with a store method, else 0444 */
		st->st_mode = S_IFREG | (writable(path, &a, &id) == 0 ? 0644 : 0444);
		st->st_size = 4096;
	}
	return 0;
}

static int fs_readlink(const char *path, char *buf, size_t size)
{
	char rp[PATH_MAX];
	ssize_t n;
	int r = real_path(path, rp, sizeof(rp));

	if (r < 0)
		return r;
	n = readlink(rp, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	char rp[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int r = real_path(path, rp, sizeof(rp));

	(void)off, (void)fi, (void)flags;
	if (r < 0)
		return r;
	d = opendir(rp);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		/* the sim's half-written files and block directories on their way
		 * in or out (NAME.new, NAME.old) are not part of the tree */
		if (n > 4 && (streq(de->d_name + n - 4, ".new") || streq(de->d_name + n - 4, ".old")))
			continue;
		if (fill(buf, de->d_name, NULL, 0, 0))
			break;
	}
	closedir(d);
	return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	char rp[PATH_MAX];
	enum hp_attr a;
	uint64_t id;
	struct stat st;
	int r = real_path(path, rp, sizeof(rp));

	if (r < 0)
		return r;
	if (lstat(rp, &st) < 0)
		return -errno;
	if ((fi->flags & O_ACCMODE) != O_RDONLY && writable(path, &a, &id) < 0)
		return -EACCES; /* kernfs: no store method */
	fi->direct_io = 1; /* no page cache: every read asks us */
	return 0;
}

static int fs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	char rp[PATH_MAX];
	ssize_t n;
	int fd, r = real_path(path, rp, sizeof(rp));

	(void)fi;
	if (r < 0)
		return r;
	fd = open(rp, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, size, off);
	r = n < 0 ? -errno : (int)n;
	close(fd);
	return r;
}

static int fs_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char value[4097];
	enum hp_attr a;
	uint64_t id;
	int r;

	(void)off, (void)fi;
	if (writable(path, &a, &id) < 0)
		return -EACCES;
	/* kernfs hands the store method at most a page, NUL-terminated */
	if (size > sizeof(value) - 1)
		size = sizeof(value) - 1;
	memcpy(value, buf, size);
	value[size] = '\0';
	r = ctx()->sim->ops->write_attr(ctx()->sim, a, id, value);
	return r < 0 ? r : (int)size;
}

/* O_TRUNC from `echo v > attr`: accepted, ignored (kernfs does the same). */
static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	enum hp_attr a;
	uint64_t id;

	(void)size, (void)fi;
	return writable(path, &a, &id) == 0 ? 0 : -EACCES;
}

static int fs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)path, (void)mode, (void)fi;
	return -EACCES;
}

static int fs_mknod(const char *path, mode_t mode, dev_t dev)
{
	(void)path, (void)mode, (void)dev;
	return -EACCES;
}

static int fs_mkdir(const char *path, mode_t mode)
{
	(void)path, (void)mode;
	return -EACCES;
}

static int fs_unlink(const char *path)
{
	(void)path;
	return -EPERM;
}

static int fs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	(void)path, (void)tv, (void)fi;
	return 0;
}

/*
 * W6: Linux ends an offline only on a fatal signal.  The writer of the
 * request this thread serves is being killed when SIGKILL is pending for
 * it (the kernel marks every thread of a process a fatal signal kills);
 * gone altogether counts too.
 */
static bool writer_killed(void)
{
	char path[64], line[256];
	bool killed = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)fuse_get_context()->pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7))
			killed |= (strtoull(line + 7, NULL, 16) >> (SIGKILL - 1)) & 1;
	fclose(f);
	return killed;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	/* Nothing cached: the tree changes behind the kernel's back. */
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->direct_io = 1;
	cfg->kernel_cache = 0;
	/* An interrupted writer makes libfuse signal (intr_signal, SIGUSR1) the
	 * thread serving it, which wakes the sim's migration sleep to ask
	 * writer_killed() (W6: only the writer's death ends it).  main()
	 * installed the handler: libfuse only does when -o intr is given at
	 * fuse_new time, which fuse_main does not accept. */
	cfg->intr = 1;
	cfg->intr_signal = SIGUSR1;
	return fuse_get_context()->private_data;
}

static const struct fuse_operations ops = {
	.init = fs_init,
	.getattr = fs_getattr,
	.readlink = fs_readlink,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.write = fs_write,
	.truncate = fs_truncate,
	.create = fs_create,
	.mknod = fs_mknod,
	.mkdir = fs_mkdir,
	.unlink = fs_unlink,
	.rmdir = fs_unlink,
	.utimens = fs_utimens,
};

static void intr_nop(int sig)
{
	(void)sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: simfs [-f] [-d] STATE_FILE MOUNTPOINT\n"
		   "Serves the memgrant sim in STATE_FILE as a sysfs tree at MOUNTPOINT.\n"
		   "  -f  stay in the foreground   -d  FUSE debug output (implies -f)\n"
		   "Unmount with: fusermount3 -u MOUNTPOINT\n");
}

int main(int argc, char **argv)
{
	struct simfs fs = { 0 };
	char *fargv[16];
	int fargc = 0, r;
	const char *state = NULL, *mnt = NULL;
	bool fg = false, debug = false;
	char *abs_state;

	for (int i = 1; i < argc; i++) {
		if (streq(argv[i], "-f"))
			fg = true;
		else if (streq(argv[i], "-d"))
			debug = true;
		else if (streq(argv[i], "-h") || streq(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!state)
			state = argv[i];
		else if (!mnt)
			mnt = argv[i];
		else {
			usage(stderr);
			return 2;
		}
	}
	if (!state || !mnt) {
		usage(stderr);
		return 2;
	}
	/* The daemon changes to /: keep the state file's absolute name. */
	abs_state = realpath(state, NULL);
	if (!abs_state) {
		fprintf(stderr, "simfs: %s: %s\n", state, strerror(errno));
		return 10;
	}
	r = hp_sim_open(abs_state, &fs.sim);
	if (r < 0) {
		fprintf(stderr, "simfs: cannot open sim '%s': %s (%s)\n", abs_state, strerror(-r),
			errno_name(r));
		free(abs_state);
		return 10;
	}
	fs.tree = fs.sim->root;
	sim_set_kill_check(fs.sim, writer_killed);
	{
		/* no SA_RESTART: the signal must wake the sim's sleep (see fs_init) */
		struct sigaction sa = { .sa_handler = intr_nop };
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
	}

	fargv[fargc++] = argv[0];
	fargv[fargc++] = (char *)mnt;
	fargv[fargc++] = "-o";
	fargv[fargc++] = "fsname=simfs,subtype=memgrant-sim";
	if (fg)
		fargv[fargc++] = "-f";
	if (debug)
		fargv[fargc++] = "-d";
	fargv[fargc] = NULL;
	r = fuse_main(fargc, fargv, &ops, &fs);
	hp_backend_close(fs.sim);
	free(abs_state);
	return r;
}
#endif
