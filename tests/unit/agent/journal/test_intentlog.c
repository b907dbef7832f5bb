/* SPDX-License-Identifier: MIT */
/* The intent log (agent/journal/intentlog.h, agent/journal/recordlog.h, docs/journal.md):
 * replay of a scripted sequence, torn tails at every offset, corruption in
 * the middle, bad frames, compaction, batches, what a failed write leaves
 * behind, and the journals it does not read (before 0.1.0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "agent/journal/intentlog.h"
#include "agent/journal/recordlog.h"
#include "lib/crc32c.h"
#include "lib/fileio.h"
#include "lib/util.h"

struct fixture {
	char tmp[64];
	char dir[128];
	char log[160];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-ilog-XXXXXX");
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

static struct intentlog *iopen(struct fixture *f, const struct intentlog_options *o, struct intentlog_opened *info)
{
	struct intentlog *il = NULL;
	char err[512] = "";
	int r = intentlog_open(f->dir, o, &il, info, err, sizeof(err));

	if (r < 0)
		fail_msg("intentlog_open: %s (%s)", errno_name(r), err);
	return il;
}

static int iopen_fails(struct fixture *f, char *err, size_t errlen)
{
	struct intentlog *il = NULL;
	int r = intentlog_open(f->dir, NULL, &il, NULL, err, errlen);

	if (r == 0) {
		intentlog_close(il);
		fail_msg("intentlog_open succeeded on a bad log");
	}
	assert_null(il);
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

static struct report status_of(const char *id, uint64_t gen, enum msg_state st, uint64_t applied)
{
	struct report s = { .agent = "guest-7", .generation = gen, .state = st, .block_size = 134217728,
			    .applied_bytes = applied };

	snprintf(s.id, sizeof(s.id), "%s", id);
	snprintf(s.source, sizeof(s.source), "https");
	return s;
}

static void accept_grant(struct intentlog *il, const char *source, const char *id, uint64_t gen, const char *dest)
{
	char text[256];
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"%s\",\"generation\":%" PRIu64 ",\"size\":\"512M\"}",
		 id, gen);
	_cleanup_msg_ struct msg *m = mkmsg(text);
	struct report s = status_of(id, gen, MSG_STATE_ACCEPTED, 0);

	assert_int_equal(intentlog_accept(il, source, m, MSG_STATE_ACCEPTED, &s, dest), 0);
}

static void accept_revoke(struct intentlog *il, const char *id, uint64_t gen, const char *grant)
{
	char text[256];
	snprintf(text, sizeof(text), "{\"type\":\"revoke\",\"id\":\"%s\",\"generation\":%" PRIu64 ",\"grant\":\"%s\"}", id,
		 gen, grant);
	_cleanup_msg_ struct msg *m = mkmsg(text);
	struct report s = status_of(id, gen, MSG_STATE_ACCEPTED, 0);

	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, &s, "https"), 0);
}

/* Brings up blocks FIRST..FIRST+N-1 for OP: one intent, one result. */
static void grant_blocks(struct intentlog *il, const char *op, uint64_t first, size_t n)
{
	struct intentlog_target *t = calloc(n, sizeof(*t));
	struct intentlog_done *d = calloc(n, sizeof(*d));
	struct report s = status_of(op, 1, MSG_STATE_APPLIED, n * 134217728ull);

	for (size_t i = 0; i < n; i++) {
		t[i] = (struct intentlog_target){ .block = first + i, .memmap = 1, .zone = MEM_ZONE_MOVABLE };
		d[i] = (struct intentlog_done){ .block = first + i, .zone = MEM_ZONE_MOVABLE, .memmap = true };
	}
	assert_int_equal(intentlog_intent(il, op, ILOG_UP, t, n, NULL, NULL), 0);
	assert_int_equal(intentlog_result(il, op, MSG_STATE_APPLIED, n * 134217728ull, d, n, &s, "https"), 0);
	free(t);
	free(d);
}

static void write_file(const char *path, const void *data, size_t len)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
}

static char *read_file(const char *path, size_t *len)
{
	char *text = NULL;

	assert_int_equal(file_read_all(path, 64 << 20, &text, len), 0);
	return text;
}

static off_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static json_t *state_of(struct fixture *f)
{
	struct intentlog *il = iopen(f, NULL, NULL);
	json_t *s = intentlog_state_json(il);

	intentlog_close(il);
	return s;
}

static void assert_json_equal(json_t *a, json_t *b)
{
	if (!json_equal(a, b)) {
		_cleanup_free_ char *x = json_dumps(a, JSON_SORT_KEYS), *y = json_dumps(b, JSON_SORT_KEYS);
		fail_msg("states differ:\n%s\n%s", x, y);
	}
}

/* Closes IL; its state must come back from a replay of the disk and again
 * after a compaction.  Returns that state. */
static json_t *close_replay_compact(struct fixture *f, const struct intentlog_options *o, struct intentlog *il)
{
	json_t *live = intentlog_state_json(il);

	intentlog_close(il);
	il = iopen(f, o, NULL);
	json_auto_t *replayed = intentlog_state_json(il);
	assert_json_equal(live, replayed);
	assert_int_equal(intentlog_compact(il), 0);
	intentlog_close(il);
	il = iopen(f, o, NULL);
	json_auto_t *compacted = intentlog_state_json(il);
	assert_json_equal(live, compacted);
	intentlog_close(il);
	return live;
}

/* ---- tests ----------------------------------------------------------------------- */

static void test_crc32c_check_value(void **state)
{
	(void)state;
	assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
	/* continued over two buffers = over one */
	assert_int_equal(crc32c(crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	assert_int_equal(crc32c(0, "", 0), 0);
}

static void test_fresh_open_lock_and_layout(void **state)
{
	struct fixture *f = *state;
	struct intentlog_opened info;
	struct intentlog *il = iopen(f, NULL, &info);
	char err[256];
	struct stat st;

	assert_true(info.fresh);
	assert_int_equal(stat(f->dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "in use"));
	intentlog_close(il);

	/* the second open finds what the first created: not fresh */
	il = iopen(f, NULL, &info);
	assert_false(info.fresh);
	assert_false(info.torn);
	intentlog_close(il);
	assert_int_equal(file_size(f->log) > RECORDLOG_FILE_MAGIC_LEN, 1);
}

/* A scripted life: requests, intents, results, outbox, adoption, release. */
static void script(struct intentlog *il)
{
	json_auto_t *rep = json_pack("{s:s}", "note", "hook");
	struct intentlog_done adopt = { .block = 40, .zone = MEM_ZONE_NORMAL, .memmap = false };
	struct intentlog_target down[] = { { .block = 19, .memmap = -1, .zone = MEM_ZONE_AUTO },
					   { .block = 18, .memmap = -1, .zone = MEM_ZONE_AUTO } };
	struct intentlog_done down_done[] = { { .block = 19 } };
	uint64_t seq = 0;

	accept_grant(il, "https", "g-1", 1, "https");
	grant_blocks(il, "g-1", 16, 4);
	accept_grant(il, "local", "local-1", 1, NULL);
	grant_blocks(il, "local-1", 30, 2);
	assert_int_equal(intentlog_adopt(il, "local-1", &adopt, 1, &seq), 0);
	assert_int_equal(seq, 7);
	accept_revoke(il, "r-2", 2, "g-1");
	assert_int_equal(intentlog_intent(il, "r-2", ILOG_DOWN, down, 2, NULL, NULL), 0);
	/* only 19 went down (18 stayed busy) */
	assert_int_equal(intentlog_result(il, "r-2", MSG_STATE_PARTIAL, 134217728, down_done, 1, NULL, "https"), 0);
	assert_int_equal(intentlog_release(il, (uint64_t[]){ 31 }, 1), 0);
	assert_int_equal(intentlog_outbox_push(il, "hook-a", rep, &seq), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(intentlog_outbox_ack(il, "https", 1), 0);
	accept_grant(il, "https", "g-3", 3, "https");
	struct intentlog_target up[] = { { .block = 50, .memmap = 0, .zone = MEM_ZONE_NORMAL },
					 { .block = 51, .memmap = 0, .zone = MEM_ZONE_NORMAL } };
	assert_int_equal(intentlog_intent(il, "g-3", ILOG_UP, up, 2, NULL, NULL), 0); /* and a crash */
}

static void test_scripted_replay(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_block *ob = NULL;
	struct intentlog_intent *iv = NULL;
	struct intentlog_grant g;
	size_t n = 0;

	script(il);
	json_auto_t *live = intentlog_state_json(il);
	intentlog_close(il);

	json_auto_t *replayed = state_of(f);
	assert_json_equal(live, replayed);

	il = iopen(f, NULL, NULL);
	assert_int_equal(intentlog_last_generation(il, "https"), 3);
	assert_int_equal(intentlog_last_generation(il, "local"), 1);
	assert_int_equal(intentlog_lookup_generation(il, "https", 2, NULL), ILOG_GEN_REPLAY);
	assert_int_equal(intentlog_lookup_generation(il, "https", 4, NULL), ILOG_GEN_NEW);
	/* owned: g-1 16 17 18, local-1 30 40, oldest seq first */
	assert_int_equal(intentlog_owned_blocks(il, &ob, &n), 0);
	assert_int_equal(n, 5);
	uint64_t want[] = { 16, 17, 18, 30, 40 };
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ob[i].block, want[i]);
	assert_string_equal(ob[4].grant_id, "local-1");
	assert_int_equal(ob[4].zone, MEM_ZONE_NORMAL);
	free(ob);
	assert_int_equal(intentlog_find_owned_block(il, 19, NULL), -ENOENT);
	assert_int_equal(intentlog_find_owned_block(il, 31, NULL), -ENOENT);
	assert_int_equal(intentlog_get_grant(il, "r-2", &g), 0);
	assert_int_equal(g.state, MSG_STATE_PARTIAL);
	assert_int_equal(g.applied_bytes, 134217728);
	intentlog_grant_done(&g);
	assert_int_equal(intentlog_get_grant(il, "g-1", &g), 0);
	assert_int_equal(g.n_blocks, 3);
	assert_int_equal(g.applied_bytes, 4 * 134217728ull);
	intentlog_grant_done(&g);
	/* the open intent the crash left */
	assert_int_equal(intentlog_open_intents(il, &iv, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(iv[0].op, "g-3");
	assert_int_equal(iv[0].dir, ILOG_UP);
	assert_int_equal(iv[0].n_blocks, 2);
	assert_int_equal(iv[0].blocks[1].block, 51);
	assert_int_equal(iv[0].blocks[1].zone, MEM_ZONE_NORMAL);
	assert_int_equal(iv[0].blocks[1].memmap, 0);
	intentlog_intents_free(iv, n);
	assert_int_equal(intentlog_get_grant(il, "g-3", &g), 0);
	assert_int_equal(g.state, MSG_STATE_IN_PROGRESS);
	intentlog_grant_done(&g);
	/* outbox for https: g-1 accepted (acked, gone), g-1 applied, local-1 applied, r-2 accepted, r-2 partial, g-3 accepted */
	assert_int_equal(intentlog_outbox_count(il, "https"), 5);
	uint64_t seq;
	json_t *rep = NULL;
	assert_int_equal(intentlog_outbox_peek(il, "https", &seq, &rep), 0);
	assert_int_equal(seq, 2);
	json_decref(rep);
	assert_int_equal(intentlog_outbox_count(il, "hook-a"), 1);
	intentlog_close(il);
}

static void test_intent_rules(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_target t[] = { { .block = 5, .memmap = 1, .zone = MEM_ZONE_MOVABLE },
					{ .block = 6, .memmap = 1, .zone = MEM_ZONE_MOVABLE } };
	struct intentlog_target twice[] = { { .block = 5, .memmap = 1, .zone = MEM_ZONE_MOVABLE },
					    { .block = 5, .memmap = 1, .zone = MEM_ZONE_MOVABLE } };
	struct intentlog_done outside = { .block = 7, .zone = MEM_ZONE_MOVABLE };
	struct intentlog_done five = { .block = 5, .zone = MEM_ZONE_MOVABLE };

	accept_grant(il, "https", "g-1", 1, NULL);
	accept_grant(il, "https", "g-2", 2, NULL);
	assert_int_equal(intentlog_intent(il, "nope", ILOG_UP, t, 2, NULL, NULL), -ENOENT);
	assert_int_equal(intentlog_intent(il, "g-1", ILOG_UP, t, 0, NULL, NULL), -EINVAL);
	assert_int_equal(intentlog_intent(il, "g-1", ILOG_UP, twice, 2, NULL, NULL), -EINVAL);
	assert_int_equal(intentlog_intent(il, "g-1", ILOG_UP, t, 2, NULL, NULL), 0);
	assert_int_equal(intentlog_intent(il, "g-1", ILOG_UP, t, 2, NULL, NULL), -EBUSY);
	/* a result may only credit blocks its intent named: never adopt outside */
	assert_int_equal(intentlog_result(il, "g-1", MSG_STATE_APPLIED, 0, &outside, 1, NULL, NULL), -EINVAL);
	assert_int_equal(intentlog_result(il, "g-2", MSG_STATE_APPLIED, 0, &five, 1, NULL, NULL), -EINVAL);
	assert_int_equal(intentlog_find_owned_block(il, 7, NULL), -ENOENT);
	/* block 5 adopted by g-2 meanwhile: g-1's result cannot own it too */
	assert_int_equal(intentlog_adopt(il, "g-2", &five, 1, NULL), 0);
	assert_int_equal(intentlog_result(il, "g-1", MSG_STATE_APPLIED, 0, &five, 1, NULL, NULL), -EEXIST);
	assert_int_equal(intentlog_release(il, (uint64_t[]){ 5 }, 1), 0);
	assert_int_equal(intentlog_release(il, (uint64_t[]){ 5 }, 1), -ENOENT);
	assert_int_equal(intentlog_result(il, "g-1", MSG_STATE_PARTIAL, 134217728, &five, 1, NULL, NULL), 0);
	assert_int_equal(intentlog_find_owned_block(il, 5, NULL), 0);
	assert_int_equal(intentlog_outbox_ack(il, "https", 1), -ENOENT);
	/* one block at a time, as the block-by-block engine does */
	uint64_t seq = 0;
	assert_int_equal(intentlog_add_owned_block(il, "g-2", 9, MEM_ZONE_NORMAL, false, &seq), 0);
	assert_int_equal(seq, 3);
	assert_int_equal(intentlog_add_owned_block(il, "g-1", 9, MEM_ZONE_NORMAL, false, NULL), -EEXIST);
	assert_int_equal(intentlog_add_owned_block(il, "g-1", 10, MEM_ZONE_AUTO, false, NULL), -EINVAL);
	assert_int_equal(intentlog_add_owned_block(il, "g-9", 10, MEM_ZONE_NORMAL, false, NULL), -ENOENT);
	assert_int_equal(intentlog_remove_owned_block(il, 9), 0);
	assert_int_equal(intentlog_remove_owned_block(il, 9), -ENOENT);
	json_auto_t *live = intentlog_state_json(il);
	intentlog_close(il);
	json_auto_t *replayed = state_of(f);
	assert_json_equal(live, replayed);
}

/* Cuts the log at every byte of the last append: the tail goes, the rest stays. */
static void test_torn_tail_every_offset(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_stats st;
	_cleanup_free_ char *text = NULL;
	size_t len;

	accept_grant(il, "https", "g-1", 1, "https");
	grant_blocks(il, "g-1", 16, 3);
	json_auto_t *before = intentlog_state_json(il);
	intentlog_stats(il, &st);
	uint64_t keep = st.log_bytes;
	accept_grant(il, "https", "g-2", 2, "https");
	intentlog_close(il);
	text = read_file(f->log, &len);
	assert_true(len > keep + RECORDLOG_HEADER_LEN);

	for (size_t cut = keep; cut < len; cut++) {
		struct intentlog_opened info;
		write_file(f->log, text, cut);
		il = iopen(f, NULL, &info);
		assert_int_equal(info.torn, cut > keep);
		if (cut > keep)
			assert_int_equal(info.torn_offset, keep);
		json_auto_t *now = intentlog_state_json(il);
		assert_json_equal(before, now);
		intentlog_close(il);
		assert_int_equal(file_size(f->log), (off_t)keep); /* cut on disk */
	}
	write_file(f->log, text, len);
	il = iopen(f, NULL, NULL);
	assert_int_equal(intentlog_last_generation(il, "https"), 2);
	intentlog_close(il);
}

/* A batch that did not reach the disk whole is gone whole. */
static void test_torn_batch_goes_whole(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_stats a, b;
	_cleanup_free_ char *text = NULL;
	size_t len;

	accept_grant(il, "https", "g-1", 1, NULL);
	json_auto_t *before = intentlog_state_json(il);
	intentlog_stats(il, &a);
	assert_int_equal(intentlog_batch_begin(il), 0);
	assert_int_equal(intentlog_batch_begin(il), -EBUSY);
	accept_grant(il, "https", "g-2", 2, NULL);
	accept_grant(il, "https", "g-3", 3, NULL);
	accept_grant(il, "https", "g-4", 4, NULL);
	intentlog_stats(il, &b);
	assert_int_equal(b.syncs, a.syncs); /* nothing written yet */
	assert_int_equal(intentlog_batch_end(il), 0);
	intentlog_stats(il, &b);
	assert_int_equal(b.syncs, a.syncs + 1); /* three records, one fdatasync */
	intentlog_close(il);
	text = read_file(f->log, &len);

	/* any cut inside the batch, even after its first two whole records */
	for (size_t cut = a.log_bytes + 1; cut < len; cut += 7) {
		write_file(f->log, text, cut);
		il = iopen(f, NULL, NULL);
		json_auto_t *now = intentlog_state_json(il);
		assert_json_equal(before, now);
		intentlog_close(il);
	}
	write_file(f->log, text, len);
	il = iopen(f, NULL, NULL);
	assert_int_equal(intentlog_last_generation(il, "https"), 4);
	intentlog_close(il);
}

/* A damaged byte anywhere before the last record is refused with the offset;
 * the file is left as it is. */
static void test_middle_corruption_is_refused(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_stats st;
	_cleanup_free_ char *text = NULL;
	size_t len;

	accept_grant(il, "https", "g-1", 1, NULL);
	intentlog_stats(il, &st);
	uint64_t second = st.log_bytes; /* where the second record starts */
	accept_grant(il, "https", "g-2", 2, NULL);
	intentlog_stats(il, &st);
	uint64_t third = st.log_bytes;
	accept_grant(il, "https", "g-3", 3, NULL);
	intentlog_close(il);
	text = read_file(f->log, &len);

	for (size_t pos = second; pos < third; pos++) {
		_cleanup_free_ char *bad = malloc(len), *after = NULL;
		char err[512] = "", want[64];
		size_t alen;

		memcpy(bad, text, len);
		bad[pos] ^= 0x5a;
		write_file(f->log, bad, len);
		assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
		snprintf(want, sizeof(want), "byte offset %" PRIu64, second);
		if (!strstr(err, want) || !strstr(err, "journal.log"))
			fail_msg("flip at %zu: \"%s\" does not name %s", pos, err, want);
		after = read_file(f->log, &alen);
		assert_int_equal(alen, len);
		assert_memory_equal(after, bad, len);
	}
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

/* Builds a log image: magic + each RECS entry as its own batch. */
static size_t image(unsigned char *out, const struct recordlog_rec *recs, size_t n)
{
	size_t pos = RECORDLOG_FILE_MAGIC_LEN;

	memcpy(out, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ void *b = NULL;
		size_t l;
		assert_int_equal(recordlog_encode(&recs[i], 1, &b, &l), 0);
		memcpy(out + pos, b, l);
		pos += l;
	}
	return pos;
}

static void test_bad_frames(void **state)
{
	struct fixture *f = *state;
	const char *snap = "{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{},\"grants\":[],"
			   "\"outbox\":{},\"intents\":[],\"step\":null}";
	const char *push = "{\"dest\":\"https\",\"report\":{\"n\":1}}";
	struct recordlog_rec good[] = { { ILOG_REC_SNAPSHOT, snap, strlen(snap) },
					{ ILOG_REC_OUTBOX_PUSH, push, strlen(push) },
					{ ILOG_REC_OUTBOX_PUSH, push, strlen(push) } };
	unsigned char buf[4096];
	size_t len, second = RECORDLOG_FILE_MAGIC_LEN + RECORDLOG_HEADER_LEN + strlen(snap);
	char err[512];
	struct intentlog_opened info;
	struct intentlog *il;

	assert_int_equal(mkdir_p(f->dir, 0700), 0);

	/* an oversized length field in the last record: a torn tail, cut */
	len = image(buf, good, 3);
	put32(buf + len - RECORDLOG_HEADER_LEN - strlen(push) + 4, 0xfffffff0u);
	write_file(f->log, buf, len);
	il = iopen(f, NULL, &info);
	assert_true(info.torn);
	assert_non_null(strstr(info.torn_why, "length"));
	assert_int_equal(intentlog_outbox_count(il, "https"), 1);
	intentlog_close(il);

	/* the same in the middle: refused */
	len = image(buf, good, 3);
	put32(buf + second + 4, 0xfffffff0u);
	write_file(f->log, buf, len);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "length field above the record limit"));

	/* a well-framed record of a type this version does not know */
	struct recordlog_rec unknown[] = { good[0], { 99, push, strlen(push) } };
	len = image(buf, unknown, 2);
	write_file(f->log, buf, len);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	if (!strstr(err, "unknown record type 99"))
		fail_msg("%s", err);
	assert_non_null(strstr(err, "byte offset"));

	/* a well-framed record that is not JSON, or not what its type needs */
	struct recordlog_rec notjson[] = { good[0], { ILOG_REC_ACCEPT, "{\"x\":", 5 } };
	len = image(buf, notjson, 2);
	write_file(f->log, buf, len);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "not JSON"));
	struct recordlog_rec badack[] = { good[0], { ILOG_REC_OUTBOX_ACK, "{\"dest\":\"https\",\"seq\":3}", 24 } };
	len = image(buf, badack, 2);
	write_file(f->log, buf, len);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "not queued"));

	/* unknown flags with a right checksum are corruption, not a tail */
	len = image(buf, good, 3);
	buf[second + 10] = 0x80;
	write_file(f->log, buf, len);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);

	/* not a log at all; empty */
	write_file(f->log, "{\"version\":1}", 13);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "magic"));
	write_file(f->log, "", 0);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "empty"));

	/* the pure replay gives the same verdicts without files */
	json_t *st = NULL;
	len = image(buf, good, 3);
	assert_int_equal(intentlog_replay_image(buf, len, &st, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(json_object_get(json_object_get(json_object_get(st, "outbox"), "https"), "items")), 2);
	json_decref(st);
	buf[second + 20] ^= 1;
	assert_int_equal(intentlog_replay_image(buf, len, &st, err, sizeof(err)), -EBADMSG);
}

/* The journal's own generation check: an accept record whose generation is
 * not above the last its source recorded is refused by the replay, at the
 * last generation itself as below it (the writer refuses it first,
 * intentlog_accept(); this is a journal written otherwise). */
static void test_replay_refuses_a_repeated_generation(void **state)
{
	const char *snap = "{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{},\"grants\":[],"
			   "\"outbox\":{},\"intents\":[],\"step\":null}";
	const char *a3 = "{\"source\":\"https\",\"state\":\"accepted\",\"time\":\"2026-01-02T03:04:05Z\","
			 "\"request\":{\"type\":\"grant\",\"id\":\"g-a\",\"generation\":3,\"size\":\"512M\"}}";
	const char *b3 = "{\"source\":\"https\",\"state\":\"accepted\",\"time\":\"2026-01-02T03:04:05Z\","
			 "\"request\":{\"type\":\"grant\",\"id\":\"g-b\",\"generation\":3,\"size\":\"512M\"}}";
	const char *b2 = "{\"source\":\"https\",\"state\":\"accepted\",\"time\":\"2026-01-02T03:04:05Z\","
			 "\"request\":{\"type\":\"grant\",\"id\":\"g-b\",\"generation\":2,\"size\":\"512M\"}}";
	const char *b4 = "{\"source\":\"https\",\"state\":\"accepted\",\"time\":\"2026-01-02T03:04:05Z\","
			 "\"request\":{\"type\":\"grant\",\"id\":\"g-b\",\"generation\":4,\"size\":\"512M\"}}";
	const char *local3 = "{\"source\":\"local\",\"state\":\"accepted\",\"time\":\"2026-01-02T03:04:05Z\","
			     "\"request\":{\"type\":\"grant\",\"id\":\"g-b\",\"generation\":3,\"size\":\"512M\"}}";
	const char *second[] = { b3, b2 };
	unsigned char buf[4096];
	char err[512];
	json_t *st = NULL;
	size_t len;

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct recordlog_rec recs[] = { { ILOG_REC_SNAPSHOT, snap, strlen(snap) },
						{ ILOG_REC_ACCEPT, a3, strlen(a3) },
						{ ILOG_REC_ACCEPT, second[i], strlen(second[i]) } };
		len = image(buf, recs, 3);
		err[0] = '\0';
		assert_int_equal(intentlog_replay_image(buf, len, &st, err, sizeof(err)), -EBADMSG);
		if (!strstr(err, "is not above the last of source \"https\""))
			fail_msg("%s", err);
	}
	/* the next generation of the same source, and the same generation of
	 * another source, are new */
	const char *fine[] = { b4, local3 };
	for (size_t i = 0; i < 2; i++) {
		struct recordlog_rec recs[] = { { ILOG_REC_SNAPSHOT, snap, strlen(snap) },
						{ ILOG_REC_ACCEPT, a3, strlen(a3) },
						{ ILOG_REC_ACCEPT, fine[i], strlen(fine[i]) } };
		len = image(buf, recs, 3);
		assert_int_equal(intentlog_replay_image(buf, len, &st, err, sizeof(err)), 0);
		assert_int_equal(json_array_size(json_object_get(st, "grants")), 2);
		json_decref(st);
		st = NULL;
	}
}

/* The largest generation every JSON reader keeps exact (MSG_GENERATION_MAX,
 * 2^53) is recorded, and replays from the log as it was written. */
static void test_largest_generation_recorded(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il;

	assert_int_equal(mkdir_p(f->dir, 0700), 0);
	il = iopen(f, NULL, NULL);
	accept_grant(il, "https", "g-max", MSG_GENERATION_MAX, NULL);
	assert_int_equal(intentlog_last_generation(il, "https"), MSG_GENERATION_MAX);
	intentlog_close(il);
	il = iopen(f, NULL, NULL);
	assert_int_equal(intentlog_last_generation(il, "https"), MSG_GENERATION_MAX);
	intentlog_close(il);
}

/* The longest record the writer encodes (RECORDLOG_RECORD_MAX bytes) is one
 * the reader takes back whole; one byte more is not encoded at all. */
static void test_longest_record_reads_back(void **state)
{
	const size_t max = RECORDLOG_RECORD_MAX;
	_cleanup_free_ unsigned char *data = malloc(max + 1), *img = NULL;
	_cleanup_free_ void *enc = NULL;
	struct recordlog_rec rec = { ILOG_REC_OUTBOX_PUSH, NULL, max };
	struct recordlog_scan scan;
	size_t len = 0;
	char err[256] = "";

	(void)state;
	assert_non_null(data);
	memset(data, 'x', max + 1);
	rec.data = data;
	assert_int_equal(recordlog_encode(&rec, 1, &enc, &len), 0);
	img = malloc(RECORDLOG_FILE_MAGIC_LEN + len);
	assert_non_null(img);
	memcpy(img, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN);
	memcpy(img + RECORDLOG_FILE_MAGIC_LEN, enc, len);
	assert_int_equal(recordlog_scan(img, RECORDLOG_FILE_MAGIC_LEN + len, NULL, NULL, &scan, err, sizeof(err)), 0);
	if (scan.torn)
		fail_msg("the longest record was cut as a torn tail: %s", scan.torn_why);
	assert_int_equal(scan.records, 1);
	assert_int_equal(scan.valid_end, RECORDLOG_FILE_MAGIC_LEN + len);
	rec.len = max + 1;
	free(enc);
	enc = NULL;
	assert_int_equal(recordlog_encode(&rec, 1, &enc, &len), -EINVAL);
}

static void test_compaction_preserves_state(void **state)
{
	struct fixture *f = *state;
	struct intentlog_options o = { .compact_min = 16384, .history_max = 10 };
	struct intentlog *il = iopen(f, &o, NULL);
	struct intentlog_stats st;
	uint64_t max_size = 0;

	for (uint64_t i = 1; i <= 300; i++) {
		char id[32];
		snprintf(id, sizeof(id), "g-%" PRIu64, i);
		accept_grant(il, "https", id, i, "https");
		grant_blocks(il, id, 1000 + i, 1);
		if (i % 3 == 0) /* some go back: stays bounded */
			assert_int_equal(intentlog_release(il, (uint64_t[]){ 1000 + i }, 1), 0);
		assert_int_equal(intentlog_outbox_ack(il, "https", 2 * i - 1), 0);
		intentlog_stats(il, &st);
		if (st.log_bytes > max_size)
			max_size = st.log_bytes;
	}
	assert_true(st.compactions > 0);
	print_message("300 grants: %" PRIu64 " compactions, log %" PRIu64 " bytes now, at most %" PRIu64 "\n",
		      st.compactions, st.log_bytes, max_size);
	json_auto_t *live = close_replay_compact(f, &o, il);
	/* a crash during a compaction leaves a temporary, never read, removed */
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s.tmp.999", f->log);
	write_file(tmp, "MGJLOG01garbage", 15);
	il = iopen(f, &o, NULL);
	json_auto_t *after = intentlog_state_json(il);
	assert_json_equal(live, after);
	intentlog_close(il);
	struct stat sb;
	assert_int_equal(stat(tmp, &sb), -1);
}

static void assert_listed(struct intentlog *il, const char *const *ids, size_t n)
{
	struct intentlog_grant *gs = NULL;
	size_t count = 0;

	assert_int_equal(intentlog_list_grants(il, &gs, &count), 0);
	assert_int_equal(count, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(gs[i].id, ids[i]);
	intentlog_grants_free(gs, count);
}

/* Finished operations are kept out of the live tree (history.c) and the
 * state is the same: the newest history_max of them listed in order, found
 * by id and by generation, older ones gone; a record naming a kept one
 * applies to it; a batch that names one and rolls back leaves it kept; the
 * live state equals a replay of the disk, whose tree holds them all. */
static void test_history_kept_in_order(void **state)
{
	struct fixture *f = *state;
	struct intentlog_options o = { .history_max = 3 };
	struct intentlog *il = iopen(f, &o, NULL);
	struct intentlog_grant g;
	struct intentlog_block ob;
	struct report rep;
	char id[16];

	accept_grant(il, "https", "g-1", 1, NULL);
	grant_blocks(il, "g-1", 100, 2); /* owns blocks: live, not history */
	for (uint64_t i = 2; i <= 6; i++) {
		snprintf(id, sizeof(id), "g-%" PRIu64, i);
		accept_grant(il, "https", id, i, NULL);
		struct report s = status_of(id, i, MSG_STATE_FAILED, 0);
		assert_int_equal(intentlog_set_state(il, id, MSG_STATE_FAILED, &s, NULL), 0);
	}
	assert_listed(il, (const char *const[]){ "g-1", "g-4", "g-5", "g-6" }, 4);
	assert_int_equal(intentlog_get_grant(il, "g-3", &g), -ENOENT);
	assert_int_equal(intentlog_get_grant(il, "g-5", &g), 0);
	assert_int_equal(g.state, MSG_STATE_FAILED);
	assert_int_equal(g.generation, 5);
	assert_int_equal(intentlog_grant_report(&g, &rep), 0);
	assert_string_equal(rep.id, "g-5");
	report_clear(&rep);
	intentlog_grant_done(&g);
	assert_int_equal(intentlog_lookup_generation(il, "https", 4, &g), ILOG_GEN_REPLAY);
	assert_string_equal(g.id, "g-4");
	intentlog_grant_done(&g);
	assert_int_equal(intentlog_lookup_generation(il, "https", 2, NULL), ILOG_GEN_STALE);
	{
		_cleanup_msg_ struct msg *again = mkmsg("{\"type\":\"grant\",\"id\":\"g-5\",\"generation\":7,\"size\":\"1G\"}");
		assert_int_equal(intentlog_accept(il, "https", again, MSG_STATE_ACCEPTED, NULL, NULL), -EEXIST);
	}

	/* records that name kept ones: a state, an adoption, a release */
	assert_int_equal(intentlog_set_state(il, "g-4", MSG_STATE_CANCELLED, NULL, NULL), 0);
	assert_int_equal(intentlog_adopt(il, "g-5", &(struct intentlog_done){ .block = 200, .zone = MEM_ZONE_MOVABLE }, 1, NULL), 0);
	assert_int_equal(intentlog_find_owned_block(il, 200, &ob), 0);
	assert_string_equal(ob.grant_id, "g-5");
	assert_listed(il, (const char *const[]){ "g-1", "g-4", "g-5", "g-6" }, 4);
	assert_int_equal(intentlog_get_grant(il, "g-4", &g), 0);
	assert_int_equal(g.state, MSG_STATE_CANCELLED);
	intentlog_grant_done(&g);
	assert_int_equal(intentlog_release(il, (uint64_t[]){ 200 }, 1), 0);

	/* a batch that revives one and is dropped leaves it as it was */
	json_auto_t *before = intentlog_state_json(il);
	assert_int_equal(intentlog_batch_begin(il), 0);
	assert_int_equal(intentlog_adopt(il, "g-6", &(struct intentlog_done){ .block = 300, .zone = MEM_ZONE_MOVABLE }, 1, NULL), 0);
	intentlog_batch_abort(il);
	json_auto_t *aborted = intentlog_state_json(il);
	assert_json_equal(before, aborted);
	assert_int_equal(intentlog_find_owned_block(il, 300, NULL), -ENOENT);

	/* one more finished: the oldest kept goes */
	accept_grant(il, "https", "g-7", 7, NULL);
	assert_int_equal(intentlog_set_state(il, "g-7", MSG_STATE_FAILED, NULL, NULL), 0);
	assert_listed(il, (const char *const[]){ "g-1", "g-5", "g-6", "g-7" }, 4);

	json_decref(close_replay_compact(f, &o, il));
	il = iopen(f, &o, NULL);
	assert_listed(il, (const char *const[]){ "g-1", "g-5", "g-6", "g-7" }, 4);
	intentlog_close(il);
}

/* O(1) durable writes per operation: fsyncs do not grow with the block count. */
static void test_syncs_per_operation(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_stats a, b;
	uint64_t bytes[2], syncs[2];

	for (int k = 0; k < 2; k++) {
		char id[16];
		size_t n = k ? 1024 : 8;
		snprintf(id, sizeof(id), "g-%d", k + 1);
		intentlog_stats(il, &a);
		accept_grant(il, "https", id, (uint64_t)k + 1, "https");
		grant_blocks(il, id, 10000u * (k + 1), n);
		intentlog_stats(il, &b);
		syncs[k] = b.syncs - a.syncs;
		bytes[k] = b.bytes_written - a.bytes_written;
	}
	assert_int_equal(syncs[0], 3);
	assert_int_equal(syncs[1], 3);
	assert_true(bytes[1] > bytes[0]);
	assert_true(bytes[1] < 1024 * 160);
	intentlog_close(il);
}

static bool xfsz_ignored;

/* A write the disk refuses (file size limit) changes neither disk nor memory. */
static void test_failed_write_changes_nothing(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct rlimit old, lim;
	struct intentlog_grant g;

	if (!xfsz_ignored) {
		signal(SIGXFSZ, SIG_IGN);
		xfsz_ignored = true;
	}
	accept_grant(il, "https", "g-1", 1, NULL);
	json_auto_t *before = intentlog_state_json(il);
	off_t size = file_size(f->log);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)size;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);

	char text[] = "{\"type\":\"grant\",\"id\":\"g-2\",\"generation\":2,\"size\":\"1G\"}";
	_cleanup_msg_ struct msg *m = mkmsg(text);
	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), -EFBIG);
	struct intentlog_target t = { .block = 3, .memmap = -1, .zone = MEM_ZONE_AUTO };
	assert_int_equal(intentlog_intent(il, "g-1", ILOG_UP, &t, 1, NULL, NULL), -EFBIG);
	assert_int_equal(intentlog_batch_begin(il), 0);
	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), 0);
	assert_int_equal(intentlog_get_grant(il, "g-2", &g), 0); /* in memory while the batch is open */
	intentlog_grant_done(&g);
	assert_int_equal(intentlog_batch_end(il), -EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);

	json_auto_t *now = intentlog_state_json(il);
	assert_json_equal(before, now);
	assert_int_equal(file_size(f->log), size);
	/* the disk comes back */
	assert_int_equal(intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, NULL, NULL), 0);
	intentlog_close(il);
	il = iopen(f, NULL, NULL);
	assert_int_equal(intentlog_last_generation(il, "https"), 2);
	intentlog_close(il);
}

/* A subscriber's event: the status it tells of "kind.state", or none. */
static json_t *applied_only(void *ctx, const json_t *status)
{
	(*(int *)ctx)++;
	if (!streq(json_string_value(json_object_get(status, "state")), "applied"))
		return NULL;
	return json_pack("{s:s,s:O}", "event", "grant.applied", "id", json_object_get(status, "id"));
}

/* A subscriber's event goes in the record of the status it tells of: queued
 * when that record is, replayed with it, gone with it when the write fails. */
static void test_subscribed_events_share_the_record(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct rlimit old, lim;
	uint64_t seq = 0;
	int calls = 0;
	char *doc = NULL;
	struct report s;

	if (!xfsz_ignored) {
		signal(SIGXFSZ, SIG_IGN);
		xfsz_ignored = true;
	}
	assert_int_equal(intentlog_subscribe(il, "webhook:1", applied_only, &calls), 0);
	assert_int_equal(intentlog_subscribe(il, "bad dest!", applied_only, &calls), -EINVAL);
	accept_grant(il, "https", "g-1", 1, "https");
	assert_int_equal(calls, 1);
	assert_int_equal(intentlog_outbox_count(il, "webhook:1"), 0); /* accepted: not wanted */
	/* the result's record cannot be written: neither the state nor its event */
	s = status_of("g-1", 1, MSG_STATE_APPLIED, 0);
	off_t size = file_size(f->log);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)size;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(intentlog_set_state(il, "g-1", MSG_STATE_APPLIED, &s, "https"), -EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_int_equal(intentlog_outbox_count(il, "webhook:1"), 0);
	/* written: both, in one record (one append) */
	struct intentlog_stats st0, st1;
	intentlog_stats(il, &st0);
	assert_int_equal(intentlog_set_state(il, "g-1", MSG_STATE_APPLIED, &s, "https"), 0);
	intentlog_stats(il, &st1);
	assert_int_equal(st1.syncs - st0.syncs, 1);
	assert_int_equal(intentlog_outbox_count(il, "webhook:1"), 1);
	assert_int_equal(intentlog_outbox_peek_text(il, "webhook:1", &seq, &doc), 0);
	assert_non_null(strstr(doc, "\"grant.applied\""));
	free(doc);
	/* the same state recorded again (a resumed operation) is no news */
	assert_int_equal(intentlog_set_state(il, "g-1", MSG_STATE_APPLIED, &s, "https"), 0);
	assert_int_equal(intentlog_outbox_count(il, "webhook:1"), 1);
	json_auto_t *live = intentlog_state_json(il);
	intentlog_close(il);
	/* replayed without any subscriber: the event is in the record */
	il = iopen(f, NULL, NULL);
	json_auto_t *replayed = intentlog_state_json(il);
	assert_json_equal(live, replayed);
	assert_int_equal(intentlog_outbox_count(il, "webhook:1"), 1);
	intentlog_unsubscribe(il, applied_only, &calls);
	intentlog_close(il);
}

/* 0.1.0 snapshots carry "step": null and are read; a step marker, a record
 * of types 10/11 (the engine before 0.1.0) or a lone journal.json are not. */
static void test_formats_before_0_1_0(void **state)
{
	struct fixture *f = *state;
	const char *snap010 = "{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{\"https\":5},"
			      "\"grants\":[],\"outbox\":{},\"intents\":[],\"step\":null}";
	const char *snapstep = "{\"version\":1,\"next_order\":0,\"next_block_seq\":1,\"sources\":{},\"grants\":[],"
			       "\"outbox\":{},\"intents\":[],\"step\":{\"op\":\"g-1\",\"kind\":\"bring_up\","
			       "\"block\":17,\"phase\":\"online\",\"memmap\":true,\"zone\":\"movable\","
			       "\"started\":\"2026-01-01T00:00:00Z\"}}";
	const char *marker = "{\"op\":\"g-1\",\"kind\":\"bring_up\",\"block\":17}";
	unsigned char buf[4096];
	char err[512], path[256];
	struct intentlog_opened info;
	struct intentlog *il;
	size_t len;

	assert_int_equal(mkdir_p(f->dir, 0700), 0);
	struct recordlog_rec ok[] = { { ILOG_REC_SNAPSHOT, snap010, strlen(snap010) } };
	len = image(buf, ok, 1);
	write_file(f->log, buf, len);
	il = iopen(f, NULL, &info);
	assert_false(info.fresh);
	assert_int_equal(intentlog_last_generation(il, "https"), 5);
	json_t *st = intentlog_state_json(il);
	assert_null(json_object_get(st, "step")); /* not written again */
	json_decref(st);
	intentlog_close(il);

	struct recordlog_rec withstep[] = { { ILOG_REC_SNAPSHOT, snapstep, strlen(snapstep) } };
	len = image(buf, withstep, 1);
	write_file(f->log, buf, len);
	assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
	if (!strstr(err, "before 0.1.0"))
		fail_msg("%s", err);

	for (uint16_t type = 10; type <= 11; type++) {
		struct recordlog_rec old[] = { ok[0], { type, marker, strlen(marker) } };
		len = image(buf, old, 2);
		write_file(f->log, buf, len);
		assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
		if (!strstr(err, "unknown record type"))
			fail_msg("type %u: %s", type, err);
	}

	/* a journal.json alone is not read: the log starts fresh beside it, untouched */
	rm_rf(f->dir);
	assert_int_equal(mkdir_p(f->dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/journal.json", f->dir);
	write_file(path, "{\"version\":1}", 13);
	il = iopen(f, NULL, &info);
	assert_true(info.fresh);
	intentlog_close(il);
	assert_int_equal(access(path, F_OK), 0);
}

/* One record of TYPE with FLAGS (any bits) and a checksum that holds: what a
 * newer memgrant would write.  Its length in *LEN; freed by the caller. */
static unsigned char *future_record(uint16_t type, uint16_t flags, size_t *len)
{
	static const char payload[] = "{\"future\":true}";
	struct recordlog_rec rec = { type, payload, sizeof(payload) - 1 };
	void *buf = NULL;
	unsigned char *h;

	assert_int_equal(recordlog_encode(&rec, 1, &buf, len), 0);
	h = buf;
	h[10] = (unsigned char)flags;
	h[11] = (unsigned char)(flags >> 8);
	uint32_t crc = crc32c(crc32c(0, h, 12), h + RECORDLOG_HEADER_LEN, rec.len);
	h[12] = (unsigned char)crc;
	h[13] = (unsigned char)(crc >> 8);
	h[14] = (unsigned char)(crc >> 16);
	h[15] = (unsigned char)(crc >> 24);
	return h;
}

/* Damage a torn tail does not explain: a log cut at a record boundary is
 * found short of its end mark (journal.log.end); a whole record of a future
 * format is refused at the tail as in the middle, the file untouched; every
 * refusal says what to do. */
static void test_damage_lost_future_advice(void **state)
{
	struct fixture *f = *state;
	struct intentlog *il = iopen(f, NULL, NULL);
	struct intentlog_opened info;
	struct intentlog_stats st;
	_cleanup_free_ char *text = NULL;
	char err[1024];
	size_t len, flen;

	accept_grant(il, "https", "g-1", 1, "https");
	grant_blocks(il, "g-1", 16, 3);
	intentlog_stats(il, &st);
	uint64_t keep = st.log_bytes;
	accept_grant(il, "https", "g-2", 2, "https");
	intentlog_close(il);
	text = read_file(f->log, &len);

	/* whole: not lost */
	il = iopen(f, NULL, &info);
	assert_false(info.lost);
	intentlog_close(il);
	/* cut at the boundary before g-2's accept: lost, not torn; the mark
	 * follows the log then, so the next start does not say it again */
	write_file(f->log, text, keep);
	il = iopen(f, NULL, &info);
	assert_true(info.lost);
	assert_false(info.torn);
	assert_int_equal(info.lost_end, len);
	assert_int_equal(info.torn_offset, keep);
	intentlog_close(il);
	il = iopen(f, NULL, &info);
	assert_false(info.lost);
	intentlog_close(il);

	/* future flags and a future type, at the tail and in the middle */
	for (int k = 0; k < 4; k++) {
		_cleanup_free_ unsigned char *rec = future_record(k & 1 ? 42 : ILOG_REC_ACCEPT, k & 1 ? 0 : 0x0002, &flen);
		_cleanup_free_ unsigned char *img = malloc(len + flen);
		size_t at = k < 2 ? len : keep;
		memcpy(img, text, at);
		memcpy(img + at, rec, flen);
		memcpy(img + at + flen, text + at, len - at);
		write_file(f->log, img, len + flen);
		assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
		if (!strstr(err, "upgrade memgrant"))
			fail_msg("case %d: no 'upgrade memgrant' in: %s", k, err);
		assert_int_equal(file_size(f->log), (off_t)(len + flen)); /* nothing cut */
	}
	/* a newer file format */
	{
		_cleanup_free_ char *img = malloc(len);
		memcpy(img, text, len);
		img[7] = '2';
		write_file(f->log, img, len);
		assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "upgrade memgrant"));
	}
	/* corruption in the middle: restore or move aside, and adopt */
	{
		_cleanup_free_ char *img = malloc(len);
		memcpy(img, text, len);
		img[RECORDLOG_FILE_MAGIC_LEN + RECORDLOG_HEADER_LEN + 2] ^= 1; /* the first record */
		write_file(f->log, img, len);
		assert_int_equal(iopen_fails(f, err, sizeof(err)), -EBADMSG);
		if (!strstr(err, "restore journal.log from a backup") || !strstr(err, "memgrantctl adopt"))
			fail_msg("no advice in: %s", err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c_check_value),
		cmocka_unit_test_setup_teardown(test_fresh_open_lock_and_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scripted_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_tail_every_offset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_batch_goes_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_middle_corruption_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_frames, setup, teardown),
		cmocka_unit_test(test_replay_refuses_a_repeated_generation),
		cmocka_unit_test(test_longest_record_reads_back),
		cmocka_unit_test_setup_teardown(test_largest_generation_recorded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_compaction_preserves_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_history_kept_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syncs_per_operation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_write_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_subscribed_events_share_the_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_formats_before_0_1_0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damage_lost_future_advice, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
