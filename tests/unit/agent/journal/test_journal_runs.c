/* SPDX-License-Identifier: MIT */
/* A status report as the journal keeps it (lib/wire/report_runs.h,
 * docs/journal.md): its blocks as runs in memory and on disk, the same
 * report back byte for byte (the views, the outbox, after a replay), a
 * journal written before runs still read, malformed runs refused at open,
 * and a record that shares the grants it does not change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>

#include "agent/journal/intentlog.h"
#include "agent/journal/recordlog.h"
#include "lib/fileio.h"
#include "lib/json.h"
#include "lib/util.h"
#include "lib/wire/report_json.h"

#define BS 134217728ull
#define N_BLOCKS 4096
#define FIRST 16
#define FAILED_AT (FIRST + 100)

struct fixture {
	char tmp[64];
	char dir[128];
	char log[160];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-runs-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s/state", f->tmp);
	snprintf(f->log, sizeof(f->log), "%s/journal.log", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rm_rf(f->tmp);
	free(f);
	return 0;
}

static struct intentlog *iopen(struct fixture *f)
{
	struct intentlog *il = NULL;
	char err[512] = "";
	int r = intentlog_open(f->dir, NULL, &il, NULL, err, sizeof(err));

	if (r < 0)
		fail_msg("intentlog_open: %s (%s)", errno_name(r), err);
	return il;
}

static struct msg *mkmsg(const char *text)
{
	struct msg_error err;
	struct msg *m = NULL;

	if (msg_parse(text, strlen(text), 65536, &m, &err) < 0)
		fail_msg("%s: %s", text, err.message);
	return m;
}

/* A grant's final report: N_BLOCKS blocks online alike, but one that failed. */
static void big_report(struct report *r)
{
	memset(r, 0, sizeof(*r));
	r->agent = "guest-7";
	snprintf(r->id, sizeof(r->id), "g-1");
	snprintf(r->source, sizeof(r->source), "https");
	r->generation = 1;
	r->state = MSG_STATE_PARTIAL;
	r->kind = MSG_GRANT;
	r->block_size = BS;
	r->requested_bytes = N_BLOCKS * BS;
	r->applied_bytes = (N_BLOCKS - 1) * BS;
	r->blocks_total = r->blocks_done = N_BLOCKS;
	r->blocks = calloc(N_BLOCKS, sizeof(*r->blocks));
	assert_non_null(r->blocks);
	for (size_t i = 0; i < N_BLOCKS; i++) {
		struct report_block *b = &r->blocks[r->n_blocks++];

		b->block = FIRST + i;
		b->configured = true;
		b->memmap_on_memory = 1;
		snprintf(b->state, sizeof(b->state), "online");
		snprintf(b->zone, sizeof(b->zone), "Movable");
		if (b->block == FAILED_AT) {
			snprintf(b->state, sizeof(b->state), "offline");
			b->zone[0] = '\0';
			snprintf(b->error_code, sizeof(b->error_code), "EBUSY");
			snprintf(b->error_message, sizeof(b->error_message), "online: Device or resource busy");
		}
	}
	assert_int_equal(report_add_decision(r, "zone movable: policy"), 0);
}

/* g-1 accepted, its N_BLOCKS blocks intended and done, BIG its result. */
static void record_grant(struct intentlog *il, const struct report *big)
{
	_cleanup_msg_ struct msg *m = mkmsg("{\"type\":\"grant\",\"id\":\"g-1\",\"generation\":1,\"size\":\"512G\"}");
	struct intentlog_target *t = calloc(N_BLOCKS, sizeof(*t));
	struct intentlog_done *d = calloc(N_BLOCKS, sizeof(*d));
	size_t n = 0;

	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), 0);
	for (size_t i = 0; i < N_BLOCKS; i++) {
		t[i] = (struct intentlog_target){ .block = FIRST + i, .memmap = 1, .zone = MEM_ZONE_MOVABLE };
		if (FIRST + i != FAILED_AT)
			d[n++] = (struct intentlog_done){ .block = FIRST + i, .zone = MEM_ZONE_MOVABLE, .memmap = true };
	}
	assert_int_equal(intentlog_intent(il, "g-1", ILOG_UP, t, N_BLOCKS, NULL, NULL), 0);
	assert_int_equal(intentlog_result(il, "g-1", MSG_STATE_PARTIAL, big->applied_bytes, d, n, big, "https"), 0);
	free(t);
	free(d);
}

static char *wire_of(const struct report *r)
{
	_cleanup_json_ json_t *j = report_to_json(r);

	assert_non_null(j);
	return json_dumps(j, JSON_COMPACT);
}

/* The report the journal gives back for g-1, as the wire has it. */
static char *kept_wire(struct intentlog *il)
{
	struct intentlog_grant g;
	_cleanup_report_ struct report back = { 0 };
	char *text;

	assert_int_equal(intentlog_get_grant(il, "g-1", &g), 0);
	assert_int_equal(intentlog_grant_report(&g, &back), 0);
	back.agent = "guest-7";
	text = wire_of(&back);
	intentlog_grant_done(&g);
	return text;
}

static void test_report_kept_as_runs(void **state)
{
	struct fixture *f = *state;
	_cleanup_report_ struct report big = { 0 };
	struct intentlog *il = iopen(f);
	_cleanup_free_ char *want = NULL, *back = NULL, *again = NULL, *queued = NULL, *log = NULL;
	size_t len = 0;
	uint64_t seq;

	big_report(&big);
	want = wire_of(&big);
	record_grant(il, &big);

	/* three runs in memory: before the failed block, it, after it */
	json_auto_t *live = intentlog_state_json(il);
	json_t *status = json_object_get(json_array_get(json_object_get(live, "grants"), 0), "status");
	assert_null(json_object_get(status, "blocks"));
	assert_int_equal(json_array_size(json_object_get(status, "block_runs")), 3);

	back = kept_wire(il);
	assert_string_equal(back, want);
	assert_int_equal(intentlog_outbox_peek_text(il, "https", &seq, &queued), 0);
	/* the queued document has the agent the report carried */
	assert_string_equal(queued, want);
	intentlog_close(il);

	/* on disk too: the log's reports hold runs, not one entry (with its
	 * "range") per block */
	assert_int_equal(file_read_all(f->log, 64 << 20, &log, &len), 0);
	assert_null(memmem(log, len, "\"range\"", 7));
	il = iopen(f);
	again = kept_wire(il);
	assert_string_equal(again, want);
	intentlog_close(il);
}

/* A revocation gives blocks back from the top down: one run downwards. */
static void test_revocation_runs_down(void **state)
{
	struct fixture *f = *state;
	_cleanup_report_ struct report big = { 0 }, rev = { 0 };
	struct intentlog *il = iopen(f);
	_cleanup_msg_ struct msg *m = mkmsg("{\"type\":\"revoke\",\"id\":\"r-1\",\"generation\":2,\"grant\":\"g-1\"}");
	_cleanup_free_ char *want = NULL, *back = NULL;
	struct intentlog_grant g;

	big_report(&big);
	record_grant(il, &big);
	assert_int_equal(report_copy(&rev, &big), 0);
	snprintf(rev.id, sizeof(rev.id), "r-1");
	rev.kind = MSG_REVOKE;
	rev.generation = 2;
	for (size_t i = 0; i < rev.n_blocks; i++) {
		struct report_block *b = &rev.blocks[i];

		*b = (struct report_block){ .block = FIRST + N_BLOCKS - 1 - i, .memmap_on_memory = 1 };
		snprintf(b->state, sizeof(b->state), "offline");
	}
	want = wire_of(&rev);
	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), 0);
	assert_int_equal(intentlog_set_state(il, "r-1", MSG_STATE_APPLIED, &rev, NULL), 0);
	json_auto_t *live = intentlog_state_json(il);
	json_t *status = json_object_get(json_array_get(json_object_get(live, "grants"), 1), "status");
	assert_int_equal(json_array_size(json_object_get(status, "block_runs")), 1);
	assert_int_equal(intentlog_get_grant(il, "r-1", &g), 0);
	_cleanup_report_ struct report got = { 0 };
	assert_int_equal(intentlog_grant_report(&g, &got), 0);
	intentlog_grant_done(&g);
	got.agent = "guest-7";
	back = wire_of(&got);
	assert_string_equal(back, want);
	intentlog_close(il);
}

/* The ILOG_REC_SNAPSHOT record of STATE alone as journal.log. */
static void write_snapshot(struct fixture *f, json_t *state)
{
	_cleanup_free_ char *snap = json_dumps(state, JSON_COMPACT);
	struct recordlog_rec rec = { ILOG_REC_SNAPSHOT, snap, strlen(snap) };
	_cleanup_free_ void *frame = NULL;
	size_t flen;
	_cleanup_close_ int fd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(recordlog_encode(&rec, 1, &frame, &flen), 0);
	assert_int_equal(write(fd, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN), RECORDLOG_FILE_MAGIC_LEN);
	assert_int_equal(write(fd, frame, flen), (ssize_t)flen);
}

/* A journal written before runs keeps "blocks": read as it is. */
static void test_blocks_of_before_runs_read(void **state)
{
	struct fixture *f = *state;
	_cleanup_report_ struct report big = { 0 };
	struct intentlog *il = iopen(f);
	_cleanup_free_ char *want = NULL, *back = NULL;

	big_report(&big);
	want = wire_of(&big);
	record_grant(il, &big);
	json_auto_t *st = intentlog_state_json(il);
	intentlog_close(il);
	json_t *g = json_array_get(json_object_get(st, "grants"), 0);
	json_auto_t *old = report_to_json(&big);
	json_object_set(g, "status", old);
	json_t *items = json_object_get(json_object_get(json_object_get(st, "outbox"), "https"), "items");
	json_object_set(json_array_get(items, 0), "report", old);
	write_snapshot(f, st);

	il = iopen(f);
	back = kept_wire(il);
	assert_string_equal(back, want);
	intentlog_close(il);
}

static void test_malformed_runs_refused(void **state)
{
	struct fixture *f = *state;
	_cleanup_report_ struct report big = { 0 };
	struct intentlog *il = iopen(f);
	const json_int_t bad[] = { 0, -1, (json_int_t)1 << 40 };

	big_report(&big);
	record_grant(il, &big);
	json_auto_t *st = intentlog_state_json(il);
	intentlog_close(il);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		json_auto_t *copy = json_deep_copy(st);
		json_t *status = json_object_get(json_array_get(json_object_get(copy, "grants"), 0), "status");
		char err[512] = "";

		json_object_set_new(json_array_get(json_object_get(status, "block_runs"), 0), "count", json_integer(bad[i]));
		write_snapshot(f, copy);
		il = NULL;
		assert_int_equal(intentlog_open(f->dir, NULL, &il, NULL, err, sizeof(err)), -EBADMSG);
		assert_null(il);
		if (!strstr(err, "block_runs"))
			fail_msg("count %" JSON_INTEGER_FORMAT ": %s", bad[i], err);
	}
}

/* A record shares what it does not change: g-1's kept report is the same
 * object before and after records of other requests, a rejected one too. */
static void test_record_shares_what_it_does_not_change(void **state)
{
	struct fixture *f = *state;
	_cleanup_report_ struct report big = { 0 };
	struct intentlog *il = iopen(f);
	struct intentlog_grant before, after;

	big_report(&big);
	record_grant(il, &big);
	assert_int_equal(intentlog_get_grant(il, "g-1", &before), 0);
	_cleanup_msg_ struct msg *m = mkmsg("{\"type\":\"grant\",\"id\":\"g-2\",\"generation\":2,\"size\":\"1G\"}");
	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), 0);
	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), -ESTALE);
	assert_int_equal(intentlog_set_state(il, "g-2", MSG_STATE_REJECTED, NULL, NULL), 0);
	assert_int_equal(intentlog_get_grant(il, "g-1", &after), 0);
	assert_ptr_equal(before.status, after.status);
	intentlog_grant_done(&before);
	intentlog_grant_done(&after);
	intentlog_close(il);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_report_kept_as_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revocation_runs_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blocks_of_before_runs_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_runs_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record_shares_what_it_does_not_change, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
