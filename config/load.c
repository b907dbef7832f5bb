/* SPDX-License-Identifier: MIT */
/*
 * Loading memgrant.yaml: libyaml builds the document tree (with a mark, that
 * is a line and column, on every node), the key tables (keys.c) drive the
 * walk over it, and cfg_finish() (validate.c) does the checks that need
 * several keys.
 */
#include "config/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "lib/fileio.h"
#include "lib/util.h"

/* ---------------------------------------------------------------- diagnostics */

static void diag_push(struct ctx *c, size_t line, size_t col, char *msg)
{
	struct pending *n;

	if (!msg) {
		c->oom = true;
		return;
	}
	c->n_errors++;
	if (!c->diag || c->n_errors > MAX_DIAG) {
		free(msg);
		return;
	}
	n = realloc(c->pend, (c->n_pend + 1) * sizeof(*n));
	if (!n) {
		free(msg);
		c->oom = true;
		return;
	}
	c->pend = n;
	c->pend[c->n_pend] = (struct pending){ line, col, c->n_pend, msg };
	c->n_pend++;
}

static int pending_cmp(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands the messages to the caller in file order (those without a
 * position first), whatever order the checks found them in. */
static void diag_flush(struct ctx *c)
{
	char **n;
	size_t i;

	if (c->n_errors > MAX_DIAG) {
		char *m = NULL;
		if (asprintf(&m, "%s: %zu more errors not shown", c->name, c->n_errors - MAX_DIAG) >= 0) {
			struct pending *p = realloc(c->pend, (c->n_pend + 1) * sizeof(*p));
			if (p) {
				c->pend = p;
				c->pend[c->n_pend++] = (struct pending){ SIZE_MAX, SIZE_MAX, SIZE_MAX, m };
			} else {
				free(m);
			}
		}
	}
	if (c->n_pend)
		qsort(c->pend, c->n_pend, sizeof(*c->pend), pending_cmp);
	n = c->diag && c->n_pend ? realloc(c->diag->msgs, (c->diag->n + c->n_pend) * sizeof(*n)) : NULL;
	for (i = 0; i < c->n_pend; i++) {
		if (n)
			n[c->diag->n++] = c->pend[i].msg;
		else
			free(c->pend[i].msg);
	}
	if (n)
		c->diag->msgs = n;
	free(c->pend);
	c->pend = NULL;
	c->n_pend = 0;
}

static void diag_vadd(struct ctx *c, size_t line, size_t col, bool has_pos, const char *prefix,
		      const char *fmt, va_list ap)
{
	_cleanup_free_ char *text = NULL;
	char *msg = NULL;

	if (vasprintf(&text, fmt, ap) < 0) {
		c->oom = true;
		return;
	}
	if (prefix) {
		if (asprintf(&msg, "%s: %s: %s", c->name, prefix, text) < 0)
			msg = NULL;
	} else if (has_pos) {
		if (asprintf(&msg, "%s:%zu:%zu: %s", c->name, line, col, text) < 0)
			msg = NULL;
	} else if (asprintf(&msg, "%s: %s", c->name, text) < 0) {
		msg = NULL;
	}
	diag_push(c, line, col, msg);
}

yaml_node_t *cfg_node(struct ctx *c, int idx)
{
	return idx > 0 ? yaml_document_get_node(&c->doc, idx) : NULL;
}

static const char *override_text(struct ctx *c, int idx)
{
	if (c->first_override_node <= 0 || idx < c->first_override_node)
		return NULL;
	if ((size_t)(idx - c->first_override_node) >= c->n_override_of)
		return NULL;
	return c->override_of[idx - c->first_override_node];
}

/* An error at node IDX (0: no position). */
__attribute__((format(printf, 3, 4)))
void cfg_err_at(struct ctx *c, int idx, const char *fmt, ...)
{
	yaml_node_t *n = cfg_node(c, idx);
	const char *ov = override_text(c, idx);
	_cleanup_free_ char *prefix = NULL;
	va_list ap;

	if (idx > 0) {
		for (size_t i = 0; i < c->n_bad; i++)
			if (c->bad[i] == idx && c->in_finish)
				return;
		if (!c->in_finish) {
			int *b = realloc(c->bad, (c->n_bad + 1) * sizeof(*b));
			if (!b) {
				c->oom = true;
				return;
			}
			c->bad = b;
			c->bad[c->n_bad++] = idx;
		}
	}
	if (ov && asprintf(&prefix, "override '%s'", ov) < 0) {
		c->oom = true;
		return;
	}
	va_start(ap, fmt);
	diag_vadd(c, n ? n->start_mark.line + 1 : 0, n ? n->start_mark.column + 1 : 0, n != NULL,
		  prefix, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 4, 5)))
static void err_mark(struct ctx *c, size_t line0, size_t col0, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vadd(c, line0 + 1, col0 + 1, true, NULL, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 3)))
static void err_plain(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vadd(c, 0, 0, false, NULL, fmt, ap);
	va_end(ap);
}

static void remember(struct ctx *c, const char *path, int key, int value)
{
	struct seen *n = realloc(c->seen, (c->n_seen + 1) * sizeof(*n));
	char *p = strdup(path);

	if (!n || !p) {
		free(p);
		if (n)
			c->seen = n;
		c->oom = true;
		return;
	}
	c->seen = n;
	c->seen[c->n_seen++] = (struct seen){ p, key, value };
}

const struct seen *cfg_seen_get(struct ctx *c, const char *path)
{
	for (size_t i = 0; i < c->n_seen; i++)
		if (streq(c->seen[i].path, path))
			return &c->seen[i];
	return NULL;
}

/* Value node of PATH as given in the file, else 0 (a message without position). */
int cfg_where(struct ctx *c, const char *path)
{
	const struct seen *s = cfg_seen_get(c, path);
	return s ? s->value : 0;
}

/* PATH was given and its value already has a message. */
bool cfg_bad(struct ctx *c, const char *path)
{
	int idx = cfg_where(c, path);

	for (size_t i = 0; idx && i < c->n_bad; i++)
		if (c->bad[i] == idx)
			return true;
	return false;
}

int cfg_where_key(struct ctx *c, const char *path)
{
	const struct seen *s = cfg_seen_get(c, path);
	return s ? (s->key ? s->key : s->value) : 0;
}

/* ---------------------------------------------------------------- walking the tree */

bool cfg_is_null(const yaml_node_t *n)
{
	const char *v;

	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	v = (const char *)n->data.scalar.value;
	return streq(v, "") || streq(v, "~") || streq(v, "null") || streq(v, "Null") ||
	       streq(v, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return cfg_is_null(n) ? "nothing" : "a single value";
	}
}

static const char *kind_wants(const struct key_def *d)
{
	switch (d->kind) {
	case K_STR:
		return "a string";
	case K_PATH:
		return "an absolute path";
	case K_BOOL:
		return "true or false";
	case K_SIZE:
		return "a size such as 256M";
	case K_DURATION:
		return "a duration such as 30s";
	case K_UINT:
	case K_MS:
		return "a number";
	case K_ENUM:
		return "one word of a fixed set";
	case K_PSI:
		return "a pressure trigger such as \"some avg10>20\"";
	case K_IDS:
		return "a list of block ids";
	case K_STRLIST:
		return "a list of strings";
	case K_SECTION:
		return "a section (a mapping of keys)";
	case K_HOOKS:
		return "a list of hooks";
	}
	return "?";
}

/* Scalar text, or NULL (with an error) when the node has a NUL inside. */
static const char *scalar_text(struct ctx *c, int idx, const char *path)
{
	yaml_node_t *n = cfg_node(c, idx);
	const char *v = (const char *)n->data.scalar.value;

	if (strlen(v) != n->data.scalar.length) {
		cfg_err_at(c, idx, "%s: contains a NUL character", path);
		return NULL;
	}
	return v;
}

/* Edit distance between A and B (insert, delete, replace, swap two
 * neighbours), capped at 32 characters each: key names are short. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strnlen(a, 32), lb = strnlen(b, 32), d[33][33];

	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

/* The key of DEFS nearest to NAME, NULL when none is near enough to be a
 * typing error (at most one edit in three characters). */
static const char *nearest_key(const struct key_def *defs, const char *name)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (const struct key_def *d = defs; d->name; d++) {
		size_t dist = edit_distance(name, d->name), longer = strlen(name);

		if (strlen(d->name) > longer)
			longer = strlen(d->name);
		if (dist * 3 <= longer && dist < best_d) {
			best = d->name;
			best_d = dist;
		}
	}
	return best;
}

static void walk_section(struct ctx *c, int idx, const struct key_def *defs, void *base,
			 const char *path);

static void walk_scalar(struct ctx *c, const struct key_def *d, int idx, void *base,
			const char *path)
{
	yaml_node_t *n = cfg_node(c, idx);
	char why[512];
	const char *s;
	int r;

	if (n->type != YAML_SCALAR_NODE || cfg_is_null(n)) {
		if (d->kind == K_ENUM) {
			char all[160];
			cfg_list_choices(d->choices, all, sizeof(all));
			cfg_err_at(c, idx, "%s: expected one of %s, found %s", path, all, node_kind(n));
		} else {
			cfg_err_at(c, idx, "%s: expected %s, found %s", path, kind_wants(d), node_kind(n));
		}
		return;
	}
	s = scalar_text(c, idx, path);
	if (!s)
		return;
	r = cfg_convert(d, s, base, why, sizeof(why));
	if (r == -ENOMEM)
		c->oom = true;
	else if (r < 0)
		cfg_err_at(c, idx, "%s: %s", path, why);
}

static void walk_ids(struct ctx *c, const struct key_def *d, int idx, void *base,
		     const char *path)
{
	yaml_node_t *n = cfg_node(c, idx);
	struct mg_id_list *l = AT(base, d->off, struct mg_id_list);
	yaml_node_item_t *it;
	size_t cap;

	if (cfg_is_null(n))
		return;
	if (n->type != YAML_SEQUENCE_NODE) {
		cfg_err_at(c, idx, "%s: expected %s such as [3, 4], found %s", path, kind_wants(d),
		       node_kind(n));
		return;
	}
	cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	free(l->ids);
	l->n = 0;
	l->ids = calloc(cap ? cap : 1, sizeof(*l->ids));
	if (!l->ids) {
		c->oom = true;
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *item = cfg_node(c, *it);
		const char *s;
		uint64_t v;

		if (item->type != YAML_SCALAR_NODE || cfg_is_null(item)) {
			cfg_err_at(c, *it, "%s: expected a block id, found %s", path, node_kind(item));
			continue;
		}
		s = scalar_text(c, *it, path);
		if (!s)
			continue;
		if (cfg_parse_u64(s, &v) == -ERANGE) {
			cfg_err_at(c, *it, "%s: '%s' is too large for a block id", path, s);
			continue;
		}
		if (cfg_parse_u64(s, &v) < 0) {
			cfg_err_at(c, *it, "%s: '%s' is not a block id (a non-negative whole number)",
			       path, s);
			continue;
		}
		l->ids[l->n++] = v;
	}
}

static void walk_strlist(struct ctx *c, const struct key_def *d, int idx, void *base,
			 const char *path)
{
	yaml_node_t *n = cfg_node(c, idx);
	char ***v = AT(base, d->off, char **);
	size_t *count = AT(base, d->count_off, size_t);
	yaml_node_item_t *it;
	size_t cap;

	if (cfg_is_null(n))
		return;
	if (n->type != YAML_SEQUENCE_NODE) {
		cfg_err_at(c, idx, "%s: expected %s such as [grant.applied], found %s", path,
		       kind_wants(d), node_kind(n));
		return;
	}
	cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	cfg_free_strlist(*v, *count);
	*count = 0;
	*v = calloc(cap ? cap : 1, sizeof(**v));
	if (!*v) {
		c->oom = true;
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *item = cfg_node(c, *it);
		char why[512];
		const char *s;

		if (item->type != YAML_SCALAR_NODE || cfg_is_null(item)) {
			cfg_err_at(c, *it, "%s: expected a string, found %s", path, node_kind(item));
			continue;
		}
		s = scalar_text(c, *it, path);
		if (!s)
			continue;
		if (d->check && !d->check(s, why, sizeof(why))) {
			cfg_err_at(c, *it, "%s: %s", path, why);
			continue;
		}
		(*v)[*count] = strdup(s);
		if (!(*v)[*count]) {
			c->oom = true;
			return;
		}
		(*count)++;
	}
}

static void walk_hooks(struct ctx *c, const struct key_def *d, int idx, struct mg_config *cfg,
		       const char *path)
{
	yaml_node_t *n = cfg_node(c, idx);
	yaml_node_item_t *it;
	size_t cap;

	if (cfg_is_null(n))
		return;
	if (n->type != YAML_SEQUENCE_NODE) {
		cfg_err_at(c, idx, "%s: expected a list of hooks (- {events: [...], exec: PATH}), found %s",
		       path, node_kind(n));
		return;
	}
	cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	cfg->hooks = calloc(cap ? cap : 1, sizeof(*cfg->hooks));
	if (!cfg->hooks) {
		c->oom = true;
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		struct mg_hook *h = &cfg->hooks[cfg->n_hooks++];
		_cleanup_free_ char *p = NULL;
		int r;

		if (asprintf(&p, "%s[%zu]", path, cfg->n_hooks - 1) < 0) {
			c->oom = true;
			return;
		}
		r = cfg_apply_defaults(d->sub, h);
		if (r < 0) {
			c->oom = true;
			return;
		}
		remember(c, p, 0, *it);
		if (cfg_node(c, *it)->type != YAML_MAPPING_NODE) {
			cfg_err_at(c, *it, "%s: expected a hook (a mapping with events and exec or webhook), "
			       "found %s", p, node_kind(cfg_node(c, *it)));
			continue;
		}
		walk_section(c, *it, d->sub, h, p);
	}
}

static void walk_value(struct ctx *c, const struct key_def *d, int idx, void *base,
		       const char *path)
{
	switch (d->kind) {
	case K_SECTION:
		if (d->has_present)
			*AT(base, d->present_off, bool) = true;
		walk_section(c, idx, d->sub, base, path);
		break;
	case K_HOOKS:
		walk_hooks(c, d, idx, base, path);
		break;
	case K_IDS:
		walk_ids(c, d, idx, base, path);
		break;
	case K_STRLIST:
		walk_strlist(c, d, idx, base, path);
		break;
	default:
		walk_scalar(c, d, idx, base, path);
		break;
	}
}

static void valid_keys(const struct key_def *defs, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (const struct key_def *d = defs; d->name && used < len; d++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", d == defs ? "" : ", ", d->name);
}

static void walk_section(struct ctx *c, int idx, const struct key_def *defs, void *base,
			 const char *path)
{
	yaml_node_t *n = cfg_node(c, idx);
	size_t ndefs = 0;

	while (defs[ndefs].name)
		ndefs++;
	bool given[ndefs ? ndefs : 1];
	memset(given, 0, sizeof(given));

	if (n && cfg_is_null(n)) {
		n = NULL; /* "section:" with everything commented out: all defaults */
	} else if (n && n->type != YAML_MAPPING_NODE) {
		char keys[512];
		valid_keys(defs, keys, sizeof(keys));
		cfg_err_at(c, idx, "%s%sexpected a section with the keys %s, found %s", path,
		       *path ? ": " : "", keys, node_kind(n));
		return;
	}

	for (yaml_node_pair_t *p = n ? n->data.mapping.pairs.start : NULL;
	     n && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = cfg_node(c, p->key);
		const struct key_def *d = NULL;
		_cleanup_free_ char *sub = NULL;
		const char *name;
		size_t i;

		if (k->type != YAML_SCALAR_NODE || cfg_is_null(k)) {
			cfg_err_at(c, p->key, "%s%skeys must be words, found %s", path, *path ? ": " : "",
			       node_kind(k));
			continue;
		}
		name = scalar_text(c, p->key, path);
		if (!name)
			continue;
		for (i = 0; i < ndefs; i++)
			if (streq(defs[i].name, name)) {
				d = &defs[i];
				break;
			}
		if (!d) {
			const char *near = nearest_key(defs, name);
			char keys[512];

			valid_keys(defs, keys, sizeof(keys));
			cfg_err_at(c, p->key, "%s%sunknown key '%s'%s%s%s (valid keys: %s)", path, *path ? ": " : "",
				   name, near ? ": did you mean '" : "", near ? near : "", near ? "'?" : "", keys);
			continue;
		}
		if (asprintf(&sub, "%s%s%s", path, *path ? "." : "", name) < 0) {
			c->oom = true;
			return;
		}
		if (given[i]) {
			yaml_node_t *first = cfg_node(c, cfg_where_key(c, sub));
			if (first)
				cfg_err_at(c, p->key, "duplicate key %s (first given at %zu:%zu)", sub,
				       first->start_mark.line + 1, first->start_mark.column + 1);
			else
				cfg_err_at(c, p->key, "duplicate key %s", sub);
			continue;
		}
		given[i] = true;
		remember(c, sub, p->key, p->value);
		walk_value(c, d, p->value, base, sub);
	}

	for (size_t i = 0; i < ndefs; i++)
		if (defs[i].required && !given[i])
			cfg_err_at(c, idx, "%s: missing required key '%s'", path, defs[i].name);
}

/* ---------------------------------------------------------------- overrides */

static int add_override_node(struct ctx *c, int nidx, const char *text)
{
	const char **n;
	size_t slot;

	if (c->first_override_node <= 0)
		c->first_override_node = nidx;
	slot = (size_t)(nidx - c->first_override_node);
	if (slot >= c->n_override_of) {
		n = realloc(c->override_of, (slot + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (size_t i = c->n_override_of; i <= slot; i++)
			n[i] = NULL;
		c->override_of = n;
		c->n_override_of = slot + 1;
	}
	c->override_of[slot] = text;
	return 0;
}

static int new_scalar(struct ctx *c, const char *value, size_t len, const char *text)
{
	int idx = yaml_document_add_scalar(&c->doc, NULL, (yaml_char_t *)value, (int)len,
					   YAML_PLAIN_SCALAR_STYLE);
	if (!idx || add_override_node(c, idx, text) < 0)
		return -ENOMEM;
	return idx;
}

static int new_mapping(struct ctx *c, const char *text)
{
	int idx = yaml_document_add_mapping(&c->doc, NULL, YAML_BLOCK_MAPPING_STYLE);
	if (!idx || add_override_node(c, idx, text) < 0)
		return -ENOMEM;
	return idx;
}

/* Finds KEY in mapping MAP: the pair's index, or -1. */
static int find_pair(struct ctx *c, int map, const char *key, size_t keylen)
{
	yaml_node_t *m = cfg_node(c, map);

	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = cfg_node(c, p->key);
		if (k->type == YAML_SCALAR_NODE && k->data.scalar.length == keylen &&
		    memcmp(k->data.scalar.value, key, keylen) == 0)
			return (int)(p - m->data.mapping.pairs.start);
	}
	return -1;
}

/* "section.key=value": sets a scalar in the tree, making sections on the way.
 * Type and key checks then happen in the walk, like for the file. */
static int apply_override(struct ctx *c, int map, const char *text)
{
	const char *eq = strchr(text, '='), *seg = text, *dot;
	int v;

	if (!eq || !memchr(text, '.', (size_t)(eq - text)) || text[0] == '.' || eq[-1] == '.' ||
	    (strstr(text, "..") && strstr(text, "..") < eq)) {
		err_plain(c, "override '%s': expected section.key=value", text);
		return 0;
	}
	while ((dot = memchr(seg, '.', (size_t)(eq - seg)))) {
		int pi = find_pair(c, map, seg, (size_t)(dot - seg)), sub;
		yaml_node_t *m = cfg_node(c, map);

		if (pi >= 0) {
			sub = m->data.mapping.pairs.start[pi].value;
			if (cfg_is_null(cfg_node(c, sub))) {
				int nm = new_mapping(c, text);
				if (nm < 0)
					return nm;
				cfg_node(c, map)->data.mapping.pairs.start[pi].value = nm;
				sub = nm;
			} else if (cfg_node(c, sub)->type != YAML_MAPPING_NODE) {
				err_plain(c, "override '%s': '%.*s' is not a section", text,
					  (int)(dot - text), text);
				return 0;
			}
		} else {
			int k = new_scalar(c, seg, (size_t)(dot - seg), text);
			if (k < 0)
				return k;
			sub = new_mapping(c, text);
			if (sub < 0 || !yaml_document_append_mapping_pair(&c->doc, map, k, sub))
				return -ENOMEM;
		}
		map = sub;
		seg = dot + 1;
	}
	v = new_scalar(c, eq + 1, strlen(eq + 1), text);
	if (v < 0)
		return v;
	{
		int pi = find_pair(c, map, seg, (size_t)(eq - seg));
		if (pi >= 0) {
			cfg_node(c, map)->data.mapping.pairs.start[pi].value = v;
		} else {
			int k = new_scalar(c, seg, (size_t)(eq - seg), text);
			if (k < 0 || !yaml_document_append_mapping_pair(&c->doc, map, k, v))
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- loading */

static int machine_id(char **out)
{
	_cleanup_free_ char *buf = NULL;
	char why[128];
	size_t len = 0;
	int r;

	r = file_read_all(MACHINE_ID_PATH, 4096, &buf, &len);
	if (r >= 0) {
		while (len && isspace((unsigned char)buf[len - 1]))
			buf[--len] = '\0';
		if (len && cfg_check_agent_id(buf, why, sizeof(why))) {
			*out = TAKE_PTR(buf);
			return 0;
		}
	}
	*out = strdup("unknown");
	return *out ? 0 : -ENOMEM;
}

/* Line and column of byte OFFSET, for reader errors that come without a mark. */
static void offset_pos(const char *buf, size_t len, size_t offset, size_t *line, size_t *col)
{
	*line = 0;
	*col = 0;
	for (size_t i = 0; i < offset && i < len; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 0;
		} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

static void syntax_error(struct ctx *c, yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "unknown problem";

	if (p->error == YAML_MEMORY_ERROR) {
		c->oom = true;
	} else if (p->error == YAML_READER_ERROR) {
		size_t line, col;
		offset_pos(c->buf, c->len, p->problem_offset, &line, &col);
		err_mark(c, line, col, "YAML syntax error: %s (byte 0x%02x)", problem,
			 (unsigned)p->problem_value & 0xff);
	} else if (p->context) {
		err_mark(c, p->problem_mark.line, p->problem_mark.column,
			 "YAML syntax error: %s %s (started at %zu:%zu)", problem, p->context,
			 p->context_mark.line + 1, p->context_mark.column + 1);
	} else {
		err_mark(c, p->problem_mark.line, p->problem_mark.column, "YAML syntax error: %s",
			 problem);
	}
}

/* Parses the buffer into c->doc: exactly one document (or none). */
static void parse(struct ctx *c)
{
	yaml_parser_t p;
	yaml_document_t extra;

	if (!yaml_parser_initialize(&p)) {
		c->oom = true;
		return;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)c->buf, c->len);
	if (!yaml_parser_load(&p, &c->doc)) {
		syntax_error(c, &p);
		yaml_parser_delete(&p);
		return;
	}
	c->have_doc = true;
	if (yaml_document_get_root_node(&c->doc)) {
		if (!yaml_parser_load(&p, &extra)) {
			syntax_error(c, &p);
		} else {
			yaml_node_t *r2 = yaml_document_get_root_node(&extra);
			if (r2 && !cfg_is_null(r2)) /* a trailing "---" is harmless */
				err_mark(c, extra.start_mark.line, extra.start_mark.column,
					 "a second YAML document; the configuration is one document");
			yaml_document_delete(&extra);
		}
	}
	yaml_parser_delete(&p);
}

static void ctx_done(struct ctx *c)
{
	diag_flush(c);
	if (c->have_doc)
		yaml_document_delete(&c->doc);
	for (size_t i = 0; i < c->n_seen; i++)
		free(c->seen[i].path);
	free(c->seen);
	free(c->override_of);
	free(c->bad);
}

static int load_buffer(const char *name, const char *buf, size_t len, const char *const *overrides,
		       unsigned flags, struct mg_config **out, struct config_diag *diag)
{
	struct ctx c = { .name = name ? name : "<config>", .buf = buf, .len = len, .diag = diag, .flags = flags };
	_cleanup_config_ struct mg_config *cfg = NULL;
	size_t n_syntax;
	int r;

	*out = NULL;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	cfg->source = strdup(c.name);
	if (!cfg->source)
		return -ENOMEM;
	r = cfg_apply_defaults(cfg_root_keys, cfg);
	if (r < 0)
		return r;

	parse(&c);
	n_syntax = c.n_errors;
	if (c.have_doc && n_syntax == 0 && !c.oom) {
		yaml_node_t *root = yaml_document_get_root_node(&c.doc);
		/* an empty document ("---" alone, only comments) is all defaults */
		int ridx = root && !cfg_is_null(root) ? (int)(root - c.doc.nodes.start) + 1 : 0;

		if (overrides && *overrides && ridx == 0) {
			ridx = new_mapping(&c, overrides[0]);
			if (ridx < 0) {
				c.oom = true;
				ridx = 0;
			}
		}
		/* overrides need a mapping to go into; otherwise the walk says
		 * what is wrong with the file */
		for (const char *const *o = overrides;
		     o && *o && !c.oom && ridx && cfg_node(&c, ridx)->type == YAML_MAPPING_NODE; o++)
			if (apply_override(&c, ridx, *o) < 0)
				c.oom = true;
		if (ridx && cfg_node(&c, ridx)->type != YAML_MAPPING_NODE)
			cfg_err_at(&c, ridx, "expected the sections agent, backend, policy, providers, "
			       "hooks, pressure; found %s", node_kind(cfg_node(&c, ridx)));
		else if (ridx)
			walk_section(&c, ridx, cfg_root_keys, cfg, "");
	}
	if (c.have_doc && !c.oom && n_syntax == 0) {
		/* the tree was walked: check the whole, even after errors in parts */
		if (!cfg->agent.id && machine_id(&cfg->agent.id) < 0)
			c.oom = true;
		else {
			c.in_finish = true;
			cfg_finish(&c, cfg);
			/* only a configuration that is valid in itself is looked up on disk */
			if ((c.flags & CONFIG_CHECK_RUNTIME) && c.n_errors == 0 && !c.oom)
				cfg_check_runtime(&c, cfg);
		}
	}
	ctx_done(&c);
	if (c.oom) {
		if (diag) {
			char *m = NULL;
			if (asprintf(&m, "%s: out of memory", c.name) >= 0) {
				char **n = realloc(diag->msgs, (diag->n + 1) * sizeof(*n));
				if (n) {
					diag->msgs = n;
					diag->msgs[diag->n++] = m;
				} else {
					free(m);
				}
			}
		}
		return -ENOMEM;
	}
	if (c.n_errors)
		return -EINVAL;
	*out = TAKE_PTR(cfg);
	return 0;
}

int config_load_buffer(const char *name, const char *buf, size_t len,
		       const char *const *overrides, struct mg_config **out,
		       struct config_diag *diag)
{
	return load_buffer(name, buf, len, overrides, 0, out, diag);
}

int config_load(const char *path, const char *const *overrides, struct mg_config **out,
		struct config_diag *diag)
{
	return config_load_flags(path, overrides, 0, out, diag);
}

int config_load_flags(const char *path, const char *const *overrides, unsigned flags,
		      struct mg_config **out, struct config_diag *diag)
{
	struct ctx c = { .name = path, .diag = diag };
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	r = file_read_all(path, MG_CONFIG_MAX_BYTES, &buf, &len);
	if (r == -EFBIG) {
		err_plain(&c, "larger than %d bytes; not a memgrant configuration",
			  MG_CONFIG_MAX_BYTES);
		ctx_done(&c);
		return -EINVAL;
	}
	if (r < 0) {
		err_plain(&c, "cannot read: %s (%s)", strerror(-r), errno_name(-r));
		ctx_done(&c);
		return r;
	}
	return load_buffer(path, buf, len, overrides, flags, out, diag);
}
