/* SPDX-License-Identifier: MIT */
#include "agent/ctl/lsmem/lsmemread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotplug/sysfs/discover.h"
#include "lib/util.h"

#define DEV_DIR "sys/devices/system/memory"
#define FW_DIR "sys/firmware/memory"
#define MEMMAP_PARAM "sys/module/memory_hotplug/parameters/memmap_on_memory"

/* getdents64 buffer: 65,536 entries of "memoryNNNNN" fit in about 2 MiB;
 * one call per 256 KiB keeps the syscall count small without a big buffer. */
#define DENTS_BUF (256u * 1024)

/* Sorted list of block ids found in one directory. */
struct idlist {
	uint64_t *ids;
	size_t n, cap;
};

static void idlist_done(struct idlist *l)
{
	free(l->ids);
}

/*
 * One attribute: openat + one read + close.  The buffer is large enough for
 * any of the attributes read here; a value that fills it is taken as the
 * first LEN-1 bytes (lsmem's own buffers are no larger).  Strips the
 * trailing newline.  Returns the length or -errno.
 */
static int read_attr(int dirfd, const char *rel, char *buf, size_t len)
{
	int fd = openat(dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	close(fd);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\0'))
		n--;
	buf[n] = '\0';
	return (int)n;
}

/* The block ids named memoryN in directory DIRFD (consumes nothing: reads
 * through a duplicate so that DIRFD stays usable for openat). */
static int list_blocks(int dirfd, struct idlist *l)
{
	_cleanup_free_ char *buf = malloc(DENTS_BUF);
	_cleanup_close_ int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (!buf)
		return -ENOMEM;
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = getdents64(fd, buf, DENTS_BUF);

		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			uint64_t id;

			off += de->d_reclen;
			if (hp_parse_block_name(de->d_name, &id) < 0)
				continue;
			if (l->n == l->cap) {
				size_t cap = l->cap ? 2 * l->cap : 1024;
				uint64_t *p = realloc(l->ids, cap * sizeof(*p));
				if (!p)
					return -ENOMEM;
				l->ids = p;
				l->cap = cap;
			}
			l->ids[l->n++] = id;
		}
	}
	qsort(l->ids, l->n, sizeof(*l->ids), u64_cmp);
	return 0;
}

/* The nodeX entry of block directory NAME, -1 without one (as lsmem). */
static int read_node(int memfd, const char *name)
{
	char buf[8192];
	int fd = openat(memfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int node = -1;

	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t n = getdents64(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (ssize_t off = 0; off < n && node < 0;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			const char *s = de->d_name + 4;
			long v = 0;

			off += de->d_reclen;
			if (strncmp(de->d_name, "node", 4) != 0 || !*s)
				continue;
			for (; *s >= '0' && *s <= '9' && v <= MEM_NODE_MAX; s++)
				v = v * 10 + (*s - '0');
			if (!*s && v <= MEM_NODE_MAX)
				node = (int)v;
		}
		if (node >= 0)
			break;
	}
	close(fd);
	return node;
}

/* SRC (N bytes) into DST, cut at a space when it does not fit (valid_zones
 * lists at most a few short words; lsmem looks at the first 8). */
static void copy_words(char *dst, size_t dstlen, const char *src, size_t n)
{
	if (n >= dstlen) {
		n = dstlen - 1;
		while (n > 0 && src[n] != ' ')
			n--;
	}
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* lsmem reads these with "%d" and compares with 1 */
static int int_value(const char *s)
{
	return (int)strtol(s, NULL, 10);
}

/* The devices part of block ID. */
static void read_dev(int memfd, uint64_t id, const struct lsmem_need *need, bool firmware,
		     int *last_node, struct mem_block *b)
{
	char rel[64], buf[256];
	int len = snprintf(rel, sizeof(rel), "memory%" PRIu64 "/", id);
	size_t base = (size_t)len;

	/* lsmem starts from "offline" for a firmware row, from "?" otherwise */
	b->state = firmware ? MEM_STATE_OFFLINE : MEM_STATE_UNKNOWN;
	memcpy(rel + base, "state", sizeof("state"));
	if (read_attr(memfd, rel, buf, sizeof(buf)) > 0) {
		if (streq(buf, "online"))
			b->state = MEM_STATE_ONLINE;
		else if (streq(buf, "offline"))
			b->state = MEM_STATE_OFFLINE;
		else if (streq(buf, "going-offline"))
			b->state = MEM_STATE_GOING_OFFLINE;
	}
	if (need->removable) {
		memcpy(rel + base, "removable", sizeof("removable"));
		b->removable = read_attr(memfd, rel, buf, sizeof(buf)) > 0 && int_value(buf) == 1;
	}
	if (need->zones) {
		memcpy(rel + base, "valid_zones", sizeof("valid_zones"));
		int n = read_attr(memfd, rel, buf, sizeof(buf));
		if (n > 0) {
			char words[MEM_ZONES_TEXT_MAX];

			copy_words(words, sizeof(words), buf, (size_t)n);
			b->zones = mem_zones_parse(words);
		}
	}
	if (need->node) {
		/* neighbours share a node: one faccessat of the last block's link
		 * name instead of listing the directory */
		if (*last_node >= 0) {
			snprintf(rel + base, sizeof(rel) - base, "node%d", *last_node);
			if (faccessat(memfd, rel, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
				b->node = *last_node;
				return;
			}
		}
		rel[base - 1] = '\0';
		b->node = (int16_t)read_node(memfd, rel); /* -1 or at most MEM_NODE_MAX */
		if (b->node >= 0)
			*last_node = b->node;
	}
}

static void __attribute__((format(printf, 3, 4))) seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int lsmem_read_tree(const char *root, const struct lsmem_need *need, struct mem_table **out,
		    char *err, size_t errlen)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_close_ int rootfd = -1, memfd = -1, fwfd = -1;
	_cleanup_(idlist_done) struct idlist ids = { 0 };
	const char *shown = root && !streq(root, "/") ? root : "";
	char buf[256], rel[64];
	uint64_t bs;
	int r, last_node = -1;

	rootfd = open(root ? root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		r = -errno;
		seterr(err, errlen, "%s: %s", root ? root : "/", strerror(-r));
		return r;
	}
	memfd = openat(rootfd, DEV_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (memfd < 0) {
		r = -errno;
		seterr(err, errlen, "%s/" DEV_DIR ": %s", shown, strerror(-r));
		return r;
	}
	r = read_attr(memfd, "block_size_bytes", buf, sizeof(buf));
	if (r < 0) {
		seterr(err, errlen, "%s/" DEV_DIR "/block_size_bytes: %s", shown, strerror(-r));
		return r;
	}
	{
		char *end;
		errno = 0;
		bs = strtoull(buf, &end, 16);
		if (errno || end == buf || *end || bs == 0) {
			seterr(err, errlen, "%s/" DEV_DIR "/block_size_bytes: '%s' is not a size in hex",
			       shown, buf);
			return -EINVAL;
		}
	}
	t = mem_table_new(bs);
	if (!t)
		return -ENOMEM;
	fwfd = openat(rootfd, FW_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t->has_firmware = fwfd >= 0;
	if (need->memmap_param) {
		r = read_attr(rootfd, MEMMAP_PARAM, buf, sizeof(buf));
		if (r > 0)
			copy_words(t->memmap_param, sizeof(t->memmap_param), buf, (size_t)r);
	}

	r = list_blocks(t->has_firmware ? fwfd : memfd, &ids);
	if (r < 0) {
		seterr(err, errlen, "%s/%s: %s", shown, t->has_firmware ? FW_DIR : DEV_DIR,
		       strerror(-r));
		return r;
	}
	t->blocks = calloc(ids.n ? ids.n : 1, sizeof(*t->blocks));
	if (!t->blocks)
		return -ENOMEM;

	for (size_t i = 0; i < ids.n; i++) {
		struct mem_block *b = &t->blocks[t->n];
		uint64_t id = ids.ids[i];

		memset(b, 0, sizeof(*b));
		b->id = id;
		b->removable = -1;
		b->node = -1;
		b->memmap_on_memory = -1;
		b->state = MEM_STATE_OFFLINE;
		if (t->has_firmware) {
			int len = snprintf(rel, sizeof(rel), "memory%" PRIu64 "/config", id);

			b->in_firmware = true;
			b->configured = read_attr(fwfd, rel, buf, sizeof(buf)) > 0 && int_value(buf) == 1;
			if (need->memmap) {
				memcpy(rel + len - strlen("config"), "memmap_on_memory",
				       sizeof("memmap_on_memory"));
				if (read_attr(fwfd, rel, buf, sizeof(buf)) > 0)
					b->memmap_on_memory = int_value(buf) == 1;
			}
			t->n++;
			if (!b->configured)
				continue; /* lsmem reads nothing more of a deconfigured block */
			read_dev(memfd, id, need, true, &last_node, b);
			continue;
		}
		b->configured = true;
		read_dev(memfd, id, need, false, &last_node, b);
		t->n++;
	}
	*out = TAKE_PTR(t);
	return 0;
}
