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

/* DIR (relative to the tree) / NAME, replaced by rename; no link followed. */
static int put_filef(const struct sim_settings *s, const char *dir, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int put_filef(const struct sim_settings *s, const char *dir, const char *name, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return sim_put_rel(s->fs->tree, dir, name, buf, (size_t)n);
}

/* Into a directory nobody reads yet: no rename needed, but never into
 * something that was there before (O_EXCL). */
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
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	w = write(fd, buf, (size_t)n);
	if (w != n)
		r = w < 0 ? -errno : -EIO;
	close(fd);
	return r;
}

static int put_link(const struct sim_settings *s, const char *target, const char *dir, const char *name)
{
	_cleanup_close_ int fd = sim_openat(s->fs->tree, dir, O_PATH | O_DIRECTORY, 0);

	if (fd < 0)
		return fd;
	if (symlinkat(target, fd, name) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

#define MEM_DIR "sys/devices/system/memory"
#define NODE_DIR "sys/devices/system/node/node0"
#define FW_DIR "sys/firmware/memory"

int sim_tree_meminfo(const struct sim_settings *s, const struct sim_summary *sum)
{
	uint64_t total = sim_mem_total(s, sum), avail = total > s->used_bytes ? total - s->used_bytes : 0;

	return put_filef(s, "proc", "meminfo",
			 "MemTotal:       %8" PRIu64 " kB\nMemFree:        %8" PRIu64 " kB\n"
			 "MemAvailable:   %8" PRIu64 " kB\n",
			 total / 1024, avail / 1024, avail / 1024);
}

int sim_tree_auto_online(const struct sim_settings *s)
{
	return put_filef(s, MEM_DIR, "auto_online_blocks", "%s\n", s->auto_online);
}

int sim_tree_zones(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
		   const struct sim_spans *sp)
{
	char dir[64], zones[48];

	snprintf(dir, sizeof(dir), MEM_DIR "/memory%" PRIu64, id);
	sim_valid_zones(s, sp, id, b, zones, sizeof(zones));
	return put_filef(s, dir, "valid_zones", "%s\n", zones);
}

/* Builds memoryN in memoryN.new and renames it into place (A3-A9). */
static int dev_dir_create(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
			  const struct sim_spans *sp)
{
	char name[32], tmp[40], zones[48], old[40];
	_cleanup_close_ int mem = -1, fd = -1;
	int r;

	mem = sim_openat(s->fs->tree, MEM_DIR, O_PATH | O_DIRECTORY, 0);
	if (mem < 0)
		return mem;
	snprintf(name, sizeof(name), "memory%" PRIu64, id);
	snprintf(tmp, sizeof(tmp), "%s.new", name);
	r = rm_rf_at(mem, tmp); /* left by a writer that was killed */
	if (r < 0)
		return r;
	if (mkdirat(mem, tmp, 0755) < 0)
		return -errno;
	fd = sim_openat(mem, tmp, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
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
	if (renameat(mem, tmp, mem, name) == 0)
		return 0;
	if (errno != ENOTEMPTY && errno != EEXIST)
		return -errno;
	/* a full rewrite over an existing directory (repair) */
	snprintf(old, sizeof(old), "%s.old", name);
	r = rm_rf_at(mem, old);
	if (r < 0)
		return r;
	if (renameat(mem, name, mem, old) < 0 || renameat(mem, tmp, mem, name) < 0)
		return -errno;
	return rm_rf_at(mem, old);
}

int sim_tree_block(const struct sim_settings *s, uint64_t id, const struct sim_block *old,
		   const struct sim_block *nw, const struct sim_spans *sp)
{
	char dir[64], name[32], target[64];
	int r;

	snprintf(name, sizeof(name), "memory%" PRIu64, id);
	snprintf(dir, sizeof(dir), MEM_DIR "/%s", name);
	if (!nw->configured) {
		if (!old || old->configured) { /* C11, C14: the directory disappears */
			_cleanup_close_ int node = sim_openat(s->fs->tree, NODE_DIR, O_PATH | O_DIRECTORY, 0);
			_cleanup_close_ int mem = sim_openat(s->fs->tree, MEM_DIR, O_PATH | O_DIRECTORY, 0);
			char gone[40];

			if (node < 0 || mem < 0)
				return node < 0 ? node : mem;
			if (unlinkat(node, name, 0) < 0 && errno != ENOENT)
				return -errno;
			snprintf(gone, sizeof(gone), "%s.old", name);
			r = rm_rf_at(mem, gone); /* left by a writer killed before it removed it */
			if (r == 0 && renameat(mem, name, mem, gone) == 0)
				r = rm_rf_at(mem, gone);
			else if (r == 0)
				r = errno == ENOENT ? 0 : -errno;
			if (r < 0)
				return r;
		}
	} else if (!old || !old->configured) {
		r = dev_dir_create(s, id, nw, sp);
		snprintf(target, sizeof(target), "../../memory/%s", name);
		if (r == 0)
			r = put_link(s, target, NODE_DIR, name);
		if (r < 0)
			return r;
	} else {
		if (old->state != nw->state) {
			r = put_filef(s, dir, "online", "%d\n", nw->state == MEM_STATE_OFFLINE ? 0 : 1);
			if (r == 0)
				r = put_filef(s, dir, "state", "%s\n", mem_state_name(nw->state));
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
		snprintf(dir, sizeof(dir), FW_DIR "/%s", name);
		if (!old) {
			r = sim_mkdirs_at(s->fs->tree, dir, 0755);
			if (r < 0)
				return r;
		}
		if (!old || old->configured != nw->configured) {
			r = put_filef(s, dir, "config", "%d\n", nw->configured);
			if (r < 0)
				return r;
		}
		if (!old || old->memmap != nw->memmap) {
			r = put_filef(s, dir, "memmap_on_memory", "%d\n", nw->memmap);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static int write_globals(const struct sim_settings *s)
{
	static const char params[] = "sys/module/memory_hotplug/parameters";
	int t = s->fs->tree, r;

	r = sim_mkdirs_at(t, MEM_DIR, 0755);
	if (r == 0) /* A1 */
		r = put_filef(s, MEM_DIR, "block_size_bytes", "%" PRIx64 "\n", s->block_size);
	if (r == 0)
		r = sim_tree_auto_online(s);
	if (r == 0)
		r = sim_mkdirs_at(t, NODE_DIR, 0755);
	if (r == 0)
		r = put_filef(s, "sys/devices/system/node", "online", "0\n");
	if (r == 0)
		r = put_filef(s, "sys/devices/system/node", "possible", "0\n");
	if (r == 0)
		r = sim_mkdirs_at(t, params, 0755);
	if (r == 0) /* P1-P4 */
		r = put_filef(s, params, "memmap_on_memory", "%s\n", s->memmap_supported ? "Y" : "N");
	if (r == 0)
		r = put_filef(s, params, "online_policy", "contig-zones\n");
	if (r == 0)
		r = put_filef(s, params, "auto_movable_ratio", "301\n");
	if (r == 0)
		r = put_filef(s, params, "auto_movable_numa_aware", "Y\n");
	if (r == 0 && s->has_firmware)
		r = sim_mkdirs_at(t, FW_DIR, 0755);
	if (r == 0)
		r = sim_mkdirs_at(t, "proc", 0755);
	return r;
}

/* Block ID into a tree just emptied: files written in place, nothing to remove. */
static int block_fresh(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
		       const struct sim_spans *sp)
{
	char dir[64], name[32];
	_cleanup_close_ int fd = -1;
	int r;

	snprintf(name, sizeof(name), "memory%" PRIu64, id);
	if (b->configured) {
		char target[64];

		snprintf(target, sizeof(target), "../../memory/%s", name);
		r = dev_dir_create(s, id, b, sp);
		if (r == 0)
			r = put_link(s, target, NODE_DIR, name);
		if (r < 0)
			return r;
	}
	if (!s->has_firmware)
		return 0;
	snprintf(dir, sizeof(dir), FW_DIR "/%s", name);
	r = sim_mkdirs_at(s->fs->tree, dir, 0755);
	if (r < 0)
		return r;
	fd = sim_openat(s->fs->tree, dir, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	r = new_filef(fd, "config", "%d\n", b->configured);
	if (r == 0)
		r = new_filef(fd, "memmap_on_memory", "%d\n", b->memmap);
	return r;
}

int sim_tree_render_all(const struct sim_settings *s, const struct sim_block *all,
			const struct sim_summary *sum)
{
	static const char *const subdirs[] = { MEM_DIR, "sys/devices/system/node", FW_DIR };
	int r;

	if (s->fs->tree < 0)
		return -ENOENT;
	for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
		r = sim_rm_rf_rel(s->fs->tree, subdirs[i]);
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
