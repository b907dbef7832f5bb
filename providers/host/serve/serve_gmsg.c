/* SPDX-License-Identifier: MIT */
/*
 * One line from a guest's channel into a typed message.  The guest is not
 * trusted: the line is parsed with jansson (duplicates refused, at most
 * GMSG_LINE_MAX bytes), every field is checked for type and range, and
 * anything else makes the line GMSG_BAD with a one-line reason.  Only the
 * fields the service acts on are taken; a status report's block list is
 * never walked.
 */
#include <stdio.h>
#include <string.h>

#include "lib/util.h"
#include "providers/host/serve/serve.h"

/* An integer field: absent -> 0 (ok unless REQUIRED); present must be 0..2^53. */
static int get_u53(json_t *o, const char *key, bool required, uint64_t *out, char *why, size_t len)
{
	json_t *v = json_object_get(o, key);

	*out = 0;
	if (!v || json_is_null(v)) {
		if (required) {
			snprintf(why, len, "field \"%s\" missing", key);
			return -EINVAL;
		}
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > MSG_GENERATION_MAX) {
		snprintf(why, len, "field \"%s\" is not an integer from 0 to 2^53", key);
		return -EINVAL;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_id(json_t *o, const char *key, bool required, char *out, char *why, size_t len)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_string_value(v);

	out[0] = '\0';
	if (!v || json_is_null(v)) {
		if (required) {
			snprintf(why, len, "field \"%s\" missing", key);
			return -EINVAL;
		}
		return 0;
	}
	if (!s || !msg_id_valid(s)) {
		snprintf(why, len, "field \"%s\" is not an id (1 to 63 of A-Z a-z 0-9 . _ : -)", key);
		return -EINVAL;
	}
	snprintf(out, MSG_ID_MAX + 1, "%s", s);
	return 0;
}

static int parse_status(json_t *o, struct gmsg *m, char *why, size_t len)
{
	const char *state = json_string_value(json_object_get(o, "state"));

	if (get_id(o, "id", true, m->id, why, len) < 0 || get_u53(o, "generation", true, &m->generation, why, len) < 0 ||
	    get_u53(o, "requested_bytes", false, &m->requested, why, len) < 0 ||
	    get_u53(o, "applied_bytes", false, &m->applied, why, len) < 0)
		return -EINVAL;
	if (!state || msg_state_parse(state, &m->state) < 0) {
		snprintf(why, len, "field \"state\" is not a state");
		return -EINVAL;
	}
	return 0;
}

static int parse_agent_status(json_t *o, struct gmsg *m, char *why, size_t len)
{
	json_t *mem = json_object_get(o, "memory");

	if (!json_is_object(mem)) {
		snprintf(why, len, "field \"memory\" is not an object");
		return -EINVAL;
	}
	if (get_u53(mem, "block_size", false, &m->block_size, why, len) < 0 ||
	    get_u53(mem, "online_bytes", false, &m->online, why, len) < 0 ||
	    get_u53(mem, "standby_bytes", false, &m->standby, why, len) < 0 ||
	    get_u53(mem, "granted_bytes", false, &m->granted, why, len) < 0 ||
	    get_u53(mem, "mem_total_bytes", false, &m->mem_total, why, len) < 0 ||
	    get_u53(mem, "mem_available_bytes", false, &m->mem_available, why, len) < 0)
		return -EINVAL;
	m->have_mem_available = json_is_integer(json_object_get(mem, "mem_available_bytes")) &&
				json_is_integer(json_object_get(mem, "mem_total_bytes")) &&
				m->mem_available <= m->mem_total;
	if (m->block_size && (m->block_size & (m->block_size - 1))) {
		snprintf(why, len, "field \"memory.block_size\" is not a power of two");
		return -EINVAL;
	}
	return 0;
}

void gmsg_parse(const char *line, size_t len, struct gmsg *m, char *why, size_t why_len)
{
	json_error_t jerr;
	json_t *o;
	const char *type;
	int r = 0;

	*m = (struct gmsg){ .kind = GMSG_BAD };
	if (why_len)
		why[0] = '\0';
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (len == 0) {
		m->kind = GMSG_EMPTY;
		return;
	}
	if (len > GMSG_LINE_MAX) {
		snprintf(why, why_len, "line of %zu bytes, the limit is %u", len, GMSG_LINE_MAX);
		return;
	}
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o) {
		snprintf(why, why_len, "not JSON: %s", jerr.text);
		return;
	}
	type = json_string_value(json_object_get(o, "type"));
	if (!json_is_object(o) || !type) {
		snprintf(why, why_len, "not an object with a string \"type\"");
		goto out;
	}
	if (get_u53(o, "seq", false, &m->seq, why, why_len) < 0)
		goto out;
	if (streq(type, "sync")) {
		m->kind = GMSG_SYNC;
		r = get_u53(o, "nonce", true, &m->nonce, why, why_len);
		if (r == 0)
			r = get_u53(o, "generation", false, &m->generation, why, why_len);
	} else if (streq(type, "status")) {
		m->kind = GMSG_STATUS;
		r = parse_status(o, m, why, why_len);
	} else if (streq(type, "request") || streq(type, "offer")) {
		m->kind = streq(type, "request") ? GMSG_REQUEST : GMSG_OFFER;
		r = get_id(o, "id", false, m->id, why, why_len);
		if (r == 0)
			r = get_u53(o, "bytes", true, &m->bytes, why, why_len);
		if (r == 0 && m->bytes == 0) {
			snprintf(why, why_len, "field \"bytes\" is 0");
			r = -EINVAL;
		}
		/* optional (older agents send none): what the guest measured */
		if (r == 0 && m->kind == GMSG_REQUEST) {
			m->have_deficit = json_object_get(o, "deficit_bytes") != NULL;
			r = get_u53(o, "deficit_bytes", false, &m->deficit, why, why_len);
			if (r == 0)
				r = get_u53(o, "alloc_bytes_per_s", false, &m->alloc_rate, why, why_len);
			if (r == 0)
				r = get_u53(o, "mem_available_bytes", false, &m->mem_available_req, why, why_len);
		}
	} else if (streq(type, "agent_status")) {
		m->kind = GMSG_AGENT_STATUS;
		r = parse_agent_status(o, m, why, why_len);
	} else if (streq(type, "error")) {
		const char *code = json_string_value(json_object_get(o, "code"));
		m->kind = GMSG_ERROR;
		snprintf(m->code, sizeof(m->code), "%s", code ? code : "?");
		r = get_id(o, "id", false, m->id, why, why_len);
		if (r < 0) { /* an error line about a line we cannot name is still an error line */
			m->id[0] = '\0';
			r = 0;
		}
	} else {
		m->kind = GMSG_OTHER;
	}
	if (r < 0) {
		char t[24];
		snprintf(t, sizeof(t), "%.20s", type);
		for (char *p = t; *p; p++)
			if (*p < 0x20 || *p > 0x7e || *p == '"')
				*p = '?';
		size_t n = strlen(why);
		if (n + 1 < why_len)
			snprintf(why + n, why_len - n, " (a \"%s\" line)", t);
		*m = (struct gmsg){ .kind = GMSG_BAD };
	}
out:
	json_decref(o);
}
