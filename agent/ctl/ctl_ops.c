/* SPDX-License-Identifier: MIT */
/*
 * What the commands on one grant or revocation share (grant, revoke, wait,
 * cancel): submitting a message and following an operation to its final
 * state on the event stream, with progress on a terminal, and the exit
 * codes like chmem's.  See ctl_ops.h.
 */
#include <getopt.h>
#include <signal.h>
#include <time.h>

#include "lib/wire/message.h"
#include "agent/ctl/ctl_client.h"
#include "agent/ctl/ctl.h"
#include "agent/ctl/ctl_ops.h"
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
	/* an operation that is not final but carries an error stopped where
	 * memgrantd's journal is (it cannot record a step): it resumes at
	 * memgrantd's next start, so waiting longer tells nothing */
	return is_final(state) || json_is_object(json_object_get(ev, "error")) ? 1 : 0;
}

void ctl_print_summary(json_t *st)
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
int ctl_cancel_exit_code(const char *state)
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
int ctl_follow(struct ctl_ctx *ctx, const char *id, bool json, bool cancelling)
{
	struct waiter w = { .tty = isatty(STDERR_FILENO), .json = json };
	_cleanup_free_ char *escaped = NULL;
	sigset_t intr, old;
	char path[256];
	int r, rc;

	escaped = ctl_url_escape(id);
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
	if (r >= 0 && w.last && !is_final(w.state) && json_is_object(json_object_get(w.last, "error"))) {
		json_t *e = json_object_get(w.last, "error");

		if (json)
			ctl_print_json(w.last);
		ctl_err("%s stopped %s, not final: %s (%s)", id, w.state,
			json_string_value(json_object_get(e, "message")), json_string_value(json_object_get(e, "code")));
		json_decref(w.last);
		return CTL_EXIT_FAILURE;
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
		ctl_print_summary(w.last);
	rc = cancelling ? ctl_cancel_exit_code(w.state) : exit_code_of(w.state);
	if (cancelling && rc == CTL_EXIT_FAILURE)
		ctl_err("%s ended %s before the cancel took effect", id, w.state);
	json_decref(w.last);
	return rc;
}

int ctl_submit(struct ctl_ctx *ctx, json_t *msg, bool wait, bool json)
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
			ctl_print_summary(reply);
		}
		rc = streq(state, "rejected") ? CTL_EXIT_FAILURE : wait ? exit_code_of(state) : CTL_EXIT_OK;
		json_decref(reply);
		return rc;
	}
	{
		_cleanup_free_ char *id_copy = strdup(id);

		json_decref(reply);
		return id_copy ? ctl_follow(ctx, id_copy, json, false) : CTL_EXIT_FAILURE;
	}
}
