/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host: sends grants to a guest's memgrantd over the virtio channel
 * org.memgrant.0 and prints what the guest reports.  Global options, then a
 * subcommand from the table; each subcommand parses its own options.
 */
#include <getopt.h>

#include "lib/size.h"
#include "lib/util.h"
#include "providers/host/host.h"
#include "providers/host/serve/serve.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

static const struct {
	const char *name;
	int (*fn)(const struct host_opts *o, int argc, char **argv);
	const char *help;
} commands[] = {
	{ "grant", cmd_grant, "grant DOMAIN (SIZE | RANGE) [--memmap auto|on|off] [--zone auto|movable|normal] [--id ID] [--wait]" },
	{ "revoke", cmd_revoke, "revoke DOMAIN (SIZE | --grant ID) [--id ID] [--wait]" },
	{ "status", cmd_status, "status [DOMAIN] [--json]   (without DOMAIN: the service's per-domain state)" },
	{ "serve", cmd_serve, "serve [--config FILE] [--dry-run] [--state-dir DIR] [--events FILE]" },
	{ "watch", cmd_watch, "watch DOMAIN [--json]" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: memgrant-host [OPTIONS] COMMAND DOMAIN ...\n"
		"\n"
		"Sends memory grants to the memgrant agent of a libvirt domain over its\n"
		"virtio channel " HOST_CHANNEL_NAME " and prints the guest's status reports.\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		fprintf(f, "  %s\n", commands[i].help);
	fprintf(f,
		"\n"
		"Options:\n"
		"  -c, --connect URI     libvirt connection URI [libvirt's default]\n"
		"  -s, --socket PATH     talk to the channel's host-side Unix socket directly\n"
		"                        (DOMAIN then only names the generation state)\n"
		"      --state-dir DIR   generations per domain [$MEMGRANT_HOST_STATE or %s]\n"
		"  -t, --timeout DUR     how long to wait for the guest agent to answer [10s]\n"
		"      --json            print the agent's messages as JSON lines\n"
		"  -V, --version, -h, --help\n"
		"\n"
		"Exit status: 0 done, 1 usage error, refused or failed, 3 the agent did not answer,\n"
		"4 domain/channel problem, 5 state directory problem, 64 partially applied.\n",
		HOST_STATE_DIR_DEFAULT);
}

enum { OPT_STATE_DIR = 256, OPT_JSON };

/* One global option; 0, or HOST_EXIT_USAGE after saying why. */
static int global_opt(struct host_opts *o, int c, const char *arg)
{
	uint64_t ms;

	switch (c) {
	case 'c': o->uri = arg; break;
	case 's': o->socket_path = arg; break;
	case OPT_STATE_DIR: o->state_dir = arg; o->state_dir_given = true; break;
	case 't':
		if (duration_parse_ms(arg, &ms) < 0 || ms == 0 || ms > INT32_MAX) {
			fprintf(stderr, "memgrant-host: --timeout '%s': expected a duration such as 10s or 2m\n", arg);
			return HOST_EXIT_USAGE;
		}
		o->timeout_ms = (int64_t)ms;
		break;
	default: return HOST_EXIT_USAGE;
	}
	return 0;
}

/*
 * Operators write "memgrant-host status --state-dir DIR" as often as the
 * options first: take the global options that take a value from after the
 * command word too, and hand the command only its own words.  --json stays
 * with the commands, which parse it themselves; serve keeps its own
 * --state-dir (cmd_serve).  Stops at "--".
 */
static int take_global_opts(struct host_opts *o, int *argc, char **argv)
{
	static const struct { const char *name; int c; } globals[] = {
		{ "connect", 'c' }, { "socket", 's' }, { "state-dir", OPT_STATE_DIR }, { "timeout", 't' },
	};
	int in = 1, out = 1;

	while (in < *argc) {
		const char *w = argv[in], *arg = NULL;
		int c = 0, used = 1;

		if (streq(w, "--"))
			break;
		if (w[0] == '-' && w[1] && w[1] != '-' && !w[2] && strchr("cst", w[1])) {
			c = w[1];
		} else if (w[0] == '-' && w[1] == '-') {
			for (size_t i = 0; i < ARRAY_SIZE(globals); i++) {
				size_t n = strlen(globals[i].name);

				if (strncmp(w + 2, globals[i].name, n) == 0 && (w[2 + n] == '\0' || w[2 + n] == '=')) {
					c = globals[i].c;
					arg = w[2 + n] == '=' ? w + 3 + n : NULL;
					break;
				}
			}
		}
		if (!c) {
			argv[out++] = argv[in++];
			continue;
		}
		if (!arg) {
			if (in + 1 >= *argc) {
				fprintf(stderr, "memgrant-host: %s needs a value\n", w);
				return HOST_EXIT_USAGE;
			}
			arg = argv[in + 1];
			used = 2;
		}
		if (global_opt(o, c, arg))
			return HOST_EXIT_USAGE;
		in += used;
	}
	while (in < *argc)
		argv[out++] = argv[in++];
	argv[out] = NULL;
	*argc = out;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "connect", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct host_opts o = { .timeout_ms = 10000 };
	int c, cmd_argc;

	o.state_dir = getenv("MEMGRANT_HOST_STATE");
	if (!o.state_dir || !*o.state_dir)
		o.state_dir = HOST_STATE_DIR_DEFAULT;
	/* "+": options after the subcommand belong to it */
	while ((c = getopt_long(argc, argv, "+c:s:t:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
		case 's':
		case 't':
		case OPT_STATE_DIR:
			if (global_opt(&o, c, optarg))
				return HOST_EXIT_USAGE;
			break;
		case OPT_JSON: o.json = true; break;
		case 'V': printf("memgrant-host %s\n", MEMGRANT_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return HOST_EXIT_USAGE;
		}
	}
	/* the command word and what follows; global options there are taken too */
	cmd_argc = argc - optind + 1;
	if (optind < argc && !streq(argv[optind], "serve") && take_global_opts(&o, &cmd_argc, argv + optind - 1))
		return HOST_EXIT_USAGE;
	argc = optind - 1 + cmd_argc;
	if (o.uri && o.socket_path) {
		fprintf(stderr, "memgrant-host: --connect and --socket exclude each other\n");
		return HOST_EXIT_USAGE;
	}
	if (optind >= argc) {
		usage(stderr);
		return HOST_EXIT_USAGE;
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* watch is read line by line by scripts */
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (streq(argv[optind], commands[i].name))
			return commands[i].fn(&o, argc - optind, argv + optind);
	fprintf(stderr, "memgrant-host: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return HOST_EXIT_USAGE;
}
