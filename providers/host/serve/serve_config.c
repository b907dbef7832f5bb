/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host serve's YAML (packaging: /etc/memgrant/memgrant-host.yaml;
 * docs/autoscaling.md lists every key).  Read with libyaml's document API;
 * strict: an unknown key, a wrong type or a bad value is an error naming the
 * file, the line and the key, and nothing is started.
 *
 *   connect: qemu:///system
 *   state_dir: /var/lib/memgrant-host
 *   events: /var/lib/memgrant-host/events.jsonl     ("-": stdout)
 *   metrics_file: /var/lib/memgrant-host/metrics.prom
 *   interval: 1s
 *   channel: libvirt                                 (or socket: the XML's bind path)
 *   host: {reserve: 2G, budget: 0}
 *   defaults: {max: 4G, step: 512M, ...}             (a policy, below)
 *   domains: {web-3: {max: 8G}, scratch: {ignore: true}}
 */
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "lib/size.h"
#include "lib/util.h"
#include "providers/host/host.h"
#include "providers/host/serve/serve.h"

static const char *const kind_names[] = {
	[HV_AUTO] = "auto", [HV_VIRTIO_MEM] = "virtio-mem", [HV_DIMM] = "dimm", [HV_STANDBY] = "standby",
};

const char *hv_kind_name(enum hv_kind k)
{
	return (unsigned)k < ARRAY_SIZE(kind_names) ? kind_names[k] : "?";
}

void serve_policy_defaults(struct serve_policy *p)
{
	*p = (struct serve_policy){
		.hypervisor = HV_AUTO,
		.min = 0,
		.max = 4ull << 30,
		.step = 512ull << 20,
		.shrink_step = 256ull << 20,
		.reserve = 256ull << 20,
		.dimm_size = 256ull << 20,
		.standby = 0,
		.grow_cooldown = 2000,
		.shrink_cooldown = 10000,
		.slack_after = 300000,
		.plug_deadline = 30000,
		.online_deadline = 60000,
		.unplug_deadline = 60000,
		.revoke_backoff = 30000,
		.revoke_backoff_max = 600000,
		.query_interval = 5000,
		.lines_per_s = 50,
		.zone = "movable",
		.memmap = "auto",
	};
}

/* where the host package installs the list of every key (docs/autoscaling.md) */
#define SERVE_DOC "/usr/share/doc/memgrant-host/autoscaling.md"

struct ld {
	yaml_document_t doc;
	const char *file;
	char *why;
	size_t why_len;
};

static int bad(struct ld *l, yaml_node_t *n, const char *key, const char *fmt, const char *val)
	__attribute__((format(printf, 4, 0)));
static int bad(struct ld *l, yaml_node_t *n, const char *key, const char *fmt, const char *val)
{
	char msg[256];

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(msg, sizeof(msg), fmt, val ? val : ""); /* every caller's FMT is a literal with one %s */
#pragma GCC diagnostic pop
	snprintf(l->why, l->why_len, "%s:%zu:%zu: %s: %s", l->file, n ? n->start_mark.line + 1 : 0,
		 n ? n->start_mark.column + 1 : 0, key, msg);
	return -EINVAL;
}

/* bad() with a format built from the allowed words (one %s, the value) */
static int bad_words(struct ld *l, yaml_node_t *n, const char *key, const char *fmt, const char *val)
{
	char msg[192];

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(msg, sizeof(msg), fmt, val ? val : "");
#pragma GCC diagnostic pop
	return bad(l, n, key, "%s (" SERVE_DOC ")", msg);
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int set_size(struct ld *l, yaml_node_t *n, const char *key, uint64_t *out)
{
	const char *s = scalar(n);

	if (!s || size_parse(s, out) < 0)
		return bad(l, n, key, "'%s' is not a size (such as 512M or 4G)", s);
	return 0;
}

static int set_dur(struct ld *l, yaml_node_t *n, const char *key, int64_t *out)
{
	const char *s = scalar(n);
	uint64_t ms;

	if (!s || duration_parse_ms(s, &ms) < 0 || ms > INT32_MAX)
		return bad(l, n, key, "'%s' is not a duration (such as 500ms, 30s or 5m)", s);
	*out = (int64_t)ms;
	return 0;
}

static int set_str(struct ld *l, yaml_node_t *n, const char *key, char **out)
{
	const char *s = scalar(n);

	if (!s || !*s)
		return bad(l, n, key, "expected a string%s", "");
	free(*out);
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static int set_bool(struct ld *l, yaml_node_t *n, const char *key, bool *out)
{
	const char *s = scalar(n);

	if (s && (streq(s, "true") || streq(s, "yes") || streq(s, "on")))
		*out = true;
	else if (s && (streq(s, "false") || streq(s, "no") || streq(s, "off")))
		*out = false;
	else
		return bad(l, n, key, "'%s' is not true or false", s);
	return 0;
}

static int set_word(struct ld *l, yaml_node_t *n, const char *key, const char *const *words, const char **out)
{
	const char *s = scalar(n);

	for (size_t i = 0; s && words[i]; i++)
		if (strcasecmp(s, words[i]) == 0) {
			*out = words[i];
			return 0;
		}
	{
		/* the words themselves, then the message with them */
		char fmt[160];
		size_t off = (size_t)snprintf(fmt, sizeof(fmt), "'%%s' is not one of");

		for (size_t i = 0; words[i] && off < sizeof(fmt); i++)
			off += (size_t)snprintf(fmt + off, sizeof(fmt) - off, "%s %s", i ? "," : "", words[i]);
		return bad_words(l, n, key, fmt, s);
	}
}

#define FOREACH_PAIR(l, map, p)                                                                          \
	for (yaml_node_pair_t *p = (map)->data.mapping.pairs.start; p < (map)->data.mapping.pairs.top; p++)

static int load_policy(struct ld *l, yaml_node_t *map, const char *where, struct serve_policy *p, bool *ignore)
{
	static const char *const zones[] = { "movable", "normal", "auto", NULL };
	static const char *const memmaps[] = { "auto", "on", "off", NULL };
	static const char *const hvs[] = { "auto", "virtio-mem", "dimm", "standby", NULL };
	static const char *const laws[] = { "memgrant", "mom", "naive", NULL };
	char key[192];
	int r = 0;

	if (!map || map->type != YAML_MAPPING_NODE)
		return bad(l, map, where, "expected a mapping%s", "");
	FOREACH_PAIR(l, map, pr) {
		yaml_node_t *kn = yaml_document_get_node(&l->doc, pr->key), *v = yaml_document_get_node(&l->doc, pr->value);
		const char *k = scalar(kn);
		uint64_t u;

		snprintf(key, sizeof(key), "%s.%s", where, k ? k : "?");
		if (!k)
			return bad(l, kn, where, "a key must be a string%s", "");
		if (streq(k, "min")) r = set_size(l, v, key, &p->min);
		else if (streq(k, "max")) r = set_size(l, v, key, &p->max);
		else if (streq(k, "step")) r = set_size(l, v, key, &p->step);
		else if (streq(k, "shrink_step")) r = set_size(l, v, key, &p->shrink_step);
		else if (streq(k, "reserve")) r = set_size(l, v, key, &p->reserve);
		else if (streq(k, "dimm_size")) r = set_size(l, v, key, &p->dimm_size);
		else if (streq(k, "standby")) r = set_size(l, v, key, &p->standby);
		else if (streq(k, "grow_cooldown")) r = set_dur(l, v, key, &p->grow_cooldown);
		else if (streq(k, "shrink_cooldown")) r = set_dur(l, v, key, &p->shrink_cooldown);
		else if (streq(k, "slack_after")) r = set_dur(l, v, key, &p->slack_after);
		else if (streq(k, "plug_deadline")) r = set_dur(l, v, key, &p->plug_deadline);
		else if (streq(k, "online_deadline")) r = set_dur(l, v, key, &p->online_deadline);
		else if (streq(k, "unplug_deadline")) r = set_dur(l, v, key, &p->unplug_deadline);
		else if (streq(k, "revoke_backoff")) r = set_dur(l, v, key, &p->revoke_backoff);
		else if (streq(k, "revoke_backoff_max")) r = set_dur(l, v, key, &p->revoke_backoff_max);
		else if (streq(k, "query_interval")) r = set_dur(l, v, key, &p->query_interval);
		else if (streq(k, "zone")) r = set_word(l, v, key, zones, &p->zone);
		else if (streq(k, "memmap")) r = set_word(l, v, key, memmaps, &p->memmap);
		else if (streq(k, "law")) {
			const char *w = NULL;
			r = set_word(l, v, key, laws, &w);
			for (size_t i = 0; r == 0 && laws[i]; i++)
				if (streq(w, laws[i]))
					p->law = (enum serve_law)i;
		} else if (streq(k, "hypervisor")) {
			const char *w = NULL;
			r = set_word(l, v, key, hvs, &w);
			for (size_t i = 0; r == 0 && i < ARRAY_SIZE(kind_names); i++)
				if (streq(w, kind_names[i]))
					p->hypervisor = (enum hv_kind)i;
		} else if (streq(k, "lines_per_s")) {
			const char *s = scalar(v);
			char *end;
			u = s ? strtoull(s, &end, 10) : 0;
			if (!s || *end || u == 0 || u > 100000)
				r = bad(l, v, key, "'%s' is not a number from 1 to 100000", s);
			else
				p->lines_per_s = (unsigned)u;
		} else if (streq(k, "ignore") && ignore) r = set_bool(l, v, key, ignore);
		else return bad(l, kn, key, "unknown key%s (every key: " SERVE_DOC ")", "");
		if (r < 0)
			return r;
	}
	if (p->min > p->max)
		return bad(l, map, where, "min is above max%s", "");
	if (!p->step || !p->shrink_step)
		return bad(l, map, where, "step and shrink_step must be above 0%s", "");
	if (p->hypervisor == HV_DIMM && !p->dimm_size)
		return bad(l, map, where, "hypervisor dimm needs a dimm_size%s", "");
	if (p->revoke_backoff_max < p->revoke_backoff)
		p->revoke_backoff_max = p->revoke_backoff;
	return 0;
}

static int load_root(struct ld *l, struct serve_config *c)
{
	yaml_node_t *root = yaml_document_get_root_node(&l->doc), *defaults = NULL, *domains = NULL;
	int r = 0;

	if (!root) /* an empty file: the defaults */
		return 0;
	if (root->type != YAML_MAPPING_NODE)
		return bad(l, root, "(top)", "expected a mapping%s", "");
	FOREACH_PAIR(l, root, pr) {
		yaml_node_t *kn = yaml_document_get_node(&l->doc, pr->key), *v = yaml_document_get_node(&l->doc, pr->value);
		const char *k = scalar(kn);

		if (!k)
			return bad(l, kn, "(top)", "a key must be a string%s", "");
		if (streq(k, "connect")) r = set_str(l, v, k, &c->connect);
		else if (streq(k, "state_dir")) r = set_str(l, v, k, &c->state_dir);
		else if (streq(k, "events")) r = set_str(l, v, k, &c->events);
		else if (streq(k, "metrics_file")) r = set_str(l, v, k, &c->metrics_file);
		else if (streq(k, "status_file")) r = set_str(l, v, k, &c->status_file);
		else if (streq(k, "interval")) r = set_dur(l, v, k, &c->interval);
		else if (streq(k, "dry_run")) r = set_bool(l, v, k, &c->dry_run);
		else if (streq(k, "channel")) {
			static const char *const chans[] = { "libvirt", "socket", NULL };
			const char *w = NULL;
			r = set_word(l, v, k, chans, &w);
			if (r == 0)
				c->channel = streq(w, "socket") ? SERVE_CHANNEL_SOCKET : SERVE_CHANNEL_LIBVIRT;
		}
		else if (streq(k, "host")) {
			if (!v || v->type != YAML_MAPPING_NODE)
				return bad(l, v, k, "expected a mapping%s", "");
			FOREACH_PAIR(l, v, hp) {
				yaml_node_t *hk = yaml_document_get_node(&l->doc, hp->key),
					    *hv = yaml_document_get_node(&l->doc, hp->value);
				const char *h = scalar(hk);
				if (h && streq(h, "reserve")) r = set_size(l, hv, "host.reserve", &c->host_reserve);
				else if (h && streq(h, "budget")) r = set_size(l, hv, "host.budget", &c->host_budget);
				else return bad(l, hk, "host", "unknown key '%s' (reserve, budget)", h);
				if (r < 0)
					return r;
			}
		} else if (streq(k, "defaults")) defaults = v;
		else if (streq(k, "domains")) domains = v;
		else return bad(l, kn, k, "unknown key%s (every key: " SERVE_DOC ")", "");
		if (r < 0)
			return r;
	}
	if (c->interval < 100)
		return bad(l, root, "interval", "at least 100ms%s", "");
	if (defaults && (r = load_policy(l, defaults, "defaults", &c->defaults, NULL)) < 0)
		return r;
	if (domains) {
		size_t n = domains->type == YAML_MAPPING_NODE
				   ? (size_t)(domains->data.mapping.pairs.top - domains->data.mapping.pairs.start) : 0;
		if (domains->type != YAML_MAPPING_NODE)
			return bad(l, domains, "domains", "expected a mapping of domain names%s", "");
		c->domains = calloc(n ? n : 1, sizeof(*c->domains));
		if (!c->domains)
			return -ENOMEM;
		FOREACH_PAIR(l, domains, dp) {
			yaml_node_t *kn = yaml_document_get_node(&l->doc, dp->key),
				    *v = yaml_document_get_node(&l->doc, dp->value);
			const char *name = scalar(kn);
			struct serve_domain_cfg *d = &c->domains[c->n_domains];
			char where[SERVE_NAME_MAX + 16];

			if (!name || !*name || strlen(name) >= SERVE_NAME_MAX)
				return bad(l, kn, "domains", "a domain name must be 1 to 127 bytes%s", "");
			d->name = strdup(name);
			if (!d->name)
				return -ENOMEM;
			c->n_domains++;
			d->p = c->defaults;
			snprintf(where, sizeof(where), "domains.%s", name);
			if ((r = load_policy(l, v, where, &d->p, &d->ignore)) < 0)
				return r;
		}
	}
	return 0;
}

int serve_config_load(const char *path, struct serve_config **out, char *why, size_t why_len)
{
	struct serve_config *c = calloc(1, sizeof(*c));
	struct ld l = { .file = path ? path : SERVE_CONFIG_DEFAULT, .why = why, .why_len = why_len };
	yaml_parser_t parser;
	FILE *f;
	int r = 0;

	if (!c)
		return -ENOMEM;
	c->interval = 1000;
	c->host_reserve = 1ull << 30;
	serve_policy_defaults(&c->defaults);
	f = fopen(l.file, "re");
	if (!f && errno == ENOENT && !path) {
		/* no file at the default path: the built-in defaults */
	} else if (!f) {
		r = -errno;
		snprintf(why, why_len, "%s: %s", l.file, strerror(errno));
	} else {
		yaml_parser_initialize(&parser);
		yaml_parser_set_input_file(&parser, f);
		if (!yaml_parser_load(&parser, &l.doc)) {
			snprintf(why, why_len, "%s:%zu: %s", l.file, parser.problem_mark.line + 1,
				 parser.problem ? parser.problem : "not YAML");
			r = -EINVAL;
		} else {
			r = load_root(&l, c);
			yaml_document_delete(&l.doc);
		}
		yaml_parser_delete(&parser);
		fclose(f);
	}
	if (r == 0 && !c->state_dir && !(c->state_dir = strdup(HOST_STATE_DIR_DEFAULT)))
		r = -ENOMEM;
	if (r == 0 && !c->status_file && asprintf(&c->status_file, "%s/serve-status.json", c->state_dir) < 0) {
		c->status_file = NULL;
		r = -ENOMEM;
	}
	if (r < 0) {
		serve_config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

void serve_config_free(struct serve_config *c)
{
	if (!c)
		return;
	free(c->connect);
	free(c->state_dir);
	free(c->events);
	free(c->metrics_file);
	free(c->status_file);
	for (size_t i = 0; i < c->n_domains; i++)
		free(c->domains[i].name);
	free(c->domains);
	free(c);
}

const struct serve_policy *serve_config_policy(const struct serve_config *c, const char *domain)
{
	for (size_t i = 0; i < c->n_domains; i++)
		if (streq(c->domains[i].name, domain))
			return c->domains[i].ignore ? NULL : &c->domains[i].p;
	return &c->defaults;
}
