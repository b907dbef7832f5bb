/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl grant SIZE | RANGE | --blocks LIST: hand a grant to memgrantd;
 * --dry-run asks for the plan only.  The option parsing and the message are
 * shared with revoke (ctl_grant_or_revoke()); with --wait it follows the
 * grant to its end (ctl_ops.h).
 */
#include <getopt.h>
#include <signal.h>
#include <time.h>

#include "lib/wire/message.h"
#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "agent/ctl/ctl_ops.h"
#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

static void size_line(const char *label, json_t *plan, const char *key, const char *tail)
{
	char b[16];

	size_format((uint64_t)json_integer_value(json_object_get(plan, key)), b, sizeof(b));
	printf("  %-12s %s%s\n", label, b, tail);
}

/* --dry-run: POST /v1/grants?dry_run=1 and print the plan; nothing changes. */
static int dry_run_plan(struct ctl_ctx *ctx, json_t *msg, bool json)
{
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	json_t *plan = NULL, *blocks, *b;
	long status = 0;
	char req[16], bs[16], list[512];
	size_t i, used = 0, n;

	if (!body)
		return CTL_EXIT_FAILURE;
	if (ctl_request(ctx, "POST", "/v1/grants?dry_run=1", body, &status, &plan) < 0)
		return CTL_EXIT_FAILURE;
	if (status != 200) {
		if (json)
			ctl_print_json(plan);
		ctl_print_error_reply(status, plan);
		json_decref(plan);
		return CTL_EXIT_FAILURE;
	}
	if (json) {
		ctl_print_json(plan);
		json_decref(plan);
		return CTL_EXIT_OK;
	}
	blocks = json_object_get(plan, "blocks");
	n = json_array_size(blocks);
	list[0] = '\0';
	for (i = 0; i < n && used < sizeof(list); i++) {
		json_int_t a = json_integer_value(json_object_get(json_array_get(blocks, i), "block")), z = a;
		while (i + 1 < n && json_integer_value(json_object_get(json_array_get(blocks, i + 1), "block")) == z + 1) {
			z++;
			i++;
		}
		used += (size_t)(a == z ? snprintf(list + used, sizeof(list) - used, "%s%lld", used ? "," : "", (long long)a)
				      : snprintf(list + used, sizeof(list) - used, "%s%lld-%lld", used ? "," : "",
						 (long long)a, (long long)z));
	}
	size_format((uint64_t)json_integer_value(json_object_get(plan, "requested_bytes")), req, sizeof(req));
	size_format((uint64_t)json_integer_value(json_object_get(plan, "block_size")), bs, sizeof(bs));
	printf("%s of %s (dry run: nothing was changed)\n", json_string_value(json_object_get(plan, "kind")), req);
	printf("  %-12s %s (%zu of %s)\n", "blocks:", list, n, bs);
	if (n) {
		/* one run of blocks (in either order): its address range, as chmem takes it */
		size_t lo = 0, hi = 0;
		for (i = 1; i < n; i++) {
			json_int_t id = json_integer_value(json_object_get(json_array_get(blocks, i), "block"));
			if (id < json_integer_value(json_object_get(json_array_get(blocks, lo), "block")))
				lo = i;
			if (id > json_integer_value(json_object_get(json_array_get(blocks, hi), "block")))
				hi = i;
		}
		const char *fr = json_string_value(json_object_get(json_array_get(blocks, lo), "range"));
		const char *lr = json_string_value(json_object_get(json_array_get(blocks, hi), "range"));
		if (fr && lr && strchr(fr, '-') && strchr(lr, '-') &&
		    json_integer_value(json_object_get(json_array_get(blocks, hi), "block")) -
				    json_integer_value(json_object_get(json_array_get(blocks, lo), "block")) + 1 == (json_int_t)n)
			printf("  %-12s %.*s-%s\n", "addresses:", (int)(strchr(fr, '-') - fr), fr, strchr(lr, '-') + 1);
	}
	if (json_object_get(plan, "zone"))
		printf("  %-12s %s, memmap_on_memory %s\n", "zone:", json_string_value(json_object_get(plan, "zone")),
		       json_is_null(json_object_get(plan, "memmap_on_memory")) ? "as the kernel chose"
		       : json_is_true(json_object_get(plan, "memmap_on_memory")) ? "on" : "off");
	json_array_foreach(json_object_get(plan, "decisions"), i, b)
		printf("  %-12s %s\n", "decision:", json_string_value(b));
	if (json_object_get(plan, "memmap_bytes")) {
		size_line("memmap:", plan, "memmap_bytes",
			  json_integer_value(json_object_get(plan, "memmap_in_granted_bytes")) ? " (in the granted blocks)"
												  : " (from memory already online)");
		size_line("usable:", plan, "usable_bytes", " of the granted memory");
		size_line("cost:", plan, "online_cost_bytes", " of the memory online now");
	}
	{
		char before[16], after[16];
		size_format((uint64_t)json_integer_value(json_object_get(plan, "online_bytes_before")), before, sizeof(before));
		size_format((uint64_t)json_integer_value(json_object_get(plan, "online_bytes_after")), after, sizeof(after));
		printf("  %-12s %s -> %s\n", "online:", before, after);
	}
	if (json_string_value(json_object_get(plan, "memmap_note")))
		printf("  %-12s %s\n", "note:", json_string_value(json_object_get(plan, "memmap_note")));
	json_decref(plan);
	return CTL_EXIT_OK;
}

/* The block size memgrantd works with (/v1/status), for address ranges. */
static int daemon_block_size(struct ctl_ctx *ctx, uint64_t *bs)
{
	json_t *st = NULL;
	json_int_t v;

	if (ctl_get_json(ctx, "/v1/status", &st) < 0)
		return -EIO;
	v = json_integer_value(json_object_get(json_object_get(st, "memory"), "block_size"));
	json_decref(st);
	if (v <= 0) {
		ctl_err("memgrantd did not say its block size: give blocks, not an address range");
		return -EPROTO;
	}
	*bs = (uint64_t)v;
	return 0;
}

/* --blocks 16,17,20-23, or an address range 0x80000000-0x8fffffff (as chmem takes
 * it), into the message's "blocks" */
static int set_blocks(struct ctl_ctx *ctx, json_t *msg, const char *opt, const char *arg)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0;
	json_t *arr;
	char why[256];

	if (words_is_addr_range(arg)) {
		uint64_t bs, first, last;

		/* the form first (any block size divides 1), before asking memgrantd */
		if (words_addr_range(arg, 1, &first, &last, why, sizeof(why)) < 0) {
			ctl_err("%s: %s", opt, why);
			return -EINVAL;
		}
		if (daemon_block_size(ctx, &bs) < 0)
			return -EIO;
		if (words_addr_range(arg, bs, &first, &last, why, sizeof(why)) < 0) {
			ctl_err("%s: %s", opt, why);
			return -EINVAL;
		}
		if (last - first >= 65536) {
			ctl_err("%s: address range '%s' spans more than 65536 blocks", opt, arg);
			return -ERANGE;
		}
		arr = json_array();
		for (uint64_t id = first; id <= last; id++)
			json_array_append_new(arr, json_integer((json_int_t)id));
		json_object_set_new(msg, "blocks", arr);
		return 0;
	}
	if (words_block_list(arg, 65536, &ids, &n, why, sizeof(why)) < 0) {
		ctl_err("%s: %s", opt, why);
		return -EINVAL;
	}
	arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_integer((json_int_t)ids[i]));
	json_object_set_new(msg, "blocks", arr);
	return 0;
}

/* revoke --grant ID: a grant memgrantd does not know is refused here, so
 * that a typing error leaves no rejected revocation in the journal. */
static int known_grant(const struct ctl_ctx *ctx, const char *id)
{
	_cleanup_free_ char *escaped = ctl_url_escape(id);
	json_t *reply = NULL;
	const char *kind;
	char path[256];
	long status = 0;
	int r;

	if (!escaped)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/v1/grants/%s", escaped);
	r = ctl_request(ctx, "GET", path, NULL, &status, &reply);
	if (r < 0)
		return r;
	kind = json_string_value(json_object_get(reply, "kind"));
	if (status == 404)
		r = -ENOENT;
	else if (status != 200)
		r = ctl_print_error_reply(status, reply);
	else if (kind && !streq(kind, "grant"))
		r = -EINVAL;
	json_decref(reply);
	if (r == -ENOENT)
		ctl_err("no such grant: %s (memgrantctl grants lists them)", id);
	else if (r == -EINVAL)
		ctl_err("--grant %s: %s is a revocation, not a grant (memgrantctl grants lists them)", id, id);
	return r;
}

int ctl_grant_or_revoke(struct ctl_ctx *ctx, int argc, char **argv, bool revoke)
{
	static const struct option opts[] = {
		{ "memmap", required_argument, NULL, 'm' }, { "zone", required_argument, NULL, 'z' },
		{ "id", required_argument, NULL, 'i' },     { "blocks", required_argument, NULL, 'b' },
		{ "grant", required_argument, NULL, 'g' },  { "not-after", required_argument, NULL, 'a' },
		{ "contiguous", no_argument, NULL, 'C' },  { "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'J' },         { "help", no_argument, NULL, 'h' },
		{ "dry-run", no_argument, NULL, 'D' },      { 0 }
	};
	json_t *msg = json_pack("{s:s}", "type", revoke ? "revoke" : "grant");
	bool wait = false, json = false, have_target = false, dry_run = false;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, ":m:z:i:b:g:a:CwJhD", opts, NULL)) != -1) {
		switch (ch) {
		case 'm': {
			int m;

			if (revoke)
				goto not_for_revoke;
			if (words_memmap_parse(optarg, true, &m) < 0) {
				ctl_err("--memmap: '%s' is not one of auto, on, off (also 1/0, true/false, "
					"always/never)", optarg);
				goto fail;
			}
			json_object_set_new(msg, "memmap_on_memory",
					    m == WORDS_MEMMAP_AUTO ? json_string("auto") : json_boolean(m == WORDS_MEMMAP_ON));
			break;
		}
		case 'z': {
			enum mem_zone z;

			if (revoke)
				goto not_for_revoke;
			if (words_zone_parse(optarg, true, &z) < 0) {
				ctl_err("--zone: '%s' is not one of auto, movable, normal (in any case, as lsmem "
					"writes them: Movable, Normal)", optarg);
				goto fail;
			}
			json_object_set_new(msg, "zone", json_string(words_zone_name(z)));
			break;
		}
		case 'i': json_object_set_new(msg, "id", json_string(optarg)); break;
		case 'b':
			if (have_target)
				goto one_target;
			if (set_blocks(ctx, msg, "--blocks", optarg) < 0)
				goto fail; /* set_blocks said why */
			have_target = true;
			break;
		case 'g':
			if (!revoke) {
				ctl_err("--grant: only a revocation names a grant");
				goto fail;
			}
			if (have_target)
				goto one_target;
			json_object_set_new(msg, "grant", json_string(optarg));
			have_target = true;
			break;
		case 'a': json_object_set_new(msg, "not_after", json_string(optarg)); break;
		case 'C': json_object_set_new(msg, "contiguous", json_true()); break;
		case 'w': wait = true; break;
		case 'J': json = true; break;
		case 'D': dry_run = true; break;
		case 'h':
			printf(revoke ? "Usage: memgrantctl revoke (SIZE | RANGE | --grant ID | --blocks LIST) [--id ID] [--wait | --dry-run]\n"
					"                         [--json]\n"
				      : "Usage: memgrantctl grant (SIZE | RANGE | --blocks LIST) [--memmap auto|on|off] [--zone auto|Movable|Normal]\n"
					"                        [--contiguous] [--not-after TIME] [--id ID] [--wait | --dry-run] [--json]\n");
			printf("\nSIZE as chmem takes it: MiB without a unit (512 is 512M), or as lsmem prints\n"
			       "it (1.5G, 2.25G: whole memory blocks); RANGE a physical address range as chmem\n"
			       "takes it (0x80000000-0x8fffffff); LIST block numbers 16,17,20-23.  With --wait,\n"
			       "Ctrl-C stops waiting, not the %s.\n",
			       revoke ? "revocation" : "grant");
			json_decref(msg);
			return CTL_EXIT_OK;
		default:
			ctl_bad_option(revoke ? "revoke" : "grant", ch, argv);
			goto fail;
		}
	}
	if (optind < argc) {
		uint64_t size;
		if (have_target)
			goto one_target;
		if (words_is_addr_range(argv[optind])) {
			if (set_blocks(ctx, msg, revoke ? "revoke RANGE" : "grant RANGE", argv[optind]) < 0)
				goto fail;
		} else {
			if (ctl_parse_size(revoke ? "revoke SIZE" : "grant SIZE", argv[optind], &size) < 0)
				goto fail;
			if (size > INT64_MAX) {
				ctl_err("%s SIZE: size '%s' is too large", revoke ? "revoke" : "grant", argv[optind]);
				goto fail;
			}
			/* bytes on the wire: a bare number means MiB here, bytes there */
			json_object_set_new(msg, "size", json_integer((json_int_t)size));
		}
		have_target = true;
		optind++;
	}
	if (optind < argc) {
		ctl_err("unexpected argument '%s'", argv[optind]);
		goto fail;
	}
	if (!have_target) {
		ctl_err(revoke ? "revoke: say how much: SIZE, RANGE, --grant ID or --blocks LIST"
			       : "grant: say how much: SIZE, RANGE or --blocks LIST");
		goto fail;
	}
	if (dry_run && wait) {
		ctl_err("--dry-run changes nothing: there is nothing to --wait for");
		goto fail;
	}
	if (revoke && json_is_string(json_object_get(msg, "grant")) &&
	    known_grant(ctx, json_string_value(json_object_get(msg, "grant"))) < 0)
		goto fail;
	rc = dry_run ? dry_run_plan(ctx, msg, json) : ctl_submit(ctx, msg, wait, json);
	json_decref(msg);
	return rc;

not_for_revoke:
	ctl_err("revoke: --memmap and --zone belong to grants");
	goto fail;
one_target:
	ctl_err("give exactly one of SIZE, RANGE, --blocks%s", revoke ? ", --grant" : "");
fail:
	json_decref(msg);
	return CTL_EXIT_FAILURE;
}

int ctl_cmd_grant(struct ctl_ctx *ctx, int argc, char **argv)
{
	return ctl_grant_or_revoke(ctx, argc, argv, false);
}
