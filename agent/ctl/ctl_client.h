/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl's side of the local API: requests to memgrantd over its Unix
 * socket (--socket, $MEMGRANT_SOCKET, or RUNSTATEDIR/memgrant/api.sock).
 * Every function prints a clear message when it fails and returns -errno.
 */
#pragma once

#include <jansson.h>

#include "agent/ctl/ctl.h"

const char *ctl_socket_path(const struct ctl_ctx *ctx);

/* S percent-encoded for a URL path or query (all but RFC 3986's unreserved
 * characters), malloc'd; NULL when out of memory. */
char *ctl_url_escape(const char *s);

/* METHOD PATH with an optional JSON BODY; *STATUS is the HTTP status and
 * *REPLY the parsed JSON answer (caller decrefs). */
int ctl_request(const struct ctl_ctx *ctx, const char *method, const char *path, const char *body,
		long *status, json_t **reply);

/* GET PATH expecting 200 and JSON: 0 with *REPLY, or -errno after saying why. */
int ctl_get_json(const struct ctl_ctx *ctx, const char *path, json_t **reply);
/* Pretty-prints J (sorted keys) and a newline on stdout. */
void ctl_print_json(json_t *j);

/* Follows the server-sent events of PATH; ON_EVENT gets each event and
 * returns 0 to go on, or a non-zero value that ends the stream and is
 * returned (negative values are returned as 0).  A SIGINT the caller holds
 * pending (blocked) ends the stream with -EINTR and no message. */
int ctl_follow_events(const struct ctl_ctx *ctx, const char *path, int (*on_event)(json_t *ev, void *cls),
		      void *cls);

/* getopt_long returned '?' or ':' (optstrings start with ':'): says which
 * option of CMD was wrong; returns CTL_EXIT_FAILURE. */
int ctl_bad_option(const char *cmd, int ch, char **argv);
/* -EINVAL with a message when arguments are left after the options. */
int ctl_no_more_args(const char *cmd, int argc, char **argv);

/* Prints the {"error": ...} of a failed request; returns -EPROTO. */
int ctl_print_error_reply(long status, json_t *reply);
