/* SPDX-License-Identifier: MIT */
/*
 * The intent log's live state tree: small helpers, the validation of a
 * whole tree (a snapshot), the records applied to
 * it (live and at replay), and the replay of a log image.
 */
#include "agent/journal/intentlog_impl.h"

#include <ctype.h>
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

/* ---- small helpers ------------------------------------------------------------- */

json_t *ilog_u64_json(uint64_t v)
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

uint64_t ilog_u64_of(const json_t *o, const char *key)
{
	json_int_t i = json_integer_value(json_object_get(o, key));
	return i < 0 ? 0 : (uint64_t)i;
}

const char *ilog_str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

const char *ilog_zone_word(enum mem_zone z)
{
	return z == MEM_ZONE_MOVABLE ? "movable" : z == MEM_ZONE_NORMAL ? "normal" : NULL;
}

int ilog_zone_parse(const char *s, enum mem_zone *out)
{
	if (streq(s, "movable"))
		*out = MEM_ZONE_MOVABLE;
	else if (streq(s, "normal"))
		*out = MEM_ZONE_NORMAL;
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
		[ILOG_REC_OUTBOX_ACK] = "outbox_ack",
	};
	return type < ARRAY_SIZE(names) && names[type] ? names[type] : "unknown";
}

json_t *ilog_find_grant(json_t *root, const char *id, size_t *idx)
{
	json_t *g;
	size_t i;

	json_array_foreach(json_object_get(root, "grants"), i, g) {
		if (streq(ilog_str_of(g, "id"), id)) {
			if (idx)
				*idx = i;
			return g;
		}
	}
	return NULL;
}

json_t *ilog_find_owner(json_t *root, uint64_t block, size_t *bidx)
{
	json_t *g, *b;
	size_t i, k;

	json_array_foreach(json_object_get(root, "grants"), i, g) {
		json_array_foreach(json_object_get(g, "blocks"), k, b) {
			if (ilog_u64_of(b, "block") == block) {
				if (bidx)
					*bidx = k;
				return g;
			}
		}
	}
	return NULL;
}

json_t *ilog_find_intent(json_t *root, const char *op, size_t *idx)
{
	json_t *it;
	size_t i;

	json_array_foreach(json_object_get(root, "intents"), i, it) {
		if (streq(ilog_str_of(it, "op"), op)) {
			if (idx)
				*idx = i;
			return it;
		}
	}
	return NULL;
}

json_t *ilog_grant_writable(json_t *root, size_t idx)
{
	json_t *grants = json_object_get(root, "grants"), *g = json_array_get(grants, idx), *c, *blocks;

	if (!g)
		return NULL;
	/* the grant's own object and list of blocks; its request, status and
	 * block entries stay shared: no record changes them in place */
	c = json_copy(g);
	blocks = c ? json_copy(json_object_get(g, "blocks")) : NULL;
	if (!blocks || json_object_set_new(c, "blocks", blocks) < 0 || json_array_set_new(grants, idx, c) < 0) {
		json_decref(c);
		return NULL;
	}
	return c;
}

/* A time member of a record, as stored in the tree. */
static json_t *time_of(const json_t *rec)
{
	const char *t = ilog_str_of(rec, "time");
	time_t v;

	return t && msg_time_parse(t, &v) == 0 ? json_string(t) : NULL;
}

static bool time_of_ok(const json_t *rec)
{
	const char *t = ilog_str_of(rec, "time");
	time_t v;

	return t && msg_time_parse(t, &v) == 0;
}

json_t *ilog_now_json(void)
{
	char buf[32];

	msg_time_format(time(NULL), buf);
	return json_string(buf);
}

json_t *ilog_empty_root(void)
{
	return json_pack("{s:i, s:i, s:i, s:{}, s:[], s:{}, s:[]}", "version", STATE_VERSION, "next_order", 0,
			 "next_block_seq", 1, "sources", "grants", "outbox", "intents");
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
		out->v[out->n++] = json_is_integer(b) ? (uint64_t)json_integer_value(b) : ilog_u64_of(b, "block");
	qsort(out->v, out->n, sizeof(*out->v), u64_cmp);
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
			out->v[out->n++] = ilog_u64_of(b, "block");
	qsort(out->v, out->n, sizeof(*out->v), u64_cmp);
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
	return s->n && bsearch(&id, s->v, s->n, sizeof(*s->v), u64_cmp);
}

/* ---- validation of a whole state (a snapshot) ----------------------- */

/* One target of an intent: {block, memmap: bool|null, zone: "movable"|"normal"|null}. */
int ilog_target_from_json(const json_t *b, struct intentlog_target *t)
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
		t->zone = MEM_ZONE_AUTO;
	else if (ilog_zone_parse(json_string_value(zone), &t->zone) < 0)
		return -EINVAL;
	return 0;
}

static int check_intent(json_t *root, const json_t *it, size_t i, char *err, size_t errlen)
{
	const char *op = ilog_str_of(it, "op"), *dir = ilog_str_of(it, "dir");
	json_t *b, *blocks = json_object_get(it, "blocks");
	struct intentlog_target t;
	size_t k, n;
	time_t when;

	if (!json_is_object(it) || !msg_id_valid(op) || !ilog_find_grant(root, op, NULL))
		return errbuf_set(err, errlen, -EBADMSG, "intents[%zu]: missing op or one the journal does not know", i);
	if (ilog_find_intent(root, op, &n) && n != i)
		return errbuf_set(err, errlen, -EBADMSG, "operation \"%s\" has two open intents", op);
	if (!streq(dir, "up") && !streq(dir, "down"))
		return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": \"dir\" is not up or down", op);
	if (!ilog_str_of(it, "started") || msg_time_parse(ilog_str_of(it, "started"), &when) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": invalid \"started\"", op);
	if (!json_is_array(blocks) || json_array_size(blocks) == 0)
		return errbuf_set(err, errlen, -EBADMSG, "intent of \"%s\": no blocks", op);
	json_array_foreach(blocks, k, b)
		if (ilog_target_from_json(b, &t) < 0)
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
	const char *id = ilog_str_of(g, "id"), *source = ilog_str_of(g, "source"), *type = ilog_str_of(g, "type");
	json_t *req = json_object_get(g, "request"), *status = json_object_get(g, "status");
	json_t *blocks = json_object_get(g, "blocks"), *b, *ab = json_object_get(g, "applied_bytes");
	struct msg_error merr;
	struct msg *m = NULL;
	enum msg_state st;
	uint64_t gen, order, last, v;
	enum mem_zone z;
	time_t t;
	size_t k;
	int r;

	if (!json_is_object(g) || !msg_id_valid(id))
		return errbuf_set(err, errlen, -EBADMSG, "grants[%zu]: missing or invalid \"id\"", i);
	if (ilog_find_grant(root, id, &k) && k != i)
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
	if (msg_state_parse(ilog_str_of(g, "state"), &st) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"state\"", id);
	if (!json_is_null(status) && !json_is_object(status))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"status\" is neither an object nor null", id);
	if (json_is_object(status) && report_runs_check(status, NULL, 0) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"status\" has invalid \"block_runs\"", id);
	if (ab && !get_u64(g, "applied_bytes", 0, INT64_MAX, &v))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"applied_bytes\"", id);
	if (!ilog_str_of(g, "created") || msg_time_parse(ilog_str_of(g, "created"), &t) < 0 || !ilog_str_of(g, "updated") ||
	    msg_time_parse(ilog_str_of(g, "updated"), &t) < 0)
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
					  ilog_u64_of(b, "block"));
		if (ilog_zone_parse(ilog_str_of(b, "zone"), &z) < 0 || !json_is_boolean(json_object_get(b, "memmap")))
			return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\", block %" PRIu64 ": invalid zone or memmap",
					  id, ilog_u64_of(b, "block"));
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
			if (!get_u64(it, "seq", prev + 1, next - 1, &seq) || !json_is_object(json_object_get(it, "report")) ||
			    report_runs_check(json_object_get(it, "report"), NULL, 0) < 0)
				return errbuf_set(err, errlen, -EBADMSG,
						  "outbox \"%s\", item %zu: sequence out of order or report missing", dest, i);
			prev = seq;
		}
	}
	return 0;
}

int ilog_check_root(json_t *root, char *err, size_t errlen)
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
		return errbuf_set(err, errlen, -EBADMSG, "version %" PRIu64 " is not the version %d this memgrantd reads%s",
				  version, STATE_VERSION,
				  version > STATE_VERSION ? ": a newer memgrant wrote it; upgrade memgrant" : "");
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
	if (r < 0)
		return r;
	if (!json_is_array(json_object_get(root, "intents")))
		return errbuf_set(err, errlen, -EBADMSG, "\"intents\" is not an array");
	json_array_foreach(json_object_get(root, "intents"), i, g) {
		r = check_intent(root, g, i, err, errlen);
		if (r < 0)
			return r;
	}
	/* 0.1.0 wrote "step": null into its snapshots; a marker is older than
	 * 0.1.0, whose journals are not read */
	v = json_object_get(root, "step");
	if (v && !json_is_null(v))
		return errbuf_set(err, errlen, -EBADMSG,
				  "a one-block step marker: a journal of a memgrant before 0.1.0, which this version "
				  "does not read");
	json_object_del(root, "step");
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

/* Finished records owning nothing, with no intent, beyond history_max go. */
static void prune(json_t *root, unsigned history_max)
{
	json_t *grants = json_object_get(root, "grants");
	size_t finished = 0;

	for (size_t i = json_array_size(grants); i-- > 0;) {
		json_t *g = json_array_get(grants, i);
		enum msg_state st;

		if (msg_state_parse(ilog_str_of(g, "state"), &st) < 0 || !msg_state_is_final(st) ||
		    json_array_size(json_object_get(g, "blocks")) > 0 ||
		    ilog_find_intent(root, ilog_str_of(g, "id"), NULL))
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
	seq = ilog_u64_of(d, "next_seq");
	item = json_pack("{s:I, s:O}", "seq", (json_int_t)seq, "report", report);
	if (!item || json_array_append_new(items, item) < 0 || json_object_set_new(d, "next_seq", ilog_u64_json(seq + 1)) < 0)
		return -ENOMEM;
	if (seq_out)
		*seq_out = seq;
	return 0;
}

/* A record's "events": [{"dest", "report"}], what subscribers queued with its
 * status (intentlog_subscribe()).  An event for a full outbox is dropped, the
 * same way at every replay: it never holds back the status it came with. */
static int apply_events(json_t *root, const json_t *events, struct apply_ctx *c)
{
	const json_t *ev;
	size_t i;
	int r;

	if (!events || json_is_null(events))
		return 0;
	if (!json_is_array(events))
		return fail(c, -EINVAL, "\"events\" is not an array");
	json_array_foreach(events, i, ev) {
		const char *dest = ilog_str_of(ev, "dest");
		json_t *doc = json_object_get(ev, "report");

		if (!msg_id_valid(dest) || !json_is_object(doc))
			return fail(c, -EINVAL, "events[%zu] is not {\"dest\": destination, \"report\": object}", i);
		r = outbox_add(root, c->outbox_max, dest, doc, NULL);
		if (r < 0 && r != -ENOBUFS)
			return fail(c, r, "cannot queue events[%zu] for \"%s\"", i, dest);
	}
	return 0;
}

/* The "status" and "outbox" members common to accept/state/intent/result:
 * replaces G's status when REC has one, queues it for REC's "outbox". */
static int apply_report(json_t *root, json_t *g, const json_t *rec, struct apply_ctx *c)
{
	json_t *status = json_object_get(rec, "status");
	const char *dest = ilog_str_of(rec, "outbox");
	int r;

	if (status && !json_is_null(status)) {
		if (!json_is_object(status))
			return fail(c, -EINVAL, "\"status\" is not an object");
		r = report_runs_check(status, c->err, c->errlen);
		if (r < 0)
			return r;
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
	return apply_events(root, json_object_get(rec, "events"), c);
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
	const char *source = ilog_str_of(rec, "source");
	json_t *req = json_object_get(rec, "request"), *g, *t;
	struct msg_error merr;
	_cleanup_msg_ struct msg *m = NULL;
	enum msg_state st;

	if (!msg_id_valid(source))
		return fail(c, -EINVAL, "missing or invalid \"source\"");
	if (msg_state_parse(ilog_str_of(rec, "state"), &st) < 0)
		return fail(c, -EINVAL, "invalid \"state\"");
	if (msg_from_json(req, &m, &merr) < 0)
		return fail(c, -EINVAL, "invalid request: %s", merr.message);
	if (m->type == MSG_SYNC)
		return fail(c, -EINVAL, "a sync message is not recorded");
	if (m->generation <= ilog_u64_of(json_object_get(root, "sources"), source))
		return fail(c, -ESTALE, "generation %" PRIu64 " of \"%s\" is not above the last of source \"%s\"",
			    m->generation, m->id, source);
	if (ilog_grant_known(root, c->history, m->id))
		return fail(c, -EEXIST, "id \"%s\" is already recorded", m->id);
	t = time_of(rec);
	if (!t)
		return fail(c, -EINVAL, "missing or invalid \"time\"");
	g = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:O, s:n, s:O, s:o, s:[], s:i}", "id", m->id, "source", source,
		      "type", msg_type_name(m->type), "generation", (json_int_t)m->generation, "order",
		      (json_int_t)ilog_u64_of(root, "next_order"), "state", msg_state_name(st), "request", req, "status",
		      "created", t, "updated", t, "blocks", "applied_bytes", 0);
	if (!g || json_array_append_new(json_object_get(root, "grants"), g) < 0)
		return -ENOMEM;
	if (json_object_set_new(json_object_get(root, "sources"), source, ilog_u64_json(m->generation)) < 0 ||
	    json_object_set_new(root, "next_order", ilog_u64_json(ilog_u64_of(root, "next_order") + 1)) < 0)
		return -ENOMEM;
	return apply_report(root, g, rec, c);
}

static int apply_state(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *id = ilog_str_of(rec, "id");
	size_t idx = 0;
	json_t *g = ilog_grant_find_or_revive(root, c, id, &idx);
	enum msg_state st;
	int r;

	if (!g)
		return fail(c, -ENOENT, "unknown operation \"%.64s\"", id ? id : "");
	if (msg_state_parse(ilog_str_of(rec, "state"), &st) < 0)
		return fail(c, -EINVAL, "invalid \"state\"");
	g = ilog_grant_writable(root, idx);
	if (!g || json_object_set_new(g, "state", json_string(msg_state_name(st))) < 0)
		return -ENOMEM;
	r = set_updated(g, rec, c);
	return r < 0 ? r : apply_report(root, g, rec, c);
}

static int apply_intent(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *op = ilog_str_of(rec, "op"), *dir = ilog_str_of(rec, "dir");
	size_t idx = 0;
	json_t *g = ilog_grant_find_or_revive(root, c, op, &idx), *blocks = json_object_get(rec, "blocks"), *it, *b, *t;
	struct intentlog_target tg;
	size_t k;
	int r;

	if (!g)
		return fail(c, -ENOENT, "unknown operation \"%.64s\"", op ? op : "");
	if (ilog_find_intent(root, op, NULL))
		return fail(c, -EBUSY, "operation \"%s\" already has an open intent", op);
	if (!streq(dir, "up") && !streq(dir, "down"))
		return fail(c, -EINVAL, "\"dir\" is not up or down");
	if (!json_is_array(blocks) || json_array_size(blocks) == 0)
		return fail(c, -EINVAL, "an intent names at least one block");
	json_array_foreach(blocks, k, b)
		if (ilog_target_from_json(b, &tg) < 0)
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
	g = ilog_grant_writable(root, idx);
	if (!g || json_object_set_new(g, "state", json_string(msg_state_name(MSG_STATE_IN_PROGRESS))) < 0)
		return -ENOMEM;
	r = set_updated(g, rec, c);
	return r < 0 ? r : apply_report(root, g, rec, c);
}

/* BLOCK becomes G's with the next seq. */
static int own_block(json_t *root, json_t *g, uint64_t block, const char *zone, bool memmap, uint64_t *seq)
{
	uint64_t s = ilog_u64_of(root, "next_block_seq");
	json_t *b = json_pack("{s:I, s:I, s:s, s:b}", "block", (json_int_t)block, "seq", (json_int_t)s, "zone", zone,
			      "memmap", memmap);

	if (!b || json_array_append_new(json_object_get(g, "blocks"), b) < 0 ||
	    json_object_set_new(root, "next_block_seq", ilog_u64_json(s + 1)) < 0)
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
	enum mem_zone z;
	uint64_t id;
	int64_t dup;

	if (!json_is_array(list))
		return fail(c, -EINVAL, "\"blocks\" is not an array");
	json_array_foreach(list, k, b)
		if (zoned ? !get_u64(b, "block", 0, INT64_MAX, &id) || ilog_zone_parse(ilog_str_of(b, "zone"), &z) < 0 ||
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
				    ilog_str_of(intent, "op"));
		if (zoned && idset_has(&owned, ids.v[i]))
			return fail(c, -EEXIST, "block %" PRIu64 " is already owned by \"%s\"", ids.v[i],
				    ilog_str_of(ilog_find_owner(root, ids.v[i], NULL), "id"));
	}
	return 0;
}

/* Whoever owns one of IDS no longer does (one pass over all owned blocks);
 * with WHEN (a record with a valid "time") each grant that lost one was
 * updated then. */
static int disown_blocks(json_t *root, const json_t *list, const json_t *when)
{
	_cleanup_(idset_free) struct idset ids = { 0 };
	json_t *g;
	size_t i;

	if (idset_of(list, &ids) < 0)
		return -ENOMEM;
	json_array_foreach(json_object_get(root, "grants"), i, g) {
		json_t *blocks = json_object_get(g, "blocks");
		bool own = false;

		for (size_t k = json_array_size(blocks); k-- > 0;) {
			if (!idset_has(&ids, ilog_u64_of(json_array_get(blocks, k), "block")))
				continue;
			if (!own) {
				g = ilog_grant_writable(root, i);
				if (!g || (when && json_object_set_new(g, "updated", time_of(when)) < 0))
					return -ENOMEM;
				blocks = json_object_get(g, "blocks");
				own = true;
			}
			json_array_remove(blocks, k);
		}
	}
	return 0;
}

static int apply_result(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *op = ilog_str_of(rec, "op");
	size_t gidx = 0;
	json_t *g = ilog_grant_find_or_revive(root, c, op, &gidx), *done = json_object_get(rec, "blocks"), *it, *b;
	enum msg_state st;
	uint64_t applied;
	size_t idx = 0, k;
	bool up;
	int r = 0;

	if (!g)
		return fail(c, -ENOENT, "unknown operation \"%.64s\"", op ? op : "");
	if (msg_state_parse(ilog_str_of(rec, "state"), &st) < 0)
		return fail(c, -EINVAL, "invalid \"state\"");
	if (!get_u64(rec, "applied_bytes", 0, INT64_MAX, &applied))
		return fail(c, -EINVAL, "invalid \"applied_bytes\"");
	it = ilog_find_intent(root, op, &idx);
	if (!it && json_array_size(done) > 0)
		return fail(c, -EINVAL, "\"%s\" reports blocks done but has no open intent", op);
	up = it && streq(ilog_str_of(it, "dir"), "up");
	if (up && !streq(ilog_str_of(g, "type"), "grant"))
		return fail(c, -EINVAL, "revocation \"%s\" cannot own blocks", op);
	if (done && !json_is_null(done)) {
		r = check_block_list(root, done, up, it, c);
		if (r < 0)
			return r;
	}
	g = ilog_grant_writable(root, gidx);
	if (!g)
		return -ENOMEM;
	if (up) {
		json_array_foreach(done, k, b) {
			r = own_block(root, g, ilog_u64_of(b, "block"), ilog_str_of(b, "zone"), json_is_true(json_object_get(b, "memmap")),
				      NULL);
			if (r < 0)
				return r;
		}
	} else if (json_array_size(done) > 0) {
		r = disown_blocks(root, done, NULL);
		if (r < 0)
			return r;
	}
	if (it && json_array_remove(json_object_get(root, "intents"), idx) < 0)
		return -ENOMEM;
	/* disown_blocks() may have replaced it with another copy of its own */
	g = json_array_get(json_object_get(root, "grants"), gidx);
	if (json_object_set_new(g, "state", json_string(msg_state_name(st))) < 0 ||
	    json_object_set_new(g, "applied_bytes", ilog_u64_json(applied)) < 0)
		return -ENOMEM;
	r = set_updated(g, rec, c);
	return r < 0 ? r : apply_report(root, g, rec, c);
}

static int apply_adopt(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *id = ilog_str_of(rec, "grant");
	size_t idx = 0;
	json_t *g = ilog_grant_find_or_revive(root, c, id, &idx), *list = json_object_get(rec, "blocks"), *b;
	size_t k;
	int r;

	if (!g)
		return fail(c, -ENOENT, "unknown grant \"%.64s\"", id ? id : "");
	if (!streq(ilog_str_of(g, "type"), "grant"))
		return fail(c, -EINVAL, "\"%s\" is a revocation: it cannot own blocks", id);
	if (json_array_size(list) == 0)
		return fail(c, -EINVAL, "nothing to adopt");
	r = check_block_list(root, list, true, NULL, c);
	if (r < 0)
		return r;
	g = ilog_grant_writable(root, idx);
	if (!g)
		return -ENOMEM;
	json_array_foreach(list, k, b) {
		r = own_block(root, g, ilog_u64_of(b, "block"), ilog_str_of(b, "zone"), json_is_true(json_object_get(b, "memmap")),
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
	json_array_foreach(list, k, b)
		if (!ilog_find_owner(root, (uint64_t)json_integer_value(b), NULL))
			return fail(c, -ENOENT, "block %" JSON_INTEGER_FORMAT " is not owned", json_integer_value(b));
	if (!time_of_ok(rec))
		return fail(c, -EINVAL, "missing or invalid \"time\"");
	return disown_blocks(root, list, rec);
}

static int apply_outbox_push(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *dest = ilog_str_of(rec, "dest");
	int r = outbox_add(root, c->outbox_max, dest, json_object_get(rec, "report"), NULL);

	if (r == -ENOBUFS)
		return fail(c, r, "outbox \"%s\" is full", dest);
	return r == -EINVAL ? fail(c, r, "bad destination or report") : r;
}

static int apply_outbox_ack(json_t *root, const json_t *rec, struct apply_ctx *c)
{
	const char *dest = ilog_str_of(rec, "dest");
	json_t *items = json_object_get(json_object_get(json_object_get(root, "outbox"), dest), "items"), *it;
	uint64_t seq;
	size_t i;

	if (!msg_id_valid(dest) || !get_u64(rec, "seq", 1, INT64_MAX, &seq))
		return fail(c, -EINVAL, "bad destination or sequence");
	json_array_foreach(items, i, it)
		if (ilog_u64_of(it, "seq") == seq)
			return json_array_remove(items, i) < 0 ? -ENOMEM : 0;
	return fail(c, -ENOENT, "report %" PRIu64 " for \"%s\" is not queued", seq, dest);
}

/* Applies one record to ROOT (in place; on failure ROOT may be half changed:
 * callers apply to a copy). SNAPSHOT replaces *ROOTP. */
int ilog_apply(json_t **rootp, unsigned type, json_t *rec, struct apply_ctx *c)
{
	int r;

	if (!json_is_object(rec))
		return fail(c, -EINVAL, "payload is not a JSON object");
	switch (type) {
	case ILOG_REC_SNAPSHOT:
		r = ilog_check_root(rec, c->err, c->errlen);
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
	case 10:
	case 11:
		return fail(c, -EINVAL, "unknown record type %u: the step marker of a memgrant before 0.1.0, not read; "
			    "move journal.log aside (memgrantd then starts fresh and names the blocks it finds online "
			    "for `memgrantctl adopt`)", type);
	default:
		return fail(c, -EINVAL, "unknown record type %u: a newer memgrant wrote it; upgrade memgrant", type);
	}
	if (r == 0)
		prune(*rootp, c->history_max);
	return r;
}

/* ---- replay ------------------------------------------------------------------------------- */

int ilog_replay_cb(void *ctx, uint64_t offset, uint16_t type, const void *data, size_t len)
{
	struct replay *rp = ctx;
	char why[320] = "";
	struct apply_ctx c = { .history_max = rp->history_max, .outbox_max = SIZE_MAX, .err = why, .errlen = sizeof(why) };
	_cleanup_json_ json_t *rec = NULL;
	json_error_t jerr;
	int r;

	rec = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!rec) {
		/* jansson quotes the bytes it stopped at: keep the line printable */
		for (char *p = jerr.text; *p; p++)
			if (!isprint((unsigned char)*p))
				*p = '?';
		return errbuf_set(rp->err, rp->errlen, -EBADMSG, "record at byte offset %" PRIu64 " (%s): not JSON: %s",
				  offset, rec_name(type), jerr.text);
	}
	r = ilog_apply(&rp->root, type, rec, &c);
	if (r < 0)
		return errbuf_set(rp->err, rp->errlen, -EBADMSG, "record at byte offset %" PRIu64 " (%s): %s", offset,
				  rec_name(type), why[0] ? why : strerror(-r));
	return 0;
}

int intentlog_replay_image(const void *buf, size_t len, json_t **state, char *err, size_t errlen)
{
	struct replay rp = { .root = ilog_empty_root(), .history_max = INTENTLOG_HISTORY_DEFAULT, .err = err, .errlen = errlen };
	struct recordlog_scan scan;
	char why[512] = "";
	int r;

	if (!rp.root)
		return -ENOMEM;
	r = recordlog_scan(buf, len, ilog_replay_cb, &rp, &scan, why, sizeof(why));
	if (r < 0) {
		json_decref(rp.root);
		if (why[0])
			errbuf_set(err, errlen, r, "%s", why);
		return r;
	}
	*state = rp.root;
	return 0;
}
