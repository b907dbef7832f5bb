/* SPDX-License-Identifier: MIT */
/*
 * Webhook delivery: events queued in the engine's durable outbox under
 * DEST ("webhook:" + 16 hex digits of SHA-256 over the URL, so the queue
 * follows the URL, not its position in the configuration) are POSTed one at
 * a time, oldest first, by the webhook's own thread.
 *
 * Contract:
 * - Body: the event JSON, compact with sorted keys.  Headers:
 *   Content-Type: application/json, X-Memgrant-Event: NAME,
 *   X-Memgrant-Delivery and Idempotency-Key: the event's event_id (the same
 *   on every retry and after a restart, so a receiver can drop repeats),
 *   X-Memgrant-Signature: sha256=HEX (HMAC-SHA256 over the exact body bytes
 *   with the secret file's contents, one trailing newline removed) when a
 *   secret file is configured.
 * - A 2xx answer acknowledges the event (removed from the outbox).  Anything
 *   else (connection refused, timeout, 4xx, 5xx) is retried with backoff from
 *   1 s doubling to 5 min; the event stays first in line, so order is kept.
 * - https only, verified against the system's CA store, unless
 *   insecure_http allows http://.  No redirects.
 * - Logs failures through the daemon's log; returns 0 or -errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/log.h"

#define WEBHOOK_BACKOFF_MIN_MS 1000
#define WEBHOOK_BACKOFF_MAX_MS (5 * 60 * 1000)
#define WEBHOOK_ACK_RETRY_MAX_MS 5000 /* a delivered event the journal cannot yet remove (disk full) */
#define WEBHOOK_DEST_MAX 32
#define WEBHOOK_SECRET_MAX 4096

struct cred_store;
struct engine;
struct webhook;

struct webhook_params {
	const char *url;
	const char *secret_file; /* NULL: unsigned */
	struct cred_store *creds; /* how the secret is read (lib/credstore.h); NULL: directly */
	bool insecure_http;
	uint64_t timeout_ms;     /* per attempt */
};

/* Reads the secret (-ENOENT, -EACCES, -EFBIG over WEBHOOK_SECRET_MAX, -EINVAL empty). */
int webhook_new(const struct webhook_params *p, struct engine *d, const struct mg_log *log,
		struct webhook **out);
int webhook_start(struct webhook *w);
/* Interrupts an attempt in flight and joins the thread. */
void webhook_stop(struct webhook *w);
void webhook_free(struct webhook *w);
/* The outbox destination of W. */
const char *webhook_dest(const struct webhook *w);

/* "webhook:" + 16 hex digits of SHA-256(URL) into OUT (WEBHOOK_DEST_MAX). */
int webhook_dest_for(const char *url, char *out, size_t len);
/* "sha256=" + 64 hex digits: HMAC-SHA256 of BODY with KEY, into OUT (>= 72 bytes). */
int webhook_sign(const void *key, size_t key_len, const void *body, size_t body_len, char *out,
		 size_t len);
