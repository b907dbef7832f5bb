/* SPDX-License-Identifier: MIT */
/*
 * The sim's state on disk (layout in sim_impl.h): the descriptor, the
 * records files, the summary, the writers' lock and its marker, and the
 * zone arithmetic that both the rules and the tree need.
 */
#include "hotplug/sim/sim.h"
#include "hotplug/sim/sim_impl.h"

#include "lib/json.h"
#include "lib/fileio.h"
#include "lib/util.h"
#include "hotplug/words.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

#define DMA_LIMIT (UINT64_C(2) << 30) /* D3 */

/* jansson.h provides json_decrefp(). */

const enum mem_zone sim_zones[SIM_NZONES] = { MEM_ZONE_DMA, MEM_ZONE_NORMAL, MEM_ZONE_MOVABLE };

/* One character each in a records line: config memmap state zone. */
static const char state_chars[] = { [MEM_STATE_OFFLINE] = '-', [MEM_STATE_ONLINE] = 'o',
				     [MEM_STATE_GOING_OFFLINE] = 'g' };
static const char zone_chars[] = { [MEM_ZONE_NONE] = '-', [MEM_ZONE_DMA] = 'D', [MEM_ZONE_NORMAL] = 'N',
				   [MEM_ZONE_MOVABLE] = 'M' };

void sim_settings_free(struct sim_settings *s)
{
	if (!s)
		return;
	closep(&s->dirfd);
	free(s->tree);
	free(s->dir);
	free(s->configure_eio.ids);
	free(s->offline_ebusy.ids);
	free(s->online_enomem.ids);
	free(s->v1_blocks);
	free(s);
}

bool sim_is_auto_online_word(const char *s)
{
	for (size_t i = 0; mem_auto_online_words[i]; i++)
		if (streq(s, mem_auto_online_words[i]))
			return true;
	return false;
}

bool sim_valid_block_size(uint64_t bs)
{
	return bs >= (UINT64_C(1) << 20) && (bs & (bs - 1)) == 0;
}

bool sim_id_in(const struct id_list *l, uint64_t id)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->ids[i] == id)
			return true;
	return false;
}

int sim_id_list_copy(struct id_list *l, const uint64_t *ids, size_t n)
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

char *sim_absolute(const char *path)
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

/* ---- descriptor -------------------------------------------------------------- */

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

/* Exactly as the kernel spells them, and only the sim's zones. */
static int zone_parse(const char *s, enum mem_zone *z)
{
	for (size_t i = 0; i < SIM_NZONES; i++)
		if (streq(s, words_zone_kernel_name(sim_zones[i]))) {
			*z = sim_zones[i];
			return 0;
		}
	return -EINVAL;
}

/* The consistency rules every block obeys, in either format. */
static int check_block(const struct sim_settings *s, const struct sim_block *b, const char *path,
		       uint64_t id, char *err, size_t errlen)
{
	if (b->state != MEM_STATE_OFFLINE && !b->configured)
		return fail(err, errlen, -EINVAL, path, "block %" PRIu64 ": %s but not configured", id,
			    mem_state_name(b->state));
	if (!s->has_firmware && !b->configured)
		return fail(err, errlen, -EINVAL, path,
			    "block %" PRIu64 ": deconfigured without firmware entries", id);
	return 0;
}

/* Format 1 kept every block in the descriptor: [config, memmap, "state", "zone"]. */
static int load_v1_blocks(json_t *blocks, struct sim_settings *s, const char *path, char *err,
			  size_t errlen)
{
	json_t *jb;
	size_t i;

	s->v1_blocks = calloc(s->n_blocks ? s->n_blocks : 1, sizeof(*s->v1_blocks));
	if (!s->v1_blocks)
		return -ENOMEM;
	json_array_foreach(blocks, i, jb) {
		struct sim_block *b = &s->v1_blocks[i];
		const char *st, *zn;
		enum mem_state state;

		if (!json_is_array(jb) || json_array_size(jb) != 4 || !json_is_boolean(json_array_get(jb, 0)) ||
		    !json_is_boolean(json_array_get(jb, 1)) || !json_is_string(json_array_get(jb, 2)) ||
		    !json_is_string(json_array_get(jb, 3)))
			return fail(err, errlen, -EINVAL, path,
				    "block %zu: must be [config, memmap, \"state\", \"zone\"]", i);
		b->configured = json_is_true(json_array_get(jb, 0));
		b->memmap = json_is_true(json_array_get(jb, 1));
		st = json_string_value(json_array_get(jb, 2));
		zn = json_string_value(json_array_get(jb, 3));
		if (mem_state_parse(st, &state) < 0)
			return fail(err, errlen, -EINVAL, path, "block %zu: unknown state \"%s\"", i, st);
		b->state = (uint8_t)state;
		if (b->state == MEM_STATE_OFFLINE) {
			if (zn[0])
				return fail(err, errlen, -EINVAL, path, "block %zu: offline block with zone \"%s\"", i, zn);
			b->zone = MEM_ZONE_NONE;
		} else if (b->configured) {
			enum mem_zone z;

			if (zone_parse(zn, &z) < 0)
				return fail(err, errlen, -EINVAL, path, "block %zu: unknown zone \"%s\"", i, zn);
			b->zone = (uint8_t)z;
		}
		if (check_block(s, b, path, i, err, errlen) < 0)
			return -EINVAL;
	}
	return 0;
}

int sim_settings_parse(const char *text, size_t len, const char *path, struct sim_settings **out,
		       char *err, size_t errlen)
{
	_cleanup_json_ json_t *root = NULL;
	_cleanup_settings_ struct sim_settings *s = NULL;
	json_error_t jerr;
	json_t *blocks = NULL, *faults, *v;
	uint64_t format;
	int r;

	if (len > SIM_MAX_FILE)
		return fail(err, errlen, -EFBIG, path, "cannot read sim state: %s", strerror(EFBIG));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return fail(err, errlen, -EBADMSG, path, "line %d column %d: %s (corrupt or truncated sim state)",
			    jerr.line, jerr.column, jerr.text);
	if (!json_is_object(root))
		return fail(err, errlen, -EINVAL, path, "sim state is not a JSON object");
	if (get_u64(root, "format", &format) < 0 || (format != 1 && format != SIM_FORMAT))
		return fail(err, errlen, -EINVAL, path, "\"format\" must be %d (or 1, converted on open)",
			    SIM_FORMAT);

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dirfd = -1;
	s->dir_err = -ENOENT;
	if (get_u64(root, "block_size", &s->block_size) < 0 || !sim_valid_block_size(s->block_size))
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
	if (!json_is_string(v) || !sim_is_auto_online_word(json_string_value(v)))
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

	if (format == 1) {
		blocks = json_object_get(root, "blocks");
		if (!json_is_array(blocks) || json_array_size(blocks) < s->boot_blocks ||
		    json_array_size(blocks) > SIM_MAX_BLOCKS)
			return fail(err, errlen, -EINVAL, path,
				    "\"blocks\" must be an array of %" PRIu64 " to %u entries", s->boot_blocks,
				    SIM_MAX_BLOCKS);
		s->n_blocks = json_array_size(blocks);
	} else {
		if (get_u64(root, "n_blocks", &s->n_blocks) < 0 || s->n_blocks < s->boot_blocks ||
		    s->n_blocks > SIM_MAX_BLOCKS)
			return fail(err, errlen, -EINVAL, path,
				    "\"n_blocks\" must be an integer from %" PRIu64 " to %u", s->boot_blocks,
				    SIM_MAX_BLOCKS);
		v = json_object_get(root, "state_dir");
		if (!json_is_string(v) || json_string_value(v)[0] != '/')
			return fail(err, errlen, -EINVAL, path, "\"state_dir\" must be an absolute path");
		s->dir = strdup(json_string_value(v));
		if (!s->dir)
			return -ENOMEM;
	}
	if (s->n_blocks > UINT64_MAX / s->block_size)
		return fail(err, errlen, -EINVAL, path, "memory size overflows 64 bits");
	if (format == 1) {
		r = load_v1_blocks(blocks, s, path, err, errlen);
		if (r < 0)
			return r;
	}
	*out = TAKE_PTR(s);
	return 0;
}

int sim_settings_load(const struct sim_fs *fs, struct sim_settings **out, char *err, size_t errlen)
{
	_cleanup_settings_ struct sim_settings *s = NULL;
	_cleanup_free_ char *text = NULL, *path = NULL, *comp = NULL;
	size_t len;
	int r;

	if (asprintf(&path, "%s/%s", streq(fs->top_path, "/") ? "" : fs->top_path, fs->name) < 0)
		return -ENOMEM;
	r = sim_fs_read_desc(fs, SIM_MAX_FILE, &text, &len);
	if (r < 0)
		return fail(err, errlen, r, path, "cannot read sim state: %s", strerror(-r));
	r = sim_settings_parse(text, len, path, &s, err, errlen);
	if (r < 0)
		return r;
	s->fs = fs;
	/* the tree is the one opened at the start, whatever the file says now */
	free(s->tree);
	s->tree = strdup(fs->tree_path);
	if (!s->tree)
		return -ENOMEM;
	if (s->dir) {
		comp = strdup(strrchr(s->dir, '/') + 1); /* absolute: there is a slash */
		if (!comp)
			return -ENOMEM;
		free(s->dir);
		s->dir = NULL;
		r = sim_fs_state_dir(fs, comp, false, &s->dir, &s->dirfd);
		if (r == -EINVAL)
			return fail(err, errlen, r, path, "\"state_dir\" must name a folder s.XXXXXX in %s.d", fs->name);
		if (r < 0) {
			s->dir_err = r;
			if (asprintf(&s->dir, "%s.d/%s", path, comp) < 0)
				return -ENOMEM;
		}
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

char *sim_settings_format(const struct sim_settings *s)
{
	_cleanup_json_ json_t *root = NULL;
	json_t *faults;

	faults = json_pack("{s:o,s:o,s:o,s:I}", "configure_eio", ids_json(&s->configure_eio),
			   "offline_ebusy", ids_json(&s->offline_ebusy),
			   "online_enomem", ids_json(&s->online_enomem),
			   "latency_ms", (json_int_t)s->latency_ms);
	if (!faults)
		return NULL;
	root = json_pack("{s:i,s:I,s:I,s:I,s:I,s:b,s:b,s:b,s:s,s:s,s:s,s:o}", "format", SIM_FORMAT,
			 "block_size", (json_int_t)s->block_size, "n_blocks", (json_int_t)s->n_blocks,
			 "boot_blocks", (json_int_t)s->boot_blocks, "used_bytes", (json_int_t)s->used_bytes,
			 "memmap_supported", s->memmap_supported, "has_firmware", s->has_firmware,
			 "refuse_memmap_eopnotsupp", s->refuse_memmap_eopnotsupp, "auto_online", s->auto_online,
			 "tree", s->tree, "state_dir", s->dir, "faults", faults);
	if (!root)
		return NULL;
	return json_dumps(root, JSON_INDENT(1) | JSON_COMPACT | JSON_PRESERVE_ORDER);
}

int sim_settings_save(const struct sim_settings *s)
{
	_cleanup_free_ char *text = sim_settings_format(s);

	if (!text)
		return -ENOMEM;
	return sim_put_at(s->fs->top, s->fs->name, text, strlen(text));
}

/* ---- records ------------------------------------------------------------------ */

static void chunk_path(const struct sim_settings *s, uint64_t k, char *buf, size_t len)
{
	snprintf(buf, len, "%s/blocks.%" PRIu64, s->dir, k);
}

/* Opens NAME in the state directory for reading: fd or -errno. */
static int state_open(const struct sim_settings *s, const char *name)
{
	if (s->dirfd < 0)
		return s->dir_err;
	return sim_openat(s->dirfd, name, O_RDONLY, 0);
}

static int state_put(const struct sim_settings *s, const char *name, const char *data, size_t len)
{
	if (s->dirfd < 0)
		return s->dir_err;
	return sim_put_at(s->dirfd, name, data, len);
}

static uint64_t chunk_count(const struct sim_settings *s, uint64_t k)
{
	uint64_t first = k * SIM_CHUNK;

	return s->n_blocks - first < SIM_CHUNK ? s->n_blocks - first : SIM_CHUNK;
}

static int char_index(const char *table, size_t n, char c)
{
	for (size_t i = 0; i < n; i++)
		if (table[i] == c && c)
			return (int)i;
	return -1;
}

static size_t chunk_head(const struct sim_settings *s, uint64_t k, char *buf, size_t len)
{
	uint64_t first = k * SIM_CHUNK;

	return (size_t)snprintf(buf, len, "# blocks %" PRIu64 "-%" PRIu64 ": config memmap state zone\n", first,
				first + chunk_count(s, k) - 1);
}

/* One record (its 5 bytes at P) of block ID into B, checked. */
static int parse_record(const struct sim_settings *s, const char *p, uint64_t id, struct sim_block *b,
			const char *path, char *err, size_t errlen)
{
	int st = char_index(state_chars, ARRAY_SIZE(state_chars), p[2]);
	int zn = char_index(zone_chars, ARRAY_SIZE(zone_chars), p[3]);

	if ((p[0] != '0' && p[0] != '1') || (p[1] != '0' && p[1] != '1') || p[4] != '\n')
		return fail(err, errlen, -EINVAL, path,
			    "block %" PRIu64 ": must be 4 characters: config and memmap 0 or 1, "
			    "state - o g, zone - D N M", id);
	if (st < 0)
		return fail(err, errlen, -EINVAL, path, "block %" PRIu64 ": unknown state '%c'", id, p[2]);
	if (zn < 0)
		return fail(err, errlen, -EINVAL, path, "block %" PRIu64 ": unknown zone '%c'", id, p[3]);
	b->configured = p[0] == '1';
	b->memmap = p[1] == '1';
	b->state = (enum mem_state)st;
	b->zone = (enum mem_zone)zn;
	if ((b->state == MEM_STATE_OFFLINE) != (b->zone == MEM_ZONE_NONE))
		return fail(err, errlen, -EINVAL, path, "block %" PRIu64 ": %s block with zone '%c'", id,
			    mem_state_name(b->state), p[3]);
	if (check_block(s, b, path, id, err, errlen) < 0)
		return -EINVAL;
	return 0;
}

/* The header and the length of chunk K's file (BUF, GOT bytes): 0 and
 * *HLEN, or -EINVAL with ERR. */
static int chunk_check(const struct sim_settings *s, uint64_t k, const char *buf, size_t got, const char *path,
		       size_t *hlen, char *err, size_t errlen)
{
	char head[96];
	uint64_t n;

	if (k >= sim_n_chunks(s))
		return fail(err, errlen, -EINVAL, path, "no chunk %" PRIu64 " in %" PRIu64 " blocks", k, s->n_blocks);
	n = chunk_count(s, k);
	*hlen = chunk_head(s, k, head, sizeof(head));
	if (got < *hlen || memcmp(buf, head, *hlen) != 0)
		return fail(err, errlen, -EINVAL, path, "must start with \"%.*s\"", (int)*hlen - 1, head);
	if (got != *hlen + (size_t)n * 5)
		return fail(err, errlen, -EINVAL, path, "must hold %" PRIu64 " lines of 4 characters", n);
	return 0;
}

int sim_chunk_parse(const struct sim_settings *s, uint64_t k, const char *buf, size_t got,
		    const char *path, struct sim_block *out, char *err, size_t errlen)
{
	uint64_t first = k * SIM_CHUNK;
	size_t hlen;
	int r = chunk_check(s, k, buf, got, path, &hlen, err, errlen);

	if (r < 0)
		return r;
	for (uint64_t i = 0; i < chunk_count(s, k); i++) {
		r = parse_record(s, buf + hlen + i * 5, first + i, &out[i], path, err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Chunk K's records file: its bytes into BUF, the length into *GOT. */
static int chunk_read(const struct sim_settings *s, uint64_t k, char *path, size_t pathlen,
		      char buf[static SIM_CHUNK_FILE_MAX], size_t *got, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	chunk_path(s, k, path, pathlen);
	fd = state_open(s, strrchr(path, '/') + 1);
	if (fd < 0)
		return fail(err, errlen, fd, path, "cannot read sim records: %s", strerror(-fd));
	n = read(fd, buf, SIM_CHUNK_FILE_MAX);
	if (n < 0)
		return fail(err, errlen, -errno, path, "cannot read sim records: %s", strerror(errno));
	*got = (size_t)n;
	return 0;
}

int sim_block_load(const struct sim_settings *s, uint64_t id, struct sim_block *out, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[SIM_CHUNK_FILE_MAX];
	size_t got, hlen;
	uint64_t k = id / SIM_CHUNK;
	int r;

	if (id >= s->n_blocks)
		return fail(err, errlen, -EINVAL, "", "no block %" PRIu64 " in %" PRIu64 " blocks", id, s->n_blocks);
	r = chunk_read(s, k, path, sizeof(path), buf, &got, err, errlen);
	if (r == 0)
		r = chunk_check(s, k, buf, got, path, &hlen, err, errlen);
	if (r == 0)
		r = parse_record(s, buf + hlen + (id % SIM_CHUNK) * 5, id, out, path, err, errlen);
	return r;
}

int sim_chunk_load(const struct sim_settings *s, uint64_t k, struct sim_block *out, char *err,
		   size_t errlen)
{
	char path[PATH_MAX], buf[SIM_CHUNK_FILE_MAX];
	size_t got;
	int r = chunk_read(s, k, path, sizeof(path), buf, &got, err, errlen);

	return r < 0 ? r : sim_chunk_parse(s, k, buf, got, path, out, err, errlen);
}

size_t sim_chunk_format(const struct sim_settings *s, uint64_t k, const struct sim_block *blocks,
			char buf[static SIM_CHUNK_FILE_MAX])
{
	uint64_t n = chunk_count(s, k);
	size_t len;

	len = chunk_head(s, k, buf, SIM_CHUNK_FILE_MAX);
	for (uint64_t i = 0; i < n; i++) {
		const struct sim_block *b = &blocks[i];
		char *p = buf + len;

		p[0] = b->configured ? '1' : '0';
		p[1] = b->memmap ? '1' : '0';
		p[2] = state_chars[b->state];
		p[3] = b->state == MEM_STATE_OFFLINE ? '-' : zone_chars[b->zone];
		p[4] = '\n';
		len += 5;
	}
	return len;
}

int sim_chunk_save(const struct sim_settings *s, uint64_t k, const struct sim_block *blocks)
{
	char path[PATH_MAX], buf[SIM_CHUNK_FILE_MAX];
	size_t len = sim_chunk_format(s, k, blocks, buf);

	chunk_path(s, k, path, sizeof(path));
	return state_put(s, strrchr(path, '/') + 1, buf, len);
}

int sim_records_load(const struct sim_settings *s, struct sim_block **out, char *err, size_t errlen)
{
	_cleanup_free_ struct sim_block *all = NULL;
	int r;

	all = calloc(s->n_blocks ? s->n_blocks : 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	if (s->v1_blocks) {
		memcpy(all, s->v1_blocks, s->n_blocks * sizeof(*all));
	} else {
		for (uint64_t k = 0; k < sim_n_chunks(s); k++) {
			r = sim_chunk_load(s, k, all + k * SIM_CHUNK, err, errlen);
			if (r < 0)
				return r;
		}
	}
	*out = TAKE_PTR(all);
	return 0;
}

/* ---- summary -------------------------------------------------------------------- */

void sim_spans_empty(struct sim_spans *sp)
{
	for (int z = 0; z < MEM_ZONE_COUNT; z++) {
		sp->lo[z] = UINT64_MAX;
		sp->hi[z] = 0;
	}
}

void sim_summary_count(struct sim_summary *sum, const struct sim_block *b, int sign)
{
	uint64_t d = (uint64_t)(int64_t)sign;

	if (b->configured && !b->memmap)
		sum->conf_nomm += d;
	if (b->state != MEM_STATE_OFFLINE) {
		if (b->memmap)
			sum->online_mm += d;
		else
			sum->online_nomm += d;
	}
}

void sim_summary_compute(const struct sim_block *all, uint64_t n, struct sim_summary *out)
{
	memset(out, 0, sizeof(*out));
	sim_spans_empty(&out->sp);
	for (uint64_t i = 0; i < n; i++) {
		const struct sim_block *b = &all[i];

		sim_summary_count(out, b, 1);
		if (b->state == MEM_STATE_OFFLINE || b->zone == MEM_ZONE_NONE)
			continue;
		if (i < out->sp.lo[b->zone])
			out->sp.lo[b->zone] = i;
		if (i + 1 > out->sp.hi[b->zone])
			out->sp.hi[b->zone] = i + 1;
	}
}

int sim_summary_parse(const struct sim_settings *s, const char *text, size_t len, struct sim_summary *out)
{
	char buf[SIM_SUMMARY_MAX + 1], *p, *end;
	uint64_t v[11];

	if (len > SIM_SUMMARY_MAX)
		len = SIM_SUMMARY_MAX;
	memcpy(buf, text, len);
	buf[len] = '\0';
	p = buf;
	for (size_t i = 0; i < ARRAY_SIZE(v); i++) {
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (end == p || errno)
			return -EINVAL;
		p = end;
	}
	sim_spans_empty(&out->sp);
	for (size_t i = 0; i < SIM_NZONES; i++) {
		out->sp.lo[sim_zones[i]] = v[i * 2];
		out->sp.hi[sim_zones[i]] = v[i * 2 + 1];
	}
	out->online_mm = v[6];
	out->online_nomm = v[7];
	out->conf_nomm = v[8];
	return v[9] == s->n_blocks && v[10] == 0 ? 0 : -EINVAL;
}

int sim_summary_load(const struct sim_settings *s, struct sim_summary *out)
{
	char buf[SIM_SUMMARY_MAX];
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = state_open(s, "summary");
	if (fd < 0)
		return fd;
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		return -errno;
	return sim_summary_parse(s, buf, (size_t)n, out);
}

size_t sim_summary_format(const struct sim_settings *s, const struct sim_summary *sum,
			  char buf[static SIM_SUMMARY_MAX + 1])
{
	return (size_t)snprintf(buf, SIM_SUMMARY_MAX + 1,
		       "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		       " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " 0\n"
		       "# spans DMA Normal Movable [lo hi), online memmap-in, online memmap-out, "
		       "configured memmap-out, blocks, 0\n",
		       sum->sp.lo[MEM_ZONE_DMA], sum->sp.hi[MEM_ZONE_DMA], sum->sp.lo[MEM_ZONE_NORMAL], sum->sp.hi[MEM_ZONE_NORMAL],
		       sum->sp.lo[MEM_ZONE_MOVABLE], sum->sp.hi[MEM_ZONE_MOVABLE], sum->online_mm, sum->online_nomm,
		       sum->conf_nomm, s->n_blocks);
}

int sim_summary_save(const struct sim_settings *s, const struct sim_summary *sum)
{
	char buf[SIM_SUMMARY_MAX + 1];
	size_t len = sim_summary_format(s, sum, buf);

	return state_put(s, "summary", buf, len);
}

static int cmp_range(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

size_t sim_spans_diff(const struct sim_spans *a, const struct sim_spans *b, uint64_t r[][2])
{
	size_t n = 0, m = 0;

	for (size_t i = 0; i < SIM_NZONES; i++) {
		enum mem_zone z = sim_zones[i];
		bool ea = a->lo[z] >= a->hi[z], eb = b->lo[z] >= b->hi[z];

		if (ea && eb)
			continue;
		if (ea || eb) { /* one side empty: all of the other */
			r[n][0] = ea ? b->lo[z] : a->lo[z];
			r[n][1] = ea ? b->hi[z] : a->hi[z];
			n++;
			continue;
		}
		if (a->lo[z] != b->lo[z]) {
			r[n][0] = a->lo[z] < b->lo[z] ? a->lo[z] : b->lo[z];
			r[n][1] = a->lo[z] < b->lo[z] ? b->lo[z] : a->lo[z];
			n++;
		}
		if (a->hi[z] != b->hi[z]) {
			r[n][0] = a->hi[z] < b->hi[z] ? a->hi[z] : b->hi[z];
			r[n][1] = a->hi[z] < b->hi[z] ? b->hi[z] : a->hi[z];
			n++;
		}
	}
	if (n == 0)
		return 0;
	qsort(r, n, sizeof(r[0]), cmp_range);
	for (size_t i = 1; i < n; i++) {
		if (r[i][0] <= r[m][1]) {
			if (r[i][1] > r[m][1])
				r[m][1] = r[i][1];
		} else {
			m++;
			r[m][0] = r[i][0];
			r[m][1] = r[i][1];
		}
	}
	return m + 1;
}

/* ---- zones (A9, W5, D3) ----------------------------------------------------------- */

enum mem_zone sim_kernel_zone(const struct sim_settings *s, uint64_t id)
{
	return id * s->block_size < DMA_LIMIT ? MEM_ZONE_DMA : MEM_ZONE_NORMAL;
}

enum mem_zone sim_zone_for(const struct sim_settings *s, const struct sim_spans *sp, uint64_t id,
		       enum online_type t)
{
	enum mem_zone kz = sim_kernel_zone(s, id);
	bool in_kernel, in_movable;

	if (t == ONLINE_KERNEL)
		return kz;
	if (t == ONLINE_MOVABLE)
		return MEM_ZONE_MOVABLE;
	/* contig-zones: inherit the zone whose span the block is in, when only one is. */
	in_kernel = id >= sp->lo[kz] && id < sp->hi[kz];
	in_movable = id >= sp->lo[MEM_ZONE_MOVABLE] && id < sp->hi[MEM_ZONE_MOVABLE];
	if (in_kernel != in_movable)
		return in_kernel ? kz : MEM_ZONE_MOVABLE;
	return kz;
}

void sim_valid_zones(const struct sim_settings *s, const struct sim_spans *sp, uint64_t id,
		     const struct sim_block *b, char *buf, size_t len)
{
	enum mem_zone def, kz;

	if (b->state != MEM_STATE_OFFLINE) {
		snprintf(buf, len, "%s", words_zone_kernel_name(b->zone));
		return;
	}
	def = sim_zone_for(s, sp, id, ONLINE_DEFAULT);
	kz = sim_kernel_zone(s, id);
	snprintf(buf, len, "%s %s", words_zone_kernel_name(def),
		 words_zone_kernel_name(def == MEM_ZONE_MOVABLE ? kz : MEM_ZONE_MOVABLE));
}

uint64_t sim_mem_total(const struct sim_settings *s, const struct sim_summary *sum)
{
	uint64_t bs = s->block_size, memmap = bs / 64; /* C8, P6 */
	uint64_t total = sum->online_mm * (bs - memmap) + sum->online_nomm * bs;
	uint64_t taken = sum->conf_nomm * memmap;

	return total > taken ? total - taken : 0;
}

/* ---- lock and marker ------------------------------------------------------------------ */

int sim_lock_open(const struct sim_fs *fs)
{
	return sim_fs_lock_open(fs, true);
}

/* W4: a writer waits for the one lock; the wait is restarted after signals. */
int sim_lock(int fd)
{
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

void sim_unlock(int fd)
{
	flock(fd, LOCK_UN);
}

/* "clean" or "dirty full|ID|- lo hi lo hi lo hi", one fixed-size pwrite:
 * only writers holding the lock read or write it.  Anything else that is
 * not "clean" reads as "dirty full": unreadable, assume the worst. */
void sim_marker_parse(const char *text, size_t len, struct sim_marker *m)
{
	char buf[SIM_MARKER_LEN + 1], id[32], *end;
	unsigned long long v[6];

	memset(m, 0, sizeof(*m));
	if (len > SIM_MARKER_LEN)
		len = SIM_MARKER_LEN;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (len == 0 || startswith(buf, "clean"))
		return;
	m->dirty = true;
	if (sscanf(buf, "dirty %31s %llu %llu %llu %llu %llu %llu", id, &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5]) != 7 || streq(id, "full")) {
		m->full = true;
		return;
	}
	if (!streq(id, "-")) {
		errno = 0;
		m->id = strtoull(id, &end, 10);
		if (!isdigit((unsigned char)id[0]) || *end || errno) {
			m->id = 0;
			m->full = true; /* an id that is no block id */
			return;
		}
		m->has_id = true;
	}
	sim_spans_empty(&m->sp);
	for (size_t i = 0; i < SIM_NZONES; i++) {
		m->sp.lo[sim_zones[i]] = v[i * 2];
		m->sp.hi[sim_zones[i]] = v[i * 2 + 1];
	}
}

int sim_marker_read(int fd, struct sim_marker *m)
{
	char buf[SIM_MARKER_LEN];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);

	if (n < 0) {
		memset(m, 0, sizeof(*m));
		return -errno;
	}
	sim_marker_parse(buf, (size_t)n, m);
	return 0;
}

void sim_marker_format(const struct sim_marker *m, char buf[static SIM_MARKER_LEN])
{
	char id[32];
	int len;

	memset(buf, ' ', SIM_MARKER_LEN);
	if (!m->dirty) {
		len = snprintf(buf, SIM_MARKER_LEN, "clean");
	} else {
		if (m->full)
			snprintf(id, sizeof(id), "full");
		else if (m->has_id)
			snprintf(id, sizeof(id), "%" PRIu64, m->id);
		else
			snprintf(id, sizeof(id), "-");
		len = snprintf(buf, SIM_MARKER_LEN, "dirty %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			       " %" PRIu64, id, m->sp.lo[MEM_ZONE_DMA], m->sp.hi[MEM_ZONE_DMA], m->sp.lo[MEM_ZONE_NORMAL],
			       m->sp.hi[MEM_ZONE_NORMAL], m->sp.lo[MEM_ZONE_MOVABLE], m->sp.hi[MEM_ZONE_MOVABLE]);
	}
	buf[len] = ' ';
	buf[SIM_MARKER_LEN - 1] = '\n';
}

int sim_marker_write(int fd, const struct sim_marker *m)
{
	char buf[SIM_MARKER_LEN];

	sim_marker_format(m, buf);
	if (pwrite(fd, buf, SIM_MARKER_LEN, 0) != SIM_MARKER_LEN)
		return errno ? -errno : -EIO;
	return 0;
}

bool sim_writer_active(const struct sim_fs *fs)
{
	bool active;
	int fd = sim_fs_lock_open(fs, false);

	if (fd < 0)
		return false;
	active = flock(fd, LOCK_SH | LOCK_NB) < 0;
	close(fd); /* drops the shared lock, if taken */
	return active;
}
