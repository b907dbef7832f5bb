/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl: a dispatcher over a table of {name, function, help}, one
 * file per command (like wg).  Adding a command = one line in CTL_COMMANDS
 * below plus the file that defines ctl_cmd_<name>().  What the commands on
 * one grant or revocation share (submit, follow) is ctl_ops.h.
 *
 * A command gets the global options in struct ctl_ctx and its own argv
 * (argv[0] is the command name; getopt_long is reset, start with optind = 0
 * or just call getopt_long).  It returns the process exit code:
 * CTL_EXIT_OK, CTL_EXIT_FAILURE, or CTL_EXIT_PARTIAL when some blocks were
 * done and some not (like chmem).  Commands print their own errors through
 * ctl_err() ("memgrantctl: ..." on stderr); output goes to stdout.
 *
 * The helpers below print a clear message on failure and return -errno, so
 * a command can just `return CTL_EXIT_FAILURE` afterwards.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hotplug/backend.h"

#define CTL_EXIT_OK 0
#define CTL_EXIT_FAILURE 1
#define CTL_EXIT_PARTIAL 64
#define CTL_EXIT_INTERRUPTED 130 /* Ctrl-C ended a wait; the operation goes on */

struct ctl_ctx {
	const char *sim;     /* --sim FILE: sim backend over its state file */
	const char *sysroot; /* --sysroot DIR: sysfs backend under DIR */
	const char *socket;  /* --socket PATH: the daemon's REST socket */
};

typedef int (*ctl_fn)(struct ctl_ctx *ctx, int argc, char **argv);

/* Where a command works: through memgrantd's socket, or on a backend that
 * --sim or --sysroot names (or that it opens itself, like sim init FILE). */
enum ctl_where {
	CTL_AGENT,
	CTL_BACKEND,
};

struct ctl_command {
	const char *name;
	ctl_fn run;
	enum ctl_where where;
	const char *help; /* one line for `memgrantctl --help` */
};

/* X(name, where, help): the command table.  Keep it sorted as --help shows it; a
 * help text may go on over lines indented to its column (CTL_HELP_MORE).
 * Each names every argument and option its command takes, as the command's
 * own --help and memgrantctl(8) do. */
#define CTL_HELP_MORE "\n           "
#define CTL_COMMANDS(X)                                                                  \
	X(sim, CTL_BACKEND, "sim init|fault FILE ...: create a simulated s390 guest or set its faults") \
	X(lsmem, CTL_BACKEND, "lsmem [OPTIONS]: list memory blocks like util-linux lsmem, with all its options" \
		 CTL_HELP_MORE "(-o, -a, -J, -P, -r, -b, -n, -S, -s, --summary, ...: lsmem --help)") \
	X(block, CTL_BACKEND, "block configure|deconfigure|online|offline|memmap on|off BLOCKS... [--zone Movable|Normal]" \
		 CTL_HELP_MORE "[-v] [--json]: one kernel step (BLOCKS as chmem: 16,17,20-23 or RANGE)") \
	X(status, CTL_AGENT, "status [--json]: what memgrantd is doing and how much memory it holds")  \
	X(grants, CTL_AGENT, "grants [ID] [--json]: grants and revocations memgrantd remembers")      \
	X(grant, CTL_AGENT, "grant (SIZE | RANGE | --blocks LIST) [--memmap auto|on|off] [--zone auto|movable|normal]" \
		 CTL_HELP_MORE "[--contiguous] [--not-after TIME] [--id ID] [--wait | --dry-run] [--json]: add memory") \
	X(revoke, CTL_AGENT, "revoke (SIZE | RANGE | --grant ID | --blocks LIST) [--id ID] [--wait | --dry-run] [--json]:" \
		  CTL_HELP_MORE "give memory back") \
	X(adopt, CTL_AGENT, "adopt BLOCKS [--json]: make online blocks no grant owns a local grant")   \
	X(wait, CTL_AGENT, "wait ID [--json]: follow a grant or revocation until it is final")        \
	X(cancel, CTL_AGENT, "cancel ID [--no-wait] [--json]: stop a grant or revocation after the block in flight") \
	X(events, CTL_AGENT, "events [--json]: follow memgrantd's events")

#define CTL_DECLARE(name, where, help) int ctl_cmd_##name(struct ctl_ctx *ctx, int argc, char **argv);
CTL_COMMANDS(CTL_DECLARE)
#undef CTL_DECLARE

/* "memgrantctl: " + message + newline on stderr. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Backend chosen by --sim / --sysroot.  With neither, DEFAULT_ROOT is used
 * when not NULL ("/" for read-only commands); otherwise it is an error, so
 * that nothing writes to the real /sys unless asked with --sysroot /. */
int ctl_open_backend(const struct ctl_ctx *ctx, const char *default_root, struct hp_backend **out);

/* Size as chmem takes it: MiB without a unit, else a K/M/G/T suffix (B for
 * bytes); OPT names the option in the message.  *OUT is bytes. */
int ctl_parse_size(const char *opt, const char *arg, uint64_t *out);
/* Decimal non-negative integer. */
int ctl_parse_u64(const char *opt, const char *arg, uint64_t *out);
/* Block list "16,17,20-23" (ranges inclusive, hotplug/words.h) into a malloc'd array. */
int ctl_parse_id_list(const char *opt, const char *arg, uint64_t **ids, size_t *n);
/* Every id must be a block of T (firmware entry or present); prints which is not. */
int ctl_check_ids(const struct mem_table *t, const uint64_t *ids, size_t n);
