/* SPDX-License-Identifier: MIT */
/*
 * What memgrant-host serve shows: the per-domain status object (the status
 * file, serve_views.c; `memgrant-host status` prints it), the
 * Prometheus text (metrics_file, for node_exporter's textfile collector or
 * any scraper that reads a file), and the status table.
 */
#include <stdio.h>
#include <string.h>

#include "lib/size.h"
#include "lib/util.h"
#include "providers/host/serve/serve.h"

json_t *serve_status_json(const struct ctl *c, const struct serve_config *cfg)
{
	json_t *doms = json_array(), *o;
	struct dom_view v;

	if (!doms)
		return NULL;
	for (size_t i = 0; ctl_view(c, i, &v) == 0; i++) {
		json_t *d = json_pack("{s:s,s:s,s:s,s:b,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "domain", v.name, "phase",
				      dom_phase_name(v.phase), "hypervisor", hv_kind_name(v.kind), "connected",
				      v.connected, "synced", v.synced, "granted_bytes", (json_int_t)v.granted,
				      "plugged_bytes", (json_int_t)v.plugged, "requested_bytes", (json_int_t)v.requested,
				      "plugged_unusable_bytes", (json_int_t)v.plugged_unusable, "request_bytes",
				      (json_int_t)v.request, "offer_bytes", (json_int_t)v.offer, "mem_total_bytes",
				      (json_int_t)v.mem_total, "mem_available_bytes", (json_int_t)v.mem_available);
		if (!d)
			continue;
		json_object_set_new(d, "counts",
				    json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "grows", (json_int_t)v.grows,
					      "shrinks", (json_int_t)v.shrinks, "plugs", (json_int_t)v.plugs, "unplugs",
					      (json_int_t)v.unplugs, "refused_floor", (json_int_t)v.refused_floor,
					      "failed_revokes", (json_int_t)v.failed_revokes, "not_onlined",
					      (json_int_t)v.not_onlined, "lines_bad",
					      (json_int_t)v.lines_bad, "reads_paused", (json_int_t)v.lines_dropped,
					      "requests", (json_int_t)v.requests, "requests_capped",
					      (json_int_t)v.requests_capped));
		json_object_set_new(d, "last_grow_ms", json_integer(v.last_grow_ms));
		json_object_set_new(d, "last_shrink_ms", json_integer(v.last_shrink_ms));
		json_object_set_new(d, "backoff_ms", json_integer(v.backoff_ms));
		json_object_set_new(d, "last_error", v.last_error ? json_string(v.last_error) : json_null());
		json_array_append_new(doms, d);
	}
	o = json_pack("{s:s,s:b,s:o}", "type", "serve_status", "dry_run", cfg->dry_run, "domains", doms);
	return o;
}

char *serve_metrics_text(const struct ctl *c)
{
	static const struct {
		const char *name, *help, *type;
		size_t off;
	} m[] = {
#define G(n, f, h) { "memgrant_host_" n, h, "gauge", offsetof(struct dom_view, f) }
#define C(n, f, h) { "memgrant_host_" n, h, "counter", offsetof(struct dom_view, f) }
		G("granted_bytes", granted, "Memory granted by the service and applied by the agent."),
		G("plugged_bytes", plugged, "Memory the domain's devices have plugged."),
		G("requested_bytes", requested, "Memory the service asked the devices for."),
		G("plugged_unusable_bytes", plugged_unusable, "Plugged memory the agent did not apply in time."),
		G("mem_available_bytes", mem_available, "The guest's MemAvailable, as its agent reports it."),
		C("grows_total", grows, "Grants applied."),
		C("shrinks_total", shrinks, "Revocations completed (blocks offline and device shrunk)."),
		C("plugs_total", plugs, "Plug operations."),
		C("unplugs_total", unplugs, "Unplug operations completed."),
		C("shrinks_refused_total", refused_floor, "Offers or slack cut by the floor (use plus reserve)."),
		C("revokes_failed_total", failed_revokes, "Revocations the guest could not complete."),
		C("not_onlined_total", not_onlined, "Plugs the agent did not apply within the deadline."),
		C("guest_lines_total", lines, "Lines read from the guest."),
		C("guest_lines_bad_total", lines_bad, "Unreadable lines from the guest."),
		C("guest_reads_paused_total", lines_dropped, "Times the guest's channel was paused for its line budget."),
		C("guest_requests_total", requests, "Requests from the guest."),
		C("guest_requests_capped_total", requests_capped, "Requests above the policy's step."),
#undef G
#undef C
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct dom_view v;

	if (!f)
		return NULL;
	for (size_t k = 0; k < ARRAY_SIZE(m); k++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
		for (size_t i = 0; ctl_view(c, i, &v) == 0; i++) {
			uint64_t x = *(const uint64_t *)((const char *)&v + m[k].off);
			fprintf(f, "%s{domain=\"", m[k].name);
			for (const char *p = v.name; *p; p++) /* label value escaping */
				fprintf(f, *p == '"' || *p == '\\' ? "\\%c" : *p == '\n' ? "\\n" : "%c", *p);
			fprintf(f, "\"} %llu\n", (unsigned long long)x);
		}
	}
	fprintf(f, "# HELP memgrant_host_domain_phase The phase each domain is in (1 for the current one).\n"
		   "# TYPE memgrant_host_domain_phase gauge\n");
	for (size_t i = 0; ctl_view(c, i, &v) == 0; i++)
		fprintf(f, "memgrant_host_domain_phase{domain=\"%s\",phase=\"%s\"} 1\n", v.name, dom_phase_name(v.phase));
	fclose(f);
	return buf;
}

static uint64_t ju(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

void serve_print_status(FILE *f, json_t *st)
{
	json_t *doms = json_object_get(st, "domains"), *d;
	size_t i;

	fprintf(f, "%-20s %-10s %-10s %-9s %9s %9s %9s %9s %6s %6s %s\n", "DOMAIN", "HYPERVISOR", "PHASE", "CHANNEL",
		"GRANTED", "PLUGGED", "AVAIL", "UNUSABLE", "GROWS", "SHRINKS", "LAST ERROR");
	json_array_foreach(doms, i, d) {
		char g[16], p[16], a[16], u[16];
		json_t *n = json_object_get(d, "counts");
		size_format(ju(d, "granted_bytes"), g, sizeof(g));
		size_format(ju(d, "plugged_bytes"), p, sizeof(p));
		size_format(ju(d, "mem_available_bytes"), a, sizeof(a));
		size_format(ju(d, "plugged_unusable_bytes"), u, sizeof(u));
		fprintf(f, "%-20s %-10s %-10s %-9s %9s %9s %9s %9s %6llu %6llu %s\n",
			json_string_value(json_object_get(d, "domain")) ?: "?",
			json_string_value(json_object_get(d, "hypervisor")) ?: "?",
			json_string_value(json_object_get(d, "phase")) ?: "?",
			json_is_true(json_object_get(d, "synced")) ? "synced"
			: json_is_true(json_object_get(d, "connected")) ? "syncing" : "closed",
			g, p, a, u, (unsigned long long)ju(n, "grows"), (unsigned long long)ju(n, "shrinks"),
			json_string_value(json_object_get(d, "last_error")) ?: "-");
	}
	if (json_is_true(json_object_get(st, "dry_run")))
		fprintf(f, "(dry run: decisions are printed, nothing is plugged or granted)\n");
}
