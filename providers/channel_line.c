/* SPDX-License-Identifier: MIT */
/*
 * What one line from the host is (see channel.h; the framing is
 * lib/wire/lines.c).  Apart from channel.c so that it builds alone for the unit
 * test and tests/fuzz/fuzz_channel.c.
 */
#include "providers/channel.h"
#include "lib/wire/message.h"
#include "lib/util.h"

#include <jansson.h>

void channel_parse_line(const char *line, size_t len, struct channel_line *out)
{
	json_error_t jerr;
	json_t *obj, *v;
	const char *type, *id, *key;

	*out = (struct channel_line){ .kind = CHANNEL_LINE_BAD };
	if (len == 0) {
		out->kind = CHANNEL_LINE_EMPTY;
		return;
	}
	obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!obj || !json_is_object(obj)) {
		snprintf(out->code, sizeof(out->code), "EBADMSG");
		if (obj)
			snprintf(out->message, sizeof(out->message), "message: not a JSON object");
		else
			snprintf(out->message, sizeof(out->message), "message: not valid JSON at column %d: %.100s",
				 jerr.column, jerr.text);
		json_decref(obj);
		return;
	}
	type = json_string_value(json_object_get(obj, "type"));
	id = json_string_value(json_object_get(obj, "id"));
	if (id && msg_id_valid(id))
		snprintf(out->id, sizeof(out->id), "%s", id);
	if (type && strlen(type) < sizeof(out->type))
		snprintf(out->type, sizeof(out->type), "%s", type);

	if (streq(type, "ack")) {
		json_t *seqv = json_object_get(obj, "seq");
		out->id[0] = '\0'; /* errors about an ack name no grant */
		snprintf(out->code, sizeof(out->code), "EINVAL");
		json_object_foreach(obj, key, v) {
			if (!streq(key, "type") && !streq(key, "seq") && !startswith(key, "x-")) {
				snprintf(out->message, sizeof(out->message), "field \"%.40s\": unknown field for an ack", key);
				json_decref(obj);
				return;
			}
		}
		if (!json_is_integer(seqv) || json_integer_value(seqv) < 1) {
			snprintf(out->message, sizeof(out->message),
				 "field \"seq\": an ack needs the positive integer seq of a status");
			json_decref(obj);
			return;
		}
		out->code[0] = '\0';
		out->kind = CHANNEL_LINE_ACK;
		out->seq = (uint64_t)json_integer_value(seqv);
	} else if (streq(type, "query")) {
		out->kind = CHANNEL_LINE_QUERY;
	} else if (type && !streq(type, "grant") && !streq(type, "revoke") && !streq(type, "sync")) {
		snprintf(out->code, sizeof(out->code), "EINVAL");
		snprintf(out->message, sizeof(out->message),
			 "field \"type\": \"%.40s\" is not a channel message (expected grant, revoke, sync, ack or query)",
			 type);
	} else {
		struct msg_error err = { 0 };

		out->kind = CHANNEL_LINE_MESSAGE; /* the engine judges the rest */
		if (msg_from_json(obj, &out->msg, &err) < 0) {
			snprintf(out->code, sizeof(out->code), "%s", err.code[0] ? err.code : "EINVAL");
			snprintf(out->message, sizeof(out->message), "%s", err.message);
		}
	}
	json_decref(obj);
}
