/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl wait ID: follow a grant or revocation memgrantd already has to
 * its final state (ctl_follow()).
 */
#include <getopt.h>

#include "lib/wire/message.h"
#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "agent/ctl/ctl_ops.h"
#include "lib/util.h"

int ctl_cmd_wait(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	_cleanup_free_ char *escaped = NULL;
	json_t *cur = NULL;
	bool json = false;
	char path[256];
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h':
			printf("Usage: memgrantctl wait ID [--json]\n\n"
			       "Follows grant or revocation ID until it is final and prints the outcome;\n"
			       "exits 0 applied, 1 failed or rejected, 64 partial.  Ctrl-C stops waiting only.\n");
			return CTL_EXIT_OK;
		default: return ctl_bad_option("wait", ch, argv);
		}
	}
	if (optind >= argc) {
		ctl_err("wait: which grant or revocation? (memgrantctl wait ID; memgrantctl grants lists them)");
		return CTL_EXIT_FAILURE;
	}
	if (!msg_id_valid(argv[optind])) {
		ctl_err("wait: '%s' is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)", argv[optind], MSG_ID_MAX);
		return CTL_EXIT_FAILURE;
	}
	if (optind + 1 < argc) {
		ctl_err("wait: unexpected argument '%s'", argv[optind + 1]);
		return CTL_EXIT_FAILURE;
	}
	/* a clear "no such grant" before the stream */
	escaped = ctl_url_escape(argv[optind]);
	if (!escaped)
		return CTL_EXIT_FAILURE;
	snprintf(path, sizeof(path), "/v1/grants/%s", escaped);
	if (ctl_get_json(ctx, path, &cur) < 0)
		return CTL_EXIT_FAILURE;
	json_decref(cur);
	return ctl_follow(ctx, argv[optind], json, false);
}
