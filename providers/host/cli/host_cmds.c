/* SPDX-License-Identifier: MIT */
/*
 * memgrant-host's subcommands: grant, revoke, status, watch.  Each connects
 * (libvirt or --socket), syncs, does its work and acknowledges every report
 * it prints, so a report leaves the guest's outbox only once it was shown.
 */
#include <getopt.h>

#include "lib/wire/message.h"
#include "lib/timeutil.h"
#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"
#include "providers/host/host.h"
#include "providers/host/serve/serve.h"

struct conn {
	struct host_transport *t;
	struct host_session s;
	bool have_session;
};

static void conn_close(struct conn *c)
{
	if (c->have_session)
		session_done(&c->s);
	transport_close(c->t);
	c->t = NULL;
	c->have_session = false;
}

/* Connects and syncs; prints the reason and returns an exit code when it fails. */
static int conn_open(const struct host_opts *o, const char *domain, struct conn *c)
{
	char why[2048] = "";
	int r;

	*c = (struct conn){ 0 };
	if (o->socket_path)
		r = transport_open_socket(o->socket_path, &c->t, why, sizeof(why));
	else
		r = transport_open_libvirt(o->uri, domain, &c->t, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s\n", why[0] ? why : strerror(-r));
		return HOST_EXIT_CONNECT;
	}
	r = session_init(&c->s, c->t);
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s\n", strerror(-r));
		conn_close(c);
		return HOST_EXIT_REFUSED;
	}
	c->have_session = true;
	r = session_sync(&c->s, ((int64_t)mono_ms()) + o->timeout_ms);
	if (r == -ETIMEDOUT) {
		char d[32];
		snprintf(d, sizeof(d), "%.1fs", (double)o->timeout_ms / 1000);
		fprintf(stderr,
			"memgrant-host: the memgrant agent of %s did not answer within %s "
			"(is memgrantd running in the guest with providers.channel enabled?)\n",
			domain, d);
		conn_close(c);
		return HOST_EXIT_NO_ANSWER;
	}
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s: the channel closed before the agent answered (%s)\n", domain,
			strerror(-r));
		conn_close(c);
		return HOST_EXIT_CONNECT;
	}
	return 0;
}

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static uint64_t juint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static void print_json(json_t *m)
{
	_cleanup_free_ char *text = json_dumps(m, JSON_COMPACT);
	if (text)
		printf("%s\n", text);
}

static void print_status(const struct host_opts *o, json_t *m)
{
	char req[16], app[16];
	json_t *err = json_object_get(m, "error"), *blocks = json_object_get(m, "blocks"), *b;
	size_t i;

	if (o->json) {
		print_json(m);
		return;
	}
	size_format(juint(m, "requested_bytes"), req, sizeof(req));
	size_format(juint(m, "applied_bytes"), app, sizeof(app));
	printf("%s%s%s: %s, %s of %s (generation %llu)", jstr(m, "id") ?: "?", jstr(m, "kind") ? " " : "",
	       jstr(m, "kind") ?: "", jstr(m, "state") ?: "?", app, req, (unsigned long long)juint(m, "generation"));
	if (json_is_object(err))
		printf(": %s: %s", jstr(err, "code") ?: "?", jstr(err, "message") ?: "");
	printf("\n");
	json_array_foreach(blocks, i, b) {
		json_t *be = json_object_get(b, "error");
		if (json_is_object(be))
			printf("  block %llu: %s: %s\n", (unsigned long long)juint(b, "block"), jstr(be, "code") ?: "?",
			       jstr(be, "message") ?: "");
	}
}

/*
 * A report of an earlier command (or of memgrant-host serve), delivered now
 * because the agent keeps reports until a host acknowledges them.  It is
 * not part of this command's answer: it goes to stderr, labelled, so stdout
 * holds only the answer (scripts read it), and it is still shown once
 * before the acknowledgement removes it from the guest's outbox.
 */
static void print_earlier(const struct host_opts *o, const char *domain, json_t *m)
{
	char req[16], app[16];
	_cleanup_free_ char *text = NULL;

	if (o->json) {
		text = json_dumps(m, JSON_COMPACT);
		fprintf(stderr, "memgrant-host: %s: earlier report: %s\n", domain, text ? text : "?");
		return;
	}
	if (!streq(jstr(m, "type"), "status")) {
		size_format(juint(m, "bytes"), req, sizeof(req));
		fprintf(stderr, "memgrant-host: %s: earlier %s %s of %s: %s\n", domain, jstr(m, "type"),
			jstr(m, "id") ?: "?", req, jstr(m, "reason") ?: "");
		return;
	}
	size_format(juint(m, "requested_bytes"), req, sizeof(req));
	size_format(juint(m, "applied_bytes"), app, sizeof(app));
	fprintf(stderr, "memgrant-host: %s: earlier report: %s%s%s: %s, %s of %s (generation %llu)\n", domain,
		jstr(m, "id") ?: "?", jstr(m, "kind") ? " " : "", jstr(m, "kind") ?: "", jstr(m, "state") ?: "?", app,
		req, (unsigned long long)juint(m, "generation"));
}

static void print_error(const char *domain, json_t *m)
{
	fprintf(stderr, "memgrant-host: %s: the agent refused%s%s: %s: %s\n", domain, jstr(m, "id") ? " " : "",
		jstr(m, "id") ?: "", jstr(m, "code") ?: "?", jstr(m, "message") ?: "");
}

static int exit_for_state(const char *state)
{
	if (streq(state, "partial"))
		return HOST_EXIT_PARTIAL;
	if (streq(state, "failed") || streq(state, "rejected") || streq(state, "cancelled"))
		return HOST_EXIT_REFUSED;
	return HOST_EXIT_OK;
}

static bool is_final(const char *state)
{
	enum msg_state s;
	return state && msg_state_parse(state, &s) == 0 && msg_state_is_final(s);
}

/*
 * Sends REQ (a grant or revoke without id/generation when ID is NULL) and
 * prints the answers; with WAIT until the final state.
 */
static int run_request(const struct host_opts *o, const char *domain, json_t *req, const char *id_opt, bool wait)
{
	struct conn c;
	char why[512] = "", id[MSG_ID_MAX + 1], last_state[32] = "";
	uint64_t gen;
	int64_t deadline;
	int r, rc;

	rc = conn_open(o, domain, &c);
	if (rc)
		return rc;
	r = host_state_next_generation(o->state_dir, domain, c.s.agent_generation, &gen, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s\n", why[0] ? why : strerror(-r));
		conn_close(&c);
		return HOST_EXIT_STATE;
	}
	if (id_opt)
		snprintf(id, sizeof(id), "%s", id_opt);
	else
		snprintf(id, sizeof(id), "host-%llu", (unsigned long long)gen);
	json_object_set_new(req, "id", json_string(id));
	json_object_set_new(req, "generation", json_integer((json_int_t)gen));
	r = session_send(&c.s, req);
	if (r < 0) {
		fprintf(stderr, "memgrant-host: %s: cannot send: %s\n", domain, strerror(-r));
		conn_close(&c);
		return HOST_EXIT_CONNECT;
	}

	deadline = ((int64_t)mono_ms()) + o->timeout_ms;
	rc = -1;
	while (rc < 0) {
		json_t *m = NULL;
		const char *type, *state;

		r = session_next(&c.s, deadline, &m);
		if (r == -ETIMEDOUT) {
			fprintf(stderr, "memgrant-host: the memgrant agent of %s did not answer %s within %llds\n",
				domain, id, (long long)(o->timeout_ms / 1000));
			rc = HOST_EXIT_NO_ANSWER;
			break;
		}
		if (r < 0) {
			fprintf(stderr,
				"memgrant-host: %s: the channel closed before the %s status of %s arrived (%s); "
				"'memgrant-host watch %s' shows it when it does\n",
				domain, wait ? "final" : "first", id, strerror(-r), domain);
			rc = HOST_EXIT_CONNECT;
			break;
		}
		type = jstr(m, "type");
		if (streq(type, "status")) {
			state = jstr(m, "state");
			if (!streq(jstr(m, "id"), id)) {
				print_earlier(o, domain, m);
			} else if (!streq(state, last_state)) {
				print_status(o, m);
				snprintf(last_state, sizeof(last_state), "%s", state ?: "");
			}
			r = session_ack(&c.s, m);
			if (r < 0)
				fprintf(stderr, "memgrant-host: %s: cannot acknowledge a report: %s\n", domain,
					strerror(-r));
			if (streq(jstr(m, "id"), id)) {
				deadline = -1; /* it answered: the rest takes as long as the kernel needs */
				if (!wait || is_final(state))
					rc = exit_for_state(state);
			}
		} else if (streq(type, "request") || streq(type, "offer")) {
			print_earlier(o, domain, m);
			session_ack(&c.s, m);
		} else if (streq(type, "error") && (!jstr(m, "id") || streq(jstr(m, "id"), id))) {
			print_error(domain, m);
			rc = HOST_EXIT_REFUSED;
		} else if (streq(type, "error")) {
			print_error(domain, m);
		}
		json_decref(m);
	}
	conn_close(&c);
	return rc;
}

static int parse_common(int argc, char **argv, const struct option *opts, int (*fn)(int c, void *ctx), void *ctx)
{
	int c;

	optind = 0; /* GNU: start over on the subcommand's arguments */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == '?' || fn(c, ctx) < 0)
			return -EINVAL;
	}
	return 0;
}

struct req_args {
	const char *id, *memmap, *zone, *grant, *not_after;
	bool wait;
};

enum { OPT_ID = 1, OPT_MEMMAP, OPT_ZONE, OPT_WAIT, OPT_GRANT, OPT_NOT_AFTER };

static int req_opt(int c, void *ctx)
{
	struct req_args *a = ctx;

	switch (c) {
	case OPT_ID: a->id = optarg; break;
	case OPT_MEMMAP: a->memmap = optarg; break;
	case OPT_ZONE: a->zone = optarg; break;
	case OPT_GRANT: a->grant = optarg; break;
	case OPT_NOT_AFTER: a->not_after = optarg; break;
	case OPT_WAIT: a->wait = true; break;
	default: return -EINVAL;
	}
	return 0;
}

static int size_arg(const char *s, uint64_t *out)
{
	/* MiB without a unit, as chmem and memgrantctl take sizes */
	if (size_parse_cli(s, out) < 0 || *out == 0 || *out > INT64_MAX) {
		fprintf(stderr, "memgrant-host: '%s' is not a size (MiB, or K/M/G/T such as 2G or 1.5G; B for bytes)\n", s);
		return -EINVAL;
	}
	return 0;
}

static int id_arg(const char *what, const char *s)
{
	if (s && !msg_id_valid(s)) {
		fprintf(stderr, "memgrant-host: %s '%s': 1 to 63 characters of A-Z a-z 0-9 . _ : -\n", what, s);
		return -EINVAL;
	}
	return 0;
}

int cmd_grant(const struct host_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "id", required_argument, NULL, OPT_ID },
		{ "memmap", required_argument, NULL, OPT_MEMMAP },
		{ "zone", required_argument, NULL, OPT_ZONE },
		{ "not-after", required_argument, NULL, OPT_NOT_AFTER },
		{ "wait", no_argument, NULL, OPT_WAIT },
		{ 0 }
	};
	struct req_args a = { 0 };
	json_t *req, *memmap;
	const char *range;
	uint64_t size = 0;
	int rc;

	if (parse_common(argc, argv, opts, req_opt, &a) < 0 || argc - optind != 2) {
		fprintf(stderr, "Usage: memgrant-host grant DOMAIN (SIZE | RANGE) [--memmap auto|on|off] "
				"[--zone auto|movable|normal] [--not-after TIME] [--id ID] [--wait]\n");
		return HOST_EXIT_USAGE;
	}
	/* SIZE, or an address range as chmem takes it (the guest checks its
	 * alignment to its block size) */
	range = words_is_addr_range(argv[optind + 1]) ? argv[optind + 1] : NULL;
	if (range) {
		uint64_t first, last;
		char why[256];

		if (words_addr_range(range, 1, &first, &last, why, sizeof(why)) < 0) {
			fprintf(stderr, "memgrant-host: %s\n", why);
			return HOST_EXIT_USAGE;
		}
	} else if (size_arg(argv[optind + 1], &size) < 0) {
		return HOST_EXIT_USAGE;
	}
	if (id_arg("--id", a.id) < 0)
		return HOST_EXIT_USAGE;
	{
		int m = WORDS_MEMMAP_AUTO;
		enum mem_zone z = MEM_ZONE_AUTO;

		if (a.memmap && words_memmap_parse(a.memmap, true, &m) < 0) {
			fprintf(stderr, "memgrant-host: --memmap '%s': expected auto, on or off (also 1/0, "
					"true/false, always/never)\n", a.memmap);
			return HOST_EXIT_USAGE;
		}
		if (a.zone && words_zone_parse(a.zone, true, &z) < 0) {
			fprintf(stderr, "memgrant-host: --zone '%s': expected auto, movable or normal (any case)\n",
				a.zone);
			return HOST_EXIT_USAGE;
		}
		memmap = m == WORDS_MEMMAP_AUTO ? json_string("auto") : json_boolean(m == WORDS_MEMMAP_ON);
		a.zone = words_zone_name(z);
	}
	if (range)
		req = json_pack("{s:s,s:[s],s:o,s:s}", "type", "grant", "ranges", range, "memmap_on_memory", memmap,
				"zone", a.zone ? a.zone : "auto");
	else
		req = json_pack("{s:s,s:I,s:o,s:s}", "type", "grant", "size", (json_int_t)size, "memmap_on_memory",
				memmap, "zone", a.zone ? a.zone : "auto");
	if (req && a.not_after)
		json_object_set_new(req, "not_after", json_string(a.not_after));
	if (!req)
		return HOST_EXIT_REFUSED;
	rc = run_request(o, argv[optind], req, a.id, a.wait);
	json_decref(req);
	return rc;
}

int cmd_revoke(const struct host_opts *o, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "id", required_argument, NULL, OPT_ID },
		{ "grant", required_argument, NULL, OPT_GRANT },
		{ "wait", no_argument, NULL, OPT_WAIT },
		{ 0 }
	};
	struct req_args a = { 0 };
	json_t *req;
	uint64_t size;
	int n, rc;

	if (parse_common(argc, argv, opts, req_opt, &a) < 0)
		goto usage;
	n = argc - optind;
	if (n < 1 || (a.grant && n != 1) || (!a.grant && n != 2))
		goto usage;
	if (id_arg("--id", a.id) < 0 || id_arg("--grant", a.grant) < 0)
		return HOST_EXIT_USAGE;
	if (a.grant) {
		req = json_pack("{s:s,s:s}", "type", "revoke", "grant", a.grant);
	} else {
		if (size_arg(argv[optind + 1], &size) < 0)
			return HOST_EXIT_USAGE;
		req = json_pack("{s:s,s:I}", "type", "revoke", "size", (json_int_t)size);
	}
	if (!req)
		return HOST_EXIT_REFUSED;
	rc = run_request(o, argv[optind], req, a.id, a.wait);
	json_decref(req);
	return rc;
usage:
	fprintf(stderr, "Usage: memgrant-host revoke DOMAIN (SIZE | --grant ID) [--id ID] [--wait]\n");
	return HOST_EXIT_USAGE;
}

static int no_opt(int c, void *ctx)
{
	bool *json = ctx;
	if (c != 'j')
		return -EINVAL;
	*json = true;
	return 0;
}

static const struct option json_opts[] = {
	{ "json", no_argument, NULL, 'j' },
	{ 0 }
};

static void print_agent_status(const struct host_opts *o, const char *domain, json_t *m, uint64_t agent_gen,
			       uint64_t host_gen)
{
	json_t *mem = json_object_get(m, "memory"), *run = json_object_get(m, "running");
	char bs[16], on[16], sb[16], gr[16];

	if (o->json) {
		json_object_set_new(m, "domain", json_string(domain));
		json_object_set_new(m, "host_generation", json_integer((json_int_t)host_gen));
		json_object_set_new(m, "agent_generation", json_integer((json_int_t)agent_gen));
		print_json(m);
		return;
	}
	size_format(juint(mem, "block_size"), bs, sizeof(bs));
	size_format(juint(mem, "online_bytes"), on, sizeof(on));
	size_format(juint(mem, "standby_bytes"), sb, sizeof(sb));
	size_format(juint(mem, "granted_bytes"), gr, sizeof(gr));
	printf("domain:       %s\n", domain);
	printf("agent:        %s (memgrantd %s)\n", jstr(m, "agent") ?: "?", jstr(m, "version") ?: "?");
	printf("memory:       %s online, %s standby, %s granted, block size %s\n", on, sb, gr, bs);
	if (json_is_object(run))
		printf("running:      %s %s %s, %llu of %llu blocks\n", jstr(run, "id") ?: "?", jstr(run, "kind") ?: "",
		       jstr(run, "state") ?: "", (unsigned long long)juint(run, "blocks_done"),
		       (unsigned long long)juint(run, "blocks_total"));
	else
		printf("running:      nothing\n");
	printf("queued:       %llu\n", (unsigned long long)juint(m, "queued"));
	printf("generation:   %llu (agent), %llu (host state)\n", (unsigned long long)agent_gen,
	       (unsigned long long)host_gen);
}

int cmd_status(const struct host_opts *o, int argc, char **argv)
{
	struct host_opts lo = *o;
	struct conn c;
	char why[512] = "";
	uint64_t host_gen = 0;
	int64_t deadline;
	json_t *q;
	int r, rc;

	if (parse_common(argc, argv, json_opts, no_opt, &lo.json) < 0 || argc - optind > 1) {
		fprintf(stderr, "Usage: memgrant-host status [DOMAIN] [--json]\n");
		return HOST_EXIT_USAGE;
	}
	if (argc - optind == 0) /* the service's view of every domain (MEMGRANT_HOST_CONFIG names its YAML) */
		return serve_show_status(getenv("MEMGRANT_HOST_CONFIG"), o->state_dir_given ? o->state_dir : NULL,
					 lo.json);
	if (host_state_last_generation(o->state_dir, argv[optind], &host_gen, why, sizeof(why)) < 0)
		fprintf(stderr, "memgrant-host: %s\n", why);
	rc = conn_open(&lo, argv[optind], &c);
	if (rc)
		return rc;
	q = json_pack("{s:s}", "type", "query");
	r = q ? session_send(&c.s, q) : -ENOMEM;
	json_decref(q);
	deadline = ((int64_t)mono_ms()) + o->timeout_ms;
	rc = -1;
	while (r == 0 && rc < 0) {
		json_t *m = NULL;
		r = session_next(&c.s, deadline, &m);
		if (r < 0)
			break;
		if (streq(jstr(m, "type"), "agent_status")) {
			print_agent_status(&lo, argv[optind], m, c.s.agent_generation, host_gen);
			rc = HOST_EXIT_OK;
		} else if (streq(jstr(m, "type"), "status") || streq(jstr(m, "type"), "request") ||
			   streq(jstr(m, "type"), "offer")) {
			print_earlier(&lo, argv[optind], m);
			session_ack(&c.s, m);
		} else if (streq(jstr(m, "type"), "error")) {
			print_error(argv[optind], m);
		}
		json_decref(m);
	}
	if (rc < 0) {
		fprintf(stderr, "memgrant-host: %s: no status from the agent: %s\n", argv[optind],
			r == -ETIMEDOUT ? "it did not answer in time" : strerror(-r));
		rc = r == -ETIMEDOUT ? HOST_EXIT_NO_ANSWER : HOST_EXIT_CONNECT;
	}
	conn_close(&c);
	return rc;
}

int cmd_watch(const struct host_opts *o, int argc, char **argv)
{
	struct host_opts lo = *o;
	struct conn c;
	int r, rc;

	if (parse_common(argc, argv, json_opts, no_opt, &lo.json) < 0 || argc - optind != 1) {
		fprintf(stderr, "Usage: memgrant-host watch DOMAIN [--json]\n");
		return HOST_EXIT_USAGE;
	}
	rc = conn_open(&lo, argv[optind], &c);
	if (rc)
		return rc;
	for (;;) {
		json_t *m = NULL;
		r = session_next(&c.s, -1, &m);
		if (r < 0)
			break;
		if (streq(jstr(m, "type"), "status")) {
			print_status(&lo, m);
			r = session_ack(&c.s, m);
		} else if (streq(jstr(m, "type"), "request") || streq(jstr(m, "type"), "offer")) {
			if (lo.json) {
				print_json(m);
			} else {
				char b[16];
				size_format(juint(m, "bytes"), b, sizeof(b));
				printf("%s %s: %s: %s\n", jstr(m, "id") ?: "?", jstr(m, "type"), b, jstr(m, "reason") ?: "");
			}
			r = session_ack(&c.s, m);
		} else if (streq(jstr(m, "type"), "error")) {
			print_error(argv[optind], m);
		}
		json_decref(m);
		if (r < 0)
			break;
	}
	fprintf(stderr, "memgrant-host: %s: the channel closed (%s)\n", argv[optind], strerror(-r));
	conn_close(&c);
	return HOST_EXIT_CONNECT;
}
