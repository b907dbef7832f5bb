/* SPDX-License-Identifier: MIT */
/*
 * The sim backend (contract in sim.h).
 *
 * Every write is: parse the value (K1, W1) -> take the writers' flock (W4)
 * -> load the state file -> apply one kernel rule -> save the state file
 * atomically -> bring the tree up to date -> release the lock.  Readers
 * (discover, read_block) load the state file without the lock: it is only
 * ever replaced by rename, so they see one whole version.
 *
 * Simplifications against the real kernel, on purpose:
 * - one NUMA node (node0); storage increment size = block size, so
 *   phys_device equals the block id (A6);
 * - the kernel zone of a block is DMA when it starts below 2 GiB, Normal
 *   otherwise (D3); the real kernel picks the first kernel zone whose span
 *   the block intersects;
 * - zone spans are the hull of the blocks online in that zone; the default
 *   zone for "online" follows contig-zones: the kernel zone unless the block
 *   only intersects the Movable span (movable_node is never set);
 * - online_policy auto-movable (P2) is not modelled;
 * - "online" (the attribute) onlines with the default policy, as the kernel
 *   does once a previous state write has been consumed;
 * - latency applies to writes that change something, not to no-ops or
 *   refused writes.
 */
#include "sim.h"

#include "../lib/fileio.h"
#include "../lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

#define SIM_FORMAT 1
#define SIM_MAX_FILE (256u << 20)
#define DMA_LIMIT (UINT64_C(2) << 30) /* D3 */

enum zone { ZONE_NONE, ZONE_DMA, ZONE_NORMAL, ZONE_MOVABLE };

static const char *const zone_names[] = {
	[ZONE_NONE] = "none", [ZONE_DMA] = "DMA", [ZONE_NORMAL] = "Normal", [ZONE_MOVABLE] = "Movable",
};


struct sim_block {
	bool configured;
	bool memmap;
	enum mem_state state; /* OFFLINE, ONLINE or GOING_OFFLINE */
	enum zone zone;       /* when not offline */
};

struct id_list {
	uint64_t *ids;
	size_t n;
};

struct sim_state {
	uint64_t block_size;
	uint64_t n_blocks;
	uint64_t boot_blocks;
	uint64_t used_bytes;
	bool memmap_supported;
	bool has_firmware;
	bool refuse_memmap_eopnotsupp;
	char auto_online[24];
	char *tree;
	struct id_list configure_eio, offline_ebusy, online_enomem;
	uint64_t latency_ms;
	struct sim_block *blocks;
};

static void sim_state_free(struct sim_state *s)
{
	if (!s)
		return;
	free(s->tree);
	free(s->configure_eio.ids);
	free(s->offline_ebusy.ids);
	free(s->online_enomem.ids);
	free(s->blocks);
	free(s);
}
static inline void sim_state_freep(struct sim_state **s) { sim_state_free(*s); }
#define _cleanup_state_ _cleanup_(sim_state_freep)

/* jansson.h provides json_decrefp(). */
#define _cleanup_json_ _cleanup_(json_decrefp)

static bool id_in(const struct id_list *l, uint64_t id)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

static bool is_auto_online_word(const char *s)
{
	for (size_t i = 0; mem_auto_online_words[i]; i++)
		if (streq(s, mem_auto_online_words[i]))
			return true;
	return false;
}

/* ---- parsing of written values ------------------------------------------ */

/* K1: kstrtobool, first character decides; "on"/"off" need the second. */
static int parse_kbool(const char *s, bool *out)
{
	switch (s[0]) {
	case '1': case 'y': case 'Y': case 't': case 'T': case 'e': case 'E':
		*out = true;
		return 0;
	case '0': case 'n': case 'N': case 'f': case 'F': case 'd': case 'D':
		*out = false;
		return 0;
	case 'o': case 'O':
		if (s[1] == 'n' || s[1] == 'N') {
			*out = true;
			return 0;
		}
		if (s[1] == 'f' || s[1] == 'F') {
			*out = false;
			return 0;
		}
		return -EINVAL;
	default:
		return -EINVAL;
	}
}

/* sysfs_streq: equal, ignoring one trailing newline on either side. */
static bool sysfs_streq(const char *value, const char *word)
{
	size_t n = strlen(word);

	return strncmp(value, word, n) == 0 && (value[n] == '\0' || streq(value + n, "\n"));
}

/* W1: the words memoryN/state accepts; -1 for "offline". */
static int parse_state_word(const char *v, int *type)
{
	if (sysfs_streq(v, "offline"))
		*type = -1;
	else if (sysfs_streq(v, "online"))
		*type = ONLINE_DEFAULT;
	else if (sysfs_streq(v, "online_kernel"))
		*type = ONLINE_KERNEL;
	else if (sysfs_streq(v, "online_movable"))
		*type = ONLINE_MOVABLE;
	else
		return -EINVAL;
	return 0;
}

/* ---- state file ----------------------------------------------------------- */

static int fail(char *err, size_t errlen, int r, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t errlen, int r, const char *path, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		int n = snprintf(err, errlen, "%s: ", path);

		if (n >= 0 && (size_t)n < errlen) {
			va_start(ap, fmt);
			vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return r;
}

static int get_u64(json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_bool(json_t *o, const char *key, bool *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_boolean(v))
		return -EINVAL;
	*out = json_is_true(v);
	return 0;
}

static int get_ids(json_t *o, const char *key, struct id_list *l)
{
	json_t *a = json_object_get(o, key), *v;
	size_t i;

	if (!json_is_array(a))
		return -EINVAL;
	l->n = json_array_size(a);
	l->ids = calloc(l->n ? l->n : 1, sizeof(*l->ids));
	if (!l->ids)
		return -ENOMEM;
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return -EINVAL;
		l->ids[i] = (uint64_t)json_integer_value(v);
	}
	return 0;
}

static int zone_parse(const char *s, enum zone *z)
{
	for (size_t i = ZONE_DMA; i < ARRAY_SIZE(zone_names); i++)
		if (streq(s, zone_names[i])) {
			*z = (enum zone)i;
			return 0;
		}
	return -EINVAL;
}

static bool valid_block_size(uint64_t bs)
{
	return bs >= (UINT64_C(1) << 20) && (bs & (bs - 1)) == 0;
}

static int state_load(const char *path, struct sim_state **out, char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *root = NULL;
	_cleanup_state_ struct sim_state *s = NULL;
	json_error_t jerr;
	json_t *blocks, *faults, *v, *jb;
	uint64_t format;
	size_t len, i;
	int r;

	r = file_read_all(path, SIM_MAX_FILE, &text, &len);
	if (r < 0)
		return fail(err, errlen, r, path, "cannot read sim state: %s", strerror(-r));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return fail(err, errlen, -EBADMSG, path, "line %d column %d: %s (corrupt or truncated sim state)",
			    jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root))
		return fail(err, errlen, -EINVAL, path, "sim state is not a JSON object");
	if (get_u64(root, "format", &format) < 0 || format != SIM_FORMAT)
		return fail(err, errlen, -EINVAL, path, "\"format\" must be %d", SIM_FORMAT);

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (get_u64(root, "block_size", &s->block_size) < 0 || !valid_block_size(s->block_size))
		return fail(err, errlen, -EINVAL, path, "\"block_size\" must be a power of two >= 1 MiB");
	if (get_u64(root, "boot_blocks", &s->boot_blocks) < 0 || s->boot_blocks == 0)
		return fail(err, errlen, -EINVAL, path, "\"boot_blocks\" must be a positive integer");
	if (get_u64(root, "used_bytes", &s->used_bytes) < 0)
		return fail(err, errlen, -EINVAL, path, "\"used_bytes\" must be a non-negative integer");
	if (get_bool(root, "memmap_supported", &s->memmap_supported) < 0 ||
	    get_bool(root, "has_firmware", &s->has_firmware) < 0 ||
	    get_bool(root, "refuse_memmap_eopnotsupp", &s->refuse_memmap_eopnotsupp) < 0)
		return fail(err, errlen, -EINVAL, path,
			    "\"memmap_supported\", \"has_firmware\", \"refuse_memmap_eopnotsupp\" must be booleans");
	v = json_object_get(root, "auto_online");
	if (!json_is_string(v) || !is_auto_online_word(json_string_value(v)))
		return fail(err, errlen, -EINVAL, path,
			    "\"auto_online\" must be offline, online, online_kernel or online_movable");
	snprintf(s->auto_online, sizeof(s->auto_online), "%s", json_string_value(v));
	v = json_object_get(root, "tree");
	if (!json_is_string(v) || json_string_value(v)[0] != '/')
		return fail(err, errlen, -EINVAL, path, "\"tree\" must be an absolute path");
	s->tree = strdup(json_string_value(v));
	if (!s->tree)
		return -ENOMEM;

	faults = json_object_get(root, "faults");
	if (!json_is_object(faults))
		return fail(err, errlen, -EINVAL, path, "\"faults\" must be an object");
	r = get_ids(faults, "configure_eio", &s->configure_eio);
	if (r == 0)
		r = get_ids(faults, "offline_ebusy", &s->offline_ebusy);
	if (r == 0)
		r = get_ids(faults, "online_enomem", &s->online_enomem);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return fail(err, errlen, r, path,
			    "\"faults\": configure_eio, offline_ebusy, online_enomem must be arrays of block ids");
	if (get_u64(faults, "latency_ms", &s->latency_ms) < 0)
		return fail(err, errlen, -EINVAL, path, "\"faults\": latency_ms must be a non-negative integer");

	blocks = json_object_get(root, "blocks");
	if (!json_is_array(blocks) || json_array_size(blocks) < s->boot_blocks ||
	    json_array_size(blocks) > SIM_MAX_BLOCKS)
		return fail(err, errlen, -EINVAL, path, "\"blocks\" must be an array of %" PRIu64 " to %u entries",
			    s->boot_blocks, SIM_MAX_BLOCKS);
	s->n_blocks = json_array_size(blocks);
	if (s->n_blocks > UINT64_MAX / s->block_size)
		return fail(err, errlen, -EINVAL, path, "memory size overflows 64 bits");
	s->blocks = calloc(s->n_blocks, sizeof(*s->blocks));
	if (!s->blocks)
		return -ENOMEM;
	json_array_foreach(blocks, i, jb) {
		struct sim_block *b = &s->blocks[i];
		const char *st, *zn;

		/* [config, memmap, state, zone]: arrays keep big machines fast */
		if (!json_is_array(jb) || json_array_size(jb) != 4 || !json_is_boolean(json_array_get(jb, 0)) ||
		    !json_is_boolean(json_array_get(jb, 1)) || !json_is_string(json_array_get(jb, 2)) ||
		    !json_is_string(json_array_get(jb, 3)))
			return fail(err, errlen, -EINVAL, path,
				    "block %zu: must be [config, memmap, \"state\", \"zone\"]", i);
		b->configured = json_is_true(json_array_get(jb, 0));
		b->memmap = json_is_true(json_array_get(jb, 1));
		st = json_string_value(json_array_get(jb, 2));
		zn = json_string_value(json_array_get(jb, 3));
		if (mem_state_parse(st, &b->state) < 0)
			return fail(err, errlen, -EINVAL, path, "block %zu: unknown state \"%s\"", i, st);
		if (b->state == MEM_STATE_OFFLINE) {
			if (zn[0])
				return fail(err, errlen, -EINVAL, path, "block %zu: offline block with zone \"%s\"", i, zn);
			b->zone = ZONE_NONE;
		} else {
			if (!b->configured)
				return fail(err, errlen, -EINVAL, path, "block %zu: %s but not configured", i, st);
			if (zone_parse(zn, &b->zone) < 0)
				return fail(err, errlen, -EINVAL, path, "block %zu: unknown zone \"%s\"", i, zn);
		}
		if (!s->has_firmware && !b->configured)
			return fail(err, errlen, -EINVAL, path, "block %zu: deconfigured without firmware entries", i);
	}
	*out = TAKE_PTR(s);
	return 0;
}

static json_t *ids_json(const struct id_list *l)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < l->n; i++)
		if (json_array_append_new(a, json_integer((json_int_t)l->ids[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/*
 * The settings go through jansson; the blocks are appended one per line by
 * hand (fixed words only, nothing to escape) so that a machine with
 * thousands of blocks saves fast and stays readable.  Loading is jansson's.
 */
static int state_save(const char *path, const struct sim_state *s)
{
	_cleanup_json_ json_t *root = NULL;
	_cleanup_free_ char *head = NULL, *text = NULL;
	json_t *faults;
	size_t hlen, len, cap;

	faults = json_pack("{s:o,s:o,s:o,s:I}", "configure_eio", ids_json(&s->configure_eio),
			   "offline_ebusy", ids_json(&s->offline_ebusy),
			   "online_enomem", ids_json(&s->online_enomem),
			   "latency_ms", (json_int_t)s->latency_ms);
	if (!faults)
		return -ENOMEM;
	root = json_pack("{s:i,s:I,s:I,s:I,s:b,s:b,s:b,s:s,s:s,s:o}", "format", SIM_FORMAT,
			 "block_size", (json_int_t)s->block_size, "boot_blocks", (json_int_t)s->boot_blocks,
			 "used_bytes", (json_int_t)s->used_bytes, "memmap_supported", s->memmap_supported,
			 "has_firmware", s->has_firmware, "refuse_memmap_eopnotsupp", s->refuse_memmap_eopnotsupp,
			 "auto_online", s->auto_online, "tree", s->tree, "faults", faults);
	if (!root)
		return -ENOMEM;
	head = json_dumps(root, JSON_INDENT(1) | JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!head)
		return -ENOMEM;
	hlen = strlen(head);
	if (hlen < 2 || head[hlen - 1] != '}')
		return -EINVAL;
	hlen -= 2; /* drop "\n}" and continue the object */
	cap = hlen + 64 + (size_t)s->n_blocks * 48;
	text = malloc(cap);
	if (!text)
		return -ENOMEM;
	memcpy(text, head, hlen);
	len = hlen + (size_t)snprintf(text + hlen, cap - hlen, ",\n \"blocks\":[");
	for (uint64_t i = 0; i < s->n_blocks; i++) {
		const struct sim_block *b = &s->blocks[i];
		len += (size_t)snprintf(text + len, cap - len, "%s\n  [%s,%s,\"%s\",\"%s\"]", i ? "," : "",
					b->configured ? "true" : "false", b->memmap ? "true" : "false",
					mem_state_name(b->state),
					b->state == MEM_STATE_OFFLINE ? "" : zone_names[b->zone]);
	}
	len += (size_t)snprintf(text + len, cap - len, "\n ]\n}\n");
	return file_write_atomic(path, text, len, 0644);
}

/* ---- zones (A9, W5) --------------------------------------------------------- */

struct spans {
	uint64_t lo[4], hi[4]; /* [lo, hi) in block ids of online blocks per zone */
};

static void spans_compute(const struct sim_state *s, struct spans *sp)
{
	for (int z = 0; z < 4; z++) {
		sp->lo[z] = UINT64_MAX;
		sp->hi[z] = 0;
	}
	for (uint64_t i = 0; i < s->n_blocks; i++) {
		enum zone z = s->blocks[i].zone;

		if (s->blocks[i].state == MEM_STATE_OFFLINE || z == ZONE_NONE)
			continue;
		if (i < sp->lo[z])
			sp->lo[z] = i;
		if (i + 1 > sp->hi[z])
			sp->hi[z] = i + 1;
	}
}

static enum zone kernel_zone(const struct sim_state *s, uint64_t id)
{
	return id * s->block_size < DMA_LIMIT ? ZONE_DMA : ZONE_NORMAL;
}

static enum zone zone_for(const struct sim_state *s, const struct spans *sp, uint64_t id, enum online_type t)
{
	enum zone kz = kernel_zone(s, id);
	bool in_kernel, in_movable;

	if (t == ONLINE_KERNEL)
		return kz;
	if (t == ONLINE_MOVABLE)
		return ZONE_MOVABLE;
	/* contig-zones: inherit the zone whose span the block is in, when only one is. */
	in_kernel = id >= sp->lo[kz] && id < sp->hi[kz];
	in_movable = id >= sp->lo[ZONE_MOVABLE] && id < sp->hi[ZONE_MOVABLE];
	if (in_kernel != in_movable)
		return in_kernel ? kz : ZONE_MOVABLE;
	return kz;
}

static void valid_zones(const struct sim_state *s, const struct spans *sp, uint64_t id, char *buf, size_t len)
{
	const struct sim_block *b = &s->blocks[id];
	enum zone def, kz;

	if (b->state != MEM_STATE_OFFLINE) {
		snprintf(buf, len, "%s", zone_names[b->zone]);
		return;
	}
	def = zone_for(s, sp, id, ONLINE_DEFAULT);
	kz = kernel_zone(s, id);
	snprintf(buf, len, "%s %s", zone_names[def], zone_names[def == ZONE_MOVABLE ? kz : ZONE_MOVABLE]);
}

/* ---- tree ------------------------------------------------------------------- */

/* Tree files are derived data: replaced by rename so readers never see a
 * half-written file, but not fsynced (thousands of them must stay fast). */
static int put_file(const char *path, const char *content)
{
	char tmp[PATH_MAX];
	_cleanup_close_ int fd = -1;
	size_t len = strlen(content);
	ssize_t n;

	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	n = write(fd, content, len);
	if (n < 0 || (size_t)n != len) {
		int r = n < 0 ? -errno : -EIO;
		unlink(tmp);
		return r;
	}
	if (rename(tmp, path) < 0) {
		int r = -errno;
		unlink(tmp);
		return r;
	}
	return 0;
}

static int put_filef(const char *fmt_path_dir, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int put_filef(const char *dir, const char *name, const char *fmt, ...)
{
	char path[PATH_MAX], buf[256];
	va_list ap;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return put_file(path, buf);
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
static int tree_safe(const char *tree)
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

struct block_view {
	bool dev;        /* sys/devices/system/memory/memoryN exists */
	char state[16];
	char zones[32];
	bool config, memmap;
};

static void block_view(const struct sim_state *s, const struct spans *sp, uint64_t id, struct block_view *v)
{
	const struct sim_block *b = &s->blocks[id];

	memset(v, 0, sizeof(*v));
	v->dev = b->configured;
	v->config = b->configured;
	v->memmap = b->memmap;
	snprintf(v->state, sizeof(v->state), "%s", mem_state_name(b->state));
	if (v->dev)
		valid_zones(s, sp, id, v->zones, sizeof(v->zones));
}

static uint64_t mem_total(const struct sim_state *s)
{
	uint64_t bs = s->block_size, memmap = bs / 64, total = 0, taken = 0; /* C8, P6 */

	for (uint64_t i = 0; i < s->n_blocks; i++) {
		const struct sim_block *b = &s->blocks[i];

		if (b->configured && !b->memmap)
			taken += memmap;
		if (b->state != MEM_STATE_OFFLINE)
			total += b->memmap ? bs - memmap : bs;
	}
	return total > taken ? total - taken : 0;
}

static int write_meminfo(const struct sim_state *s)
{
	char dir[PATH_MAX];
	uint64_t total = mem_total(s), avail = total > s->used_bytes ? total - s->used_bytes : 0;

	snprintf(dir, sizeof(dir), "%s/proc", s->tree);
	return put_filef(dir, "meminfo",
			 "MemTotal:       %8" PRIu64 " kB\nMemFree:        %8" PRIu64 " kB\n"
			 "MemAvailable:   %8" PRIu64 " kB\n",
			 total / 1024, avail / 1024, avail / 1024);
}

static int write_block(const struct sim_state *s, uint64_t id, const struct block_view *old,
		       const struct block_view *v)
{
	char dir[PATH_MAX], name[32], target[64], nodedir[PATH_MAX];
	int r;

	snprintf(name, sizeof(name), "memory%" PRIu64, id);
	snprintf(nodedir, sizeof(nodedir), "%s/sys/devices/system/node/node0", s->tree);
	if (s->has_firmware && (!old || old->config != v->config || old->memmap != v->memmap)) {
		snprintf(dir, sizeof(dir), "%s/sys/firmware/memory/%s", s->tree, name);
		r = mkdir_p(dir, 0755);
		if (r == 0)
			r = put_filef(dir, "config", "%d\n", v->config);
		if (r == 0)
			r = put_filef(dir, "memmap_on_memory", "%d\n", v->memmap);
		if (r < 0)
			return r;
	}
	snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory/%s", s->tree, name);
	if (!v->dev) {
		if (old && old->dev) { /* C11, C14: the directory disappears */
			char link[PATH_MAX + 64];

			snprintf(link, sizeof(link), "%s/%s", nodedir, name);
			if (unlink(link) < 0 && errno != ENOENT)
				return -errno;
			return rm_rf(dir);
		}
		return 0;
	}
	if (!old || !old->dev) {
		r = mkdir_p(dir, 0755);
		if (r == 0) /* A4, A5, A6 */
			r = put_filef(dir, "phys_index", "%08" PRIx64 "\n", id);
		if (r == 0)
			r = put_filef(dir, "phys_device", "%" PRIu64 "\n", id);
		if (r == 0)
			r = put_filef(dir, "removable", "1\n");
		if (r == 0)
			r = put_filef(dir, "uevent", "%s", "");
		if (r == 0)
			r = put_link("../../node/node0", dir, "node0");
		snprintf(target, sizeof(target), "../../memory/%s", name);
		if (r == 0)
			r = put_link(target, nodedir, name);
		if (r < 0)
			return r;
		old = NULL;
	}
	if (!old || !streq(old->state, v->state)) {
		r = put_filef(dir, "online", "%d\n", streq(v->state, "offline") ? 0 : 1);
		if (r == 0)
			r = put_filef(dir, "state", "%s\n", v->state);
		if (r < 0)
			return r;
	}
	if (!old || !streq(old->zones, v->zones)) {
		r = put_filef(dir, "valid_zones", "%s\n", v->zones);
		if (r < 0)
			return r;
	}
	return 0;
}

static int write_globals(const struct sim_state *s)
{
	char dir[PATH_MAX];
	int r;

	snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory", s->tree);
	r = mkdir_p(dir, 0755);
	if (r == 0) /* A1 */
		r = put_filef(dir, "block_size_bytes", "%" PRIx64 "\n", s->block_size);
	if (r == 0)
		r = put_filef(dir, "auto_online_blocks", "%s\n", s->auto_online);
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

/* Brings the tree from OLD (NULL: unknown, rewrite all) to NEW. */
static int tree_sync(const struct sim_state *old, const struct sim_state *s)
{
	struct spans osp, nsp;
	int r;

	r = tree_safe(s->tree);
	if (r < 0)
		return r;
	if (!old) {
		static const char *const subdirs[] = {
			"sys/devices/system/memory", "sys/devices/system/node", "sys/firmware/memory",
		};
		for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
			char dir[PATH_MAX];
			snprintf(dir, sizeof(dir), "%s/%s", s->tree, subdirs[i]);
			r = rm_rf(dir);
			if (r < 0)
				return r;
		}
		r = write_globals(s);
		if (r < 0)
			return r;
	} else if (!streq(old->auto_online, s->auto_online)) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/sys/devices/system/memory", s->tree);
		r = put_filef(dir, "auto_online_blocks", "%s\n", s->auto_online);
		if (r < 0)
			return r;
	}
	if (old)
		spans_compute(old, &osp);
	spans_compute(s, &nsp);
	for (uint64_t i = 0; i < s->n_blocks; i++) {
		struct block_view ov, nv;

		block_view(s, &nsp, i, &nv);
		if (old) {
			block_view(old, &osp, i, &ov);
			if (memcmp(&ov, &nv, sizeof(ov)) == 0)
				continue;
		}
		r = write_block(s, i, old ? &ov : NULL, &nv);
		if (r < 0)
			return r;
	}
	return write_meminfo(s);
}

/* ---- locking and sleeping ---------------------------------------------------- */

static int lock_path(const char *state_path, char *buf, size_t len)
{
	if (snprintf(buf, len, "%s.lock", state_path) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* W4: a writer waits for the one lock; the wait is restarted after signals. */
static int writer_lock(const char *state_path)
{
	char path[PATH_MAX];
	int fd, r;

	r = lock_path(state_path, path, sizeof(path));
	if (r < 0)
		return r;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			r = -errno;
			close(fd);
			return r;
		}
	}
	return fd;
}

static void deadline(uint64_t ms, struct timespec *end)
{
	clock_gettime(CLOCK_MONOTONIC, end);
	end->tv_sec += (time_t)(ms / 1000);
	end->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end->tv_nsec >= 1000000000L) {
		end->tv_sec++;
		end->tv_nsec -= 1000000000L;
	}
}

/* Sleeps MS milliseconds, restarting after signals (a write the kernel
 * does not let signals interrupt). */
static int sim_sleep(uint64_t ms)
{
	struct timespec end;

	if (ms == 0)
		return 0;
	deadline(ms, &end);
	for (;;) {
		int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL);
		if (r < 0) /* some interposers (sanitizers) return -1 and set errno */
			r = errno;
		if (r == 0)
			return 0;
		if (r != EINTR)
			return -r;
	}
}

/*
 * W6: a signal stops offlining.  Signals are blocked from before
 * going-offline becomes visible until ppoll() atomically unblocks them, so
 * a signal sent once a reader saw going-offline always ends the sleep with
 * -EINTR, however early it arrives.  Synchronous fault signals stay open.
 */
static void block_signals(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGABRT);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

static int sim_sleep_interruptible(uint64_t ms, const sigset_t *open_mask)
{
	struct timespec end, now, left;

	deadline(ms, &end);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			return 0;
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		if (ppoll(NULL, 0, &left, open_mask) < 0) {
			if (errno == EINTR)
				return -EINTR;
			return -errno;
		}
	}
}

/* ---- the rules ---------------------------------------------------------------- */

static int do_online(struct sim_state *s, uint64_t id, enum online_type t)
{
	struct sim_block *b = &s->blocks[id];
	struct spans sp;

	if (id_in(&s->online_enomem, id)) /* W5: the block stays offline */
		return -ENOMEM;
	spans_compute(s, &sp);
	b->zone = zone_for(s, &sp, id, t);
	b->state = MEM_STATE_ONLINE;
	return 0;
}

static int clone_state(const struct sim_state *s, struct sim_state **out)
{
	struct sim_state *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	*c = *s;
	c->tree = strdup(s->tree);
	c->blocks = malloc(s->n_blocks * sizeof(*s->blocks));
	c->configure_eio.ids = NULL;
	c->offline_ebusy.ids = NULL;
	c->online_enomem.ids = NULL;
	c->configure_eio.n = c->offline_ebusy.n = c->online_enomem.n = 0;
	if (!c->tree || !c->blocks) {
		sim_state_free(c);
		return -ENOMEM;
	}
	memcpy(c->blocks, s->blocks, s->n_blocks * sizeof(*s->blocks));
	*out = c;
	return 0;
}

/* Saves S and brings the tree from OLD to S. */
static int commit(const char *state_path, const struct sim_state *old, const struct sim_state *s)
{
	int r = state_save(state_path, s);

	if (r < 0)
		return r;
	return tree_sync(old, s);
}

/*
 * W6: going-offline is visible (file and tree) while the migration
 * (latency) runs; a signal ends it with EINTR, an EBUSY fault ends it
 * quickly; either way the block is online again.
 */
static int do_offline(const char *state_path, struct sim_state *s, uint64_t id)
{
	_cleanup_state_ struct sim_state *before = NULL;
	struct sim_block *b = &s->blocks[id];
	int r, err;

	r = clone_state(s, &before);
	if (r < 0)
		return r;
	b->state = MEM_STATE_GOING_OFFLINE;
	if (s->latency_ms > 0) { /* only worth showing when it lasts */
		sigset_t old;

		block_signals(&old);
		r = commit(state_path, before, s);
		if (r < 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return r;
		}
		before->blocks[id].state = MEM_STATE_GOING_OFFLINE;
		err = sim_sleep_interruptible(s->latency_ms, &old);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	} else {
		err = 0;
	}
	if (err == 0 && id_in(&s->offline_ebusy, id))
		err = -EBUSY;
	if (err < 0) {
		b->state = MEM_STATE_ONLINE;
	} else {
		b->state = MEM_STATE_OFFLINE;
		b->zone = ZONE_NONE;
	}
	r = commit(state_path, before, s);
	return err < 0 ? err : r;
}

struct sim_backend {
	struct hp_backend base;
	char *state_path;
};

static int check_exists(const struct sim_state *s, enum hp_attr attr, uint64_t id)
{
	if (attr == HP_ATTR_AUTO_ONLINE)
		return 0;
	if (id >= s->n_blocks)
		return -ENOENT;
	if ((attr == HP_ATTR_CONFIG || attr == HP_ATTR_MEMMAP) && !s->has_firmware)
		return -ENOENT; /* C0 */
	if ((attr == HP_ATTR_ONLINE || attr == HP_ATTR_STATE) && !s->blocks[id].configured)
		return -ENOENT; /* C14 */
	return 0;
}

/* Applies one parsed write to S under the lock.  Returns 0, -errno, or 1
 * when S changed and must be committed. */
static int apply(const char *state_path, struct sim_state *s, enum hp_attr attr, uint64_t id,
		 bool val, int type, const char *word)
{
	struct sim_block *b = attr == HP_ATTR_AUTO_ONLINE ? NULL : &s->blocks[id];
	int r;

	switch (attr) {
	case HP_ATTR_CONFIG:
		if (val == b->configured)
			return 0; /* C6, C9 */
		if (!val) {
			if (b->state != MEM_STATE_OFFLINE)
				return -EBUSY; /* C10 */
			(void)sim_sleep(s->latency_ms);
			b->configured = false; /* C11: storage released (C13) */
			return 1;
		}
		(void)sim_sleep(s->latency_ms);
		if (id_in(&s->configure_eio, id))
			return -EIO; /* C7: the hypervisor refused, config stays 0 */
		b->configured = true;
		b->state = MEM_STATE_OFFLINE;
		if (!streq(s->auto_online, "offline")) {
			int t = ONLINE_DEFAULT;
			(void)parse_state_word(s->auto_online, &t);
			(void)do_online(s, id, (enum online_type)t); /* C7: failure ignored */
		}
		return 1;
	case HP_ATTR_MEMMAP:
		if (val && !s->memmap_supported && s->refuse_memmap_eopnotsupp)
			return -EOPNOTSUPP; /* C12, newer kernels; checked before the lock there */
		if (b->configured)
			return -EBUSY; /* C12, even for the same value */
		if (b->memmap == val)
			return 0;
		b->memmap = val;
		return 1;
	case HP_ATTR_ONLINE:
		if (val == (b->state != MEM_STATE_OFFLINE))
			return 0; /* W3 */
		type = val ? ONLINE_DEFAULT : -1;
		/* fallthrough */
	case HP_ATTR_STATE:
		if ((type < 0) == (b->state == MEM_STATE_OFFLINE))
			return -EINVAL; /* W2 */
		if (type < 0) {
			r = do_offline(state_path, s, id);
			return r < 0 ? r : 2; /* already committed */
		}
		(void)sim_sleep(s->latency_ms);
		r = do_online(s, id, (enum online_type)type);
		return r < 0 ? r : 1;
	case HP_ATTR_AUTO_ONLINE:
		if (streq(s->auto_online, word))
			return 0;
		snprintf(s->auto_online, sizeof(s->auto_online), "%s", word);
		return 1;
	}
	return -EINVAL;
}

static int sim_write_attr(struct hp_backend *hb, enum hp_attr attr, uint64_t id, const char *value)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_state_ struct sim_state *s = NULL, *before = NULL;
	_cleanup_close_ int lock = -1;
	char word[24] = "";
	bool val = false;
	int type = -1, perr = 0, r;

	if (!value)
		return -EINVAL;
	/* Parse first, as the kernel does before taking its lock. */
	switch (attr) {
	case HP_ATTR_CONFIG:
	case HP_ATTR_MEMMAP:
	case HP_ATTR_ONLINE:
		perr = parse_kbool(value, &val); /* K1, C4, C12, W3 */
		break;
	case HP_ATTR_STATE:
		perr = parse_state_word(value, &type); /* W1 */
		break;
	case HP_ATTR_AUTO_ONLINE:
		for (size_t i = 0; mem_auto_online_words[i]; i++)
			if (sysfs_streq(value, mem_auto_online_words[i]))
				snprintf(word, sizeof(word), "%s", mem_auto_online_words[i]);
		perr = word[0] ? 0 : -EINVAL; /* A2 */
		break;
	default:
		return -EINVAL;
	}
	/* A missing file wins over a bad value (ENOENT before EINVAL), as
	 * open(2) fails before the kernel parses anything. */
	if (perr < 0) {
		r = state_load(sb->state_path, &s, NULL, 0);
		if (r < 0)
			return r;
		r = check_exists(s, attr, id);
		return r < 0 ? r : perr;
	}
	lock = writer_lock(sb->state_path);
	if (lock < 0)
		return lock;
	r = state_load(sb->state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	r = clone_state(s, &before);
	if (r < 0)
		return r;
	/* A writer that died while offlining leaves going-offline behind. */
	for (uint64_t i = 0; i < s->n_blocks; i++)
		if (s->blocks[i].state == MEM_STATE_GOING_OFFLINE)
			s->blocks[i].state = MEM_STATE_ONLINE;
	r = check_exists(s, attr, id);
	if (r < 0)
		return r;
	r = apply(sb->state_path, s, attr, id, val, type, word);
	if (r == 1)
		r = commit(sb->state_path, before, s);
	return r < 0 ? r : 0;
}

/*
 * A writer that dies while offlining leaves going-offline in the file; the
 * kernel would have ended that offline (the writer got a signal, W6) and the
 * block would be online again.  Readers see it so once no writer holds the
 * lock; the next writer repairs the file.
 */
static void settle_dead_offline(const char *state_path, struct sim_state *s)
{
	char path[PATH_MAX];
	bool any = false;
	int fd;

	for (uint64_t i = 0; i < s->n_blocks && !any; i++)
		any = s->blocks[i].state == MEM_STATE_GOING_OFFLINE;
	if (!any || lock_path(state_path, path, sizeof(path)) < 0)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		for (uint64_t i = 0; i < s->n_blocks; i++)
			if (s->blocks[i].state == MEM_STATE_GOING_OFFLINE)
				s->blocks[i].state = MEM_STATE_ONLINE;
	}
	close(fd); /* drops the shared lock, if taken */
}

static void fill_block(const struct sim_state *s, const struct spans *sp, uint64_t id, struct mem_block *out)
{
	const struct sim_block *b = &s->blocks[id];

	memset(out, 0, sizeof(*out));
	out->id = id;
	out->in_firmware = s->has_firmware;
	out->configured = b->configured;
	out->memmap_on_memory = s->has_firmware ? b->memmap : -1;
	out->state = b->state;
	out->removable = b->configured ? 1 : -1;
	out->node = b->configured ? 0 : -1;
	if (b->configured)
		valid_zones(s, sp, id, out->zones, sizeof(out->zones));
}

static int sim_discover(struct hp_backend *hb, struct mem_table **out)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_state_ struct sim_state *s = NULL;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct spans sp;
	int r;

	r = state_load(sb->state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	settle_dead_offline(sb->state_path, s);
	t = mem_table_new(s->block_size);
	if (!t)
		return -ENOMEM;
	t->has_firmware = s->has_firmware;
	snprintf(t->auto_online, sizeof(t->auto_online), "%s", s->auto_online);
	snprintf(t->memmap_param, sizeof(t->memmap_param), "%s", s->memmap_supported ? "Y" : "N");
	spans_compute(s, &sp);
	for (uint64_t i = 0; i < s->n_blocks; i++) {
		struct mem_block *b = mem_table_add(t, i);
		if (!b)
			return -ENOMEM;
		fill_block(s, &sp, i, b);
	}
	*out = TAKE_PTR(t);
	return 0;
}

static int sim_read_block(struct hp_backend *hb, uint64_t id, struct mem_block *out)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_state_ struct sim_state *s = NULL;
	struct spans sp;
	int r;

	r = state_load(sb->state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	if (id >= s->n_blocks)
		return -ENOENT;
	settle_dead_offline(sb->state_path, s);
	spans_compute(s, &sp);
	fill_block(s, &sp, id, out);
	return 0;
}

static int sim_read_auto_online(struct hp_backend *hb, char *buf, size_t len)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_state_ struct sim_state *s = NULL;
	int r;

	r = state_load(sb->state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	if (snprintf(buf, len, "%s", s->auto_online) >= (int)len)
		return -ENOBUFS;
	return 0;
}

static void sim_close(struct hp_backend *hb)
{
	struct sim_backend *sb = (struct sim_backend *)hb;

	free(sb->base.root);
	free(sb->state_path);
	free(sb);
}

static const struct hp_backend_ops sim_ops = {
	.name = "sim",
	.discover = sim_discover,
	.read_block = sim_read_block,
	.write_attr = sim_write_attr,
	.read_auto_online = sim_read_auto_online,
	.close = sim_close,
};

int hp_sim_open(const char *state_path, struct hp_backend **out)
{
	_cleanup_state_ struct sim_state *s = NULL;
	struct sim_backend *sb;
	char marker[PATH_MAX];
	int r;

	r = state_load(state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	r = tree_safe(s->tree);
	if (r < 0)
		return r;
	/* A missing tree (deleted, or a copied state file) is rebuilt. */
	snprintf(marker, sizeof(marker), "%s/sys/devices/system/memory/block_size_bytes", s->tree);
	if (access(marker, F_OK) < 0) {
		_cleanup_close_ int lock = writer_lock(state_path);
		if (lock < 0)
			return lock;
		r = tree_sync(NULL, s);
		if (r < 0)
			return r;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	sb->base.ops = &sim_ops;
	sb->base.root = TAKE_PTR(s->tree);
	sb->state_path = strdup(state_path);
	if (!sb->state_path) {
		sim_close(&sb->base);
		return -ENOMEM;
	}
	*out = &sb->base;
	return 0;
}

/* ---- public helpers ----------------------------------------------------------- */

void sim_params_default(struct sim_params *p)
{
	memset(p, 0, sizeof(*p));
	p->online_bytes = UINT64_C(2) << 30;
	p->standby_bytes = UINT64_C(2) << 30;
	p->block_size = UINT64_C(128) << 20;
	p->memmap_supported = true;
	p->has_firmware = true;
	p->auto_online = "offline";
}

static char *absolute(const char *path)
{
	char cwd[PATH_MAX];
	char *r;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&r, "%s/%s", cwd, path) < 0)
		return NULL;
	return r;
}

int sim_init(const char *state_path, const struct sim_params *p)
{
	_cleanup_state_ struct sim_state *s = NULL;
	_cleanup_close_ int lock = -1;
	_cleanup_free_ char *deftree = NULL;
	const char *ao = p->auto_online ? p->auto_online : "offline";
	uint64_t bs = p->block_size, n;
	int r;

	if (!valid_block_size(bs) || p->online_bytes == 0 || p->online_bytes % bs || p->standby_bytes % bs ||
	    p->online_bytes > UINT64_MAX - p->standby_bytes || !is_auto_online_word(ao))
		return -EINVAL;
	n = (p->online_bytes + p->standby_bytes) / bs;
	if (n > SIM_MAX_BLOCKS)
		return -E2BIG;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->block_size = bs;
	s->n_blocks = n;
	s->boot_blocks = p->online_bytes / bs;
	s->used_bytes = p->used_bytes;
	s->memmap_supported = p->memmap_supported;
	s->has_firmware = p->has_firmware;
	s->refuse_memmap_eopnotsupp = p->refuse_memmap_eopnotsupp;
	snprintf(s->auto_online, sizeof(s->auto_online), "%s", ao);
	if (!p->tree && asprintf(&deftree, "%s.tree", state_path) < 0)
		return -ENOMEM;
	s->tree = absolute(p->tree ? p->tree : deftree);
	if (!s->tree)
		return -ENOMEM;
	r = tree_safe(s->tree);
	if (r < 0)
		return r;
	s->blocks = calloc(n, sizeof(*s->blocks));
	if (!s->blocks)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		struct sim_block *b = &s->blocks[i];
		if (i < s->boot_blocks) { /* C2: boot memory */
			b->configured = true;
			b->memmap = false;
			b->state = MEM_STATE_ONLINE;
			b->zone = kernel_zone(s, i);
		} else {                  /* C2: standby; C0: no firmware, the kernel has it */
			b->configured = !p->has_firmware;
			b->memmap = p->memmap_supported && p->has_firmware;
			b->state = MEM_STATE_OFFLINE;
		}
	}
	r = mkdir_p(s->tree, 0755);
	if (r < 0)
		return r;
	lock = writer_lock(state_path);
	if (lock < 0)
		return lock;
	r = state_save(state_path, s);
	if (r < 0)
		return r;
	return tree_sync(NULL, s);
}

static int id_list_copy(struct id_list *l, const uint64_t *ids, size_t n)
{
	free(l->ids);
	l->ids = NULL;
	l->n = 0;
	if (n == 0)
		return 0;
	l->ids = malloc(n * sizeof(*ids));
	if (!l->ids)
		return -ENOMEM;
	memcpy(l->ids, ids, n * sizeof(*ids));
	l->n = n;
	return 0;
}

int sim_set_faults(const char *state_path, const struct sim_faults *f)
{
	_cleanup_state_ struct sim_state *s = NULL;
	_cleanup_close_ int lock = writer_lock(state_path);
	int r;

	if (lock < 0)
		return lock;
	r = state_load(state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	r = id_list_copy(&s->configure_eio, f->configure_eio, f->n_configure_eio);
	if (r == 0)
		r = id_list_copy(&s->offline_ebusy, f->offline_ebusy, f->n_offline_ebusy);
	if (r == 0)
		r = id_list_copy(&s->online_enomem, f->online_enomem, f->n_online_enomem);
	if (r < 0)
		return r;
	s->latency_ms = f->latency_ms;
	return state_save(state_path, s);
}

int sim_set_used(const char *state_path, uint64_t used_bytes)
{
	_cleanup_state_ struct sim_state *s = NULL;
	_cleanup_close_ int lock = writer_lock(state_path);
	int r;

	if (lock < 0)
		return lock;
	r = state_load(state_path, &s, NULL, 0);
	if (r < 0)
		return r;
	s->used_bytes = used_bytes;
	r = state_save(state_path, s);
	if (r == 0)
		r = write_meminfo(s);
	return r;
}

int sim_check_file(const char *state_path, char *err, size_t errlen)
{
	_cleanup_state_ struct sim_state *s = NULL;

	if (err && errlen)
		err[0] = '\0';
	return state_load(state_path, &s, err, errlen);
}

int sim_tree_path(const char *state_path, char **out)
{
	_cleanup_state_ struct sim_state *s = NULL;
	int r = state_load(state_path, &s, NULL, 0);

	if (r < 0)
		return r;
	*out = TAKE_PTR(s->tree);
	return 0;
}
