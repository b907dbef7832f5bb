/* SPDX-License-Identifier: MIT */
/* The durable journal (docs/journal.md): persistence, replay detection,
 * outbox order, step marker, corruption and crash leftovers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "agent/journal.h"
#include "lib/fileio.h"
#include "lib/util.h"

struct fixture {
	char tmp[64];
	char dir[128];
	char file[160];
	char step[160];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-journal-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	/* a directory that does not exist yet: journal_open creates it */
	snprintf(f->dir, sizeof(f->dir), "%s/state/sub", f->tmp);
	snprintf(f->file, sizeof(f->file), "%s/journal.json", f->dir);
	snprintf(f->step, sizeof(f->step), "%s/step.json", f->dir);
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

static struct journal *jopen(struct fixture *f, unsigned history_max)
{
	struct journal_options o = { .history_max = history_max };
	struct journal *j = NULL;
	char err[256] = "";
	int r = journal_open(f->dir, &o, &j, err, sizeof(err));

	if (r < 0)
		fail_msg("journal_open: %s (%s)", errno_name(r), err);
	return j;
}

static int jopen_fails(struct fixture *f, char *err, size_t errlen)
{
	struct journal *j = NULL;
	int r = journal_open(f->dir, NULL, &j, err, errlen);

	if (r == 0) {
		journal_close(j);
		fail_msg("journal_open succeeded on a bad journal");
	}
	assert_null(j);
	return r;
}

static struct msg *mkmsg(const char *text)
{
	struct msg_error err;
	struct msg *m = NULL;

	if (msg_parse(text, strlen(text), 65536, &m, &err) < 0)
		fail_msg("%s: %s", text, err.message);
	return m;
}

static struct msg *grant_msg(const char *id, uint64_t gen)
{
	char text[256];

	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"%s\",\"generation\":%" PRIu64 ",\"size\":\"256M\"}",
		 id, gen);
	return mkmsg(text);
}

static json_t *status_json(const char *id, uint64_t gen, enum msg_state st)
{
	const struct msg_status s = { .agent = "guest-7", .id = id, .generation = gen, .state = st,
				      .block_size = 134217728, .source = "https" };
	return msg_status_to_json(&s);
}

static void record(struct journal *j, const char *source, const char *id, uint64_t gen, enum msg_state st)
{
	_cleanup_msg_ struct msg *m = grant_msg(id, gen);
	json_auto_t *s = status_json(id, gen, st);

	assert_int_equal(journal_record_grant(j, source, m, st, s, NULL), 0);
}

static void write_file(const char *path, const char *data, size_t len)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
}

static void test_open_creates_private_dir(void **state)
{
	struct fixture *f = *state;
	_cleanup_journal_ struct journal *j = jopen(f, 0);
	struct stat st;
	struct journal_grant *list = NULL;
	size_t n = 99;

	assert_int_equal(stat(f->dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(journal_last_generation(j, "https"), 0);
	assert_int_equal(journal_list_grants(j, &list, &n), 0);
	assert_int_equal(n, 0);
	journal_grants_free(list, n);
	assert_int_equal(journal_pending_step(j, NULL), -ENOENT);
	assert_int_equal(journal_outbox_count(j, "https"), 0);
}

static void test_second_open_is_refused(void **state)
{
	struct fixture *f = *state;
	_cleanup_journal_ struct journal *j = jopen(f, 0);
	char err[256];

	assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "in use"));
}

static void test_record_persists(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	_cleanup_msg_ struct msg *m = mkmsg("{\"type\":\"grant\",\"id\":\"g-42\",\"generation\":42,\"blocks\":[16,17],"
					    "\"zone\":\"movable\",\"not_after\":\"2026-12-03T10:00:00Z\"}");
	json_auto_t *accepted = status_json("g-42", 42, MSG_STATE_ACCEPTED);
	json_auto_t *applied = status_json("g-42", 42, MSG_STATE_APPLIED);
	json_auto_t *req = msg_to_json(m);
	struct journal_grant g;

	assert_int_equal(journal_record_grant(j, "https", m, MSG_STATE_ACCEPTED, accepted, NULL), 0);
	assert_int_equal(journal_set_state(j, "g-42", MSG_STATE_APPLIED, applied, NULL), 0);
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_last_generation(j, "https"), 42);
	assert_int_equal(journal_last_generation(j, "local"), 0);
	assert_int_equal(journal_get_grant(j, "g-42", &g), 0);
	assert_string_equal(g.id, "g-42");
	assert_string_equal(g.source, "https");
	assert_int_equal(g.type, MSG_GRANT);
	assert_int_equal(g.generation, 42);
	assert_int_equal(g.state, MSG_STATE_APPLIED);
	assert_true(json_equal(g.request, req));
	assert_true(json_equal(g.status, applied));
	assert_true(g.created > 0 && g.updated >= g.created);
	journal_grant_done(&g);
	assert_int_equal(journal_get_grant(j, "g-43", &g), -ENOENT);

	json_auto_t *rec = journal_grant_json(j, "g-42");
	assert_string_equal(json_string_value(json_object_get(rec, "state")), "applied");
	journal_close(j);
}

static void test_generation_replay(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	struct journal_grant g;

	record(j, "https", "g-41", 41, MSG_STATE_REJECTED);
	record(j, "https", "g-42", 42, MSG_STATE_APPLIED);
	record(j, "local", "l-1", 1, MSG_STATE_APPLIED);
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_lookup_generation(j, "https", 43, &g), JOURNAL_GEN_NEW);
	assert_int_equal(journal_lookup_generation(j, "https", 42, &g), JOURNAL_GEN_REPLAY);
	assert_string_equal(g.id, "g-42");
	assert_int_equal(g.state, MSG_STATE_APPLIED);
	assert_string_equal(json_string_value(json_object_get(g.status, "state")), "applied");
	journal_grant_done(&g);
	assert_int_equal(journal_lookup_generation(j, "https", 41, NULL), JOURNAL_GEN_REPLAY);
	/* below the last, never recorded (or dropped from history) */
	assert_int_equal(journal_lookup_generation(j, "https", 7, NULL), JOURNAL_GEN_STALE);
	/* generations are per source */
	assert_int_equal(journal_lookup_generation(j, "channel", 1, NULL), JOURNAL_GEN_NEW);
	assert_int_equal(journal_lookup_generation(j, "local", 2, NULL), JOURNAL_GEN_NEW);
	assert_int_equal(journal_lookup_generation(j, "bad source", 2, NULL), -EINVAL);

	/* recording at or below the last generation is refused and changes nothing */
	_cleanup_msg_ struct msg *again = grant_msg("g-x", 42);
	assert_int_equal(journal_record_grant(j, "https", again, MSG_STATE_ACCEPTED, NULL, NULL), -ESTALE);
	_cleanup_msg_ struct msg *dup = grant_msg("g-42", 50);
	assert_int_equal(journal_record_grant(j, "https", dup, MSG_STATE_ACCEPTED, NULL, NULL), -EEXIST);
	assert_int_equal(journal_last_generation(j, "https"), 42);
	_cleanup_msg_ struct msg *sync = mkmsg("{\"type\":\"sync\",\"nonce\":1}");
	assert_int_equal(journal_record_grant(j, "https", sync, MSG_STATE_ACCEPTED, NULL, NULL), -EINVAL);
	journal_close(j);
}

static void test_outbox_order_and_ack_across_reopen(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	json_t *r = NULL;
	uint64_t seq = 0;

	for (int i = 1; i <= 3; i++) {
		json_auto_t *s = json_pack("{s:i}", "n", i);
		assert_int_equal(journal_outbox_push(j, "https", s, &seq), 0);
		assert_int_equal(seq, (uint64_t)i);
	}
	json_auto_t *other = json_pack("{s:s}", "to", "channel");
	assert_int_equal(journal_outbox_push(j, "channel", other, &seq), 0);
	assert_int_equal(seq, 1); /* sequences are per destination */
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_outbox_count(j, "https"), 3);
	assert_int_equal(journal_outbox_peek(j, "https", &seq, &r), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(json_integer_value(json_object_get(r, "n")), 1);
	json_decref(r);
	assert_int_equal(journal_outbox_ack(j, "https", 1), 0);
	assert_int_equal(journal_outbox_ack(j, "https", 1), -ENOENT); /* a repeated ack is harmless */
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_outbox_peek(j, "https", &seq, &r), 0);
	assert_int_equal(seq, 2);
	assert_int_equal(json_integer_value(json_object_get(r, "n")), 2);
	json_decref(r);
	assert_int_equal(journal_outbox_ack(j, "https", 2), 0);
	assert_int_equal(journal_outbox_ack(j, "https", 3), 0);
	assert_int_equal(journal_outbox_peek(j, "https", &seq, &r), -ENOENT);
	journal_close(j);

	/* an emptied queue does not reuse sequence numbers (they are idempotency keys) */
	j = jopen(f, 0);
	json_auto_t *s4 = json_pack("{s:i}", "n", 4);
	assert_int_equal(journal_outbox_push(j, "https", s4, &seq), 0);
	assert_int_equal(seq, 4);
	assert_int_equal(journal_outbox_peek(j, "channel", &seq, &r), 0);
	assert_int_equal(seq, 1);
	json_decref(r);
	json_auto_t *notobj = json_integer(1);
	assert_int_equal(journal_outbox_push(j, "https", notobj, NULL), -EINVAL);
	assert_int_equal(journal_outbox_push(j, "no/slash", s4, NULL), -EINVAL);
	journal_close(j);
}

static void test_outbox_bounded(void **state)
{
	struct fixture *f = *state;
	struct journal_options o = { .outbox_max = 3 };
	struct journal *j = NULL;
	json_auto_t *s = json_pack("{s:i}", "n", 1);

	assert_int_equal(journal_open(f->dir, &o, &j, NULL, 0), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(journal_outbox_push(j, "https", s, NULL), 0);
	assert_int_equal(journal_outbox_push(j, "https", s, NULL), -ENOBUFS);
	assert_int_equal(journal_outbox_count(j, "https"), 3);
	journal_close(j);
}

static void test_state_and_report_in_one_write(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	_cleanup_msg_ struct msg *m = grant_msg("g-1", 1);
	json_auto_t *acc = status_json("g-1", 1, MSG_STATE_ACCEPTED);
	json_auto_t *done = status_json("g-1", 1, MSG_STATE_APPLIED);
	json_t *r;
	uint64_t seq;

	assert_int_equal(journal_record_grant(j, "https", m, MSG_STATE_ACCEPTED, acc, "https"), 0);
	assert_int_equal(journal_set_state(j, "g-1", MSG_STATE_APPLIED, done, "https"), 0);
	/* no status given: the stored one is queued again */
	assert_int_equal(journal_set_state(j, "g-1", MSG_STATE_APPLIED, NULL, "channel"), 0);
	assert_int_equal(journal_set_state(j, "nope", MSG_STATE_APPLIED, NULL, NULL), -ENOENT);
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_outbox_count(j, "https"), 2);
	assert_int_equal(journal_outbox_peek(j, "https", &seq, &r), 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "accepted");
	json_decref(r);
	assert_int_equal(journal_outbox_ack(j, "https", seq), 0);
	assert_int_equal(journal_outbox_peek(j, "https", &seq, &r), 0);
	assert_string_equal(json_string_value(json_object_get(r, "state")), "applied");
	json_decref(r);
	assert_int_equal(journal_outbox_peek(j, "channel", &seq, &r), 0);
	assert_true(json_equal(r, done));
	json_decref(r);

	/* a record without any status has nothing to queue */
	_cleanup_msg_ struct msg *m2 = grant_msg("g-2", 2);
	assert_int_equal(journal_record_grant(j, "https", m2, MSG_STATE_ACCEPTED, NULL, NULL), 0);
	assert_int_equal(journal_set_state(j, "g-2", MSG_STATE_IN_PROGRESS, NULL, "https"), -EINVAL);
	assert_int_equal(journal_record_grant(j, "https", m2, MSG_STATE_ACCEPTED, NULL, "https"), -EINVAL);
	journal_close(j);
}

static void test_owned_blocks(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	struct journal_block *b = NULL, one;
	uint64_t seq;
	size_t n;

	record(j, "https", "g-1", 1, MSG_STATE_IN_PROGRESS);
	record(j, "https", "g-2", 2, MSG_STATE_IN_PROGRESS);
	_cleanup_msg_ struct msg *rv = mkmsg("{\"type\":\"revoke\",\"id\":\"r-3\",\"generation\":3,\"size\":\"128M\"}");
	assert_int_equal(journal_record_grant(j, "https", rv, MSG_STATE_ACCEPTED, NULL, NULL), 0);

	assert_int_equal(journal_add_owned_block(j, "g-1", 16, MEM_ZONE_MOVABLE, true, &seq), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(journal_add_owned_block(j, "g-2", 20, MEM_ZONE_NORMAL, false, &seq), 0);
	assert_int_equal(seq, 2);
	assert_int_equal(journal_add_owned_block(j, "g-1", 17, MEM_ZONE_MOVABLE, false, &seq), 0);
	assert_int_equal(seq, 3);
	assert_int_equal(journal_add_owned_block(j, "g-2", 16, MEM_ZONE_MOVABLE, true, NULL), -EEXIST);
	assert_int_equal(journal_add_owned_block(j, "g-9", 30, MEM_ZONE_MOVABLE, true, NULL), -ENOENT);
	assert_int_equal(journal_add_owned_block(j, "g-1", 30, MEM_ZONE_AUTO, true, NULL), -EINVAL);
	assert_int_equal(journal_add_owned_block(j, "r-3", 30, MEM_ZONE_MOVABLE, true, NULL), -EINVAL);
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_owned_blocks(j, &b, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(b[0].block, 16);
	assert_int_equal(b[0].seq, 1);
	assert_int_equal(b[0].zone, MEM_ZONE_MOVABLE);
	assert_true(b[0].memmap);
	assert_string_equal(b[0].grant_id, "g-1");
	assert_int_equal(b[1].block, 20);
	assert_int_equal(b[1].zone, MEM_ZONE_NORMAL);
	assert_false(b[1].memmap);
	assert_string_equal(b[1].grant_id, "g-2");
	assert_int_equal(b[2].block, 17);
	assert_int_equal(b[2].seq, 3);
	free(b);

	struct journal_grant g;
	assert_int_equal(journal_get_grant(j, "g-1", &g), 0);
	assert_int_equal(g.n_blocks, 2);
	journal_grant_done(&g);

	assert_int_equal(journal_remove_owned_block(j, 16), 0);
	assert_int_equal(journal_remove_owned_block(j, 16), -ENOENT);
	assert_int_equal(journal_find_owned_block(j, 16, NULL), -ENOENT);
	/* seq is never reused, even after removal and reopen */
	journal_close(j);
	j = jopen(f, 0);
	assert_int_equal(journal_find_owned_block(j, 17, &one), 0);
	assert_string_equal(one.grant_id, "g-1");
	assert_int_equal(journal_add_owned_block(j, "g-1", 16, MEM_ZONE_MOVABLE, true, &seq), 0);
	assert_int_equal(seq, 4);
	journal_close(j);
}

static void test_step_marker_survives_reopen(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	struct journal_step s = { .op = "g-1", .kind = JOURNAL_STEP_BRING_UP, .block = 18,
				  .phase = "online", .memmap = 1, .zone = MEM_ZONE_MOVABLE };
	struct journal_step got;

	assert_int_equal(journal_begin_step(j, &s), -ENOENT); /* unknown op */
	record(j, "https", "g-1", 1, MSG_STATE_IN_PROGRESS);
	assert_int_equal(journal_begin_step(j, &s), 0);
	assert_int_equal(journal_begin_step(j, &s), -EBUSY);
	journal_close(j); /* "crash": the step never ended */

	j = jopen(f, 0);
	assert_int_equal(journal_pending_step(j, &got), 0);
	assert_string_equal(got.op, "g-1");
	assert_int_equal(got.kind, JOURNAL_STEP_BRING_UP);
	assert_int_equal(got.block, 18);
	assert_string_equal(got.phase, "online");
	assert_int_equal(got.memmap, 1);
	assert_int_equal(got.zone, MEM_ZONE_MOVABLE);
	assert_true(got.started > 0);
	assert_int_equal(journal_end_step(j), 0);
	assert_int_equal(journal_end_step(j), -ENOENT);
	journal_close(j);

	j = jopen(f, 0);
	assert_int_equal(journal_pending_step(j, &got), -ENOENT);
	struct journal_step td = { .op = "g-1", .kind = JOURNAL_STEP_TAKE_DOWN, .block = 3, .memmap = -1 };
	assert_int_equal(journal_begin_step(j, &td), 0);
	journal_close(j);
	j = jopen(f, 0);
	assert_int_equal(journal_pending_step(j, &got), 0);
	assert_int_equal(got.kind, JOURNAL_STEP_TAKE_DOWN);
	assert_int_equal(got.memmap, -1);
	assert_int_equal(got.zone, MEM_ZONE_AUTO);
	assert_string_equal(got.phase, "");
	struct journal_step bad = { .op = "g-1", .phase = "Bad Phase" };
	assert_int_equal(journal_end_step(j), 0);
	assert_int_equal(journal_begin_step(j, &bad), -EINVAL);
	journal_close(j);
}

static void test_corrupt_journal_is_an_error(void **state)
{
	struct fixture *f = *state;
	static const char *const bad[] = {
		"garbage",
		"",
		"[]",
		"{\"version\":2,\"next_order\":0,\"next_block_seq\":1,\"sources\":{},\"grants\":[],\"outbox\":{}}",
		"{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{},\"grants\":{},\"outbox\":{}}",
		"{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{\"https\":0},\"grants\":[],\"outbox\":{}}",
		"{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{},\"grants\":[],\"outbox\":"
		"{\"https\":{\"next_seq\":2,\"items\":[{\"seq\":5,\"report\":{}}]}}}",
		"{\"version\":1,\"version\":1}",
	};
	char err[256];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(mkdir_p(f->dir, 0700), 0);
		write_file(f->file, bad[i], strlen(bad[i]));
		err[0] = '\0';
		assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "journal.json"));
		/* not silently replaced: the bad file is still there for the operator */
		_cleanup_free_ char *text = NULL;
		assert_int_equal(file_read_all(f->file, 1 << 20, &text, NULL), 0);
		assert_string_equal(text, bad[i]);
	}
}

/* Grants with blocks owned twice, a revocation owning blocks, a request that
 * does not match its record: consistent JSON, inconsistent journal. */
static void test_inconsistent_journal_is_an_error(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	_cleanup_free_ char *text = NULL;
	char err[256];

	record(j, "https", "g-1", 1, MSG_STATE_APPLIED);
	record(j, "https", "g-2", 2, MSG_STATE_APPLIED);
	assert_int_equal(journal_add_owned_block(j, "g-1", 5, MEM_ZONE_MOVABLE, true, NULL), 0);
	journal_close(j);
	assert_int_equal(file_read_all(f->file, 1 << 20, &text, NULL), 0);

	json_auto_t *root = json_loads(text, 0, NULL);
	json_t *grants = json_object_get(root, "grants");
	json_t *b = json_array_get(json_object_get(json_array_get(grants, 0), "blocks"), 0);
	json_array_append(json_object_get(json_array_get(grants, 1), "blocks"), b);
	_cleanup_free_ char *twice = json_dumps(root, 0);
	write_file(f->file, twice, strlen(twice));
	assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "block 5 is owned twice"));

	json_array_remove(json_object_get(json_array_get(grants, 1), "blocks"), 0);
	json_object_set_new(json_object_get(json_array_get(grants, 1), "request"), "generation", json_integer(9));
	_cleanup_free_ char *mismatch = json_dumps(root, 0);
	write_file(f->file, mismatch, strlen(mismatch));
	assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "\"g-2\""));

	/* restored: opens again */
	write_file(f->file, text, strlen(text));
	journal_close(jopen(f, 0));
}

/* Every truncation of a real journal is refused (or, at the exact length,
 * accepted); none crashes. */
static void test_truncated_journal(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	_cleanup_free_ char *text = NULL;
	json_auto_t *s = json_pack("{s:s}", "k", "v");
	size_t len;

	record(j, "https", "g-1", 1, MSG_STATE_APPLIED);
	assert_int_equal(journal_add_owned_block(j, "g-1", 5, MEM_ZONE_MOVABLE, true, NULL), 0);
	assert_int_equal(journal_outbox_push(j, "https", s, NULL), 0);
	journal_close(j);
	assert_int_equal(file_read_all(f->file, 1 << 20, &text, &len), 0);

	for (size_t cut = 0; cut < len; cut++) {
		char err[256];
		write_file(f->file, text, cut);
		assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBADMSG);
	}
	write_file(f->file, text, len);
	journal_close(jopen(f, 0));
}

static void test_corrupt_step_marker(void **state)
{
	struct fixture *f = *state;
	char err[256];

	journal_close(jopen(f, 0));
	write_file(f->step, "{\"version\":1,\"op\":\"g-1\"", 23);
	assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "step.json"));
	/* well formed, but for an operation the journal does not know */
	const char *orphan = "{\"version\":1,\"op\":\"g-9\",\"kind\":\"bring_up\",\"block\":1,\"phase\":\"\","
			     "\"memmap\":null,\"zone\":null,\"started\":\"2026-01-01T00:00:00Z\"}";
	write_file(f->step, orphan, strlen(orphan));
	assert_int_equal(jopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "g-9"));
}

/* A crash between writing the temporary file and the rename leaves the old
 * journal and a stale temporary: the old state is what opens. */
static void test_crash_before_rename_keeps_old_state(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	char tmp[256], tmp2[256];
	struct stat st;

	record(j, "https", "g-1", 1, MSG_STATE_APPLIED);
	journal_close(j);
	snprintf(tmp, sizeof(tmp), "%s.tmp.4242", f->file);
	snprintf(tmp2, sizeof(tmp2), "%s.tmp.77", f->step);
	write_file(tmp, "{\"version\":1,\"half", 18);
	write_file(tmp2, "x", 1);

	j = jopen(f, 0);
	assert_int_equal(journal_last_generation(j, "https"), 1);
	assert_int_equal(journal_lookup_generation(j, "https", 1, NULL), JOURNAL_GEN_REPLAY);
	assert_int_equal(journal_pending_step(j, NULL), -ENOENT);
	assert_int_equal(stat(tmp, &st), -1); /* removed */
	assert_int_equal(stat(tmp2, &st), -1);
	journal_close(j);
}

/* A write that fails changes neither the disk nor what the journal answers. */
static void test_failed_write_changes_nothing(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 0);
	char sub[256];
	json_auto_t *s = json_pack("{s:i}", "n", 1);

	record(j, "https", "g-1", 1, MSG_STATE_IN_PROGRESS);
	/* make the rename fail: journal.json becomes a non-empty directory */
	_cleanup_free_ char *text = NULL;
	assert_int_equal(file_read_all(f->file, 1 << 20, &text, NULL), 0);
	assert_int_equal(unlink(f->file), 0);
	snprintf(sub, sizeof(sub), "%s/x", f->file);
	assert_int_equal(mkdir_p(sub, 0700), 0);

	_cleanup_msg_ struct msg *m = grant_msg("g-2", 2);
	assert_true(journal_record_grant(j, "https", m, MSG_STATE_ACCEPTED, s, "https") < 0);
	assert_true(journal_set_state(j, "g-1", MSG_STATE_APPLIED, NULL, NULL) < 0);
	assert_true(journal_add_owned_block(j, "g-1", 3, MEM_ZONE_MOVABLE, false, NULL) < 0);
	assert_true(journal_outbox_push(j, "https", s, NULL) < 0);

	assert_int_equal(journal_last_generation(j, "https"), 1);
	assert_int_equal(journal_lookup_generation(j, "https", 2, NULL), JOURNAL_GEN_NEW);
	struct journal_grant g;
	assert_int_equal(journal_get_grant(j, "g-2", &g), -ENOENT);
	assert_int_equal(journal_get_grant(j, "g-1", &g), 0);
	assert_int_equal(g.state, MSG_STATE_IN_PROGRESS);
	assert_int_equal(g.n_blocks, 0);
	journal_grant_done(&g);
	assert_int_equal(journal_outbox_count(j, "https"), 0);
	assert_int_equal(journal_find_owned_block(j, 3, NULL), -ENOENT);

	/* the disk comes back: the next write succeeds and carries only real changes */
	assert_int_equal(rm_rf(f->file), 0);
	assert_int_equal(journal_record_grant(j, "https", m, MSG_STATE_ACCEPTED, s, "https"), 0);
	journal_close(j);
	j = jopen(f, 0);
	assert_int_equal(journal_last_generation(j, "https"), 2);
	assert_int_equal(journal_outbox_count(j, "https"), 1);
	journal_close(j);
}

/* 1,000 grants in a row: finished history stays bounded, so writes do not
 * grow with everything that ever happened; generations are kept. */
static void test_history_is_bounded(void **state)
{
	struct fixture *f = *state;
	struct journal *j = jopen(f, 5);
	struct journal_grant *list = NULL;
	struct stat st;
	size_t n;

	record(j, "https", "keep", 1, MSG_STATE_APPLIED);
	assert_int_equal(journal_add_owned_block(j, "keep", 1, MEM_ZONE_MOVABLE, false, NULL), 0);
	record(j, "https", "running", 2, MSG_STATE_IN_PROGRESS);
	for (uint64_t i = 3; i <= 1000; i++) {
		char id[32];
		snprintf(id, sizeof(id), "g-%" PRIu64, i);
		record(j, "https", id, i, i % 2 ? MSG_STATE_APPLIED : MSG_STATE_REJECTED);
	}
	assert_int_equal(stat(f->file, &st), 0);
	assert_true(st.st_size < 16 * 1024);
	print_message("journal.json after 1000 grants: %lld bytes\n", (long long)st.st_size);
	journal_close(j);

	j = jopen(f, 5);
	assert_int_equal(journal_list_grants(j, &list, &n), 0);
	/* owner of a block, one not finished, and the last 5 finished */
	assert_int_equal(n, 7);
	assert_string_equal(list[0].id, "keep");
	assert_string_equal(list[1].id, "running");
	assert_string_equal(list[2].id, "g-996");
	assert_string_equal(list[6].id, "g-1000");
	journal_grants_free(list, n);
	assert_int_equal(journal_last_generation(j, "https"), 1000);
	assert_int_equal(journal_lookup_generation(j, "https", 500, NULL), JOURNAL_GEN_STALE);
	assert_int_equal(journal_lookup_generation(j, "https", 999, NULL), JOURNAL_GEN_REPLAY);
	json_auto_t *all = journal_grants_json(j);
	assert_int_equal(json_array_size(all), 7);
	journal_close(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_creates_private_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_open_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record_persists, setup, teardown),
		cmocka_unit_test_setup_teardown(test_generation_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outbox_order_and_ack_across_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outbox_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_and_report_in_one_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owned_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_step_marker_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_journal_is_an_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inconsistent_journal_is_an_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_journal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_step_marker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_before_rename_keeps_old_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_write_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_is_bounded, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
