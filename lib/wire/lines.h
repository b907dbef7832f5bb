/* SPDX-License-Identifier: MIT */
/*
 * Line framing of wire v1 on byte streams (the virtio channel, on both the
 * guest's side, providers/channel.c, and the host's, providers/host/).
 *
 * Contract: no I/O and no allocation beyond the buffer of MAX bytes; the
 * callbacks decide what a line means.
 */
#pragma once

#include <stddef.h>

/*
 * A reader that splits a byte stream into lines of at most MAX bytes.
 * channel_reader_feed() consumes DATA and calls LINE for every complete line
 * (without the newline, a trailing '\r' removed) and TOO_LONG once for every
 * line longer than the limit, as soon as the limit is passed (SEEN bytes so
 * far); its bytes are then dropped up to the next newline.
 * Returns 0, or the first negative value a callback returned (the rest of
 * DATA is then not consumed).
 */
struct channel_reader {
	char *buf;       /* MAX bytes */
	size_t len, max;
	int discarding;  /* inside a line that is too long */
};

struct channel_reader_ops {
	int (*line)(void *ctx, const char *line, size_t len);
	int (*too_long)(void *ctx, size_t seen);
};

int channel_reader_init(struct channel_reader *r, size_t max);
void channel_reader_reset(struct channel_reader *r);
void channel_reader_done(struct channel_reader *r);
int channel_reader_feed(struct channel_reader *r, const char *data, size_t len, const struct channel_reader_ops *ops,
			void *ctx);
