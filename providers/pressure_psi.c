/* SPDX-License-Identifier: MIT */
/* Reading /proc/pressure/memory and /proc/vmstat (see pressure.h); apart
 * from pressure.c so that the parsers build alone (tests/fuzz/fuzz_pressure.c). */
#include "providers/pressure.h"
#include "lib/util.h"

int pressure_parse_psi(const char *text, enum mg_psi_kind kind, unsigned window_s, unsigned *centi)
{
	const char *want = kind == MG_PSI_FULL ? "full" : "some";
	const char *line = text;
	char key[16];

	snprintf(key, sizeof(key), "avg%u=", window_s);
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);

		if (n > strlen(want) && strncmp(line, want, strlen(want)) == 0 && line[strlen(want)] == ' ') {
			_cleanup_free_ char *l = strndup(line, n);
			const char *v = l ? strstr(l, key) : NULL;
			unsigned whole = 0, frac = 0;
			int used = 0;

			if (!l)
				return -ENOMEM;
			/* the kernel prints "%lu.%02lu": exactly two decimals, at most 100.00 */
			if (!v || sscanf(v + strlen(key), "%3u.%n", &whole, &used) != 1 || used < 2)
				return -EBADMSG;
			v += strlen(key) + used;
			if (v[0] < '0' || v[0] > '9' || v[1] < '0' || v[1] > '9' || (v[2] && v[2] != ' '))
				return -EBADMSG;
			frac = (unsigned)(v[0] - '0') * 10 + (unsigned)(v[1] - '0');
			if (whole > 100 || (whole == 100 && frac > 0))
				return -EBADMSG;
			*centi = whole * 100 + frac;
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -EBADMSG;
}

int pressure_parse_oom_kills(const char *text, uint64_t *count)
{
	static const char key[] = "oom_kill ";
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n');

		if (strncmp(line, key, sizeof(key) - 1) == 0) {
			const char *v = line + sizeof(key) - 1;
			uint64_t n = 0;

			if (*v < '0' || *v > '9')
				return -EBADMSG;
			for (; *v >= '0' && *v <= '9'; v++) {
				if (n > (UINT64_MAX - 9) / 10)
					return -EBADMSG;
				n = n * 10 + (uint64_t)(*v - '0');
			}
			if (*v && *v != '\n')
				return -EBADMSG;
			*count = n;
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT; /* kernels before 4.13 do not count OOM kills */
}
