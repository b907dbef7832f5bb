/* SPDX-License-Identifier: MIT */
#include "providers/https_wire.h"
#include "lib/wire/message.h"
#include "lib/json.h"
#include "lib/util.h"

#include <jansson.h>


/* ID of message G as far as it is printable, for the log. */
static void entry_id(json_t *g, char *out, size_t outlen)
{
	const char *id = json_string_value(json_object_get(g, "id"));
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; id && id[i] && o + 1 < outlen; i++) {
		unsigned char ch = (unsigned char)id[i];
		out[o++] = ch > ' ' && ch < 0x7f ? (char)ch : '?';
	}
	out[o] = '\0';
}

/* 0 with *GEN when G's generation is usable, else -ERANGE/-EINVAL with WHY. */
static int entry_generation(json_t *g, uint64_t *gen, char *why, size_t whylen)
{
	json_t *v = json_object_get(g, "generation");

	if (!json_is_object(g))
		return errbuf_set(why, whylen, -EINVAL, "not a JSON object");
	if (!v)
		return errbuf_set(why, whylen, -EINVAL, "no generation");
	if (!json_is_integer(v))
		return errbuf_set(why, whylen, -EINVAL, "generation is not an integer");
	if (json_integer_value(v) < 1)
		return errbuf_set(why, whylen, -ERANGE, "generation %lld is below 1",
				  (long long)json_integer_value(v));
	if ((uint64_t)json_integer_value(v) > MSG_GENERATION_MAX)
		return errbuf_set(why, whylen, -ERANGE, "generation %lld is above 2^53",
				  (long long)json_integer_value(v));
	*gen = (uint64_t)json_integer_value(v);
	return 0;
}

static int by_generation(const void *a, const void *b)
{
	const struct https_entry *x = a, *y = b;

	if (x->generation != y->generation)
		return x->generation < y->generation ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

void https_batch_free(struct https_batch *b)
{
	for (size_t i = 0; i < b->n_entries; i++)
		json_decref(b->entries[i].obj);
	free(b->entries);
	free(b->skips);
	*b = (struct https_batch){ 0 };
}

int https_parse_grants(const char *body, size_t len, struct https_batch *b, char *why, size_t whylen)
{
	_cleanup_json_ json_t *j = NULL;
	json_error_t jerr;
	json_t *grants, *g;
	size_t i, n;

	*b = (struct https_batch){ 0 };
	j = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return errbuf_set(why, whylen, -EBADMSG, "answer is not JSON (%s at line %d, column %d)", jerr.text,
				  jerr.line, jerr.column);
	grants = json_object_get(j, "grants");
	if (!json_is_object(j) || !json_is_array(grants))
		return errbuf_set(why, whylen, -EBADMSG, "answer is not {\"grants\": [...]}");
	n = json_array_size(grants);
	b->entries = calloc(n ? n : 1, sizeof(*b->entries));
	b->skips = calloc(HTTPS_SKIPS_SHOWN, sizeof(*b->skips));
	if (!b->entries || !b->skips) {
		https_batch_free(b);
		return errbuf_set(why, whylen, -ENOMEM, "out of memory for %zu messages", n);
	}
	json_array_foreach(grants, i, g) {
		struct https_skip sk = { .index = i };
		uint64_t gen = 0;

		if (entry_generation(g, &gen, sk.why, sizeof(sk.why)) < 0) {
			entry_id(g, sk.id, sizeof(sk.id));
			if (b->n_skips_shown < HTTPS_SKIPS_SHOWN)
				b->skips[b->n_skips_shown++] = sk;
			b->n_skips++;
			continue;
		}
		b->entries[b->n_entries].index = i;
		b->entries[b->n_entries].generation = gen;
		entry_id(g, b->entries[b->n_entries].id, sizeof(b->entries[b->n_entries].id));
		b->n_entries++;
	}
	/* the lowest generations first: what is deferred comes with the next poll */
	qsort(b->entries, b->n_entries, sizeof(*b->entries), by_generation);
	if (b->n_entries > HTTPS_BATCH_MAX) {
		b->n_deferred = b->n_entries - HTTPS_BATCH_MAX;
		b->n_entries = HTTPS_BATCH_MAX;
	}
	for (i = 0; i < b->n_entries; i++) {
		b->entries[i].obj = json_incref(json_array_get(grants, b->entries[i].index));
		b->max_taken = b->entries[i].generation;
	}
	return 0;
}

void https_server_message(const char *body, size_t len, char *out, size_t outlen)
{
	_cleanup_json_ json_t *j = NULL;
	const char *text = NULL;
	size_t o = 0, tlen;

	if (outlen == 0)
		return;
	out[0] = '\0';
	if (body && len)
		j = json_loadb(body, len, 0, NULL);
	if (j) {
		json_t *e = json_object_get(j, "error");
		json_t *m = json_object_get(json_is_object(e) ? e : j, "message");
		if (json_is_string(m))
			text = json_string_value(m);
	}
	tlen = text ? strlen(text) : 0;
	if (!text) {
		text = body ? body : "";
		tlen = body ? len : 0;
	}
	for (size_t i = 0; i < tlen && text[i] && o + 2 < outlen && i < 200; i++) {
		unsigned char ch = (unsigned char)text[i];
		out[o++] = ch >= ' ' && ch < 0x7f ? (char)ch : ' ';
	}
	out[o] = '\0';
	if (!out[0])
		snprintf(out, outlen, "(no message)");
}

bool https_ack_body_ok(const char *body, size_t len)
{
	_cleanup_json_ json_t *j = NULL;
	size_t i = 0;

	while (body && i < len && body[i] && strchr(" \t\r\n", body[i]))
		i++;
	if (!body || i == len)
		return true;
	j = json_loadb(body, len, 0, NULL);
	return json_is_object(j);
}
