/* SPDX-License-Identifier: MIT */
#include "agent/engine/metrics.h"
#include "lib/util.h"

#include <pthread.h>
#include <stdarg.h>

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

static const char *const outcome_names[OUT__MAX] = { "applied", "partial", "failed", "rejected", "cancelled" };

/* Steps and results are a small fixed set: a table, no allocation per op. */
static const char *const step_names[] = {
	"memmap_on_memory", "configure", "online", "offline", "deconfigure", "other",
};
#define N_STEPS ARRAY_SIZE(step_names)

static const char *const block_op_names[] = { "add", "remove" };

static const char *const result_names[] = { "ok", "EBUSY", "EIO", "EINVAL", "ENOMEM", "EINTR", "other" };
#define N_RESULTS ARRAY_SIZE(result_names)

static const char *const skip_reasons[] = { "generation", "malformed" };
#define N_SKIP_REASONS ARRAY_SIZE(skip_reasons)

/* Seconds; offlining can take minutes (W6). */
static const double buckets[] = { 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600 };
#define N_BUCKETS ARRAY_SIZE(buckets)

struct metrics {
	pthread_mutex_t lock;
	uint64_t requests[2][OUT__MAX];
	uint64_t block_ops[ARRAY_SIZE(block_op_names)][N_RESULTS];
	uint64_t steps[N_STEPS][N_RESULTS];
	uint64_t hist[N_BUCKETS + 1];
	uint64_t hist_count;
	double hist_sum;
	struct {
		char source[64];
		uint64_t n[N_SKIP_REASONS];
	} skipped[METRICS_SKIP_SOURCES];
	size_t n_skip_sources;
};

int metrics_new(struct metrics **out)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void metrics_count_request(struct metrics *m, const char *kind, enum metric_outcome o)
{
	if ((unsigned)o >= OUT__MAX)
		return;
	pthread_mutex_lock(&m->lock);
	m->requests[streq(kind, "revoke")][o]++;
	pthread_mutex_unlock(&m->lock);
}

static size_t index_of(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n - 1; i++)
		if (streq(names[i], s))
			return i;
	return n - 1; /* "other" */
}

void metrics_count_step(struct metrics *m, const char *step, int err)
{
	size_t s = index_of(step_names, N_STEPS, step);
	size_t r = err == 0 ? 0 : index_of(result_names, N_RESULTS, errno_name(err));

	pthread_mutex_lock(&m->lock);
	m->steps[s][r]++;
	pthread_mutex_unlock(&m->lock);
}

void metrics_count_block_op(struct metrics *m, enum metric_block_op op, int err, double seconds)
{
	size_t s = op == METRIC_BLOCK_REMOVE;
	size_t r = err == 0 ? 0 : index_of(result_names, N_RESULTS, errno_name(err));
	size_t b = 0;

	while (b < N_BUCKETS && seconds > buckets[b])
		b++;
	pthread_mutex_lock(&m->lock);
	m->block_ops[s][r]++;
	m->hist[b]++;
	m->hist_count++;
	m->hist_sum += seconds;
	pthread_mutex_unlock(&m->lock);
}

void metrics_count_skipped(struct metrics *m, const char *source, const char *reason, uint64_t n)
{
	size_t r, i;

	for (r = 0; r < N_SKIP_REASONS && !streq(skip_reasons[r], reason); r++)
		;
	if (r == N_SKIP_REASONS || strlen(source) >= sizeof(m->skipped[0].source))
		return;
	pthread_mutex_lock(&m->lock);
	for (i = 0; i < m->n_skip_sources && !streq(m->skipped[i].source, source); i++)
		;
	if (i == m->n_skip_sources && i < METRICS_SKIP_SOURCES) {
		snprintf(m->skipped[i].source, sizeof(m->skipped[i].source), "%s", source);
		m->n_skip_sources++;
	}
	if (i < m->n_skip_sources)
		m->skipped[i].n[r] += n;
	pthread_mutex_unlock(&m->lock);
}

struct buf {
	char *p;
	size_t len, cap;
	int err;
};

__attribute__((format(printf, 2, 3)))
static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = -EINVAL;
			return;
		}
		if ((size_t)n < b->cap - b->len)
			break;
		size_t cap = (b->cap + (size_t)n + 1) * 2;
		char *np = realloc(b->p, cap);
		if (!np) {
			b->err = -ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	b->len += (size_t)n;
}

int metrics_render(struct metrics *m, const struct metrics_gauges *g, char **out)
{
	struct buf b = { .p = malloc(4096), .cap = 4096 };
	uint64_t cum = 0;

	if (!b.p)
		return -ENOMEM;
	b.p[0] = '\0';
	/* the usual info metric: always 1, the version in its label */
	buf_printf(&b, "# HELP memgrant_build_info The memgrant version this agent runs.\n"
		       "# TYPE memgrant_build_info gauge\nmemgrant_build_info{version=\"%s\"} 1\n",
		   MEMGRANT_VERSION);
	buf_printf(&b, "# HELP memgrant_block_size_bytes Memory block size (block_size_bytes).\n"
		       "# TYPE memgrant_block_size_bytes gauge\nmemgrant_block_size_bytes %llu\n",
		   (unsigned long long)g->block_size);
	buf_printf(&b, "# HELP memgrant_online_bytes Memory in online blocks.\n"
		       "# TYPE memgrant_online_bytes gauge\nmemgrant_online_bytes %llu\n",
		   (unsigned long long)g->online_bytes);
	buf_printf(&b, "# HELP memgrant_standby_bytes Standby memory not configured.\n"
		       "# TYPE memgrant_standby_bytes gauge\nmemgrant_standby_bytes %llu\n",
		   (unsigned long long)g->standby_bytes);
	buf_printf(&b, "# HELP memgrant_granted_bytes Memory this agent brought online and still owns.\n"
		       "# TYPE memgrant_granted_bytes gauge\nmemgrant_granted_bytes %llu\n",
		   (unsigned long long)g->granted_bytes);
	buf_printf(&b, "# HELP memgrant_outbox_pending Status reports not yet delivered.\n"
		       "# TYPE memgrant_outbox_pending gauge\nmemgrant_outbox_pending %llu\n",
		   (unsigned long long)g->outbox_pending);
	buf_printf(&b, "# HELP memgrant_journal_syncs_total fsync and fdatasync calls of the journal since start.\n"
		       "# TYPE memgrant_journal_syncs_total counter\nmemgrant_journal_syncs_total %llu\n",
		   (unsigned long long)g->journal_syncs);
	buf_printf(&b, "# HELP memgrant_journal_written_bytes_total Bytes written to the journal since start.\n"
		       "# TYPE memgrant_journal_written_bytes_total counter\nmemgrant_journal_written_bytes_total %llu\n",
		   (unsigned long long)g->journal_bytes_written);

	pthread_mutex_lock(&m->lock);
	buf_printf(&b, "# HELP memgrant_requests_total Grants and revocations by outcome.\n"
		       "# TYPE memgrant_requests_total counter\n");
	for (int k = 0; k < 2; k++)
		for (int o = 0; o < OUT__MAX; o++)
			buf_printf(&b, "memgrant_requests_total{kind=\"%s\",outcome=\"%s\"} %llu\n",
				   k ? "revoke" : "grant", outcome_names[o],
				   (unsigned long long)m->requests[k][o]);
	if (m->n_skip_sources) {
		buf_printf(&b, "# HELP memgrant_messages_skipped_total Messages from a control plane skipped without a "
			       "status report (each one logged), by source and reason.\n"
			       "# TYPE memgrant_messages_skipped_total counter\n");
		for (size_t i = 0; i < m->n_skip_sources; i++)
			for (size_t r = 0; r < N_SKIP_REASONS; r++)
				buf_printf(&b, "memgrant_messages_skipped_total{source=\"%s\",reason=\"%s\"} %llu\n",
					   m->skipped[i].source, skip_reasons[r], (unsigned long long)m->skipped[i].n[r]);
	}
	buf_printf(&b, "# HELP memgrant_block_operations_total Blocks added (memmap, configure, online) or removed "
		       "(offline, deconfigure), by result: the errno of the step that failed.\n"
		       "# TYPE memgrant_block_operations_total counter\n");
	for (size_t s = 0; s < ARRAY_SIZE(block_op_names); s++)
		for (size_t r = 0; r < N_RESULTS; r++)
			if (m->block_ops[s][r] || r == 0)
				buf_printf(&b, "memgrant_block_operations_total{operation=\"%s\",result=\"%s\"} %llu\n",
					   block_op_names[s], result_names[r],
					   (unsigned long long)m->block_ops[s][r]);
	buf_printf(&b, "# HELP memgrant_executor_steps_total Kernel writes, every step of every block, by step and result.\n"
		       "# TYPE memgrant_executor_steps_total counter\n");
	for (size_t s = 0; s + 1 < N_STEPS; s++)
		for (size_t r = 0; r < N_RESULTS; r++)
			if (m->steps[s][r] || r == 0)
				buf_printf(&b, "memgrant_executor_steps_total{step=\"%s\",result=\"%s\"} %llu\n",
					   step_names[s], result_names[r], (unsigned long long)m->steps[s][r]);
	buf_printf(&b, "# HELP memgrant_block_operation_seconds Duration of kernel block operations.\n"
		       "# TYPE memgrant_block_operation_seconds histogram\n");
	for (size_t i = 0; i < N_BUCKETS; i++) {
		cum += m->hist[i];
		buf_printf(&b, "memgrant_block_operation_seconds_bucket{le=\"%g\"} %llu\n", buckets[i],
			   (unsigned long long)cum);
	}
	cum += m->hist[N_BUCKETS];
	buf_printf(&b, "memgrant_block_operation_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
	buf_printf(&b, "memgrant_block_operation_seconds_sum %.6f\n", m->hist_sum);
	buf_printf(&b, "memgrant_block_operation_seconds_count %llu\n", (unsigned long long)m->hist_count);
	pthread_mutex_unlock(&m->lock);

	if (b.err) {
		free(b.p);
		return b.err;
	}
	*out = b.p;
	return 0;
}
