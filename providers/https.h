/* SPDX-License-Identifier: MIT */
/*
 * The HTTPS provider: memgrantd as a client of a control plane
 * (docs/https.md, docs/api/controlplane.openapi.yaml).
 *
 * Contract:
 * - https_provider_start() copies what it needs from CFG (the caller may free
 *   or swap its configuration afterwards) and starts two threads of its own:
 *   the poller (long poll GET .../grants, each grant handed to
 *   engine_submit() from source "https", parsed once) and the sender (inventory PUT, then
 *   the outbox of status reports for "https", POSTed strictly in order, each
 *   acknowledged in the outbox only after a 2xx).  Neither ever blocks the
 *   daemon: they only call the daemon's thread-safe entry points.
 * - Network trouble never fails the provider: every failure is retried with
 *   exponential backoff and jitter up to a cap, and logged once per change of
 *   state (not once per attempt).  4xx answers other than 408/429 are logged
 *   with the server's message and retried at the cap only.
 * - The files (ca_file, cert_file, key_file, token_file) are read through
 *   CREDS (lib/credstore.h: the root helper hands over the root-only ones)
 *   when the first request needs them and again after each reload
 *   (cred_store_bump()): the next request then opens a new connection with
 *   them.  A token file the agent reads itself is also re-read when it
 *   changes.  The token is never logged.
 * - https_provider_stop() returns promptly: it aborts a long poll or a
 *   backoff in progress.  Call it before engine_stop().
 * - Returns 0 or a negative errno; logs through LOG, never prints.
 */
#pragma once

struct engine;
struct mg_https_config;
struct mg_log;
struct https_provider;
struct cred_store;

int https_provider_start(const struct mg_https_config *cfg, const char *agent_id, struct engine *d,
			 struct cred_store *creds, const struct mg_log *log, struct https_provider **out);
/* NULL is fine. */
void https_provider_stop(struct https_provider *p);
