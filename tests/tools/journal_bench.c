/* SPDX-License-Identifier: MIT */
/*
 * journal_bench DIR BLOCKS old|new: the journal writes of one grant of
 * BLOCKS blocks, as the engine makes them, against an empty state
 * directory DIR.
 *   old: agent/journal.h as memgrantd uses it today: the accepted record,
 *        in_progress, then per block the step marker, the owned block, the
 *        marker removed and the status with applied_bytes; the final state.
 *   new: agent/intentlog.h: accept, one intent naming every block, one result.
 * Prints the bytes this process wrote (/proc/self/io wchar) and the time;
 * count the fsyncs with strace -c -e trace=fsync,fdatasync (bench/journal_cost.sh).
 */
#include "agent/intentlog.h"
#include "agent/journal.h"
#include "lib/util.h"

#include <inttypes.h>
#include <time.h>

#define BLOCK_SIZE (128ull << 20)

static uint64_t wchar(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	unsigned long long v = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "wchar: %llu", &v) == 1)
			break;
	return v;
}

static json_t *status(uint64_t gen, enum msg_state st, uint64_t applied)
{
	const struct msg_status s = { .agent = "bench", .id = "g-1", .generation = gen, .state = st,
				      .block_size = BLOCK_SIZE, .source = "https", .applied_bytes = applied };
	return msg_status_to_json(&s);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int old_way(const char *dir, const struct msg *m, size_t n)
{
	struct journal *j = NULL;
	char err[256];
	json_t *s;
	int r = journal_open(dir, NULL, &j, err, sizeof(err));

	if (r < 0) {
		fprintf(stderr, "journal_open: %s\n", err);
		return r;
	}
	s = status(1, MSG_STATE_ACCEPTED, 0);
	r = journal_record_grant(j, "https", m, MSG_STATE_ACCEPTED, s, "https");
	json_decref(s);
	s = status(1, MSG_STATE_IN_PROGRESS, 0);
	r = r ?: journal_set_state(j, "g-1", MSG_STATE_IN_PROGRESS, s, "https");
	json_decref(s);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct journal_step st = { .op = "g-1", .kind = JOURNAL_STEP_BRING_UP, .block = 1000 + i, .memmap = 0,
					   .zone = MSG_ZONE_MOVABLE };
		r = journal_begin_step(j, &st);
		r = r ?: journal_add_owned_block(j, "g-1", 1000 + i, MSG_ZONE_MOVABLE, false, NULL);
		r = r ?: journal_end_step(j);
		s = status(1, MSG_STATE_IN_PROGRESS, (i + 1) * BLOCK_SIZE);
		r = r ?: journal_set_state(j, "g-1", MSG_STATE_IN_PROGRESS, s, "https");
		json_decref(s);
	}
	s = status(1, MSG_STATE_APPLIED, n * BLOCK_SIZE);
	r = r ?: journal_set_state(j, "g-1", MSG_STATE_APPLIED, s, "https");
	json_decref(s);
	journal_close(j);
	return r;
}

static int new_way(const char *dir, const struct msg *m, size_t n)
{
	struct intentlog *il = NULL;
	struct intentlog_target *t = calloc(n, sizeof(*t));
	struct intentlog_done *d = calloc(n, sizeof(*d));
	char err[256];
	json_t *s;
	int r = t && d ? intentlog_open(dir, NULL, &il, NULL, err, sizeof(err)) : -ENOMEM;

	if (r < 0) {
		fprintf(stderr, "intentlog_open: %s\n", err);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		t[i] = (struct intentlog_target){ .block = 1000 + i, .memmap = 0, .zone = MSG_ZONE_MOVABLE };
		d[i] = (struct intentlog_done){ .block = 1000 + i, .zone = MSG_ZONE_MOVABLE };
	}
	s = status(1, MSG_STATE_ACCEPTED, 0);
	r = intentlog_accept(il, "https", m, MSG_STATE_ACCEPTED, s, "https");
	json_decref(s);
	s = status(1, MSG_STATE_IN_PROGRESS, 0);
	r = r ?: intentlog_intent(il, "g-1", ILOG_UP, t, n, s, "https");
	json_decref(s);
	s = status(1, MSG_STATE_APPLIED, n * BLOCK_SIZE);
	r = r ?: intentlog_result(il, "g-1", MSG_STATE_APPLIED, n * BLOCK_SIZE, d, n, s, "https");
	json_decref(s);
	if (r == 0) {
		struct intentlog_stats st;
		intentlog_stats(il, &st);
		printf("intentlog: %" PRIu64 " syncs counted by the log since open (open included)\n", st.syncs);
	}
	intentlog_close(il);
out:
	free(t);
	free(d);
	return r;
}

int main(int argc, char **argv)
{
	struct msg_error merr;
	struct msg *m = NULL;
	char text[128];
	size_t n;
	uint64_t w0;
	double t0;
	int r;

	if (argc != 4 || (!streq(argv[3], "old") && !streq(argv[3], "new"))) {
		fprintf(stderr, "usage: journal_bench DIR BLOCKS old|new\n");
		return 2;
	}
	n = strtoul(argv[2], NULL, 10);
	snprintf(text, sizeof(text), "{\"type\":\"grant\",\"id\":\"g-1\",\"generation\":1,\"size\":%llu}",
		 (unsigned long long)(n * BLOCK_SIZE));
	if (n == 0 || msg_parse(text, strlen(text), 65536, &m, &merr) < 0) {
		fprintf(stderr, "journal_bench: bad BLOCKS\n");
		return 2;
	}
	w0 = wchar();
	t0 = now();
	r = streq(argv[3], "old") ? old_way(argv[1], m, n) : new_way(argv[1], m, n);
	msg_free(m);
	if (r < 0) {
		fprintf(stderr, "journal_bench: %s\n", strerror(-r));
		return 1;
	}
	printf("%s journal, grant of %zu blocks: %" PRIu64 " bytes written, %.3f s\n", argv[3], n, wchar() - w0,
	       now() - t0);
	return 0;
}
