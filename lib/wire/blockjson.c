/* SPDX-License-Identifier: MIT */
#include "lib/wire/blockjson.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/json.h"
#include "lib/util.h"

/* Sets KEY to V (stolen); -ENOMEM when V is NULL or the set fails. */
static int set_new(json_t *o, const char *key, json_t *v)
{
	if (!v || json_object_set_new(o, key, v) != 0)
		return -ENOMEM;
	return 0;
}

static json_t *tri_bool(int v)
{
	return v < 0 ? json_null() : json_boolean(v);
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

int blockjson_from_block(const struct mem_table *t, const struct mem_block *b, json_t **out)
{
	_cleanup_json_ json_t *o = json_object();

	if (!o)
		return -ENOMEM;
	/* ids and addresses fit json_int_t (int64) on every real machine:
	 * s390 addresses are far below 2^63 */
	if (set_new(o, "id", json_integer((json_int_t)b->id)) < 0 ||
	    set_new(o, "start", json_integer((json_int_t)mem_block_start(t, b))) < 0 ||
	    set_new(o, "in_firmware", json_boolean(b->in_firmware)) < 0 ||
	    set_new(o, "configured", json_boolean(b->configured)) < 0 ||
	    set_new(o, "memmap_on_memory", tri_bool(b->memmap_on_memory)) < 0 ||
	    set_new(o, "state", json_string(mem_state_name(b->state))) < 0 ||
	    set_new(o, "removable", tri_bool(b->removable)) < 0 ||
	    set_new(o, "node", b->node < 0 ? json_null() : json_integer(b->node)) < 0 ||
	    set_new(o, "zones", json_string(MEM_ZONES_TEXT(b->zones))) < 0)
		return -ENOMEM;
	*out = TAKE_PTR(o);
	return 0;
}

int blockjson_from_table(const struct mem_table *t, json_t **out)
{
	_cleanup_json_ json_t *o = json_object();
	json_t *arr;

	if (!o)
		return -ENOMEM;
	if (set_new(o, "block_size", json_integer((json_int_t)t->block_size)) < 0 ||
	    set_new(o, "has_firmware", json_boolean(t->has_firmware)) < 0 ||
	    set_new(o, "auto_online_blocks", str_or_null(t->auto_online)) < 0 ||
	    set_new(o, "memmap_on_memory_param", str_or_null(t->memmap_param)) < 0 ||
	    set_new(o, "blocks", json_array()) < 0)
		return -ENOMEM;
	arr = json_object_get(o, "blocks");
	for (size_t i = 0; i < t->n; i++) {
		json_t *b = NULL;
		int r = blockjson_from_block(t, &t->blocks[i], &b);

		if (r < 0)
			return r;
		if (json_array_append_new(arr, b) != 0)
			return -ENOMEM;
	}
	*out = TAKE_PTR(o);
	return 0;
}

/* --- parsing --------------------------------------------------------------- */

struct ctx {
	char *err;
	size_t errlen;
	const char *where; /* "blocks[3]" or "" */
};

static int bad(const struct ctx *c, const char *key, const char *what)
{
	errbuf_set(c->err, c->errlen, 0, "%s%s%s: %s", c->where, *c->where ? "." : "", key, what);
	return -EINVAL;
}

static int get_u64(const struct ctx *c, const json_t *o, const char *key, bool required,
		   uint64_t *out, bool *present)
{
	json_t *v = json_object_get(o, key);

	if (present)
		*present = v != NULL;
	if (!v) {
		if (required)
			return bad(c, key, "missing");
		return 0;
	}
	if (!json_is_integer(v))
		return bad(c, key, "expected an integer");
	if (json_integer_value(v) < 0)
		return bad(c, key, "must not be negative");
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_bool(const struct ctx *c, const json_t *o, const char *key, bool *out)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return bad(c, key, "missing");
	if (!json_is_boolean(v))
		return bad(c, key, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

/* true/false/null (or absent) into 1/0/-1 */
static int get_tri(const struct ctx *c, const json_t *o, const char *key, int8_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		*out = -1;
		return 0;
	}
	if (!json_is_boolean(v))
		return bad(c, key, "expected true, false or null");
	*out = json_is_true(v);
	return 0;
}

/* String (or null/absent as "") into a fixed buffer. */
static int get_str(const struct ctx *c, const json_t *o, const char *key, char *buf, size_t len)
{
	json_t *v = json_object_get(o, key);
	const char *s;

	if (!v || json_is_null(v)) {
		buf[0] = '\0';
		return 0;
	}
	if (!json_is_string(v))
		return bad(c, key, "expected a string or null");
	s = json_string_value(v);
	if (json_string_length(v) != strlen(s))
		return bad(c, key, "contains a NUL byte");
	if (strlen(s) >= len) {
		char what[64];
		snprintf(what, sizeof(what), "longer than %zu characters", len - 1);
		return bad(c, key, what);
	}
	memcpy(buf, s, strlen(s) + 1);
	return 0;
}

static int parse_block(const struct ctx *c, const json_t *j, uint64_t block_size, struct mem_block *b)
{
	uint64_t start = 0, id = 0;
	bool has_start;
	char state[24], zones[48];
	json_t *node;
	int r;

	if (!json_is_object(j)) {
		errbuf_set(c->err, c->errlen, 0, "%s: expected an object", *c->where ? c->where : "block");
		return -EINVAL;
	}
	memset(b, 0, sizeof(*b));
	if ((r = get_u64(c, j, "id", true, &id, NULL)) < 0 ||
	    (r = get_u64(c, j, "start", false, &start, &has_start)) < 0 ||
	    (r = get_bool(c, j, "in_firmware", &b->in_firmware)) < 0 ||
	    (r = get_bool(c, j, "configured", &b->configured)) < 0 ||
	    (r = get_tri(c, j, "memmap_on_memory", &b->memmap_on_memory)) < 0 ||
	    (r = get_tri(c, j, "removable", &b->removable)) < 0 ||
	    (r = get_str(c, j, "zones", zones, sizeof(zones))) < 0)
		return r;
	b->zones = mem_zones_parse(zones);
	if (block_size && id > (uint64_t)INT64_MAX / block_size) /* "start" is a JSON integer: int64 */
		return bad(c, "id", "too large for the block size");
	if (id > MEM_BLOCK_ID_MAX)
		return bad(c, "id", "larger than a block id (the kernel's 32-bit device id)");
	b->id = (uint32_t)id;
	if (has_start && block_size && start != id * block_size)
		return bad(c, "start", "does not match id * block_size");
	if (!b->in_firmware && !b->configured)
		return bad(c, "configured", "a block without firmware entry must be configured");

	if ((r = get_str(c, j, "state", state, sizeof(state))) < 0)
		return r;
	if (!json_object_get(j, "state"))
		return bad(c, "state", "missing");
	if (streq(state, "unknown"))
		b->state = MEM_STATE_UNKNOWN;
	else if (mem_state_parse(state, &b->state) < 0)
		return bad(c, "state", "expected online, offline, going-offline or unknown");
	if (!b->configured && b->state != MEM_STATE_OFFLINE)
		return bad(c, "state", "a deconfigured block can only be offline (C14)");

	node = json_object_get(j, "node");
	if (!node || json_is_null(node)) {
		b->node = -1;
	} else if (!json_is_integer(node) || json_integer_value(node) < 0 ||
		   json_integer_value(node) > MEM_NODE_MAX) {
		return bad(c, "node", "expected an integer 0-32767 or null");
	} else {
		b->node = (int16_t)json_integer_value(node);
	}
	return 0;
}

int blockjson_to_block(const json_t *j, uint64_t block_size, struct mem_block *out,
		       char *err, size_t errlen)
{
	struct ctx c = { .err = err, .errlen = errlen, .where = "" };

	return parse_block(&c, j, block_size, out);
}

int blockjson_to_table(const json_t *j, struct mem_table **out, char *err, size_t errlen)
{
	struct ctx c = { .err = err, .errlen = errlen, .where = "" };
	_cleanup_mem_table_ struct mem_table *t = NULL;
	uint64_t block_size = 0;
	bool has_fw = false;
	json_t *arr;
	int r;

	if (!json_is_object(j)) {
		errbuf_set(err, errlen, 0, "expected a JSON object");
		return -EINVAL;
	}
	if ((r = get_u64(&c, j, "block_size", true, &block_size, NULL)) < 0 ||
	    (r = get_bool(&c, j, "has_firmware", &has_fw)) < 0)
		return r;
	if (block_size == 0 || (block_size & (block_size - 1)) != 0)
		return bad(&c, "block_size", "must be a power of two (A1)");
	t = mem_table_new(block_size);
	if (!t)
		return -ENOMEM;
	t->has_firmware = has_fw;
	if ((r = get_str(&c, j, "auto_online_blocks", t->auto_online, sizeof(t->auto_online))) < 0 ||
	    (r = get_str(&c, j, "memmap_on_memory_param", t->memmap_param, sizeof(t->memmap_param))) < 0)
		return r;

	arr = json_object_get(j, "blocks");
	if (!arr)
		return bad(&c, "blocks", "missing");
	if (!json_is_array(arr))
		return bad(&c, "blocks", "expected an array");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		char where[32];
		struct ctx bc = { .err = err, .errlen = errlen, .where = where };
		struct mem_block tmp, *b;

		snprintf(where, sizeof(where), "blocks[%zu]", i);
		uint64_t count = 1;

		r = parse_block(&bc, json_array_get(arr, i), block_size, &tmp);
		if (r < 0)
			return r;
		if (tmp.in_firmware && !has_fw)
			return bad(&bc, "in_firmware", "true but the table has no firmware (C0)");
		/* a run: COUNT blocks from ID on with the same values */
		if (json_object_get(json_array_get(arr, i), "count") &&
		    (r = get_u64(&bc, json_array_get(arr, i), "count", false, &count, NULL)) < 0)
			return r;
		if (count == 0 || count > BLOCKJSON_MAX_BLOCKS || t->n + count > BLOCKJSON_MAX_BLOCKS)
			return bad(&bc, "count", "expected 1 or more, at most 2^24 blocks in the whole table");
		if (tmp.id + count - 1 < tmp.id || (tmp.id + count - 1) > (uint64_t)INT64_MAX / block_size)
			return bad(&bc, "count", "the run goes past the end of the address space");
		if (tmp.id + count - 1 > MEM_BLOCK_ID_MAX)
			return bad(&bc, "count", "the run goes past the last block id (the kernel's 32-bit device id)");
		for (uint64_t k = 0; k < count; k++) {
			b = mem_table_add(t, tmp.id + k);
			if (!b)
				return -ENOMEM;
			*b = tmp;
			b->id = (uint32_t)(tmp.id + k);
		}
	}
	mem_table_sort(t);
	for (size_t i = 1; i < t->n; i++)
		if (t->blocks[i].id == t->blocks[i - 1].id) {
			errbuf_set(err, errlen, 0, "blocks: id %llu appears twice",
			       (unsigned long long)t->blocks[i].id);
			return -EINVAL;
		}
	*out = TAKE_PTR(t);
	return 0;
}
