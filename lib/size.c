/* SPDX-License-Identifier: MIT */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int suffix_shift(const char *s, unsigned *shift)
{
	static const char units[] = "KMGTPE";
	const char *u;

	if (*s == '\0') {
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
	uint64_t val = 0;
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
	r = suffix_shift(s, &shift);
	if (r < 0)
		return r;
	if (shift && val > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = val << shift;
	return 0;
}

/*
 * Same rounding as util-linux size_to_human_string(): one decimal, dropped
 * when it is zero, units K/M/G/T/P/E.
 */
void size_format(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	unsigned exp = 0;
	uint64_t dec, frac;

	while (exp < 6 && bytes >= (1ULL << (10 * (exp + 1))))
		exp++;
	if (exp == 0) {
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
		return;
	}
	dec = bytes >> (10 * exp);
	frac = bytes & ((1ULL << (10 * exp)) - 1);
	if (frac) {
		/* tenths, rounded the way util-linux lsmem rounds them */
		frac = ((frac >> (10 * exp - 10)) + 50) / 100;
		if (frac == 10) {
			dec++;
			frac = 0;
		}
	}
	if (frac)
		snprintf(buf, len, "%llu.%llu%c", (unsigned long long)dec,
			 (unsigned long long)frac, units[exp]);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)dec, units[exp]);
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
