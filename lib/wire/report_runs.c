/* SPDX-License-Identifier: MIT */
/*
 * A status report kept with its blocks as runs.  See report_runs.h.
 */
#include "lib/wire/report_runs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/json.h"
#include "lib/util.h"
#include "lib/wire/blockjson.h"
#include "lib/wire/message.h"
#include "lib/wire/report_json.h"

static uint64_t u64_of(const json_t *o, const char *key)
{
	json_int_t i = json_integer_value(json_object_get(o, key));
	return i < 0 ? 0 : (uint64_t)i;
}

static json_t *u64_json(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static bool is_member(const char *key)
{
	return !streq(key, "first") && !streq(key, "count") && !streq(key, "down");
}

/* Whether entry E continues RUN (the run's template: first, count, then the
 * entry's members but block and range, in their order, then "down": true
 * for a run downwards), and which way when RUN has one block yet. */
static bool run_continues(const json_t *run, const json_t *e, bool *down)
{
	uint64_t first = u64_of(run, "first"), count = u64_of(run, "count"), b = u64_of(e, "block");
	const char *key;
	json_t *v;
	size_t members = 0;

	*down = json_is_true(json_object_get(run, "down"));
	if (!json_is_integer(json_object_get(e, "block")))
		return false;
	if (count == 1 && first > 0 && b == first - 1)
		*down = true;
	else if (*down ? first < count || b != first - count : b != first + count)
		return false;
	json_object_foreach((json_t *)e, key, v) {
		if (streq(key, "block") || streq(key, "range"))
			continue;
		if (!json_equal(v, json_object_get(run, key)))
			return false;
		members++;
	}
	return json_object_size(run) == members + 2 + !!json_object_get(run, "down");
}

static json_t *run_new(const json_t *e)
{
	json_t *run = json_object(), *v;
	const char *key;

	if (!run || json_object_set(run, "first", json_object_get(e, "block")) < 0 ||
	    json_object_set_new(run, "count", json_integer(1)) < 0)
		goto fail;
	json_object_foreach((json_t *)e, key, v)
		if (!streq(key, "block") && !streq(key, "range") && json_object_set(run, key, v) < 0)
			goto fail;
	return run;
fail:
	json_decref(run);
	return NULL;
}

static json_t *runs_of(const json_t *blocks)
{
	json_t *runs = json_array(), *e, *run = NULL;
	size_t i;

	if (!runs)
		return NULL;
	json_array_foreach(blocks, i, e) {
		bool down = false;

		if (run && run_continues(run, e, &down)) {
			if (json_object_set_new(run, "count", u64_json(u64_of(run, "count") + 1)) < 0 ||
			    (down && json_object_set_new(run, "down", json_true()) < 0)) {
				json_decref(runs);
				return NULL;
			}
			continue;
		}
		run = json_is_object(e) && json_is_integer(json_object_get(e, "block")) ? run_new(e) : NULL;
		if (!run || json_array_append_new(runs, run) < 0) {
			json_decref(runs);
			return NULL;
		}
	}
	return runs;
}

/* The lists of block entries and the names of their runs. */
static const char *const lists[][2] = { { "blocks", "block_runs" }, { "changed_blocks", "changed_block_runs" } };

static int list_at(const char *key, int col)
{
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		if (streq(key, lists[i][col]))
			return (int)i;
	return -1;
}

json_t *report_runs_compact(const json_t *status)
{
	json_t *out = json_object(), *v;
	const char *key;

	if (!out)
		return NULL;
	/* the members in their order, "block_runs" where "blocks" was */
	json_object_foreach((json_t *)status, key, v) {
		int l = json_is_array(v) ? list_at(key, 0) : -1;
		json_t *c = l >= 0 ? runs_of(v) : json_incref(v);

		if (!c || json_object_set_new(out, l >= 0 ? lists[l][1] : key, c) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* Whether A and B have the same entry but for "block" and "range", as
 * report_to_json() writes them (an unknown memmap is null, an error's
 * message is written only with its code). */
static bool same_entry(const struct report_block *a, const struct report_block *b)
{
	int ma = a->memmap_on_memory < 0 ? -1 : !!a->memmap_on_memory;
	int mb = b->memmap_on_memory < 0 ? -1 : !!b->memmap_on_memory;

	return a->configured == b->configured && ma == mb && streq(a->state, b->state) && streq(a->zone, b->zone) &&
	       streq(a->error_code, b->error_code) && (!a->error_code[0] || streq(a->error_message, b->error_message));
}

/* The run of COUNT blocks from FIRST's entry (downwards when DOWN), as
 * runs_of() makes it. */
static json_t *typed_run(const struct report_block *first, uint64_t count, bool down, uint64_t block_size)
{
	_cleanup_json_ json_t *e = report_block_json(first, block_size);
	json_t *run = e ? run_new(e) : NULL;

	if (run && (json_object_set_new(run, "count", u64_json(count)) < 0 ||
		    (down && json_object_set_new(run, "down", json_true()) < 0))) {
		json_decref(run);
		return NULL;
	}
	return run;
}

/* runs_of() over R's blocks as report_to_json() would write them. */
static json_t *typed_runs(const struct report *r)
{
	json_t *runs = json_array();
	const struct report_block *head = NULL;
	uint64_t first = 0, count = 0;
	bool down = false;

	for (size_t i = 0; runs && i <= r->n_blocks; i++) {
		const struct report_block *b = i < r->n_blocks ? &r->blocks[i] : NULL;

		if (head && b) {
			bool d = down, cont;

			if (count == 1 && first > 0 && b->block == first - 1)
				cont = d = true;
			else
				cont = d ? first >= count && b->block == first - count : b->block == first + count;
			if (cont && same_entry(head, b)) {
				count++;
				down = d;
				continue;
			}
		}
		if (head && json_array_append_new(runs, typed_run(head, count, down, r->block_size)) < 0) {
			json_decref(runs);
			return NULL;
		}
		head = b;
		first = b ? b->block : 0;
		count = 1;
		down = false;
	}
	return runs;
}

json_t *report_runs_of_report(const struct report *r)
{
	struct report head = *r;
	_cleanup_json_ json_t *whole = NULL, *runs = NULL;
	json_t *out, *v;
	const char *key;

	/* the report's members with an empty list, which the runs replace */
	head.blocks = NULL;
	head.n_blocks = 0;
	whole = report_to_json(&head);
	runs = typed_runs(r);
	out = whole && runs ? json_object() : NULL;
	if (!out)
		return NULL;
	json_object_foreach(whole, key, v) {
		bool list = streq(key, lists[0][0]);

		if (json_object_set(out, list ? lists[0][1] : key, list ? runs : v) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

size_t report_runs_blocks(const json_t *status)
{
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		n += json_array_size(json_object_get(status, lists[i][0]));
	return n;
}

static int check_runs(const json_t *runs, const char *name, char *err, size_t errlen)
{
	const json_t *run;
	uint64_t total = 0;
	size_t i;

	if (!json_is_array(runs))
		return errbuf_set(err, errlen, -EINVAL, "\"%s\" is not a list", name);
	json_array_foreach(runs, i, run) {
		json_int_t first = json_integer_value(json_object_get(run, "first"));
		json_int_t count = json_integer_value(json_object_get(run, "count"));
		const json_t *down = json_object_get(run, "down");

		if (!json_is_integer(json_object_get(run, "first")) || !json_is_integer(json_object_get(run, "count")) ||
		    first < 0 || count < 1 || count > BLOCKJSON_MAX_BLOCKS || first > INT64_MAX - count ||
		    (down && !json_is_true(down)) || (down && first < count - 1))
			return errbuf_set(err, errlen, -EINVAL, "%s[%zu]: \"first\", \"count\" or \"down\" invalid",
					  name, i);
		total += (uint64_t)count;
		if (total > BLOCKJSON_MAX_BLOCKS)
			return errbuf_set(err, errlen, -EINVAL, "%s: more than %u blocks", name, BLOCKJSON_MAX_BLOCKS);
	}
	return 0;
}

int report_runs_check(const json_t *status, char *err, size_t errlen)
{
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		const json_t *runs = json_object_get(status, lists[i][1]);
		int r;

		if (!runs)
			continue;
		if (json_object_get(status, lists[i][0]))
			return errbuf_set(err, errlen, -EINVAL, "\"%s\" comes with \"%s\"", lists[i][1], lists[i][0]);
		r = check_runs(runs, lists[i][1], err, errlen);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The N-th block of RUN as the wire has it. */
static json_t *run_entry(const json_t *run, uint64_t n, uint64_t block_size)
{
	uint64_t block = json_is_true(json_object_get(run, "down")) ? u64_of(run, "first") - n
								    : u64_of(run, "first") + n;
	json_t *e = json_object(), *v;
	const char *key;

	if (!e || json_object_set_new(e, "block", u64_json(block)) < 0 ||
	    json_object_set_new(e, "range", msg_block_range_json(block, block_size)) < 0)
		goto fail;
	json_object_foreach((json_t *)run, key, v)
		if (is_member(key) && json_object_set(e, key, v) < 0)
			goto fail;
	return e;
fail:
	json_decref(e);
	return NULL;
}

json_t *report_runs_expand(const json_t *status)
{
	uint64_t bs = u64_of(json_object_get(status, "memory"), "block_size");
	bool any = false;
	json_t *out, *v, *run;
	const char *key;
	size_t i;

	for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
		any |= json_object_get(status, lists[l][1]) != NULL;
	if (!any)
		return json_incref((json_t *)status);
	if (report_runs_check(status, NULL, 0) < 0)
		return NULL;
	out = json_object();
	if (!out)
		return NULL;
	json_object_foreach((json_t *)status, key, v) {
		int l = list_at(key, 1);
		json_t *c = json_incref(v);

		if (l >= 0) {
			json_decref(c);
			c = json_array();
			json_array_foreach(v, i, run)
				for (uint64_t n = 0; c && n < u64_of(run, "count"); n++)
					if (json_array_append_new(c, run_entry(run, n, bs)) < 0) {
						json_decref(c);
						c = NULL;
					}
		}
		if (!c || json_object_set_new(out, l >= 0 ? lists[l][0] : key, c) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* Writes the JSON of V (any value) as json_dumps(..., JSON_COMPACT) would
 * inside an object or list. */
static int dump_value(FILE *f, const json_t *v)
{
	return json_dumpf(v, f, JSON_COMPACT | JSON_ENCODE_ANY);
}

static int dump_key(FILE *f, const char *key)
{
	_cleanup_json_ json_t *k = json_string(key);

	if (!k || dump_value(f, k) < 0)
		return -ENOMEM;
	return fputc(':', f) == EOF ? -EIO : 0;
}

/* RUNS as the list of block entries they stand for. */
static int dump_entries(FILE *f, const json_t *runs, uint64_t block_size)
{
	const json_t *run;
	bool first = true;
	size_t i;

	if (fputc('[', f) == EOF)
		return -EIO;
	json_array_foreach(runs, i, run)
		for (uint64_t n = 0; n < u64_of(run, "count"); n++) {
			_cleanup_json_ json_t *e = run_entry(run, n, block_size);

			if (!e || (!first && fputc(',', f) == EOF) || dump_value(f, e) < 0)
				return -ENOMEM;
			first = false;
		}
	return fputc(']', f) == EOF ? -EIO : 0;
}

char *report_runs_expand_text(const json_t *status)
{
	uint64_t bs = u64_of(json_object_get(status, "memory"), "block_size");
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	const char *key;
	bool first = true;
	json_t *v;
	FILE *f;
	int r = 0;

	if (!json_is_object(status) || report_runs_check(status, NULL, 0) < 0)
		return NULL;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	if (fputc('{', f) == EOF)
		r = -EIO;
	json_object_foreach((json_t *)status, key, v) {
		int l = list_at(key, 1);

		if (r < 0)
			break;
		if (!first && fputc(',', f) == EOF)
			r = -EIO;
		first = false;
		if (r == 0)
			r = dump_key(f, l >= 0 ? lists[l][0] : key);
		if (r == 0)
			r = l >= 0 ? dump_entries(f, v, bs) : dump_value(f, v) < 0 ? -ENOMEM : 0;
	}
	if (r == 0 && fputc('}', f) == EOF)
		r = -EIO;
	if (fclose(f) != 0 || r < 0)
		return NULL;
	return TAKE_PTR(buf);
}
