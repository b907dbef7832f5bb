/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl lsmem: util-linux lsmem's options and output.  Where the table
 * comes from:
 *   --sim FILE       the sim's model of the machine;
 *   --sysroot DIR    the tree under DIR, read directly (agent/ctl/lsmem/lsmemread.h:
 *                    only the attributes the output needs);
 *   --socket PATH    memgrantd's block table (GET /v1/blocks), nothing read
 *                    from sysfs here;
 *   none of these    memgrantd's table when it runs (MEMGRANT_SOCKET or the
 *                    default socket), else "/" read directly, always with a
 *                    note on stderr that says why (no socket, or why the
 *                    agent could not be asked: permission denied, ...).
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "agent/ctl/lsmem/lsmem.h"
#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "lib/wire/blockjson.h"
#include "lib/util.h"

static void lsmem_usage(FILE *f)
{
	fputs("Usage: memgrantctl [--sim FILE | --sysroot DIR] lsmem [options]\n"
	      "\n"
	      "List the ranges of available memory with their online status.\n"
	      "\n"
	      "Options:\n"
	      " -J, --json           use JSON output format\n"
	      " -P, --pairs          use key=\"value\" output format\n"
	      " -a, --all            list each individual memory block\n"
	      "     --annotate[=when] annotate columns with a tooltip (always|never|auto)\n"
	      " -b, --bytes          print SIZE in bytes rather than in human readable format\n"
	      " -n, --noheadings     don't print headings\n"
	      " -o, --output <list>  output columns\n"
	      "     --output-all     output all columns\n"
	      " -r, --raw            use raw output format\n"
	      " -S, --split <list>   split ranges by specified columns\n"
	      " -s, --sysroot <dir>  use the specified directory as system root\n"
	      "     --summary[=when] print summary information (never,always or only)\n"
	      " -h, --help           display this help\n"
	      " -V, --version        display version\n"
	      "\n"
	      "Available output columns:\n",
	      f);
	for (int i = 0; i < LSMEM_NCOLS; i++)
		fprintf(f, " %16s  %s\n", lsmem_column_name(i), lsmem_column_help(i));
}

/* Something there, or something that keeps us from seeing it (a folder
 * closed to this user): the daemon is worth asking, and its failure is said. */
static bool daemon_socket_exists(const struct ctl_ctx *ctx)
{
	return access(ctl_socket_path(ctx), F_OK) == 0 || errno != ENOENT;
}

/* The owner of each block of T from the daemon's /v1/blocks REPLY (whose
 * strings the array points into): a grant's id, "foreign" or NULL. */
static int owners_from_reply(const json_t *reply, const struct mem_table *t, const char ***out)
{
	const char **owners = calloc(t->n ? t->n : 1, sizeof(*owners));
	const json_t *jb;
	size_t i;

	if (!owners)
		return -ENOMEM;
	json_array_foreach(json_object_get(reply, "blocks"), i, jb) {
		uint64_t id = (uint64_t)json_integer_value(json_object_get(jb, "id"));
		uint64_t count = json_is_integer(json_object_get(jb, "count")) ?
					 (uint64_t)json_integer_value(json_object_get(jb, "count")) : 1;
		const char *owner = json_string_value(json_object_get(jb, "owner"));
		size_t lo = 0, hi = t->n;

		while (owner && lo < hi) { /* the table is sorted by id */
			size_t mid = lo + (hi - lo) / 2;

			if (t->blocks[mid].id == id) {
				/* a run's blocks follow one another in the table */
				for (uint64_t k = 0; k < count && mid + k < t->n; k++)
					owners[mid + k] = owner;
				break;
			}
			if (t->blocks[mid].id < id)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	*out = owners;
	return 0;
}

static int table_from_daemon(const struct ctl_ctx *ctx, struct mem_table **t, json_t **reply, const char ***owners,
			     char *err, size_t errlen)
{
	int r = ctl_get_json(ctx, "/v1/blocks?runs=1", reply); /* a few runs, not 65,536 objects */

	if (r < 0)
		return r;
	r = blockjson_to_table(*reply, t, err, errlen);
	if (r < 0) {
		ctl_err("lsmem: memgrantd sent a block table that does not parse: %s", err);
		return r;
	}
	r = owners_from_reply(*reply, *t, owners);
	if (r < 0)
		ctl_err("lsmem: %s", strerror(-r));
	return r;
}

static bool wants_owner(const struct lsmem_opts *o)
{
	for (size_t i = 0; i < o->ncolumns; i++)
		if (o->columns[i] == LSMEM_COL_OWNER)
			return true;
	return o->split_given && o->split[LSMEM_COL_OWNER];
}

int ctl_cmd_lsmem(struct ctl_ctx *ctx, int argc, char **argv)
{
	enum { OPT_SUMMARY = 0x100, OPT_OUTPUT_ALL, OPT_ANNOTATE };
	static const struct option longopts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "annotate", optional_argument, NULL, OPT_ANNOTATE },
		{ "bytes", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ "json", no_argument, NULL, 'J' },
		{ "noheadings", no_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "output-all", no_argument, NULL, OPT_OUTPUT_ALL },
		{ "pairs", no_argument, NULL, 'P' },
		{ "raw", no_argument, NULL, 'r' },
		{ "split", required_argument, NULL, 'S' },
		{ "sysroot", required_argument, NULL, 's' },
		{ "summary", optional_argument, NULL, OPT_SUMMARY },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	_cleanup_backend_ struct hp_backend *be = NULL;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_(json_decrefp) json_t *reply = NULL;
	_cleanup_free_ const char **owners = NULL;
	struct lsmem_opts o;
	const char *outarg = NULL;
	char err[256];
	int c, r;

	lsmem_opts_init(&o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":abhJno:PrS:s:V", longopts, NULL)) != -1) {
		r = 0;
		switch (c) {
		case 'a':
			o.list_all = true;
			break;
		case 'b':
			o.bytes = true;
			break;
		case 'h':
			lsmem_usage(stdout);
			return CTL_EXIT_OK;
		case 'V':
			/* lsmem's "%s from %s" */
			printf("memgrantctl lsmem from memgrant %s\n", MEMGRANT_VERSION);
			return CTL_EXIT_OK;
		case OPT_ANNOTATE:
			/* header tooltips need libsmartcols 2.40; the words are checked
			 * as lsmem checks them, the output is the same without them */
			if (optarg && !streq(optarg, "always") && !streq(optarg, "never") &&
			    !streq(optarg, "auto")) {
				ctl_err("lsmem: invalid argument of --annotate: %s", optarg);
				return CTL_EXIT_FAILURE;
			}
			break;
		case 'J':
			r = lsmem_opts_set_format(&o, LSMEM_FMT_JSON, err, sizeof(err));
			break;
		case 'P':
			r = lsmem_opts_set_format(&o, LSMEM_FMT_PAIRS, err, sizeof(err));
			break;
		case 'r':
			r = lsmem_opts_set_format(&o, LSMEM_FMT_RAW, err, sizeof(err));
			break;
		case 'n':
			o.noheadings = true;
			break;
		case 'o':
			outarg = optarg; /* the last -o counts, applied after --output-all, as lsmem does */
			break;
		case OPT_OUTPUT_ALL:
			lsmem_opts_all_columns(&o);
			break;
		case 'S':
			r = lsmem_opts_set_split(&o, optarg, err, sizeof(err));
			break;
		case 's':
			if (ctx->sim || (ctx->sysroot && !streq(ctx->sysroot, optarg))) {
				ctl_err("lsmem: --sysroot conflicts with the global --sim/--sysroot");
				return CTL_EXIT_FAILURE;
			}
			ctx->sysroot = optarg;
			break;
		case OPT_SUMMARY:
			r = lsmem_opts_set_summary(&o, optarg, err, sizeof(err));
			break;
		case ':':
			ctl_err("lsmem: option '%s' needs an argument", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		default:
			ctl_err("lsmem: unknown option '%s' (see memgrantctl lsmem --help)", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		}
		if (r < 0) {
			ctl_err("lsmem: %s", err);
			return CTL_EXIT_FAILURE;
		}
	}
	if (optind < argc) {
		ctl_err("lsmem: unexpected argument '%s'", argv[optind]);
		return CTL_EXIT_FAILURE;
	}
	if (!outarg)
		outarg = getenv("LSMEM_COLUMNS"); /* as lsmem: only without -o */
	if (outarg && lsmem_opts_set_columns(&o, outarg, err, sizeof(err)) < 0) {
		ctl_err("lsmem: %s", err);
		return CTL_EXIT_FAILURE;
	}
	if (lsmem_opts_finish(&o, err, sizeof(err)) < 0) {
		ctl_err("lsmem: %s", err);
		return CTL_EXIT_FAILURE;
	}

	if (!ctx->sim && !ctx->sysroot && (ctx->socket || daemon_socket_exists(ctx))) {
		/* through memgrantd: the machine as the agent sees it */
		r = table_from_daemon(ctx, &t, &reply, &owners, err, sizeof(err));
		if (r < 0 && ctx->socket)
			return CTL_EXIT_FAILURE;
		if (r < 0 && t) {
			mem_table_free(t);
			t = NULL;
		}
		if (r < 0)
			fprintf(stderr, "memgrantctl: lsmem: memgrantd could not be asked at %s (above): reading this "
				"machine's /sys directly, without the agent's view (no OWNER column)\n",
				ctl_socket_path(ctx));
	} else if (!ctx->sim && !ctx->sysroot) {
		fprintf(stderr, "memgrantctl: lsmem: memgrantd is not running (no socket at %s): reading this "
			"machine's /sys directly\n", ctl_socket_path(ctx));
	}
	if (!t && ctx->sim) {
		if (ctl_open_backend(ctx, "/", &be) < 0)
			return CTL_EXIT_FAILURE;
		r = hp_discover(be, &t);
		if (r < 0) {
			ctl_err("lsmem: cannot read the memory blocks under %s: %s (%s)", be->root,
				strerror(-r), errno_name(-r));
			return CTL_EXIT_FAILURE;
		}
	} else if (!t) {
		struct lsmem_need need;

		lsmem_opts_need(&o, &need);
		r = lsmem_read_tree(ctx->sysroot ? ctx->sysroot : "/", &need, &t, err, sizeof(err));
		if (r == -ENOENT) {
			ctl_err("lsmem: this system does not support memory blocks (%s)", err);
			return CTL_EXIT_FAILURE;
		}
		if (r < 0) {
			ctl_err("lsmem: %s", err);
			return CTL_EXIT_FAILURE;
		}
	}
	if (wants_owner(&o) && !owners) {
		ctl_err("lsmem: the OWNER column needs memgrantd (only it knows which grant holds a block): "
			"ask it without --sysroot or --sim");
		return CTL_EXIT_FAILURE;
	}
	o.owners = owners;
	if (t->n == 0 || t->block_size == 0) {
		ctl_err("lsmem: this system does not support memory blocks");
		return CTL_EXIT_FAILURE;
	}
	r = lsmem_print(t, &o, stdout);
	if (r < 0) {
		ctl_err("lsmem: cannot print: %s", strerror(-r));
		return CTL_EXIT_FAILURE;
	}
	return CTL_EXIT_OK;
}
