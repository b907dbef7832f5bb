/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl block ACTION N...: one kernel step per block, as echo(1) into
 * sysfs would do it, through the typed backend operations.  All block
 * numbers are checked before the first write; a refused step prints the
 * block, the step and the kernel's reason (kernel.md) with the errno name.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "lib/util.h"

#ifndef EHWPOISON
#define EHWPOISON 133
#endif

enum action { ACT_CONFIGURE, ACT_DECONFIGURE, ACT_ONLINE, ACT_OFFLINE, ACT_MEMMAP_ON, ACT_MEMMAP_OFF };

static const struct {
	const char *word;
	enum action act;
} actions[] = {
	{ "configure", ACT_CONFIGURE }, { "deconfigure", ACT_DECONFIGURE },
	{ "online", ACT_ONLINE },       { "offline", ACT_OFFLINE },
};

static void block_usage(FILE *f)
{
	fputs("Usage: memgrantctl [--sim FILE | --sysroot DIR] block ACTION N... [--zone movable|normal]\n"
	      "\n"
	      "Actions (one kernel step each):\n"
	      "  configure      echo 1 > sys/firmware/memory/memoryN/config\n"
	      "  deconfigure    echo 0 > sys/firmware/memory/memoryN/config\n"
	      "  online         echo online|online_movable|online_kernel > .../memoryN/state\n"
	      "  offline        echo offline > sys/devices/system/memory/memoryN/state\n"
	      "  memmap on|off  echo 1|0 > sys/firmware/memory/memoryN/memmap_on_memory\n"
	      "\n"
	      "N is a block number or a range N-M.  --zone picks the zone for online\n"
	      "(default: the kernel's online policy).\n",
	      f);
}

static const char *step_name(enum action a)
{
	switch (a) {
	case ACT_CONFIGURE: return "configure";
	case ACT_DECONFIGURE: return "deconfigure";
	case ACT_ONLINE: return "online";
	case ACT_OFFLINE: return "offline";
	default: return "memmap_on_memory";
	}
}

/* The kernel's reason for ERR at this step (kernel.md), given the block as it was before. */
static const char *reason(enum action a, int err, const struct mem_block *before)
{
	switch (a) {
	case ACT_CONFIGURE:
		switch (err) {
		case EIO: return "the hypervisor could not assign the storage";
		case ENOMEM: return "the kernel could not add the block (out of memory for its memmap)";
		case EINVAL: return "the kernel refused the value";
		case ENOENT: return "no sys/firmware/memory entry for this block";
		}
		break;
	case ACT_DECONFIGURE:
		switch (err) {
		case EBUSY: return "block must be offline before it can be deconfigured";
		case ENOENT: return "no sys/firmware/memory entry for this block";
		case EINVAL: return "the kernel refused the value";
		}
		break;
	case ACT_MEMMAP_ON:
	case ACT_MEMMAP_OFF:
		switch (err) {
		case EBUSY: return "memmap_on_memory can only change while deconfigured";
		case EOPNOTSUPP: return "this kernel does not support memmap on memory";
		case ENOENT: return "no sys/firmware/memory entry for this block";
		case EINVAL: return "the kernel refused the value";
		}
		break;
	case ACT_ONLINE:
		switch (err) {
		case ENOENT: return "block is not configured (no sys/devices/system/memory entry); configure it first";
		case EINVAL:
			if (before && before->state == MEM_STATE_ONLINE)
				return "block is already online";
			return "the kernel refused to online it (holes or zone constraints)";
		case ENOMEM: return "not enough memory to online the block";
		case EHWPOISON: return "block contains hardware-poisoned pages";
		case EINTR: return "interrupted by a signal";
		}
		return "the kernel or a memory notifier refused to online it";
	case ACT_OFFLINE:
		switch (err) {
		case ENOENT: return "block is not configured (no sys/devices/system/memory entry)";
		case EBUSY: return "block has pages that cannot be migrated (unmovable or CMA)";
		case EINVAL:
			if (before && before->state == MEM_STATE_OFFLINE)
				return "block is already offline";
			return "block has holes or spans zones";
		case EINTR: return "offlining was interrupted by a signal";
		}
		break;
	}
	return strerror(err);
}

static int do_step(struct hp_backend *be, enum action a, uint64_t id, enum online_type zone)
{
	switch (a) {
	case ACT_CONFIGURE: return block_configure(be, id);
	case ACT_DECONFIGURE: return block_deconfigure(be, id);
	case ACT_ONLINE: return block_online(be, id, zone);
	case ACT_OFFLINE: return block_offline(be, id);
	case ACT_MEMMAP_ON: return block_set_memmap(be, id, true);
	case ACT_MEMMAP_OFF: return block_set_memmap(be, id, false);
	}
	return -EINVAL;
}

int ctl_cmd_block(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "zone", required_argument, NULL, 'z' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_backend_ struct hp_backend *be = NULL;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0, done = 0, failed = 0;
	enum online_type zone = ONLINE_DEFAULT;
	bool zone_given = false;
	enum action act;
	bool found = false;
	int c, r, pos;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hz:", longopts, NULL)) != -1) {
		switch (c) {
		case 'z':
			if (streq(optarg, "movable"))
				zone = ONLINE_MOVABLE;
			else if (streq(optarg, "normal") || streq(optarg, "kernel"))
				zone = ONLINE_KERNEL;
			else {
				ctl_err("block: --zone '%s': expected movable or normal", optarg);
				return CTL_EXIT_FAILURE;
			}
			zone_given = true;
			break;
		case 'h':
			block_usage(stdout);
			return CTL_EXIT_OK;
		case ':':
			ctl_err("block: option '%s' needs an argument", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		default:
			ctl_err("block: unknown option '%s' (block numbers are not negative)", argv[optind - 1]);
			return CTL_EXIT_FAILURE;
		}
	}
	/* after permutation: ACTION [on|off] N... from optind on */
	pos = optind;
	if (pos >= argc) {
		block_usage(stderr);
		return CTL_EXIT_FAILURE;
	}
	for (size_t i = 0; i < ARRAY_SIZE(actions); i++)
		if (streq(argv[pos], actions[i].word)) {
			act = actions[i].act;
			found = true;
		}
	if (!found && streq(argv[pos], "memmap")) {
		if (pos + 1 < argc && streq(argv[pos + 1], "on"))
			act = ACT_MEMMAP_ON;
		else if (pos + 1 < argc && streq(argv[pos + 1], "off"))
			act = ACT_MEMMAP_OFF;
		else {
			ctl_err("block memmap: expected 'on' or 'off'");
			return CTL_EXIT_FAILURE;
		}
		found = true;
		pos++;
	}
	if (!found) {
		ctl_err("block: unknown action '%s' (configure, deconfigure, online, offline, memmap on|off)",
			argv[pos]);
		return CTL_EXIT_FAILURE;
	}
	pos++;
	if (zone_given && act != ACT_ONLINE) {
		ctl_err("block: --zone only applies to 'online'");
		return CTL_EXIT_FAILURE;
	}
	if (pos >= argc) {
		ctl_err("block %s: no block numbers given", step_name(act));
		return CTL_EXIT_FAILURE;
	}
	for (; pos < argc; pos++) {
		char what[64];

		snprintf(what, sizeof(what), "block '%.40s'", argv[pos]);
		if (ctl_append_ids(what, argv[pos], &ids, &n) < 0)
			return CTL_EXIT_FAILURE;
	}

	if (ctl_open_backend(ctx, NULL, &be) < 0)
		return CTL_EXIT_FAILURE;
	r = hp_discover(be, &t);
	if (r < 0) {
		ctl_err("block: cannot read the memory blocks under %s: %s (%s)", be->root, strerror(-r),
			errno_name(-r));
		return CTL_EXIT_FAILURE;
	}
	/* refuse bad numbers before anything is written */
	if (ctl_check_ids(t, ids, n) < 0)
		return CTL_EXIT_FAILURE;
	if (!t->has_firmware && act != ACT_ONLINE && act != ACT_OFFLINE) {
		ctl_err("block %s: this machine has no sys/firmware/memory: blocks cannot be "
			"(de)configured and memmap_on_memory cannot be set", step_name(act));
		return CTL_EXIT_FAILURE;
	}

	for (size_t i = 0; i < n; i++) {
		const struct mem_block *before = mem_table_find(t, ids[i]);

		r = do_step(be, act, ids[i], zone);
		if (r < 0) {
			ctl_err("block %llu: %s (%s)", (unsigned long long)ids[i], reason(act, -r, before),
				errno_name(-r));
			failed++;
		} else {
			done++;
		}
	}
	if (!failed)
		return CTL_EXIT_OK;
	return done ? CTL_EXIT_PARTIAL : CTL_EXIT_FAILURE;
}
