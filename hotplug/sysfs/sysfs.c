/* SPDX-License-Identifier: MIT */
/*
 * The sysfs backend: every operation is one write(2) into the kernel's file
 * under the root ("/" on a guest, a temporary tree or a simfs mount in
 * tests), through hotplug/sysfs/path.h.  errno comes back unchanged; nothing is
 * created (a missing memoryN is ENOENT, as on a real kernel).  Change
 * notifications: sysfs_watch.h.
 */
#include "hotplug/backend.h"
#include "hotplug/sysfs/discover.h"
#include "hotplug/sysfs/path.h"
#include "hotplug/sysfs/sysfs_watch.h"
#include "lib/util.h"

#include <inttypes.h>

struct sysfs_backend {
	struct hp_backend base; /* first: the vtable casts back */
	struct hp_path *path;
	struct sysfs_watch *watch;
	/* the kernel's removable (A5: one value for every block), -1 until a
	 * devices block was read; read and written by any reader thread */
	int8_t removable;
	/* sys/devices/system/node exists (CONFIG_NUMA): -1 until looked at */
	int8_t numa;
};

static void learn_removable(struct hp_backend *b, const struct mem_block *m)
{
	if (m->configured && m->removable >= 0)
		__atomic_store_n(&((struct sysfs_backend *)b)->removable, m->removable, __ATOMIC_RELAXED);
}

static struct hp_path *path_of(struct hp_backend *b)
{
	return ((struct sysfs_backend *)b)->path;
}

static int discover(struct hp_backend *b, bool lazy_memmap, struct mem_table **out)
{
	int r = hp_discover_table(path_of(b), lazy_memmap, out, NULL, 0);

	/* the first devices block says it for all (most machines start with
	 * their first blocks online) */
	for (size_t i = 0; r == 0 && i < (*out)->n; i++)
		if ((*out)->blocks[i].configured) {
			learn_removable(b, &(*out)->blocks[i]);
			break;
		}
	return r;
}

static int sysfs_discover(struct hp_backend *b, struct mem_table **out)
{
	return discover(b, false, out);
}

static int sysfs_discover_lazy(struct hp_backend *b, struct mem_table **out)
{
	return discover(b, true, out);
}

static int sysfs_read_block(struct hp_backend *b, uint64_t id, struct mem_block *out)
{
	int r = hp_discover_block(path_of(b), id, out, NULL, 0);

	if (r == 0)
		learn_removable(b, out);
	return r;
}

static int sysfs_reread(struct hp_backend *b, enum hp_reread what, const struct mem_block *known,
			struct mem_block *out)
{
	struct sysfs_backend *s = (struct sysfs_backend *)b;
	int8_t removable = __atomic_load_n(&s->removable, __ATOMIC_RELAXED);
	int8_t numa = __atomic_load_n(&s->numa, __ATOMIC_RELAXED);

	if (numa < 0) { /* the kernel's build: looked at once */
		numa = hp_path_exists(s->path, "sys/devices/system/node") == 0;
		__atomic_store_n(&s->numa, numa, __ATOMIC_RELAXED);
	}
	return hp_reread_block(s->path, what, known, removable, numa, out);
}

static int sysfs_write_attr(struct hp_backend *b, enum hp_attr attr, uint64_t id,
			    const char *value)
{
	char rel[128];

	switch (attr) {
	case HP_ATTR_CONFIG:
		snprintf(rel, sizeof(rel), "sys/firmware/memory/memory%" PRIu64 "/config", id);
		break;
	case HP_ATTR_MEMMAP:
		snprintf(rel, sizeof(rel), "sys/firmware/memory/memory%" PRIu64 "/memmap_on_memory",
			 id);
		break;
	case HP_ATTR_ONLINE:
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64 "/online", id);
		break;
	case HP_ATTR_STATE:
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64 "/state", id);
		break;
	case HP_ATTR_AUTO_ONLINE:
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/auto_online_blocks");
		break;
	default:
		return -EINVAL;
	}
	if (!value)
		return -EINVAL;
	/*
	 * The value goes out raw so the kernel's parsers (K1, W1) judge it.
	 * One exception: an empty value is sent as "\n".  A zero-length write
	 * does not reach every file's store method (FUSE drops it), while the
	 * kernel rejects "" and "\n" alike for all of these attributes (K1, W1).
	 */
	return hp_path_write(path_of(b), rel, *value ? value : "\n");
}

static int sysfs_read_auto_online(struct hp_backend *b, char *buf, size_t len)
{
	int r = hp_path_read(path_of(b), "sys/devices/system/memory/auto_online_blocks", buf, len);

	return r < 0 ? r : 0;
}

static int sysfs_watch_open_op(struct hp_backend *b)
{
	struct sysfs_backend *s = (struct sysfs_backend *)b;
	int r;

	if (!s->watch) {
		r = sysfs_watch_open(s->path, &s->watch);
		if (r < 0)
			return r;
	}
	return sysfs_watch_fd(s->watch);
}

static int sysfs_watch_read_op(struct hp_backend *b, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	struct sysfs_backend *s = (struct sysfs_backend *)b;

	if (!s->watch)
		return -EBADF;
	return sysfs_watch_read(s->watch, ids, max, n, overflow);
}

static void sysfs_close(struct hp_backend *b)
{
	struct sysfs_backend *s = (struct sysfs_backend *)b;

	sysfs_watch_free(s->watch);

	hp_path_free(s->path);
	free(s->base.root);
	free(s);
}

static const struct hp_backend_ops sysfs_ops = {
	.name = "sysfs",
	.discover = sysfs_discover,
	.discover_lazy = sysfs_discover_lazy,
	.read_block = sysfs_read_block,
	.reread = sysfs_reread,
	.write_attr = sysfs_write_attr,
	.read_auto_online = sysfs_read_auto_online,
	.watch_open = sysfs_watch_open_op,
	.watch_read = sysfs_watch_read_op,
	.close = sysfs_close,
};

int hp_sysfs_open(const char *root, struct hp_backend **out)
{
	_cleanup_free_ struct sysfs_backend *s = NULL;
	int r;

	if (!root)
		root = "/";
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	r = hp_path_open(root, &s->path);
	if (r < 0)
		return r;
	s->base.root = strdup(root);
	if (!s->base.root) {
		hp_path_free(s->path);
		return -ENOMEM;
	}
	s->base.ops = &sysfs_ops;
	s->removable = -1;
	s->numa = -1;
	*out = &TAKE_PTR(s)->base;
	return 0;
}
