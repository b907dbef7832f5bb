/* SPDX-License-Identifier: MIT */
/* memgrantctl status [--json]: what the agent is doing and how much memory it holds. */
#include <getopt.h>

#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "lib/size.h"
#include "lib/util.h"

static const char *size_str(json_t *j, char *buf, size_t len)
{
	size_format((uint64_t)json_integer_value(j), buf, len);
	return buf;
}

/* The policy's decisions for the operation running, else for the last one
 * the journal accepted (GET /v1/grants lists them in that order): the
 * reasons behind what status shows.  Nothing printed when there is none. */
static void print_decisions(struct ctl_ctx *ctx, json_t *run)
{
	const char *running_id = json_is_object(run) ? json_string_value(json_object_get(run, "id")) : NULL;
	json_t *list = NULL, *grants, *op = NULL, *g, *d;
	size_t i;

	if (ctl_get_json(ctx, "/v1/grants", &list) < 0)
		return;
	grants = json_object_get(list, "grants");
	json_array_foreach(grants, i, g)
		if (running_id ? streq(running_id, json_string_value(json_object_get(g, "id")) ?: "") : true)
			op = g;
	if (op) {
		printf("decisions of:       %s %s, %s\n", json_string_value(json_object_get(op, "kind")),
		       json_string_value(json_object_get(op, "id")), json_string_value(json_object_get(op, "state")));
		json_array_foreach(json_object_get(op, "decisions"), i, d)
			printf("decision:           %s\n", json_string_value(d));
	}
	json_decref(list);
}

int ctl_cmd_status(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	bool json = false;
	json_t *reply = NULL, *mem, *run;
	char a[16], b[16], c[16], d[16], e[16], f[16], t[16];
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h': printf("Usage: memgrantctl status [--json]\n"); return CTL_EXIT_OK;
		default: return ctl_bad_option("status", ch, argv);
		}
	}
	if (ctl_no_more_args("status", argc, argv) < 0)
		return CTL_EXIT_FAILURE;
	if (ctl_get_json(ctx, "/v1/status", &reply) < 0)
		return CTL_EXIT_FAILURE;
	if (json) {
		ctl_print_json(reply);
		json_decref(reply);
		return CTL_EXIT_OK;
	}
	mem = json_object_get(reply, "memory");
	run = json_object_get(reply, "running");
	printf("agent:              %s (memgrantd %s)\n", json_string_value(json_object_get(reply, "agent")),
	       json_string_value(json_object_get(reply, "version")));
	printf("backend:            %s, root %s\n", json_string_value(json_object_get(reply, "backend")),
	       json_string_value(json_object_get(reply, "root")));
	printf("block size:         %s\n", size_str(json_object_get(mem, "block_size"), a, sizeof(a)));
	printf("online memory:      %s\n", size_str(json_object_get(mem, "online_bytes"), b, sizeof(b)));
	printf("standby memory:     %s\n", size_str(json_object_get(mem, "standby_bytes"), c, sizeof(c)));
	if (json_object_get(mem, "in_flight_bytes"))
		printf("in flight:          %s (between two steps; online + standby + in flight = %s)\n",
		       size_str(json_object_get(mem, "in_flight_bytes"), f, sizeof(f)),
		       size_str(json_object_get(mem, "total_bytes"), t, sizeof(t)));
	printf("granted by agent:   %s\n", size_str(json_object_get(mem, "granted_bytes"), d, sizeof(d)));
	if (json_integer_value(json_object_get(mem, "foreign_blocks")) > 0) {
		json_int_t n = json_integer_value(json_object_get(mem, "foreign_blocks"));

		/* brought up outside memgrantd: never revoked, shown apart */
		printf("not memgrant's:     %s in %lld block%s online outside any grant "
		       "(lsmem -o +OWNER shows them; adopt BLOCKS takes them)\n",
		       size_str(json_object_get(mem, "foreign_bytes"), e, sizeof(e)), (long long)n, n == 1 ? "" : "s");
	}
	if (json_string_value(json_object_get(reply, "auto_online_blocks")))
		printf("auto_online_blocks: %s\n", json_string_value(json_object_get(reply, "auto_online_blocks")));
	if (json_is_object(run))
		printf("running:            %s %s, %s, %lld of %lld blocks\n",
		       json_string_value(json_object_get(run, "kind")), json_string_value(json_object_get(run, "id")),
		       json_string_value(json_object_get(run, "state")),
		       (long long)json_integer_value(json_object_get(run, "blocks_done")),
		       (long long)json_integer_value(json_object_get(run, "blocks_total")));
	else
		printf("running:            nothing\n");
	if (json_is_object(run)) {
		json_t *bb;
		size_t i;
		json_array_foreach(json_object_get(run, "busy_blocks"), i, bb)
			printf("retrying:           block %lld, %lld attempts (%s)\n",
			       (long long)json_integer_value(json_object_get(bb, "block")),
			       (long long)json_integer_value(json_object_get(bb, "attempts")),
			       json_string_value(json_object_get(bb, "error")));
		if (json_is_integer(json_object_get(run, "budget_left_ms")))
			printf("budget left:        %lld s of %lld s\n",
			       (long long)(json_integer_value(json_object_get(run, "budget_left_ms")) + 999) / 1000,
			       (long long)json_integer_value(json_object_get(run, "budget_ms")) / 1000);
		if (json_string_value(json_object_get(run, "cancel_requested_by")))
			printf("cancel requested:   by %s\n", json_string_value(json_object_get(run, "cancel_requested_by")));
	}
	printf("queued:             %lld\n", (long long)json_integer_value(json_object_get(reply, "queued")));
	{
		json_t *pol = json_object_get(reply, "policy");

		if (json_is_object(pol))
			printf("policy:             zone %s, memmap_on_memory %s, reserve %s, movable ratio %lld%%\n",
			       json_string_value(json_object_get(pol, "zone")),
			       json_string_value(json_object_get(pol, "memmap_on_memory")),
			       size_str(json_object_get(pol, "reserve"), a, sizeof(a)),
			       (long long)json_integer_value(json_object_get(pol, "movable_ratio")));
	}
	print_decisions(ctx, run);
	json_decref(reply);
	return CTL_EXIT_OK;
}
