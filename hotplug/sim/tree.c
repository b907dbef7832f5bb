/* SPDX-License-Identifier: MIT */
/*
 * The sim's sysfs-shaped tree (sys/devices/system/memory, sys/firmware/memory,
 * sys/devices/system/node, sys/module/memory_hotplug, proc/meminfo), rendered
 * from the records.  Files are replaced by rename so a reader never sees one
 * half-written; a block directory appears or disappears by one rename.  The
 * tree is derived data: nothing here is fsynced (sim_impl.h says how a kill
 * is repaired).
 */
#include "hotplug/sim/sim_impl.h"

#include "lib/fileio.h"
#include "lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/vfs.h>

static int put_filef(const char *dir, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int put_filef(const char *dir, const char *name, const char *fmt, ...)
{
	char path[PATH_MAX], buf[256];
	va_list ap;
	int n;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sim_put_file(path, buf, (size_t)n);
}

/* Into a directory nobody reads yet: no rename needed. */
static int new_filef(int dirfd, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int new_filef(int dirfd, const char *name, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	ssize_t w;
	int fd, n, r = 0;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	w = write(fd, buf, (size_t)n);
	if (w != n)
		r = w < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

static int put_link(const char *target, const char *dir, const char *name)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (symlink(target, path) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Never touch a real sysfs or procfs, whatever tree path we are given. */
int sim_tree_safe(const char *tree)
{
	char path[PATH_MAX];
	struct statfs sf;

	if (streq(tree, "/") || tree[0] != '/')
		return -EINVAL;
	if (statfs(tree, &sf) == 0 && (sf.f_type == SYSFS_MAGIC || sf.f_type == PROC_SUPER_MAGIC))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/sys", tree);
	if (statfs(path, &sf) == 0 && sf.f_type == SYSFS_MAGIC)
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/proc", tree);
	if (statfs(path, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC)
		return -EINVAL;
	return 0;
}

int sim_tree_meminfo(const struct sim_settings *s, const struct sim_summary *sum)
{
	char dir[PATH_MAX];
	uint64_t total = sim_mem_total(s, sum), avail = total > s->used_bytes ? total - s->used_bytes : 0;

	snprintf(dir, sizeof(dir), "%s/proc", s->tree);
	return put_filef(dir, "meminfo",
			 "MemTotal:       %8" PRIu64 " kB\nMemFree:        %8" PRIu64 " kB\n"
			 "MemAvailable:   %8" PRIu64 " kB\n",
			 total / 1024, avail / 1024, avail / 1024);
}

int sim_tree_auto_online(const struct sim_settings *s)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory", s->tree);
	return put_filef(dir, "auto_online_blocks", "%s\n", s->auto_online);
}

int sim_tree_zones(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
		   const struct sim_spans *sp)
{
	char dir[PATH_MAX], zones[48];

	snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory/memory%" PRIu64, s->tree, id);
	sim_valid_zones(s, sp, id, b, zones, sizeof(zones));
	return put_filef(dir, "valid_zones", "%s\n", zones);
}

/* Builds memoryN in DIR.new and renames it into place (A3-A9). */
static int dev_dir_create(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
			  const struct sim_spans *sp, const char *dir)
{
	char tmp[PATH_MAX + 8], zones[48], old[PATH_MAX + 8];
	_cleanup_close_ int fd = -1;
	int r;

	snprintf(tmp, sizeof(tmp), "%s.new", dir);
	(void)rm_rf(tmp); /* left by a writer that was killed */
	if (mkdir(tmp, 0755) < 0)
		return -errno;
	fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	sim_valid_zones(s, sp, id, b, zones, sizeof(zones));
	r = new_filef(fd, "phys_index", "%08" PRIx64 "\n", id); /* A4 */
	if (r == 0)
		r = new_filef(fd, "phys_device", "%" PRIu64 "\n", id); /* A6 */
	if (r == 0)
		r = new_filef(fd, "removable", "1\n"); /* A5 */
	if (r == 0)
		r = new_filef(fd, "uevent", "%s", "");
	if (r == 0)
		r = new_filef(fd, "online", "%d\n", b->state == MEM_STATE_OFFLINE ? 0 : 1);
	if (r == 0)
		r = new_filef(fd, "state", "%s\n", mem_state_name(b->state));
	if (r == 0)
		r = new_filef(fd, "valid_zones", "%s\n", zones);
	if (r == 0 && symlinkat("../../node/node0", fd, "node0") < 0)
		r = -errno;
	if (r < 0)
		return r;
	if (rename(tmp, dir) == 0)
		return 0;
	if (errno != ENOTEMPTY && errno != EEXIST)
		return -errno;
	/* a full rewrite over an existing directory (repair) */
	snprintf(old, sizeof(old), "%s.old", dir);
	(void)rm_rf(old);
	if (rename(dir, old) < 0 || rename(tmp, dir) < 0)
		return -errno;
	return rm_rf(old);
}

int sim_tree_block(const struct sim_settings *s, uint64_t id, const struct sim_block *old,
		   const struct sim_block *nw, const struct sim_spans *sp)
{
	char dir[PATH_MAX], name[32], nodedir[PATH_MAX], target[64];
	int r;

	snprintf(name, sizeof(name), "memory%" PRIu64, id);
	snprintf(nodedir, sizeof(nodedir), "%s/sys/devices/system/node/node0", s->tree);
	snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory/%s", s->tree, name);
	if (!nw->configured) {
		if (!old || old->configured) { /* C11, C14: the directory disappears */
			char link[PATH_MAX + 64], gone[PATH_MAX + 8];

			snprintf(link, sizeof(link), "%s/%s", nodedir, name);
			if (unlink(link) < 0 && errno != ENOENT)
				return -errno;
			snprintf(gone, sizeof(gone), "%s.old", dir);
			(void)rm_rf(gone); /* left by a writer killed before it removed it */
			if (rename(dir, gone) == 0)
				r = rm_rf(gone);
			else
				r = errno == ENOENT ? 0 : -errno;
			if (r < 0)
				return r;
		}
	} else if (!old || !old->configured) {
		r = dev_dir_create(s, id, nw, sp, dir);
		snprintf(target, sizeof(target), "../../memory/%s", name);
		if (r == 0)
			r = put_link(target, nodedir, name);
		if (r < 0)
			return r;
	} else {
		if (old->state != nw->state) {
			r = put_filef(dir, "online", "%d\n", nw->state == MEM_STATE_OFFLINE ? 0 : 1);
			if (r == 0)
				r = put_filef(dir, "state", "%s\n", mem_state_name(nw->state));
			if (r < 0)
				return r;
		}
		if (old->state != nw->state || old->zone != nw->zone) {
			r = sim_tree_zones(s, id, nw, sp);
			if (r < 0)
				return r;
		}
	}
	if (s->has_firmware) {
		snprintf(dir, sizeof(dir), "%s/sys/firmware/memory/%s", s->tree, name);
		if (!old) {
			r = mkdir(dir, 0755) < 0 && errno != EEXIST ? -errno : 0;
			if (r < 0)
				return r;
		}
		if (!old || old->configured != nw->configured) {
			r = put_filef(dir, "config", "%d\n", nw->configured);
			if (r < 0)
				return r;
		}
		if (!old || old->memmap != nw->memmap) {
			r = put_filef(dir, "memmap_on_memory", "%d\n", nw->memmap);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int write_globals(const struct sim_settings *s)
{
	char dir[PATH_MAX];
	int r;

	snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory", s->tree);
	r = mkdir_p(dir, 0755);
	if (r == 0) /* A1 */
		r = put_filef(dir, "block_size_bytes", "%" PRIx64 "\n", s->block_size);
	if (r == 0)
		r = sim_tree_auto_online(s);
	snprintf(dir, sizeof(dir), "%s/sys/devices/system/node/node0", s->tree);
	if (r == 0)
		r = mkdir_p(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/sys/devices/system/node", s->tree);
	if (r == 0)
		r = put_filef(dir, "online", "0\n");
	if (r == 0)
		r = put_filef(dir, "possible", "0\n");
	snprintf(dir, sizeof(dir), "%s/sys/module/memory_hotplug/parameters", s->tree);
	if (r == 0)
		r = mkdir_p(dir, 0755);
	if (r == 0) /* P1-P4 */
		r = put_filef(dir, "memmap_on_memory", "%s\n", s->memmap_supported ? "Y" : "N");
	if (r == 0)
		r = put_filef(dir, "online_policy", "contig-zones\n");
	if (r == 0)
		r = put_filef(dir, "auto_movable_ratio", "301\n");
	if (r == 0)
		r = put_filef(dir, "auto_movable_numa_aware", "Y\n");
	if (r == 0 && s->has_firmware) {
		snprintf(dir, sizeof(dir), "%s/sys/firmware/memory", s->tree);
		r = mkdir_p(dir, 0755);
	}
	snprintf(dir, sizeof(dir), "%s/proc", s->tree);
	if (r == 0)
		r = mkdir_p(dir, 0755);
	return r;
}

/* Block ID into a tree just emptied: files written in place, nothing to remove. */
static int block_fresh(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
		       const struct sim_spans *sp)
{
	char dir[PATH_MAX];
	_cleanup_close_ int fd = -1;
	int r;

	if (b->configured) {
		char name[32], target[64], nodedir[PATH_MAX];

		snprintf(name, sizeof(name), "memory%" PRIu64, id);
		snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory/%s", s->tree, name);
		snprintf(nodedir, sizeof(nodedir), "%s/sys/devices/system/node/node0", s->tree);
		snprintf(target, sizeof(target), "../../memory/%s", name);
		r = dev_dir_create(s, id, b, sp, dir);
		if (r == 0)
			r = put_link(target, nodedir, name);
		if (r < 0)
			return r;
	}
	if (!s->has_firmware)
		return 0;
	snprintf(dir, sizeof(dir), "%s/sys/firmware/memory/memory%" PRIu64, s->tree, id);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = new_filef(fd, "config", "%d\n", b->configured);
	if (r == 0)
		r = new_filef(fd, "memmap_on_memory", "%d\n", b->memmap);
	return r;
}

int sim_tree_render_all(const struct sim_settings *s, const struct sim_block *all,
			const struct sim_summary *sum)
{
	static const char *const subdirs[] = {
		"sys/devices/system/memory", "sys/devices/system/node", "sys/firmware/memory",
	};
	int r;

	r = sim_tree_safe(s->tree);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s/%s", s->tree, subdirs[i]);
		r = rm_rf(dir);
		if (r < 0)
			return r;
	}
	r = write_globals(s);
	for (uint64_t i = 0; r == 0 && i < s->n_blocks; i++)
		r = block_fresh(s, i, &all[i], &sum->sp);
	if (r == 0)
		r = sim_tree_meminfo(s, sum);
	return r;
}
