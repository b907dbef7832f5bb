/* SPDX-License-Identifier: MIT */
/*
 * Loading memgrant.yaml: libyaml builds the document tree (with a mark, that
 * is a line and column, on every node), a table of keys per section drives
 * the walk over it, and finish() does the checks that need several keys.
 * One table gives each key its type, default, range and place in struct
 * mg_config, so defaults, parsing, freeing and the unknown-key messages can
 * not drift apart.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <curl/curl.h>
#include <yaml.h>

#include "lib/fileio.h"
#include "lib/size.h"
#include "lib/util.h"
#include "lib/words.h"

#define MAX_DIAG 100 /* after this many messages, one more says so and the rest are dropped */
#define MACHINE_ID_PATH "/etc/machine-id"

/* ---------------------------------------------------------------- names */

static const char *const backend_types[] = { "sysfs", "sim", NULL };
static const char *const memmap_policies[] = { "auto", "always", "never", NULL };
static const char *const zone_policies[] = { "auto", "movable", "normal", NULL };
static const char *const log_levels[] = { "error", "warning", "notice", "info", "debug", NULL };
static const char *const auto_online_words[] = { "offline", "online", "online_kernel",
						 "online_movable", NULL };

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

const char *mg_zone_policy_name(enum mg_zone_policy z)
{
	return name_of(zone_policies, ARRAY_SIZE(zone_policies) - 1, (int)z);
}

const char *mg_log_level_name(enum mg_log_level l)
{
	return name_of(log_levels, ARRAY_SIZE(log_levels) - 1, (int)l - MG_LOG_ERROR);
}

const char *mg_auto_online_name(enum mg_auto_online a)
{
	return name_of(auto_online_words, ARRAY_SIZE(auto_online_words) - 1, (int)a);
}

/* ---------------------------------------------------------------- value checks */

/* The agent id goes into URL paths and file names: keep it to a safe set. */
static bool check_agent_id(const char *s, char *why, size_t len)
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
	/* The events providers/hooks.c fires (docs/autoscaling.md); "kind.*" matches all of a kind. */
	static const struct {
		const char *kind;
		const char *const states[8];
	} events[] = {
		{ "grant", { "*", "accepted", "in_progress", "applied", "partial", "failed", "rejected" } },
		{ "revoke", { "*", "accepted", "in_progress", "applied", "partial", "failed", "rejected" } },
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
		 "in_progress, applied, partial, failed or rejected; block.failed; pressure.high, "
		 "pressure.low; agent.started, agent.stopping; or kind.*)", s);
	return false;
}

/* Only that it parses as a URL with a host; the scheme is checked in
 * finish() because insecure_http decides which ones are allowed. */
static bool check_url(const char *s, char *why, size_t len)
{
	CURLU *h = curl_url();
	char *host = NULL;
	CURLUcode rc;
	bool ok = false;

	if (!h) {
		snprintf(why, len, "out of memory");
		return false;
	}
	rc = curl_url_set(h, CURLUPART_URL, s, CURLU_NON_SUPPORT_SCHEME);
	if (rc != CURLUE_OK)
		snprintf(why, len, "'%s' is not a URL: %s", s, curl_url_strerror(rc));
	else if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host)
		snprintf(why, len, "'%s' has no host", s);
	else
		ok = true;
	curl_free(host);
	curl_url_cleanup(h);
	return ok;
}

static bool url_scheme_is(const char *url, const char *scheme)
{
	size_t n = strlen(scheme);

	return url && strncasecmp(url, scheme, n) == 0 && startswith(url + n, "://");
}

/* ---------------------------------------------------------------- key tables */

enum kind {
	K_STR,      /* any string (check() may narrow it) */
	K_PATH,     /* an absolute path */
	K_BOOL,
	K_SIZE,     /* uint64_t bytes, size_parse() */
	K_DURATION, /* uint64_t milliseconds, duration_parse_ms() */
	K_UINT,     /* unsigned, decimal */
	K_MS,       /* uint64_t, a plain number of milliseconds */
	K_ENUM,     /* int: index in choices + choice_base */
	K_PSI,      /* struct mg_psi_trigger */
	K_IDS,      /* struct mg_id_list */
	K_STRLIST,  /* char **, count at count_off */
	K_SECTION,  /* a mapping described by sub */
	K_HOOKS,    /* the hooks list */
};

struct key_def {
	const char *name;
	enum kind kind;
	size_t off;
	const char *dflt;            /* converted like a YAML value; NULL: none */
	bool required;
	uint64_t min, max;           /* max 0: no upper limit */
	const char *const *choices;  /* K_ENUM */
	int (*alias)(const char *s); /* K_ENUM: other spellings (lib/words.h), index or -1 */
	int choice_base;
	char psi_op;                 /* K_PSI: the comparison the key's name implies */
	const struct key_def *sub;   /* K_SECTION, K_HOOKS */
	bool has_present;            /* K_SECTION: set the bool at present_off when given */
	size_t present_off;
	size_t count_off;            /* K_STRLIST */
	bool (*check)(const char *s, char *why, size_t len);
};

#define CFG(f) offsetof(struct mg_config, f)
#define HOOK(f) offsetof(struct mg_hook, f)
#define AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))

#define KIB 1024ULL
#define MIB (1024 * KIB)
#define SEC 1000ULL
#define HOUR (3600 * SEC)

static const struct key_def agent_keys[] = {
	{ .name = "id", .kind = K_STR, .off = CFG(agent.id), .check = check_agent_id },
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
	  .dflt = LOCALSTATEDIR "/lib/memgrant/sim.json" },
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
	  .choices = auto_online_words },
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
	enum words_zone z;

	if (words_zone_parse(s, true, &z) < 0)
		return -1;
	return z == WORDS_ZONE_MOVABLE ? 1 : z == WORDS_ZONE_NORMAL ? 2 : 0;
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
	  .choices = zone_policies,
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
	{ .name = "step", .kind = K_SIZE, .off = CFG(pressure.step), .dflt = "1G", .min = 1 },
	{ .name = "release_below",
	  .kind = K_PSI,
	  .off = CFG(pressure.release_below),
	  .psi_op = '<' },
	{ .name = "cooldown",
	  .kind = K_DURATION,
	  .off = CFG(pressure.cooldown_ms),
	  .dflt = "10m",
	  .max = 24 * HOUR },
	{ NULL },
};

static const struct key_def root_keys[] = {
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

/* ---------------------------------------------------------------- freeing */

static void free_strlist(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void free_keys(const struct key_def *defs, void *base)
{
	for (const struct key_def *d = defs; d->name; d++) {
		switch (d->kind) {
		case K_STR:
		case K_PATH:
			free(*AT(base, d->off, char *));
			*AT(base, d->off, char *) = NULL;
			break;
		case K_IDS:
			free(AT(base, d->off, struct mg_id_list)->ids);
			*AT(base, d->off, struct mg_id_list) = (struct mg_id_list){ 0 };
			break;
		case K_STRLIST:
			free_strlist(*AT(base, d->off, char **), *AT(base, d->count_off, size_t));
			*AT(base, d->off, char **) = NULL;
			*AT(base, d->count_off, size_t) = 0;
			break;
		case K_SECTION:
			free_keys(d->sub, base);
			break;
		case K_HOOKS: {
			struct mg_config *c = base;
			for (size_t i = 0; i < c->n_hooks; i++)
				free_keys(d->sub, &c->hooks[i]);
			free(c->hooks);
			c->hooks = NULL;
			c->n_hooks = 0;
			break;
		}
		default:
			break;
		}
	}
}

void config_free(struct mg_config *c)
{
	if (!c)
		return;
	free_keys(root_keys, c);
	free(c->source);
	free(c);
}

void config_diag_clear(struct config_diag *d)
{
	if (!d)
		return;
	free_strlist(d->msgs, d->n);
	d->msgs = NULL;
	d->n = 0;
}

/* ---------------------------------------------------------------- scalar conversion */

static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (*s)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "some avg10>20", "full avg300 < 0.5%": threshold in hundredths of a percent. */
static int parse_psi(const char *s, struct mg_psi_trigger *t)
{
	struct mg_psi_trigger r = { .set = true };
	unsigned whole = 0, frac = 0, digits = 0;

	if (startswith(s, "some"))
		r.kind = MG_PSI_SOME;
	else if (startswith(s, "full"))
		r.kind = MG_PSI_FULL;
	else
		return -EINVAL;
	s += 4;
	if (*s != ' ')
		return -EINVAL;
	while (*s == ' ')
		s++;
	if (startswith(s, "avg10"))
		r.window_s = 10, s += 5;
	else if (startswith(s, "avg60"))
		r.window_s = 60, s += 5;
	else if (startswith(s, "avg300"))
		r.window_s = 300, s += 6;
	else
		return -EINVAL;
	while (*s == ' ')
		s++;
	if (*s != '>' && *s != '<')
		return -EINVAL;
	r.above = *s++ == '>';
	while (*s == ' ')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; isdigit((unsigned char)*s); s++) {
		whole = whole * 10 + (unsigned)(*s - '0');
		if (whole > 100)
			return -ERANGE;
	}
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		for (; isdigit((unsigned char)*s); s++) {
			if (++digits > 2)
				return -EINVAL; /* the kernel prints two decimals */
			frac = frac * 10 + (unsigned)(*s - '0');
		}
		if (digits == 1)
			frac *= 10;
	}
	if (*s == '%')
		s++;
	if (*s)
		return -EINVAL;
	r.threshold_centi = whole * 100 + frac;
	if (r.threshold_centi > 10000)
		return -ERANGE;
	*t = r;
	return 0;
}

static void list_choices(const char *const *choices, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; choices[i] && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", choices[i]);
}

/* The largest whole unit: 3600000 -> "1h", 1500 -> "1500ms". */
static void duration_format(uint64_t ms, char *buf, size_t len)
{
	if (ms && ms % (3600 * 1000) == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ms / (3600 * 1000)));
	else if (ms && ms % (60 * 1000) == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ms / (60 * 1000)));
	else if (ms && ms % 1000 == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
	else
		snprintf(buf, len, "%llums", (unsigned long long)ms);
}

static int check_range(const struct key_def *d, uint64_t v, const char *s, char *why, size_t len)
{
	char a[32], b[32];

	if (v >= d->min && (d->max == 0 || v <= d->max))
		return 0;
	if (d->kind == K_SIZE) {
		size_format(d->min, a, sizeof(a));
		size_format(d->max, b, sizeof(b));
	} else if (d->kind == K_DURATION) {
		duration_format(d->min, a, sizeof(a));
		duration_format(d->max, b, sizeof(b));
	} else {
		snprintf(a, sizeof(a), "%llu", (unsigned long long)d->min);
		snprintf(b, sizeof(b), "%llu", (unsigned long long)d->max);
	}
	if (d->max == 0)
		snprintf(why, len, "'%s' is below the minimum of %s", s, a);
	else
		snprintf(why, len, "'%s' is out of range (%s to %s)", s, a, b);
	return -EINVAL;
}

/* Converts one scalar into its field.  0, -EINVAL with WHY, or -ENOMEM. */
static int convert(const struct key_def *d, const char *s, void *base, char *why, size_t len)
{
	uint64_t v;
	int r;

	switch (d->kind) {
	case K_PATH:
		if (s[0] != '/') {
			snprintf(why, len, "'%s' is not an absolute path", s);
			return -EINVAL;
		}
		/* fall through */
	case K_STR: {
		char *dup;
		if (d->check && !d->check(s, why, len))
			return -EINVAL;
		dup = strdup(s);
		if (!dup)
			return -ENOMEM;
		free(*AT(base, d->off, char *));
		*AT(base, d->off, char *) = dup;
		return 0;
	}
	case K_BOOL:
		if (streq(s, "true") || streq(s, "True") || streq(s, "TRUE"))
			*AT(base, d->off, bool) = true;
		else if (streq(s, "false") || streq(s, "False") || streq(s, "FALSE"))
			*AT(base, d->off, bool) = false;
		else {
			snprintf(why, len, "expected true or false, not '%s'", s);
			return -EINVAL;
		}
		return 0;
	case K_SIZE:
		r = size_parse(s, &v);
		if (r == -ERANGE) {
			snprintf(why, len, "'%s' is too large", s);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, len, "'%s' is not a size (%sbytes, or a number with K, M, G or T)",
				 s, s[0] == '-' ? "sizes cannot be negative; " : "");
			return -EINVAL;
		}
		if (check_range(d, v, s, why, len) < 0)
			return -EINVAL;
		*AT(base, d->off, uint64_t) = v;
		return 0;
	case K_DURATION:
		r = duration_parse_ms(s, &v);
		if (r == -ERANGE) {
			snprintf(why, len, "'%s' is too long", s);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, len, "'%s' is not a duration (a number with ms, s, m or h; "
				 "plain numbers are seconds)", s);
			return -EINVAL;
		}
		if (check_range(d, v, s, why, len) < 0)
			return -EINVAL;
		*AT(base, d->off, uint64_t) = v;
		return 0;
	case K_UINT:
	case K_MS:
		r = parse_u64(s, &v);
		if (r == -ERANGE) {
			snprintf(why, len, "'%s' is too large", s);
			return -EINVAL;
		}
		if (r < 0) {
			snprintf(why, len, "'%s' is not a %s", s,
				 d->kind == K_MS ? "number of milliseconds" : "non-negative whole number");
			return -EINVAL;
		}
		if (check_range(d, v, s, why, len) < 0)
			return -EINVAL;
		if (d->kind == K_UINT)
			*AT(base, d->off, unsigned) = (unsigned)v;
		else
			*AT(base, d->off, uint64_t) = v;
		return 0;
	case K_ENUM:
		for (int i = 0; d->choices[i]; i++)
			if (streq(s, d->choices[i])) {
				*AT(base, d->off, int) = i + d->choice_base;
				return 0;
			}
		if (d->alias && d->alias(s) >= 0) {
			*AT(base, d->off, int) = d->alias(s) + d->choice_base;
			return 0;
		}
		{
			char all[160];
			list_choices(d->choices, all, sizeof(all));
			snprintf(why, len, "'%s' is not one of %s", s, all);
		}
		return -EINVAL;
	case K_PSI: {
		struct mg_psi_trigger t;
		r = parse_psi(s, &t);
		if (r < 0) {
			snprintf(why, len, "'%s' is not a pressure trigger (\"some|full avg10|avg60|avg300 "
				 "%c PERCENT\", e.g. \"some avg10%c20\")", s, d->psi_op, d->psi_op);
			return -EINVAL;
		}
		if ((d->psi_op == '>') != t.above) {
			snprintf(why, len, "'%s' must compare with '%c'", s, d->psi_op);
			return -EINVAL;
		}
		*AT(base, d->off, struct mg_psi_trigger) = t;
		return 0;
	}
	default:
		snprintf(why, len, "internal error: not a scalar key");
		return -EINVAL;
	}
}

static int apply_defaults(const struct key_def *defs, void *base)
{
	char why[256];

	for (const struct key_def *d = defs; d->name; d++) {
		int r = 0;
		if (d->kind == K_SECTION)
			r = apply_defaults(d->sub, base);
		else if (d->dflt)
			r = convert(d, d->dflt, base, why, sizeof(why));
		if (r < 0)
			return r == -ENOMEM ? r : -EINVAL; /* -EINVAL: a bad default is a bug */
	}
	return 0;
}

/* ---------------------------------------------------------------- diagnostics */

struct seen {
	char *path;
	int key;   /* node of the key, 0 for sequence items */
	int value; /* node of the value */
};

struct pending {
	size_t line, col; /* 0, 0: no position */
	size_t seq;       /* order found, for a stable sort */
	char *msg;
};

struct ctx {
	const char *name;
	const char *buf;
	size_t len;
	yaml_document_t doc;
	bool have_doc;
	struct config_diag *diag;
	struct pending *pend;
	size_t n_pend;
	size_t n_errors;
	bool oom;
	struct seen *seen;
	size_t n_seen;
	/* nodes made for overrides: node index -> override text */
	int first_override_node;
	const char **override_of; /* indexed by node - first_override_node */
	size_t n_override_of;
	/* nodes that already have a message: the whole-config checks stay
	 * quiet about them rather than repeat a problem in other words */
	int *bad;
	size_t n_bad;
	bool in_finish;
};

static void diag_push(struct ctx *c, size_t line, size_t col, char *msg)
{
	struct pending *n;

	if (!msg) {
		c->oom = true;
		return;
	}
	c->n_errors++;
	if (!c->diag || c->n_errors > MAX_DIAG) {
		free(msg);
		return;
	}
	n = realloc(c->pend, (c->n_pend + 1) * sizeof(*n));
	if (!n) {
		free(msg);
		c->oom = true;
		return;
	}
	c->pend = n;
	c->pend[c->n_pend] = (struct pending){ line, col, c->n_pend, msg };
	c->n_pend++;
}

static int pending_cmp(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands the messages to the caller in file order (those without a
 * position first), whatever order the checks found them in. */
static void diag_flush(struct ctx *c)
{
	char **n;
	size_t i;

	if (c->n_errors > MAX_DIAG) {
		char *m = NULL;
		if (asprintf(&m, "%s: %zu more errors not shown", c->name, c->n_errors - MAX_DIAG) >= 0) {
			struct pending *p = realloc(c->pend, (c->n_pend + 1) * sizeof(*p));
			if (p) {
				c->pend = p;
				c->pend[c->n_pend++] = (struct pending){ SIZE_MAX, SIZE_MAX, SIZE_MAX, m };
			} else {
				free(m);
			}
		}
	}
	if (c->n_pend)
		qsort(c->pend, c->n_pend, sizeof(*c->pend), pending_cmp);
	n = c->diag && c->n_pend ? realloc(c->diag->msgs, (c->diag->n + c->n_pend) * sizeof(*n)) : NULL;
	for (i = 0; i < c->n_pend; i++) {
		if (n)
			n[c->diag->n++] = c->pend[i].msg;
		else
			free(c->pend[i].msg);
	}
	if (n)
		c->diag->msgs = n;
	free(c->pend);
	c->pend = NULL;
	c->n_pend = 0;
}

static void diag_vadd(struct ctx *c, size_t line, size_t col, bool has_pos, const char *prefix,
		      const char *fmt, va_list ap)
{
	_cleanup_free_ char *text = NULL;
	char *msg = NULL;

	if (vasprintf(&text, fmt, ap) < 0) {
		c->oom = true;
		return;
	}
	if (prefix) {
		if (asprintf(&msg, "%s: %s: %s", c->name, prefix, text) < 0)
			msg = NULL;
	} else if (has_pos) {
		if (asprintf(&msg, "%s:%zu:%zu: %s", c->name, line, col, text) < 0)
			msg = NULL;
	} else if (asprintf(&msg, "%s: %s", c->name, text) < 0) {
		msg = NULL;
	}
	diag_push(c, line, col, msg);
}

static yaml_node_t *node(struct ctx *c, int idx)
{
	return idx > 0 ? yaml_document_get_node(&c->doc, idx) : NULL;
}

static const char *override_text(struct ctx *c, int idx)
{
	if (c->first_override_node <= 0 || idx < c->first_override_node)
		return NULL;
	if ((size_t)(idx - c->first_override_node) >= c->n_override_of)
		return NULL;
	return c->override_of[idx - c->first_override_node];
}

/* An error at node IDX (0: no position). */
__attribute__((format(printf, 3, 4)))
static void err_at(struct ctx *c, int idx, const char *fmt, ...)
{
	yaml_node_t *n = node(c, idx);
	const char *ov = override_text(c, idx);
	_cleanup_free_ char *prefix = NULL;
	va_list ap;

	if (idx > 0) {
		for (size_t i = 0; i < c->n_bad; i++)
			if (c->bad[i] == idx && c->in_finish)
				return;
		if (!c->in_finish) {
			int *b = realloc(c->bad, (c->n_bad + 1) * sizeof(*b));
			if (!b) {
				c->oom = true;
				return;
			}
			c->bad = b;
			c->bad[c->n_bad++] = idx;
		}
	}
	if (ov && asprintf(&prefix, "override '%s'", ov) < 0) {
		c->oom = true;
		return;
	}
	va_start(ap, fmt);
	diag_vadd(c, n ? n->start_mark.line + 1 : 0, n ? n->start_mark.column + 1 : 0, n != NULL,
		  prefix, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 4, 5)))
static void err_mark(struct ctx *c, size_t line0, size_t col0, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vadd(c, line0 + 1, col0 + 1, true, NULL, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 3)))
static void err_plain(struct ctx *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	diag_vadd(c, 0, 0, false, NULL, fmt, ap);
	va_end(ap);
}

static void remember(struct ctx *c, const char *path, int key, int value)
{
	struct seen *n = realloc(c->seen, (c->n_seen + 1) * sizeof(*n));
	char *p = strdup(path);

	if (!n || !p) {
		free(p);
		if (n)
			c->seen = n;
		c->oom = true;
		return;
	}
	c->seen = n;
	c->seen[c->n_seen++] = (struct seen){ p, key, value };
}

static const struct seen *seen_get(struct ctx *c, const char *path)
{
	for (size_t i = 0; i < c->n_seen; i++)
		if (streq(c->seen[i].path, path))
			return &c->seen[i];
	return NULL;
}

/* Value node of PATH as given in the file, else 0 (a message without position). */
static int where(struct ctx *c, const char *path)
{
	const struct seen *s = seen_get(c, path);
	return s ? s->value : 0;
}

/* PATH was given and its value already has a message. */
static bool bad(struct ctx *c, const char *path)
{
	int idx = where(c, path);

	for (size_t i = 0; idx && i < c->n_bad; i++)
		if (c->bad[i] == idx)
			return true;
	return false;
}

static int where_key(struct ctx *c, const char *path)
{
	const struct seen *s = seen_get(c, path);
	return s ? (s->key ? s->key : s->value) : 0;
}

/* ---------------------------------------------------------------- walking the tree */

static bool is_null(const yaml_node_t *n)
{
	const char *v;

	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	v = (const char *)n->data.scalar.value;
	return streq(v, "") || streq(v, "~") || streq(v, "null") || streq(v, "Null") ||
	       streq(v, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return is_null(n) ? "nothing" : "a single value";
	}
}

static const char *kind_wants(const struct key_def *d)
{
	switch (d->kind) {
	case K_STR:
		return "a string";
	case K_PATH:
		return "an absolute path";
	case K_BOOL:
		return "true or false";
	case K_SIZE:
		return "a size such as 256M";
	case K_DURATION:
		return "a duration such as 30s";
	case K_UINT:
	case K_MS:
		return "a number";
	case K_ENUM:
		return "one word of a fixed set";
	case K_PSI:
		return "a pressure trigger such as \"some avg10>20\"";
	case K_IDS:
		return "a list of block ids";
	case K_STRLIST:
		return "a list of strings";
	case K_SECTION:
		return "a section (a mapping of keys)";
	case K_HOOKS:
		return "a list of hooks";
	}
	return "?";
}

/* Scalar text, or NULL (with an error) when the node has a NUL inside. */
static const char *scalar_text(struct ctx *c, int idx, const char *path)
{
	yaml_node_t *n = node(c, idx);
	const char *v = (const char *)n->data.scalar.value;

	if (strlen(v) != n->data.scalar.length) {
		err_at(c, idx, "%s: contains a NUL character", path);
		return NULL;
	}
	return v;
}

static void walk_section(struct ctx *c, int idx, const struct key_def *defs, void *base,
			 const char *path);

static void walk_scalar(struct ctx *c, const struct key_def *d, int idx, void *base,
			const char *path)
{
	yaml_node_t *n = node(c, idx);
	char why[512];
	const char *s;
	int r;

	if (n->type != YAML_SCALAR_NODE || is_null(n)) {
		if (d->kind == K_ENUM) {
			char all[160];
			list_choices(d->choices, all, sizeof(all));
			err_at(c, idx, "%s: expected one of %s, found %s", path, all, node_kind(n));
		} else {
			err_at(c, idx, "%s: expected %s, found %s", path, kind_wants(d), node_kind(n));
		}
		return;
	}
	s = scalar_text(c, idx, path);
	if (!s)
		return;
	r = convert(d, s, base, why, sizeof(why));
	if (r == -ENOMEM)
		c->oom = true;
	else if (r < 0)
		err_at(c, idx, "%s: %s", path, why);
}

static void walk_ids(struct ctx *c, const struct key_def *d, int idx, void *base,
		     const char *path)
{
	yaml_node_t *n = node(c, idx);
	struct mg_id_list *l = AT(base, d->off, struct mg_id_list);
	yaml_node_item_t *it;
	size_t cap;

	if (is_null(n))
		return;
	if (n->type != YAML_SEQUENCE_NODE) {
		err_at(c, idx, "%s: expected %s such as [3, 4], found %s", path, kind_wants(d),
		       node_kind(n));
		return;
	}
	cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	free(l->ids);
	l->n = 0;
	l->ids = calloc(cap ? cap : 1, sizeof(*l->ids));
	if (!l->ids) {
		c->oom = true;
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);
		const char *s;
		uint64_t v;

		if (item->type != YAML_SCALAR_NODE || is_null(item)) {
			err_at(c, *it, "%s: expected a block id, found %s", path, node_kind(item));
			continue;
		}
		s = scalar_text(c, *it, path);
		if (!s)
			continue;
		if (parse_u64(s, &v) == -ERANGE) {
			err_at(c, *it, "%s: '%s' is too large for a block id", path, s);
			continue;
		}
		if (parse_u64(s, &v) < 0) {
			err_at(c, *it, "%s: '%s' is not a block id (a non-negative whole number)",
			       path, s);
			continue;
		}
		l->ids[l->n++] = v;
	}
}

static void walk_strlist(struct ctx *c, const struct key_def *d, int idx, void *base,
			 const char *path)
{
	yaml_node_t *n = node(c, idx);
	char ***v = AT(base, d->off, char **);
	size_t *count = AT(base, d->count_off, size_t);
	yaml_node_item_t *it;
	size_t cap;

	if (is_null(n))
		return;
	if (n->type != YAML_SEQUENCE_NODE) {
		err_at(c, idx, "%s: expected %s such as [grant.applied], found %s", path,
		       kind_wants(d), node_kind(n));
		return;
	}
	cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	free_strlist(*v, *count);
	*count = 0;
	*v = calloc(cap ? cap : 1, sizeof(**v));
	if (!*v) {
		c->oom = true;
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		yaml_node_t *item = node(c, *it);
		char why[512];
		const char *s;

		if (item->type != YAML_SCALAR_NODE || is_null(item)) {
			err_at(c, *it, "%s: expected a string, found %s", path, node_kind(item));
			continue;
		}
		s = scalar_text(c, *it, path);
		if (!s)
			continue;
		if (d->check && !d->check(s, why, sizeof(why))) {
			err_at(c, *it, "%s: %s", path, why);
			continue;
		}
		(*v)[*count] = strdup(s);
		if (!(*v)[*count]) {
			c->oom = true;
			return;
		}
		(*count)++;
	}
}

static void walk_hooks(struct ctx *c, const struct key_def *d, int idx, struct mg_config *cfg,
		       const char *path)
{
	yaml_node_t *n = node(c, idx);
	yaml_node_item_t *it;
	size_t cap;

	if (is_null(n))
		return;
	if (n->type != YAML_SEQUENCE_NODE) {
		err_at(c, idx, "%s: expected a list of hooks (- {events: [...], exec: PATH}), found %s",
		       path, node_kind(n));
		return;
	}
	cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	cfg->hooks = calloc(cap ? cap : 1, sizeof(*cfg->hooks));
	if (!cfg->hooks) {
		c->oom = true;
		return;
	}
	for (it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
		struct mg_hook *h = &cfg->hooks[cfg->n_hooks++];
		_cleanup_free_ char *p = NULL;
		int r;

		if (asprintf(&p, "%s[%zu]", path, cfg->n_hooks - 1) < 0) {
			c->oom = true;
			return;
		}
		r = apply_defaults(d->sub, h);
		if (r < 0) {
			c->oom = true;
			return;
		}
		remember(c, p, 0, *it);
		if (node(c, *it)->type != YAML_MAPPING_NODE) {
			err_at(c, *it, "%s: expected a hook (a mapping with events and exec or webhook), "
			       "found %s", p, node_kind(node(c, *it)));
			continue;
		}
		walk_section(c, *it, d->sub, h, p);
	}
}

static void walk_value(struct ctx *c, const struct key_def *d, int idx, void *base,
		       const char *path)
{
	switch (d->kind) {
	case K_SECTION:
		if (d->has_present)
			*AT(base, d->present_off, bool) = true;
		walk_section(c, idx, d->sub, base, path);
		break;
	case K_HOOKS:
		walk_hooks(c, d, idx, base, path);
		break;
	case K_IDS:
		walk_ids(c, d, idx, base, path);
		break;
	case K_STRLIST:
		walk_strlist(c, d, idx, base, path);
		break;
	default:
		walk_scalar(c, d, idx, base, path);
		break;
	}
}

static void valid_keys(const struct key_def *defs, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (const struct key_def *d = defs; d->name && used < len; d++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", d == defs ? "" : ", ", d->name);
}

static void walk_section(struct ctx *c, int idx, const struct key_def *defs, void *base,
			 const char *path)
{
	yaml_node_t *n = node(c, idx);
	size_t ndefs = 0;

	while (defs[ndefs].name)
		ndefs++;
	bool given[ndefs ? ndefs : 1];
	memset(given, 0, sizeof(given));

	if (n && is_null(n)) {
		n = NULL; /* "section:" with everything commented out: all defaults */
	} else if (n && n->type != YAML_MAPPING_NODE) {
		char keys[512];
		valid_keys(defs, keys, sizeof(keys));
		err_at(c, idx, "%s%sexpected a section with the keys %s, found %s", path,
		       *path ? ": " : "", keys, node_kind(n));
		return;
	}

	for (yaml_node_pair_t *p = n ? n->data.mapping.pairs.start : NULL;
	     n && p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(c, p->key);
		const struct key_def *d = NULL;
		_cleanup_free_ char *sub = NULL;
		const char *name;
		size_t i;

		if (k->type != YAML_SCALAR_NODE || is_null(k)) {
			err_at(c, p->key, "%s%skeys must be words, found %s", path, *path ? ": " : "",
			       node_kind(k));
			continue;
		}
		name = scalar_text(c, p->key, path);
		if (!name)
			continue;
		for (i = 0; i < ndefs; i++)
			if (streq(defs[i].name, name)) {
				d = &defs[i];
				break;
			}
		if (!d) {
			char keys[512];
			valid_keys(defs, keys, sizeof(keys));
			err_at(c, p->key, "%s%sunknown key '%s' (valid keys: %s)", path,
			       *path ? ": " : "", name, keys);
			continue;
		}
		if (asprintf(&sub, "%s%s%s", path, *path ? "." : "", name) < 0) {
			c->oom = true;
			return;
		}
		if (given[i]) {
			yaml_node_t *first = node(c, where_key(c, sub));
			if (first)
				err_at(c, p->key, "duplicate key %s (first given at %zu:%zu)", sub,
				       first->start_mark.line + 1, first->start_mark.column + 1);
			else
				err_at(c, p->key, "duplicate key %s", sub);
			continue;
		}
		given[i] = true;
		remember(c, sub, p->key, p->value);
		walk_value(c, d, p->value, base, sub);
	}

	for (size_t i = 0; i < ndefs; i++)
		if (defs[i].required && !given[i])
			err_at(c, idx, "%s: missing required key '%s'", path, defs[i].name);
}

/* ---------------------------------------------------------------- overrides */

static int add_override_node(struct ctx *c, int nidx, const char *text)
{
	const char **n;
	size_t slot;

	if (c->first_override_node <= 0)
		c->first_override_node = nidx;
	slot = (size_t)(nidx - c->first_override_node);
	if (slot >= c->n_override_of) {
		n = realloc(c->override_of, (slot + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (size_t i = c->n_override_of; i <= slot; i++)
			n[i] = NULL;
		c->override_of = n;
		c->n_override_of = slot + 1;
	}
	c->override_of[slot] = text;
	return 0;
}

static int new_scalar(struct ctx *c, const char *value, size_t len, const char *text)
{
	int idx = yaml_document_add_scalar(&c->doc, NULL, (yaml_char_t *)value, (int)len,
					   YAML_PLAIN_SCALAR_STYLE);
	if (!idx || add_override_node(c, idx, text) < 0)
		return -ENOMEM;
	return idx;
}

static int new_mapping(struct ctx *c, const char *text)
{
	int idx = yaml_document_add_mapping(&c->doc, NULL, YAML_BLOCK_MAPPING_STYLE);
	if (!idx || add_override_node(c, idx, text) < 0)
		return -ENOMEM;
	return idx;
}

/* Finds KEY in mapping MAP: the pair's index, or -1. */
static int find_pair(struct ctx *c, int map, const char *key, size_t keylen)
{
	yaml_node_t *m = node(c, map);

	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(c, p->key);
		if (k->type == YAML_SCALAR_NODE && k->data.scalar.length == keylen &&
		    memcmp(k->data.scalar.value, key, keylen) == 0)
			return (int)(p - m->data.mapping.pairs.start);
	}
	return -1;
}

/* "section.key=value": sets a scalar in the tree, making sections on the way.
 * Type and key checks then happen in the walk, like for the file. */
static int apply_override(struct ctx *c, int map, const char *text)
{
	const char *eq = strchr(text, '='), *seg = text, *dot;
	int v;

	if (!eq || !memchr(text, '.', (size_t)(eq - text)) || text[0] == '.' || eq[-1] == '.' ||
	    (strstr(text, "..") && strstr(text, "..") < eq)) {
		err_plain(c, "override '%s': expected section.key=value", text);
		return 0;
	}
	while ((dot = memchr(seg, '.', (size_t)(eq - seg)))) {
		int pi = find_pair(c, map, seg, (size_t)(dot - seg)), sub;
		yaml_node_t *m = node(c, map);

		if (pi >= 0) {
			sub = m->data.mapping.pairs.start[pi].value;
			if (is_null(node(c, sub))) {
				int nm = new_mapping(c, text);
				if (nm < 0)
					return nm;
				node(c, map)->data.mapping.pairs.start[pi].value = nm;
				sub = nm;
			} else if (node(c, sub)->type != YAML_MAPPING_NODE) {
				err_plain(c, "override '%s': '%.*s' is not a section", text,
					  (int)(dot - text), text);
				return 0;
			}
		} else {
			int k = new_scalar(c, seg, (size_t)(dot - seg), text);
			if (k < 0)
				return k;
			sub = new_mapping(c, text);
			if (sub < 0 || !yaml_document_append_mapping_pair(&c->doc, map, k, sub))
				return -ENOMEM;
		}
		map = sub;
		seg = dot + 1;
	}
	v = new_scalar(c, eq + 1, strlen(eq + 1), text);
	if (v < 0)
		return v;
	{
		int pi = find_pair(c, map, seg, (size_t)(eq - seg));
		if (pi >= 0) {
			node(c, map)->data.mapping.pairs.start[pi].value = v;
		} else {
			int k = new_scalar(c, seg, (size_t)(eq - seg), text);
			if (k < 0 || !yaml_document_append_mapping_pair(&c->doc, map, k, v))
				return -ENOMEM;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- whole-config checks */

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

static void check_ids(struct ctx *c, uint64_t nblocks, const char *path)
{
	yaml_node_t *n = node(c, where(c, path));

	if (!n || n->type != YAML_SEQUENCE_NODE)
		return;
	/* walk the items again rather than the parsed list: each message can
	 * then point at its own item */
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *item = node(c, *it);
		uint64_t v;

		if (item->type != YAML_SCALAR_NODE ||
		    parse_u64((const char *)item->data.scalar.value, &v) < 0)
			continue; /* reported by the walk */
		if (v >= nblocks)
			err_at(c, *it, "%s: block %llu does not exist (the sim has blocks 0 to %llu)",
			       path, (unsigned long long)v,
			       (unsigned long long)(nblocks ? nblocks - 1 : 0));
	}
}

static void check_url_scheme(struct ctx *c, const char *url, bool insecure, const char *path,
			     const char *insecure_path)
{
	if (url_scheme_is(url, "https"))
		return;
	if (url_scheme_is(url, "http")) {
		if (!insecure)
			err_at(c, where(c, path),
			       "%s: '%s' is plain http; use https:// or set %s: true", path, url,
			       insecure_path);
		return;
	}
	err_at(c, where(c, path), "%s: '%s' must start with https://", path, url);
}

static void finish_sim(struct ctx *c, struct mg_config *cfg)
{
	const struct mg_sim_config *s = &cfg->backend.sim;
	char bs[32];
	uint64_t nblocks;

	if (s->online == 0)
		err_at(c, where(c, "backend.sim.online"),
		       "backend.sim.online: a machine needs some online memory");
	if (bad(c, "backend.sim.block_size"))
		return; /* every check below depends on it */
	size_format(s->block_size, bs, sizeof(bs));
	if (!is_pow2(s->block_size) || s->block_size < MIB) {
		err_at(c, where(c, "backend.sim.block_size"),
		       "backend.sim.block_size: %s is not a power of two of at least 1M", bs);
		return; /* the multiple checks below would only repeat it */
	}
	if (s->online % s->block_size)
		err_at(c, where(c, "backend.sim.online"),
		       "backend.sim.online: not a multiple of the block size %s", bs);
	if (s->standby % s->block_size)
		err_at(c, where(c, "backend.sim.standby"),
		       "backend.sim.standby: not a multiple of the block size %s", bs);
	if (s->used > s->online)
		err_at(c, where(c, "backend.sim.used"),
		       "backend.sim.used: more than the online memory");
	nblocks = (s->online + s->standby) / s->block_size;
	check_ids(c, nblocks, "backend.sim.faults.configure_eio");
	check_ids(c, nblocks, "backend.sim.faults.offline_ebusy");
	if (cfg->pressure.enabled && cfg->pressure.step % s->block_size)
		err_at(c, where(c, "pressure.step"),
		       "pressure.step: not a multiple of the sim's block size %s", bs);
}

static void finish(struct ctx *c, struct mg_config *cfg)
{
	struct sockaddr_un sa;

	if (strlen(cfg->agent.api_socket) >= sizeof(sa.sun_path))
		err_at(c, where(c, "agent.api_socket"),
		       "agent.api_socket: longer than the %zu bytes a socket path may have",
		       sizeof(sa.sun_path) - 1);

	if (cfg->backend.type == MG_BACKEND_SIM) {
		if (!cfg->backend.sim.present)
			err_at(c, where(c, "backend.type"),
			       "backend.type is sim but there is no backend.sim section");
		if (seen_get(c, "backend.root"))
			err_at(c, where_key(c, "backend.root"),
			       "backend.root does not apply to the sim backend (it reads "
			       "backend.sim.tree)");
	} else if (cfg->backend.sim.present) {
		err_at(c, where_key(c, "backend.sim"),
		       "backend.sim is only used with backend.type: sim (type is %s)",
		       mg_backend_type_name(cfg->backend.type));
	}
	if (cfg->backend.sim.present)
		finish_sim(c, cfg);

	if (cfg->providers.https.enabled) {
		const struct mg_https_config *h = &cfg->providers.https;
		if (h->url)
			check_url_scheme(c, h->url, h->insecure_http, "providers.https.url",
					 "providers.https.insecure_http");
		if (h->key_file && !h->cert_file)
			err_at(c, where_key(c, "providers.https.key_file"),
			       "providers.https.key_file needs providers.https.cert_file");
	}

	for (size_t i = 0; i < cfg->n_hooks; i++) {
		const struct mg_hook *h = &cfg->hooks[i];
		char p[64], q[96], r[96];
		int at;

		snprintf(p, sizeof(p), "hooks[%zu]", i);
		at = where(c, p);
		if (node(c, at) && node(c, at)->type != YAML_MAPPING_NODE)
			continue; /* already reported */
		snprintf(q, sizeof(q), "%s.exec", p);
		snprintf(r, sizeof(r), "%s.webhook", p);
		if (!seen_get(c, q) && !seen_get(c, r))
			err_at(c, at, "%s: needs exec or webhook", p);
		if (h->exec && h->webhook)
			err_at(c, at, "%s: has both exec and webhook; one hook does one of them", p);
		snprintf(q, sizeof(q), "%s.events", p);
		if (h->n_events == 0 && node(c, where(c, q))) {
			yaml_node_t *ev = node(c, where(c, q));
			if (is_null(ev) || (ev->type == YAML_SEQUENCE_NODE &&
					    ev->data.sequence.items.top == ev->data.sequence.items.start))
				err_at(c, where(c, q), "%s: names no event", q);
		}
		if (h->webhook) {
			snprintf(q, sizeof(q), "%s.webhook", p);
			snprintf(r, sizeof(r), "%s.insecure_http", p);
			check_url_scheme(c, h->webhook, h->insecure_http, q, r);
		} else {
			snprintf(q, sizeof(q), "%s.secret_file", p);
			if (h->secret_file)
				err_at(c, where_key(c, q), "%s: only used with webhook", q);
			snprintf(q, sizeof(q), "%s.insecure_http", p);
			if (seen_get(c, q))
				err_at(c, where_key(c, q), "%s: only used with webhook", q);
		}
	}

	if (cfg->pressure.enabled && cfg->pressure.request_above.set &&
	    cfg->pressure.release_below.set) {
		const struct mg_psi_trigger *a = &cfg->pressure.request_above;
		const struct mg_psi_trigger *b = &cfg->pressure.release_below;
		if (a->kind == b->kind && a->window_s == b->window_s &&
		    b->threshold_centi >= a->threshold_centi)
			err_at(c, where(c, "pressure.release_below"),
			       "pressure.release_below: must be below request_above on the same "
			       "average, or memory would be requested and released at once");
	}
}

/* ---------------------------------------------------------------- loading */

static int machine_id(char **out)
{
	_cleanup_free_ char *buf = NULL;
	char why[128];
	size_t len = 0;
	int r;

	r = file_read_all(MACHINE_ID_PATH, 4096, &buf, &len);
	if (r >= 0) {
		while (len && isspace((unsigned char)buf[len - 1]))
			buf[--len] = '\0';
		if (len && check_agent_id(buf, why, sizeof(why))) {
			*out = TAKE_PTR(buf);
			return 0;
		}
	}
	*out = strdup("unknown");
	return *out ? 0 : -ENOMEM;
}

/* Line and column of byte OFFSET, for reader errors that come without a mark. */
static void offset_pos(const char *buf, size_t len, size_t offset, size_t *line, size_t *col)
{
	*line = 0;
	*col = 0;
	for (size_t i = 0; i < offset && i < len; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 0;
		} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
			(*col)++;
		}
	}
}

static void syntax_error(struct ctx *c, yaml_parser_t *p)
{
	const char *problem = p->problem ? p->problem : "unknown problem";

	if (p->error == YAML_MEMORY_ERROR) {
		c->oom = true;
	} else if (p->error == YAML_READER_ERROR) {
		size_t line, col;
		offset_pos(c->buf, c->len, p->problem_offset, &line, &col);
		err_mark(c, line, col, "YAML syntax error: %s (byte 0x%02x)", problem,
			 (unsigned)p->problem_value & 0xff);
	} else if (p->context) {
		err_mark(c, p->problem_mark.line, p->problem_mark.column,
			 "YAML syntax error: %s %s (started at %zu:%zu)", problem, p->context,
			 p->context_mark.line + 1, p->context_mark.column + 1);
	} else {
		err_mark(c, p->problem_mark.line, p->problem_mark.column, "YAML syntax error: %s",
			 problem);
	}
}

/* Parses the buffer into c->doc: exactly one document (or none). */
static void parse(struct ctx *c)
{
	yaml_parser_t p;
	yaml_document_t extra;

	if (!yaml_parser_initialize(&p)) {
		c->oom = true;
		return;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)c->buf, c->len);
	if (!yaml_parser_load(&p, &c->doc)) {
		syntax_error(c, &p);
		yaml_parser_delete(&p);
		return;
	}
	c->have_doc = true;
	if (yaml_document_get_root_node(&c->doc)) {
		if (!yaml_parser_load(&p, &extra)) {
			syntax_error(c, &p);
		} else {
			yaml_node_t *r2 = yaml_document_get_root_node(&extra);
			if (r2 && !is_null(r2)) /* a trailing "---" is harmless */
				err_mark(c, extra.start_mark.line, extra.start_mark.column,
					 "a second YAML document; the configuration is one document");
			yaml_document_delete(&extra);
		}
	}
	yaml_parser_delete(&p);
}

static void ctx_done(struct ctx *c)
{
	diag_flush(c);
	if (c->have_doc)
		yaml_document_delete(&c->doc);
	for (size_t i = 0; i < c->n_seen; i++)
		free(c->seen[i].path);
	free(c->seen);
	free(c->override_of);
	free(c->bad);
}

int config_load_buffer(const char *name, const char *buf, size_t len,
		       const char *const *overrides, struct mg_config **out,
		       struct config_diag *diag)
{
	struct ctx c = { .name = name ? name : "<config>", .buf = buf, .len = len, .diag = diag };
	_cleanup_config_ struct mg_config *cfg = NULL;
	size_t n_syntax;
	int r;

	*out = NULL;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	cfg->source = strdup(c.name);
	if (!cfg->source)
		return -ENOMEM;
	r = apply_defaults(root_keys, cfg);
	if (r < 0)
		return r;

	parse(&c);
	n_syntax = c.n_errors;
	if (c.have_doc && n_syntax == 0 && !c.oom) {
		yaml_node_t *root = yaml_document_get_root_node(&c.doc);
		/* an empty document ("---" alone, only comments) is all defaults */
		int ridx = root && !is_null(root) ? (int)(root - c.doc.nodes.start) + 1 : 0;

		if (overrides && *overrides && ridx == 0) {
			ridx = new_mapping(&c, overrides[0]);
			if (ridx < 0) {
				c.oom = true;
				ridx = 0;
			}
		}
		/* overrides need a mapping to go into; otherwise the walk says
		 * what is wrong with the file */
		for (const char *const *o = overrides;
		     o && *o && !c.oom && ridx && node(&c, ridx)->type == YAML_MAPPING_NODE; o++)
			if (apply_override(&c, ridx, *o) < 0)
				c.oom = true;
		if (ridx && node(&c, ridx)->type != YAML_MAPPING_NODE)
			err_at(&c, ridx, "expected the sections agent, backend, policy, providers, "
			       "hooks, pressure; found %s", node_kind(node(&c, ridx)));
		else if (ridx)
			walk_section(&c, ridx, root_keys, cfg, "");
	}
	if (c.have_doc && !c.oom && n_syntax == 0) {
		/* the tree was walked: check the whole, even after errors in parts */
		if (!cfg->agent.id && machine_id(&cfg->agent.id) < 0)
			c.oom = true;
		else {
			c.in_finish = true;
			finish(&c, cfg);
		}
	}
	ctx_done(&c);
	if (c.oom) {
		if (diag) {
			char *m = NULL;
			if (asprintf(&m, "%s: out of memory", c.name) >= 0) {
				char **n = realloc(diag->msgs, (diag->n + 1) * sizeof(*n));
				if (n) {
					diag->msgs = n;
					diag->msgs[diag->n++] = m;
				} else {
					free(m);
				}
			}
		}
		return -ENOMEM;
	}
	if (c.n_errors)
		return -EINVAL;
	*out = TAKE_PTR(cfg);
	return 0;
}

int config_load(const char *path, const char *const *overrides, struct mg_config **out,
		struct config_diag *diag)
{
	struct ctx c = { .name = path, .diag = diag };
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	r = file_read_all(path, MG_CONFIG_MAX_BYTES, &buf, &len);
	if (r == -EFBIG) {
		err_plain(&c, "larger than %d bytes; not a memgrant configuration",
			  MG_CONFIG_MAX_BYTES);
		ctx_done(&c);
		return -EINVAL;
	}
	if (r < 0) {
		err_plain(&c, "cannot read: %s (%s)", strerror(-r), errno_name(-r));
		ctx_done(&c);
		return r;
	}
	return config_load_buffer(path, buf, len, overrides, out, diag);
}
