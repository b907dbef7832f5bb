/* SPDX-License-Identifier: MIT */
/* The engine's port (agent/engine/engine.h) on the sim: typed verdicts, typed
 * transitions, outboxes of the sources that get reports, the typed views. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <glob.h>
#include <pthread.h>
#include <time.h>

#include "agent/engine/engine.h"
#include "config/config.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/util.h"
#include "providers/views/views_json.h"

#define MIB (1024ull * 1024)

struct seen {
	pthread_mutex_t lock;
	char events[64][96];
	size_t n;
};

struct fixture {
	char tmp[64];
	struct mg_config *cfg;
	struct engine *e;
	struct mg_log log;
	struct seen seen;
};

static void on_transition(void *ctx, const struct engine_transition *t)
{
	struct seen *s = ctx;

	pthread_mutex_lock(&s->lock);
	if (s->n < ARRAY_SIZE(s->events))
		snprintf(s->events[s->n++], sizeof(s->events[0]), "%s %s %s%s", t->id,
			 t->kind == ENGINE_T_STATE ? "state" : "block-failed", msg_state_name(t->state),
			 t->report ? "" : " (no report)");
	pthread_mutex_unlock(&s->lock);
}

static int setup_with(void **state, const char *faults)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char yaml[1024];
	int r;

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-engine-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	snprintf(yaml, sizeof(yaml),
		 "agent:\n  id: unit\n  state_dir: %s/state\n  api_socket: %s/api.sock\n  log_level: error\n"
		 "backend:\n  type: sim\n  sim:\n    state: %s/sim.json\n    online: 1G\n    standby: 1G\n"
		 "    block_size: 128M\n%s",
		 f->tmp, f->tmp, f->tmp, faults);
	r = config_load_buffer("unit.yaml", yaml, strlen(yaml), NULL, &f->cfg, NULL);
	if (r < 0)
		return -1;
	log_init(&f->log, "test_engine", 3);
	pthread_mutex_init(&f->seen.lock, NULL);
	if (engine_new(f->cfg, &f->log, -1, &f->e) < 0 || engine_subscribe(f->e, on_transition, &f->seen) < 0 ||
	    engine_start(f->e) < 0)
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, "");
}

/* every kernel write takes 150 ms: a grant of 4 blocks runs for over a second */
static int setup_slow(void **state)
{
	return setup_with(state, "    faults:\n      latency_ms: 150\n");
}

/* every kernel write takes 5 ms: a block comes up in about 15 ms, many
 * blocks within one progress event's interval (OP_LIVE_INTERVAL, 100 ms) */
static int setup_quick(void **state)
{
	return setup_with(state, "    faults:\n      latency_ms: 5\n");
}

/* a revocation's budget of 1 s */
static int setup_budget(void **state)
{
	return setup_with(state, "policy:\n  revoke_budget: 1s\n");
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	engine_stop(f->e);
	engine_free(f->e);
	config_free(f->cfg);
	pthread_mutex_destroy(&f->seen.lock);
	rm_rf(f->tmp);
	free(f);
	return 0;
}

static struct msg *parse(const char *text, unsigned flags)
{
	struct msg_error err;
	struct msg *m = NULL;

	if (msg_parse_opts(text, strlen(text), 65536, flags, &m, &err) < 0)
		fail_msg("parse %s: %s", text, err.message);
	return m;
}

/* Waits until request ID is final; its state. */
static enum msg_state wait_final(struct engine *e, const char *id)
{
	for (int i = 0; i < 500; i++) {
		json_t *j = views_engine_grant(e, id);
		enum msg_state s = MSG_STATE_ACCEPTED;
		if (j && msg_state_parse(json_string_value(json_object_get(j, "state")), &s) == 0 &&
		    msg_state_is_final(s)) {
			json_decref(j);
			return s;
		}
		json_decref(j);
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
	fail_msg("%s did not finish", id);
	return MSG_STATE_FAILED;
}

static void test_verdicts(void **state)
{
	struct fixture *f = *state;
	struct engine_source *cp = NULL, *again = NULL, *op = NULL;
	struct engine_verdict v;

	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_REPORTS, &cp), 0);
	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_REPORTS, &again), 0);
	assert_ptr_equal(cp, again);
	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_OPERATOR, &again), -EEXIST);
	assert_int_equal(engine_source_add(f->e, "bad name", 0, &again), -EINVAL);
	assert_int_equal(engine_source_add(f->e, "op", ENGINE_SOURCE_OPERATOR, &op), 0);

	/* accepted: its first report, durable, in the source's outbox */
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"g1\",\"generation\":5,\"size\":\"256M\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_ACCEPTED);
	assert_int_equal(v.report->state, MSG_STATE_ACCEPTED);
	engine_verdict_done(&v);
	assert_int_equal(wait_final(f->e, "g1"), MSG_STATE_APPLIED);
	assert_int_equal(engine_last_generation(f->e, cp), 5);
	assert_int_equal(engine_outbox_wait(f->e, "cp", 0), 1);

	/* the same generation again: a replay with the recorded report */
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"g1\",\"generation\":5,\"size\":\"256M\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_REPLAY);
	assert_int_equal(v.report->state, MSG_STATE_APPLIED);
	engine_verdict_done(&v);

	/* stale: below the last generation, no record kept for it */
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"g0\",\"generation\":3,\"size\":\"128M\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_REJECTED);
	assert_int_equal(v.err, -ESTALE);
	assert_false(v.recorded);
	assert_null(v.report);
	assert_string_equal(v.error.code, "ESTALE");

	/* refused by the planner: recorded, with its report */
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"g2\",\"generation\":6,\"size\":\"4G\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_REJECTED);
	assert_int_equal(v.err, -ENOSPC);
	assert_true(v.recorded);
	assert_int_equal(v.report->state, MSG_STATE_REJECTED);
	engine_verdict_done(&v);

	/* a sync is answered, nothing recorded */
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"sync\",\"nonce\":42}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_ANSWERED);
	assert_true(v.sync);
	assert_int_equal(v.nonce, 42);
	engine_verdict_done(&v);

	/* an operator's request is numbered by the engine; no outbox for it */
	assert_int_equal(engine_submit(f->e, op, parse("{\"type\":\"revoke\",\"grant\":\"g1\"}", MSG_PARSE_UNNUMBERED), &v), 0);
	assert_int_equal(v.kind, ENGINE_ACCEPTED);
	assert_string_equal(v.report->id, "op-1");
	engine_verdict_done(&v);
	assert_int_equal(wait_final(f->e, "op-1"), MSG_STATE_APPLIED);
	assert_int_equal(engine_outbox_wait(f->e, "op", 0), 0);
	{
		struct engine_memory m;
		assert_int_equal(engine_memory(f->e, &m), 0);
		assert_int_equal(m.block_size, 128 * MIB);
		assert_int_equal(m.granted_bytes, 0);
		assert_int_equal(m.online_bytes, 1024 * MIB);
	}
	assert_non_null(engine_backend_root(f->e));

	/* each (request, state) told once, in order, with its report */
	pthread_mutex_lock(&f->seen.lock);
	{
		const char *want[] = { "g1 state accepted", "g1 state in_progress", "g1 state applied",
				       "g2 state rejected", "op-1 state accepted", "op-1 state in_progress",
				       "op-1 state applied" };
		assert_int_equal(f->seen.n, ARRAY_SIZE(want));
		for (size_t i = 0; i < ARRAY_SIZE(want); i++)
			assert_string_equal(f->seen.events[i], want[i]);
	}
	pthread_mutex_unlock(&f->seen.lock);
	engine_unsubscribe(f->e, on_transition, &f->seen);
}

/* The oldest report for DEST about ID in state STATE, acking what comes
 * before it; false when the outbox ends first. */
static bool outbox_has(struct engine *e, const char *dest, const char *id, const char *state)
{
	uint64_t seq;
	json_t *r;

	while (views_outbox_peek(e, dest, &seq, &r) == 0) {
		bool hit = streq(json_string_value(json_object_get(r, "id")), id) &&
			   streq(json_string_value(json_object_get(r, "state")), state);
		json_decref(r);
		assert_int_equal(engine_outbox_ack(e, dest, seq), 0);
		if (hit)
			return true;
	}
	return false;
}

static void test_cancel(void **state)
{
	struct fixture *f = *state;
	struct engine_source *cp = NULL;
	struct engine_verdict v;
	json_t *j;

	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_REPORTS, &cp), 0);
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"run\",\"generation\":1,\"size\":\"512M\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_ACCEPTED);
	engine_verdict_done(&v);
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"queued\",\"generation\":2,\"size\":\"256M\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_ACCEPTED);
	engine_verdict_done(&v);

	/* queued: cancelled at once, durable and in the sender's outbox before the verdict */
	assert_int_equal(engine_cancel(f->e, "queued", "unit", &v), 0);
	assert_int_equal(v.kind, ENGINE_ANSWERED);
	assert_int_equal(v.report->state, MSG_STATE_CANCELLED);
	assert_string_equal(v.report->error_code, "ECANCELED");
	engine_verdict_done(&v);
	j = views_engine_grant(f->e, "queued");
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "cancelled");
	json_decref(j);
	assert_true(outbox_has(f->e, "cp", "queued", "cancelled"));

	/* running: stops after the block in flight; partial with the blocks done */
	for (int i = 0; i < 300; i++) {
		j = views_engine_grant(f->e, "run");
		bool started = j && json_integer_value(json_object_get(j, "blocks_done")) >= 1;
		json_decref(j);
		if (started)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
	assert_int_equal(engine_cancel(f->e, "run", "unit", &v), 0);
	assert_int_equal(v.kind, ENGINE_ACCEPTED);
	assert_string_equal(v.report->cancel_requested_by, "unit");
	engine_verdict_done(&v);
	assert_int_equal(wait_final(f->e, "run"), MSG_STATE_PARTIAL);
	j = views_engine_grant(f->e, "run");
	assert_in_range(json_integer_value(json_object_get(j, "blocks_done")), 1, 3);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "ECANCELED");
	json_decref(j);
	assert_true(outbox_has(f->e, "cp", "run", "partial"));

	/* final already: refused with its status; unknown: ENOENT */
	assert_int_equal(engine_cancel(f->e, "run", "unit", &v), 0);
	assert_int_equal(v.kind, ENGINE_REJECTED);
	assert_int_equal(v.err, -EALREADY);
	assert_int_equal(v.report->state, MSG_STATE_PARTIAL);
	engine_verdict_done(&v);
	assert_int_equal(engine_cancel(f->e, "nope", "unit", &v), 0);
	assert_int_equal(v.err, -ENOENT);
	engine_verdict_done(&v);
}

/* A running grant's report (GET /v1/grants/ID) follows it block by block:
 * read after the status, it never shows fewer blocks done than the status
 * counted, and lists an entry for each (not a report of up to 100 ms ago). */
static void test_progress_per_block(void **state)
{
	struct fixture *f = *state;
	struct engine_source *cp = NULL;
	struct engine_verdict v;
	size_t seen_running = 0, last = 0;

	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_REPORTS, &cp), 0);
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"1G\"}", 0), &v), 0);
	assert_int_equal(v.kind, ENGINE_ACCEPTED);
	engine_verdict_done(&v);
	for (int i = 0; i < 20000; i++) {
		struct engine_status st;
		struct engine_grant_row row = { 0 };
		size_t counted, listed = 0;
		bool running;

		assert_int_equal(engine_status(f->e, &st), 0);
		running = st.has_running && streq(st.running.id, "g");
		counted = st.running.blocks_done;
		engine_status_done(&st);
		assert_int_equal(engine_grant(f->e, "g", &row), 0);
		if (msg_state_is_final(row.report.state)) {
			engine_grant_row_clear(&row);
			break;
		}
		for (size_t k = 0; k < row.report.n_blocks; k++)
			listed += streq(row.report.blocks[k].state, "online");
		if (running && counted > 0) {
			if (row.report.blocks_done < counted || listed < counted)
				fail_msg("the report shows %zu blocks done (%zu listed online) after the status counted %zu",
					 row.report.blocks_done, listed, counted);
			if (counted != last)
				seen_running++;
			last = counted;
		}
		engine_grant_row_clear(&row);
		nanosleep(&(struct timespec){ .tv_nsec = 500000 }, NULL);
	}
	assert_int_equal(wait_final(f->e, "g"), MSG_STATE_APPLIED);
	/* the loop saw the grant advance, not only its end */
	assert_true(seen_running >= 3);
}

/* The children of every thread of this process, as /proc lists them. */
static size_t children_of_self(void)
{
	glob_t g;
	size_t n = 0;

	if (glob("/proc/self/task/*/children", 0, NULL, &g) != 0)
		fail_msg("no /proc/self/task/*/children");
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char buf[256] = "";
		FILE *fp = fopen(g.gl_pathv[i], "re");

		if (fp && fgets(buf, sizeof(buf), fp) && buf[0] && buf[0] != '\n')
			n++;
		if (fp)
			fclose(fp);
	}
	globfree(&g);
	return n;
}

/*
 * Without the helper: an offline that would migrate for a minute (W6: a
 * signal the writer catches does not end it) is written from a child of the
 * executor's, killed at the revocation's 1 s budget.  The revocation fails
 * with EINTR well before the minute (wait_final gives up after 5 s), the
 * block is online and no child is left.
 */
static void test_revoke_budget_kills_offline(void **state)
{
	struct fixture *f = *state;
	struct engine_source *cp = NULL;
	struct engine_verdict v;
	struct sim_faults slow = { .latency_ms = 60000 };
	struct engine_grant_row row = { 0 };
	char sim[4096 + 16];

	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_REPORTS, &cp), 0);
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"grant\",\"id\":\"g\",\"generation\":1,\"size\":\"128M\"}", 0), &v), 0);
	engine_verdict_done(&v);
	assert_int_equal(wait_final(f->e, "g"), MSG_STATE_APPLIED);
	snprintf(sim, sizeof(sim), "%s/sim.json", f->tmp);
	assert_int_equal(sim_set_faults(sim, &slow), 0);
	assert_int_equal(engine_submit(f->e, cp, parse("{\"type\":\"revoke\",\"id\":\"r\",\"generation\":2,\"size\":\"128M\"}", 0), &v), 0);
	engine_verdict_done(&v);
	assert_int_equal(wait_final(f->e, "r"), MSG_STATE_FAILED);
	assert_int_equal(engine_grant(f->e, "r", &row), 0);
	assert_int_equal(row.report.n_blocks, 1);
	assert_string_equal(row.report.blocks[0].state, "online");
	assert_non_null(strstr(row.report.error_code, "EINTR"));
	engine_grant_row_clear(&row);
	assert_int_equal(children_of_self(), 0);
	slow.latency_ms = 0;
	assert_int_equal(sim_set_faults(sim, &slow), 0);
}

static void test_plan(void **state)
{
	struct fixture *f = *state;
	struct engine_source *op = NULL;
	struct engine_verdict v;
	json_t *g;

	assert_int_equal(engine_source_add(f->e, "op", ENGINE_SOURCE_OPERATOR, &op), 0);
	assert_int_equal(engine_plan(f->e, op, parse("{\"type\":\"grant\",\"size\":\"256M\",\"memmap_on_memory\":true}", MSG_PARSE_UNNUMBERED), &v), 0);
	assert_int_equal(v.kind, ENGINE_ANSWERED);
	assert_non_null(v.plan);
	assert_int_equal(v.plan->n_blocks, 2);
	assert_int_equal(v.plan->memmap, 1);
	/* memmap in the blocks: 2 x 128M / 64, none taken from online memory */
	assert_int_equal(v.plan->memmap_bytes, 4 * MIB);
	assert_int_equal(v.plan->online_cost_bytes, 0);
	assert_int_equal(v.plan->usable_bytes, 256 * MIB - 4 * MIB);
	engine_verdict_done(&v);
	/* off: the memmap comes out of the memory online now */
	assert_int_equal(engine_plan(f->e, op, parse("{\"type\":\"grant\",\"size\":\"256M\",\"memmap_on_memory\":false}", MSG_PARSE_UNNUMBERED), &v), 0);
	assert_int_equal(v.plan->online_cost_bytes, 4 * MIB);
	engine_verdict_done(&v);
	/* too big: rejected as a submit would be, and not recorded */
	assert_int_equal(engine_plan(f->e, op, parse("{\"type\":\"grant\",\"size\":\"4G\"}", MSG_PARSE_UNNUMBERED), &v), 0);
	assert_int_equal(v.kind, ENGINE_REJECTED);
	assert_int_equal(v.err, -ENOSPC);
	assert_false(v.recorded);
	engine_verdict_done(&v);
	/* nothing numbered, nothing recorded */
	assert_int_equal(engine_last_generation(f->e, op), 0);
	g = views_engine_grants(f->e);
	assert_int_equal(json_array_size(json_object_get(g, "grants")), 0);
	json_decref(g);
}

/* Submits TEXT from SRC: the verdict's kind, and its error in *ERR. */
static enum engine_verdict_kind submit_kind(struct engine *e, const struct engine_source *src, const char *text,
					    int *err)
{
	struct engine_verdict v;
	enum engine_verdict_kind k;

	assert_int_equal(engine_submit(e, src, parse(text, 0), &v), 0);
	k = v.kind;
	*err = v.err;
	engine_verdict_done(&v);
	return k;
}

/* Admission's edges, each on both sides: the standby there is (8 blocks of
 * 128M), the generations around the last one, a deadline just past, and a
 * revocation of exactly what is owned. */
static void test_admission_boundaries(void **state)
{
	struct fixture *f = *state;
	struct engine_source *cp = NULL, *op = NULL;
	struct engine_verdict v;
	char text[256], when[32];
	int err;

	assert_int_equal(engine_source_add(f->e, "cp", ENGINE_SOURCE_REPORTS, &cp), 0);
	assert_int_equal(engine_source_add(f->e, "op", ENGINE_SOURCE_OPERATOR, &op), 0);

	/* all the standby plans; one block more does not */
	assert_int_equal(engine_plan(f->e, op, parse("{\"type\":\"grant\",\"size\":\"1G\"}", MSG_PARSE_UNNUMBERED), &v), 0);
	assert_int_equal(v.kind, ENGINE_ANSWERED);
	assert_int_equal(v.plan->n_blocks, 8);
	engine_verdict_done(&v);
	assert_int_equal(engine_plan(f->e, op, parse("{\"type\":\"grant\",\"size\":\"1152M\"}", MSG_PARSE_UNNUMBERED), &v), 0);
	assert_int_equal(v.kind, ENGINE_REJECTED);
	assert_int_equal(v.err, -ENOSPC);
	engine_verdict_done(&v);

	/* a deadline an hour ahead runs; one a second past is refused and
	 * recorded so (its generation answered with that refusal from now on) */
	msg_time_format(time(NULL) + 3600, when);
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"g1\",\"generation\":5,\"size\":\"512M\",\"not_after\":\"%s\"}", when);
	assert_int_equal(submit_kind(f->e, cp, text, &err), ENGINE_ACCEPTED);
	assert_int_equal(wait_final(f->e, "g1"), MSG_STATE_APPLIED);
	/* not_after is the last moment a grant may start: a deadline of this
	 * very second is already over (time only goes on) */
	msg_time_format(time(NULL), when);
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"now\",\"generation\":6,\"size\":\"128M\",\"not_after\":\"%s\"}", when);
	assert_int_equal(submit_kind(f->e, cp, text, &err), ENGINE_REJECTED);
	assert_int_equal(err, -ETIME);
	msg_time_format(time(NULL) - 1, when);
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"late\",\"generation\":7,\"size\":\"128M\",\"not_after\":\"%s\"}", when);
	assert_int_equal(submit_kind(f->e, cp, text, &err), ENGINE_REJECTED);
	assert_int_equal(err, -ETIME);

	/* generations: at or below the last with a record, a replay; below it
	 * without one, stale; the next is new (and refused here by its id) */
	assert_int_equal(submit_kind(f->e, cp, text, &err), ENGINE_REPLAY);
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"grant\",\"id\":\"g1\",\"generation\":5,\"size\":\"512M\"}", &err),
			 ENGINE_REPLAY);
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"grant\",\"id\":\"gx\",\"generation\":4,\"size\":\"128M\"}", &err),
			 ENGINE_REJECTED);
	assert_int_equal(err, -ESTALE);
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"grant\",\"id\":\"g1\",\"generation\":8,\"size\":\"128M\"}", &err),
			 ENGINE_REJECTED);
	assert_int_equal(err, -EEXIST);

	/* what is left of the standby: exactly it is granted, then nothing more */
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"grant\",\"id\":\"g2\",\"generation\":9,\"size\":\"512M\"}", &err),
			 ENGINE_ACCEPTED);
	assert_int_equal(wait_final(f->e, "g2"), MSG_STATE_APPLIED);
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"grant\",\"id\":\"g3\",\"generation\":10,\"size\":\"128M\"}", &err),
			 ENGINE_REJECTED);
	assert_int_equal(err, -ENOSPC);

	/* a revocation of one block more than is owned is refused; of all of it runs */
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"revoke\",\"id\":\"r1\",\"generation\":11,\"size\":\"1152M\"}", &err),
			 ENGINE_REJECTED);
	assert_int_equal(err, -ENOSPC);
	assert_int_equal(submit_kind(f->e, cp, "{\"type\":\"revoke\",\"id\":\"r2\",\"generation\":12,\"size\":\"1G\"}", &err),
			 ENGINE_ACCEPTED);
	assert_int_equal(wait_final(f->e, "r2"), MSG_STATE_APPLIED);
	{
		struct engine_memory m;
		assert_int_equal(engine_memory(f->e, &m), 0);
		assert_int_equal(m.granted_bytes, 0);
		assert_int_equal(m.online_bytes, 1024 * MIB);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_verdicts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel, setup_slow, teardown),
		cmocka_unit_test_setup_teardown(test_plan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_progress_per_block, setup_quick, teardown),
		cmocka_unit_test_setup_teardown(test_admission_boundaries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_budget_kills_offline, setup_budget, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
