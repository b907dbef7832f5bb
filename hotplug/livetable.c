/* SPDX-License-Identifier: MIT */
/*
 * The live block table (contract in livetable.h).
 *
 * The table is a mem_table sorted by id behind a writer-preferring rwlock.
 * The updater thread is the only one that changes it, so it reads its own
 * table without the lock and takes the write lock only to store rows it has
 * already read from the backend.
 */
#include "hotplug/livetable.h"

#include "lib/util.h"

#include <pthread.h>
#include <sys/mman.h>

#define LT_MAX_IDS 4096 /* more changed blocks in one batch: re-scan */
#define LT_MAX_RETRY 64 /* more blocks whose read failed: re-scan */

struct livetable {
	struct hp_backend *b;
	int fd;
	pthread_rwlock_t lock;
	struct mem_table *t;
	bool need_rescan;
	struct livetable_stats st; /* under lock */
	struct livetable_counts counts; /* under lock, as the rows */
	uint64_t mark;
	uint64_t ids[LT_MAX_IDS + LT_MAX_RETRY];
	/* blocks whose read failed (a file briefly empty, EINTR): read again
	 * at the next update, that block alone, not the machine */
	uint64_t retry[LT_MAX_RETRY];
	size_t n_retry;
};

/* Rows for N blocks with room to grow as mem_table_add() expects (block.c).
 * A big table (262,144 rows are 4 MiB) is asked for in huge pages: a
 * snapshot per operation would otherwise fault in 4 KiB at a time, and
 * those faults, not the copy, were most of an operation's cost on a big
 * machine.  free() and realloc() take it as any other. */
#define HUGE_ROWS_BYTES (2u << 20)
static struct mem_block *alloc_rows(size_t n)
{
	size_t cap = 1, bytes;
	void *p = NULL;

	while (cap < n)
		cap *= 2;
	bytes = cap * sizeof(struct mem_block);
	if (bytes < HUGE_ROWS_BYTES)
		return malloc(bytes);
	if (posix_memalign(&p, HUGE_ROWS_BYTES, bytes) != 0)
		return NULL;
	(void)madvise(p, bytes, MADV_HUGEPAGE); /* a hint: 4 KiB pages when THP is off */
	return p;
}

/* A list of changes, the rows copied so that FN sees them after the swap. */
struct changes {
	struct mem_block *old, *nw;
	bool *had_old, *has_new;
	size_t n, cap;
};

static void changes_free(struct changes *c)
{
	free(c->old);
	free(c->nw);
	free(c->had_old);
	free(c->has_new);
}

static int changes_add(struct changes *c, const struct mem_block *old, const struct mem_block *nw)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct mem_block *o = realloc(c->old, cap * sizeof(*o)), *n;

		if (!o)
			return -ENOMEM;
		c->old = o;
		n = realloc(c->nw, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		c->nw = n;
		bool *h = realloc(c->had_old, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		c->had_old = h;
		h = realloc(c->has_new, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		c->has_new = h;
		c->cap = cap;
	}
	c->had_old[c->n] = old != NULL;
	c->has_new[c->n] = nw != NULL;
	if (old)
		c->old[c->n] = *old;
	if (nw)
		c->nw[c->n] = *nw;
	c->n++;
	return 0;
}

static void changes_report(const struct changes *c, lt_change_fn fn, void *data)
{
	for (size_t i = 0; fn && i < c->n; i++) {
		struct lt_change ch = { c->had_old[i] ? &c->old[i] : NULL, c->has_new[i] ? &c->nw[i] : NULL };

		fn(&ch, data);
	}
}

bool mem_block_equal(const struct mem_block *a, const struct mem_block *b)
{
	return a->id == b->id && a->in_firmware == b->in_firmware && a->configured == b->configured &&
	       a->memmap_on_memory == b->memmap_on_memory && a->state == b->state &&
	       a->removable == b->removable && a->node == b->node && a->zones == b->zones;
}

static bool table_header_equal(const struct mem_table *a, const struct mem_table *b)
{
	return a->block_size == b->block_size && a->has_firmware == b->has_firmware &&
	       a->boot_known == b->boot_known && a->boot_end == b->boot_end &&
	       streq(a->auto_online, b->auto_online) && streq(a->memmap_param, b->memmap_param);
}

/* Adds (SIGN 1) or takes away (-1) ROW's share of the counts. */
static void count_row(struct livetable *lt, const struct mem_block *row, int sign)
{
	struct livetable_counts *c = &lt->counts;
	uint64_t d = (uint64_t)(int64_t)sign;

	c->blocks += d;
	if (row->memmap_on_memory == MEM_MEMMAP_UNREAD)
		c->memmap_unread += d;
	if (row->configured && row->state == MEM_STATE_ONLINE) {
		enum mem_zone side = mem_block_ratio_side(row);

		c->online += d;
		if (row->id >= lt->mark)
			c->online_from_mark += d;
		if (side == MEM_ZONE_MOVABLE)
			c->online_movable += d;
		else if (side == MEM_ZONE_NORMAL)
			c->online_kernel += d;
	} else if (row->configured && lt->t->has_firmware) {
		c->in_flight += d;
	}
	/* without sys/firmware/memory (C0) there is no configure step: a block
	 * the kernel keeps offline is what a grant can take, not one half-way */
	if (mem_block_is_standby(row) || (!lt->t->has_firmware && row->configured && row->state != MEM_STATE_ONLINE))
		c->standby += d;
}

/* The counts of the whole table (after a discover). */
static void count_table(struct livetable *lt)
{
	lt->counts = (struct livetable_counts){ .block_size = lt->t->block_size };
	for (size_t i = 0; i < lt->t->n; i++)
		count_row(lt, &lt->t->blocks[i], 1);
}

int livetable_open(struct hp_backend *b, struct livetable **out)
{
	struct livetable *lt = calloc(1, sizeof(*lt));
	pthread_rwlockattr_t attr;
	int r;

	if (!lt)
		return -ENOMEM;
	lt->b = b;
	pthread_rwlockattr_init(&attr);
	/* status readers must not starve the one updater */
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&lt->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	lt->fd = hp_watch_open(b); /* first: a change during the discover is still seen */
	r = lt->fd < 0 ? lt->fd : hp_discover_lazy(b, &lt->t);
	if (r < 0) {
		livetable_free(lt);
		return r;
	}
	lt->st.rescans = 1;
	count_table(lt);
	*out = lt;
	return 0;
}

void livetable_free(struct livetable *lt)
{
	if (!lt)
		return;
	pthread_rwlock_destroy(&lt->lock);
	mem_table_free(lt->t);
	free(lt);
}

int livetable_fd(const struct livetable *lt)
{
	return lt->fd;
}

int livetable_rescan(struct livetable *lt, lt_change_fn fn, void *data)
{
	_cleanup_mem_table_ struct mem_table *nt = NULL;
	struct mem_table *old = lt->t;
	struct changes c = { 0 };
	size_t i = 0, j = 0;
	int r;

	r = hp_discover_lazy(lt->b, &nt);
	if (r < 0) {
		lt->need_rescan = true;
		return r;
	}
	/* both sorted by id: one merge walk */
	while (r == 0 && (i < old->n || j < nt->n)) {
		const struct mem_block *a = i < old->n ? &old->blocks[i] : NULL;
		struct mem_block *b = j < nt->n ? &nt->blocks[j] : NULL;

		/* a standby block's memmap_on_memory already read stays: the
		 * re-scan did not look (no notification tells of its change
		 * either way) */
		if (a && b && a->id == b->id && b->memmap_on_memory == MEM_MEMMAP_UNREAD && !a->configured &&
		    !b->configured && a->in_firmware)
			b->memmap_on_memory = a->memmap_on_memory;

		if (a && (!b || a->id < b->id)) {
			r = changes_add(&c, a, NULL);
			i++;
		} else if (b && (!a || b->id < a->id)) {
			r = changes_add(&c, NULL, b);
			j++;
		} else {
			if (!mem_block_equal(a, b))
				r = changes_add(&c, a, b);
			i++;
			j++;
		}
	}
	if (r < 0) {
		changes_free(&c);
		return r;
	}
	pthread_rwlock_wrlock(&lt->lock);
	lt->t = TAKE_PTR(nt);
	nt = old; /* freed on return, outside the lock's hold */
	lt->st.rescans++;
	count_table(lt);
	if (c.n || !table_header_equal(old, lt->t))
		lt->st.generation++;
	pthread_rwlock_unlock(&lt->lock);
	lt->need_rescan = false;
	changes_report(&c, fn, data);
	r = (int)c.n;
	changes_free(&c);
	return r;
}

/* Stores the rows of C into the table (under the write lock). */
static int apply(struct livetable *lt, const struct changes *c)
{
	struct mem_table *t = lt->t;
	bool reshape = false;

	for (size_t k = 0; k < c->n; k++) {
		if (c->had_old[k])
			count_row(lt, &c->old[k], -1);
		if (c->has_new[k])
			count_row(lt, &c->nw[k], 1);
	}
	for (size_t k = 0; k < c->n; k++) {
		struct mem_block *row = mem_table_find(t, c->had_old[k] ? c->old[k].id : c->nw[k].id);

		if (row && c->has_new[k])
			*row = c->nw[k];
		else
			reshape = true;
	}
	if (!reshape)
		return 0;
	/* a block appeared or vanished: rebuild the rows in order */
	{
		struct mem_block *rows = alloc_rows(t->n + c->n + 1);
		size_t n = 0;

		if (!rows)
			return -ENOMEM;
		for (size_t i = 0; i < t->n; i++) {
			bool gone = false;

			for (size_t k = 0; k < c->n && !gone; k++)
				gone = !c->has_new[k] && c->old[k].id == t->blocks[i].id;
			if (!gone)
				rows[n++] = t->blocks[i];
		}
		for (size_t k = 0; k < c->n; k++)
			if (!c->had_old[k] && c->has_new[k] && !mem_blocks_search(rows, n, c->nw[k].id))
				rows[n++] = c->nw[k];
		free(t->blocks);
		t->blocks = rows;
		t->n = n;
		mem_table_sort(t);
	}
	return 0;
}

int livetable_note(struct livetable *lt, const struct mem_block *m, lt_change_fn fn, void *data)
{
	const struct mem_block *cur = mem_table_find(lt->t, m->id);
	struct changes c = { 0 };
	int r = 0;

	if (!cur || !mem_block_equal(cur, m))
		r = changes_add(&c, cur, m);
	if (r == 0 && c.n) {
		pthread_rwlock_wrlock(&lt->lock);
		r = apply(lt, &c);
		lt->st.generation++;
		pthread_rwlock_unlock(&lt->lock);
		if (r == 0)
			changes_report(&c, fn, data);
	}
	changes_free(&c);
	return r < 0 ? r : (int)c.n;
}

int livetable_update(struct livetable *lt, lt_change_fn fn, void *data)
{
	struct changes c = { 0 };
	size_t n = 0;
	bool overflow = false;
	int r;

	r = hp_watch_read(lt->b, lt->ids, LT_MAX_IDS, &n, &overflow);
	if (r < 0)
		return r;
	if (overflow || lt->need_rescan) {
		lt->n_retry = 0;
		return livetable_rescan(lt, fn, data);
	}
	for (size_t k = 0; k < lt->n_retry; k++)
		lt->ids[n++] = lt->retry[k];
	lt->n_retry = 0;
	for (size_t k = 0; k < n; k++) {
		const struct mem_block *cur = mem_table_find(lt->t, lt->ids[k]);
		struct mem_block m;

		/* the notification's own read when it carries one (uevents, not re-reads) */
		r = hp_watch_row(lt->b, lt->ids[k], &m);
		if (r == -ENODATA)
			r = hp_read_block(lt->b, lt->ids[k], &m);
		if (r == -ENOENT)
			r = cur ? changes_add(&c, cur, NULL) : 0;
		else if (r < 0) {
			/* keep the old row; this block is read again next time */
			bool known = false;

			for (size_t j = 0; j < lt->n_retry; j++)
				known |= lt->retry[j] == lt->ids[k];
			if (!known && lt->n_retry < LT_MAX_RETRY)
				lt->retry[lt->n_retry++] = lt->ids[k];
			else if (!known)
				lt->need_rescan = true;
			r = 0;
		}
		else if (!cur || !mem_block_equal(cur, &m))
			r = changes_add(&c, cur, &m);
		if (r < 0)
			break;
	}
	if (r == 0 && c.n) {
		pthread_rwlock_wrlock(&lt->lock);
		r = apply(lt, &c);
		lt->st.generation++;
		lt->st.rereads += n;
		pthread_rwlock_unlock(&lt->lock);
	} else if (r == 0) {
		pthread_rwlock_wrlock(&lt->lock);
		lt->st.rereads += n;
		pthread_rwlock_unlock(&lt->lock);
	}
	if (r == 0) {
		changes_report(&c, fn, data);
		r = (int)c.n;
	}
	changes_free(&c);
	return r;
}

/* Rows read per turn of livetable_read_memmap(): the updates wait no longer. */
#define LT_MEMMAP_BATCH 1024

int livetable_read_memmap(struct livetable *lt, uint64_t *from)
{
	struct mem_block rows[LT_MEMMAP_BATCH];
	const struct mem_table *t = lt->t;
	size_t n = 0, i;
	int r;

	/* the caller owns the updates: the rows cannot change under this walk */
	for (i = mem_table_lower_bound(t, *from); i < t->n && n < LT_MEMMAP_BATCH; i++)
		if (t->blocks[i].memmap_on_memory == MEM_MEMMAP_UNREAD)
			rows[n++] = t->blocks[i];
	*from = i < t->n ? t->blocks[i].id : UINT64_MAX;
	if (n == 0)
		return 0;
	r = hp_read_memmap(lt->b, rows, n);
	if (r < 0)
		return r;
	pthread_rwlock_wrlock(&lt->lock);
	for (size_t k = 0; k < n; k++) {
		struct mem_block *row = mem_table_find(lt->t, rows[k].id);

		if (row && row->memmap_on_memory == MEM_MEMMAP_UNREAD &&
		    rows[k].memmap_on_memory != MEM_MEMMAP_UNREAD) {
			row->memmap_on_memory = rows[k].memmap_on_memory;
			lt->counts.memmap_unread--;
		}
	}
	pthread_rwlock_unlock(&lt->lock);
	return (int)n;
}

int livetable_find(struct livetable *lt, uint64_t id, struct mem_block *out)
{
	const struct mem_block *b;
	int r = -ENOENT;

	pthread_rwlock_rdlock(&lt->lock);
	b = mem_table_find(lt->t, id);
	if (b) {
		*out = *b;
		r = 0;
	}
	pthread_rwlock_unlock(&lt->lock);
	return r;
}

int livetable_snapshot(struct livetable *lt, struct mem_table **out)
{
	struct mem_table *t;
	int r = 0;

	pthread_rwlock_rdlock(&lt->lock);
	t = mem_table_new(lt->t->block_size);
	if (t) {
		*t = *lt->t;
		t->blocks = alloc_rows(lt->t->n);
		if (t->blocks)
			memcpy(t->blocks, lt->t->blocks, lt->t->n * sizeof(*t->blocks));
	}
	pthread_rwlock_unlock(&lt->lock);
	if (!t || !t->blocks) {
		mem_table_free(t);
		r = -ENOMEM;
	} else {
		*out = t;
	}
	return r;
}

void livetable_lock(struct livetable *lt)
{
	pthread_rwlock_rdlock(&lt->lock);
}

void livetable_unlock(struct livetable *lt)
{
	pthread_rwlock_unlock(&lt->lock);
}

const struct mem_table *livetable_table(const struct livetable *lt)
{
	return lt->t;
}

void livetable_counts(struct livetable *lt, struct livetable_counts *out)
{
	pthread_rwlock_rdlock(&lt->lock);
	*out = lt->counts;
	pthread_rwlock_unlock(&lt->lock);
}

void livetable_counts_locked(const struct livetable *lt, struct livetable_counts *out)
{
	*out = lt->counts;
}

void livetable_set_mark(struct livetable *lt, uint64_t id)
{
	pthread_rwlock_wrlock(&lt->lock);
	lt->mark = id;
	count_table(lt);
	pthread_rwlock_unlock(&lt->lock);
}

void livetable_stats(struct livetable *lt, struct livetable_stats *out)
{
	pthread_rwlock_rdlock(&lt->lock);
	*out = lt->st;
	pthread_rwlock_unlock(&lt->lock);
}
