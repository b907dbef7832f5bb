/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl cancel ID: stop a grant or revocation after the block in
 * flight (POST /v1/grants/ID/cancel) and, unless --no-wait, follow it to
 * its final state.
 */
#include <getopt.h>

#include "lib/wire/message.h"
#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "agent/ctl/ctl_ops.h"
#include "lib/util.h"

int ctl_cmd_cancel(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "no-wait", no_argument, NULL, 'n' },
					      { "help", no_argument, NULL, 'h' }, { 0 } };
	_cleanup_free_ char *escaped = NULL;
	json_t *reply = NULL;
	bool json = false, wait = true;
	long status = 0;
	char path[256];
	int ch, rc;

	while ((ch = getopt_long(argc, argv, ":Jnh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'n': wait = false; break;
		case 'h':
			printf("Usage: memgrantctl cancel ID [--no-wait] [--json]\n\n"
			       "Cancels grant or revocation ID: a queued one ends cancelled at once, a running one\n"
			       "stops after the block in flight and ends partial (the blocks done stay done) or\n"
			       "cancelled.  Waits for the final state unless --no-wait; exits 0 cancelled,\n"
			       "64 partial, 1 when it was final already or finished before the cancel took effect.\n");
			return CTL_EXIT_OK;
		default: return ctl_bad_option("cancel", ch, argv);
		}
	}
	if (optind >= argc) {
		ctl_err("cancel: which grant or revocation? (memgrantctl cancel ID; memgrantctl grants lists them)");
		return CTL_EXIT_FAILURE;
	}
	if (!msg_id_valid(argv[optind])) {
		ctl_err("cancel: '%s' is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)", argv[optind], MSG_ID_MAX);
		return CTL_EXIT_FAILURE;
	}
	if (optind + 1 < argc) {
		ctl_err("cancel: unexpected argument '%s'", argv[optind + 1]);
		return CTL_EXIT_FAILURE;
	}
	escaped = ctl_url_escape(argv[optind]);
	if (!escaped)
		return CTL_EXIT_FAILURE;
	snprintf(path, sizeof(path), "/v1/grants/%s/cancel", escaped);
	if (ctl_request(ctx, "POST", path, "", &status, &reply) < 0)
		return CTL_EXIT_FAILURE;
	if (status != 200 && status != 202) {
		if (json)
			ctl_print_json(reply);
		ctl_print_error_reply(status, reply);
		json_decref(reply);
		return CTL_EXIT_FAILURE;
	}
	if (status == 202 && wait) {
		json_decref(reply);
		return ctl_follow(ctx, argv[optind], json, true);
	}
	if (json)
		ctl_print_json(reply);
	else if (status == 202)
		printf("%s %s: cancelling after the block in flight (%lld of %lld blocks done); follow it with: "
		       "memgrantctl wait %s\n", json_string_value(json_object_get(reply, "kind")), argv[optind],
		       (long long)json_integer_value(json_object_get(reply, "blocks_done")),
		       (long long)json_integer_value(json_object_get(reply, "blocks_total")), argv[optind]);
	else
		ctl_print_summary(reply);
	rc = status == 202 ? CTL_EXIT_OK : ctl_cancel_exit_code(json_string_value(json_object_get(reply, "state")));
	json_decref(reply);
	return rc;
}
