/* SPDX-License-Identifier: MIT */
/*
 * config_load(): defaults, the shipped config/memgrant.yaml, a file with every
 * key, and every kind of bad input.  The bad fixtures under
 * tests/fixtures/config/bad/ end with "#> LINE:COLUMN: message" comments: the
 * exact messages, in order, that loading them must produce (comments at the
 * end so they do not move the positions they name).
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"
#include "lib/fileio.h"
#include "lib/util.h"

#define GIB (1024ULL * 1024 * 1024)
#define MIB (1024ULL * 1024)

/* Fixtures relative to the source tree; MG_SRCDIR overrides (out-of-tree runs). */
static const char *srcdir(void)
{
	const char *s = getenv("MG_SRCDIR");
	return s && *s ? s : ".";
}

static char *fixture(const char *name)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/tests/fixtures/config/%s", srcdir(), name) > 0);
	return p;
}

/* Loads BUF; on failure prints the messages (so a failing test says why). */
static int load_str(const char *buf, const char *const *ov, struct mg_config **out,
		    struct config_diag *d)
{
	int r = config_load_buffer("test.yaml", buf, strlen(buf), ov, out, d);
	return r;
}

static struct mg_config *load_ok(const char *buf)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	struct mg_config *c = (void *)0x1;
	int r = load_str(buf, NULL, &c, &d);

	for (size_t i = 0; i < d.n; i++)
		print_message("unexpected: %s\n", d.msgs[i]);
	assert_int_equal(r, 0);
	assert_int_equal(d.n, 0);
	assert_non_null(c);
	return c;
}

/* Loads BUF expecting failure, and exactly the message WANT (after "test.yaml:"). */
static void load_bad1(const char *buf, const char *want)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	struct mg_config *c = (void *)0x1;
	_cleanup_free_ char *full = NULL;
	int r = load_str(buf, NULL, &c, &d);

	assert_int_equal(r, -EINVAL);
	assert_null(c); /* nothing partial is handed out */
	assert_true(asprintf(&full, "test.yaml:%s", want) > 0);
	for (size_t i = 0; i < d.n; i++)
		print_message("got: %s\n", d.msgs[i]);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], full);
}

static void assert_defaults(const struct mg_config *c)
{
	assert_non_null(c->agent.id);
	assert_string_equal(c->agent.state_dir, LOCALSTATEDIR "/lib/memgrant");
	assert_string_equal(c->agent.api_socket, RUNSTATEDIR "/memgrant/api.sock");
	assert_string_equal(c->agent.api_group, "memgrant");
	assert_int_equal(c->agent.api_body_limit, 64 * 1024);
	assert_int_equal(c->agent.log_level, MG_LOG_INFO);
	assert_int_equal(c->agent.seccomp, MG_SECCOMP_KILL);

	assert_int_equal(c->backend.type, MG_BACKEND_SYSFS);
	assert_string_equal(c->backend.root, "/");
	assert_true(c->backend.own_onlining);
	assert_false(c->backend.sim.present);

	assert_int_equal(c->policy.memmap_on_memory, MG_MEMMAP_AUTO);
	assert_int_equal(c->policy.reserve, 256 * MIB);
	assert_int_equal(c->policy.zone, MEM_ZONE_AUTO);
	assert_int_equal(c->policy.movable_ratio, 301);
	assert_int_equal(c->policy.revoke_budget_ms, 120000);
	assert_int_equal(c->policy.block_op_timeout_ms, 0);

	assert_false(c->providers.https.enabled);
	assert_false(c->providers.channel.enabled);
	assert_int_equal(c->n_hooks, 0);
	assert_null(c->hooks);
	assert_false(c->pressure.enabled);
}

/* An empty file is a valid configuration: every default. */
static void test_empty_is_defaults(void **state)
{
	_cleanup_config_ struct mg_config *c = load_ok("");

	assert_defaults(c);
	assert_string_equal(c->source, "test.yaml");
	config_free(TAKE_PTR(c));

	c = load_ok("# only a comment\n");
	assert_defaults(c);
	config_free(TAKE_PTR(c));

	c = load_ok("---\n");
	assert_defaults(c);
}

/* Without agent.id the id is /etc/machine-id, or "unknown". */
static void test_agent_id_default(void **state)
{
	_cleanup_config_ struct mg_config *c = load_ok("agent: {log_level: info}\n");
	_cleanup_free_ char *mid = NULL;
	size_t len = 0;

	if (file_read_all("/etc/machine-id", 4096, &mid, &len) == 0) {
		while (len && (mid[len - 1] == '\n' || mid[len - 1] == ' '))
			mid[--len] = '\0';
		if (len)
			assert_string_equal(c->agent.id, mid);
		else
			assert_string_equal(c->agent.id, "unknown");
	} else {
		assert_string_equal(c->agent.id, "unknown");
	}
}

/* The shipped config/memgrant.yaml loads and says what the compiled defaults say. */
static void test_shipped_config(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_config_ struct mg_config *c = NULL;
	_cleanup_free_ char *path = NULL;
	int r;

	assert_true(asprintf(&path, "%s/config/memgrant.yaml", srcdir()) > 0);
	r = config_load(path, NULL, &c, &d);
	for (size_t i = 0; i < d.n; i++)
		print_message("unexpected: %s\n", d.msgs[i]);
	assert_int_equal(r, 0);
	assert_defaults(c);
	assert_string_equal(c->source, path);
}

static void test_full_config(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_config_ struct mg_config *c = NULL;
	_cleanup_free_ char *path = fixture("good/full.yaml");
	const struct mg_sim_config *s;
	int r;

	r = config_load(path, NULL, &c, &d);
	for (size_t i = 0; i < d.n; i++)
		print_message("unexpected: %s\n", d.msgs[i]);
	assert_int_equal(r, 0);

	assert_string_equal(c->agent.id, "guest-7");
	assert_string_equal(c->agent.state_dir, "/srv/memgrant/state");
	assert_string_equal(c->agent.api_socket, "/srv/memgrant/api.sock");
	assert_string_equal(c->agent.api_group, "operators");
	assert_int_equal(c->agent.api_body_limit, 128 * 1024);
	assert_int_equal(c->agent.log_level, MG_LOG_DEBUG);
	assert_int_equal(c->agent.log_level, 7); /* LOG_DEBUG */

	assert_int_equal(c->backend.type, MG_BACKEND_SIM);
	assert_string_equal(c->backend.root, "/"); /* not given: the default stays */
	assert_false(c->backend.own_onlining);
	s = &c->backend.sim;
	assert_true(s->present);
	assert_string_equal(s->state, "/srv/memgrant/sim.json");
	assert_int_equal(s->online, 4 * GIB);
	assert_int_equal(s->standby, 8 * GIB);
	assert_int_equal(s->block_size, 256 * MIB);
	assert_false(s->memmap_on_memory_supported);
	assert_false(s->has_firmware);
	assert_int_equal(s->auto_online_blocks, MEM_AUTO_ONLINE_MOVABLE);
	assert_string_equal(mem_auto_online_name(s->auto_online_blocks), "online_movable");
	assert_int_equal(s->used, 3 * GIB);
	assert_string_equal(s->tree, "/srv/memgrant/sim-root");
	assert_int_equal(s->faults.configure_eio.n, 2);
	assert_int_equal(s->faults.configure_eio.ids[0], 18);
	assert_int_equal(s->faults.configure_eio.ids[1], 20);
	assert_int_equal(s->faults.offline_ebusy.n, 1);
	assert_int_equal(s->faults.offline_ebusy.ids[0], 17);
	assert_int_equal(s->faults.latency_ms, 250);

	assert_int_equal(c->policy.memmap_on_memory, MG_MEMMAP_ALWAYS);
	assert_int_equal(c->policy.reserve, 512 * MIB);
	assert_int_equal(c->policy.zone, MEM_ZONE_MOVABLE);
	assert_int_equal(c->policy.movable_ratio, 150);
	assert_int_equal(c->policy.revoke_budget_ms, 300000);
	assert_int_equal(c->policy.block_op_timeout_ms, 90000);

	assert_true(c->providers.https.enabled);
	assert_string_equal(c->providers.https.url, "http://cp.example:8080/base/");
	assert_string_equal(c->providers.https.ca_file, "/etc/memgrant/ca.pem");
	assert_string_equal(c->providers.https.cert_file, "/etc/memgrant/client.pem");
	assert_string_equal(c->providers.https.key_file, "/etc/memgrant/client.key");
	assert_string_equal(c->providers.https.token_file, "/etc/memgrant/token");
	assert_int_equal(c->providers.https.wait_ms, 30000);
	assert_true(c->providers.https.insecure_http);
	assert_true(c->providers.channel.enabled);
	assert_string_equal(c->providers.channel.path, "/dev/virtio-ports/org.memgrant.1");

	assert_int_equal(c->n_hooks, 2);
	assert_int_equal(c->hooks[0].n_events, 2);
	assert_string_equal(c->hooks[0].events[0], "grant.applied");
	assert_string_equal(c->hooks[0].events[1], "grant.partial");
	assert_string_equal(c->hooks[0].exec, "/etc/memgrant/hooks.d/notify");
	assert_null(c->hooks[0].webhook);
	assert_int_equal(c->hooks[0].timeout_ms, 2000);
	assert_int_equal(c->hooks[1].n_events, 1);
	assert_string_equal(c->hooks[1].events[0], "*");
	assert_null(c->hooks[1].exec);
	assert_string_equal(c->hooks[1].webhook, "https://hooks.example/memgrant");
	assert_string_equal(c->hooks[1].secret_file, "/etc/memgrant/webhook.secret");
	assert_int_equal(c->hooks[1].timeout_ms, 10000); /* default */

	assert_true(c->pressure.enabled);
	assert_true(c->pressure.request_above.set);
	assert_int_equal(c->pressure.request_above.kind, MG_PSI_FULL);
	assert_int_equal(c->pressure.request_above.window_s, 60);
	assert_true(c->pressure.request_above.above);
	assert_int_equal(c->pressure.request_above.threshold_centi, 1250);
	assert_true(c->pressure.release_below.set);
	assert_int_equal(c->pressure.release_below.kind, MG_PSI_SOME);
	assert_int_equal(c->pressure.release_below.window_s, 300);
	assert_false(c->pressure.release_below.above);
	assert_int_equal(c->pressure.release_below.threshold_centi, 25);
	assert_int_equal(c->pressure.step, 512 * MIB);
	assert_int_equal(c->pressure.cooldown_ms, 3600000);
}

/* backend.sim: {} gives the sim's defaults; empty sections are defaults and
 * a provider section that is present is enabled. */
static void test_sim_and_empty_sections(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_config_ struct mg_config *c = NULL;
	_cleanup_free_ char *sim = fixture("good/sim.yaml");
	_cleanup_free_ char *empty = fixture("good/empty-sections.yaml");

	assert_int_equal(config_load(sim, NULL, &c, &d), 0);
	assert_true(c->backend.sim.present);
	assert_string_equal(c->backend.sim.state, RUNSTATEDIR "/memgrant-sim/sim.json");
	assert_int_equal(c->backend.sim.online, 2 * GIB);
	assert_int_equal(c->backend.sim.standby, 2 * GIB);
	assert_int_equal(c->backend.sim.block_size, 128 * MIB);
	assert_true(c->backend.sim.memmap_on_memory_supported);
	assert_true(c->backend.sim.has_firmware);
	assert_int_equal(c->backend.sim.auto_online_blocks, MEM_AUTO_ONLINE_OFFLINE);
	assert_int_equal(c->backend.sim.used, 0);
	assert_null(c->backend.sim.tree);
	assert_int_equal(c->backend.sim.faults.configure_eio.n, 0);
	assert_int_equal(c->backend.sim.faults.latency_ms, 0);
	config_free(TAKE_PTR(c));

	assert_int_equal(config_load(empty, NULL, &c, &d), 0);
	assert_int_equal(d.n, 0);
	assert_true(c->providers.channel.enabled);
	assert_string_equal(c->providers.channel.path, "/dev/virtio-ports/org.memgrant.0");
	assert_false(c->providers.https.enabled);
	assert_int_equal(c->n_hooks, 0);
}

/* The edges of the ranges, on the side that is accepted: the smallest sim
 * block (1M) and a PSI threshold of exactly 100%. */
static void test_range_edges_accepted(void **state)
{
	struct mg_config *c;

	(void)state;
	c = load_ok("backend:\n  type: sim\n  sim:\n    state: /tmp/memgrant-edge/sim.json\n    online: 64M\n"
		    "    standby: 64M\n    block_size: 1M\n");
	assert_int_equal(c->backend.sim.block_size, MIB);
	config_free(c);
	c = load_ok("pressure:\n  request_above: \"some avg10>100\"\n  release_below: \"some avg10<20\"\n  step: 1G\n");
	assert_int_equal(c->pressure.request_above.threshold_centi, 10000);
	config_free(c);
}

/* Every bad fixture yields exactly the messages its "#>" lines list. */
static void check_bad_fixture(const char *path)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_free_ char *buf = NULL;
	struct mg_config *c = (void *)0x1;
	size_t len = 0, nwant = 0;
	char *line, *save = NULL;
	int r;

	assert_int_equal(file_read_all(path, 1 << 20, &buf, &len), 0);
	r = config_load(path, NULL, &c, &d);
	if (r != -EINVAL)
		print_message("%s: loaded without error\n", path);
	assert_int_equal(r, -EINVAL);
	assert_null(c);

	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		_cleanup_free_ char *want = NULL;
		if (!startswith(line, "#> "))
			continue;
		assert_true(asprintf(&want, "%s:%s", path, line + 3) > 0);
		if (nwant >= d.n || !streq(d.msgs[nwant], want)) {
			print_message("%s: message %zu\n  want: %s\n  got:  %s\n", path, nwant, want,
				      nwant < d.n ? d.msgs[nwant] : "(none)");
			for (size_t i = 0; i < d.n; i++)
				print_message("  all: %s\n", d.msgs[i]);
			fail();
		}
		nwant++;
	}
	assert_true(nwant > 0); /* a fixture without expectations proves nothing */
	if (nwant != d.n)
		for (size_t i = nwant; i < d.n; i++)
			print_message("%s: extra message: %s\n", path, d.msgs[i]);
	assert_int_equal(nwant, d.n);
}

static int name_cmp(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int yaml_only(const struct dirent *e)
{
	size_t n = strlen(e->d_name);
	return n > 5 && streq(e->d_name + n - 5, ".yaml");
}

static void test_bad_fixtures(void **state)
{
	_cleanup_free_ char *dir = fixture("bad");
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, yaml_only, name_cmp);

	assert_true(n >= 15);
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *p = NULL;
		assert_true(asprintf(&p, "%s/%s", dir, ents[i]->d_name) > 0);
		check_bad_fixture(p);
		free(ents[i]);
	}
	free(ents);
}

/* The kinds of bad input one by one, each with its position and message. */
static void test_unknown_key(void **state)
{
	load_bad1("policy:\n  zone: auto\n  zonee: movable\n",
		  "3:3: policy: unknown key 'zonee': did you mean 'zone'? (valid keys: memmap_on_memory, reserve, zone, "
		  "movable_ratio, revoke_budget, block_op_timeout)");
	load_bad1("agent: {}\nbackends: {}\n",
		  "2:1: unknown key 'backends': did you mean 'backend'? (valid keys: agent, backend, policy, providers, "
		  "hooks, pressure)");
	/* a swap of two letters is one edit; nothing near: no guess */
	load_bad1("agent:\n  api_scoket: /run/x.sock\n",
		  "2:3: agent: unknown key 'api_scoket': did you mean 'api_socket'? (valid keys: id, state_dir, "
		  "api_socket, api_group, api_socket_mode, api_body_limit, log_level, user, seccomp)");
	load_bad1("agent:\n  colour: red\n",
		  "2:3: agent: unknown key 'colour' (valid keys: id, state_dir, api_socket, api_group, "
		  "api_socket_mode, api_body_limit, log_level, user, seccomp)");
}

static void test_bad_sizes(void **state)
{
	load_bad1("policy: {reserve: 2X}\n",
		  "1:19: policy.reserve: '2X' is not a size (bytes, or a number with K, M, G or T)");
	load_bad1("policy:\n  reserve: -1G\n",
		  "2:12: policy.reserve: '-1G' is not a size (sizes cannot be negative; bytes, "
		  "or a number with K, M, G or T)");
	load_bad1("policy:\n  reserve: 16777216T\n", "2:12: policy.reserve: '16777216T' is too large");
	load_bad1("policy:\n  reserve: 18446744073709551616\n",
		  "2:12: policy.reserve: '18446744073709551616' is too large");
	load_bad1("policy:\n  reserve: \"\"\n",
		  "2:12: policy.reserve: '' is not a size (bytes, or a number with K, M, G or T)");
}

static void test_bad_durations(void **state)
{
	load_bad1("policy:\n  revoke_budget: 2 min\n",
		  "2:18: policy.revoke_budget: '2 min' is not a duration (a number with ms, s, m or "
		  "h; plain numbers are seconds)");
	load_bad1("policy:\n  revoke_budget: 500ms\n",
		  "2:18: policy.revoke_budget: '500ms' is out of range (1s to 24h)");
	load_bad1("policy:\n  revoke_budget: 99999999999999999999h\n",
		  "2:18: policy.revoke_budget: '99999999999999999999h' is too long");
}

static void test_bad_enums(void **state)
{
	load_bad1("policy:\n  memmap_on_memory: maybe\n",
		  "2:21: policy.memmap_on_memory: 'maybe' is not one of auto, always, never");
	load_bad1("policy:\n  zone: DMA\n", "2:9: policy.zone: 'DMA' is not one of auto, movable, normal");
	load_bad1("backend: {type: [sysfs]}\n",
		  "1:17: backend.type: expected one of sysfs, sim, found a list");
	/* no operator words for a security switch: exactly the three */
	load_bad1("agent:\n  seccomp: Off\n", "2:12: agent.seccomp: 'Off' is not one of kill, log, off "
		  "(write it in lowercase: 'off')");
	load_bad1("agent:\n  seccomp: false\n", "2:12: agent.seccomp: 'false' is not one of kill, log, off");
}

/* agent.seccomp: kill (the default), log, off (qemu-user, docs/security.md) */
static void test_seccomp_actions(void **state)
{
	static const struct {
		const char *word;
		enum mg_seccomp_action want;
	} a[] = { { "kill", MG_SECCOMP_KILL }, { "log", MG_SECCOMP_LOG }, { "off", MG_SECCOMP_OFF } };

	for (size_t i = 0; i < ARRAY_SIZE(a); i++) {
		_cleanup_free_ char *y = NULL;
		assert_true(asprintf(&y, "agent:\n  seccomp: %s\n", a[i].word) > 0);
		_cleanup_config_ struct mg_config *c = load_ok(y);
		assert_int_equal(c->agent.seccomp, a[i].want);
		assert_string_equal(mg_seccomp_action_name(c->agent.seccomp), a[i].word);
	}
}

/* The operators' words: memmap on/off/1/0/true/false, zones as lsmem writes them. */
static void test_operator_words(void **state)
{
	static const struct {
		const char *memmap;
		int want;
	} m[] = { { "on", MG_MEMMAP_ALWAYS }, { "Off", MG_MEMMAP_NEVER }, { "1", MG_MEMMAP_ALWAYS },
		  { "'0'", MG_MEMMAP_NEVER }, { "true", MG_MEMMAP_ALWAYS }, { "Never", MG_MEMMAP_NEVER },
		  { "AUTO", MG_MEMMAP_AUTO } };
	static const struct {
		const char *zone;
		int want;
	} z[] = { { "Movable", MEM_ZONE_MOVABLE }, { "NORMAL", MEM_ZONE_NORMAL }, { "Auto", MEM_ZONE_AUTO } };

	for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
		_cleanup_free_ char *y = NULL;
		assert_true(asprintf(&y, "policy:\n  memmap_on_memory: %s\n", m[i].memmap) > 0);
		_cleanup_config_ struct mg_config *c = load_ok(y);
		assert_int_equal(c->policy.memmap_on_memory, m[i].want);
	}
	for (size_t i = 0; i < ARRAY_SIZE(z); i++) {
		_cleanup_free_ char *y = NULL;
		assert_true(asprintf(&y, "policy:\n  zone: %s\n", z[i].zone) > 0);
		_cleanup_config_ struct mg_config *c = load_ok(y);
		assert_int_equal(c->policy.zone, z[i].want);
	}
	{
		_cleanup_config_ struct mg_config *c = load_ok("policy:\n  reserve: 1.5G\n");
		assert_int_equal(c->policy.reserve, 1536 * MIB);
	}
}

static void test_wrong_types(void **state)
{
	load_bad1("agent:\n  state_dir: {a: b}\n",
		  "2:14: agent.state_dir: expected an absolute path, found a mapping");
	load_bad1("backend:\n  own_onlining: 1\n",
		  "2:17: backend.own_onlining: expected true or false, not '1'");
	load_bad1("hooks:\n  - events: grant.applied\n    exec: /bin/true\n",
		  "2:13: hooks[0].events: expected a list of strings such as [grant.applied], "
		  "found a single value");
	load_bad1("backend:\n  sim:\n    faults: {configure_eio: 7}\n  type: sim\n",
		  "3:29: backend.sim.faults.configure_eio: expected a list of block ids such as "
		  "[3, 4], found a single value");
	/* a quoted word is still the word: "true" is true, "5" is 5 */
	{
		_cleanup_config_ struct mg_config *c =
			load_ok("backend: {own_onlining: \"false\"}\npolicy: {movable_ratio: \"5\"}\n");
		assert_false(c->backend.own_onlining);
		assert_int_equal(c->policy.movable_ratio, 5);
	}
}

static void test_duplicate_keys(void **state)
{
	load_bad1("policy:\n  zone: auto\n  reserve: 1G\n  zone: normal\n",
		  "4:3: duplicate key policy.zone (first given at 2:3)");
	load_bad1("hooks:\n  - events: [\"*\"]\n    exec: /bin/a\n    exec: /bin/b\n",
		  "4:5: duplicate key hooks[0].exec (first given at 3:5)");
}

static void test_syntax_errors(void **state)
{
	load_bad1("agent:\n  log_level: info\n\tstate_dir: /x\n",
		  "3:1: YAML syntax error: found a tab character that violates indentation while "
		  "scanning a plain scalar (started at 2:14)");
	load_bad1("policy: {zone: auto\n",
		  "2:1: YAML syntax error: did not find expected ',' or '}' while parsing a flow "
		  "mapping (started at 1:9)");
	load_bad1("agent: &a {log_level: info}\nbackend: *b\n",
		  "2:10: YAML syntax error: found undefined alias");
}

static void test_nul_in_value(void **state)
{
	load_bad1("agent:\n  api_group: \"mem\\0grant\"\n",
		  "2:14: agent.api_group: contains a NUL character");
}

/* On any error *out is NULL, even when it pointed somewhere before. */
static void test_nothing_partial(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	struct mg_config *c = (void *)0x1;
	const char *buf = "agent:\n  log_level: debug\npolicy:\n  zone: wrong\n";

	assert_int_equal(config_load_buffer("x", buf, strlen(buf), NULL, &c, &d), -EINVAL);
	assert_null(c);
	assert_int_equal(d.n, 1);
	/* NULL diag: the verdict only */
	c = (void *)0x1;
	assert_int_equal(config_load_buffer("x", buf, strlen(buf), NULL, &c, NULL), -EINVAL);
	assert_null(c);
}

static void test_missing_file(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	struct mg_config *c = (void *)0x1;

	assert_int_equal(config_load("/nonexistent/memgrant.yaml", NULL, &c, &d), -ENOENT);
	assert_null(c);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "/nonexistent/memgrant.yaml: cannot read: No such file or "
				       "directory (ENOENT)");
}

/* A file with hundreds of problems gives a bounded list that says so. */
static void test_many_errors_capped(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_free_ char *buf = NULL;
	struct mg_config *c = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	fputs("agent:\n", f);
	for (int i = 0; i < 300; i++)
		fprintf(f, "  bogus%d: 1\n", i);
	fclose(f);
	assert_int_equal(config_load_buffer("many", buf, len, NULL, &c, &d), -EINVAL);
	assert_int_equal(d.n, 101);
	assert_string_equal(d.msgs[100], "many: 200 more errors not shown");
}

static void test_overrides(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_config_ struct mg_config *c = NULL;
	const char *file = "policy:\n  zone: movable\nproviders:\n";
	const char *const ok[] = { "policy.zone=normal", "agent.log_level=debug",
				   "backend.type=sim", "backend.sim.online=1G",
				   "providers.channel.path=/dev/vport0p1", "agent.seccomp=off", NULL };
	const char *const bad[] = { "policy.reserve=lots", "nodot", "policy.zone.x=1",
				    "agent.nokey=1", NULL };

	assert_int_equal(config_load_buffer("o.yaml", file, strlen(file), ok, &c, &d), 0);
	assert_int_equal(c->policy.zone, MEM_ZONE_NORMAL);
	assert_int_equal(c->agent.log_level, MG_LOG_DEBUG);
	assert_int_equal(c->backend.type, MG_BACKEND_SIM);
	assert_true(c->backend.sim.present);
	assert_int_equal(c->backend.sim.online, GIB);
	assert_true(c->providers.channel.enabled);
	assert_string_equal(c->providers.channel.path, "/dev/vport0p1");
	assert_int_equal(c->agent.seccomp, MG_SECCOMP_OFF);
	config_free(TAKE_PTR(c));

	assert_int_equal(config_load_buffer("o.yaml", file, strlen(file), bad, &c, &d), -EINVAL);
	assert_null(c);
	for (size_t i = 0; i < d.n; i++)
		print_message("%s\n", d.msgs[i]);
	assert_int_equal(d.n, 4);
	assert_string_equal(d.msgs[0], "o.yaml: override 'nodot': expected section.key=value");
	assert_string_equal(d.msgs[1], "o.yaml: override 'policy.zone.x=1': 'policy.zone' is "
				       "not a section");
	assert_string_equal(d.msgs[2], "o.yaml: override 'policy.reserve=lots': policy.reserve: "
				       "'lots' is not a size (bytes, or a number with K, M, G or T)");
	assert_string_equal(d.msgs[3], "o.yaml: override 'agent.nokey=1': agent: unknown key "
				       "'nokey' (valid keys: id, state_dir, api_socket, api_group, api_socket_mode, "
				       "api_body_limit, log_level, user, seccomp)");
}

/* Overrides into an empty file, and into a file that is not a mapping. */
static void test_overrides_edge(void **state)
{
	_cleanup_config_diag_ struct config_diag d = { 0 };
	_cleanup_config_ struct mg_config *c = NULL;
	const char *const ov[] = { "policy.zone=normal", "pressure.request_above=some avg10>5",
				   NULL };

	assert_int_equal(config_load_buffer("e", "", 0, ov, &c, &d), 0);
	assert_int_equal(c->policy.zone, MEM_ZONE_NORMAL);
	assert_true(c->pressure.enabled);
	assert_int_equal(c->pressure.request_above.threshold_centi, 500);
	config_free(TAKE_PTR(c));

	assert_int_equal(config_load_buffer("e", "---\n", 4, ov, &c, &d), 0);
	assert_int_equal(c->policy.zone, MEM_ZONE_NORMAL);
	config_free(TAKE_PTR(c));

	assert_int_equal(config_load_buffer("l", "- a\n", 4, ov, &c, &d), -EINVAL);
	assert_null(c);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.msgs[0], "l:1:1: expected the sections agent, backend, policy, "
				       "providers, hooks, pressure; found a list");
}

static void test_names(void **state)
{
	assert_string_equal(mg_backend_type_name(MG_BACKEND_SIM), "sim");
	assert_string_equal(mg_memmap_policy_name(MG_MEMMAP_NEVER), "never");
	assert_string_equal(mem_zone_name(MEM_ZONE_NORMAL), "normal");
	assert_string_equal(mg_log_level_name(MG_LOG_WARNING), "warning");
	assert_string_equal(mem_auto_online_name(MEM_AUTO_ONLINE_KERNEL), "online_kernel");
	assert_string_equal(mem_zone_name((enum mem_zone)42), "?");
	assert_string_equal(mg_seccomp_action_name(MG_SECCOMP_KILL), "kill");
	assert_string_equal(mg_seccomp_action_name((enum mg_seccomp_action)3), "?");
	config_free(NULL);
	config_diag_clear(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_is_defaults),
		cmocka_unit_test(test_agent_id_default),
		cmocka_unit_test(test_shipped_config),
		cmocka_unit_test(test_full_config),
		cmocka_unit_test(test_sim_and_empty_sections),
		cmocka_unit_test(test_range_edges_accepted),
		cmocka_unit_test(test_bad_fixtures),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_bad_durations),
		cmocka_unit_test(test_bad_enums),
		cmocka_unit_test(test_seccomp_actions),
		cmocka_unit_test(test_operator_words),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_nul_in_value),
		cmocka_unit_test(test_nothing_partial),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_many_errors_capped),
		cmocka_unit_test(test_overrides),
		cmocka_unit_test(test_overrides_edge),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
