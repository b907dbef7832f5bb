/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl main: global options, the command table, shared helpers.
 */
#include "agent/ctl/ctl.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hotplug/sim/sim.h"
#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

#define CTL_ENTRY(n, w, h) { .name = #n, .run = ctl_cmd_##n, .where = w, .help = h },
static const struct ctl_command commands[] = {
	CTL_COMMANDS(CTL_ENTRY)
};
#undef CTL_ENTRY

void ctl_err(const char *fmt, ...)
{
	va_list ap;

	fputs("memgrantctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int ctl_open_backend(const struct ctl_ctx *ctx, const char *default_root, struct hp_backend **out)
{
	int r;

	if (ctx->sim && ctx->sysroot) {
		ctl_err("--sim and --sysroot are mutually exclusive");
		return -EINVAL;
	}
	if (ctx->sim) {
		char err[512] = "";

		/* validate first: a corrupt or truncated state file gets a message
		 * naming the problem, and nothing is written */
		r = sim_check_file(ctx->sim, err, sizeof(err));
		if (r < 0) {
			if (r == -ENOENT)
				ctl_err("sim state %s: no such file (create it with 'memgrantctl sim init %s')",
					ctx->sim, ctx->sim);
			else
				/* the sim's message already names the file */
				if (err[0])
					ctl_err("sim state %s (%s)", err, errno_name(-r));
				else
					ctl_err("sim state %s: %s (%s)", ctx->sim, strerror(-r), errno_name(-r));
			return r;
		}
		r = hp_sim_open(ctx->sim, out);
		if (r < 0)
			ctl_err("sim state %s: cannot open: %s (%s)", ctx->sim, strerror(-r), errno_name(-r));
		return r;
	}
	if (!ctx->sysroot && !default_root) {
		ctl_err("give --sim FILE or --sysroot DIR (--sysroot / to act on this machine)");
		return -EINVAL;
	}
	{
		const char *root = ctx->sysroot ? ctx->sysroot : default_root;
		struct stat st;

		if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
			ctl_err("sysroot %s: not a directory", root);
			return -ENOTDIR;
		}
		r = hp_sysfs_open(root, out);
		if (r < 0)
			ctl_err("sysroot %s: cannot open: %s (%s)", root, strerror(-r), errno_name(-r));
	}
	return r;
}

int ctl_parse_size(const char *opt, const char *arg, uint64_t *out)
{
	int r = size_parse_cli(arg, out);

	if (r == -ERANGE)
		ctl_err("%s: size '%s' is too large", opt, arg);
	else if (r < 0)
		ctl_err("%s: invalid size '%s' (expected MiB, or a number with a K, M, G or T suffix, "
			"e.g. 512, 512M, 1.5G; B for bytes)", opt, arg);
	return r;
}

int ctl_parse_u64(const char *opt, const char *arg, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = arg;

	if (!p || !*p) {
		ctl_err("%s: empty number", opt);
		return -EINVAL;
	}
	for (; *p; p++) {
		unsigned d;

		if (*p < '0' || *p > '9') {
			ctl_err("%s: '%s' is not a non-negative decimal number", opt, arg);
			return -EINVAL;
		}
		d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10) {
			ctl_err("%s: '%s' is too large", opt, arg);
			return -ERANGE;
		}
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int ctl_parse_id_list(const char *opt, const char *arg, uint64_t **ids, size_t *n)
{
	char why[256];
	int r = words_block_list(arg, SIM_MAX_BLOCKS, ids, n, why, sizeof(why));

	if (r < 0)
		ctl_err("%s: %s", opt, why);
	return r;
}

int ctl_check_ids(const struct mem_table *t, const uint64_t *ids, size_t n)
{
	uint64_t max = t->n ? t->blocks[t->n - 1].id : 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < i; k++)
			if (ids[k] == ids[i]) {
				ctl_err("block %llu: given twice", (unsigned long long)ids[i]);
				return -EINVAL;
			}
		if (!t->n || ids[i] > max) {
			if (t->n)
				ctl_err("block %llu: out of range (this machine has blocks %llu-%llu)",
					(unsigned long long)ids[i], (unsigned long long)t->blocks[0].id,
					(unsigned long long)max);
			else
				ctl_err("block %llu: out of range (this machine has no memory blocks)",
					(unsigned long long)ids[i]);
			return -ERANGE;
		}
		if (!mem_table_find(t, ids[i])) {
			ctl_err("block %llu: no such memory block (no sys/devices/system/memory/memory%llu "
				"and no firmware entry)",
				(unsigned long long)ids[i], (unsigned long long)ids[i]);
			return -ENOENT;
		}
	}
	return 0;
}

static void usage(FILE *f)
{
	fputs("Usage: memgrantctl [--sim FILE | --sysroot DIR] [--socket PATH] COMMAND [ARGS]\n"
	      "\n"
	      "Global options:\n"
	      "  --sim FILE       lsmem, block: act on the simulated guest kept in FILE\n"
	      "  --sysroot DIR    lsmem, block: act on sys/ under DIR (\"/\" is this machine)\n"
	      "  --socket PATH    the memgrantd REST socket (the other commands go through\n"
	      "                   memgrantd, on the backend its configuration names)\n"
	      "  -h, --help       this text;  -V, --version  the version\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fputs("\nExit status: 0 done, 1 failed, 64 some blocks done and some not, 130 Ctrl-C\n"
	      "ended a wait (the operation goes on: memgrantctl wait ID).\n", f);
}

int main(int argc, char **argv)
{
	enum { OPT_SIM = 0x100, OPT_SYSROOT, OPT_SOCKET };
	static const struct option longopts[] = {
		{ "sim", required_argument, NULL, OPT_SIM },
		{ "sysroot", required_argument, NULL, OPT_SYSROOT },
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct ctl_ctx ctx = { 0 };
	int c;

	opterr = 0;
	/* '+': stop at the command name; the command parses the rest */
	while ((c = getopt_long(argc, argv, "+:hV", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SIM:
			ctx.sim = optarg;
			break;
		case OPT_SYSROOT:
			ctx.sysroot = optarg;
			break;
		case OPT_SOCKET:
			ctx.socket = optarg;
			break;
		case 'h':
			usage(stdout);
			return CTL_EXIT_OK;
		case 'V':
			printf("memgrantctl %s\n", MEMGRANT_VERSION);
			return CTL_EXIT_OK;
		case ':':
			ctl_err("option '%s' needs an argument", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		default:
			ctl_err("unknown option '%s' (see memgrantctl --help)", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		}
	}
	if (ctx.sim && ctx.sysroot) {
		ctl_err("--sim and --sysroot are mutually exclusive");
		return CTL_EXIT_FAILURE;
	}
	if (optind >= argc) {
		usage(stderr);
		return CTL_EXIT_FAILURE;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		if (streq(argv[optind], commands[i].name)) {
			int sub_argc = argc - optind;
			char **sub_argv = argv + optind;

			if (commands[i].where == CTL_AGENT && (ctx.sim || ctx.sysroot)) {
				/* the agent works on the backend its configuration
				 * names; asking it about another is a usage error, not
				 * "memgrantd is not running" */
				const char *opt = ctx.sim ? "--sim" : "--sysroot";

				ctl_err("%s applies only to lsmem and block (and sim); grant, revoke, status and the "
					"other agent commands go through memgrantd, which works on the backend its "
					"configuration names: drop %s (--socket PATH reaches a memgrantd on another "
					"socket)", opt, opt);
				return CTL_EXIT_FAILURE;
			}
			optind = 0; /* full getopt reset for the command */
			return commands[i].run(&ctx, sub_argc, sub_argv);
		}
	}
	ctl_err("unknown command '%s' (see memgrantctl --help)", argv[optind]);
	return CTL_EXIT_FAILURE;
}
