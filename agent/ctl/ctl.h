/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl: a dispatcher over a table of {name, function, help}, one
 * file per command (like wg).  Adding a command = one line in CTL_COMMANDS
 * below plus the file that defines ctl_cmd_<name>().
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

struct ctl_command {
	const char *name;
	ctl_fn run;
	const char *help; /* one line for `memgrantctl --help` */
};

/* X(name, help): the command table.  Keep it sorted as --help shows it. */
#define CTL_COMMANDS(X)                                                                  \
	X(sim, "sim init|fault FILE ...: create a simulated s390 guest or set its faults") \
	X(lsmem, "list memory blocks like util-linux lsmem (-o, -a, -J, -P, -r, -b, -n)") \
	X(block, "block configure|deconfigure|online|offline|memmap on|off N...: one kernel step") \
	X(status, "status [--json]: what memgrantd is doing and how much memory it holds")  \
	X(grants, "grants [ID] [--json]: grants and revocations memgrantd remembers")      \
	X(grant, "grant SIZE|RANGE [--memmap auto|on|off] [--zone auto|movable|normal] [--wait|--dry-run]") \
	X(revoke, "revoke (SIZE | --grant ID) [--wait]: give memory back")                 \
	X(adopt, "adopt BLOCKS [--json]: make online blocks no grant owns a local grant")   \
	X(wait, "wait ID [--json]: follow a grant or revocation until it is final")        \
	X(cancel, "cancel ID [--no-wait] [--json]: stop a grant or revocation after the block in flight") \
	X(events, "events [--json]: follow memgrantd's events")

#define CTL_DECLARE(name, help) int ctl_cmd_##name(struct ctl_ctx *ctx, int argc, char **argv);
CTL_COMMANDS(CTL_DECLARE)
#undef CTL_DECLARE

/* "memgrantctl: " + message + newline on stderr. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Backend chosen by --sim / --sysroot.  With neither, DEFAULT_ROOT is used
 * when not NULL ("/" for read-only commands); otherwise it is an error, so
 * that nothing writes to the real /sys unless asked with --sysroot /. */
int ctl_open_backend(const struct ctl_ctx *ctx, const char *default_root, struct hp_backend **out);

/* Size with K/M/G/T suffix; OPT names the option in the message. */
int ctl_parse_size(const char *opt, const char *arg, uint64_t *out);
/* Decimal non-negative integer. */
int ctl_parse_u64(const char *opt, const char *arg, uint64_t *out);
/* Block list "16,17,20-23" (ranges inclusive, lib/words.h) into a malloc'd array. */
int ctl_parse_id_list(const char *opt, const char *arg, uint64_t **ids, size_t *n);
/* Every id must be a block of T (firmware entry or present); prints which is not. */
int ctl_check_ids(const struct mem_table *t, const uint64_t *ids, size_t n);
