/* SPDX-License-Identifier: MIT */
#include "providers/api_parse.h"
#include "lib/util.h"

#include <jansson.h>

int api_parse_seq(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s || strlen(s) > 20)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		unsigned d;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int api_body_append(struct api_body *b, const char *piece, size_t n, size_t limit)
{
	char *nb;

	if (b->too_large || n == 0)
		return 0;
	if (n > limit || b->len > limit - n) {
		b->too_large = true;
		free(b->data);
		b->data = NULL;
		b->len = 0;
		return 0;
	}
	nb = realloc(b->data, b->len + n + 1);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + b->len, piece, n);
	b->len += n;
	nb[b->len] = '\0';
	b->data = nb;
	return 0;
}

void api_body_free(struct api_body *b)
{
	free(b->data);
	*b = (struct api_body){ 0 };
}

bool api_state_is_terminal(const char *state)
{
	return streq(state, "applied") || streq(state, "partial") || streq(state, "failed") ||
	       streq(state, "rejected") || streq(state, "cancelled");
}

int api_parse_flag(const char *s)
{
	static const char *const yes[] = { "", "1", "true", "yes", "on" }, *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
		if (streq(s, yes[i]))
			return 1;
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		if (streq(s, no[i]))
			return 0;
	return -EINVAL;
}

/* An SSE event name must not break the line framing: [A-Za-z0-9._-] only. */
static bool good_name(const char *s)
{
	if (!s || !*s || strlen(s) >= sizeof(((struct api_event_view *)0)->name))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

void api_event_view(const char *text, size_t len, const char *grant, struct api_event_view *v)
{
	json_t *j = text ? json_loadb(text, len, 0, NULL) : NULL;
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *name = streq(type, "event") ? json_string_value(json_object_get(j, "event")) : type;

	*v = (struct api_event_view){ 0 };
	snprintf(v->name, sizeof(v->name), "%s", good_name(name) ? name : "message");
	if (!grant) {
		v->wanted = true;
	} else if (json_is_object(j)) {
		v->wanted = streq(json_string_value(json_object_get(j, "id")), grant);
		v->terminal = v->wanted && streq(type, "status") &&
			      api_state_is_terminal(json_string_value(json_object_get(j, "state")));
	}
	json_decref(j);
}
