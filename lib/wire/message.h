/* SPDX-License-Identifier: MIT */
/*
 * Wire protocol v1 messages (docs/protocol.md): the same JSON on every
 * transport (HTTPS long poll, virtio channel, local REST API).
 *
 * Parsing: msg_parse() takes untrusted text with a byte limit, msg_from_json()
 * an already parsed jansson value.  Either yields a freshly allocated, fully
 * validated struct msg, or fills a struct msg_error {code, message} and
 * returns the matching negative errno:
 *   -E2BIG    the text is longer than the limit (it is not parsed at all)
 *   -EBADMSG  not JSON, or not a JSON object
 *   -EINVAL   a field is missing, unknown, duplicated, of the wrong type or
 *             has a bad value (the message names the field and says why)
 *   -ERANGE   a number is out of range (generation above 2^53, a size that
 *             does not fit in 64 bits, a JSON number too big to represent)
 *   -ENOMEM
 * Nothing in the input can make these functions crash or leak; they hold no
 * state and are safe to call from any thread.
 *
 * Building: msg_to_json() serializes a parsed message back to its canonical
 * JSON (sizes as byte integers; msg_from_json(msg_to_json(m)) gives m back);
 * the journal stores requests that way.  msg_status_to_json(),
 * msg_error_to_json() and msg_sync_reply_json() build what the agent sends.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hotplug/block.h"
#include "lib/wire/msg_types.h"

int msg_from_json(json_t *obj, struct msg **out, struct msg_error *err);
int msg_from_json_opts(json_t *obj, unsigned flags, struct msg **out, struct msg_error *err);
/* Canonical JSON of a parsed grant/revoke/sync; NULL on ENOMEM. */
json_t *msg_to_json(const struct msg *m);
/* {"type":"status", ...} as in docs/protocol.md; NULL on ENOMEM. */
json_t *msg_status_to_json(const struct msg_status *s);
/* The "range" of BLOCK in a status report's block entry ("0x...-0x..."),
 * null when BLOCK_SIZE is 0 or the range overflows. */
json_t *msg_block_range_json(uint64_t block, uint64_t block_size);
/* {"type":"error","code":..,"message":..}, plus "id" when ID is not NULL. */
json_t *msg_error_to_json(const struct msg_error *e, const char *id);
/* {"type":"sync","nonce":N}: the answer to a sync, sent before anything else. */
json_t *msg_sync_reply_json(uint64_t nonce);
