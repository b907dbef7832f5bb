/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl revoke SIZE | --blocks LIST | --grant ID: hand a revocation to
 * memgrantd; the options are grant's (ctl_grant_or_revoke(), ctl_grant.c)
 * but --memmap and --zone.
 */
#include "agent/ctl/ctl.h"
#include "agent/ctl/ctl_ops.h"

int ctl_cmd_revoke(struct ctl_ctx *ctx, int argc, char **argv)
{
	return ctl_grant_or_revoke(ctx, argc, argv, true);
}
