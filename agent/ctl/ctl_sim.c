/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl sim init|fault: create a simulated s390 guest (hotplug/sim/sim.h)
 * or replace its fault set.  Every argument is checked before the state
 * file is touched.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/ctl/ctl.h"
#include "hotplug/sim/sim.h"
#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

static void sim_usage(FILE *f)
{
	fputs("Usage: memgrantctl sim init FILE [--online SIZE] [--standby SIZE] [--block-size SIZE]\n"
	      "                          [--no-memmap-support] [--memmap-eopnotsupp] [--no-firmware]\n"
	      "                          [--auto-online offline|online|online_kernel|online_movable]\n"
	      "                          [--used SIZE] [--tree DIR]\n"
	      "       memgrantctl sim fault FILE [--configure-eio N,N] [--offline-ebusy N,N]\n"
	      "                          [--online-enomem N,N] [--latency MS]\n"
	      "\n"
	      "init creates (or replaces) the simulated guest kept in FILE; defaults are the\n"
	      "seed machine: --online 2G --standby 2G --block-size 128M, memmap on memory\n"
	      "supported, sys/firmware/memory present, auto_online_blocks offline.\n"
	      "The blocks' state goes to FILE.d/, the sysfs-shaped tree to --tree DIR\n"
	      "(default FILE.tree); FILE itself holds the settings and faults.\n"
	      "fault replaces the fault set (no option: no faults).\n",
	      f);
}

static bool auto_online_word(const char *s)
{
	enum mem_auto_online a;

	return mem_auto_online_parse(s, &a) == 0;
}

static int sim_init_cmd(int argc, char **argv)
{
	enum { O_ONLINE = 0x100, O_STANDBY, O_BS, O_NOMEMMAP, O_EOPNOTSUPP, O_NOFW, O_AUTO, O_USED, O_TREE };
	static const struct option longopts[] = {
		{ "online", required_argument, NULL, O_ONLINE },
		{ "standby", required_argument, NULL, O_STANDBY },
		{ "block-size", required_argument, NULL, O_BS },
		{ "no-memmap-support", no_argument, NULL, O_NOMEMMAP },
		{ "memmap-eopnotsupp", no_argument, NULL, O_EOPNOTSUPP },
		{ "no-firmware", no_argument, NULL, O_NOFW },
		{ "auto-online", required_argument, NULL, O_AUTO },
		{ "used", required_argument, NULL, O_USED },
		{ "tree", required_argument, NULL, O_TREE },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct sim_params p;
	const char *file;
	char err[512] = "";
	int c, r;

	sim_params_default(&p);
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_ONLINE:
			if (ctl_parse_size("--online", optarg, &p.online_bytes) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_STANDBY:
			if (ctl_parse_size("--standby", optarg, &p.standby_bytes) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_BS:
			if (ctl_parse_size("--block-size", optarg, &p.block_size) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_USED:
			if (ctl_parse_size("--used", optarg, &p.used_bytes) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_NOMEMMAP:
			p.memmap_supported = false;
			break;
		case O_EOPNOTSUPP:
			p.refuse_memmap_eopnotsupp = true;
			break;
		case O_NOFW:
			p.has_firmware = false;
			break;
		case O_AUTO:
			if (!auto_online_word(optarg)) {
				ctl_err("--auto-online: '%s' is not one of offline, online, online_kernel, "
					"online_movable", optarg);
				return CTL_EXIT_FAILURE;
			}
			p.auto_online = optarg;
			break;
		case O_TREE:
			p.tree = optarg;
			break;
		case 'h':
			sim_usage(stdout);
			return CTL_EXIT_OK;
		case ':':
			ctl_err("sim init: option '%s' needs an argument", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		default:
			ctl_err("sim init: unknown option '%s'", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		}
	}
	if (optind + 1 != argc) {
		ctl_err(optind >= argc ? "sim init: missing FILE" : "sim init: unexpected argument '%s'",
			optind < argc ? argv[optind + 1] : "");
		return CTL_EXIT_FAILURE;
	}
	file = argv[optind];

	/* the same checks sim_init makes, with messages that say which value */
	if (p.block_size < (1u << 20) || (p.block_size & (p.block_size - 1))) {
		ctl_err("--block-size: %llu bytes is not a power of two of at least 1M (A1, D2)",
			(unsigned long long)p.block_size);
		return CTL_EXIT_FAILURE;
	}
	if (p.online_bytes == 0 || p.online_bytes % p.block_size) {
		char why[256];

		words_size_in_blocks(p.online_bytes, NULL, p.block_size, why, sizeof(why));
		ctl_err("--online: must be a non-zero multiple of the block size: %s", why);
		return CTL_EXIT_FAILURE;
	}
	if (p.standby_bytes % p.block_size) {
		char why[256];

		words_size_in_blocks(p.standby_bytes, NULL, p.block_size, why, sizeof(why));
		ctl_err("--standby: must be a multiple of the block size: %s", why);
		return CTL_EXIT_FAILURE;
	}
	if (p.online_bytes > UINT64_MAX - p.standby_bytes ||
	    (p.online_bytes + p.standby_bytes) / p.block_size > SIM_MAX_BLOCKS) {
		ctl_err("--online/--standby: more than %u blocks of this size", SIM_MAX_BLOCKS);
		return CTL_EXIT_FAILURE;
	}
	if (p.used_bytes > p.online_bytes) {
		ctl_err("--used: more than the online memory");
		return CTL_EXIT_FAILURE;
	}
	/* the place first (its folder, the tree's), then replace a sim, never
	 * some other file given by mistake: a refusal names its real cause */
	r = sim_check_place(file, p.tree, err, sizeof(err));
	if (r < 0) {
		ctl_err("sim init: %s (%s)", err[0] ? err : strerror(-r), errno_name(-r));
		return CTL_EXIT_FAILURE;
	}
	r = sim_check_file(file, err, sizeof(err));
	if (r < 0 && r != -ENOENT) {
		ctl_err("sim init: %s exists and is not a usable sim state file (%s); remove it first",
			file, err[0] ? err : strerror(-r));
		return CTL_EXIT_FAILURE;
	}
	r = sim_init(file, &p);
	if (r == -EACCES || r == -EPERM) {
		struct stat st;

		if (stat(file, &st) == 0 && st.st_uid != geteuid()) {
			ctl_err("sim init %s: %s (%s): the sim belongs to uid %u; choose another FILE", file,
				strerror(-r), errno_name(-r), (unsigned)st.st_uid);
			return CTL_EXIT_FAILURE;
		}
	}
	if (r < 0) {
		ctl_err("sim init %s: %s (%s)", file, strerror(-r), errno_name(-r));
		return CTL_EXIT_FAILURE;
	}
	return CTL_EXIT_OK;
}

static int sim_fault_cmd(struct ctl_ctx *ctx, int argc, char **argv)
{
	enum { O_EIO = 0x100, O_EBUSY, O_ENOMEM, O_LATENCY };
	static const struct option longopts[] = {
		{ "configure-eio", required_argument, NULL, O_EIO },
		{ "offline-ebusy", required_argument, NULL, O_EBUSY },
		{ "online-enomem", required_argument, NULL, O_ENOMEM },
		{ "latency", required_argument, NULL, O_LATENCY },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_free_ uint64_t *eio = NULL, *ebusy = NULL, *enomem = NULL;
	size_t n_eio = 0, n_ebusy = 0, n_enomem = 0;
	_cleanup_backend_ struct hp_backend *be = NULL;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct ctl_ctx simctx = *ctx;
	struct sim_faults f = { 0 };
	int c, r;

	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case O_EIO:
			if (ctl_parse_id_list("--configure-eio", optarg, &eio, &n_eio) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_EBUSY:
			if (ctl_parse_id_list("--offline-ebusy", optarg, &ebusy, &n_ebusy) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_ENOMEM:
			if (ctl_parse_id_list("--online-enomem", optarg, &enomem, &n_enomem) < 0)
				return CTL_EXIT_FAILURE;
			break;
		case O_LATENCY: {
			/* plain number: milliseconds; with a unit: "250ms", "2s" */
			bool plain = optarg[0] && strspn(optarg, "0123456789") == strlen(optarg);
			r = plain ? ctl_parse_u64("--latency", optarg, &f.latency_ms)
				  : duration_parse_ms(optarg, &f.latency_ms);
			if (r < 0) {
				if (!plain)
					ctl_err("--latency: invalid duration '%s' (milliseconds, or 250ms, 2s)",
						optarg);
				return CTL_EXIT_FAILURE;
			}
			break;
		}
		case 'h':
			sim_usage(stdout);
			return CTL_EXIT_OK;
		case ':':
			ctl_err("sim fault: option '%s' needs an argument", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		default:
			ctl_err("sim fault: unknown option '%s'", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		}
	}
	if (optind + 1 != argc) {
		ctl_err(optind >= argc ? "sim fault: missing FILE" : "sim fault: unexpected argument '%s'",
			optind < argc ? argv[optind + 1] : "");
		return CTL_EXIT_FAILURE;
	}
	simctx.sim = argv[optind];
	simctx.sysroot = NULL;
	if (ctl_open_backend(&simctx, NULL, &be) < 0)
		return CTL_EXIT_FAILURE;
	r = hp_discover(be, &t);
	if (r < 0) {
		ctl_err("sim fault: cannot read %s: %s", simctx.sim, strerror(-r));
		return CTL_EXIT_FAILURE;
	}
	if (ctl_check_ids(t, eio, n_eio) < 0 || ctl_check_ids(t, ebusy, n_ebusy) < 0 ||
	    ctl_check_ids(t, enomem, n_enomem) < 0)
		return CTL_EXIT_FAILURE;
	f.configure_eio = eio;
	f.n_configure_eio = n_eio;
	f.offline_ebusy = ebusy;
	f.n_offline_ebusy = n_ebusy;
	f.online_enomem = enomem;
	f.n_online_enomem = n_enomem;
	r = sim_set_faults(simctx.sim, &f);
	if (r < 0) {
		ctl_err("sim fault %s: %s (%s)", simctx.sim, strerror(-r), errno_name(-r));
		return CTL_EXIT_FAILURE;
	}
	return CTL_EXIT_OK;
}

int ctl_cmd_sim(struct ctl_ctx *ctx, int argc, char **argv)
{
	if (argc < 2 || streq(argv[1], "-h") || streq(argv[1], "--help")) {
		sim_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CTL_EXIT_FAILURE : CTL_EXIT_OK;
	}
	/* the subcommand's argv starts at its name, getopt restarts */
	optind = 0;
	opterr = 0;
	if (streq(argv[1], "init"))
		return sim_init_cmd(argc - 1, argv + 1);
	if (streq(argv[1], "fault"))
		return sim_fault_cmd(ctx, argc - 1, argv + 1);
	ctl_err("sim: unknown subcommand '%s' (init or fault)", argv[1]);
	return CTL_EXIT_FAILURE;
}
