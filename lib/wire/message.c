/* SPDX-License-Identifier: MIT */
#include "lib/wire/message.h"
#include "lib/json.h"
#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>


int msg_error_set(struct msg_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (code < 0)
		code = -code;
	if (err) {
		snprintf(err->code, sizeof(err->code), "%s", errno_name(code));
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
		/* Parser texts may quote raw input: keep the message printable ASCII,
		 * so it is valid UTF-8 in every JSON reply and one line in logs. */
		for (char *c = err->message; *c; c++)
			if (!isprint((unsigned char)*c))
				*c = '?';
	}
	return -code;
}

/* A client's string, quoted into an error message: bounded and printable, so
 * messages stay one short line in logs whatever was sent. */
static const char *shown(const char *s, char buf[static 48])
{
	size_t i = 0;

	for (; s[i] && i < 40; i++)
		buf[i] = isprint((unsigned char)s[i]) && s[i] != '"' ? s[i] : '?';
	if (s[i]) {
		memcpy(buf + i, "...", 4);
		return buf;
	}
	buf[i] = '\0';
	return buf;
}

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a fractional number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "something else";
}

const char *msg_type_name(enum msg_type t)
{
	switch (t) {
	case MSG_GRANT: return "grant";
	case MSG_REVOKE: return "revoke";
	case MSG_SYNC: return "sync";
	}
	return "?";
}

static const char *const state_names[] = {
	[MSG_STATE_ACCEPTED] = "accepted",
	[MSG_STATE_IN_PROGRESS] = "in_progress",
	[MSG_STATE_APPLIED] = "applied",
	[MSG_STATE_PARTIAL] = "partial",
	[MSG_STATE_FAILED] = "failed",
	[MSG_STATE_REJECTED] = "rejected",
	[MSG_STATE_CANCELLED] = "cancelled",
};

const char *msg_state_name(enum msg_state s)
{
	return (unsigned)s < ARRAY_SIZE(state_names) ? state_names[s] : "?";
}

int msg_state_parse(const char *s, enum msg_state *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(state_names); i++)
		if (streq(s, state_names[i])) {
			*out = (enum msg_state)i;
			return 0;
		}
	return -EINVAL;
}

bool msg_state_is_final(enum msg_state s)
{
	return s == MSG_STATE_APPLIED || s == MSG_STATE_PARTIAL || s == MSG_STATE_FAILED ||
	       s == MSG_STATE_REJECTED || s == MSG_STATE_CANCELLED;
}

bool msg_id_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++) {
		unsigned char c = (unsigned char)s[n];
		if (n >= MSG_ID_MAX)
			return false;
		if (!isalnum(c) && c != '.' && c != '_' && c != ':' && c != '-')
			return false;
	}
	return n > 0;
}

int msg_time_parse(const char *s, time_t *out)
{
	struct tm tm = { 0 };
	char canon[32];
	const char *end, *frac;
	time_t t;

	/* The fixed shape first: strptime alone accepts one-digit fields and spaces. */
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";
	for (size_t i = 0; i < sizeof(shape) - 1; i++) {
		if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != shape[i])
			return -EINVAL;
	}
	end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end || end != s + sizeof(shape) - 1)
		return -EINVAL;
	frac = end;
	if (*frac == '.') {
		frac++;
		if (!isdigit((unsigned char)*frac))
			return -EINVAL;
		while (isdigit((unsigned char)*frac))
			frac++;
	}
	if (!streq(frac, "Z"))
		return -EINVAL;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	/* Round trip: rejects 2026-02-31 and 25:00:00, which timegm would normalize. */
	msg_time_format(t, canon);
	if (strncmp(canon, s, sizeof(shape) - 1) != 0)
		return -EINVAL;
	*out = t;
	return 0;
}

void msg_time_format(time_t t, char buf[static 32])
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, 32, "1970-01-01T00:00:00Z");
}

void msg_free(struct msg *m)
{
	if (!m)
		return;
	free(m->blocks);
	for (size_t i = 0; i < m->n_ranges; i++)
		free(m->ranges[i]);
	free(m->ranges);
	free(m);
}

/* ---- field readers: each names its field in the error ------------------- */

static int get_uint(const json_t *v, const char *field, uint64_t min, uint64_t max,
		    uint64_t *out, struct msg_error *err)
{
	json_int_t i;

	if (!json_is_integer(v))
		return msg_error_set(err, EINVAL, "field \"%s\": expected an integer, got %s",
				     field, json_kind(v));
	i = json_integer_value(v);
	if (i < 0)
		return msg_error_set(err, EINVAL, "field \"%s\": %lld is negative", field,
				     (long long)i);
	if ((uint64_t)i < min)
		return msg_error_set(err, EINVAL, "field \"%s\": %lld is below the minimum %" PRIu64,
				     field, (long long)i, min);
	if ((uint64_t)i > max)
		return msg_error_set(err, ERANGE, "field \"%s\": %lld is above the maximum %" PRIu64,
				     field, (long long)i, max);
	*out = (uint64_t)i;
	return 0;
}

static int get_id(const json_t *v, const char *field, char out[static MSG_ID_MAX + 1],
		  struct msg_error *err)
{
	char buf[48];
	const char *s;

	if (!json_is_string(v))
		return msg_error_set(err, EINVAL, "field \"%s\": expected a string, got %s", field,
				     json_kind(v));
	s = json_string_value(v);
	/* strlen() stops at an embedded NUL, which the length check then catches. */
	if (json_string_length(v) != strlen(s) || !msg_id_valid(s))
		return msg_error_set(err, EINVAL,
				     "field \"%s\": \"%s\" is not an id (1 to %d characters of "
				     "A-Z a-z 0-9 . _ : -)",
				     field, shown(s, buf), MSG_ID_MAX);
	snprintf(out, MSG_ID_MAX + 1, "%s", s);
	return 0;
}

static int get_size(const json_t *v, uint64_t *out, struct msg_error *err)
{
	char buf[48];
	int r;

	if (json_is_integer(v))
		r = get_uint(v, "size", 0, INT64_MAX, out, err);
	else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		if (json_string_length(v) != strlen(s))
			r = -EINVAL;
		else
			r = size_parse(s, out);
		if (r == -ERANGE)
			return msg_error_set(err, ERANGE, "field \"size\": \"%s\" does not fit in 64 bits",
					     shown(s, buf));
		if (r < 0)
			return msg_error_set(err, EINVAL,
					     "field \"size\": \"%s\" is not a size (expected bytes "
					     "or K/M/G/T suffix)",
					     shown(s, buf));
	} else
		return msg_error_set(err, EINVAL,
				     "field \"size\": expected a string with a K/M/G/T suffix or "
				     "an integer of bytes, got %s",
				     json_kind(v));
	if (r < 0)
		return r;
	if (*out == 0)
		return msg_error_set(err, EINVAL, "field \"size\": must be more than 0 bytes");
	return 0;
}

static int get_blocks(const json_t *v, struct msg *m, struct msg_error *err)
{
	size_t n = json_array_size(v);
	uint64_t *ids;

	if (!json_is_array(v))
		return msg_error_set(err, EINVAL, "field \"blocks\": expected an array of block ids, got %s",
				     json_kind(v));
	if (n == 0)
		return msg_error_set(err, EINVAL, "field \"blocks\": the list is empty");
	if (n > MSG_LIST_MAX)
		return msg_error_set(err, E2BIG, "field \"blocks\": %zu entries, at most %d allowed", n,
				     MSG_LIST_MAX);
	ids = calloc(n, sizeof(*ids));
	if (!ids)
		return msg_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(v, i);
		char field[32];
		int r;

		snprintf(field, sizeof(field), "blocks[%zu]", i);
		r = get_uint(e, field, 0, INT64_MAX, &ids[i], err);
		if (r < 0) {
			free(ids);
			return r;
		}
	}
	/* Lists are short in practice; a sort would lose the order the sender chose. */
	for (size_t i = 1; i < n; i++)
		for (size_t k = 0; k < i; k++)
			if (ids[i] == ids[k]) {
				uint64_t dup = ids[i];
				free(ids);
				return msg_error_set(err, EINVAL,
						     "field \"blocks\": block %" PRIu64 " is listed twice",
						     dup);
			}
	m->blocks = ids;
	m->n_blocks = n;
	return 0;
}

/* "0x<hex>-0x<hex>": only the shape; the planner checks alignment and order. */
static bool range_shape_ok(const char *s)
{
	for (int part = 0; part < 2; part++) {
		size_t digits = 0;

		if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
			return false;
		s += 2;
		while (isxdigit((unsigned char)*s)) {
			s++;
			digits++;
		}
		if (digits == 0 || digits > 16)
			return false;
		if (part == 0 && *s++ != '-')
			return false;
	}
	return *s == '\0';
}

static int get_ranges(const json_t *v, struct msg *m, struct msg_error *err)
{
	size_t n = json_array_size(v);

	if (!json_is_array(v))
		return msg_error_set(err, EINVAL,
				     "field \"ranges\": expected an array of \"0xSTART-0xEND\" strings, got %s",
				     json_kind(v));
	if (n == 0)
		return msg_error_set(err, EINVAL, "field \"ranges\": the list is empty");
	if (n > MSG_LIST_MAX)
		return msg_error_set(err, E2BIG, "field \"ranges\": %zu entries, at most %d allowed", n,
				     MSG_LIST_MAX);
	m->ranges = calloc(n, sizeof(*m->ranges));
	if (!m->ranges)
		return msg_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(v, i);
		const char *s;
		char buf[48];

		if (!json_is_string(e))
			return msg_error_set(err, EINVAL, "field \"ranges[%zu]\": expected a string, got %s",
					     i, json_kind(e));
		s = json_string_value(e);
		if (json_string_length(e) != strlen(s) || !range_shape_ok(s))
			return msg_error_set(err, EINVAL,
					     "field \"ranges[%zu]\": \"%s\" is not a range "
					     "(expected \"0xSTART-0xEND\")",
					     i, shown(s, buf));
		m->ranges[i] = strdup(s);
		if (!m->ranges[i])
			return msg_error_set(err, ENOMEM, "out of memory");
		m->n_ranges = i + 1;
	}
	return 0;
}

/* memmap_on_memory: true/false, "auto", or any spelling of hotplug/words.h ("on", "1", "never") */
static int get_memmap(const json_t *v, enum msg_memmap *out, struct msg_error *err)
{
	char buf[48];
	int m;

	if (json_is_true(v))
		*out = MSG_MEMMAP_ON;
	else if (json_is_false(v))
		*out = MSG_MEMMAP_OFF;
	else if (json_is_string(v) && words_memmap_parse(json_string_value(v), true, &m) == 0)
		*out = m == WORDS_MEMMAP_ON ? MSG_MEMMAP_ON : m == WORDS_MEMMAP_OFF ? MSG_MEMMAP_OFF : MSG_MEMMAP_AUTO;
	else if (json_is_string(v))
		return msg_error_set(err, EINVAL,
				     "field \"memmap_on_memory\": \"%s\" is not one of true, false, \"auto\", "
				     "\"on\", \"off\" (also \"1\"/\"0\", \"always\"/\"never\")",
				     shown(json_string_value(v), buf));
	else
		return msg_error_set(err, EINVAL,
				     "field \"memmap_on_memory\": expected true, false or \"auto\", got %s",
				     json_kind(v));
	return 0;
}

/* zone: "movable", "normal", "auto" in any case, as lsmem writes them ("Movable") */
static int get_zone(const json_t *v, enum mem_zone *out, struct msg_error *err)
{
	const char *s = json_string_value(v);
	enum mem_zone z;
	char buf[48];

	if (!s)
		return msg_error_set(err, EINVAL,
				     "field \"zone\": expected \"movable\", \"normal\" or \"auto\", got %s",
				     json_kind(v));
	if (json_string_length(v) != strlen(s) || words_zone_parse(s, true, &z) < 0)
		return msg_error_set(err, EINVAL,
				     "field \"zone\": \"%s\" is not a zone (expected \"movable\", "
				     "\"normal\" or \"auto\", in any case)",
				     shown(s, buf));
	*out = z;
	return 0;
}

static int get_time(const json_t *v, time_t *out, struct msg_error *err)
{
	const char *s = json_string_value(v);
	char buf[48];

	if (!s)
		return msg_error_set(err, EINVAL,
				     "field \"not_after\": expected an RFC 3339 UTC time string, got %s",
				     json_kind(v));
	if (json_string_length(v) != strlen(s) || msg_time_parse(s, out) < 0)
		return msg_error_set(err, EINVAL,
				     "field \"not_after\": \"%s\" is not an RFC 3339 UTC time "
				     "(expected like \"2026-12-03T10:00:00Z\")",
				     shown(s, buf));
	return 0;
}

/* ---- the message ---------------------------------------------------------- */

static const char *const grant_fields[] = { "type", "id", "generation", "size", "blocks", "ranges",
					    "memmap_on_memory", "zone", "not_after", "contiguous" };
static const char *const revoke_fields[] = { "type", "id", "generation", "size", "grant", "blocks" };
static const char *const sync_fields[] = { "type", "nonce" };

static int check_fields(json_t *obj, enum msg_type type, struct msg_error *err)
{
	const char *const *known;
	size_t n;
	const char *key;
	json_t *v;

	switch (type) {
	case MSG_GRANT: known = grant_fields; n = ARRAY_SIZE(grant_fields); break;
	case MSG_REVOKE: known = revoke_fields; n = ARRAY_SIZE(revoke_fields); break;
	default: known = sync_fields; n = ARRAY_SIZE(sync_fields); break;
	}
	json_object_foreach(obj, key, v) {
		bool ok = startswith(key, "x-");
		char buf[48];

		for (size_t i = 0; !ok && i < n; i++)
			ok = streq(key, known[i]);
		if (!ok)
			return msg_error_set(err, EINVAL,
					     "field \"%s\": not a field of a %s message (extension "
					     "fields must start with \"x-\")",
					     shown(key, buf), msg_type_name(type));
	}
	return 0;
}

static int parse_target(json_t *obj, struct msg *m, struct msg_error *err)
{
	static const char *const grant_targets[] = { "size", "blocks", "ranges" };
	static const char *const revoke_targets[] = { "size", "grant", "blocks" };
	const char *const *t = m->type == MSG_GRANT ? grant_targets : revoke_targets;
	const char *found = NULL;

	for (size_t i = 0; i < 3; i++) {
		if (!json_object_get(obj, t[i]))
			continue;
		if (found)
			return msg_error_set(err, EINVAL,
					     "fields \"%s\" and \"%s\": a %s takes exactly one of "
					     "\"%s\", \"%s\" or \"%s\"",
					     found, t[i], msg_type_name(m->type), t[0], t[1], t[2]);
		found = t[i];
	}
	if (!found)
		return msg_error_set(err, EINVAL, "field \"%s\": missing (a %s needs one of \"%s\", \"%s\" or \"%s\")",
				     t[0], msg_type_name(m->type), t[0], t[1], t[2]);

	if (streq(found, "size")) {
		m->target = MSG_BY_SIZE;
		return get_size(json_object_get(obj, "size"), &m->size, err);
	}
	if (streq(found, "blocks")) {
		m->target = MSG_BY_BLOCKS;
		return get_blocks(json_object_get(obj, "blocks"), m, err);
	}
	if (streq(found, "ranges")) {
		m->target = MSG_BY_RANGES;
		return get_ranges(json_object_get(obj, "ranges"), m, err);
	}
	m->target = MSG_BY_GRANT;
	return get_id(json_object_get(obj, "grant"), "grant", m->grant, err);
}

int msg_from_json(json_t *obj, struct msg **out, struct msg_error *err)
{
	return msg_from_json_opts(obj, 0, out, err);
}

int msg_from_json_opts(json_t *obj, unsigned flags, struct msg **out, struct msg_error *err)
{
	struct msg *m = NULL;
	const char *type;
	json_t *v;
	char buf[48];
	int r;

	if (!json_is_object(obj))
		return msg_error_set(err, EBADMSG, "message: expected a JSON object, got %s",
				     obj ? json_kind(obj) : "nothing");
	v = json_object_get(obj, "type");
	if (!v)
		return msg_error_set(err, EINVAL, "field \"type\": missing (expected \"grant\", \"revoke\" or \"sync\")");
	type = json_string_value(v);
	if (!type)
		return msg_error_set(err, EINVAL, "field \"type\": expected a string, got %s", json_kind(v));

	m = calloc(1, sizeof(*m));
	if (!m)
		return msg_error_set(err, ENOMEM, "out of memory");
	if (streq(type, "grant"))
		m->type = MSG_GRANT;
	else if (streq(type, "revoke"))
		m->type = MSG_REVOKE;
	else if (streq(type, "sync"))
		m->type = MSG_SYNC;
	else {
		r = msg_error_set(err, EINVAL,
				  "field \"type\": \"%s\" is not a message type (expected \"grant\", "
				  "\"revoke\" or \"sync\")",
				  shown(type, buf));
		goto fail;
	}

	r = check_fields(obj, m->type, err);
	if (r < 0)
		goto fail;

	if (m->type == MSG_SYNC) {
		v = json_object_get(obj, "nonce");
		if (!v) {
			r = msg_error_set(err, EINVAL, "field \"nonce\": missing");
			goto fail;
		}
		r = get_uint(v, "nonce", 0, MSG_GENERATION_MAX, &m->nonce, err);
		if (r < 0)
			goto fail;
		*out = m;
		return 0;
	}

	v = json_object_get(obj, "id");
	if (!v && !(flags & MSG_PARSE_UNNUMBERED)) {
		r = msg_error_set(err, EINVAL, "field \"id\": missing");
		goto fail;
	}
	r = v ? get_id(v, "id", m->id, err) : 0;
	if (r < 0)
		goto fail;

	v = json_object_get(obj, "generation");
	if (!v && !(flags & MSG_PARSE_UNNUMBERED)) {
		r = msg_error_set(err, EINVAL, "field \"generation\": missing");
		goto fail;
	}
	r = v ? get_uint(v, "generation", 1, MSG_GENERATION_MAX, &m->generation, err) : 0;
	if (r < 0)
		goto fail;

	r = parse_target(obj, m, err);
	if (r < 0)
		goto fail;

	if (m->type == MSG_GRANT) {
		if ((v = json_object_get(obj, "memmap_on_memory")) &&
		    (r = get_memmap(v, &m->memmap, err)) < 0)
			goto fail;
		if ((v = json_object_get(obj, "zone")) && (r = get_zone(v, &m->zone, err)) < 0)
			goto fail;
		if ((v = json_object_get(obj, "not_after"))) {
			r = get_time(v, &m->not_after, err);
			if (r < 0)
				goto fail;
			m->has_not_after = true;
		}
		if ((v = json_object_get(obj, "contiguous"))) {
			if (!json_is_boolean(v)) {
				r = msg_error_set(err, EINVAL,
						  "field \"contiguous\": expected true or false, got %s",
						  json_kind(v));
				goto fail;
			}
			m->contiguous = json_is_true(v);
		}
	}
	*out = m;
	return 0;
fail:
	msg_free(m);
	return r;
}

int msg_parse(const char *text, size_t len, size_t limit, struct msg **out, struct msg_error *err)
{
	return msg_parse_opts(text, len, limit, 0, out, err);
}

int msg_parse_opts(const char *text, size_t len, size_t limit, unsigned flags, struct msg **out,
		   struct msg_error *err)
{
	_cleanup_json_ json_t *obj = NULL;
	json_error_t jerr;

	if (len > limit)
		return msg_error_set(err, E2BIG, "message: %zu bytes, the limit is %zu", len, limit);
	obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj) {
		int code;

		switch (json_error_code(&jerr)) {
		case json_error_duplicate_key: code = EINVAL; break;
		case json_error_numeric_overflow: code = ERANGE; break;
		case json_error_out_of_memory: code = ENOMEM; break;
		default: code = EBADMSG; break;
		}
		return msg_error_set(err, code, "message: not valid JSON at line %d, column %d: %s",
				     jerr.line, jerr.column, jerr.text);
	}
	return msg_from_json_opts(obj, flags, out, err);
}

/* ---- building ------------------------------------------------------------- */

/* json_object_set_new that remembers a failure instead of checking each call. */
static void put(json_t *o, const char *k, json_t *v, bool *ok)
{
	if (!v || json_object_set_new(o, k, v) < 0)
		*ok = false;
}

static json_t *uint_json(uint64_t v)
{
	/* Everything built here is a byte count or id below 2^63. */
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

json_t *msg_to_json(const struct msg *m)
{
	_cleanup_json_ json_t *o = json_object();
	bool ok = o != NULL;

	if (!o)
		return NULL;
	put(o, "type", json_string(msg_type_name(m->type)), &ok);
	if (m->type == MSG_SYNC) {
		put(o, "nonce", uint_json(m->nonce), &ok);
		return ok ? TAKE_PTR(o) : NULL;
	}
	put(o, "id", json_string(m->id), &ok);
	put(o, "generation", uint_json(m->generation), &ok);
	switch (m->target) {
	case MSG_BY_SIZE:
		put(o, "size", uint_json(m->size), &ok);
		break;
	case MSG_BY_BLOCKS: {
		json_t *a = json_array();
		for (size_t i = 0; a && i < m->n_blocks; i++)
			if (json_array_append_new(a, uint_json(m->blocks[i])) < 0)
				ok = false;
		put(o, "blocks", a, &ok);
		break;
	}
	case MSG_BY_RANGES: {
		json_t *a = json_array();
		for (size_t i = 0; a && i < m->n_ranges; i++)
			if (json_array_append_new(a, json_string(m->ranges[i])) < 0)
				ok = false;
		put(o, "ranges", a, &ok);
		break;
	}
	case MSG_BY_GRANT:
		put(o, "grant", json_string(m->grant), &ok);
		break;
	}
	if (m->type == MSG_GRANT) {
		put(o, "memmap_on_memory",
		    m->memmap == MSG_MEMMAP_AUTO ? json_string("auto") : json_boolean(m->memmap == MSG_MEMMAP_ON),
		    &ok);
		put(o, "zone", json_string(mem_zone_name(m->zone)), &ok);
		if (m->has_not_after) {
			char t[32];
			msg_time_format(m->not_after, t);
			put(o, "not_after", json_string(t), &ok);
		}
		put(o, "contiguous", json_boolean(m->contiguous), &ok);
	}
	return ok ? TAKE_PTR(o) : NULL;
}

static json_t *error_obj(const char *code, const char *message)
{
	if (!code)
		return json_null();
	return json_pack("{s:s, s:s}", "code", code, "message", message ? message : "");
}

json_t *msg_block_range_json(uint64_t block, uint64_t block_size)
{
	char buf[48];

	if (block_size == 0 || block > UINT64_MAX / block_size - 1)
		return json_null();
	snprintf(buf, sizeof(buf), "0x%" PRIx64 "-0x%" PRIx64, block * block_size,
		 (block + 1) * block_size - 1);
	return json_string(buf);
}

json_t *msg_status_to_json(const struct msg_status *s)
{
	_cleanup_json_ json_t *o = json_object();
	json_t *blocks, *decisions, *mem;
	bool ok = o != NULL;

	if (!o)
		return NULL;
	put(o, "type", json_string("status"), &ok);
	put(o, "agent", s->agent ? json_string(s->agent) : json_null(), &ok);
	put(o, "id", s->id ? json_string(s->id) : json_null(), &ok);
	put(o, "generation", uint_json(s->generation), &ok);
	put(o, "state", json_string(msg_state_name(s->state)), &ok);
	put(o, "requested_bytes", uint_json(s->requested_bytes), &ok);
	put(o, "applied_bytes", uint_json(s->applied_bytes), &ok);

	blocks = json_array();
	for (size_t i = 0; blocks && i < s->n_blocks; i++) {
		const struct msg_status_block *b = &s->blocks[i];
		json_t *e = json_object();
		bool eok = e != NULL;

		if (e) {
			put(e, "block", uint_json(b->block), &eok);
			put(e, "range", msg_block_range_json(b->block, s->block_size), &eok);
			put(e, "configured", json_boolean(b->configured), &eok);
			put(e, "memmap_on_memory",
			    b->memmap_on_memory < 0 ? json_null() : json_boolean(b->memmap_on_memory), &eok);
			put(e, "state", b->state ? json_string(b->state) : json_null(), &eok);
			put(e, "zone", b->zone ? json_string(b->zone) : json_null(), &eok);
			put(e, "error", error_obj(b->error_code, b->error_message), &eok);
		}
		if (!eok || json_array_append_new(blocks, e) < 0)
			ok = false;
	}
	put(o, "blocks", blocks, &ok);
	put(o, "error", error_obj(s->error_code, s->error_message), &ok);

	mem = json_object();
	if (mem) {
		put(mem, "block_size", uint_json(s->block_size), &ok);
		put(mem, "online_bytes", uint_json(s->online_bytes), &ok);
		put(mem, "standby_bytes", uint_json(s->standby_bytes), &ok);
	}
	put(o, "memory", mem, &ok);

	decisions = json_array();
	for (size_t i = 0; decisions && i < s->n_decisions; i++)
		if (json_array_append_new(decisions, json_string(s->decisions[i] ? s->decisions[i] : "")) < 0)
			ok = false;
	put(o, "decisions", decisions, &ok);
	put(o, "source", s->source ? json_string(s->source) : json_null(), &ok);
	return ok ? TAKE_PTR(o) : NULL;
}

json_t *msg_error_to_json(const struct msg_error *e, const char *id)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "type", "error", "code", e->code, "message", e->message);

	if (o && id && json_object_set_new(o, "id", json_string(id)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *msg_sync_reply_json(uint64_t nonce)
{
	return json_pack("{s:s, s:I}", "type", "sync", "nonce", (json_int_t)(nonce > INT64_MAX ? INT64_MAX : nonce));
}
