/* SPDX-License-Identifier: MIT */
/*
 * What memgrantctl's commands on one grant or revocation share (ctl_ops.c):
 * grant and revoke build and submit a message, wait and cancel follow one.
 * Each returns the process exit code (ctl.h), having printed its errors.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

struct ctl_ctx;

/* POSTs MSG; with WAIT follows the operation to its final state. */
int ctl_submit(struct ctl_ctx *ctx, json_t *msg, bool wait, bool json);
/* Follows ID on the event stream until it is final (CANCELLING: the exit
 * code is cancel's); progress on a terminal; Ctrl-C stops waiting only. */
int ctl_follow(struct ctl_ctx *ctx, const char *id, bool json, bool cancelling);
/* The one-paragraph outcome of a status report. */
void ctl_print_summary(json_t *st);
/* cancel's exit code for a final STATE: 0 cancelled, 64 partial, 1 otherwise. */
int ctl_cancel_exit_code(const char *state);
/* grant and revoke (REVOKE): options, the message, dry run or submit. */
int ctl_grant_or_revoke(struct ctl_ctx *ctx, int argc, char **argv, bool revoke);
