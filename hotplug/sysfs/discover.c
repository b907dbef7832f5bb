/* SPDX-License-Identifier: MIT */
#include "hotplug/sysfs/discover.h"
#include "lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>

#define DEV_DIR "sys/devices/system/memory"
#define FW_DIR "sys/firmware/memory"
#define MEMMAP_PARAM "sys/module/memory_hotplug/parameters/memmap_on_memory"

/* What a firmware entry says (C1, C3); -1 where the file is absent. */
struct fw_entry {
	uint64_t id;
	int config;
	int memmap;
};

static void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* "/" + "sys/..." would print as "//sys/..." */
static const char *root_prefix(struct hp_path *p)
{
	const char *r = hp_path_root(p);

	return streq(r, "/") ? "" : r;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static void block_init(struct mem_block *b, uint64_t id)
{
	memset(b, 0, sizeof(*b));
	b->id = id;
	b->memmap_on_memory = -1;
	b->removable = -1;
	b->node = -1;
	b->state = MEM_STATE_OFFLINE;
}

int hp_parse_block_name(const char *name, uint64_t *id)
{
	const char *s;
	uint64_t v = 0;

	if (!startswith(name, "memory"))
		return -EINVAL;
	s = name + strlen("memory");
	if (!*s || (s[0] == '0' && s[1])) /* the kernel prints %u: no padding */
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (MEM_BLOCK_ID_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE; /* more than the kernel's 32-bit device id */
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*id = v;
	return 0;
}

/* Hex digits only, no 0x, no sign, no spaces (A1, A4). */
static int parse_hex(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			return -EINVAL;
		if (v > (UINT64_MAX >> 4))
			return -EINVAL;
		v = (v << 4) | d;
	}
	*out = v;
	return 0;
}

/* config, memmap_on_memory, removable read exactly "0" or "1" (C3, A5). */
static int parse_01(const char *s, int *out)
{
	if (streq(s, "0"))
		*out = 0;
	else if (streq(s, "1"))
		*out = 1;
	else
		return -EINVAL;
	return 0;
}

/* Reads an optional short attribute: 1 read, 0 absent, or -errno. */
static int read_opt(int dirfd, const char *rel, char *buf, size_t len)
{
	int r = hp_read_at(dirfd, rel, buf, len);

	if (r == -ENOENT) {
		buf[0] = '\0';
		return 0;
	}
	return r < 0 ? r : 1;
}

/* The node a block directory's nodeX link names, -1 without one. */
static int16_t node_of_dir(DIR *d)
{
	struct dirent *de;

	while ((de = readdir(d))) {
		const char *s = de->d_name;
		long n = 0;

		if (!startswith(s, "node") || !s[4])
			continue;
		for (s += 4; *s >= '0' && *s <= '9' && n <= MEM_NODE_MAX; s++)
			n = n * 10 + (*s - '0');
		if (*s == '\0' && n <= MEM_NODE_MAX)
			return (int16_t)n;
	}
	return -1;
}

/*
 * Reads one sys/devices/system/memory/memoryN directory into B.
 * 1 when read, 0 when the directory is gone (concurrent config=0), -errno.
 */
static int read_dev_block(struct hp_path *p, int memfd, const char *name, uint64_t id,
			  struct mem_block *b, char *err, size_t errlen)
{
	_cleanup_close_ int bfd = -1;
	_cleanup_(closedirp) DIR *d = NULL;
	char buf[128];
	int removable, r;

	block_init(b, id);
	bfd = hp_open_dir_at(memfd, name);
	if (bfd == -ENOENT)
		return 0;
	if (bfd < 0) {
		set_err(err, errlen, "%s/" DEV_DIR "/%s: %s", root_prefix(p), name,
			strerror(-bfd));
		return bfd;
	}

	/* state (A7), not online: reading online waits for a running change (A8). */
	r = hp_read_at(bfd, "state", buf, sizeof(buf));
	if (r == -ENOENT) {
		/* Gone under us (config=0), or a block without state: try online. */
		if (faccessat(memfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			return 0;
		r = hp_read_at(bfd, "online", buf, sizeof(buf));
		if (r >= 0) {
			int on;
			b->state = parse_01(buf, &on) < 0 ? MEM_STATE_UNKNOWN
				   : on ? MEM_STATE_ONLINE : MEM_STATE_OFFLINE;
		} else if (r == -ENOENT) {
			return 0; /* neither state nor online: not a memory block */
		}
	} else if (r >= 0 && mem_state_parse(buf, &b->state) < 0) {
		b->state = MEM_STATE_UNKNOWN; /* a word a newer kernel may add */
	}
	if (r < 0) {
		if (r == -EOVERFLOW) {
			set_err(err, errlen, "%s/" DEV_DIR "/%s/state: value too long",
				root_prefix(p), name);
			return -EINVAL;
		}
		set_err(err, errlen, "%s/" DEV_DIR "/%s/state: %s", root_prefix(p), name,
			strerror(-r));
		return r;
	}

	r = read_opt(bfd, "valid_zones", buf, sizeof(buf));
	if (r < 0) {
		set_err(err, errlen, "%s/" DEV_DIR "/%s/valid_zones: %s", root_prefix(p), name,
			strerror(-r));
		return r;
	}
	b->zones = mem_zones_parse(buf);

	r = read_opt(bfd, "phys_index", buf, sizeof(buf));
	if (r > 0) {
		uint64_t idx;
		if (parse_hex(buf, &idx) < 0 || idx != id) {
			set_err(err, errlen,
				"%s/" DEV_DIR "/%s/phys_index: '%s' is not the block's index %" PRIx64
				" in hex", root_prefix(p), name, buf, id);
			return -EINVAL;
		}
	} else if (r < 0) {
		set_err(err, errlen, "%s/" DEV_DIR "/%s/phys_index: %s", root_prefix(p), name,
			strerror(-r));
		return r;
	}

	r = read_opt(bfd, "removable", buf, sizeof(buf));
	if (r > 0 && parse_01(buf, &removable) < 0) {
		set_err(err, errlen, "%s/" DEV_DIR "/%s/removable: '%s' is not 0 or 1",
			root_prefix(p), name, buf);
		return -EINVAL;
	} else if (r < 0) {
		set_err(err, errlen, "%s/" DEV_DIR "/%s/removable: %s", root_prefix(p), name,
			strerror(-r));
		return r;
	}
	if (r > 0)
		b->removable = (int8_t)removable;

	/* The nodeX link: the only way to learn the node from this directory. */
	d = fdopendir(bfd);
	if (!d) {
		r = -errno;
		set_err(err, errlen, "%s/" DEV_DIR "/%s: %s", root_prefix(p), name, strerror(-r));
		return r;
	}
	bfd = -1; /* owned by d now */
	b->node = node_of_dir(d);
	return 1;
}

/* Reads sys/firmware/memory/memoryN/{config,memmap_on_memory}. 1, 0 when gone, -errno. */
static int read_fw_entry(struct hp_path *p, int fwfd, const char *name, uint64_t id,
			 struct fw_entry *e, char *err, size_t errlen)
{
	static const char *const files[] = { "config", "memmap_on_memory" };
	int *vals[] = { &e->config, &e->memmap };
	char rel[64], buf[32];

	e->id = id;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		int r;

		snprintf(rel, sizeof(rel), "%s/%s", name, files[i]);
		r = hp_read_at(fwfd, rel, buf, sizeof(buf));
		if (r == -ENOENT) {
			if (faccessat(fwfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
				return 0; /* the entry itself is gone */
			*vals[i] = -1;
			continue;
		}
		if (r < 0 && r != -EOVERFLOW) {
			set_err(err, errlen, "%s/" FW_DIR "/%s: %s", root_prefix(p), rel,
				strerror(-r));
			return r;
		}
		if (r < 0 || parse_01(buf, vals[i]) < 0) {
			set_err(err, errlen, "%s/" FW_DIR "/%s: '%s' is not 0 or 1 (C3)",
				root_prefix(p), rel, r < 0 ? "(too long)" : buf);
			return -EINVAL;
		}
	}
	return 1;
}

/* Applies a firmware entry to a block (see the merge rules in discover.h). */
static void merge_fw(struct mem_block *b, bool present, const struct fw_entry *e)
{
	b->in_firmware = true;
	b->memmap_on_memory = e->memmap;
	b->configured = e->config >= 0 ? e->config == 1 : present;
	if (!present) { /* C14: no devices directory, nothing else to say */
		b->state = MEM_STATE_OFFLINE;
		b->zones = 0;
		b->removable = -1;
		b->node = -1;
	}
}

/* A short text attribute into a fixed field: "" when absent. */
static int read_field(struct hp_path *p, const char *rel, char *dst, size_t len, char *err,
		      size_t errlen)
{
	int r = hp_path_read(p, rel, dst, len);

	if (r == -ENOENT) {
		dst[0] = '\0';
		return 0;
	}
	if (r == -EOVERFLOW) {
		set_err(err, errlen, "%s/%s: value longer than %zu bytes", root_prefix(p), rel,
			len - 1);
		return -EINVAL;
	}
	if (r < 0) {
		set_err(err, errlen, "%s/%s: %s", root_prefix(p), rel, strerror(-r));
		return r;
	}
	return 0;
}

static int read_block_size(struct hp_path *p, uint64_t *out, char *err, size_t errlen)
{
	char buf[64];
	int r = hp_path_read(p, DEV_DIR "/block_size_bytes", buf, sizeof(buf));

	if (r == -ENOENT) {
		set_err(err, errlen,
			"%s/" DEV_DIR "/block_size_bytes: missing (no memory hotplug under '%s')",
			root_prefix(p), hp_path_root(p));
		return r;
	}
	if (r < 0 && r != -EOVERFLOW) {
		set_err(err, errlen, "%s/" DEV_DIR "/block_size_bytes: %s", root_prefix(p),
			strerror(-r));
		return r;
	}
	if (r < 0 || parse_hex(buf, out) < 0 || *out == 0 || (*out & (*out - 1))) {
		set_err(err, errlen,
			"%s/" DEV_DIR "/block_size_bytes: '%s' is not a power of two in hex (A1)",
			root_prefix(p), r < 0 ? "(too long)" : buf);
		return -EINVAL;
	}
	return 0;
}

/* Whether P1 says if memmap on memory is supported (policy_memmap_supported()):
 * only then may a standby block's memmap_on_memory wait until it is needed. */
static bool param_decides_memmap(const char *param)
{
	return param[0] == 'Y' || param[0] == 'y' || param[0] == 'N' || param[0] == 'n' ||
	       streq(param, "force");
}

int hp_discover_table(struct hp_path *p, bool lazy_memmap, struct mem_table **out, char *err, size_t errlen)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_(closedirp) DIR *dd = NULL;
	_cleanup_(closedirp) DIR *fd = NULL;
	struct dirent *de;
	uint64_t bs, max_id;
	size_t n_dev;
	int r;

	r = read_block_size(p, &bs, err, errlen);
	if (r < 0)
		return r;
	t = mem_table_new(bs);
	if (!t)
		return -ENOMEM;
	/* Largest id whose last byte still has an address. */
	max_id = (UINT64_MAX - (bs - 1)) / bs;
	t->has_firmware = hp_path_exists(p, FW_DIR) == 0; /* C0: check the attribute */

	r = read_field(p, DEV_DIR "/auto_online_blocks", t->auto_online, sizeof(t->auto_online),
		       err, errlen);
	if (r < 0)
		return r;
	r = read_field(p, MEMMAP_PARAM, t->memmap_param, sizeof(t->memmap_param), err, errlen);
	if (r < 0)
		return r;
	lazy_memmap = lazy_memmap && param_decides_memmap(t->memmap_param);

	r = hp_path_opendir(p, DEV_DIR, &dd);
	if (r < 0) {
		set_err(err, errlen, "%s/" DEV_DIR ": %s", root_prefix(p), strerror(-r));
		return r;
	}
	while ((errno = 0, de = readdir(dd))) {
		struct mem_block blk, *b;
		uint64_t id;

		r = hp_parse_block_name(de->d_name, &id);
		if (r == -ERANGE) {
			set_err(err, errlen, "%s/" DEV_DIR "/%s: block number larger than the kernel's 32-bit device id",
				root_prefix(p), de->d_name);
			return -EINVAL;
		}
		if (r < 0)
			continue; /* block_size_bytes, probe, power, uevent, ... */
		if (id > max_id) {
			set_err(err, errlen, "%s/" DEV_DIR "/%s: block address overflows 64 bits",
				root_prefix(p), de->d_name);
			return -EINVAL;
		}
		r = read_dev_block(p, dirfd(dd), de->d_name, id, &blk, err, errlen);
		if (r < 0)
			return r;
		if (r == 0)
			continue;
		blk.configured = true;
		b = mem_table_add(t, id);
		if (!b)
			return -ENOMEM;
		*b = blk;
	}
	if (errno) {
		r = -errno;
		set_err(err, errlen, "%s/" DEV_DIR ": %s", root_prefix(p), strerror(-r));
		return r;
	}
	mem_table_sort(t);
	n_dev = t->n;

	if (t->has_firmware) {
		r = hp_path_opendir(p, FW_DIR, &fd);
		if (r < 0) {
			set_err(err, errlen, "%s/" FW_DIR ": %s", root_prefix(p), strerror(-r));
			return r;
		}
		while ((errno = 0, de = readdir(fd))) {
			struct fw_entry e;
			struct mem_block *b;
			uint64_t id;

			r = hp_parse_block_name(de->d_name, &id);
			if (r == -ERANGE) {
				set_err(err, errlen,
					"%s/" FW_DIR "/%s: block number larger than the kernel's 32-bit device id",
					root_prefix(p), de->d_name);
				return -EINVAL;
			}
			if (r < 0)
				continue;
			if (id > max_id) {
				set_err(err, errlen,
					"%s/" FW_DIR "/%s: block address overflows 64 bits",
					root_prefix(p), de->d_name);
				return -EINVAL;
			}
			/* Only the sorted devices part is searched; ids are unique per directory. */
			b = mem_blocks_search(t->blocks, n_dev, id);
			if (!b && lazy_memmap) {
				/* C14: no devices block, deconfigured; one configured
				 * since is announced (its uevent, read whole) */
				e = (struct fw_entry){ .id = id, .config = 0, .memmap = MEM_MEMMAP_UNREAD };
				b = mem_table_add(t, id);
				if (!b)
					return -ENOMEM;
				merge_fw(b, false, &e);
				continue;
			}
			r = read_fw_entry(p, dirfd(fd), de->d_name, id, &e, err, errlen);
			if (r < 0)
				return r;
			if (r == 0)
				continue;
			if (b) {
				merge_fw(b, true, &e);
				continue;
			}
			b = mem_table_add(t, id);
			if (!b)
				return -ENOMEM;
			merge_fw(b, false, &e);
		}
		if (errno) {
			r = -errno;
			set_err(err, errlen, "%s/" FW_DIR ": %s", root_prefix(p), strerror(-r));
			return r;
		}
		mem_table_sort(t);
	}
	*out = TAKE_PTR(t);
	return 0;
}

int hp_discover_block(struct hp_path *p, uint64_t id, struct mem_block *out, char *err,
		      size_t errlen)
{
	_cleanup_close_ int memfd = -1, fwfd = -1;
	struct mem_block blk;
	struct fw_entry e = { .id = id, .config = -1, .memmap = -1 };
	char name[32];
	bool present = false, in_fw = false;
	int r;

	if (id > MEM_BLOCK_ID_MAX) { /* the kernel has no such block (32-bit device ids) */
		set_err(err, errlen, "memory%" PRIu64 ": no such block (block ids are 32 bits)", id);
		return -ENOENT;
	}
	snprintf(name, sizeof(name), "memory%" PRIu64, id);
	block_init(&blk, id);

	memfd = hp_path_open_dir(p, DEV_DIR);
	if (memfd >= 0) {
		r = read_dev_block(p, memfd, name, id, &blk, err, errlen);
		if (r < 0)
			return r;
		present = r > 0;
	} else if (memfd != -ENOENT) {
		set_err(err, errlen, "%s/" DEV_DIR ": %s", root_prefix(p), strerror(-memfd));
		return memfd;
	}

	fwfd = hp_path_open_dir(p, FW_DIR);
	if (fwfd >= 0) {
		r = read_fw_entry(p, fwfd, name, id, &e, err, errlen);
		if (r < 0)
			return r;
		in_fw = r > 0;
	} else if (fwfd != -ENOENT) {
		set_err(err, errlen, "%s/" FW_DIR ": %s", root_prefix(p), strerror(-fwfd));
		return fwfd;
	}

	if (!present && !in_fw) {
		set_err(err, errlen, "block %" PRIu64 ": no %s under %s/" DEV_DIR " or %s/" FW_DIR,
			id, name, root_prefix(p), root_prefix(p));
		return -ENOENT;
	}
	blk.configured = present;
	if (in_fw)
		merge_fw(&blk, present, &e);
	*out = blk;
	return 0;
}

/* The node of devices block NAME: the link to node GUESS looked up first
 * (one lstat: a block keeps its node, and most machines have node 0 alone),
 * else the directory scanned.  -ESTALE when the directory is gone. */
static int reread_node(struct hp_path *p, const char *name, int guess, int16_t *node)
{
	_cleanup_(closedirp) DIR *d = NULL;
	char rel[96];
	int r;

	snprintf(rel, sizeof(rel), DEV_DIR "/%s/node%d", name, guess);
	if (hp_path_exists(p, rel) == 0) {
		*node = (int16_t)guess;
		return 0;
	}
	snprintf(rel, sizeof(rel), DEV_DIR "/%s", name);
	r = hp_path_opendir(p, rel, &d);
	if (r < 0)
		return r == -ENOENT ? -ESTALE : r;
	*node = node_of_dir(d);
	return 0;
}

int hp_reread_block(struct hp_path *p, enum hp_reread what, const struct mem_block *known, int removable,
		    bool numa, struct mem_block *out)
{
	struct mem_block b = *known;
	char name[32], rel[128], buf[128];
	int r;

	snprintf(name, sizeof(name), "memory%" PRIu32, known->id);
	if (what == HP_REREAD_MEMMAP) {
		int v;

		snprintf(rel, sizeof(rel), FW_DIR "/%s/memmap_on_memory", name);
		r = hp_path_read(p, rel, buf, sizeof(buf));
		if (r == -ENOENT)
			return -ESTALE;
		if (r < 0 || parse_01(buf, &v) < 0)
			return r < 0 && r != -EOVERFLOW ? r : -EINVAL;
		b.memmap_on_memory = (int8_t)v;
		*out = b;
		return 0;
	}
	if (what == HP_REREAD_DECONFIGURED) {
		if (!known->in_firmware)
			return -ESTALE;
		snprintf(rel, sizeof(rel), FW_DIR "/%s/config", name);
		r = hp_path_read(p, rel, buf, sizeof(buf));
		if (r == -ENOENT || r == -EOVERFLOW || (r >= 0 && !streq(buf, "0")))
			return -ESTALE;
		if (r < 0)
			return r;
		snprintf(rel, sizeof(rel), DEV_DIR "/%s", name);
		r = hp_path_exists(p, rel);
		if (r != -ENOENT)
			return r == 0 ? -ESTALE : r;
		b.configured = false;
		b.state = MEM_STATE_OFFLINE; /* C14, as merge_fw() */
		b.zones = 0;
		b.removable = -1;
		b.node = -1;
		*out = b;
		return 0;
	}

	snprintf(rel, sizeof(rel), DEV_DIR "/%s/state", name);
	r = hp_path_read(p, rel, buf, sizeof(buf));
	if (r == -ENOENT)
		return -ESTALE;
	if (r < 0)
		return r == -EOVERFLOW ? -EINVAL : r;
	if (mem_state_parse(buf, &b.state) < 0)
		b.state = MEM_STATE_UNKNOWN; /* a word a newer kernel may add */
	b.configured = true;
	if (what == HP_REREAD_STATE) {
		*out = b;
		return 0;
	}

	snprintf(rel, sizeof(rel), DEV_DIR "/%s/valid_zones", name);
	r = hp_path_read(p, rel, buf, sizeof(buf));
	if (r == -ENOENT)
		buf[0] = '\0';
	else if (r < 0)
		return r == -EOVERFLOW ? -EINVAL : r;
	b.zones = mem_zones_parse(buf);
	b.node = -1;
	r = numa ? reread_node(p, name, known->node >= 0 ? known->node : 0, &b.node) : 0;
	if (r < 0)
		return r;
	if (b.removable < 0)
		b.removable = (int8_t)removable;
	if (b.removable < 0) {
		int v;

		snprintf(rel, sizeof(rel), DEV_DIR "/%s/removable", name);
		r = hp_path_read(p, rel, buf, sizeof(buf));
		if (r >= 0 && parse_01(buf, &v) == 0)
			b.removable = (int8_t)v;
		else if (r < 0 && r != -ENOENT)
			return r == -EOVERFLOW ? -EINVAL : r;
	}
	*out = b;
	return 0;
}
