/* SPDX-License-Identifier: MIT */
/*
 * The key tables of memgrant.yaml: one table gives each key its type,
 * default, range and place in struct mg_config, so defaults, parsing, freeing
 * and the unknown-key messages can not drift apart.  And the names of the
 * enumerations.
 */
#include "config/internal.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/curl_dl.h"

#include "lib/util.h"
#include "hotplug/words.h"

/* ---------------------------------------------------------------- names */

static const char *const backend_types[] = { "sysfs", "sim", NULL };
static const char *const memmap_policies[] = { "auto", "always", "never", NULL };
static const char *const seccomp_actions[] = { "kill", "log", "off", NULL };
static const char *const log_levels[] = { "error", "warning", "notice", "info", "debug", NULL };

static const char *name_of(const char *const *names, size_t n, int i)
{
	return i >= 0 && (size_t)i < n ? names[i] : "?";
}

const char *mg_backend_type_name(enum mg_backend_type t)
{
	return name_of(backend_types, ARRAY_SIZE(backend_types) - 1, (int)t);
}

const char *mg_memmap_policy_name(enum mg_memmap_policy p)
{
	return name_of(memmap_policies, ARRAY_SIZE(memmap_policies) - 1, (int)p);
}

const char *mg_log_level_name(enum mg_log_level l)
{
	return name_of(log_levels, ARRAY_SIZE(log_levels) - 1, (int)l - MG_LOG_ERROR);
}

const char *mg_seccomp_action_name(enum mg_seccomp_action a)
{
	return name_of(seccomp_actions, ARRAY_SIZE(seccomp_actions) - 1, (int)a);
}

/* ---------------------------------------------------------------- value checks */

/* The agent id goes into URL paths and file names: keep it to a safe set. */
bool cfg_check_agent_id(const char *s, char *why, size_t len)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64) {
		snprintf(why, len, "must be 1 to 64 characters long");
		return false;
	}
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p)) {
			snprintf(why, len, "'%s' may only contain letters, digits, '.', '_' and '-'", s);
			return false;
		}
	return true;
}

static bool check_user(const char *s, char *why, size_t len)
{
	if (*s == '\0' || *s == '-' || strlen(s) > 32 || strspn(s, "abcdefghijklmnopqrstuvwxyz"
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(s)) {
		snprintf(why, len, "'%s' is not a user name", s);
		return false;
	}
	return true;
}

static bool check_group(const char *s, char *why, size_t len)
{
	if (*s == '\0' || *s == '-' || strlen(s) > 32) {
		snprintf(why, len, "'%s' is not a group name", s);
		return false;
	}
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p)) {
			snprintf(why, len, "'%s' is not a group name", s);
			return false;
		}
	return true;
}

/* An octal file mode for the API socket: only read/write bits make sense. */
static bool check_socket_mode(const char *s, char *why, size_t len)
{
	char *end;
	unsigned long m;

	errno = 0;
	m = strtoul(s, &end, 8);
	if (errno || *end || !*s || *s == '-' || (m & ~0777UL) || (m & 0111UL)) {
		snprintf(why, len, "'%s' is not an octal socket mode such as 0660 (read/write bits only)", s);
		return false;
	}
	return true;
}

/* Events a hook can name: "*", KIND.*, KIND.STATE (the states of a status). */
static bool check_event(const char *s, char *why, size_t len)
{
	/* The events providers/hooks/hooks.c fires (docs/autoscaling.md); "kind.*" matches all of a kind. */
	static const struct {
		const char *kind;
		const char *const states[9];
	} events[] = {
		{ "grant", { "*", "accepted", "in_progress", "applied", "partial", "failed", "rejected", "cancelled" } },
		{ "revoke", { "*", "accepted", "in_progress", "applied", "partial", "failed", "rejected", "cancelled" } },
		{ "block", { "*", "failed" } },
		{ "pressure", { "*", "high", "low" } },
		{ "agent", { "*", "started", "stopping" } },
	};
	const char *dot = strchr(s, '.');

	if (streq(s, "*"))
		return true;
	if (dot)
		for (size_t k = 0; k < ARRAY_SIZE(events); k++) {
			if ((size_t)(dot - s) != strlen(events[k].kind) || strncmp(s, events[k].kind, dot - s) != 0)
				continue;
			for (size_t i = 0; i < ARRAY_SIZE(events[k].states) && events[k].states[i]; i++)
				if (streq(dot + 1, events[k].states[i]))
					return true;
		}
	snprintf(why, len,
		 "'%s' is not an event (\"*\"; grant. or revoke. followed by *, accepted, "
		 "in_progress, applied, partial, failed, rejected or cancelled; block.failed; pressure.high, "
		 "pressure.low; agent.started, agent.stopping; or kind.*)", s);
	return false;
}

/* Only that it parses as a URL with a host; the scheme is checked in
 * cfg_finish() because insecure_http decides which ones are allowed. */
static bool check_url(const char *s, char *why, size_t len)
{
	CURLU *h;
	char *host = NULL;
	CURLUcode rc;
	bool ok = false;

	if (curl_dl_load(why, len) < 0) /* libcurl parses it as it will fetch it */
		return false;
	h = sym_curl_url();
	if (!h) {
		snprintf(why, len, "out of memory");
		return false;
	}
	rc = sym_curl_url_set(h, CURLUPART_URL, s, CURLU_NON_SUPPORT_SCHEME);
	if (rc != CURLUE_OK)
		snprintf(why, len, "'%s' is not a URL: %s", s, sym_curl_url_strerror(rc));
	else if (sym_curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host)
		snprintf(why, len, "'%s' has no host", s);
	else
		ok = true;
	sym_curl_free(host);
	sym_curl_url_cleanup(h);
	return ok;
}

bool cfg_url_scheme_is(const char *url, const char *scheme)
{
	size_t n = strlen(scheme);

	return url && strncasecmp(url, scheme, n) == 0 && startswith(url + n, "://");
}

/* ---------------------------------------------------------------- key tables */

static const struct key_def agent_keys[] = {
	{ .name = "id", .kind = K_STR, .off = CFG(agent.id), .check = cfg_check_agent_id },
	{ .name = "state_dir",
	  .kind = K_PATH,
	  .off = CFG(agent.state_dir),
	  .dflt = LOCALSTATEDIR "/lib/memgrant" },
	{ .name = "api_socket",
	  .kind = K_PATH,
	  .off = CFG(agent.api_socket),
	  .dflt = RUNSTATEDIR "/memgrant/api.sock" },
	{ .name = "api_group",
	  .kind = K_STR,
	  .off = CFG(agent.api_group),
	  .dflt = "memgrant",
	  .check = check_group },
	{ .name = "api_socket_mode",
	  .kind = K_STR,
	  .off = CFG(agent.api_socket_mode),
	  .dflt = "0660",
	  .check = check_socket_mode },
	{ .name = "api_body_limit",
	  .kind = K_SIZE,
	  .off = CFG(agent.api_body_limit),
	  .dflt = "64K",
	  .min = 4 * KIB,
	  .max = 64 * MIB },
	{ .name = "log_level",
	  .kind = K_ENUM,
	  .off = CFG(agent.log_level),
	  .dflt = "info",
	  .choices = log_levels,
	  .choice_base = MG_LOG_ERROR },
	{ .name = "user",
	  .kind = K_STR,
	  .off = CFG(agent.user),
	  .dflt = "memgrant",
	  .check = check_user },
	{ .name = "seccomp",
	  .kind = K_ENUM,
	  .off = CFG(agent.seccomp),
	  .dflt = "kill",
	  .choices = seccomp_actions },
	{ NULL },
};

static const struct key_def fault_keys[] = {
	{ .name = "configure_eio", .kind = K_IDS, .off = CFG(backend.sim.faults.configure_eio) },
	{ .name = "offline_ebusy", .kind = K_IDS, .off = CFG(backend.sim.faults.offline_ebusy) },
	{ .name = "latency_ms",
	  .kind = K_MS,
	  .off = CFG(backend.sim.faults.latency_ms),
	  .dflt = "0",
	  .max = 3600 * SEC },
	{ NULL },
};

static const struct key_def sim_keys[] = {
	{ .name = "state",
	  .kind = K_PATH,
	  .off = CFG(backend.sim.state),
	  /* root's, readable by the agent; not the agent's state_dir (docs/security.md) */
	  .dflt = RUNSTATEDIR "/memgrant-sim/sim.json" },
	{ .name = "online", .kind = K_SIZE, .off = CFG(backend.sim.online), .dflt = "2G" },
	{ .name = "standby", .kind = K_SIZE, .off = CFG(backend.sim.standby), .dflt = "2G" },
	{ .name = "block_size",
	  .kind = K_SIZE,
	  .off = CFG(backend.sim.block_size),
	  .dflt = "128M" },
	{ .name = "memmap_on_memory_supported",
	  .kind = K_BOOL,
	  .off = CFG(backend.sim.memmap_on_memory_supported),
	  .dflt = "true" },
	{ .name = "has_firmware",
	  .kind = K_BOOL,
	  .off = CFG(backend.sim.has_firmware),
	  .dflt = "true" },
	{ .name = "auto_online_blocks",
	  .kind = K_ENUM,
	  .off = CFG(backend.sim.auto_online_blocks),
	  .dflt = "offline",
	  .choices = mem_auto_online_words },
	{ .name = "used", .kind = K_SIZE, .off = CFG(backend.sim.used), .dflt = "0" },
	{ .name = "tree", .kind = K_PATH, .off = CFG(backend.sim.tree) },
	{ .name = "faults", .kind = K_SECTION, .off = 0, .sub = fault_keys },
	{ NULL },
};

static const struct key_def backend_keys[] = {
	{ .name = "type",
	  .kind = K_ENUM,
	  .off = CFG(backend.type),
	  .dflt = "sysfs",
	  .choices = backend_types },
	{ .name = "root", .kind = K_PATH, .off = CFG(backend.root), .dflt = "/" },
	{ .name = "own_onlining",
	  .kind = K_BOOL,
	  .off = CFG(backend.own_onlining),
	  .dflt = "true" },
	{ .name = "sim",
	  .kind = K_SECTION,
	  .off = 0,
	  .sub = sim_keys,
	  .has_present = true,
	  .present_off = CFG(backend.sim.present) },
	{ NULL },
};

/* on/off, 1/0, true/false for always/never; zones in any case ("Movable") */
static int memmap_alias(const char *s)
{
	int m;

	if (words_memmap_parse(s, true, &m) < 0)
		return -1;
	return m == WORDS_MEMMAP_ON ? 1 : m == WORDS_MEMMAP_OFF ? 2 : 0;
}

static int zone_alias(const char *s)
{
	enum mem_zone z;

	if (words_zone_parse(s, true, &z) < 0)
		return -1;
	return z == MEM_ZONE_MOVABLE ? 1 : z == MEM_ZONE_NORMAL ? 2 : 0;
}

static const struct key_def policy_keys[] = {
	{ .name = "memmap_on_memory",
	  .kind = K_ENUM,
	  .off = CFG(policy.memmap_on_memory),
	  .dflt = "auto",
	  .choices = memmap_policies,
	  .alias = memmap_alias },
	{ .name = "reserve", .kind = K_SIZE, .off = CFG(policy.reserve), .dflt = "256M" },
	{ .name = "zone",
	  .kind = K_ENUM,
	  .off = CFG(policy.zone),
	  .dflt = "auto",
	  .choices = mem_zone_words,
	  .alias = zone_alias },
	{ .name = "movable_ratio",
	  .kind = K_UINT,
	  .off = CFG(policy.movable_ratio),
	  .dflt = "301",
	  .max = 100000 },
	{ .name = "revoke_budget",
	  .kind = K_DURATION,
	  .off = CFG(policy.revoke_budget_ms),
	  .dflt = "120s",
	  .min = SEC,
	  .max = 24 * HOUR },
	{ .name = "block_op_timeout",
	  .kind = K_DURATION,
	  .off = CFG(policy.block_op_timeout_ms),
	  .dflt = "0",
	  .max = 24 * HOUR },
	{ NULL },
};

static const struct key_def https_keys[] = {
	{ .name = "url",
	  .kind = K_STR,
	  .off = CFG(providers.https.url),
	  .required = true,
	  .check = check_url },
	{ .name = "ca_file", .kind = K_PATH, .off = CFG(providers.https.ca_file) },
	{ .name = "cert_file", .kind = K_PATH, .off = CFG(providers.https.cert_file) },
	{ .name = "key_file", .kind = K_PATH, .off = CFG(providers.https.key_file) },
	{ .name = "token_file", .kind = K_PATH, .off = CFG(providers.https.token_file) },
	{ .name = "wait",
	  .kind = K_DURATION,
	  .off = CFG(providers.https.wait_ms),
	  .dflt = "55s",
	  .min = SEC,
	  .max = HOUR },
	{ .name = "insecure_http",
	  .kind = K_BOOL,
	  .off = CFG(providers.https.insecure_http),
	  .dflt = "false" },
	{ NULL },
};

static const struct key_def channel_keys[] = {
	{ .name = "path",
	  .kind = K_PATH,
	  .off = CFG(providers.channel.path),
	  .dflt = "/dev/virtio-ports/org.memgrant.0" },
	{ NULL },
};

static const struct key_def providers_keys[] = {
	{ .name = "https",
	  .kind = K_SECTION,
	  .off = 0,
	  .sub = https_keys,
	  .has_present = true,
	  .present_off = CFG(providers.https.enabled) },
	{ .name = "channel",
	  .kind = K_SECTION,
	  .off = 0,
	  .sub = channel_keys,
	  .has_present = true,
	  .present_off = CFG(providers.channel.enabled) },
	{ NULL },
};

static const struct key_def hook_keys[] = {
	{ .name = "events",
	  .kind = K_STRLIST,
	  .off = HOOK(events),
	  .required = true,
	  .count_off = HOOK(n_events),
	  .check = check_event },
	{ .name = "exec", .kind = K_PATH, .off = HOOK(exec) },
	{ .name = "webhook", .kind = K_STR, .off = HOOK(webhook), .check = check_url },
	{ .name = "secret_file", .kind = K_PATH, .off = HOOK(secret_file) },
	{ .name = "insecure_http", .kind = K_BOOL, .off = HOOK(insecure_http), .dflt = "false" },
	{ .name = "timeout",
	  .kind = K_DURATION,
	  .off = HOOK(timeout_ms),
	  .dflt = "10s",
	  .min = 100,
	  .max = HOUR },
	{ NULL },
};

static const struct key_def pressure_keys[] = {
	{ .name = "request_above",
	  .kind = K_PSI,
	  .off = CFG(pressure.request_above),
	  .required = true,
	  .psi_op = '>' },
	{ .name = "step", .kind = K_SIZE, .off = CFG(pressure.step), .dflt = "128M", .min = 1 },
	{ .name = "release_below",
	  .kind = K_PSI,
	  .off = CFG(pressure.release_below),
	  .psi_op = '<' },
	{ .name = "cooldown",
	  .kind = K_DURATION,
	  .off = CFG(pressure.cooldown_ms),
	  .dflt = "30s",
	  .max = 24 * HOUR },
	{ .name = "plug_latency",
	  .kind = K_DURATION,
	  .off = CFG(pressure.plug_latency_ms),
	  .dflt = "5s",
	  .min = 100,
	  .max = 10 * 60 * 1000 },
	{ .name = "interval",
	  .kind = K_DURATION,
	  .off = CFG(pressure.interval_ms),
	  .dflt = "250ms",
	  .min = 50,
	  .max = 60 * 1000 },
	{ NULL },
};

const struct key_def cfg_root_keys[] = {
	{ .name = "agent", .kind = K_SECTION, .off = 0, .sub = agent_keys },
	{ .name = "backend", .kind = K_SECTION, .off = 0, .sub = backend_keys },
	{ .name = "policy", .kind = K_SECTION, .off = 0, .sub = policy_keys },
	{ .name = "providers", .kind = K_SECTION, .off = 0, .sub = providers_keys },
	{ .name = "hooks", .kind = K_HOOKS, .off = 0, .sub = hook_keys },
	{ .name = "pressure",
	  .kind = K_SECTION,
	  .off = 0,
	  .sub = pressure_keys,
	  .has_present = true,
	  .present_off = CFG(pressure.enabled) },
	{ NULL },
};
