/* SPDX-License-Identifier: MIT */
/*
 * Sizes and durations as operators write them.
 *
 * size_parse(): plain bytes, "B" for bytes, or a K/M/G/T suffix (powers of
 * 1024, an optional trailing "B" or "iB"), with a fraction before a suffix as
 * lsmem prints it ("1.5G", "2.25G"; rounded down to a byte); rejects signs,
 * empty strings, junk and overflow.  For the configuration and the wire
 * protocol, where a bare number has always been bytes.
 * size_parse_cli(): the same, except that a number without a unit is MiB, as
 * chmem(8) reads sizes: for command-line arguments ("512" is 512M; "512B"
 * is 512 bytes).
 * Both return 0, -EINVAL (malformed) or -ERANGE (does not fit in 64 bits).
 *
 * size_format(): the shortest human form lsmem prints ("128M", "1.9G").
 * duration_parse_ms(): "30", "30s", "5m", "2h", "250ms" into milliseconds.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

int size_parse(const char *s, uint64_t *out);
int size_parse_cli(const char *s, uint64_t *out);
void size_format(uint64_t bytes, char *buf, size_t len);
int duration_parse_ms(const char *s, uint64_t *out_ms);
