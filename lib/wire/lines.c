/* SPDX-License-Identifier: MIT */
/*
 * Line framing of wire v1 streams.  See lines.h.
 */
#include "lib/wire/lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int channel_reader_init(struct channel_reader *r, size_t max)
{
	*r = (struct channel_reader){ .max = max };
	r->buf = malloc(max);
	return r->buf ? 0 : -ENOMEM;
}

void channel_reader_reset(struct channel_reader *r)
{
	r->len = 0;
	r->discarding = 0;
}

void channel_reader_done(struct channel_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

int channel_reader_feed(struct channel_reader *r, const char *data, size_t len, const struct channel_reader_ops *ops,
			void *ctx)
{
	while (len > 0) {
		const char *nl = memchr(data, '\n', len);
		size_t chunk = nl ? (size_t)(nl - data) : len;
		int ret = 0;

		if (r->discarding) {
			/* the rest of an oversized line: dropped up to its newline */
		} else if (chunk > r->max - r->len) {
			size_t seen = r->len + chunk;
			r->len = 0;
			r->discarding = 1;
			if (ops->too_long)
				ret = ops->too_long(ctx, seen);
		} else {
			memcpy(r->buf + r->len, data, chunk);
			r->len += chunk;
		}
		if (nl) {
			if (!r->discarding) {
				size_t l = r->len;
				if (l > 0 && r->buf[l - 1] == '\r')
					l--;
				r->len = 0;
				if (ret == 0 && ops->line)
					ret = ops->line(ctx, r->buf, l);
			}
			r->discarding = 0;
			r->len = 0;
			chunk++;
		}
		data += chunk;
		len -= chunk;
		if (ret < 0)
			return ret;
	}
	return 0;
}

