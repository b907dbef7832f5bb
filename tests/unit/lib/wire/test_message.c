/* SPDX-License-Identifier: MIT */
/* Wire protocol v1 parsing and building (docs/protocol.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/wire/message.h"
#include "lib/util.h"

#define LIMIT 65536

static struct msg *ok_parse(const char *text)
{
	struct msg_error err = { 0 };
	struct msg *m = NULL;
	int r = msg_parse(text, strlen(text), LIMIT, &m, &err);

	if (r < 0)
		fail_msg("parse of %s failed: %s %s", text, err.code, err.message);
	assert_non_null(m);
	return m;
}

/* Parses TEXT expecting failure with CODE and a message containing NEEDLE. */
static void bad(const char *text, const char *code, const char *needle)
{
	struct msg_error err = { 0 };
	struct msg *m = NULL;
	int r = msg_parse(text, strlen(text), LIMIT, &m, &err);

	if (r == 0) {
		msg_free(m);
		fail_msg("%s: parsed, expected %s", text, code);
	}
	assert_null(m);
	if (!streq(err.code, code) || !strstr(err.message, needle))
		fail_msg("%s: got %s \"%s\", expected %s containing \"%s\"", text, err.code,
			 err.message, code, needle);
	assert_string_equal(errno_name(r), code);
}

static void test_grant_by_size_string(void **state)
{
	_cleanup_msg_ struct msg *m = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g-42\",\"generation\":42,\"size\":\"2G\","
		"\"memmap_on_memory\":\"auto\",\"zone\":\"auto\",\"not_after\":\"2026-12-03T10:00:00Z\"}");

	assert_int_equal(m->type, MSG_GRANT);
	assert_string_equal(m->id, "g-42");
	assert_int_equal(m->generation, 42);
	assert_int_equal(m->target, MSG_BY_SIZE);
	assert_int_equal(m->size, 2ULL << 30);
	assert_int_equal(m->memmap, MSG_MEMMAP_AUTO);
	assert_int_equal(m->zone, MEM_ZONE_AUTO);
	assert_true(m->has_not_after);
	assert_int_equal(m->not_after, 1796292000); /* 2026-12-03T10:00:00Z */
	assert_false(m->contiguous);
}

static void test_grant_defaults_and_bytes(void **state)
{
	_cleanup_msg_ struct msg *m = ok_parse(
		"{\"type\":\"grant\",\"id\":\"A.b_c:d-9\",\"generation\":9007199254740992,\"size\":134217728}");

	assert_int_equal(m->generation, MSG_GENERATION_MAX);
	assert_int_equal(m->size, 134217728);
	assert_int_equal(m->memmap, MSG_MEMMAP_AUTO);
	assert_int_equal(m->zone, MEM_ZONE_AUTO);
	assert_false(m->has_not_after);
	assert_false(m->contiguous);
}

static void test_grant_options(void **state)
{
	_cleanup_msg_ struct msg *a = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"128M\","
		"\"memmap_on_memory\":true,\"zone\":\"movable\",\"contiguous\":true}");
	_cleanup_msg_ struct msg *b = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1T\","
		"\"memmap_on_memory\":false,\"zone\":\"normal\",\"contiguous\":false,"
		"\"not_after\":\"2026-01-01T00:00:00.250Z\"}");

	assert_int_equal(a->memmap, MSG_MEMMAP_ON);
	assert_int_equal(a->zone, MEM_ZONE_MOVABLE);
	assert_true(a->contiguous);
	assert_int_equal(b->memmap, MSG_MEMMAP_OFF);
	assert_int_equal(b->zone, MEM_ZONE_NORMAL);
	assert_int_equal(b->size, 1ULL << 40);
	assert_int_equal(b->not_after, 1767225600); /* fraction dropped */
}

/* the words of lsmem and chmem: "Movable" in any case, "on"/"off"/"1"/"never", "1.5G" */
static void test_grant_operator_words(void **state)
{
	_cleanup_msg_ struct msg *a = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1.5G\","
		"\"memmap_on_memory\":\"on\",\"zone\":\"Movable\"}");
	_cleanup_msg_ struct msg *b = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"2.25G\","
		"\"memmap_on_memory\":\"never\",\"zone\":\"NORMAL\"}");
	_cleanup_msg_ struct msg *c = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1G\","
		"\"memmap_on_memory\":\"0\",\"zone\":\"Auto\"}");

	(void)state;
	assert_int_equal(a->memmap, MSG_MEMMAP_ON);
	assert_int_equal(a->zone, MEM_ZONE_MOVABLE);
	assert_int_equal(a->size, 1536ULL << 20);
	assert_int_equal(b->memmap, MSG_MEMMAP_OFF);
	assert_int_equal(b->zone, MEM_ZONE_NORMAL);
	assert_int_equal(b->size, 2304ULL << 20);
	assert_int_equal(c->memmap, MSG_MEMMAP_OFF);
	assert_int_equal(c->zone, MEM_ZONE_AUTO);
}

static void test_grant_by_blocks_and_ranges(void **state)
{
	_cleanup_msg_ struct msg *a = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g-1\",\"generation\":3,\"blocks\":[17,16,0]}");
	_cleanup_msg_ struct msg *b = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g-2\",\"generation\":4,"
		"\"ranges\":[\"0x80000000-0x87ffffff\",\"0X90000000-0x9FFFFFFF\"]}");

	assert_int_equal(a->target, MSG_BY_BLOCKS);
	assert_int_equal(a->n_blocks, 3);
	assert_int_equal(a->blocks[0], 17); /* order as sent */
	assert_int_equal(a->blocks[2], 0);
	assert_int_equal(b->target, MSG_BY_RANGES);
	assert_int_equal(b->n_ranges, 2);
	assert_string_equal(b->ranges[0], "0x80000000-0x87ffffff");
	assert_string_equal(b->ranges[1], "0X90000000-0x9FFFFFFF");
}

static void test_revoke_forms(void **state)
{
	_cleanup_msg_ struct msg *a = ok_parse("{\"type\":\"revoke\",\"id\":\"r-43\",\"generation\":43,\"size\":\"1G\"}");
	_cleanup_msg_ struct msg *b = ok_parse("{\"type\":\"revoke\",\"id\":\"r-44\",\"generation\":44,\"grant\":\"g-42\"}");
	_cleanup_msg_ struct msg *c = ok_parse("{\"type\":\"revoke\",\"id\":\"r-45\",\"generation\":45,\"blocks\":[5]}");

	assert_int_equal(a->type, MSG_REVOKE);
	assert_int_equal(a->target, MSG_BY_SIZE);
	assert_int_equal(a->size, 1ULL << 30);
	assert_int_equal(b->target, MSG_BY_GRANT);
	assert_string_equal(b->grant, "g-42");
	assert_int_equal(c->target, MSG_BY_BLOCKS);
	assert_int_equal(c->blocks[0], 5);
}

static void test_sync(void **state)
{
	_cleanup_msg_ struct msg *m = ok_parse("{\"type\":\"sync\",\"nonce\":77}\n");
	json_auto_t *reply = msg_sync_reply_json(m->nonce);
	_cleanup_free_ char *s = json_dumps(reply, JSON_COMPACT | JSON_SORT_KEYS);

	assert_int_equal(m->type, MSG_SYNC);
	assert_int_equal(m->nonce, 77);
	assert_string_equal(s, "{\"nonce\":77,\"type\":\"sync\"}");
	bad("{\"type\":\"sync\"}", "EINVAL", "field \"nonce\": missing");
	bad("{\"type\":\"sync\",\"nonce\":\"a\"}", "EINVAL", "field \"nonce\": expected an integer");
	bad("{\"type\":\"sync\",\"nonce\":1,\"id\":\"x\"}", "EINVAL", "field \"id\": not a field of a sync");
}

static void test_extension_fields_ignored(void **state)
{
	_cleanup_msg_ struct msg *m = ok_parse(
		"{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1G\",\"x-trace\":{\"a\":[1,2]}}");
	assert_int_equal(m->size, 1ULL << 30);
}

static void test_bad_json(void **state)
{
	bad("", "EBADMSG", "not valid JSON");
	bad("{", "EBADMSG", "not valid JSON");
	bad("{\"type\":\"grant\"} trailing", "EBADMSG", "not valid JSON");
	bad("[1,2]", "EBADMSG", "expected a JSON object");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":NaN,\"size\":1}", "EBADMSG", "not valid JSON");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1e999}", "ERANGE", "real number overflow");
	bad("{\"type\":\"grant\",\"id\":\"\xff\xfe\",\"generation\":1,\"size\":1}", "EBADMSG", "not valid JSON");
	bad("{\"type\":\"grant\",\"id\":\"g\\u0000x\",\"generation\":1,\"size\":1}", "EBADMSG", "not valid JSON");
	/* jansson refuses integers beyond 64 bits: a range error, not a crash */
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":99999999999999999999999,\"size\":1}",
	    "ERANGE", "not valid JSON");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"id\":\"h\",\"generation\":1,\"size\":1}", "EINVAL",
	    "duplicate");
}

static void test_deep_nesting(void **state)
{
	size_t depth = 100000;
	_cleanup_free_ char *s = malloc(2 * depth + 64);
	size_t n = 0;
	struct msg_error err;
	struct msg *m = NULL;

	n += (size_t)sprintf(s, "{\"type\":\"grant\",\"x-deep\":");
	for (size_t i = 0; i < depth; i++)
		s[n++] = '[';
	for (size_t i = 0; i < depth; i++)
		s[n++] = ']';
	s[n++] = '}';
	assert_int_equal(msg_parse(s, n, SIZE_MAX, &m, &err), -EBADMSG);
	assert_null(m);
}

static void test_oversized(void **state)
{
	const char *text = "{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1G\"}";
	struct msg_error err;
	struct msg *m = NULL;

	assert_int_equal(msg_parse(text, strlen(text), 10, &m, &err), -E2BIG);
	assert_string_equal(err.code, "E2BIG");
	assert_non_null(strstr(err.message, "the limit is 10"));
	/* not even parsed: garbage over the limit gets E2BIG, not EBADMSG */
	assert_int_equal(msg_parse("xxxxxxxxxxxx", 12, 10, &m, &err), -E2BIG);
	assert_null(m);
}

static void test_bad_type(void **state)
{
	bad("{\"id\":\"g\",\"generation\":1,\"size\":1}", "EINVAL", "field \"type\": missing");
	bad("{\"type\":7}", "EINVAL", "field \"type\": expected a string, got an integer");
	bad("{\"type\":\"status\"}", "EINVAL", "field \"type\": \"status\" is not a message type");
	bad("{\"type\":\"GRANT\"}", "EINVAL", "is not a message type");
}

static void test_bad_fields(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"zon\":\"movable\"}", "EINVAL",
	    "field \"zon\": not a field of a grant message");
	bad("{\"type\":\"revoke\",\"id\":\"g\",\"generation\":1,\"size\":1,\"zone\":\"movable\"}", "EINVAL",
	    "field \"zone\": not a field of a revoke message");
	bad("{\"type\":\"revoke\",\"id\":\"g\",\"generation\":1,\"ranges\":[\"0x0-0x1\"]}", "EINVAL",
	    "field \"ranges\": not a field of a revoke");
}

static void test_bad_id(void **state)
{
	bad("{\"type\":\"grant\",\"generation\":1,\"size\":1}", "EINVAL", "field \"id\": missing");
	bad("{\"type\":\"grant\",\"id\":\"\",\"generation\":1,\"size\":1}", "EINVAL", "field \"id\": \"\" is not an id");
	bad("{\"type\":\"grant\",\"id\":\"a b\",\"generation\":1,\"size\":1}", "EINVAL", "field \"id\": \"a b\" is not an id");
	bad("{\"type\":\"grant\",\"id\":\"../x\",\"generation\":1,\"size\":1}", "EINVAL", "is not an id");
	bad("{\"type\":\"grant\",\"id\":42,\"generation\":1,\"size\":1}", "EINVAL", "field \"id\": expected a string");
	/* 63 characters pass, 64 do not */
	char text[256];
	char id[65];
	memset(id, 'a', 64);
	id[64] = '\0';
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"%s\",\"generation\":1,\"size\":1}", id);
	bad(text, "EINVAL", "field \"id\"");
	id[63] = '\0';
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"%s\",\"generation\":1,\"size\":1}", id);
	msg_free(ok_parse(text));
}

static void test_bad_generation(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"size\":1}", "EINVAL", "field \"generation\": missing");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":0,\"size\":1}", "EINVAL",
	    "field \"generation\": 0 is below the minimum 1");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":-5,\"size\":1}", "EINVAL",
	    "field \"generation\": -5 is negative");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":9007199254740993,\"size\":1}", "ERANGE",
	    "field \"generation\": 9007199254740993 is above the maximum");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1.5,\"size\":1}", "EINVAL",
	    "field \"generation\": expected an integer, got a fractional number");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":\"42\",\"size\":1}", "EINVAL",
	    "field \"generation\": expected an integer, got a string");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":null,\"size\":1}", "EINVAL",
	    "field \"generation\": expected an integer, got null");
}

static void test_bad_size(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"2X\"}", "EINVAL",
	    "field \"size\": \"2X\" is not a size (expected bytes or K/M/G/T suffix)");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"-1G\"}", "EINVAL", "is not a size");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"\"}", "EINVAL", "is not a size");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"99999999999T\"}", "ERANGE",
	    "field \"size\": \"99999999999T\" does not fit in 64 bits");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":-1}", "EINVAL", "field \"size\": -1 is negative");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":0}", "EINVAL", "field \"size\": must be more than 0");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"0M\"}", "EINVAL", "field \"size\": must be more than 0");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1.5}", "EINVAL", "field \"size\": expected a string");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":true}", "EINVAL", "got a boolean");
}

static void test_bad_target_combinations(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1}", "EINVAL", "field \"size\": missing");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"blocks\":[1]}", "EINVAL",
	    "fields \"size\" and \"blocks\": a grant takes exactly one");
	bad("{\"type\":\"revoke\",\"id\":\"r\",\"generation\":1,\"grant\":\"g\",\"blocks\":[1]}", "EINVAL",
	    "fields \"grant\" and \"blocks\"");
	bad("{\"type\":\"revoke\",\"id\":\"r\",\"generation\":1}", "EINVAL", "a revoke needs one of");
	bad("{\"type\":\"revoke\",\"id\":\"r\",\"generation\":1,\"grant\":\"a/b\"}", "EINVAL",
	    "field \"grant\": \"a/b\" is not an id");
}

static void test_bad_blocks(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"blocks\":[]}", "EINVAL", "field \"blocks\": the list is empty");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"blocks\":5}", "EINVAL", "field \"blocks\": expected an array");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"blocks\":[1,-2]}", "EINVAL", "field \"blocks[1]\": -2 is negative");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"blocks\":[1,\"2\"]}", "EINVAL", "field \"blocks[1]\": expected an integer");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"blocks\":[3,4,3]}", "EINVAL", "block 3 is listed twice");
}

static void test_bad_ranges(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[]}", "EINVAL", "field \"ranges\": the list is empty");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[1]}", "EINVAL", "field \"ranges[0]\": expected a string");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[\"0x0-\"]}", "EINVAL", "field \"ranges[0]\": \"0x0-\" is not a range");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[\"0x0-0x1\",\"80000000-8fffffff\"]}", "EINVAL", "field \"ranges[1]\"");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[\"0x10000000000000000-0x1\"]}", "EINVAL", "is not a range");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[\"0x0-0x1 \"]}", "EINVAL", "is not a range");
}

static void test_bad_options(void **state)
{
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"memmap_on_memory\":\"maybe\"}", "EINVAL",
	    "field \"memmap_on_memory\": \"maybe\" is not one of true, false, \"auto\", \"on\", \"off\"");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"memmap_on_memory\":[]}", "EINVAL",
	    "field \"memmap_on_memory\": expected true, false or \"auto\", got an array");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"memmap_on_memory\":1}", "EINVAL",
	    "field \"memmap_on_memory\"");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"zone\":\"dma\"}", "EINVAL",
	    "field \"zone\": \"dma\" is not a zone");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"zone\":null}", "EINVAL",
	    "field \"zone\": expected");
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"contiguous\":\"true\"}", "EINVAL",
	    "field \"contiguous\": expected true or false, got a string");
}

static void test_bad_not_after(void **state)
{
	static const char *const times[] = {
		"2026-12-03", "2026-12-03T10:00:00", "2026-12-03T10:00:00+01:00",
		"2026-12-03T10:00:00+00:00", "2026-02-31T10:00:00Z", "2026-12-03T25:00:00Z",
		"2026-12-03 10:00:00Z", "2026-1-03T10:00:00Z", "2026-12-03T10:00:00.Z",
		"2026-12-03T10:00:00Zjunk", "tomorrow", "",
	};
	char text[256];

	for (size_t i = 0; i < ARRAY_SIZE(times); i++) {
		snprintf(text, sizeof(text),
			 "{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"not_after\":\"%s\"}", times[i]);
		bad(text, "EINVAL", "field \"not_after\"");
	}
	bad("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":1,\"not_after\":1796292000}", "EINVAL",
	    "field \"not_after\": expected an RFC 3339 UTC time string, got an integer");
}

static void test_error_message_is_sanitized(void **state)
{
	/* control characters and quotes in a client's value do not reach the message */
	struct msg_error err;
	struct msg *m = NULL;
	const char *text = "{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1\\n\\\"G\"}";
	json_auto_t *e = NULL;

	assert_int_equal(msg_parse(text, strlen(text), LIMIT, &m, &err), -EINVAL);
	assert_null(strchr(err.message, '\n'));
	assert_non_null(strstr(err.message, "\"1??G\""));
	e = msg_error_to_json(&err, "g");
	assert_non_null(e);
	assert_string_equal(json_string_value(json_object_get(e, "type")), "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")), "EINVAL");
	assert_string_equal(json_string_value(json_object_get(e, "message")), err.message);
	assert_string_equal(json_string_value(json_object_get(e, "id")), "g");
}

/* Values built in C (not from text) are checked the same way. */
static void test_from_json_values(void **state)
{
	struct msg_error err;
	struct msg *m = NULL;
	json_auto_t *o = json_pack("{s:s, s:s, s:I, s:f}", "type", "grant", "id", "g", "generation",
				   (json_int_t)1, "size", 1.0);

	assert_int_equal(msg_from_json(o, &m, &err), -EINVAL);
	assert_null(m);
	assert_int_equal(msg_from_json(NULL, &m, &err), -EBADMSG);
	json_auto_t *s = json_string("grant");
	assert_int_equal(msg_from_json(s, &m, &err), -EBADMSG);
	json_auto_t *nul = json_pack("{s:s, s:s%, s:I, s:i}", "type", "grant", "id", "g\0h", (size_t)3,
				     "generation", (json_int_t)1, "size", 1);
	assert_int_equal(msg_from_json(nul, &m, &err), -EINVAL);
	assert_non_null(strstr(err.message, "field \"id\""));
}

static void roundtrip(const char *text)
{
	_cleanup_msg_ struct msg *a = ok_parse(text);
	json_auto_t *j = msg_to_json(a);
	_cleanup_free_ char *s = json_dumps(j, JSON_COMPACT);
	_cleanup_msg_ struct msg *b = ok_parse(s);
	json_auto_t *j2 = msg_to_json(b);

	assert_true(json_equal(j, j2));
	assert_int_equal(a->type, b->type);
	assert_string_equal(a->id, b->id);
	assert_int_equal(a->generation, b->generation);
	assert_int_equal(a->target, b->target);
	assert_int_equal(a->size, b->size);
	assert_int_equal(a->n_blocks, b->n_blocks);
	assert_int_equal(a->n_ranges, b->n_ranges);
	assert_string_equal(a->grant, b->grant);
	assert_int_equal(a->memmap, b->memmap);
	assert_int_equal(a->zone, b->zone);
	assert_int_equal(a->has_not_after, b->has_not_after);
	assert_int_equal(a->not_after, b->not_after);
	assert_int_equal(a->contiguous, b->contiguous);
}

static void test_to_json_roundtrip(void **state)
{
	roundtrip("{\"type\":\"grant\",\"id\":\"g-42\",\"generation\":42,\"size\":\"2G\",\"memmap_on_memory\":true,"
		  "\"zone\":\"movable\",\"not_after\":\"2026-12-03T10:00:00Z\",\"contiguous\":true}");
	roundtrip("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"blocks\":[4,2],\"memmap_on_memory\":false}");
	roundtrip("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"ranges\":[\"0x0-0x7ffffff\"]}");
	roundtrip("{\"type\":\"revoke\",\"id\":\"r\",\"generation\":2,\"grant\":\"g\"}");
	roundtrip("{\"type\":\"revoke\",\"id\":\"r\",\"generation\":2,\"size\":5}");
	roundtrip("{\"type\":\"sync\",\"nonce\":0}");

	_cleanup_msg_ struct msg *m = ok_parse("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1G\"}");
	json_auto_t *j = msg_to_json(m);
	_cleanup_free_ char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"contiguous\":false,\"generation\":1,\"id\":\"g\",\"memmap_on_memory\":\"auto\","
			       "\"size\":1073741824,\"type\":\"grant\",\"zone\":\"auto\"}");
}

static void test_status_builder(void **state)
{
	const struct msg_status_block blocks[] = {
		{ .block = 16, .configured = true, .memmap_on_memory = 1, .state = "online", .zone = "Movable" },
		{ .block = 17, .configured = false, .memmap_on_memory = -1, .state = "offline",
		  .error_code = "EIO", .error_message = "configuring block 17 failed" },
	};
	const char *const decisions[] = { "memmap_on_memory=on: MemAvailable 180M is below the 256M reserve" };
	const struct msg_status st = {
		.agent = "guest-7", .id = "g-42", .generation = 42, .state = MSG_STATE_PARTIAL,
		.requested_bytes = 268435456, .applied_bytes = 134217728,
		.blocks = blocks, .n_blocks = 2,
		.error_code = "EIO", .error_message = "1 of 2 blocks failed",
		.block_size = 134217728, .online_bytes = 2281701376, .standby_bytes = 2013265920,
		.decisions = decisions, .n_decisions = 1, .source = "https",
	};
	json_auto_t *j = msg_status_to_json(&st);
	_cleanup_free_ char *s = json_dumps(j, JSON_COMPACT);

	assert_string_equal(s,
		"{\"type\":\"status\",\"agent\":\"guest-7\",\"id\":\"g-42\",\"generation\":42,"
		"\"state\":\"partial\",\"requested_bytes\":268435456,\"applied_bytes\":134217728,"
		"\"blocks\":[{\"block\":16,\"range\":\"0x80000000-0x87ffffff\",\"configured\":true,"
		"\"memmap_on_memory\":true,\"state\":\"online\",\"zone\":\"Movable\",\"error\":null},"
		"{\"block\":17,\"range\":\"0x88000000-0x8fffffff\",\"configured\":false,"
		"\"memmap_on_memory\":null,\"state\":\"offline\",\"zone\":null,"
		"\"error\":{\"code\":\"EIO\",\"message\":\"configuring block 17 failed\"}}],"
		"\"error\":{\"code\":\"EIO\",\"message\":\"1 of 2 blocks failed\"},"
		"\"memory\":{\"block_size\":134217728,\"online_bytes\":2281701376,\"standby_bytes\":2013265920},"
		"\"decisions\":[\"memmap_on_memory=on: MemAvailable 180M is below the 256M reserve\"],"
		"\"source\":\"https\"}");

	const struct msg_status empty = { .id = "r-1", .generation = 1, .state = MSG_STATE_REJECTED };
	json_auto_t *e = msg_status_to_json(&empty);
	assert_true(json_is_null(json_object_get(e, "error")));
	assert_true(json_is_null(json_object_get(e, "agent")));
	assert_int_equal(json_array_size(json_object_get(e, "blocks")), 0);
	assert_int_equal(json_array_size(json_object_get(e, "decisions")), 0);
}

static void test_state_names(void **state)
{
	static const char *const names[] = { "accepted", "in_progress", "applied", "partial", "failed", "rejected",
					     "cancelled" };
	enum msg_state s;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		assert_int_equal(msg_state_parse(names[i], &s), 0);
		assert_int_equal(s, i);
		assert_string_equal(msg_state_name(s), names[i]);
	}
	assert_int_equal(msg_state_parse("done", &s), -EINVAL);
	assert_false(msg_state_is_final(MSG_STATE_ACCEPTED));
	assert_false(msg_state_is_final(MSG_STATE_IN_PROGRESS));
	assert_true(msg_state_is_final(MSG_STATE_PARTIAL));
	assert_true(msg_state_is_final(MSG_STATE_CANCELLED));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grant_by_size_string),
		cmocka_unit_test(test_grant_defaults_and_bytes),
		cmocka_unit_test(test_grant_options),
		cmocka_unit_test(test_grant_operator_words),
		cmocka_unit_test(test_grant_by_blocks_and_ranges),
		cmocka_unit_test(test_revoke_forms),
		cmocka_unit_test(test_sync),
		cmocka_unit_test(test_extension_fields_ignored),
		cmocka_unit_test(test_bad_json),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_bad_type),
		cmocka_unit_test(test_bad_fields),
		cmocka_unit_test(test_bad_id),
		cmocka_unit_test(test_bad_generation),
		cmocka_unit_test(test_bad_size),
		cmocka_unit_test(test_bad_target_combinations),
		cmocka_unit_test(test_bad_blocks),
		cmocka_unit_test(test_bad_ranges),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_bad_not_after),
		cmocka_unit_test(test_error_message_is_sanitized),
		cmocka_unit_test(test_from_json_values),
		cmocka_unit_test(test_to_json_roundtrip),
		cmocka_unit_test(test_status_builder),
		cmocka_unit_test(test_state_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
