/* SPDX-License-Identifier: MIT */
/* memgrantctl grants [--json]: every grant and revocation the journal keeps. */
#include <getopt.h>
#include <libsmartcols.h>

#include "client.h"
#include "ctl.h"
#include "lib/size.h"
#include "lib/util.h"

static void size_cell(struct libscols_line *ln, size_t col, json_t *j)
{
	char buf[32];

	size_format((uint64_t)json_integer_value(j), buf, sizeof(buf));
	scols_line_set_data(ln, col, buf);
}

int ctl_cmd_grants(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	static const char *const cols[] = { "ID", "KIND", "SOURCE", "GEN", "STATE", "REQUESTED", "APPLIED", "BLOCKS", "ERROR" };
	bool json = false;
	json_t *reply = NULL, *arr, *g;
	struct libscols_table *tb;
	size_t i;
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h': printf("Usage: memgrantctl grants [--json]\n"); return CTL_EXIT_OK;
		default: return ctl_bad_option("grants", ch, argv);
		}
	}
	if (ctl_no_more_args("grants", argc, argv) < 0)
		return CTL_EXIT_FAILURE;
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
		scols_line_set_data(ln, 4, json_string_value(json_object_get(g, "state")));
		size_cell(ln, 5, json_object_get(g, "requested_bytes"));
		size_cell(ln, 6, json_object_get(g, "applied_bytes"));
		scols_line_set_data(ln, 7, blocks);
		scols_line_set_data(ln, 8, json_is_object(err) ? json_string_value(json_object_get(err, "message")) : "");
	}
	scols_print_table(tb);
	scols_unref_table(tb);
	json_decref(reply);
	return CTL_EXIT_OK;
}
