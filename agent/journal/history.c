/* SPDX-License-Identifier: MIT */
/*
 * The intent log's finished operations, kept out of the live tree: each one
 * its grant object as compact JSON text, the texts back to back in one
 * buffer, the entries in order of acceptance.  A finished operation as a
 * jansson tree was some 60 small chunks, allocated while an operation's
 * transient ones lay around them, each pinning a page: RSS grew by about
 * 100 kB per finished operation up to the history's bound
 * (docs/performance.md).  The logical state is unchanged: readers and
 * snapshots see the history where the tree had it, in the same order.
 */
#include "agent/journal/intentlog_impl.h"

#include "lib/util.h"

void ilog_history_free(struct ilog_history *h)
{
	free(h->v);
	free(h->text);
	*h = (struct ilog_history){ 0 };
}

ssize_t ilog_history_find(const struct ilog_history *h, const char *id)
{
	if (!h || !id)
		return -1;
	for (size_t i = 0; i < h->n; i++)
		if (streq(h->v[i].id, id))
			return (ssize_t)i;
	return -1;
}

json_t *ilog_history_get(const struct ilog_history *h, size_t i)
{
	if (i >= h->n)
		return NULL;
	return json_loadb(h->text + h->v[i].off, h->v[i].len, 0, NULL);
}

/* Drops entry I; its text leaves the buffer, the ones after it move down. */
static void drop(struct ilog_history *h, size_t i)
{
	size_t off = h->v[i].off, len = h->v[i].len;

	memmove(h->text + off, h->text + off + len, h->used - off - len);
	h->used -= len;
	memmove(&h->v[i], &h->v[i + 1], (h->n - i - 1) * sizeof(*h->v));
	h->n--;
	for (size_t k = 0; k < h->n; k++)
		if (h->v[k].off > off)
			h->v[k].off -= (uint32_t)len;
}

/* Keeps grant G (finished, owning nothing) as text, in order. */
static int keep(struct ilog_history *h, const json_t *g)
{
	_cleanup_free_ char *text = json_dumps(g, JSON_COMPACT);
	uint64_t order = ilog_u64_of(g, "order");
	size_t len = text ? strlen(text) : 0, at;

	if (!text)
		return -ENOMEM;
	if (len > UINT32_MAX || h->used + len > UINT32_MAX)
		return -E2BIG;
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct ilog_past *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	if (h->used + len > h->cap_text) {
		size_t cap = h->cap_text ? h->cap_text : 16384;
		char *t;

		while (cap < h->used + len)
			cap *= 2;
		t = realloc(h->text, cap);
		if (!t)
			return -ENOMEM;
		h->text = t;
		h->cap_text = cap;
	}
	/* a grant finishes after the ones accepted after it rarely: from the end */
	for (at = h->n; at > 0 && h->v[at - 1].order > order; at--)
		;
	memmove(&h->v[at + 1], &h->v[at], (h->n - at) * sizeof(*h->v));
	h->v[at] = (struct ilog_past){ .order = order, .generation = ilog_u64_of(g, "generation"),
				       .off = (uint32_t)h->used, .len = (uint32_t)len };
	snprintf(h->v[at].id, sizeof(h->v[at].id), "%s", ilog_str_of(g, "id"));
	snprintf(h->v[at].source, sizeof(h->v[at].source), "%s", ilog_str_of(g, "source"));
	memcpy(h->text + h->used, text, len);
	h->used += len;
	h->n++;
	return 0;
}

bool ilog_grant_retirable(json_t *root, const json_t *g)
{
	enum msg_state st;

	return msg_state_parse(ilog_str_of(g, "state"), &st) == 0 && msg_state_is_final(st) &&
	       json_array_size(json_object_get(g, "blocks")) == 0 && !ilog_find_intent(root, ilog_str_of(g, "id"), NULL);
}

void ilog_history_settle(struct ilog_history *h, json_t *root, unsigned history_max, bool revived, bool *moved)
{
	json_t *grants = json_object_get(root, "grants"), *g;
	size_t i;

	/* a record named a finished operation: the tree holds it again */
	for (i = h->n; revived && i-- > 0;)
		if (ilog_find_grant(root, h->v[i].id, NULL))
			drop(h, i);
	for (i = 0; i < json_array_size(grants);) {
		g = json_array_get(grants, i);
		/* a failed keep leaves it in the tree, where it is as good */
		if (!ilog_grant_retirable(root, g) || keep(h, g) < 0) {
			i++;
			continue;
		}
		json_array_remove(grants, i);
		*moved = true;
	}
	while (h->n > history_max)
		drop(h, 0);
}

json_t *ilog_history_revive(json_t *root, const struct ilog_history *h, const char *id, size_t *idx)
{
	json_t *grants = json_object_get(root, "grants"), *g;
	ssize_t k = ilog_history_find(h, id);
	size_t at;

	if (k < 0)
		return NULL;
	g = ilog_history_get(h, (size_t)k);
	if (!g)
		return NULL;
	for (at = json_array_size(grants); at > 0 && ilog_u64_of(json_array_get(grants, at - 1), "order") > h->v[k].order; at--)
		;
	if (json_array_insert_new(grants, at, g) < 0)
		return NULL;
	if (idx)
		*idx = at;
	return g;
}

json_t *ilog_grant_find_or_revive(json_t *root, struct apply_ctx *c, const char *id, size_t *idx)
{
	json_t *g = ilog_find_grant(root, id, idx);

	if (g || !c->history)
		return g;
	g = ilog_history_revive(root, c->history, id, idx);
	c->revived |= g != NULL;
	return g;
}

bool ilog_grant_known(json_t *root, const struct ilog_history *h, const char *id)
{
	return ilog_find_grant(root, id, NULL) || ilog_history_find(h, id) >= 0;
}

json_t *ilog_grant_ref(json_t *root, const struct ilog_history *h, const char *id)
{
	json_t *g = ilog_find_grant(root, id, NULL);
	ssize_t k;

	if (g)
		return json_incref(g);
	k = ilog_history_find(h, id);
	return k < 0 ? NULL : ilog_history_get(h, (size_t)k);
}

json_t *ilog_history_merged(json_t *root, const struct ilog_history *h)
{
	json_t *out = json_copy(root), *grants = json_object_get(root, "grants"), *all = json_array();
	size_t i = 0, k = 0, n = json_array_size(grants);

	if (!out || !all || json_object_set_new(out, "grants", all) < 0) {
		json_decref(out);
		return NULL;
	}
	while (i < n || k < h->n) {
		json_t *g = json_array_get(grants, i);

		if (k < h->n && (i == n || h->v[k].order < ilog_u64_of(g, "order"))) {
			g = ilog_history_get(h, k++);
			if (!g || json_array_append_new(all, g) < 0) {
				json_decref(out);
				return NULL;
			}
		} else {
			if (json_array_append(all, g) < 0) {
				json_decref(out);
				return NULL;
			}
			i++;
		}
	}
	return out;
}

char *ilog_history_state_text(json_t *root, const struct ilog_history *h)
{
	_cleanup_json_ json_t *rest = json_copy(root);
	_cleanup_free_ char *head = NULL, *buf = NULL;
	json_t *grants = json_object_get(root, "grants");
	size_t i = 0, k = 0, n = json_array_size(grants), len = 0, hl;
	bool first = true;
	FILE *f;

	/* the tree's members but the grants, then the grants merged in order:
	 * the kept texts are copied, not parsed again */
	if (!rest || json_object_del(rest, "grants") < 0 || !(head = json_dumps(rest, JSON_COMPACT)))
		return NULL;
	hl = strlen(head);
	if (hl < 2 || head[hl - 1] != '}')
		return NULL;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fprintf(f, "%.*s%s\"grants\":[", (int)(hl - 1), head, hl > 2 ? "," : "");
	while (i < n || k < h->n) {
		json_t *g = json_array_get(grants, i);

		if (!first)
			fputc(',', f);
		first = false;
		if (k < h->n && (i == n || h->v[k].order < ilog_u64_of(g, "order"))) {
			fwrite(h->text + h->v[k].off, 1, h->v[k].len, f);
			k++;
		} else {
			if (json_dumpf(g, f, JSON_COMPACT) < 0)
				break;
			i++;
		}
	}
	fputs("]}", f);
	if (fclose(f) != 0 || i < n || k < h->n)
		return NULL;
	return TAKE_PTR(buf);
}
