/* SPDX-License-Identifier: MIT */
/*
 * memgrantctl grant SIZE | revoke (SIZE | --grant ID): hand a grant or a
 * revocation to memgrantd.  With --wait, follow it to the end, showing
 * progress on a terminal, and exit like chmem: 0 all done, 1 nothing done,
 * 64 partly done.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <signal.h>
#include <time.h>

#include "providers/wire/message.h"
#include "agent/ctl/client.h"
#include "agent/ctl/ctl.h"
#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

struct waiter {
	bool tty;
	bool json;
	char state[24];
	json_t *last;
	time_t busy_said; /* not a terminal: when the last line about busy blocks was printed */
};

static bool is_final(const char *state)
{
	return streq(state, "applied") || streq(state, "partial") || streq(state, "failed") ||
	       streq(state, "rejected") || streq(state, "cancelled");
}

/* "; retrying 40 (12 attempts), 41 (12 attempts), 4 s of 10 s budget left" */
static void busy_text(json_t *ev, char *buf, size_t len)
{
	json_t *busy = json_object_get(ev, "busy_blocks"), *b;
	size_t used = 0, i;

	buf[0] = '\0';
	if (!json_array_size(busy))
		return;
	used += (size_t)snprintf(buf, len, "; retrying");
	json_array_foreach(busy, i, b) {
		if (used >= len)
			break;
		json_int_t n = json_integer_value(json_object_get(b, "attempts"));
		used += (size_t)snprintf(buf + used, len - used, "%s block %lld (%lld attempt%s, %s)", i ? "," : "",
					 (long long)json_integer_value(json_object_get(b, "block")), (long long)n,
					 n == 1 ? "" : "s", json_string_value(json_object_get(b, "error")));
	}
	if (used < len && json_is_integer(json_object_get(ev, "budget_left_ms")))
		snprintf(buf + used, len - used, "; %lld s of the %lld s budget left",
			 (long long)(json_integer_value(json_object_get(ev, "budget_left_ms")) + 999) / 1000,
			 (long long)json_integer_value(json_object_get(ev, "budget_ms")) / 1000);
}

static int on_status(json_t *ev, void *cls)
{
	struct waiter *w = cls;
	const char *state = json_string_value(json_object_get(ev, "state"));

	if (!streq(json_string_value(json_object_get(ev, "type")), "status") || !state)
		return 0;
	snprintf(w->state, sizeof(w->state), "%s", state);
	json_decref(w->last);
	w->last = json_incref(ev);
	if (!w->json) {
		char busy[512];

		busy_text(ev, busy, sizeof(busy));
		if (w->tty) {
			fprintf(stderr, "\r\033[K%s: %s, %lld of %lld blocks%s", json_string_value(json_object_get(ev, "id")),
				state, (long long)json_integer_value(json_object_get(ev, "blocks_done")),
				(long long)json_integer_value(json_object_get(ev, "blocks_total")), busy);
			fflush(stderr);
		} else if (busy[0] && !is_final(state) && time(NULL) - w->busy_said >= 5) {
			/* a log, not a terminal: a line every 5 s while blocks are retried */
			w->busy_said = time(NULL);
			fprintf(stderr, "%s: %s, %lld of %lld blocks%s\n", json_string_value(json_object_get(ev, "id")),
				state, (long long)json_integer_value(json_object_get(ev, "blocks_done")),
				(long long)json_integer_value(json_object_get(ev, "blocks_total")), busy);
		}
	}
	return is_final(state) ? 1 : 0;
}

static void print_summary(json_t *st)
{
	char req[16], app[16];
	json_t *err = json_object_get(st, "error"), *blocks = json_object_get(st, "blocks"), *b;
	size_t i;

	size_format((uint64_t)json_integer_value(json_object_get(st, "requested_bytes")), req, sizeof(req));
	size_format((uint64_t)json_integer_value(json_object_get(st, "applied_bytes")), app, sizeof(app));
	printf("%s %s: %s, %s of %s\n", json_string_value(json_object_get(st, "kind")),
	       json_string_value(json_object_get(st, "id")), json_string_value(json_object_get(st, "state")), app, req);
	json_array_foreach(json_object_get(st, "decisions"), i, b)
		printf("  %s\n", json_string_value(b));
	json_array_foreach(blocks, i, b) {
		json_t *be = json_object_get(b, "error");
		if (json_is_object(be))
			printf("  block %lld: %s\n", (long long)json_integer_value(json_object_get(b, "block")),
			       json_string_value(json_object_get(be, "message")));
	}
	if (json_is_object(err))
		printf("  error: %s (%s)\n", json_string_value(json_object_get(err, "message")),
		       json_string_value(json_object_get(err, "code")));
}

/* The exit code of cancel ID: 0 it ended cancelled (nothing done), 64
 * partial (the blocks done before the cancel stay done), 1 it ended
 * otherwise (it finished before the cancel took effect, or failed). */
static int cancel_exit_code_of(const char *state)
{
	if (streq(state, "cancelled"))
		return CTL_EXIT_OK;
	if (streq(state, "partial"))
		return CTL_EXIT_PARTIAL;
	return CTL_EXIT_FAILURE;
}

static int exit_code_of(const char *state)
{
	if (streq(state, "applied"))
		return CTL_EXIT_OK;
	if (streq(state, "partial"))
		return CTL_EXIT_PARTIAL;
	return CTL_EXIT_FAILURE;
}

/*
 * Follows grant or revocation ID to its final state over the event stream
 * (the first event is its current status) and prints the outcome.  SIGINT is
 * held pending while following, so that Ctrl-C ends the wait, not the
 * operation: memgrantd goes on, and the message says how to follow it again.
 */
static int follow(struct ctl_ctx *ctx, const char *id, bool json, bool cancelling)
{
	struct waiter w = { .tty = isatty(STDERR_FILENO), .json = json };
	_cleanup_free_ char *escaped = NULL;
	sigset_t intr, old;
	char path[256];
	int r, rc;

	escaped = curl_escape(id, 0);
	if (!escaped)
		return CTL_EXIT_FAILURE;
	snprintf(path, sizeof(path), "/v1/events?grant=%s&until=done", escaped);
	sigemptyset(&intr);
	sigaddset(&intr, SIGINT);
	sigprocmask(SIG_BLOCK, &intr, &old);
	r = ctl_follow_events(ctx, path, on_status, &w);
	if (r == -EINTR) {
		int sig;

		sigwait(&intr, &sig); /* take the pending Ctrl-C */
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (w.tty && !json && w.state[0])
		fputc('\n', stderr);
	if (r == -EINTR) {
		ctl_err("stopped waiting; %s %s goes on in memgrantd (last state: %s). Follow it with: "
			"memgrantctl%s%s wait %s",
			w.last ? json_string_value(json_object_get(w.last, "kind")) : "operation", id,
			w.state[0] ? w.state : "unknown", ctx->socket ? " --socket " : "",
			ctx->socket ? ctx->socket : "", id);
		json_decref(w.last);
		return CTL_EXIT_INTERRUPTED;
	}
	if (r < 0 || !w.last || !is_final(w.state)) {
		if (r >= 0)
			ctl_err("memgrantd closed the event stream before %s finished (last state: %s); "
				"follow it with: memgrantctl wait %s", id, w.state[0] ? w.state : "none", id);
		json_decref(w.last);
		return CTL_EXIT_FAILURE;
	}
	if (json)
		ctl_print_json(w.last);
	else
		print_summary(w.last);
	rc = cancelling ? cancel_exit_code_of(w.state) : exit_code_of(w.state);
	if (cancelling && rc == CTL_EXIT_FAILURE)
		ctl_err("%s ended %s before the cancel took effect", id, w.state);
	json_decref(w.last);
	return rc;
}

static int submit(struct ctl_ctx *ctx, json_t *msg, bool wait, bool json)
{
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	json_t *reply = NULL;
	long status = 0;
	const char *id, *state;
	int rc;

	if (!body)
		return CTL_EXIT_FAILURE;
	if (ctl_request(ctx, "POST", "/v1/grants", body, &status, &reply) < 0)
		return CTL_EXIT_FAILURE;
	if (status != 200 && status != 202 && status != 409) {
		ctl_print_error_reply(status, reply);
		json_decref(reply);
		return CTL_EXIT_FAILURE;
	}
	if (status == 409 && !json_object_get(reply, "state")) {
		ctl_print_error_reply(status, reply); /* stale generation, id in use */
		json_decref(reply);
		return CTL_EXIT_FAILURE;
	}
	id = json_string_value(json_object_get(reply, "id"));
	state = json_string_value(json_object_get(reply, "state"));
	if (!wait || !id || streq(state, "rejected") || status == 200) {
		if (json) {
			ctl_print_json(reply);
		} else if (streq(state, "rejected")) {
			json_t *e = json_object_get(reply, "error");
			ctl_err("%s %s rejected: %s", json_string_value(json_object_get(reply, "kind")), id,
				json_string_value(json_object_get(e, "message")));
		} else {
			print_summary(reply);
		}
		rc = streq(state, "rejected") ? CTL_EXIT_FAILURE : wait ? exit_code_of(state) : CTL_EXIT_OK;
		json_decref(reply);
		return rc;
	}
	{
		_cleanup_free_ char *id_copy = strdup(id);

		json_decref(reply);
		return id_copy ? follow(ctx, id_copy, json, false) : CTL_EXIT_FAILURE;
	}
}

static void size_line(const char *label, json_t *plan, const char *key, const char *tail)
{
	char b[16];

	size_format((uint64_t)json_integer_value(json_object_get(plan, key)), b, sizeof(b));
	printf("  %-12s %s%s\n", label, b, tail);
}

/* --dry-run: POST /v1/grants?dry_run=1 and print the plan; nothing changes. */
static int dry_run_plan(struct ctl_ctx *ctx, json_t *msg, bool json)
{
	_cleanup_free_ char *body = json_dumps(msg, JSON_COMPACT);
	json_t *plan = NULL, *blocks, *b;
	long status = 0;
	char req[16], bs[16], list[512];
	size_t i, used = 0, n;

	if (!body)
		return CTL_EXIT_FAILURE;
	if (ctl_request(ctx, "POST", "/v1/grants?dry_run=1", body, &status, &plan) < 0)
		return CTL_EXIT_FAILURE;
	if (status != 200) {
		if (json)
			ctl_print_json(plan);
		ctl_print_error_reply(status, plan);
		json_decref(plan);
		return CTL_EXIT_FAILURE;
	}
	if (json) {
		ctl_print_json(plan);
		json_decref(plan);
		return CTL_EXIT_OK;
	}
	blocks = json_object_get(plan, "blocks");
	n = json_array_size(blocks);
	list[0] = '\0';
	for (i = 0; i < n && used < sizeof(list); i++) {
		json_int_t a = json_integer_value(json_object_get(json_array_get(blocks, i), "block")), z = a;
		while (i + 1 < n && json_integer_value(json_object_get(json_array_get(blocks, i + 1), "block")) == z + 1) {
			z++;
			i++;
		}
		used += (size_t)(a == z ? snprintf(list + used, sizeof(list) - used, "%s%lld", used ? "," : "", (long long)a)
				      : snprintf(list + used, sizeof(list) - used, "%s%lld-%lld", used ? "," : "",
						 (long long)a, (long long)z));
	}
	size_format((uint64_t)json_integer_value(json_object_get(plan, "requested_bytes")), req, sizeof(req));
	size_format((uint64_t)json_integer_value(json_object_get(plan, "block_size")), bs, sizeof(bs));
	printf("%s of %s (dry run: nothing was changed)\n", json_string_value(json_object_get(plan, "kind")), req);
	printf("  %-12s %s (%zu of %s)\n", "blocks:", list, n, bs);
	if (n) {
		/* one run of blocks (in either order): its address range, as chmem takes it */
		size_t lo = 0, hi = 0;
		for (i = 1; i < n; i++) {
			json_int_t id = json_integer_value(json_object_get(json_array_get(blocks, i), "block"));
			if (id < json_integer_value(json_object_get(json_array_get(blocks, lo), "block")))
				lo = i;
			if (id > json_integer_value(json_object_get(json_array_get(blocks, hi), "block")))
				hi = i;
		}
		const char *fr = json_string_value(json_object_get(json_array_get(blocks, lo), "range"));
		const char *lr = json_string_value(json_object_get(json_array_get(blocks, hi), "range"));
		if (fr && lr && strchr(fr, '-') && strchr(lr, '-') &&
		    json_integer_value(json_object_get(json_array_get(blocks, hi), "block")) -
				    json_integer_value(json_object_get(json_array_get(blocks, lo), "block")) + 1 == (json_int_t)n)
			printf("  %-12s %.*s-%s\n", "addresses:", (int)(strchr(fr, '-') - fr), fr, strchr(lr, '-') + 1);
	}
	if (json_object_get(plan, "zone"))
		printf("  %-12s %s, memmap_on_memory %s\n", "zone:", json_string_value(json_object_get(plan, "zone")),
		       json_is_null(json_object_get(plan, "memmap_on_memory")) ? "as the kernel chose"
		       : json_is_true(json_object_get(plan, "memmap_on_memory")) ? "on" : "off");
	json_array_foreach(json_object_get(plan, "decisions"), i, b)
		printf("  %-12s %s\n", "decision:", json_string_value(b));
	if (json_object_get(plan, "memmap_bytes")) {
		size_line("memmap:", plan, "memmap_bytes",
			  json_integer_value(json_object_get(plan, "memmap_in_granted_bytes")) ? " (in the granted blocks)"
												  : " (from memory already online)");
		size_line("usable:", plan, "usable_bytes", " of the granted memory");
		size_line("cost:", plan, "online_cost_bytes", " of the memory online now");
	}
	{
		char before[16], after[16];
		size_format((uint64_t)json_integer_value(json_object_get(plan, "online_bytes_before")), before, sizeof(before));
		size_format((uint64_t)json_integer_value(json_object_get(plan, "online_bytes_after")), after, sizeof(after));
		printf("  %-12s %s -> %s\n", "online:", before, after);
	}
	if (json_string_value(json_object_get(plan, "memmap_note")))
		printf("  %-12s %s\n", "note:", json_string_value(json_object_get(plan, "memmap_note")));
	json_decref(plan);
	return CTL_EXIT_OK;
}

/* The block size memgrantd works with (/v1/status), for address ranges. */
static int daemon_block_size(struct ctl_ctx *ctx, uint64_t *bs)
{
	json_t *st = NULL;
	json_int_t v;

	if (ctl_get_json(ctx, "/v1/status", &st) < 0)
		return -EIO;
	v = json_integer_value(json_object_get(json_object_get(st, "memory"), "block_size"));
	json_decref(st);
	if (v <= 0) {
		ctl_err("memgrantd did not say its block size: give blocks, not an address range");
		return -EPROTO;
	}
	*bs = (uint64_t)v;
	return 0;
}

/* --blocks 16,17,20-23, or an address range 0x80000000-0x8fffffff (as chmem takes
 * it), into the message's "blocks" */
static int set_blocks(struct ctl_ctx *ctx, json_t *msg, const char *opt, const char *arg)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0;
	json_t *arr;
	char why[256];

	if (words_is_addr_range(arg)) {
		uint64_t bs, first, last;

		/* the form first (any block size divides 1), before asking memgrantd */
		if (words_addr_range(arg, 1, &first, &last, why, sizeof(why)) < 0) {
			ctl_err("%s: %s", opt, why);
			return -EINVAL;
		}
		if (daemon_block_size(ctx, &bs) < 0)
			return -EIO;
		if (words_addr_range(arg, bs, &first, &last, why, sizeof(why)) < 0) {
			ctl_err("%s: %s", opt, why);
			return -EINVAL;
		}
		if (last - first >= 65536) {
			ctl_err("%s: address range '%s' spans more than 65536 blocks", opt, arg);
			return -ERANGE;
		}
		arr = json_array();
		for (uint64_t id = first; id <= last; id++)
			json_array_append_new(arr, json_integer((json_int_t)id));
		json_object_set_new(msg, "blocks", arr);
		return 0;
	}
	if (words_block_list(arg, 65536, &ids, &n, why, sizeof(why)) < 0) {
		ctl_err("%s: %s", opt, why);
		return -EINVAL;
	}
	arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, json_integer((json_int_t)ids[i]));
	json_object_set_new(msg, "blocks", arr);
	return 0;
}

static int grant_or_revoke(struct ctl_ctx *ctx, int argc, char **argv, bool revoke)
{
	static const struct option opts[] = {
		{ "memmap", required_argument, NULL, 'm' }, { "zone", required_argument, NULL, 'z' },
		{ "id", required_argument, NULL, 'i' },     { "blocks", required_argument, NULL, 'b' },
		{ "grant", required_argument, NULL, 'g' },  { "not-after", required_argument, NULL, 'a' },
		{ "contiguous", no_argument, NULL, 'C' },  { "wait", no_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'J' },         { "help", no_argument, NULL, 'h' },
		{ "dry-run", no_argument, NULL, 'D' },      { 0 }
	};
	json_t *msg = json_pack("{s:s}", "type", revoke ? "revoke" : "grant");
	bool wait = false, json = false, have_target = false, dry_run = false;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, ":m:z:i:b:g:a:CwJhD", opts, NULL)) != -1) {
		switch (ch) {
		case 'm': {
			int m;

			if (revoke)
				goto not_for_revoke;
			if (words_memmap_parse(optarg, true, &m) < 0) {
				ctl_err("--memmap: '%s' is not one of auto, on, off (also 1/0, true/false, "
					"always/never)", optarg);
				goto fail;
			}
			json_object_set_new(msg, "memmap_on_memory",
					    m == WORDS_MEMMAP_AUTO ? json_string("auto") : json_boolean(m == WORDS_MEMMAP_ON));
			break;
		}
		case 'z': {
			enum mem_zone z;

			if (revoke)
				goto not_for_revoke;
			if (words_zone_parse(optarg, true, &z) < 0) {
				ctl_err("--zone: '%s' is not one of auto, movable, normal (in any case, as lsmem "
					"writes them: Movable, Normal)", optarg);
				goto fail;
			}
			json_object_set_new(msg, "zone", json_string(words_zone_name(z)));
			break;
		}
		case 'i': json_object_set_new(msg, "id", json_string(optarg)); break;
		case 'b':
			if (have_target)
				goto one_target;
			if (set_blocks(ctx, msg, "--blocks", optarg) < 0)
				goto fail; /* set_blocks said why */
			have_target = true;
			break;
		case 'g':
			if (!revoke) {
				ctl_err("--grant: only a revocation names a grant");
				goto fail;
			}
			if (have_target)
				goto one_target;
			json_object_set_new(msg, "grant", json_string(optarg));
			have_target = true;
			break;
		case 'a': json_object_set_new(msg, "not_after", json_string(optarg)); break;
		case 'C': json_object_set_new(msg, "contiguous", json_true()); break;
		case 'w': wait = true; break;
		case 'J': json = true; break;
		case 'D': dry_run = true; break;
		case 'h':
			printf(revoke ? "Usage: memgrantctl revoke (SIZE | RANGE | --grant ID | --blocks LIST) [--id ID] [--wait | --dry-run]\n"
					"                         [--json]\n"
				      : "Usage: memgrantctl grant (SIZE | RANGE | --blocks LIST) [--memmap auto|on|off] [--zone auto|Movable|Normal]\n"
					"                        [--contiguous] [--not-after TIME] [--id ID] [--wait | --dry-run] [--json]\n");
			printf("\nSIZE as chmem takes it: MiB without a unit (512 is 512M), or as lsmem prints\n"
			       "it (1.5G, 2.25G: whole memory blocks); RANGE a physical address range as chmem\n"
			       "takes it (0x80000000-0x8fffffff); LIST block numbers 16,17,20-23.  With --wait,\n"
			       "Ctrl-C stops waiting, not the %s.\n",
			       revoke ? "revocation" : "grant");
			json_decref(msg);
			return CTL_EXIT_OK;
		default:
			ctl_bad_option(revoke ? "revoke" : "grant", ch, argv);
			goto fail;
		}
	}
	if (optind < argc) {
		uint64_t size;
		if (have_target)
			goto one_target;
		if (words_is_addr_range(argv[optind])) {
			if (set_blocks(ctx, msg, revoke ? "revoke RANGE" : "grant RANGE", argv[optind]) < 0)
				goto fail;
		} else {
			if (ctl_parse_size(revoke ? "revoke SIZE" : "grant SIZE", argv[optind], &size) < 0)
				goto fail;
			if (size > INT64_MAX) {
				ctl_err("%s SIZE: size '%s' is too large", revoke ? "revoke" : "grant", argv[optind]);
				goto fail;
			}
			/* bytes on the wire: a bare number means MiB here, bytes there */
			json_object_set_new(msg, "size", json_integer((json_int_t)size));
		}
		have_target = true;
		optind++;
	}
	if (optind < argc) {
		ctl_err("unexpected argument '%s'", argv[optind]);
		goto fail;
	}
	if (!have_target) {
		ctl_err(revoke ? "revoke: say how much: SIZE, RANGE, --grant ID or --blocks LIST"
			       : "grant: say how much: SIZE, RANGE or --blocks LIST");
		goto fail;
	}
	if (dry_run && wait) {
		ctl_err("--dry-run changes nothing: there is nothing to --wait for");
		goto fail;
	}
	rc = dry_run ? dry_run_plan(ctx, msg, json) : submit(ctx, msg, wait, json);
	json_decref(msg);
	return rc;

not_for_revoke:
	ctl_err("revoke: --memmap and --zone belong to grants");
	goto fail;
one_target:
	ctl_err("give exactly one of SIZE, RANGE, --blocks%s", revoke ? ", --grant" : "");
fail:
	json_decref(msg);
	return CTL_EXIT_FAILURE;
}

int ctl_cmd_grant(struct ctl_ctx *ctx, int argc, char **argv)
{
	return grant_or_revoke(ctx, argc, argv, false);
}

int ctl_cmd_revoke(struct ctl_ctx *ctx, int argc, char **argv)
{
	return grant_or_revoke(ctx, argc, argv, true);
}

/* memgrantctl wait ID: follow a grant or revocation memgrantd already has. */
int ctl_cmd_wait(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	_cleanup_free_ char *escaped = NULL;
	json_t *cur = NULL;
	bool json = false;
	char path[256];
	int ch;

	while ((ch = getopt_long(argc, argv, ":Jh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'h':
			printf("Usage: memgrantctl wait ID [--json]\n\n"
			       "Follows grant or revocation ID until it is final and prints the outcome;\n"
			       "exits 0 applied, 1 failed or rejected, 64 partial.  Ctrl-C stops waiting only.\n");
			return CTL_EXIT_OK;
		default: return ctl_bad_option("wait", ch, argv);
		}
	}
	if (optind >= argc) {
		ctl_err("wait: which grant or revocation? (memgrantctl wait ID; memgrantctl grants lists them)");
		return CTL_EXIT_FAILURE;
	}
	if (!msg_id_valid(argv[optind])) {
		ctl_err("wait: '%s' is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)", argv[optind], MSG_ID_MAX);
		return CTL_EXIT_FAILURE;
	}
	if (optind + 1 < argc) {
		ctl_err("wait: unexpected argument '%s'", argv[optind + 1]);
		return CTL_EXIT_FAILURE;
	}
	/* a clear "no such grant" before the stream */
	escaped = curl_escape(argv[optind], 0);
	if (!escaped)
		return CTL_EXIT_FAILURE;
	snprintf(path, sizeof(path), "/v1/grants/%s", escaped);
	if (ctl_get_json(ctx, path, &cur) < 0)
		return CTL_EXIT_FAILURE;
	json_decref(cur);
	return follow(ctx, argv[optind], json, false);
}

/* memgrantctl cancel ID: stop a grant or revocation after the block in
 * flight (POST /v1/grants/ID/cancel) and, unless --no-wait, follow it to its
 * final state. */
int ctl_cmd_cancel(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'J' }, { "no-wait", no_argument, NULL, 'n' },
					      { "help", no_argument, NULL, 'h' }, { 0 } };
	_cleanup_free_ char *escaped = NULL;
	json_t *reply = NULL;
	bool json = false, wait = true;
	long status = 0;
	char path[256];
	int ch, rc;

	while ((ch = getopt_long(argc, argv, ":Jnh", opts, NULL)) != -1) {
		switch (ch) {
		case 'J': json = true; break;
		case 'n': wait = false; break;
		case 'h':
			printf("Usage: memgrantctl cancel ID [--no-wait] [--json]\n\n"
			       "Cancels grant or revocation ID: a queued one ends cancelled at once, a running one\n"
			       "stops after the block in flight and ends partial (the blocks done stay done) or\n"
			       "cancelled.  Waits for the final state unless --no-wait; exits 0 cancelled,\n"
			       "64 partial, 1 when it was final already or finished before the cancel took effect.\n");
			return CTL_EXIT_OK;
		default: return ctl_bad_option("cancel", ch, argv);
		}
	}
	if (optind >= argc) {
		ctl_err("cancel: which grant or revocation? (memgrantctl cancel ID; memgrantctl grants lists them)");
		return CTL_EXIT_FAILURE;
	}
	if (!msg_id_valid(argv[optind])) {
		ctl_err("cancel: '%s' is not an id (1 to %d characters of A-Z a-z 0-9 . _ : -)", argv[optind], MSG_ID_MAX);
		return CTL_EXIT_FAILURE;
	}
	if (optind + 1 < argc) {
		ctl_err("cancel: unexpected argument '%s'", argv[optind + 1]);
		return CTL_EXIT_FAILURE;
	}
	escaped = curl_escape(argv[optind], 0);
	if (!escaped)
		return CTL_EXIT_FAILURE;
	snprintf(path, sizeof(path), "/v1/grants/%s/cancel", escaped);
	if (ctl_request(ctx, "POST", path, "", &status, &reply) < 0)
		return CTL_EXIT_FAILURE;
	if (status != 200 && status != 202) {
		if (json)
			ctl_print_json(reply);
		ctl_print_error_reply(status, reply);
		json_decref(reply);
		return CTL_EXIT_FAILURE;
	}
	if (status == 202 && wait) {
		json_decref(reply);
		return follow(ctx, argv[optind], json, true);
	}
	if (json)
		ctl_print_json(reply);
	else if (status == 202)
		printf("%s %s: cancelling after the block in flight (%lld of %lld blocks done); follow it with: "
		       "memgrantctl wait %s\n", json_string_value(json_object_get(reply, "kind")), argv[optind],
		       (long long)json_integer_value(json_object_get(reply, "blocks_done")),
		       (long long)json_integer_value(json_object_get(reply, "blocks_total")), argv[optind]);
	else
		print_summary(reply);
	rc = status == 202 ? CTL_EXIT_OK : cancel_exit_code_of(json_string_value(json_object_get(reply, "state")));
	json_decref(reply);
	return rc;
}
