/* SPDX-License-Identifier: MIT */
/* memgrantctl events [--json]: follow what the agent does, one line per event. */
#include <getopt.h>

#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "lib/size.h"
#include "lib/util.h"

static int print_event(json_t *ev, void *cls)
{
	bool json = *(bool *)cls;

	if (json) {
		json_dumpf(ev, stdout, JSON_COMPACT | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		char app[16], req[16];
		json_t *err = json_object_get(ev, "error");
		size_format((uint64_t)json_integer_value(json_object_get(ev, "applied_bytes")), app, sizeof(app));
		size_format((uint64_t)json_integer_value(json_object_get(ev, "requested_bytes")), req, sizeof(req));
		printf("%s %s %s %s: %s of %s, %lld of %lld blocks%s%s\n",
		       json_string_value(json_object_get(ev, "type")), json_string_value(json_object_get(ev, "kind")),
		       json_string_value(json_object_get(ev, "id")), json_string_value(json_object_get(ev, "state")), app,
		       req, (long long)json_integer_value(json_object_get(ev, "blocks_done")),
		       (long long)json_integer_value(json_object_get(ev, "blocks_total")),
		       json_is_object(err) ? "; " : "",
		       json_is_object(err) ? json_string_value(json_object_get(err, "message")) : "");
	}
	fflush(stdout);
	return 0;
}

int ctl_cmd_events(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	bool json = false;
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h': printf("Usage: memgrantctl events [--json]\n"); return CTL_EXIT_OK;
		default: return ctl_bad_option("events", ch, argv);
		}
	}
	if (ctl_no_more_args("events", argc, argv) < 0)
		return CTL_EXIT_FAILURE;
	return ctl_follow_events(ctx, "/v1/events", print_event, &json) < 0 ? CTL_EXIT_FAILURE : CTL_EXIT_OK;
}
