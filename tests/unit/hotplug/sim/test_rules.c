/* SPDX-License-Identifier: MIT */
/*
 * The kernel rule suite (rules.h) on the sim backend.  The same suite runs
 * on the sysfs backend over a FUSE view of the sim in
 * tests/unit/hotplug/sysfs/test_rules_sysfs.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/hotplug/rules.h"

int main(void)
{
	return run_rule_suite("rules-sim", sim_env_open) ? 1 : 0;
}
