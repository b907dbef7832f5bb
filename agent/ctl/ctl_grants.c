/* SPDX-License-Identifier: MIT */
/* memgrantctl grants [ID] [--json]: every grant and revocation the journal
 * keeps, or one of them in detail: for a grant that gave memory back, what
 * it holds now, what it gave back and to which revocation, and its report
 * as history (the engine's grant view, docs/api/local.openapi.yaml). */
#include <getopt.h>
#include <libsmartcols.h>
#include <string.h>

#include "lib/wire/message.h"
#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "hotplug/words.h"
#include "lib/size.h"
#include "lib/util.h"

static void size_cell(struct libscols_line *ln, size_t col, json_t *j)
{
	char buf[32];

	size_format((uint64_t)json_integer_value(j), buf, sizeof(buf));
	scols_line_set_data(ln, col, buf);
}

static int by_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* "16-23,40" from the status's block entries (a revocation lists them in
 * the order it took them down: sorted first): those done (no error), or with
 * FAILED those not done (an error: a block a revocation gave up on, a step
 * that failed), so that a range never covers a block that was not done */
static void block_ranges(json_t *blocks, bool failed, char *buf, size_t len)
{
	size_t n = 0, all = json_array_size(blocks);
	_cleanup_free_ uint64_t *ids = calloc(all + 1, sizeof(*ids));

	buf[0] = '\0';
	if (!ids)
		return;
	for (size_t i = 0; i < all; i++) {
		json_t *b = json_array_get(blocks, i);

		if (json_is_object(json_object_get(b, "error")) == failed)
			ids[n++] = (uint64_t)json_integer_value(json_object_get(b, "block"));
	}
	qsort(ids, n, sizeof(*ids), by_id);
	words_block_list_format(ids, n, buf, len);
}

/* "given back:  28-35 by r-2", one line per revocation (or "outside
 * memgrant"), in the order they first appear. */
static void given_back_lines(json_t *back)
{
	size_t n = json_array_size(back);
	_cleanup_free_ uint64_t *ids = calloc(n + 1, sizeof(*ids));
	_cleanup_free_ bool *seen = calloc(n + 1, sizeof(*seen));
	char list[512];

	if (!ids || !seen)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *by = json_string_value(json_object_get(json_array_get(back, i), "by"));
		size_t k = 0;

		if (seen[i] || !by)
			continue;
		for (size_t j = i; j < n; j++) {
			json_t *b = json_array_get(back, j);
			const char *o = json_string_value(json_object_get(b, "by"));

			if (!seen[j] && o && streq(o, by)) {
				seen[j] = true;
				ids[k++] = (uint64_t)json_integer_value(json_object_get(b, "block"));
			}
		}
		qsort(ids, k, sizeof(*ids), by_id);
		words_block_list_format(ids, k, list, sizeof(list));
		printf("  given back:  %s %s%s\n", list, streq(by, "outside memgrant") ? "" : "by ", by);
	}
}

/* One grant or revocation in detail: GET /v1/grants/ID. */
static int show_one(struct ctl_ctx *ctx, const char *id, bool json)
{
	_cleanup_free_ char *escaped = ctl_url_escape(id);
	json_t *g = NULL, *err, *b;
	char path[256], req[16], app[16], blocks[512], not_done[256];
	const char *key;
	json_t *v;
	size_t i;

	if (!escaped)
		return CTL_EXIT_FAILURE;
	snprintf(path, sizeof(path), "/v1/grants/%s", escaped);
	if (ctl_get_json(ctx, path, &g) < 0)
		return CTL_EXIT_FAILURE;
	if (json) {
		ctl_print_json(g);
		json_decref(g);
		return CTL_EXIT_OK;
	}
	size_format((uint64_t)json_integer_value(json_object_get(g, "requested_bytes")), req, sizeof(req));
	size_format((uint64_t)json_integer_value(json_object_get(g, "applied_bytes")), app, sizeof(app));
	block_ranges(json_object_get(g, "blocks"), false, blocks, sizeof(blocks));
	block_ranges(json_object_get(g, "blocks"), true, not_done, sizeof(not_done));
	printf("%s %s\n", json_string_value(json_object_get(g, "kind")), json_string_value(json_object_get(g, "id")));
	if (json_is_array(json_object_get(g, "given_back"))) {
		json_t *rep = json_object_get(g, "report");
		char had[16];

		size_format((uint64_t)json_integer_value(json_object_get(rep, "applied_bytes")), had, sizeof(had));
		printf("  state:       %s (its report: %s, %s applied)\n", json_string_value(json_object_get(g, "state")),
		       json_string_value(json_object_get(rep, "state")), had);
		printf("  source:      %s, generation %lld\n", json_string_value(json_object_get(g, "source")),
		       (long long)json_integer_value(json_object_get(g, "generation")));
		printf("  memory:      %s held, of %s requested\n", app, req);
		printf("  blocks:      %lld held%s%s%s%s%s\n", (long long)json_integer_value(json_object_get(g, "blocks_done")),
		       blocks[0] ? ": " : "", blocks, not_done[0] ? (blocks[0] ? " (not done: " : ": not done: ") : "",
		       not_done, not_done[0] && blocks[0] ? ")" : "");
		given_back_lines(json_object_get(g, "given_back"));
	} else {
		printf("  state:       %s\n", json_string_value(json_object_get(g, "state")));
		printf("  source:      %s, generation %lld\n", json_string_value(json_object_get(g, "source")),
		       (long long)json_integer_value(json_object_get(g, "generation")));
		printf("  memory:      %s of %s\n", app, req);
		printf("  blocks:      %lld of %lld%s%s%s%s%s\n", (long long)json_integer_value(json_object_get(g, "blocks_done")),
		       (long long)json_integer_value(json_object_get(g, "blocks_total")), blocks[0] ? ": " : "", blocks,
		       not_done[0] ? (blocks[0] ? " (not done: " : ": not done: ") : "", not_done,
		       not_done[0] && blocks[0] ? ")" : "");
	}
	/* times, when memgrantd reports them */
	json_object_foreach(g, key, v)
		if (json_is_string(v) && ((strlen(key) > 3 && streq(key + strlen(key) - 3, "_at")) || streq(key, "time"))) {
			char label[64];
			snprintf(label, sizeof(label), "%s:", key);
			printf("  %-12s %s\n", label, json_string_value(v));
		}
	json_array_foreach(json_object_get(g, "decisions"), i, b)
		printf("  decision:    %s\n", json_string_value(b));
	/* a revocation retrying busy blocks */
	json_array_foreach(json_object_get(g, "busy_blocks"), i, b)
		printf("  %-12s block %lld, %lld attempts (%s)\n",
		       json_is_integer(json_object_get(g, "budget_left_ms")) ? "retrying:" : "gave up:",
		       (long long)json_integer_value(json_object_get(b, "block")),
		       (long long)json_integer_value(json_object_get(b, "attempts")), json_string_value(json_object_get(b, "error")));
	if (json_is_integer(json_object_get(g, "budget_left_ms")))
		printf("  budget:      %lld s of %lld s left\n",
		       (long long)(json_integer_value(json_object_get(g, "budget_left_ms")) + 999) / 1000,
		       (long long)json_integer_value(json_object_get(g, "budget_ms")) / 1000);
	if (json_string_value(json_object_get(g, "cancel_requested_by")))
		printf("  cancel:      requested by %s\n", json_string_value(json_object_get(g, "cancel_requested_by")));
	json_array_foreach(json_object_get(g, "blocks"), i, b) {
		json_t *be = json_object_get(b, "error");
		if (json_is_object(be))
			printf("  block %lld:   %s (%s)\n", (long long)json_integer_value(json_object_get(b, "block")),
			       json_string_value(json_object_get(be, "message")), json_string_value(json_object_get(be, "code")));
	}
	err = json_object_get(g, "error");
	if (json_is_object(err))
		printf("  error:       %s (%s)\n", json_string_value(json_object_get(err, "message")),
		       json_string_value(json_object_get(err, "code")));
	json_decref(g);
	return CTL_EXIT_OK;
}

/* A grant of the list that holds fewer blocks than its report brought up:
 * revocations (or an operator) took some back.  The table shows what it
 * holds, as "grants ID" does; its report stays in --json. */
static bool gave_back(json_t *g)
{
	const char *kind = json_string_value(json_object_get(g, "kind"));

	return kind && streq(kind, "grant") &&
	       json_integer_value(json_object_get(g, "owned_blocks")) < json_integer_value(json_object_get(g, "blocks_done"));
}

static const char *held_state(json_t *g)
{
	if (!gave_back(g))
		return json_string_value(json_object_get(g, "state"));
	return json_integer_value(json_object_get(g, "owned_blocks")) ? "reduced" : "revoked";
}

int ctl_cmd_grants(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	static const char *const cols[] = { "ID", "KIND", "SOURCE", "GEN", "STATE", "REQUESTED", "APPLIED", "BLOCKS",
					    "CREATED", "UPDATED", "ERROR" };
	bool json = false;
	json_t *reply = NULL, *arr, *g;
	struct libscols_table *tb;
	size_t i;
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h': printf("Usage: memgrantctl grants [ID] [--json]\n"); return CTL_EXIT_OK;
		default: return ctl_bad_option("grants", ch, argv);
		}
	}
	if (optind < argc) {
		if (!msg_id_valid(argv[optind])) {
			ctl_err("grants: '%s' is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)", argv[optind],
				MSG_ID_MAX);
			return CTL_EXIT_FAILURE;
		}
		optind++;
		if (ctl_no_more_args("grants", argc, argv) < 0)
			return CTL_EXIT_FAILURE;
		return show_one(ctx, argv[optind - 1], json);
	}
	if (ctl_get_json(ctx, "/v1/grants", &reply) < 0)
		return CTL_EXIT_FAILURE;
	if (json) {
		ctl_print_json(reply);
		json_decref(reply);
		return CTL_EXIT_OK;
	}
	tb = scols_new_table();
	if (!tb) {
		json_decref(reply);
		return CTL_EXIT_FAILURE;
	}
	for (i = 0; i < ARRAY_SIZE(cols); i++)
		scols_table_new_column(tb, cols[i], 0, i == ARRAY_SIZE(cols) - 1 ? SCOLS_FL_TRUNC : 0);
	arr = json_object_get(reply, "grants");
	json_array_foreach(arr, i, g) {
		struct libscols_line *ln = scols_table_new_line(tb, NULL);
		char gen[32], blocks[32];
		json_t *err = json_object_get(g, "error");
		if (!ln)
			break;
		snprintf(gen, sizeof(gen), "%lld", (long long)json_integer_value(json_object_get(g, "generation")));
		snprintf(blocks, sizeof(blocks), "%lld", (long long)json_integer_value(json_object_get(g, "owned_blocks")));
		scols_line_set_data(ln, 0, json_string_value(json_object_get(g, "id")));
		scols_line_set_data(ln, 1, json_string_value(json_object_get(g, "kind")));
		scols_line_set_data(ln, 2, json_string_value(json_object_get(g, "source")));
		scols_line_set_data(ln, 3, gen);
		scols_line_set_data(ln, 4, held_state(g));
		size_cell(ln, 5, json_object_get(g, "requested_bytes"));
		if (gave_back(g)) {
			char held[16];

			size_format((uint64_t)json_integer_value(json_object_get(g, "owned_blocks")) *
					    (uint64_t)json_integer_value(json_object_get(json_object_get(g, "memory"), "block_size")),
				    held, sizeof(held));
			scols_line_set_data(ln, 6, held);
		} else
			size_cell(ln, 6, json_object_get(g, "applied_bytes"));
		scols_line_set_data(ln, 7, blocks);
		scols_line_set_data(ln, 8, json_string_value(json_object_get(g, "created_at")));
		scols_line_set_data(ln, 9, json_string_value(json_object_get(g, "updated_at")));
		scols_line_set_data(ln, 10, json_is_object(err) ? json_string_value(json_object_get(err, "message")) : "");
	}
	scols_print_table(tb);
	scols_unref_table(tb);
	json_decref(reply);
	return CTL_EXIT_OK;
}
