/* SPDX-License-Identifier: MIT */
/*
 * The live state is a JSON tree shaped like the snapshot record (docs/journal.md):
 * {version, next_order, next_block_seq, sources, grants, outbox, intents, step}.
 * Every change is one record whose payload says what changed; the same apply
 * function serves the live call and the replay at open, so what memory holds
 * after a call is exactly what a replay of the disk gives.  A live call
 * applies its record to a copy of the tree, writes the record, and only then
 * makes the copy current: a failed write leaves memory as the disk has it.
 */
#include "agent/intentlog.h"
#include "agent/recordlog.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

#define STATE_VERSION 1
#define LOG_FILE "journal.log"
#define OLD_FILE "journal.json"
#define OLD_STEP_FILE "step.json"
#define LOCK_FILE "lock"
#define OLD_FILE_MAX (64u << 20)

#ifndef _cleanup_json_
#define _cleanup_json_ _cleanup_(json_decrefp)
#endif

struct pending_rec {
	uint16_t type;
	char *data;
	size_t len;
};

struct intentlog {
	char *dir;
	int dir_fd;
	int lock_fd;
	unsigned history_max;
	unsigned outbox_max;
	uint64_t compact_min;
	json_t *root;
	struct recordlog *log;
	uint64_t snapshot_size;   /* payload of the last snapshot: the live state's size */
	uint64_t compactions;
	bool in_batch;
	json_t *batch_saved;
	struct pending_rec *batch;
	size_t n_batch, cap_batch;
};

/* What an apply function needs besides the tree. */
struct apply_ctx {
	unsigned history_max;
	size_t outbox_max;
	char *err;
	size_t errlen;
};

/* ---- small helpers ------------------------------------------------------------- */

static json_t *u64_json(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static bool get_u64(const json_t *o, const char *key, uint64_t min, uint64_t max, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return false;
	*out = (uint64_t)i;
	return true;
}

static uint64_t u64_of(const json_t *o, const char *key)
{
	json_int_t i = json_integer_value(json_object_get(o, key));
	return i < 0 ? 0 : (uint64_t)i;
}

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static const char *zone_word(enum msg_zone z)
{
	return z == MSG_ZONE_MOVABLE ? "movable" : z == MSG_ZONE_NORMAL ? "normal" : NULL;
}

static int zone_parse(const char *s, enum msg_zone *out)
{
	if (streq(s, "movable"))
		*out = MSG_ZONE_MOVABLE;
	else if (streq(s, "normal"))
		*out = MSG_ZONE_NORMAL;
	else
		return -EINVAL;
	return 0;
}

static const char *rec_name(unsigned type)
{
	static const char *const names[] = {
		[ILOG_REC_SNAPSHOT] = "snapshot", [ILOG_REC_ACCEPT] = "accept", [ILOG_REC_STATE] = "state",
		[ILOG_REC_INTENT] = "intent", [ILOG_REC_RESULT] = "result", [ILOG_REC_ADOPT] = "adopt",
		[ILOG_REC_RELEASE] = "release", [ILOG_REC_OUTBOX_PUSH] = "outbox_push",
		[ILOG_REC_OUTBOX_ACK] = "outbox_ack", [ILOG_REC_STEP] = "step", [ILOG_REC_STEP_END] = "step_end",
	};
	return type < ARRAY_SIZE(names) && names[type] ? names[type] : "unknown";
}

static json_t *find_grant(json_t *root, const char *id, size_t *idx)
{
	json_t *g;
	size_t i;

	json_array_foreach(json_object_get(root, "grants"), i, g) {
		if (streq(str_of(g, "id"), id)) {
			if (idx)
				*idx = i;
			return g;
		}
	}
	return NULL;
}

static json_t *find_owner(json_t *root, uint64_t block, size_t *bidx)
{
	json_t *g, *b;
	size_t i, k;

	json_array_foreach(json_object_get(root, "grants"), i, g) {
		json_array_foreach(json_object_get(g, "blocks"), k, b) {
			if (u64_of(b, "block") == block) {
				if (bidx)
					*bidx = k;
				return g;
			}
		}
	}
	return NULL;
}

static json_t *find_intent(json_t *root, const char *op, size_t *idx)
{
	json_t *it;
	size_t i;

	json_array_foreach(json_object_get(root, "intents"), i, it) {
		if (streq(str_of(it, "op"), op)) {
			if (idx)
				*idx = i;
			return it;
		}
	}
	return NULL;
}

/* A time member of a record, as stored in the tree. */
static json_t *time_of(const json_t *rec)
{
	const char *t = str_of(rec, "time");
	time_t v;

	return t && msg_time_parse(t, &v) == 0 ? json_string(t) : NULL;
}

static json_t *now_json(void)
{
	char buf[32];

	msg_time_format(time(NULL), buf);
	return json_string(buf);
}

static json_t *empty_root(void)
{
	return json_pack("{s:i, s:i, s:i, s:{}, s:[], s:{}, s:[], s:n}", "version", STATE_VERSION, "next_order", 0,
			 "next_block_seq", 1, "sources", "grants", "outbox", "intents", "step");
}

/* ---- sets of block numbers (sorted arrays: O(n log n), not O(n^2)) ------------- */

struct idset {
	uint64_t *v;
	size_t n;
};

static void idset_free(struct idset *s)
{
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The block numbers of LIST (objects with "block", or plain integers), sorted. */
static int idset_of(const json_t *list, struct idset *out)
{
	json_t *b;
	size_t i;

	out->n = 0;
	out->v = malloc((json_array_size(list) + 1) * sizeof(*out->v));
	if (!out->v)
		return -ENOMEM;
	json_array_foreach(list, i, b)
		out->v[out->n++] = json_is_integer(b) ? (uint64_t)json_integer_value(b) : u64_of(b, "block");
	qsort(out->v, out->n, sizeof(*out->v), cmp_u64);
	return 0;
}

/* Every block any grant of ROOT owns, sorted. */
static int idset_owned(json_t *root, struct idset *out)
{
	json_t *g, *b;
	size_t i, k, total = 0;

	json_array_foreach(json_object_get(root, "grants"), i, g)
		total += json_array_size(json_object_get(g, "blocks"));
	out->n = 0;
	out->v = malloc((total + 1) * sizeof(*out->v));
	if (!out->v)
		return -ENOMEM;
	json_array_foreach(json_object_get(root, "grants"), i, g)
		json_array_foreach(json_object_get(g, "blocks"), k, b)
			out->v[out->n++] = u64_of(b, "block");
	qsort(out->v, out->n, sizeof(*out->v), cmp_u64);
	return 0;
}

/* A number present twice, or -1. */
static int64_t idset_dup(const struct idset *s)
{
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i] == s->v[i - 1])
			return (int64_t)s->v[i];
	return -1;
}

static bool idset_has(const struct idset *s, uint64_t id)
{
	return s->n && bsearch(&id, s->v, s->n, sizeof(*s->v), cmp_u64);
}

/* ---- validation of a whole state (snapshot, migrated journal.json) ----------------------- */

static bool phase_valid(const char *s)
{
	size_t n = s ? strlen(s) : 32;

	if (n >= sizeof(((struct intentlog_step *)0)->phase))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] >= 'a' && s[i] <= 'z') && s[i] != '_')
			return false;
	return true;
}

static int step_from_json(const json_t *o, struct intentlog_step *s)
{
	const char *kind = str_of(o, "kind"), *op = str_of(o, "op"), *phase = str_of(o, "phase");
	json_t *memmap = json_object_get(o, "memmap"), *zone = json_object_get(o, "zone");

	memset(s, 0, sizeof(*s));
	if (!json_is_object(o) || !msg_id_valid(op) || !phase_valid(phase))
		return -EBADMSG;
	snprintf(s->op, sizeof(s->op), "%s", op);
	snprintf(s->phase, sizeof(s->phase), "%s", phase);
	if (streq(kind, "bring_up"))
		s->kind = ILOG_STEP_BRING_UP;
	else if (streq(kind, "take_down"))
		s->kind = ILOG_STEP_TAKE_DOWN;
	else
		return -EBADMSG;
	if (!get_u64(o, "block", 0, INT64_MAX, &s->block))
		return -EBADMSG;
	if (json_is_null(memmap))
		s->memmap = -1;
	else if (json_is_boolean(memmap))
		s->memmap = json_is_true(memmap);
	else
		return -EBADMSG;
	if (json_is_null(zone))
		s->zone = MSG_ZONE_AUTO;
	else if (zone_parse(json_string_value(zone), &s->zone) < 0)
		return -EBADMSG;
	if (!str_of(o, "started") || msg_time_parse(str_of(o, "started"), &s->started) < 0)
		return -EBADMSG;
	return 0;
}

static json_t *step_to_json(const struct intentlog_step *s)
{
	char t[32];

	msg_time_format(s->started, t);
	return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:s}", "op", s->op, "kind",
			 s->kind == ILOG_STEP_BRING_UP ? "bring_up" : "take_down", "block", (json_int_t)s->block,
			 "phase", s->phase, "memmap", s->memmap < 0 ? json_null() : json_boolean(s->memmap), "zone",
			 zone_word(s->zone) ? json_string(zone_word(s->zone)) : json_null(), "started", t);
}

/* One target of an intent: {block, memmap: bool|null, zone: "movable"|"normal"|null}. */
static int target_from_json(const json_t *b, struct intentlog_target *t)
{
	json_t *memmap = json_object_get(b, "memmap"), *zone = json_object_get(b, "zone");

	if (!json_is_object(b) || !get_u64(b, "block", 0, INT64_MAX, &t->block))
		return -EINVAL;
	if (json_is_null(memmap))
		t->memmap = -1;
	else if (json_is_boolean(memmap))
		t->memmap = json_is_true(memmap);
	else
		return -EINVAL;
	if (json_is_null(zone))
		t->zone = MSG_ZONE_AUTO;
	else if (zone_parse(json_string_value(zone), &t->zone) < 0)
		return -EINVAL;
	return 0;
}

static int check_intent(json_t *root, const json_t *it, size_t i, char *err, size_t errlen)
{
	const char *op = str_of(it, "op"), *dir = str_of(it, "dir");
	json_t *b, *blocks = json_object_get(it, "blocks");
	struct intentlog_target t;
	size_t k, n;
	time_t when;

	if (!json_is_object(it) || !msg_id_valid(op) || !find_grant(root, op, NULL))
		return errbuf_set(err, errlen, -EBADMSG, "intents[%zu]: missing op or one the journal does not know", i);
	if (find_intent(root, op, &n) && n != i)
		return errbuf_set(err, errlen, -EBADMSG, "operation \"%s\" has two open intents", op);
	if (!streq(dir, "up") && !streq(dir, "down"))
		return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": \"dir\" is not up or down", op);
	if (!str_of(it, "started") || msg_time_parse(str_of(it, "started"), &when) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": invalid \"started\"", op);
	if (!json_is_array(blocks) || json_array_size(blocks) == 0)
		return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": no blocks", op);
	json_array_foreach(blocks, k, b)
		if (target_from_json(b, &t) < 0)
			return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\", blocks[%zu]: invalid", op, k);
	{
		_cleanup_(idset_free) struct idset ids = { 0 };
		int64_t dup;

		if (idset_of(blocks, &ids) < 0)
			return -ENOMEM;
		dup = idset_dup(&ids);
		if (dup >= 0)
			return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": block %" PRId64 " named twice", op, dup);
	}
	return 0;
}

static int check_grant(json_t *root, json_t *g, size_t i, uint64_t next_order, uint64_t next_seq, char *err,
		       size_t errlen)
{
	const char *id = str_of(g, "id"), *source = str_of(g, "source"), *type = str_of(g, "type");
	json_t *req = json_object_get(g, "request"), *status = json_object_get(g, "status");
	json_t *blocks = json_object_get(g, "blocks"), *b, *ab = json_object_get(g, "applied_bytes");
	struct msg_error merr;
	struct msg *m = NULL;
	enum msg_state st;
	uint64_t gen, order, last, v;
	enum msg_zone z;
	time_t t;
	size_t k;
	int r;

	if (!json_is_object(g) || !msg_id_valid(id))
		return errbuf_set(err, errlen, -EBADMSG, "grants[%zu]: missing or invalid \"id\"", i);
	if (find_grant(root, id, &k) && k != i)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\" is recorded twice", id);
	if (!msg_id_valid(source))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": missing or invalid \"source\"", id);
	if (!streq(type, "grant") && !streq(type, "revoke"))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"type\" is not grant or revoke", id);
	if (!get_u64(g, "generation", 1, MSG_GENERATION_MAX, &gen))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"generation\"", id);
	if (!get_u64(json_object_get(root, "sources"), source, 1, MSG_GENERATION_MAX, &last) || gen > last)
		return errbuf_set(err, errlen, -EBADMSG,
				  "grant \"%s\": generation %" PRIu64 " is above the last recorded for source \"%s\"", id,
				  gen, source);
	if (next_order == 0 || !get_u64(g, "order", 0, next_order - 1, &order))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"order\" missing or not below next_order", id);
	if (msg_state_parse(str_of(g, "state"), &st) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"state\"", id);
	if (!json_is_null(status) && !json_is_object(status))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"status\" is neither an object nor null", id);
	if (ab && !get_u64(g, "applied_bytes", 0, INT64_MAX, &v))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"applied_bytes\"", id);
	if (!str_of(g, "created") || msg_time_parse(str_of(g, "created"), &t) < 0 || !str_of(g, "updated") ||
	    msg_time_parse(str_of(g, "updated"), &t) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"created\" or \"updated\" time", id);
	r = msg_from_json(req, &m, &merr);
	if (r < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": stored request is invalid: %s", id, merr.message);
	r = streq(m->id, id) && m->generation == gen && streq(msg_type_name(m->type), type) ? 0 : -EBADMSG;
	msg_free(m);
	if (r < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": stored request does not match the record", id);
	if (!json_is_array(blocks))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"blocks\" is not an array", id);
	if (streq(type, "revoke") && json_array_size(blocks) > 0)
		return errbuf_set(err, errlen, -EBADMSG, "revocation \"%s\" owns blocks", id);
	json_array_foreach(blocks, k, b) {
		if (!json_is_object(b) || !get_u64(b, "block", 0, INT64_MAX, &v))
			return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": an owned block has no valid \"block\"", id);
		if (!get_u64(b, "seq", 1, next_seq - 1, &v))
			return errbuf_set(err, errlen, -EBADMSG,
					  "grant \"%s\", block %" PRIu64 ": \"seq\" missing or not below next_block_seq", id,
					  u64_of(b, "block"));
		if (zone_parse(str_of(b, "zone"), &z) < 0 || !json_is_boolean(json_object_get(b, "memmap")))
			return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\", block %" PRIu64 ": invalid zone or memmap",
					  id, u64_of(b, "block"));
	}
	return 0;
}

static int check_outbox(json_t *outbox, char *err, size_t errlen)
{
	const char *dest;
	json_t *d;

	if (!json_is_object(outbox))
		return errbuf_set(err, errlen, -EBADMSG, "\"outbox\" is not an object");
	json_object_foreach(outbox, dest, d) {
		json_t *items = json_object_get(d, "items"), *it;
		uint64_t next, seq, prev = 0;
		size_t i;

		if (!msg_id_valid(dest) || !get_u64(d, "next_seq", 1, INT64_MAX, &next) || !json_is_array(items))
			return errbuf_set(err, errlen, -EBADMSG, "outbox \"%.40s\": invalid entry", dest);
		json_array_foreach(items, i, it) {
			if (!get_u64(it, "seq", prev + 1, next - 1, &seq) || !json_is_object(json_object_get(it, "report")))
				return errbuf_set(err, errlen, -EBADMSG,
						  "outbox \"%s\", item %zu: sequence out of order or report missing", dest, i);
			prev = seq;
		}
	}
	return 0;
}

/* LEGACY: journal.json of the earlier format (no intents, step in step.json). */
static int check_root(json_t *root, bool legacy, char *err, size_t errlen)
{
	json_t *sources = json_object_get(root, "sources"), *grants = json_object_get(root, "grants"), *g, *v;
	uint64_t version, next_order, next_seq;
	const char *key;
	size_t i;
	int r;

	if (!json_is_object(root))
		return errbuf_set(err, errlen, -EBADMSG, "not a JSON object");
	if (!get_u64(root, "version", 0, INT64_MAX, &version))
		return errbuf_set(err, errlen, -EBADMSG, "\"version\" missing");
	if (version != STATE_VERSION)
		return errbuf_set(err, errlen, -EBADMSG, "version %" PRIu64 " is not the version %d this memgrantd reads",
				  version, STATE_VERSION);
	if (!get_u64(root, "next_order", 0, INT64_MAX, &next_order) ||
	    !get_u64(root, "next_block_seq", 1, INT64_MAX, &next_seq))
		return errbuf_set(err, errlen, -EBADMSG, "\"next_order\" or \"next_block_seq\" missing or invalid");
	if (!json_is_object(sources))
		return errbuf_set(err, errlen, -EBADMSG, "\"sources\" is not an object");
	json_object_foreach(sources, key, v) {
		uint64_t gen;
		if (!msg_id_valid(key) || !get_u64(sources, key, 1, MSG_GENERATION_MAX, &gen))
			return errbuf_set(err, errlen, -EBADMSG, "sources: invalid entry \"%.40s\"", key);
	}
	if (!json_is_array(grants))
		return errbuf_set(err, errlen, -EBADMSG, "\"grants\" is not an array");
	json_array_foreach(grants, i, g) {
		r = check_grant(root, g, i, next_order, next_seq, err, errlen);
		if (r < 0)
			return r;
	}
	{
		_cleanup_(idset_free) struct idset owned = { 0 };
		int64_t dup;

		if (idset_owned(root, &owned) < 0)
			return -ENOMEM;
		dup = idset_dup(&owned);
		if (dup >= 0)
			return errbuf_set(err, errlen, -EBADMSG, "block %" PRId64 " is owned twice", dup);
	}
	r = check_outbox(json_object_get(root, "outbox"), err, errlen);
	if (r < 0 || legacy)
		return r;
	if (!json_is_array(json_object_get(root, "intents")))
		return errbuf_set(err, errlen, -EBADMSG, "\"intents\" is not an array");
	json_array_foreach(json_object_get(root, "intents"), i, g) {
		r = check_intent(root, g, i, err, errlen);
		if (r < 0)
			return r;
	}
	v = json_object_get(root, "step");
	if (!json_is_null(v)) {
		struct intentlog_step s;
		if (step_from_json(v, &s) < 0)
			return errbuf_set(err, errlen, -EBADMSG, "\"step\" is not a valid step marker");
		if (!find_grant(root, s.op, NULL))
			return errbuf_set(err, errlen, -EBADMSG, "step of \"%s\", which the journal does not know", s.op);
	}
	return 0;
}

/* ---- applying records ---------------------------------------------------------------- */

static int fail(struct apply_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct apply_ctx *c, int code, const char *fmt, ...)
{
	va_list ap;

	if (c->err && c->errlen) {
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* Finished records owning nothing, with no intent or step, beyond history_max go. */
static void prune(json_t *root, unsigned history_max)
{
	json_t *grants = json_object_get(root, "grants");
	const char *step_op = str_of(json_object_get(root, "step"), "op");
	size_t finished = 0;

	for (size_t i = json_array_size(grants); i-- > 0;) {
		json_t *g = json_array_get(grants, i);
		enum msg_state st;

		if (msg_state_parse(str_of(g, "state"), &st) < 0 || !msg_state_is_final(st) ||
		    json_array_size(json_object_get(g, "blocks")) > 0 || streq(str_of(g, "id"), step_op) ||
		    find_intent(root, str_of(g, "id"), NULL))
			continue;
		if (++finished > history_max)
			json_array_remove(grants, i);
	}
}

static int outbox_add(json_t *root, size_t outbox_max, const char *dest, json_t *report, uint64_t *seq_out)
{
	json_t *outbox = json_object_get(root, "outbox");
	json_t *d = json_object_get(outbox, dest), *items, *item;
	uint64_t seq;

	if (!msg_id_valid(dest) || !json_is_object(report))
		return -EINVAL;
	if (!d) {
		d = json_pack("{s:i, s:[]}", "next_seq", 1, "items");
		if (!d || json_object_set_new(outbox, dest, d) < 0)
			return -ENOMEM;
	}
	items = json_object_get(d, "items");
	if (json_array_size(items) >= outbox_max)
		return -ENOBUFS;
	seq = u64_of(d, "next_seq");
	item = json_pack("{s:I, s:O}", "seq", (json_int_t)seq, "report", report);
	if (!item || json_array_append_new(items, item) < 0 || json_object_set_new(d, "next_seq", u64_json(seq + 1)) < 0)
		return -ENOMEM;
	if (seq_out)
		*seq_out = seq;
	return 0;
}

/* The "status" and "outbox" members common to accept/state/intent/result:
 * replaces G's status when REC has one, queues it for REC's "outbox". */
static int apply_report(json_t *root, json_t *g, const json_t *rec, struct apply_ctx *c)
{
	json_t *status = json_object_get(rec, "status");
	const char *dest = str_of(rec, "outbox");
	int r;

	if (status && !json_is_null(status)) {
		if (!json_is_object(status))
			return fail(c, -EINVAL, "\"status\" is not an object");
		if (json_object_set(g, "status", status) < 0)
			return -ENOMEM;
	}
	if (json_object_get(rec, "outbox") && !json_is_null(json_object_get(rec, "outbox"))) {
		if (!dest)
			return fail(c, -EINVAL, "\"outbox\" is not a destination");
		r = outbox_add(root, c->outbox_max, dest, json_object_get(g, "status"), NULL);
		if (r == -ENOBUFS)
			return fail(c, r, "outbox \"%s\" is full", dest);
		if (r < 0)
			return fail(c, r, "cannot queue the report for \"%s\"", dest);
	}
	return 0;
}

static int set_updated(json_t *g, const json_t *rec, struct apply_ctx *c)
{
	json_t *t = time_of(rec);

	if (!t)
		return fail(c, -EINVAL, "missing or invalid \"time\"");
	return json_object_set_new(g, "updated", t) < 0 ? -ENOMEM : 0;
}

static int apply_accept(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *source = str_of(rec, "source");
	json_t *req = json_object_get(rec, "request"), *g, *t;
	struct msg_error merr;
	_cleanup_msg_ struct msg *m = NULL;
	enum msg_state st;

	if (!msg_id_valid(source))
		return fail(c, -EINVAL, "missing or invalid \"source\"");
	if (msg_state_parse(str_of(rec, "state"), &st) < 0)
		return fail(c, -EINVAL, "invalid \"state\"");
	if (msg_from_json(req, &m, &merr) < 0)
		return fail(c, -EINVAL, "invalid request: %s", merr.message);
	if (m->type == MSG_SYNC)
		return fail(c, -EINVAL, "a sync message is not recorded");
	if (m->generation <= u64_of(json_object_get(root, "sources"), source))
		return fail(c, -ESTALE, "generation %" PRIu64 " of \"%s\" is not above the last of source \"%s\"",
			    m->generation, m->id, source);
	if (find_grant(root, m->id, NULL))
		return fail(c, -EEXIST, "id \"%s\" is already recorded", m->id);
	t = time_of(rec);
	if (!t)
		return fail(c, -EINVAL, "missing or invalid \"time\"");
	g = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:O, s:n, s:O, s:o, s:[], s:i}", "id", m->id, "source", source,
		      "type", msg_type_name(m->type), "generation", (json_int_t)m->generation, "order",
		      (json_int_t)u64_of(root, "next_order"), "state", msg_state_name(st), "request", req, "status",
		      "created", t, "updated", t, "blocks", "applied_bytes", 0);
	if (!g || json_array_append_new(json_object_get(root, "grants"), g) < 0)
		return -ENOMEM;
	if (json_object_set_new(json_object_get(root, "sources"), source, u64_json(m->generation)) < 0 ||
	    json_object_set_new(root, "next_order", u64_json(u64_of(root, "next_order") + 1)) < 0)
		return -ENOMEM;
	return apply_report(root, g, rec, c);
}

static int apply_state(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *id = str_of(rec, "id");
	json_t *g = find_grant(root, id, NULL);
	enum msg_state st;
	int r;

	if (!g)
		return fail(c, -ENOENT, "unknown operation \"%.64s\"", id ? id : "");
	if (msg_state_parse(str_of(rec, "state"), &st) < 0)
		return fail(c, -EINVAL, "invalid \"state\"");
	if (json_object_set_new(g, "state", json_string(msg_state_name(st))) < 0)
		return -ENOMEM;
	r = set_updated(g, rec, c);
	return r < 0 ? r : apply_report(root, g, rec, c);
}

static int apply_intent(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *op = str_of(rec, "op"), *dir = str_of(rec, "dir");
	json_t *g = find_grant(root, op, NULL), *blocks = json_object_get(rec, "blocks"), *it, *b, *t;
	struct intentlog_target tg;
	size_t k;
	int r;

	if (!g)
		return fail(c, -ENOENT, "unknown operation \"%.64s\"", op ? op : "");
	if (find_intent(root, op, NULL))
		return fail(c, -EBUSY, "operation \"%s\" already has an open intent", op);
	if (!streq(dir, "up") && !streq(dir, "down"))
		return fail(c, -EINVAL, "\"dir\" is not up or down");
	if (!json_is_array(blocks) || json_array_size(blocks) == 0)
		return fail(c, -EINVAL, "an intent names at least one block");
	json_array_foreach(blocks, k, b)
		if (target_from_json(b, &tg) < 0)
			return fail(c, -EINVAL, "blocks[%zu] is invalid", k);
	{
		_cleanup_(idset_free) struct idset ids = { 0 };
		int64_t dup;

		if (idset_of(blocks, &ids) < 0)
			return -ENOMEM;
		dup = idset_dup(&ids);
		if (dup >= 0)
			return fail(c, -EINVAL, "block %" PRId64 " is named twice", dup);
	}
	t = time_of(rec);
	if (!t)
		return fail(c, -EINVAL, "missing or invalid \"time\"");
	it = json_pack("{s:s, s:s, s:O, s:o}", "op", op, "dir", dir, "blocks", blocks, "started", t);
	if (!it || json_array_append_new(json_object_get(root, "intents"), it) < 0)
		return -ENOMEM;
	if (json_object_set_new(g, "state", json_string(msg_state_name(MSG_STATE_IN_PROGRESS))) < 0)
		return -ENOMEM;
	r = set_updated(g, rec, c);
	return r < 0 ? r : apply_report(root, g, rec, c);
}

/* BLOCK becomes G's with the next seq. */
static int own_block(json_t *root, json_t *g, uint64_t block, const char *zone, bool memmap, uint64_t *seq)
{
	uint64_t s = u64_of(root, "next_block_seq");
	json_t *b = json_pack("{s:I, s:I, s:s, s:b}", "block", (json_int_t)block, "seq", (json_int_t)s, "zone", zone,
			      "memmap", memmap);

	if (!b || json_array_append_new(json_object_get(g, "blocks"), b) < 0 ||
	    json_object_set_new(root, "next_block_seq", u64_json(s + 1)) < 0)
		return -ENOMEM;
	if (seq)
		*seq = s;
	return 0;
}

/* A list of done/adopted blocks: {block, zone, memmap} (ZONED) or plain
 * numbers; no repeats, each named by INTENT (when not NULL), and when ZONED
 * (they are to become owned) none owned already. */
static int check_block_list(json_t *root, const json_t *list, bool zoned, const json_t *intent, struct apply_ctx *c)
{
	_cleanup_(idset_free) struct idset ids = { 0 }, named = { 0 }, owned = { 0 };
	json_t *b;
	size_t k;
	enum msg_zone z;
	uint64_t id;
	int64_t dup;

	if (!json_is_array(list))
		return fail(c, -EINVAL, "\"blocks\" is not an array");
	json_array_foreach(list, k, b)
		if (zoned ? !get_u64(b, "block", 0, INT64_MAX, &id) || zone_parse(str_of(b, "zone"), &z) < 0 ||
				    !json_is_boolean(json_object_get(b, "memmap"))
			  : !json_is_integer(b) || json_integer_value(b) < 0)
			return fail(c, -EINVAL, "blocks[%zu] is invalid", k);
	if (idset_of(list, &ids) < 0 || (intent && idset_of(json_object_get(intent, "blocks"), &named) < 0) ||
	    (zoned && idset_owned(root, &owned) < 0))
		return -ENOMEM;
	dup = idset_dup(&ids);
	if (dup >= 0)
		return fail(c, -EINVAL, "block %" PRId64 " is listed twice", dup);
	for (size_t i = 0; i < ids.n; i++) {
		if (intent && !idset_has(&named, ids.v[i]))
			return fail(c, -EINVAL, "block %" PRIu64 " is not named by the intent of \"%s\"", ids.v[i],
				    str_of(intent, "op"));
		if (zoned && idset_has(&owned, ids.v[i]))
			return fail(c, -EEXIST, "block %" PRIu64 " is already owned by \"%s\"", ids.v[i],
				    str_of(find_owner(root, ids.v[i], NULL), "id"));
	}
	return 0;
}

/* Whoever owns one of IDS no longer does (one pass over all owned blocks). */
static int disown_blocks(json_t *root, const json_t *list)
{
	_cleanup_(idset_free) struct idset ids = { 0 };
	json_t *g;
	size_t i;

	if (idset_of(list, &ids) < 0)
		return -ENOMEM;
	json_array_foreach(json_object_get(root, "grants"), i, g) {
		json_t *blocks = json_object_get(g, "blocks");
		for (size_t k = json_array_size(blocks); k-- > 0;)
			if (idset_has(&ids, u64_of(json_array_get(blocks, k), "block")))
				json_array_remove(blocks, k);
	}
	return 0;
}

static int apply_result(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *op = str_of(rec, "op");
	json_t *g = find_grant(root, op, NULL), *done = json_object_get(rec, "blocks"), *it, *b;
	enum msg_state st;
	uint64_t applied;
	size_t idx = 0, k;
	bool up;
	int r = 0;

	if (!g)
		return fail(c, -ENOENT, "unknown operation \"%.64s\"", op ? op : "");
	if (msg_state_parse(str_of(rec, "state"), &st) < 0)
		return fail(c, -EINVAL, "invalid \"state\"");
	if (!get_u64(rec, "applied_bytes", 0, INT64_MAX, &applied))
		return fail(c, -EINVAL, "invalid \"applied_bytes\"");
	it = find_intent(root, op, &idx);
	if (!it && json_array_size(done) > 0)
		return fail(c, -EINVAL, "\"%s\" reports blocks done but has no open intent", op);
	up = it && streq(str_of(it, "dir"), "up");
	if (up && !streq(str_of(g, "type"), "grant"))
		return fail(c, -EINVAL, "revocation \"%s\" cannot own blocks", op);
	if (done && !json_is_null(done)) {
		r = check_block_list(root, done, up, it, c);
		if (r < 0)
			return r;
	}
	if (up) {
		json_array_foreach(done, k, b) {
			r = own_block(root, g, u64_of(b, "block"), str_of(b, "zone"), json_is_true(json_object_get(b, "memmap")),
				      NULL);
			if (r < 0)
				return r;
		}
	} else if (json_array_size(done) > 0) {
		r = disown_blocks(root, done);
		if (r < 0)
			return r;
	}
	if (it && json_array_remove(json_object_get(root, "intents"), idx) < 0)
		return -ENOMEM;
	if (json_object_set_new(g, "state", json_string(msg_state_name(st))) < 0 ||
	    json_object_set_new(g, "applied_bytes", u64_json(applied)) < 0)
		return -ENOMEM;
	r = set_updated(g, rec, c);
	return r < 0 ? r : apply_report(root, g, rec, c);
}

static int apply_adopt(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *id = str_of(rec, "grant");
	json_t *g = find_grant(root, id, NULL), *list = json_object_get(rec, "blocks"), *b;
	size_t k;
	int r;

	if (!g)
		return fail(c, -ENOENT, "unknown grant \"%.64s\"", id ? id : "");
	if (!streq(str_of(g, "type"), "grant"))
		return fail(c, -EINVAL, "\"%s\" is a revocation: it cannot own blocks", id);
	if (json_array_size(list) == 0)
		return fail(c, -EINVAL, "nothing to adopt");
	r = check_block_list(root, list, true, NULL, c);
	if (r < 0)
		return r;
	json_array_foreach(list, k, b) {
		r = own_block(root, g, u64_of(b, "block"), str_of(b, "zone"), json_is_true(json_object_get(b, "memmap")),
			      NULL);
		if (r < 0)
			return r;
	}
	return set_updated(g, rec, c);
}

static int apply_release(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	json_t *list = json_object_get(rec, "blocks"), *b;
	size_t k;
	int r;

	if (json_array_size(list) == 0)
		return fail(c, -EINVAL, "nothing to release");
	r = check_block_list(root, list, false, NULL, c);
	if (r < 0)
		return r;
	json_array_foreach(list, k, b) {
		json_t *g = find_owner(root, (uint64_t)json_integer_value(b), NULL);
		if (!g)
			return fail(c, -ENOENT, "block %" JSON_INTEGER_FORMAT " is not owned", json_integer_value(b));
		r = set_updated(g, rec, c);
		if (r < 0)
			return r;
	}
	return disown_blocks(root, list);
}

static int apply_outbox_push(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *dest = str_of(rec, "dest");
	int r = outbox_add(root, c->outbox_max, dest, json_object_get(rec, "report"), NULL);

	if (r == -ENOBUFS)
		return fail(c, r, "outbox \"%s\" is full", dest);
	return r == -EINVAL ? fail(c, r, "bad destination or report") : r;
}

static int apply_outbox_ack(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *dest = str_of(rec, "dest");
	json_t *items = json_object_get(json_object_get(json_object_get(root, "outbox"), dest), "items"), *it;
	uint64_t seq;
	size_t i;

	if (!msg_id_valid(dest) || !get_u64(rec, "seq", 1, INT64_MAX, &seq))
		return fail(c, -EINVAL, "bad destination or sequence");
	json_array_foreach(items, i, it)
		if (u64_of(it, "seq") == seq)
			return json_array_remove(items, i) < 0 ? -ENOMEM : 0;
	return fail(c, -ENOENT, "report %" PRIu64 " for \"%s\" is not queued", seq, dest);
}

static int apply_step(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	struct intentlog_step s;

	if (!json_is_null(json_object_get(root, "step")))
		return fail(c, -EBUSY, "a step is already pending");
	if (step_from_json(rec, &s) < 0)
		return fail(c, -EINVAL, "not a valid step marker");
	if (!find_grant(root, s.op, NULL))
		return fail(c, -ENOENT, "step of \"%s\", which the journal does not know", s.op);
	return json_object_set(root, "step", (json_t *)rec) < 0 ? -ENOMEM : 0;
}

static int apply_step_end(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	(void)rec;
	if (json_is_null(json_object_get(root, "step")))
		return fail(c, -ENOENT, "no step is pending");
	return json_object_set_new(root, "step", json_null()) < 0 ? -ENOMEM : 0;
}

/* Applies one record to ROOT (in place; on failure ROOT may be half changed:
 * callers apply to a copy). SNAPSHOT replaces *ROOTP. */
static int apply(json_t **rootp, unsigned type, json_t *rec, struct apply_ctx *c)
{
	int r;

	if (!json_is_object(rec))
		return fail(c, -EINVAL, "payload is not a JSON object");
	switch (type) {
	case ILOG_REC_SNAPSHOT:
		r = check_root(rec, false, c->err, c->errlen);
		if (r < 0)
			return r;
		json_decref(*rootp);
		*rootp = json_incref(rec);
		return 0;
	case ILOG_REC_ACCEPT: r = apply_accept(*rootp, rec, c); break;
	case ILOG_REC_STATE: r = apply_state(*rootp, rec, c); break;
	case ILOG_REC_INTENT: r = apply_intent(*rootp, rec, c); break;
	case ILOG_REC_RESULT: r = apply_result(*rootp, rec, c); break;
	case ILOG_REC_ADOPT: r = apply_adopt(*rootp, rec, c); break;
	case ILOG_REC_RELEASE: r = apply_release(*rootp, rec, c); break;
	case ILOG_REC_OUTBOX_PUSH: r = apply_outbox_push(*rootp, rec, c); break;
	case ILOG_REC_OUTBOX_ACK: r = apply_outbox_ack(*rootp, rec, c); break;
	case ILOG_REC_STEP: r = apply_step(*rootp, rec, c); break;
	case ILOG_REC_STEP_END: r = apply_step_end(*rootp, rec, c); break;
	default: return fail(c, -EINVAL, "unknown record type %u", type);
	}
	if (r == 0)
		prune(*rootp, c->history_max);
	return r;
}

/* ---- replay ------------------------------------------------------------------------------- */

struct replay {
	json_t *root;
	unsigned history_max;
	char *err;
	size_t errlen;
};

static int replay_cb(void *ctx, uint64_t offset, uint16_t type, const void *data, size_t len)
{
	struct replay *rp = ctx;
	char why[200] = "";
	struct apply_ctx c = { .history_max = rp->history_max, .outbox_max = SIZE_MAX, .err = why, .errlen = sizeof(why) };
	_cleanup_json_ json_t *rec = NULL;
	json_error_t jerr;
	int r;

	rec = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!rec)
		return errbuf_set(rp->err, rp->errlen, -EBADMSG, "record at byte offset %" PRIu64 " (%s): not JSON: %s",
				  offset, rec_name(type), jerr.text);
	r = apply(&rp->root, type, rec, &c);
	if (r < 0)
		return errbuf_set(rp->err, rp->errlen, -EBADMSG, "record at byte offset %" PRIu64 " (%s): %s", offset,
				  rec_name(type), why[0] ? why : strerror(-r));
	return 0;
}

int intentlog_replay_image(const void *buf, size_t len, json_t **state, char *err, size_t errlen)
{
	struct replay rp = { .root = empty_root(), .history_max = INTENTLOG_HISTORY_DEFAULT, .err = err, .errlen = errlen };
	struct recordlog_scan scan;
	char why[256] = "";
	int r;

	if (!rp.root)
		return -ENOMEM;
	r = recordlog_scan(buf, len, replay_cb, &rp, &scan, why, sizeof(why));
	if (r < 0) {
		json_decref(rp.root);
		if (why[0])
			errbuf_set(err, errlen, r, "%s", why);
		return r;
	}
	*state = rp.root;
	return 0;
}

/* ---- open / close ---------------------------------------------------------------------------- */

static int remove_stale_temporaries(struct intentlog *il)
{
	_cleanup_close_ int fd = openat(il->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -1;
	while ((de = readdir(d))) {
		if (!startswith(de->d_name, LOG_FILE ".tmp."))
			continue;
		if (unlinkat(il->dir_fd, de->d_name, 0) < 0 && errno != ENOENT) {
			r = -errno;
			break;
		}
	}
	closedir(d);
	return r;
}

static bool exists_at(int dir_fd, const char *name)
{
	struct stat st;

	return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The earlier format: journal.json (+ step.json) into a state tree. */
static int load_old(struct intentlog *il, json_t **out, char *err, size_t errlen)
{
	char path[4096], spath[4096], why[200] = "";
	_cleanup_free_ char *text = NULL, *stext = NULL;
	json_t *root, *step = NULL, *g;
	json_error_t jerr;
	size_t len, i;
	int r;

	snprintf(path, sizeof(path), "%s/" OLD_FILE, il->dir);
	snprintf(spath, sizeof(spath), "%s/" OLD_STEP_FILE, il->dir);
	r = file_read_all(path, OLD_FILE_MAX, &text, &len);
	if (r == -EFBIG)
		return errbuf_set(err, errlen, -EBADMSG, "%s: larger than %u bytes", path, OLD_FILE_MAX);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot read: %s", path, strerror(-r));
	if (len == 0)
		return errbuf_set(err, errlen, -EBADMSG, "%s: empty file (truncated?)", path);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return errbuf_set(err, errlen, -EBADMSG, "%s: line %d, column %d: %s", path, jerr.line, jerr.column,
				  jerr.text);
	r = check_root(root, true, why, sizeof(why));
	if (r < 0) {
		json_decref(root);
		return errbuf_set(err, errlen, r, "%s: %s", path, why);
	}
	r = file_read_all(spath, 64 * 1024, &stext, &len);
	if (r == 0) {
		struct intentlog_step s;
		json_t *o = json_loadb(stext, len, JSON_REJECT_DUPLICATES, &jerr);
		if (!o || step_from_json(o, &s) < 0 || !find_grant(root, s.op, NULL)) {
			json_decref(o);
			json_decref(root);
			return errbuf_set(err, errlen, -EBADMSG, "%s: not a valid step marker of a known operation", spath);
		}
		step = step_to_json(&s);
		json_decref(o);
	} else if (r != -ENOENT) {
		json_decref(root);
		return errbuf_set(err, errlen, r == -EFBIG ? -EBADMSG : r, "%s: cannot read: %s", spath, strerror(-r));
	}
	json_array_foreach(json_object_get(root, "grants"), i, g)
		json_object_set_new(g, "applied_bytes",
				    u64_json(u64_of(json_object_get(g, "status"), "applied_bytes")));
	if (json_object_set_new(root, "intents", json_array()) < 0 ||
	    json_object_set_new(root, "step", step ? step : json_null()) < 0) {
		json_decref(root);
		return -ENOMEM;
	}
	*out = root;
	return 0;
}

/* journal.json and step.json are kept as *.migrated once the log has their content. */
static int retire_old_files(struct intentlog *il)
{
	if (renameat(il->dir_fd, OLD_FILE, il->dir_fd, OLD_FILE ".migrated") < 0 && errno != ENOENT)
		return -errno;
	if (renameat(il->dir_fd, OLD_STEP_FILE, il->dir_fd, OLD_STEP_FILE ".migrated") < 0 && errno != ENOENT)
		return -errno;
	return fsync(il->dir_fd) < 0 ? -errno : 0;
}

static int write_snapshot(struct intentlog *il, bool create)
{
	_cleanup_free_ char *data = json_dumps(il->root, JSON_COMPACT);
	struct recordlog_rec rec;
	int r;

	if (!data)
		return -ENOMEM;
	rec = (struct recordlog_rec){ .type = ILOG_REC_SNAPSHOT, .data = data, .len = strlen(data) };
	r = create ? recordlog_create(il->dir_fd, il->dir, LOG_FILE, &rec, 1, &il->log) : recordlog_rewrite(il->log, &rec, 1);
	if (r == 0)
		il->snapshot_size = rec.len;
	return r;
}

void intentlog_close(struct intentlog *il)
{
	if (!il)
		return;
	for (size_t i = 0; i < il->n_batch; i++)
		free(il->batch[i].data);
	free(il->batch);
	json_decref(il->batch_saved);
	json_decref(il->root);
	recordlog_close(il->log);
	if (il->dir_fd >= 0)
		close(il->dir_fd);
	if (il->lock_fd >= 0)
		close(il->lock_fd);
	free(il->dir);
	free(il);
}

int intentlog_open(const char *state_dir, const struct intentlog_options *opts, struct intentlog **out,
		   struct intentlog_opened *opened, char *err, size_t errlen)
{
	_cleanup_(intentlog_closep) struct intentlog *il = calloc(1, sizeof(*il));
	struct intentlog_opened info = { 0 };
	int r;

	*out = NULL;
	if (!il)
		return -ENOMEM;
	il->dir_fd = il->lock_fd = -1;
	il->history_max = opts && opts->history_max ? opts->history_max : INTENTLOG_HISTORY_DEFAULT;
	il->outbox_max = opts && opts->outbox_max ? opts->outbox_max : INTENTLOG_OUTBOX_DEFAULT;
	il->compact_min = opts && opts->compact_min ? opts->compact_min : INTENTLOG_COMPACT_MIN_DEFAULT;
	il->dir = strdup(state_dir);
	if (!il->dir)
		return -ENOMEM;
	r = mkdir_p(state_dir, 0700);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot create: %s", state_dir, strerror(-r));
	il->dir_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (il->dir_fd < 0)
		return errbuf_set(err, errlen, -errno, "%s: cannot open: %m", state_dir);
	il->lock_fd = openat(il->dir_fd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (il->lock_fd < 0)
		return errbuf_set(err, errlen, -errno, "%s/" LOCK_FILE ": cannot open: %m", state_dir);
	if (flock(il->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return errbuf_set(err, errlen, -EBUSY, "%s is in use by another process (lock on %s/" LOCK_FILE ")",
					  state_dir, state_dir);
		return errbuf_set(err, errlen, -errno, "%s/" LOCK_FILE ": cannot lock: %m", state_dir);
	}
	r = remove_stale_temporaries(il);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot remove stale temporary files: %s", state_dir, strerror(-r));

	if (exists_at(il->dir_fd, LOG_FILE)) {
		char why[256] = "", cbwhy[256] = "";
		struct replay rp = { .root = empty_root(), .history_max = il->history_max, .err = cbwhy,
				     .errlen = sizeof(cbwhy) };
		struct recordlog_scan scan;
		_cleanup_free_ char *data = NULL;

		if (!rp.root)
			return -ENOMEM;
		r = recordlog_open(il->dir_fd, il->dir, LOG_FILE, replay_cb, &rp, &scan, &il->log, err, errlen);
		if (r < 0) {
			json_decref(rp.root);
			if (cbwhy[0]) /* a record that frames well but does not apply */
				return errbuf_set(err, errlen, r, "%s/" LOG_FILE ": %s", state_dir, cbwhy);
			return r;
		}
		il->root = rp.root;
		r = check_root(il->root, false, why, sizeof(why));
		if (r < 0)
			return errbuf_set(err, errlen, r, "%s/" LOG_FILE ": the replayed state is inconsistent: %s",
					  state_dir, why);
		info.torn = scan.torn;
		info.torn_offset = scan.valid_end;
		snprintf(info.torn_why, sizeof(info.torn_why), "%s", scan.torn_why);
		info.records = scan.records;
		data = json_dumps(il->root, JSON_COMPACT);
		il->snapshot_size = data ? strlen(data) : 0;
		/* a crash after the log was written but before journal.json was renamed */
		r = retire_old_files(il);
		if (r < 0)
			return errbuf_set(err, errlen, r, "%s: cannot rename the migrated " OLD_FILE ": %s", state_dir,
					  strerror(-r));
	} else if (exists_at(il->dir_fd, OLD_FILE)) {
		r = load_old(il, &il->root, err, errlen);
		if (r < 0)
			return r;
		r = write_snapshot(il, true);
		if (r < 0)
			return errbuf_set(err, errlen, r, "%s/" LOG_FILE ": cannot write: %s", state_dir, strerror(-r));
		r = retire_old_files(il);
		if (r < 0)
			return errbuf_set(err, errlen, r, "%s: cannot rename the migrated " OLD_FILE ": %s", state_dir,
					  strerror(-r));
		info.migrated = true;
	} else {
		il->root = empty_root();
		if (!il->root)
			return -ENOMEM;
		r = write_snapshot(il, true);
		if (r < 0)
			return errbuf_set(err, errlen, r, "%s/" LOG_FILE ": cannot create: %s", state_dir, strerror(-r));
		info.fresh = true;
	}
	if (opened)
		*opened = info;
	*out = TAKE_PTR(il);
	return 0;
}

/* ---- writing -------------------------------------------------------------------------------- */

static int maybe_compact(struct intentlog *il)
{
	struct recordlog_stats st;
	uint64_t limit = il->snapshot_size * 4;

	recordlog_stats(il->log, &st);
	if (limit < il->compact_min)
		limit = il->compact_min;
	if (st.size <= limit)
		return 0;
	return intentlog_compact(il);
}

int intentlog_compact(struct intentlog *il)
{
	int r;

	if (il->in_batch)
		return -EBUSY;
	r = write_snapshot(il, false);
	if (r == 0)
		il->compactions++;
	return r;
}

/* Applies REC (consumed) of TYPE to a copy of the state, makes it durable (or
 * queues it in the open batch), then current.  Errors leave everything as it was. */
static int commit(struct intentlog *il, unsigned type, json_t *rec)
{
	struct apply_ctx c = { .history_max = il->history_max, .outbox_max = il->outbox_max };
	json_t *next;
	char *data;
	int r;

	if (!rec)
		return -ENOMEM;
	next = json_deep_copy(il->root);
	if (!next) {
		json_decref(rec);
		return -ENOMEM;
	}
	r = apply(&next, type, rec, &c);
	data = r == 0 ? json_dumps(rec, JSON_COMPACT) : NULL;
	json_decref(rec);
	if (r == 0 && !data)
		r = -ENOMEM;
	if (r == 0 && il->in_batch) {
		if (il->n_batch == il->cap_batch) {
			size_t cap = il->cap_batch ? il->cap_batch * 2 : 8;
			struct pending_rec *v = realloc(il->batch, cap * sizeof(*v));
			if (!v)
				r = -ENOMEM;
			else {
				il->batch = v;
				il->cap_batch = cap;
			}
		}
		if (r == 0) {
			il->batch[il->n_batch++] = (struct pending_rec){ .type = (uint16_t)type, .data = data, .len = strlen(data) };
			data = NULL;
		}
	} else if (r == 0) {
		struct recordlog_rec lr = { .type = (uint16_t)type, .data = data, .len = strlen(data) };
		r = recordlog_append(il->log, &lr, 1);
	}
	free(data);
	if (r < 0) {
		json_decref(next);
		return r;
	}
	json_decref(il->root);
	il->root = next;
	if (!il->in_batch)
		(void)maybe_compact(il); /* a failed compaction leaves the log valid: retried next time */
	return 0;
}

int intentlog_batch_begin(struct intentlog *il)
{
	if (il->in_batch)
		return -EBUSY;
	il->batch_saved = json_deep_copy(il->root);
	if (!il->batch_saved)
		return -ENOMEM;
	il->in_batch = true;
	return 0;
}

int intentlog_batch_end(struct intentlog *il)
{
	struct recordlog_rec *recs;
	int r = 0;

	if (!il->in_batch)
		return -EINVAL;
	if (il->n_batch > 0) {
		recs = calloc(il->n_batch, sizeof(*recs));
		if (!recs)
			r = -ENOMEM;
		for (size_t i = 0; recs && i < il->n_batch; i++)
			recs[i] = (struct recordlog_rec){ .type = il->batch[i].type, .data = il->batch[i].data,
							  .len = il->batch[i].len };
		if (recs)
			r = recordlog_append(il->log, recs, il->n_batch);
		free(recs);
	}
	for (size_t i = 0; i < il->n_batch; i++)
		free(il->batch[i].data);
	il->n_batch = 0;
	il->in_batch = false;
	if (r < 0) {
		json_decref(il->root);
		il->root = il->batch_saved;
	} else {
		json_decref(il->batch_saved);
	}
	il->batch_saved = NULL;
	if (r == 0)
		(void)maybe_compact(il);
	return r;
}

/* "status" and "outbox" members of a record. */
static int add_report(json_t *rec, json_t *status, const char *outbox_dest)
{
	if (!rec)
		return -ENOMEM;
	if ((status && !json_is_object(status)) || (outbox_dest && !msg_id_valid(outbox_dest)))
		return -EINVAL;
	if (json_object_set_new(rec, "status", status ? json_deep_copy(status) : json_null()) < 0 ||
	    json_object_set_new(rec, "outbox", outbox_dest ? json_string(outbox_dest) : json_null()) < 0)
		return -ENOMEM;
	return 0;
}

int intentlog_accept(struct intentlog *il, const char *source, const struct msg *m, enum msg_state state,
		     json_t *status, const char *outbox_dest)
{
	json_t *rec, *req;
	int r;

	if (!m || m->type == MSG_SYNC || !msg_id_valid(source) || !msg_id_valid(m->id) || m->generation == 0 ||
	    m->generation > MSG_GENERATION_MAX || (status && !json_is_object(status)) || (outbox_dest && !status))
		return -EINVAL;
	if (m->generation <= intentlog_last_generation(il, source))
		return -ESTALE;
	if (find_grant(il->root, m->id, NULL))
		return -EEXIST;
	req = msg_to_json(m);
	if (!req)
		return -ENOMEM;
	rec = json_pack("{s:s, s:s, s:o, s:o}", "source", source, "state", msg_state_name(state), "request", req,
			"time", now_json());
	r = add_report(rec, status, outbox_dest);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_ACCEPT, rec);
}

int intentlog_set_state(struct intentlog *il, const char *id, enum msg_state state, json_t *status,
			const char *outbox_dest)
{
	json_t *g = find_grant(il->root, id, NULL), *rec;
	int r;

	if (status && !json_is_object(status))
		return -EINVAL;
	if (!g)
		return -ENOENT;
	if (outbox_dest && !status && !json_is_object(json_object_get(g, "status")))
		return -EINVAL;
	rec = json_pack("{s:s, s:s, s:o}", "id", id, "state", msg_state_name(state), "time", now_json());
	r = add_report(rec, status, outbox_dest);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_STATE, rec);
}

int intentlog_intent(struct intentlog *il, const char *op, enum intentlog_dir dir,
		     const struct intentlog_target *blocks, size_t n, json_t *status, const char *outbox_dest)
{
	json_t *rec, *list;
	int r;

	if (!msg_id_valid(op) || (dir != ILOG_UP && dir != ILOG_DOWN) || n == 0 || !blocks ||
	    (outbox_dest && !status && !json_is_object(json_object_get(find_grant(il->root, op, NULL), "status"))))
		return -EINVAL;
	list = json_array();
	for (size_t i = 0; list && i < n; i++) {
		const struct intentlog_target *t = &blocks[i];
		if (t->block > INT64_MAX || t->memmap < -1 || t->memmap > 1 || (t->zone != MSG_ZONE_AUTO && !zone_word(t->zone))) {
			json_decref(list);
			return -EINVAL;
		}
		json_array_append_new(list, json_pack("{s:I, s:o, s:o}", "block", (json_int_t)t->block, "memmap",
						      t->memmap < 0 ? json_null() : json_boolean(t->memmap), "zone",
						      zone_word(t->zone) ? json_string(zone_word(t->zone)) : json_null()));
	}
	if (!list || json_array_size(list) != n) {
		json_decref(list);
		return -ENOMEM;
	}
	rec = json_pack("{s:s, s:s, s:o, s:o}", "op", op, "dir", dir == ILOG_UP ? "up" : "down", "blocks", list, "time",
			now_json());
	r = add_report(rec, status, outbox_dest);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_INTENT, rec);
}

static json_t *done_list(const struct intentlog_done *done, size_t n, bool zoned)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < n; i++) {
		json_t *e;
		if (done[i].block > INT64_MAX || (zoned && !zone_word(done[i].zone))) {
			json_decref(list);
			return NULL;
		}
		e = zoned ? json_pack("{s:I, s:s, s:b}", "block", (json_int_t)done[i].block, "zone", zone_word(done[i].zone),
				      "memmap", done[i].memmap)
			  : json_integer((json_int_t)done[i].block);
		if (json_array_append_new(list, e) < 0) {
			json_decref(list);
			return NULL;
		}
	}
	return list;
}

int intentlog_result(struct intentlog *il, const char *op, enum msg_state state, uint64_t applied_bytes,
		     const struct intentlog_done *done, size_t n, json_t *status, const char *outbox_dest)
{
	json_t *it = find_intent(il->root, op, NULL), *rec, *list;
	bool up = it && streq(str_of(it, "dir"), "up");
	int r;

	if (!msg_id_valid(op) || applied_bytes > INT64_MAX || (n && !done))
		return -EINVAL;
	if (!find_grant(il->root, op, NULL))
		return -ENOENT;
	if (outbox_dest && !status && !json_is_object(json_object_get(find_grant(il->root, op, NULL), "status")))
		return -EINVAL;
	list = done_list(done, n, up);
	if (!list)
		return -EINVAL;
	rec = json_pack("{s:s, s:s, s:I, s:o, s:o}", "op", op, "state", msg_state_name(state), "applied_bytes",
			(json_int_t)applied_bytes, "blocks", list, "time", now_json());
	r = add_report(rec, status, outbox_dest);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_RESULT, rec);
}

int intentlog_adopt(struct intentlog *il, const char *grant_id, const struct intentlog_done *blocks, size_t n,
		    uint64_t *seq)
{
	uint64_t first = u64_of(il->root, "next_block_seq");
	json_t *list;
	int r;

	if (!msg_id_valid(grant_id) || n == 0 || !blocks)
		return -EINVAL;
	if (!find_grant(il->root, grant_id, NULL))
		return -ENOENT;
	list = done_list(blocks, n, true);
	if (!list)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (find_owner(il->root, blocks[i].block, NULL)) {
			json_decref(list);
			return -EEXIST;
		}
	r = commit(il, ILOG_REC_ADOPT, json_pack("{s:s, s:o, s:o}", "grant", grant_id, "blocks", list, "time", now_json()));
	if (r == 0 && seq)
		*seq = first;
	return r;
}

int intentlog_release(struct intentlog *il, const uint64_t *blocks, size_t n)
{
	json_t *list = json_array();

	if (!list)
		return -ENOMEM;
	if (n == 0 || !blocks) {
		json_decref(list);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!find_owner(il->root, blocks[i], NULL)) {
			json_decref(list);
			return -ENOENT;
		}
		json_array_append_new(list, json_integer((json_int_t)blocks[i]));
	}
	return commit(il, ILOG_REC_RELEASE, json_pack("{s:o, s:o}", "blocks", list, "time", now_json()));
}

int intentlog_add_owned_block(struct intentlog *il, const char *grant_id, uint64_t block, enum msg_zone zone,
			      bool memmap, uint64_t *seq)
{
	struct intentlog_done d = { .block = block, .zone = zone, .memmap = memmap };
	json_t *g = find_grant(il->root, grant_id, NULL);

	if (!zone_word(zone) || block > INT64_MAX)
		return -EINVAL;
	if (!g)
		return -ENOENT;
	if (!streq(str_of(g, "type"), "grant"))
		return -EINVAL;
	return intentlog_adopt(il, grant_id, &d, 1, seq);
}

int intentlog_remove_owned_block(struct intentlog *il, uint64_t block)
{
	return intentlog_release(il, &block, 1);
}

int intentlog_outbox_push(struct intentlog *il, const char *dest, json_t *report, uint64_t *seq)
{
	json_t *d = json_object_get(json_object_get(il->root, "outbox"), dest);
	uint64_t next = d ? u64_of(d, "next_seq") : 1;
	int r;

	if (!msg_id_valid(dest) || !json_is_object(report))
		return -EINVAL;
	r = commit(il, ILOG_REC_OUTBOX_PUSH, json_pack("{s:s, s:O}", "dest", dest, "report", report));
	if (r == 0 && seq)
		*seq = next;
	return r;
}

int intentlog_outbox_ack(struct intentlog *il, const char *dest, uint64_t seq)
{
	json_t *items = json_object_get(json_object_get(json_object_get(il->root, "outbox"), dest), "items"), *it;
	size_t i;

	if (!msg_id_valid(dest) || seq == 0 || seq > INT64_MAX)
		return -EINVAL;
	json_array_foreach(items, i, it)
		if (u64_of(it, "seq") == seq)
			return commit(il, ILOG_REC_OUTBOX_ACK,
				      json_pack("{s:s, s:I}", "dest", dest, "seq", (json_int_t)seq));
	return -ENOENT;
}

int intentlog_begin_step(struct intentlog *il, const struct intentlog_step *step)
{
	struct intentlog_step s;

	if (!json_is_null(json_object_get(il->root, "step")))
		return -EBUSY;
	if (!step || !msg_id_valid(step->op) || !phase_valid(step->phase) || step->block > INT64_MAX ||
	    step->memmap < -1 || step->memmap > 1 ||
	    (step->kind != ILOG_STEP_BRING_UP && step->kind != ILOG_STEP_TAKE_DOWN) ||
	    (step->zone != MSG_ZONE_AUTO && !zone_word(step->zone)))
		return -EINVAL;
	if (!find_grant(il->root, step->op, NULL))
		return -ENOENT;
	s = *step;
	s.started = time(NULL);
	return commit(il, ILOG_REC_STEP, step_to_json(&s));
}

int intentlog_end_step(struct intentlog *il)
{
	if (json_is_null(json_object_get(il->root, "step")))
		return -ENOENT;
	return commit(il, ILOG_REC_STEP_END, json_object());
}

/* ---- reading ------------------------------------------------------------------------------------ */

uint64_t intentlog_last_generation(struct intentlog *il, const char *source)
{
	return u64_of(json_object_get(il->root, "sources"), source);
}

static int grant_fill(const json_t *g, struct intentlog_grant *out)
{
	const json_t *status = json_object_get(g, "status");

	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", str_of(g, "id"));
	snprintf(out->source, sizeof(out->source), "%s", str_of(g, "source"));
	out->type = streq(str_of(g, "type"), "revoke") ? MSG_REVOKE : MSG_GRANT;
	out->generation = u64_of(g, "generation");
	(void)msg_state_parse(str_of(g, "state"), &out->state);
	(void)msg_time_parse(str_of(g, "created"), &out->created);
	(void)msg_time_parse(str_of(g, "updated"), &out->updated);
	out->n_blocks = json_array_size(json_object_get(g, "blocks"));
	out->applied_bytes = u64_of(g, "applied_bytes");
	out->request = json_deep_copy(json_object_get(g, "request"));
	out->status = json_is_object(status) ? json_deep_copy(status) : NULL;
	if (!out->request || (json_is_object(status) && !out->status)) {
		intentlog_grant_done(out);
		return -ENOMEM;
	}
	return 0;
}

void intentlog_grant_done(struct intentlog_grant *g)
{
	if (!g)
		return;
	json_decref(g->request);
	json_decref(g->status);
	g->request = g->status = NULL;
}

int intentlog_lookup_generation(struct intentlog *il, const char *source, uint64_t generation,
				struct intentlog_grant *recorded)
{
	json_t *g;
	size_t i;

	if (!msg_id_valid(source))
		return -EINVAL;
	if (generation > intentlog_last_generation(il, source))
		return ILOG_GEN_NEW;
	json_array_foreach(json_object_get(il->root, "grants"), i, g) {
		if (streq(str_of(g, "source"), source) && u64_of(g, "generation") == generation) {
			if (recorded) {
				int r = grant_fill(g, recorded);
				if (r < 0)
					return r;
			}
			return ILOG_GEN_REPLAY;
		}
	}
	return ILOG_GEN_STALE;
}

int intentlog_get_grant(struct intentlog *il, const char *id, struct intentlog_grant *out)
{
	json_t *g = find_grant(il->root, id, NULL);

	return g ? grant_fill(g, out) : -ENOENT;
}

void intentlog_grants_free(struct intentlog_grant *g, size_t n)
{
	for (size_t i = 0; g && i < n; i++)
		intentlog_grant_done(&g[i]);
	free(g);
}

int intentlog_list_grants(struct intentlog *il, struct intentlog_grant **out, size_t *n)
{
	json_t *grants = json_object_get(il->root, "grants"), *g;
	size_t count = json_array_size(grants), i;
	struct intentlog_grant *list = calloc(count ? count : 1, sizeof(*list));

	if (!list)
		return -ENOMEM;
	json_array_foreach(grants, i, g) {
		int r = grant_fill(g, &list[i]);
		if (r < 0) {
			intentlog_grants_free(list, i);
			return r;
		}
	}
	*out = list;
	*n = count;
	return 0;
}

json_t *intentlog_grant_json(struct intentlog *il, const char *id)
{
	json_t *g = find_grant(il->root, id, NULL);

	return g ? json_deep_copy(g) : NULL;
}

json_t *intentlog_grants_json(struct intentlog *il)
{
	return json_deep_copy(json_object_get(il->root, "grants"));
}

json_t *intentlog_state_json(struct intentlog *il)
{
	return json_deep_copy(il->root);
}

static void block_fill(const json_t *g, const json_t *b, struct intentlog_block *out)
{
	memset(out, 0, sizeof(*out));
	out->block = u64_of(b, "block");
	out->seq = u64_of(b, "seq");
	(void)zone_parse(str_of(b, "zone"), &out->zone);
	out->memmap = json_is_true(json_object_get(b, "memmap"));
	snprintf(out->grant_id, sizeof(out->grant_id), "%s", str_of(g, "id"));
}

int intentlog_find_owned_block(struct intentlog *il, uint64_t block, struct intentlog_block *out)
{
	size_t k;
	json_t *g = find_owner(il->root, block, &k);

	if (!g)
		return -ENOENT;
	if (out)
		block_fill(g, json_array_get(json_object_get(g, "blocks"), k), out);
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct intentlog_block *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int intentlog_owned_blocks(struct intentlog *il, struct intentlog_block **out, size_t *n)
{
	json_t *grants = json_object_get(il->root, "grants"), *g, *b;
	struct intentlog_block *list;
	size_t count = 0, i, k;

	json_array_foreach(grants, i, g)
		count += json_array_size(json_object_get(g, "blocks"));
	list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	count = 0;
	json_array_foreach(grants, i, g)
		json_array_foreach(json_object_get(g, "blocks"), k, b)
			block_fill(g, b, &list[count++]);
	qsort(list, count, sizeof(*list), by_seq);
	*out = list;
	*n = count;
	return 0;
}

void intentlog_intents_free(struct intentlog_intent *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].blocks);
	free(v);
}

int intentlog_open_intents(struct intentlog *il, struct intentlog_intent **out, size_t *n)
{
	json_t *intents = json_object_get(il->root, "intents"), *it, *b;
	size_t count = json_array_size(intents), i, k;
	struct intentlog_intent *v = calloc(count ? count : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	json_array_foreach(intents, i, it) {
		json_t *blocks = json_object_get(it, "blocks");
		snprintf(v[i].op, sizeof(v[i].op), "%s", str_of(it, "op"));
		v[i].dir = streq(str_of(it, "dir"), "up") ? ILOG_UP : ILOG_DOWN;
		(void)msg_time_parse(str_of(it, "started"), &v[i].started);
		v[i].blocks = calloc(json_array_size(blocks) + 1, sizeof(*v[i].blocks));
		if (!v[i].blocks) {
			intentlog_intents_free(v, i);
			return -ENOMEM;
		}
		json_array_foreach(blocks, k, b)
			(void)target_from_json(b, &v[i].blocks[k]);
		v[i].n_blocks = json_array_size(blocks);
	}
	*out = v;
	*n = count;
	return 0;
}

int intentlog_pending_step(struct intentlog *il, struct intentlog_step *out)
{
	json_t *s = json_object_get(il->root, "step");
	struct intentlog_step tmp;

	if (json_is_null(s))
		return -ENOENT;
	return step_from_json(s, out ? out : &tmp) < 0 ? -EBADMSG : 0;
}

int intentlog_outbox_peek(struct intentlog *il, const char *dest, uint64_t *seq, json_t **report)
{
	json_t *items = json_object_get(json_object_get(json_object_get(il->root, "outbox"), dest), "items");
	json_t *first = json_array_get(items, 0);

	if (!first)
		return -ENOENT;
	if (report) {
		*report = json_deep_copy(json_object_get(first, "report"));
		if (!*report)
			return -ENOMEM;
	}
	if (seq)
		*seq = u64_of(first, "seq");
	return 0;
}

size_t intentlog_outbox_count(struct intentlog *il, const char *dest)
{
	return json_array_size(json_object_get(json_object_get(json_object_get(il->root, "outbox"), dest), "items"));
}

void intentlog_stats(struct intentlog *il, struct intentlog_stats *out)
{
	struct recordlog_stats st;

	recordlog_stats(il->log, &st);
	*out = (struct intentlog_stats){ .log_bytes = st.size, .bytes_written = st.bytes_written, .syncs = st.syncs,
					 .compactions = il->compactions };
}
