/* SPDX-License-Identifier: MIT */
/*
 * The kernel rule suite (rules.h) on the sim backend, and, when a FUSE
 * variant of the sim is available, on the sysfs backend over it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rules.h"

/*
 * HOOK for the sysfs-over-FUSE variant.  When MEMGRANT_SIMFS names an
 * executable that serves a sim state file as a filesystem, a factory here
 * should: sim_init() a state file in a temp dir, mount MEMGRANT_SIMFS on a
 * temp mount point, hp_sysfs_open() on that mount, and fill struct rule_env
 * (b = sysfs backend, root = mount point, state = state file, close = unmount).
 * Until that factory exists the variant is skipped.  It can equally live in
 * its own test file that includes rules.h and calls run_rule_suite().
 */
static const rule_env_open_fn simfs_env_open = NULL;

int main(void)
{
	const char *simfs = getenv("MEMGRANT_SIMFS");
	int failures = run_rule_suite("rules-sim", sim_env_open);

	if (simfs && *simfs && simfs_env_open)
		failures += run_rule_suite("rules-simfs", simfs_env_open);
	return failures ? 1 : 0;
}
