/* SPDX-License-Identifier: MIT */
#include "lib/size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int suffix_shift(const char *s, unsigned *shift)
{
	static const char units[] = "KMGTPE";
	const char *u;

	/* nothing, or "B" alone: bytes */
	if (*s == '\0' || ((*s == 'B' || *s == 'b') && s[1] == '\0')) {
		*shift = 0;
		return 0;
	}
	u = strchr(units, toupper((unsigned char)*s));
	if (!u || *s == '\0')
		return -EINVAL;
	s++;
	/* accept "G", "GB", "GiB" */
	if (*s == 'i')
		s++;
	if (*s == 'B' || *s == 'b')
		s++;
	if (*s != '\0')
		return -EINVAL;
	*shift = 10 * (unsigned)(u - units + 1);
	return 0;
}

int size_parse(const char *s, uint64_t *out)
{
	uint64_t val = 0, frac = 0, scale = 1;
	unsigned shift;
	int r;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL; /* no sign, no blanks, no empty string */
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (val > (UINT64_MAX - d) / 10)
			return -ERANGE;
		val = val * 10 + d;
	}
	/* a fraction as lsmem prints it ("1.5G"): at most 9 decimals */
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		for (; isdigit((unsigned char)*s); s++) {
			if (scale >= 1000000000ULL)
				return -EINVAL;
			frac = frac * 10 + (unsigned)(*s - '0');
			scale *= 10;
		}
	}
	r = suffix_shift(s, &shift);
	if (r < 0)
		return r;
	if (scale > 1 && !shift)
		return -EINVAL; /* "1.5" bytes */
	if (shift && val > (UINT64_MAX >> shift))
		return -ERANGE;
	val <<= shift;
	if (frac) {
		/* rounded down to a byte; callers that need block multiples say so */
		uint64_t add = (uint64_t)(((unsigned __int128)frac << shift) / scale);
		if (val > UINT64_MAX - add)
			return -ERANGE;
		val += add;
	}
	*out = val;
	return 0;
}

int size_parse_cli(const char *s, uint64_t *out)
{
	char buf[64];
	size_t n = s ? strlen(s) : 0;

	/* no unit: MiB, as chmem(8) takes sizes */
	if (n && isdigit((unsigned char)s[n - 1])) {
		if (n + 2 > sizeof(buf))
			return -ERANGE; /* more digits than 64 bits hold */
		snprintf(buf, sizeof(buf), "%sM", s);
		s = buf;
	}
	return size_parse(s, out);
}

/*
 * Same digits as util-linux size_to_human_string(SIZE_SUFFIX_1LETTER):
 * the fraction is taken in thousandths of the unit, rounded to one
 * decimal, and dropped when that decimal is zero ("1.9G", "2G", "640M").
 * Rounding in 1/1024ths instead would print e.g. 1.5G for 1.449G.
 */
void size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	unsigned shift = 10;
	uint64_t dec, frac;

	while (shift <= 60 && bytes >= (1ULL << shift))
		shift += 10;
	shift -= 10; /* largest power of 1024 not above BYTES */
	if (shift == 0) {
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
		return;
	}
	dec = bytes >> shift;
	frac = bytes & ((1ULL << shift) - 1);
	if (frac) {
		if (frac >= UINT64_MAX / 1000) /* only for exabytes: avoid overflow */
			frac = ((frac / 1024) * 1000) / (1ULL << (shift - 10));
		else
			frac = (frac * 1000) / (1ULL << shift);
		frac = (frac + 50) / 100; /* tenths, rounded half up */
		if (frac == 10) {
			dec++;
			frac = 0;
		}
	}
	if (frac)
		snprintf(buf, len, "%llu.%llu%c", (unsigned long long)dec,
			 (unsigned long long)frac, units[shift / 10]);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)dec, units[shift / 10]);
}

int duration_parse_ms(const char *s, uint64_t *out_ms)
{
	uint64_t val = 0, mult;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (val > (UINT64_MAX - d) / 10)
			return -ERANGE;
		val = val * 10 + d;
	}
	if (*s == '\0' || strcmp(s, "s") == 0)
		mult = 1000;
	else if (strcmp(s, "ms") == 0)
		mult = 1;
	else if (strcmp(s, "m") == 0 || strcmp(s, "min") == 0)
		mult = 60 * 1000;
	else if (strcmp(s, "h") == 0)
		mult = 3600 * 1000;
	else
		return -EINVAL;
	if (val > UINT64_MAX / mult)
		return -ERANGE;
	*out_ms = val * mult;
	return 0;
}
