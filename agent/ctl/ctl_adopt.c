/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl adopt BLOCKS: online blocks that no grant owns (brought up
 * outside memgrantd, or before its journal was lost) become a local grant
 * record in memgrantd, so they count as granted and can be revoked.  The
 * other way out for such blocks is to release them by hand
 * (memgrantctl block offline/deconfigure N).
 */
#include <getopt.h>

#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "lib/size.h"
#include "lib/util.h"

int ctl_cmd_adopt(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_free_ uint64_t *ids = NULL;
	_cleanup_free_ char *body = NULL;
	json_t *req, *arr, *reply = NULL;
	bool json = false;
	size_t n = 0;
	long status = 0;
	char sz[16];
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h':
			printf("Usage: memgrantctl adopt BLOCKS [--json]\n\n"
			       "BLOCKS (16,17,20-23) are online, owned by no grant (status calls them foreign):\n"
			       "they become one local grant record, counted as granted and revocable.\n"
			       "To give them back instead: memgrantctl block offline N, block deconfigure N.\n");
			return CTL_EXIT_OK;
		default:
			return ctl_bad_option("adopt", ch, argv);
		}
	}
	if (optind >= argc) {
		ctl_err("adopt: which blocks? (memgrantctl adopt 20,21 or 20-23)");
		return CTL_EXIT_FAILURE;
	}
	if (ctl_parse_id_list("adopt BLOCKS", argv[optind], &ids, &n) < 0)
		return CTL_EXIT_FAILURE;
	optind++;
	if (ctl_no_more_args("adopt", argc, argv) < 0)
		return CTL_EXIT_FAILURE;
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_integer((json_int_t)ids[i]));
	req = arr ? json_pack("{s:o}", "blocks", arr) : NULL;
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body) {
		ctl_err("adopt: out of memory");
		return CTL_EXIT_FAILURE;
	}
	if (ctl_request(ctx, "POST", "/v1/adopt", body, &status, &reply) < 0)
		return CTL_EXIT_FAILURE;
	if (status != 200) {
		ctl_print_error_reply(status, reply);
		json_decref(reply);
		return CTL_EXIT_FAILURE;
	}
	if (json) {
		ctl_print_json(reply);
	} else {
		size_format((uint64_t)json_integer_value(json_object_get(reply, "applied_bytes")), sz, sizeof(sz));
		printf("adopted %zu block%s (%s) into grant %s\n", n, n == 1 ? "" : "s", sz,
		       json_string_value(json_object_get(reply, "id")) ?: "?");
	}
	json_decref(reply);
	return CTL_EXIT_OK;
}
