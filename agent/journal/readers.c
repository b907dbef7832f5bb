/* SPDX-License-Identifier: MIT */
/*
 * The intent log's readers (agent/journal/intentlog.h, "reading"): memory
 * only, from the live tree and the finished operations kept out of it
 * (history.c), in the order they were accepted.
 */
#include "agent/journal/intentlog_impl.h"
#include "lib/wire/report_json.h"
#include "lib/util.h"

uint64_t intentlog_last_generation(struct intentlog *il, const char *source)
{
	return ilog_u64_of(json_object_get(il->root, "sources"), source);
}

static int grant_fill(const json_t *g, struct intentlog_grant *out)
{
	const json_t *status = json_object_get(g, "status");

	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", ilog_str_of(g, "id"));
	snprintf(out->source, sizeof(out->source), "%s", ilog_str_of(g, "source"));
	out->type = streq(ilog_str_of(g, "type"), "revoke") ? MSG_REVOKE : MSG_GRANT;
	out->generation = ilog_u64_of(g, "generation");
	(void)msg_state_parse(ilog_str_of(g, "state"), &out->state);
	(void)msg_time_parse(ilog_str_of(g, "created"), &out->created);
	(void)msg_time_parse(ilog_str_of(g, "updated"), &out->updated);
	out->n_blocks = json_array_size(json_object_get(g, "blocks"));
	out->applied_bytes = ilog_u64_of(g, "applied_bytes");
	out->request = json_deep_copy(json_object_get(g, "request"));
	/* the kept report never changes: shared, decoded by intentlog_grant_report() */
	out->status = json_is_object(status) ? json_incref((json_t *)status) : NULL;
	if (!out->request || (json_is_object(status) && !out->status)) {
		intentlog_grant_done(out);
		return -ENOMEM;
	}
	return 0;
}

void intentlog_grant_done(struct intentlog_grant *g)
{
	if (!g)
		return;
	json_decref(g->request);
	json_decref(g->status);
	g->request = g->status = NULL;
}

int intentlog_lookup_generation(struct intentlog *il, const char *source, uint64_t generation,
				struct intentlog_grant *recorded)
{
	json_t *g;
	size_t i;
	int r;

	if (!msg_id_valid(source))
		return -EINVAL;
	if (generation > intentlog_last_generation(il, source))
		return ILOG_GEN_NEW;
	json_array_foreach(json_object_get(il->root, "grants"), i, g) {
		if (streq(ilog_str_of(g, "source"), source) && ilog_u64_of(g, "generation") == generation) {
			r = recorded ? grant_fill(g, recorded) : 0;
			return r < 0 ? r : ILOG_GEN_REPLAY;
		}
	}
	for (i = 0; i < il->history.n; i++) {
		const struct ilog_past *p = &il->history.v[i];
		_cleanup_json_ json_t *old = NULL;

		if (!streq(p->source, source) || p->generation != generation)
			continue;
		if (!recorded)
			return ILOG_GEN_REPLAY;
		old = ilog_history_get(&il->history, i);
		r = old ? grant_fill(old, recorded) : -ENOMEM;
		return r < 0 ? r : ILOG_GEN_REPLAY;
	}
	return ILOG_GEN_STALE;
}

int intentlog_get_grant(struct intentlog *il, const char *id, struct intentlog_grant *out)
{
	_cleanup_json_ json_t *g = ilog_grant_ref(il->root, &il->history, id);

	return g ? grant_fill(g, out) : -ENOENT;
}

void intentlog_grants_free(struct intentlog_grant *g, size_t n)
{
	for (size_t i = 0; g && i < n; i++)
		intentlog_grant_done(&g[i]);
	free(g);
}

int intentlog_list_grants(struct intentlog *il, struct intentlog_grant **out, size_t *n)
{
	_cleanup_json_ json_t *all = ilog_history_merged(il->root, &il->history);
	json_t *grants = json_object_get(all, "grants"), *g;
	size_t count = json_array_size(grants), i;
	struct intentlog_grant *list = all ? calloc(count ? count : 1, sizeof(*list)) : NULL;

	if (!list)
		return -ENOMEM;
	json_array_foreach(grants, i, g) {
		int r = grant_fill(g, &list[i]);
		if (r < 0) {
			intentlog_grants_free(list, i);
			return r;
		}
	}
	*out = list;
	*n = count;
	return 0;
}

json_t *intentlog_state_json(struct intentlog *il)
{
	_cleanup_json_ json_t *all = ilog_history_merged(il->root, &il->history);

	return all ? json_deep_copy(all) : NULL;
}

static void block_fill(const json_t *g, const json_t *b, struct intentlog_block *out)
{
	memset(out, 0, sizeof(*out));
	out->block = ilog_u64_of(b, "block");
	out->seq = ilog_u64_of(b, "seq");
	(void)ilog_zone_parse(ilog_str_of(b, "zone"), &out->zone);
	out->memmap = json_is_true(json_object_get(b, "memmap"));
	snprintf(out->grant_id, sizeof(out->grant_id), "%s", ilog_str_of(g, "id"));
}

int intentlog_find_owned_block(struct intentlog *il, uint64_t block, struct intentlog_block *out)
{
	size_t k;
	json_t *g = ilog_owner_of(il, block, &k);

	if (!g)
		return -ENOENT;
	if (out)
		block_fill(g, json_array_get(json_object_get(g, "blocks"), k), out);
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct intentlog_block *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int intentlog_owned_blocks(struct intentlog *il, struct intentlog_block **out, size_t *n)
{
	json_t *grants = json_object_get(il->root, "grants"), *g, *b;
	struct intentlog_block *list;
	size_t count = 0, i, k;

	json_array_foreach(grants, i, g)
		count += json_array_size(json_object_get(g, "blocks"));
	list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	count = 0;
	json_array_foreach(grants, i, g)
		json_array_foreach(json_object_get(g, "blocks"), k, b)
			block_fill(g, b, &list[count++]);
	qsort(list, count, sizeof(*list), by_seq);
	*out = list;
	*n = count;
	return 0;
}

void intentlog_intents_free(struct intentlog_intent *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].blocks);
	free(v);
}

int intentlog_open_intents(struct intentlog *il, struct intentlog_intent **out, size_t *n)
{
	json_t *intents = json_object_get(il->root, "intents"), *it, *b;
	size_t count = json_array_size(intents), i, k;
	struct intentlog_intent *v = calloc(count ? count : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	json_array_foreach(intents, i, it) {
		json_t *blocks = json_object_get(it, "blocks");
		snprintf(v[i].op, sizeof(v[i].op), "%s", ilog_str_of(it, "op"));
		v[i].dir = streq(ilog_str_of(it, "dir"), "up") ? ILOG_UP : ILOG_DOWN;
		(void)msg_time_parse(ilog_str_of(it, "started"), &v[i].started);
		v[i].blocks = calloc(json_array_size(blocks) + 1, sizeof(*v[i].blocks));
		if (!v[i].blocks) {
			intentlog_intents_free(v, i);
			return -ENOMEM;
		}
		json_array_foreach(blocks, k, b)
			(void)ilog_target_from_json(b, &v[i].blocks[k]);
		v[i].n_blocks = json_array_size(blocks);
	}
	*out = v;
	*n = count;
	return 0;
}

int intentlog_outbox_peek(struct intentlog *il, const char *dest, uint64_t *seq, json_t **report)
{
	json_t *items = json_object_get(json_object_get(json_object_get(il->root, "outbox"), dest), "items");
	json_t *first = json_array_get(items, 0);

	if (!first)
		return -ENOENT;
	if (report) {
		/* the caller's own copy: the kept one is shared with the grant's record */
		_cleanup_json_ json_t *wire = report_runs_expand(json_object_get(first, "report"));

		*report = wire ? json_deep_copy(wire) : NULL;
		if (!*report)
			return -ENOMEM;
	}
	if (seq)
		*seq = ilog_u64_of(first, "seq");
	return 0;
}

int intentlog_grant_report(const struct intentlog_grant *g, struct report *out)
{
	_cleanup_json_ json_t *wire = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (!g->status)
		return -ENOENT;
	wire = report_runs_expand(g->status);
	if (!wire)
		return -ENOMEM;
	r = report_from_json(wire, out);
	if (r == 0 && !out->id[0])
		snprintf(out->id, sizeof(out->id), "%s", g->id);
	return r;
}

int intentlog_outbox_peek_text(struct intentlog *il, const char *dest, uint64_t *seq, char **doc)
{
	json_t *report = NULL;
	int r = intentlog_outbox_peek(il, dest, seq, doc ? &report : NULL);

	if (r < 0 || !doc)
		return r;
	*doc = json_dumps(report, JSON_COMPACT);
	json_decref(report);
	return *doc ? 0 : -ENOMEM;
}

size_t intentlog_outbox_count(struct intentlog *il, const char *dest)
{
	return json_array_size(json_object_get(json_object_get(json_object_get(il->root, "outbox"), dest), "items"));
}

