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

#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "hotplug/sim/sim.h"
#include "lib/util.h"
#include "hotplug/words.h"

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
	fputs("Usage: memgrantctl [--sim FILE | --sysroot DIR] block ACTION BLOCKS... [--zone Movable|Normal]\n"
	      "                        [-v|--verbose] [--json]\n"
	      "\n"
	      "Actions (one kernel step each):\n"
	      "  configure      echo 1 > sys/firmware/memory/memoryN/config\n"
	      "  deconfigure    echo 0 > sys/firmware/memory/memoryN/config\n"
	      "  online         echo online|online_movable|online_kernel > .../memoryN/state\n"
	      "  offline        echo offline > sys/devices/system/memory/memoryN/state\n"
	      "  memmap on|off  echo 1|0 > sys/firmware/memory/memoryN/memmap_on_memory\n"
	      "                (also 1/0, true/false)\n"
	      "\n"
	      "BLOCKS as chmem writes them: a block number, a range N-M, a list 16,17,20-23,\n"
	      "or a physical address range 0x80000000-0x8fffffff (start and end + 1 on block\n"
	      "boundaries).  --zone picks the zone for online (default: the kernel's online\n"
	      "policy).  -v prints each step as chmem -v does; --json prints the results.\n",
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

/* "Memory Block 16 (0x0000000080000000-0x0000000087ffffff)", as chmem names a block */
static void block_name(uint64_t id, uint64_t block_size, char *buf, size_t len)
{
	uint64_t start = id * block_size;

	snprintf(buf, len, "Memory Block %llu (0x%016llx-0x%016llx)", (unsigned long long)id,
		 (unsigned long long)start, (unsigned long long)(start + block_size - 1));
}

/* chmem -v's word for a step that was done */
static const char *done_word(enum action a)
{
	switch (a) {
	case ACT_CONFIGURE: return "configured";
	case ACT_DECONFIGURE: return "deconfigured";
	case ACT_ONLINE: return "enabled";
	case ACT_OFFLINE: return "disabled";
	case ACT_MEMMAP_ON: return "memmap-on-memory on";
	default: return "memmap-on-memory off";
	}
}

/* chmem -v's word for a step that failed */
static const char *failed_word(enum action a)
{
	switch (a) {
	case ACT_CONFIGURE: return "configure failed";
	case ACT_DECONFIGURE: return "deconfigure failed";
	case ACT_ONLINE: return "enable failed";
	case ACT_OFFLINE: return "disable failed";
	default: return "memmap-on-memory failed";
	}
}

/* Block arguments: "16", "20-23", "16,17,20-23" or an address range
 * "0x80000000-0x8fffffff" (needs the block size, hence after discovery). */
static int parse_block_arg(const char *arg, uint64_t block_size, uint64_t **ids, size_t *n)
{
	char why[256] = "";

	if (words_is_addr_range(arg)) {
		uint64_t first = 0, last = 0;

		if (words_addr_range(arg, block_size, &first, &last, why, sizeof(why)) < 0) {
			ctl_err("block: %s", why);
			return -EINVAL;
		}
		if (last - first >= SIM_MAX_BLOCKS) {
			ctl_err("block: address range '%.40s' spans more than %u blocks", arg, SIM_MAX_BLOCKS);
			return -ERANGE;
		}
		for (uint64_t id = first; id <= last; id++) {
			uint64_t *nids = reallocarray(*ids, *n + 1, sizeof(**ids));
			if (!nids)
				return -ENOMEM;
			*ids = nids;
			(*ids)[(*n)++] = id;
		}
		return 0;
	}
	if (words_block_list(arg, SIM_MAX_BLOCKS, ids, n, why, sizeof(why)) < 0) {
		ctl_err("block '%.40s': %s", arg, why);
		return -EINVAL;
	}
	return 0;
}

int ctl_cmd_block(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "zone", required_argument, NULL, 'z' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	_cleanup_backend_ struct hp_backend *be = NULL;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0, done = 0, failed = 0;
	enum online_type zone = ONLINE_DEFAULT;
	bool zone_given = false, verbose = false, json = false;
	enum action act;
	bool found = false;
	json_t *results = NULL;
	int c, r, pos, first_id_arg;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hz:vJ", longopts, NULL)) != -1) {
		switch (c) {
		case 'z': {
			enum mem_zone z;

			if (words_zone_parse(optarg, false, &z) < 0) {
				ctl_err("block: --zone '%s': expected Movable or Normal (any case)", optarg);
				return CTL_EXIT_FAILURE;
			}
			zone = z == MEM_ZONE_MOVABLE ? ONLINE_MOVABLE : ONLINE_KERNEL;
			zone_given = true;
			break;
		}
		case 'v':
			verbose = true;
			break;
		case 'J':
			json = true;
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
		int m;

		if (pos + 1 >= argc || words_memmap_parse(argv[pos + 1], false, &m) < 0) {
			ctl_err("block memmap: expected " WORDS_MEMMAP_WORDS "%s%s%s", pos + 1 < argc ? ", not '" : "",
				pos + 1 < argc ? argv[pos + 1] : "", pos + 1 < argc ? "'" : "");
			return CTL_EXIT_FAILURE;
		}
		act = m == WORDS_MEMMAP_ON ? ACT_MEMMAP_ON : ACT_MEMMAP_OFF;
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
	/* block lists are checked before anything is opened; address ranges need the block size */
	first_id_arg = pos;
	for (; pos < argc; pos++)
		if (!words_is_addr_range(argv[pos]) && parse_block_arg(argv[pos], 0, &ids, &n) < 0)
			return CTL_EXIT_FAILURE;

	if (ctl_open_backend(ctx, NULL, &be) < 0)
		return CTL_EXIT_FAILURE;
	r = hp_discover(be, &t);
	if (r < 0) {
		ctl_err("block: cannot read the memory blocks under %s: %s (%s)", be->root, strerror(-r),
			errno_name(-r));
		return CTL_EXIT_FAILURE;
	}
	free(ids);
	ids = NULL;
	n = 0;
	for (pos = first_id_arg; pos < argc; pos++)
		if (parse_block_arg(argv[pos], t->block_size, &ids, &n) < 0)
			return CTL_EXIT_FAILURE;
	/* refuse bad numbers before anything is written */
	if (ctl_check_ids(t, ids, n) < 0)
		return CTL_EXIT_FAILURE;
	if (!t->has_firmware && act != ACT_ONLINE && act != ACT_OFFLINE) {
		ctl_err("block %s: this machine has no sys/firmware/memory: blocks cannot be "
			"(de)configured and memmap_on_memory cannot be set", step_name(act));
		return CTL_EXIT_FAILURE;
	}

	if (json)
		results = json_array();
	for (size_t i = 0; i < n; i++) {
		const struct mem_block *before = mem_table_find(t, ids[i]);
		char name[96];

		block_name(ids[i], t->block_size, name, sizeof(name));
		r = do_step(be, act, ids[i], zone);
		if (r < 0) {
			const char *why = reason(act, -r, before);

			ctl_err("block %llu: %s (%s)", (unsigned long long)ids[i], why, errno_name(-r));
			if (verbose && !json)
				printf("%s %s\n", name, failed_word(act));
			if (results)
				json_array_append_new(results,
						      json_pack("{s:I,s:s,s:s,s:{s:s,s:s}}", "block", (json_int_t)ids[i],
								"step", step_name(act), "result", "failed", "error",
								"code", errno_name(-r), "message", why));
			failed++;
		} else {
			if (verbose && !json)
				printf("%s %s\n", name, done_word(act));
			if (results)
				json_array_append_new(results, json_pack("{s:I,s:s,s:s}", "block", (json_int_t)ids[i],
									 "step", step_name(act), "result", "done"));
			done++;
		}
		if (verbose)
			fflush(stdout);
	}
	if (results) {
		json_t *out = json_pack("{s:s,s:o,s:I,s:I}", "action", step_name(act), "blocks", results, "done",
					(json_int_t)done, "failed", (json_int_t)failed);
		ctl_print_json(out);
		json_decref(out);
	}
	if (!failed)
		return CTL_EXIT_OK;
	return done ? CTL_EXIT_PARTIAL : CTL_EXIT_FAILURE;
}
