/* SPDX-License-Identifier: MIT */
/* One scalar of memgrant.yaml into its C value, defaults, and freeing, all by the key tables. */
#include "config/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/size.h"
#include "lib/util.h"

/* ---------------------------------------------------------------- freeing */

void cfg_free_strlist(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void cfg_free_keys(const struct key_def *defs, void *base)
{
	for (const struct key_def *d = defs; d->name; d++) {
		switch (d->kind) {
		case K_STR:
		case K_PATH:
			free(*AT(base, d->off, char *));
			*AT(base, d->off, char *) = NULL;
			break;
		case K_IDS:
			free(AT(base, d->off, struct mg_id_list)->ids);
			*AT(base, d->off, struct mg_id_list) = (struct mg_id_list){ 0 };
			break;
		case K_STRLIST:
			cfg_free_strlist(*AT(base, d->off, char **), *AT(base, d->count_off, size_t));
			*AT(base, d->off, char **) = NULL;
			*AT(base, d->count_off, size_t) = 0;
			break;
		case K_SECTION:
			cfg_free_keys(d->sub, base);
			break;
		case K_HOOKS: {
			struct mg_config *c = base;
			for (size_t i = 0; i < c->n_hooks; i++)
				cfg_free_keys(d->sub, &c->hooks[i]);
			free(c->hooks);
			c->hooks = NULL;
			c->n_hooks = 0;
			break;
		}
		default:
			break;
		}
	}
}

void config_free(struct mg_config *c)
{
	if (!c)
		return;
	cfg_free_keys(cfg_root_keys, c);
	free(c->source);
	free(c);
}

void config_diag_clear(struct config_diag *d)
{
	if (!d)
		return;
	cfg_free_strlist(d->msgs, d->n);
	d->msgs = NULL;
	d->n = 0;
}

/* ---------------------------------------------------------------- scalar conversion */

int cfg_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "some avg10>20", "full avg300 < 0.5%": threshold in hundredths of a percent. */
static int parse_psi(const char *s, struct mg_psi_trigger *t)
{
	struct mg_psi_trigger r = { .set = true };
	unsigned whole = 0, frac = 0, digits = 0;

	if (startswith(s, "some"))
		r.kind = MG_PSI_SOME;
	else if (startswith(s, "full"))
		r.kind = MG_PSI_FULL;
	else
		return -EINVAL;
	s += 4;
	if (*s != ' ')
		return -EINVAL;
	while (*s == ' ')
		s++;
	if (startswith(s, "avg10"))
		r.window_s = 10, s += 5;
	else if (startswith(s, "avg60"))
		r.window_s = 60, s += 5;
	else if (startswith(s, "avg300"))
		r.window_s = 300, s += 6;
	else
		return -EINVAL;
	while (*s == ' ')
		s++;
	if (*s != '>' && *s != '<')
		return -EINVAL;
	r.above = *s++ == '>';
	while (*s == ' ')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		whole = whole * 10 + (unsigned)(*s - '0');
		if (whole > 100)
			return -ERANGE;
	}
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		for (; isdigit((unsigned char)*s); s++) {
			if (++digits > 2)
				return -EINVAL; /* the kernel prints two decimals */
			frac = frac * 10 + (unsigned)(*s - '0');
		}
		if (digits == 1)
			frac *= 10;
	}
	if (*s == '%')
		s++;
	if (*s)
		return -EINVAL;
	r.threshold_centi = whole * 100 + frac;
	if (r.threshold_centi > 10000)
		return -ERANGE;
	*t = r;
	return 0;
}

void cfg_list_choices(const char *const *choices, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; choices[i] && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", choices[i]);
}

/* The largest whole unit: 3600000 -> "1h", 1500 -> "1500ms". */
static void duration_format(uint64_t ms, char *buf, size_t len)
{
	if (ms && ms % (3600 * 1000) == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / (3600 * 1000)));
	else if (ms && ms % (60 * 1000) == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / (60 * 1000)));
	else if (ms && ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
}

static int check_range(const struct key_def *d, uint64_t v, const char *s, char *why, size_t len)
{
	char a[32], b[32];

	if (v >= d->min && (d->max == 0 || v <= d->max))
		return 0;
	if (d->kind == K_SIZE) {
		size_format(d->min, a, sizeof(a));
		size_format(d->max, b, sizeof(b));
	} else if (d->kind == K_DURATION) {
		duration_format(d->min, a, sizeof(a));
		duration_format(d->max, b, sizeof(b));
	} else {
		snprintf(a, sizeof(a), "%llu", (unsigned long long)d->min);
		snprintf(b, sizeof(b), "%llu", (unsigned long long)d->max);
	}
	if (d->max == 0)
		snprintf(why, len, "'%s' is below the minimum of %s", s, a);
	else
		snprintf(why, len, "'%s' is out of range (%s to %s)", s, a, b);
	return -EINVAL;
}

/* Converts one scalar into its field.  0, -EINVAL with WHY, or -ENOMEM. */
int cfg_convert(const struct key_def *d, const char *s, void *base, char *why, size_t len)
{
	uint64_t v;
	int r;

	switch (d->kind) {
	case K_PATH:
		if (s[0] != '/') {
			snprintf(why, len, "'%s' is not an absolute path", s);
			return -EINVAL;
		}
		/* fall through */
	case K_STR: {
		char *dup;
		if (d->check && !d->check(s, why, len))
			return -EINVAL;
		dup = strdup(s);
		if (!dup)
			return -ENOMEM;
		free(*AT(base, d->off, char *));
		*AT(base, d->off, char *) = dup;
		return 0;
	}
	case K_BOOL:
		if (streq(s, "true") || streq(s, "True") || streq(s, "TRUE"))
			*AT(base, d->off, bool) = true;
		else if (streq(s, "false") || streq(s, "False") || streq(s, "FALSE"))
			*AT(base, d->off, bool) = false;
		else {
			snprintf(why, len, "expected true or false, not '%s'", s);
			return -EINVAL;
		}
		return 0;
	case K_SIZE:
		r = size_parse(s, &v);
		if (r == -ERANGE) {
			snprintf(why, len, "'%s' is too large", s);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, len, "'%s' is not a size (%sbytes, or a number with K, M, G or T)",
				 s, s[0] == '-' ? "sizes cannot be negative; " : "");
			return -EINVAL;
		}
		if (check_range(d, v, s, why, len) < 0)
			return -EINVAL;
		*AT(base, d->off, uint64_t) = v;
		return 0;
	case K_DURATION:
		r = duration_parse_ms(s, &v);
		if (r == -ERANGE) {
			snprintf(why, len, "'%s' is too long", s);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, len, "'%s' is not a duration (a number with ms, s, m or h; "
				 "plain numbers are seconds)", s);
			return -EINVAL;
		}
		if (check_range(d, v, s, why, len) < 0)
			return -EINVAL;
		*AT(base, d->off, uint64_t) = v;
		return 0;
	case K_UINT:
	case K_MS:
		r = cfg_parse_u64(s, &v);
		if (r == -ERANGE) {
			snprintf(why, len, "'%s' is too large", s);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, len, "'%s' is not a %s", s,
				 d->kind == K_MS ? "number of milliseconds" : "non-negative whole number");
			return -EINVAL;
		}
		if (check_range(d, v, s, why, len) < 0)
			return -EINVAL;
		if (d->kind == K_UINT)
			*AT(base, d->off, unsigned) = (unsigned)v;
		else
			*AT(base, d->off, uint64_t) = v;
		return 0;
	case K_ENUM:
		for (int i = 0; d->choices[i]; i++)
			if (streq(s, d->choices[i])) {
				*AT(base, d->off, int) = i + d->choice_base;
				return 0;
			}
		if (d->alias && d->alias(s) >= 0) {
			*AT(base, d->off, int) = d->alias(s) + d->choice_base;
			return 0;
		}
		{
			char all[160];
			const char *lower = NULL;

			cfg_list_choices(d->choices, all, sizeof(all));
			for (int i = 0; d->choices[i]; i++)
				if (strcasecmp(s, d->choices[i]) == 0)
					lower = d->choices[i];
			if (lower)
				snprintf(why, len, "'%s' is not one of %s (write it in lowercase: '%s')", s, all, lower);
			else
				snprintf(why, len, "'%s' is not one of %s", s, all);
		}
		return -EINVAL;
	case K_PSI: {
		struct mg_psi_trigger t;
		r = parse_psi(s, &t);
		if (r < 0) {
			snprintf(why, len, "'%s' is not a pressure trigger (\"some|full avg10|avg60|avg300 "
				 "%c PERCENT\", e.g. \"some avg10%c20\")", s, d->psi_op, d->psi_op);
			return -EINVAL;
		}
		if ((d->psi_op == '>') != t.above) {
			snprintf(why, len, "'%s' must compare with '%c'", s, d->psi_op);
			return -EINVAL;
		}
		*AT(base, d->off, struct mg_psi_trigger) = t;
		return 0;
	}
	default:
		snprintf(why, len, "internal error: not a scalar key");
		return -EINVAL;
	}
}

int cfg_apply_defaults(const struct key_def *defs, void *base)
{
	char why[256];

	for (const struct key_def *d = defs; d->name; d++) {
		int r = 0;
		if (d->kind == K_SECTION)
			r = cfg_apply_defaults(d->sub, base);
		else if (d->dflt)
			r = cfg_convert(d, d->dflt, base, why, sizeof(why));
		if (r < 0)
			return r == -ENOMEM ? r : -EINVAL; /* -EINVAL: a bad default is a bug */
	}
	return 0;
}
