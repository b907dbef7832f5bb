/* SPDX-License-Identifier: MIT */
/* The checks of memgrant.yaml that need several keys, after the walk. */
#include "config/internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <yaml.h>

#include "lib/size.h"
#include "lib/util.h"

/* ---------------------------------------------------------------- whole-config checks */

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static void check_ids(struct ctx *c, uint64_t nblocks, const char *path)
{
	yaml_node_t *n = cfg_node(c, cfg_where(c, path));

	if (!n || n->type != YAML_SEQUENCE_NODE)
		return;
	/* walk the items again rather than the parsed list: each message can
	 * then point at its own item */
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *item = cfg_node(c, *it);
		uint64_t v;

		if (item->type != YAML_SCALAR_NODE ||
		    cfg_parse_u64((const char *)item->data.scalar.value, &v) < 0)
			continue; /* reported by the walk */
		if (v >= nblocks)
			cfg_err_at(c, *it, "%s: block %llu does not exist (the sim has blocks 0 to %llu)",
			       path, (unsigned long long)v,
			       (unsigned long long)(nblocks ? nblocks - 1 : 0));
	}
}

static void check_url_scheme(struct ctx *c, const char *url, bool insecure, const char *path,
			     const char *insecure_path)
{
	if (cfg_url_scheme_is(url, "https"))
		return;
	if (cfg_url_scheme_is(url, "http")) {
		if (!insecure)
			cfg_err_at(c, cfg_where(c, path),
			       "%s: '%s' is plain http; use https:// or set %s: true", path, url,
			       insecure_path);
		return;
	}
	cfg_err_at(c, cfg_where(c, path), "%s: '%s' must start with https://", path, url);
}

static void finish_sim(struct ctx *c, struct mg_config *cfg)
{
	const struct mg_sim_config *s = &cfg->backend.sim;
	char bs[32];
	uint64_t nblocks;

	if (s->online == 0)
		cfg_err_at(c, cfg_where(c, "backend.sim.online"),
		       "backend.sim.online: a machine needs some online memory");
	if (cfg_bad(c, "backend.sim.block_size"))
		return; /* every check below depends on it */
	size_format(s->block_size, bs, sizeof(bs));
	if (!is_pow2(s->block_size) || s->block_size < MIB) {
		cfg_err_at(c, cfg_where(c, "backend.sim.block_size"),
		       "backend.sim.block_size: %s is not a power of two of at least 1M", bs);
		return; /* the multiple checks below would only repeat it */
	}
	if (s->online % s->block_size)
		cfg_err_at(c, cfg_where(c, "backend.sim.online"),
		       "backend.sim.online: not a multiple of the block size %s", bs);
	if (s->standby % s->block_size)
		cfg_err_at(c, cfg_where(c, "backend.sim.standby"),
		       "backend.sim.standby: not a multiple of the block size %s", bs);
	if (s->used > s->online)
		cfg_err_at(c, cfg_where(c, "backend.sim.used"),
		       "backend.sim.used: more than the online memory");
	nblocks = (s->online + s->standby) / s->block_size;
	check_ids(c, nblocks, "backend.sim.faults.configure_eio");
	check_ids(c, nblocks, "backend.sim.faults.offline_ebusy");
	if (cfg->pressure.enabled && cfg->pressure.step % s->block_size)
		cfg_err_at(c, cfg_where(c, "pressure.step"),
		       "pressure.step: not a multiple of the sim's block size %s", bs);
}

void cfg_finish(struct ctx *c, struct mg_config *cfg)
{
	struct sockaddr_un sa;

	if (strlen(cfg->agent.api_socket) >= sizeof(sa.sun_path))
		cfg_err_at(c, cfg_where(c, "agent.api_socket"),
		       "agent.api_socket: longer than the %zu bytes a socket path may have",
		       sizeof(sa.sun_path) - 1);

	/* a backend.type with a message of its own ("Sim") is not judged against
	 * the sim section as well: one problem, one message */
	if (cfg_bad(c, "backend.type")) {
		; /* reported */
	} else if (cfg->backend.type == MG_BACKEND_SIM) {
		if (!cfg->backend.sim.present)
			cfg_err_at(c, cfg_where(c, "backend.type"),
			       "backend.type is sim but there is no backend.sim section");
		if (cfg_seen_get(c, "backend.root"))
			cfg_err_at(c, cfg_where_key(c, "backend.root"),
			       "backend.root does not apply to the sim backend (it reads "
			       "backend.sim.tree)");
	} else if (cfg->backend.sim.present) {
		cfg_err_at(c, cfg_where_key(c, "backend.sim"),
		       "backend.sim is only used with backend.type: sim (type is %s)",
		       mg_backend_type_name(cfg->backend.type));
	}
	if (cfg->backend.sim.present && !cfg_bad(c, "backend.type"))
		finish_sim(c, cfg);

	if (cfg->providers.https.enabled) {
		const struct mg_https_config *h = &cfg->providers.https;
		if (h->url)
			check_url_scheme(c, h->url, h->insecure_http, "providers.https.url",
					 "providers.https.insecure_http");
		if (h->key_file && !h->cert_file)
			cfg_err_at(c, cfg_where_key(c, "providers.https.key_file"),
			       "providers.https.key_file needs providers.https.cert_file");
	}

	for (size_t i = 0; i < cfg->n_hooks; i++) {
		const struct mg_hook *h = &cfg->hooks[i];
		char p[64], q[96], r[96];
		int at;

		snprintf(p, sizeof(p), "hooks[%zu]", i);
		at = cfg_where(c, p);
		if (cfg_node(c, at) && cfg_node(c, at)->type != YAML_MAPPING_NODE)
			continue; /* already reported */
		snprintf(q, sizeof(q), "%s.exec", p);
		snprintf(r, sizeof(r), "%s.webhook", p);
		if (!cfg_seen_get(c, q) && !cfg_seen_get(c, r))
			cfg_err_at(c, at, "%s: needs exec or webhook", p);
		if (h->exec && h->webhook)
			cfg_err_at(c, at, "%s: has both exec and webhook; one hook does one of them", p);
		snprintf(q, sizeof(q), "%s.events", p);
		if (h->n_events == 0 && cfg_node(c, cfg_where(c, q))) {
			yaml_node_t *ev = cfg_node(c, cfg_where(c, q));
			if (cfg_is_null(ev) || (ev->type == YAML_SEQUENCE_NODE &&
					    ev->data.sequence.items.top == ev->data.sequence.items.start))
				cfg_err_at(c, cfg_where(c, q), "%s: names no event", q);
		}
		if (h->webhook) {
			snprintf(q, sizeof(q), "%s.webhook", p);
			snprintf(r, sizeof(r), "%s.insecure_http", p);
			check_url_scheme(c, h->webhook, h->insecure_http, q, r);
		} else {
			snprintf(q, sizeof(q), "%s.secret_file", p);
			if (h->secret_file)
				cfg_err_at(c, cfg_where_key(c, q), "%s: only used with webhook", q);
			snprintf(q, sizeof(q), "%s.insecure_http", p);
			if (cfg_seen_get(c, q))
				cfg_err_at(c, cfg_where_key(c, q), "%s: only used with webhook", q);
		}
	}

	if (cfg->pressure.enabled && cfg->pressure.request_above.set &&
	    cfg->pressure.release_below.set) {
		const struct mg_psi_trigger *a = &cfg->pressure.request_above;
		const struct mg_psi_trigger *b = &cfg->pressure.release_below;
		if (a->kind == b->kind && a->window_s == b->window_s &&
		    b->threshold_centi >= a->threshold_centi)
			cfg_err_at(c, cfg_where(c, "pressure.release_below"),
			       "pressure.release_below: must be below request_above on the same "
			       "average, or memory would be requested and released at once");
	}
}
