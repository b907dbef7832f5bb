/* SPDX-License-Identifier: MIT */
/*
 * The service's journal: STATE_DIR/<domain>.serve.json, one small JSON
 * object per domain, rewritten with file_write_atomic() (write, fsync,
 * rename, fsync the folder) before every action it describes: the intent
 * first, then the hypervisor call or the message to the guest.  After a
 * crash the service finds the phase it was in and the id and generation of
 * the operation, and replays that operation with the same id and generation
 * (the agent answers a replay with what it recorded: nothing is granted
 * twice), then reconciles with the device's live size and the agent's own
 * count (serve_ctl.c).
 *
 * {"domain": "vm", "granted": 268435456, "phase": "granting",
 *  "op": {"id": "mgs-7", "generation": 7, "bytes": 268435456, "target": 268435456,
 *         "range": {"start": 4294967296, "size": 268435456, "alias": "dimm0"}},
 *  "ranges": [{"start": ..., "size": ..., "alias": ...}],
 *  "timing": {"clock": "monotonic", "grow_ok_at": 123456789, "shrink_ok_at": 123486789,
 *             "backoff": 0, "grow_backoff": 0},
 *  "counts": {"grows": 3, "shrinks": 2, "plugs": 3, "unplugs": 2, ...}}
 *
 * "timing" and "counts" keep the cooldowns and counters across restarts; a
 * journal without them (older versions) is read as before.
 */
#include <stdio.h>
#include <string.h>

#include "lib/fileio.h"
#include "lib/json.h"
#include "lib/util.h"
#include "providers/host/host.h"
#include "providers/host/serve/serve.h"

#define JOURNAL_MAX 65536

static const char *const phase_names[] = {
	[PH_IDLE] = "idle", [PH_PLUGGING] = "plugging", [PH_GRANTING] = "granting",
	[PH_REVOKING] = "revoking", [PH_UNPLUGGING] = "unplugging",
};

const char *dom_phase_name(enum dom_phase ph)
{
	return (unsigned)ph < ARRAY_SIZE(phase_names) ? phase_names[ph] : "?";
}

static json_t *range_json(const struct hv_range *r)
{
	return json_pack("{s:I,s:I,s:s,s:s}", "start", (json_int_t)r->start, "size", (json_int_t)r->size, "alias",
			 r->alias, "grant", r->grant);
}

static int range_from(json_t *j, struct hv_range *r)
{
	json_t *s = json_object_get(j, "start"), *z = json_object_get(j, "size");
	const char *a = json_string_value(json_object_get(j, "alias"));
	const char *g = json_string_value(json_object_get(j, "grant"));

	if (!json_is_integer(s) || !json_is_integer(z) || !a || json_integer_value(s) < 0 ||
	    json_integer_value(z) <= 0 || strlen(a) >= sizeof(r->alias))
		return -EBADMSG;
	r->start = (uint64_t)json_integer_value(s);
	r->size = (uint64_t)json_integer_value(z);
	snprintf(r->alias, sizeof(r->alias), "%s", a);
	snprintf(r->grant, sizeof(r->grant), "%s", g && msg_id_valid(g) ? g : "");
	return 0;
}

#define COUNT_FIELDS(X)                                                                              \
	X(grows) X(shrinks) X(plugs) X(unplugs) X(requests) X(offers) X(refused_floor) X(failed_revokes)  \
	X(not_onlined)

static json_t *counts_json(const struct serve_counts *k)
{
	json_t *o = json_object();

#define SET_COUNT(f) json_object_set_new(o, #f, json_integer((json_int_t)k->f));
	if (o) {
		COUNT_FIELDS(SET_COUNT)
	}
#undef SET_COUNT
	return o;
}

/* Missing fields stay 0; a field present must be a non-negative integer. */
static int counts_from(json_t *o, struct serve_counts *k)
{
	json_t *v;

#define GET_COUNT(f)                                                                                  \
	v = json_object_get(o, #f);                                                                   \
	if (v && (!json_is_integer(v) || json_integer_value(v) < 0))                                 \
		return -EBADMSG;                                                                      \
	k->f = v ? (uint64_t)json_integer_value(v) : 0;
	COUNT_FIELDS(GET_COUNT)
#undef GET_COUNT
	return 0;
}

static int timing_from(json_t *t, struct dom_record *out)
{
	static const char *const keys[] = { "grow_ok_at", "shrink_ok_at", "backoff", "grow_backoff" };
	int64_t *dst[] = { &out->grow_ok_at, &out->shrink_ok_at, &out->backoff, &out->grow_backoff };

	if (!json_is_object(t) || !streq(json_string_value(json_object_get(t, "clock")) ?: "", "monotonic"))
		return -EBADMSG;
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		json_t *v = json_object_get(t, keys[i]);
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return -EBADMSG;
		*dst[i] = (int64_t)json_integer_value(v);
	}
	return 0;
}

int serve_journal_store(const char *state_dir, const char *domain, const struct dom_record *r,
			char *why, size_t why_len)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	_cleanup_json_ json_t *o = NULL;
	json_t *ranges;
	int e;

	if (host_state_path(state_dir, domain, ".serve.json", &path) < 0)
		return -ENOMEM;
	o = json_pack("{s:s,s:I,s:s}", "domain", domain, "granted", (json_int_t)r->granted, "phase",
		      dom_phase_name(r->phase));
	ranges = json_array();
	if (!o || !ranges) {
		json_decref(ranges);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->n_ranges; i++)
		json_array_append_new(ranges, range_json(&r->ranges[i]));
	json_object_set_new(o, "ranges", ranges);
	json_object_set_new(o, "timing",
			    json_pack("{s:s,s:I,s:I,s:I,s:I}", "clock", "monotonic", "grow_ok_at",
				      (json_int_t)r->grow_ok_at, "shrink_ok_at", (json_int_t)r->shrink_ok_at, "backoff",
				      (json_int_t)r->backoff, "grow_backoff", (json_int_t)r->grow_backoff));
	json_object_set_new(o, "counts", counts_json(&r->counts));
	if (r->phase != PH_IDLE) {
		json_t *op = json_pack("{s:s,s:I,s:I,s:I}", "id", r->op_id, "generation", (json_int_t)r->op_generation,
				       "bytes", (json_int_t)r->op_bytes, "target", (json_int_t)r->target);
		if (!op)
			return -ENOMEM;
		if (r->op_has_range)
			json_object_set_new(op, "range", range_json(&r->op_range));
		if (r->phase == PH_REVOKING && r->revoke_grant[0])
			json_object_set_new(op, "grant", json_string(r->revoke_grant));
		if (r->take_back)
			json_object_set_new(op, "take_back", json_true());
		json_object_set_new(o, "op", op);
	}
	text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	e = mkdir_p(state_dir, 0750);
	if (e == 0)
		e = file_write_atomic(path, text, strlen(text), 0640);
	if (e < 0)
		snprintf(why, why_len, "cannot write %s: %s", path, strerror(-e));
	return e;
}

int serve_journal_load(const char *state_dir, const char *domain, struct dom_record *out, bool *found,
		       char *why, size_t why_len)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	_cleanup_json_ json_t *o = NULL;
	json_error_t jerr;
	json_t *g, *op, *ranges, *v;
	const char *ph;
	size_t len, i;
	int r;

	*out = (struct dom_record){ .phase = PH_IDLE };
	*found = false;
	if (host_state_path(state_dir, domain, ".serve.json", &path) < 0)
		return -ENOMEM;
	r = file_read_all(path, JOURNAL_MAX, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(why, why_len, "%s: %s", path, strerror(-r));
		return r;
	}
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	g = json_object_get(o, "granted");
	ph = json_string_value(json_object_get(o, "phase"));
	if (!json_is_object(o) || !json_is_integer(g) || json_integer_value(g) < 0 || !ph)
		goto bad;
	out->granted = (uint64_t)json_integer_value(g);
	for (i = 0; i < ARRAY_SIZE(phase_names); i++)
		if (streq(ph, phase_names[i]))
			break;
	if (i == ARRAY_SIZE(phase_names))
		goto bad;
	out->phase = (enum dom_phase)i;
	ranges = json_object_get(o, "ranges");
	json_array_foreach(ranges, i, v) {
		if (out->n_ranges == ARRAY_SIZE(out->ranges) || range_from(v, &out->ranges[out->n_ranges]) < 0)
			goto bad;
		out->n_ranges++;
	}
	if (json_object_get(o, "timing")) {
		if (timing_from(json_object_get(o, "timing"), out) < 0 ||
		    counts_from(json_object_get(o, "counts"), &out->counts) < 0)
			goto bad;
		out->have_timing = true;
	}
	op = json_object_get(o, "op");
	if (out->phase != PH_IDLE) {
		const char *id = json_string_value(json_object_get(op, "id"));
		json_t *gen = json_object_get(op, "generation"), *b = json_object_get(op, "bytes"),
		       *t = json_object_get(op, "target");
		if (!id || !msg_id_valid(id) || !json_is_integer(gen) || !json_is_integer(b) || !json_is_integer(t) ||
		    json_integer_value(gen) < 0 || json_integer_value(b) < 0 || json_integer_value(t) < 0)
			goto bad;
		snprintf(out->op_id, sizeof(out->op_id), "%s", id);
		out->op_generation = (uint64_t)json_integer_value(gen);
		out->op_bytes = (uint64_t)json_integer_value(b);
		out->target = (uint64_t)json_integer_value(t);
		if (json_is_string(json_object_get(op, "grant"))) {
			const char *gid = json_string_value(json_object_get(op, "grant"));
			if (!msg_id_valid(gid))
				goto bad;
			snprintf(out->revoke_grant, sizeof(out->revoke_grant), "%s", gid);
		}
		out->take_back = json_is_true(json_object_get(op, "take_back"));
		if (json_object_get(op, "range")) {
			if (range_from(json_object_get(op, "range"), &out->op_range) < 0)
				goto bad;
			out->op_has_range = true;
		}
	}
	*found = true;
	return 0;
bad:
	snprintf(why, why_len, "%s: not a memgrant-host serve journal; the domain's memory is reconciled "
		 "from the live XML and the agent instead", path);
	*out = (struct dom_record){ .phase = PH_IDLE };
	return -EBADMSG;
}

int serve_journal_remove(const char *state_dir, const char *domain)
{
	_cleanup_free_ char *path = NULL;

	if (host_state_path(state_dir, domain, ".serve.json", &path) < 0)
		return -ENOMEM;
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}
