/* SPDX-License-Identifier: MIT */
#include "hotplug/words.h"

#include <ctype.h>
#include <inttypes.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/size.h"
#include "lib/util.h"

/* At most 40 characters of an operator's input in a message. */
#define SHOWN "%.40s%s"
#define SHOW(s) (s), strlen(s) > 40 ? "..." : ""

int words_zone_parse(const char *s, bool allow_auto, enum mem_zone *out)
{
	if (!s)
		return -EINVAL;
	if (!strcasecmp(s, "movable") || !strcasecmp(s, "online_movable"))
		*out = MEM_ZONE_MOVABLE;
	else if (!strcasecmp(s, "normal") || !strcasecmp(s, "kernel") || !strcasecmp(s, "online_kernel"))
		*out = MEM_ZONE_NORMAL;
	else if (allow_auto && !strcasecmp(s, "auto"))
		*out = MEM_ZONE_AUTO;
	else
		return -EINVAL;
	return 0;
}

const char *words_zone_name(enum mem_zone z)
{
	return (unsigned)z <= MEM_ZONE_NORMAL ? mem_zone_words[z] : mem_zone_words[MEM_ZONE_AUTO];
}

static const char *const zone_kernel_words[MEM_ZONE_COUNT] = {
	[MEM_ZONE_AUTO] = "auto",       [MEM_ZONE_MOVABLE] = "Movable", [MEM_ZONE_NORMAL] = "Normal",
	[MEM_ZONE_DMA] = "DMA",         [MEM_ZONE_DMA32] = "DMA32",     [MEM_ZONE_HIGHMEM] = "Highmem",
	[MEM_ZONE_DEVICE] = "Device",   [MEM_ZONE_NONE] = "none",       [MEM_ZONE_UNKNOWN] = "Unknown",
};

const char *words_zone_kernel_name(enum mem_zone z)
{
	return (unsigned)z < MEM_ZONE_COUNT ? zone_kernel_words[z] : zone_kernel_words[MEM_ZONE_UNKNOWN];
}

enum mem_zone words_zone_kernel_parse(const char *s, size_t n)
{
	for (int z = MEM_ZONE_MOVABLE; z < MEM_ZONE_UNKNOWN; z++)
		if (strlen(zone_kernel_words[z]) == n && strncasecmp(s, zone_kernel_words[z], n) == 0)
			return (enum mem_zone)z;
	return MEM_ZONE_UNKNOWN;
}

int words_memmap_parse(const char *s, bool allow_auto, int *out)
{
	static const char *const on[] = { "on", "1", "true", "always" };
	static const char *const off[] = { "off", "0", "false", "never" };

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_SIZE(on); i++) {
		if (!strcasecmp(s, on[i])) {
			*out = WORDS_MEMMAP_ON;
			return 0;
		}
		if (!strcasecmp(s, off[i])) {
			*out = WORDS_MEMMAP_OFF;
			return 0;
		}
	}
	if (allow_auto && !strcasecmp(s, "auto")) {
		*out = WORDS_MEMMAP_AUTO;
		return 0;
	}
	return -EINVAL;
}

const char *words_memmap_name(int memmap)
{
	return memmap == WORDS_MEMMAP_ON ? "on" : memmap == WORDS_MEMMAP_OFF ? "off" : "auto";
}

/* Decimal digits only, no sign, no blanks, fits in 64 bits. */
static int parse_dec(const char *s, const char *end, uint64_t *out)
{
	uint64_t v = 0;

	if (s == end)
		return -EINVAL;
	for (; s < end; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int append_range(uint64_t a, uint64_t b, size_t max_ids, uint64_t **ids, size_t *n)
{
	uint64_t *nids;

	if (b - a >= max_ids || *n + (size_t)(b - a) + 1 > max_ids)
		return -ERANGE;
	nids = reallocarray(*ids, *n + (size_t)(b - a) + 1, sizeof(**ids));
	if (!nids)
		return -ENOMEM;
	*ids = nids;
	for (uint64_t id = a;; id++) {
		(*ids)[(*n)++] = id;
		if (id == b)
			break;
	}
	return 0;
}

int words_block_list(const char *s, size_t max_ids, uint64_t **ids, size_t *n, char *why, size_t len)
{
	const char *p = s;

	if (!s || !*s || *s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,")) {
		snprintf(why, len, "malformed block list '" SHOWN "' (expected N,N,N-M, e.g. 16,17,20-23)",
			 SHOW(s ? s : ""));
		return -EINVAL;
	}
	while (*p) {
		const char *end = strchrnul(p, ','), *dash = memchr(p, '-', (size_t)(end - p));
		uint64_t a, b;
		int r;

		r = parse_dec(p, dash ? dash : end, &a);
		if (r == 0)
			r = dash ? parse_dec(dash + 1, end, &b) : (b = a, 0);
		if (r == -ERANGE) {
			snprintf(why, len, "'%.*s' is too large for a block number", (int)(end - p), p);
			return r;
		}
		if (r < 0) {
			if (p == s && !*end)
				snprintf(why, len, "'" SHOWN "' is not a block number or a range N-M", SHOW(s));
			else
				snprintf(why, len, "'%.*s' in '" SHOWN "' is not a block number or a range N-M",
					 (int)(end - p), p, SHOW(s));
			return r;
		}
		if (b < a) {
			snprintf(why, len, "range '%.*s' ends before it starts", (int)(end - p), p);
			return -EINVAL;
		}
		r = append_range(a, b, max_ids, ids, n);
		if (r == -ERANGE) {
			snprintf(why, len, "'" SHOWN "' names more than %zu blocks", SHOW(s), max_ids);
			return r;
		}
		if (r < 0) {
			snprintf(why, len, "out of memory");
			return r;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

bool words_is_addr_range(const char *s)
{
	return s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

static int parse_hex(const char *s, const char *end, uint64_t *out)
{
	uint64_t v = 0;

	if (end - s < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return -EINVAL;
	for (s += 2; s < end; s++) {
		int d = isdigit((unsigned char)*s) ? *s - '0'
			: isxdigit((unsigned char)*s) ? tolower((unsigned char)*s) - 'a' + 10
						       : -1;
		if (d < 0)
			return -EINVAL;
		if (v > (UINT64_MAX >> 4))
			return -ERANGE;
		v = (v << 4) | (uint64_t)d;
	}
	*out = v;
	return 0;
}

int words_addr_range(const char *s, uint64_t block_size, uint64_t *first, uint64_t *last, char *why,
		     size_t len)
{
	const char *dash = s ? strchr(s, '-') : NULL;
	uint64_t start, end;
	char bs[16];

	if (!dash || parse_hex(s, dash, &start) < 0 || parse_hex(dash + 1, dash + strlen(dash), &end) < 0) {
		snprintf(why, len, "'" SHOWN "' is not an address range (expected 0xSTART-0xEND, e.g. "
			 "0x80000000-0x8fffffff)", SHOW(s ? s : ""));
		return -EINVAL;
	}
	if (end < start) {
		snprintf(why, len, "address range '" SHOWN "' ends before it starts", SHOW(s));
		return -EINVAL;
	}
	if (!block_size) {
		snprintf(why, len, "address range '" SHOWN "': the block size is not known", SHOW(s));
		return -EINVAL;
	}
	words_size_exact(block_size, bs, sizeof(bs));
	if (start % block_size || end == UINT64_MAX || (end + 1) % block_size) {
		uint64_t lo = start - start % block_size;
		uint64_t hi = end - end % block_size + block_size - 1;

		snprintf(why, len, "address range '" SHOWN "': start and end + 1 must be aligned to the "
			 "memory block size (%s); the blocks it touches are 0x%llx-0x%llx", SHOW(s), bs,
			 (unsigned long long)lo, (unsigned long long)hi);
		return -EINVAL;
	}
	*first = start / block_size;
	*last = end / block_size;
	return 0;
}

void words_size_exact(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";

	for (int u = 6; u > 0; u--) {
		unsigned shift = 10 * (unsigned)u;
		uint64_t whole = bytes >> shift, frac = bytes & ((1ULL << shift) - 1);
		uint64_t thousandths;

		if (!whole)
			continue;
		/* exact in at most three decimals: frac * 1000 is a multiple of 2^shift */
		if (frac && (shift > 50 || (frac * 1000) % (1ULL << shift)))
			continue;
		thousandths = frac ? (frac * 1000) >> shift : 0;
		if (!thousandths)
			snprintf(buf, len, "%llu%c", (unsigned long long)whole, units[u]);
		else if (thousandths % 100 == 0)
			snprintf(buf, len, "%llu.%llu%c", (unsigned long long)whole,
				 (unsigned long long)thousandths / 100, units[u]);
		else if (thousandths % 10 == 0)
			snprintf(buf, len, "%llu.%02llu%c", (unsigned long long)whole,
				 (unsigned long long)thousandths / 10, units[u]);
		else
			snprintf(buf, len, "%llu.%03llu%c", (unsigned long long)whole,
				 (unsigned long long)thousandths, units[u]);
		return;
	}
	snprintf(buf, len, "%lluB", (unsigned long long)bytes);
}

int words_size_in_blocks(uint64_t size, const char *shown, uint64_t block_size, char *why, size_t len)
{
	char bs[16], given[48], lo[16], hi[16];
	uint64_t below, above;

	if (!block_size)
		return 0;
	if (shown)
		snprintf(given, sizeof(given), SHOWN, SHOW(shown));
	else {
		/* exactly when that is short ("1.375G"), else as lsmem rounds it ("1.3G") */
		words_size_exact(size, given, sizeof(given));
		if (size >= 1024 && given[strlen(given) - 1] == 'B')
			size_format(size, given, sizeof(given));
	}
	words_size_exact(block_size, bs, sizeof(bs));
	if (size && size % block_size == 0)
		return 0;
	below = size - size % block_size;
	above = below + block_size;
	words_size_exact(above, hi, sizeof(hi));
	if (!below)
		snprintf(why, len, "size %s is not a multiple of the block size %s: the smallest valid size is %s",
			 given, bs, hi);
	else {
		words_size_exact(below, lo, sizeof(lo));
		snprintf(why, len, "size %s is not a multiple of the block size %s: the nearest valid sizes are "
			 "%s and %s", given, bs, lo, hi);
	}
	return -EINVAL;
}

void words_block_list_format(const uint64_t *ids, size_t n, char *buf, size_t len)
{
	size_t used = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n;) {
		size_t j = i;
		char part[48];
		int w;

		while (j + 1 < n && ids[j + 1] == ids[j] + 1)
			j++;
		if (j == i)
			w = snprintf(part, sizeof(part), "%s%" PRIu64, i ? "," : "", ids[i]);
		else
			w = snprintf(part, sizeof(part), "%s%" PRIu64 "-%" PRIu64, i ? "," : "",
				     ids[i], ids[j]);
		if (w < 0 || used + (size_t)w + 4 > len) {
			if (used + 4 <= len)
				memcpy(buf + used, "...", 4);
			return;
		}
		memcpy(buf + used, part, (size_t)w + 1);
		used += (size_t)w;
		i = j + 1;
	}
}
