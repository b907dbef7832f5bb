/* SPDX-License-Identifier: MIT */
/*
 * The guest channel provider: grants and revocations from the KVM host over a
 * virtio-serial port (docs/channel.md).
 *
 * Contract:
 * - channel_provider_start() starts one thread that owns the port
 *   (default /dev/virtio-ports/org.memgrant.0).  A path that is a Unix socket
 *   is connect()ed to and reconnected whenever it closes (tests and hosts
 *   that bridge the port); anything else (character device, pty, fifo) is
 *   opened O_RDWR|O_NONBLOCK.  A port that reports POLLHUP (no host
 *   connected) is probed once a second, never spun on.
 * - The wire: newline-delimited JSON, at most CHANNEL_LINE_MAX bytes a line.
 *   A longer line, invalid JSON, an unknown type: an {"type":"error"} line
 *   naming the problem, then reading resumes after the next newline.
 *   "sync" is answered with the same nonce (plus "generation", the last
 *   generation the agent recorded from the channel) before anything else;
 *   grant/revoke go to engine_submit() and its verdict is sent back; "ack"
 *   removes a report from the engine's outbox; "query" answers the agent's
 *   status.
 * - Reports of the outbox "channel" are sent one at a time, each with a
 *   "seq"; the next one goes out when the host acknowledged the previous
 *   ({"type":"ack","seq":N}).  After a reconnect or a sync the unacknowledged
 *   report is sent again: at-least-once delivery.
 * - channel_provider_stop() returns promptly (an eventfd in the poll set) and
 *   frees everything; NULL is fine.  Neither function prints; the thread logs
 *   through LOG.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "lib/wire/lines.h" /* the line framing, channel_reader_* */

struct msg;

#define CHANNEL_DEFAULT_PATH "/dev/virtio-ports/org.memgrant.0"
#define CHANNEL_LINE_MAX 65536 /* bytes a line, not counting the newline */

struct channel_provider;
struct engine;
struct mg_channel_config;
struct mg_log;

int channel_provider_start(const struct mg_channel_config *cfg, struct engine *d, const struct mg_log *log,
			   struct channel_provider **out);
void channel_provider_stop(struct channel_provider *p);

/*
 * What one line from the host is (channel_line.c; fuzzed by
 * tests/fuzz/fuzz_channel.c).  Never fails: a line that is not usable is
 * CHANNEL_LINE_BAD with the error to send back (CODE, MESSAGE; ID set only
 * when the error is about that grant).  CHANNEL_LINE_MESSAGE (grant, revoke,
 * sync or no type) goes to the engine as MSG, parsed here once.
 */
enum channel_line_kind {
	CHANNEL_LINE_EMPTY,   /* a keep-alive */
	CHANNEL_LINE_BAD,
	CHANNEL_LINE_ACK,     /* SEQ: the status report acknowledged */
	CHANNEL_LINE_QUERY,
	CHANNEL_LINE_MESSAGE,
};

struct channel_line {
	enum channel_line_kind kind;
	uint64_t seq;
	char type[16];        /* "" none or too long */
	char id[64];          /* a valid id, or "" */
	char code[16];
	char message[256];
	/* CHANNEL_LINE_MESSAGE: the message parsed once (the caller owns it), or
	 * NULL with CODE and MESSAGE saying why it is not one */
	struct msg *msg;
};

void channel_parse_line(const char *line, size_t len, struct channel_line *out);
