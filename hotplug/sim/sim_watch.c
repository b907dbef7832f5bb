/* SPDX-License-Identifier: MIT */
/*
 * Change notifications of the sim: inotify on its state directory (every
 * change renames one records file into it, whoever makes it) and on the
 * directory of its descriptor (a new machine, faults, auto_online_blocks).
 *
 * The watch keeps the records it last reported, so that a renamed records
 * file yields exactly the blocks that changed in it; when the zone spans
 * move, the offline blocks whose valid_zones (A9) changed with them are
 * reported too.  Nothing here polls: the caller polls the fd.
 */
#include "hotplug/sim/sim_impl.h"

#include "lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <sys/inotify.h>

struct sim_watch {
	const struct sim_fs *fs;   /* the backend's (outlives the watch) */
	char *state_path;
	char *desc_name;           /* base name of the descriptor */
	int fd;                    /* inotify */
	int wd_dir, wd_desc;
	int wd_file;               /* the descriptor itself: written in place */
	struct sim_settings *s;    /* descriptor as last read */
	struct sim_block *cache;   /* records as last reported */
	struct sim_spans sp;       /* spans of the cache */
};

void sim_watch_free(struct sim_watch *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	free(w->state_path);
	free(w->desc_name);
	sim_settings_free(w->s);
	free(w->cache);
	free(w);
}

int sim_watch_row(struct sim_watch *w, uint64_t id, struct mem_block *out)
{
	struct sim_block b;

	if (!w->s || !w->cache || id >= w->s->n_blocks)
		return -ENODATA;
	b = w->cache[id];
	sim_block_to_mem(w->fs, w->s, &w->sp, id, &b, out);
	return 0;
}

int sim_watch_fd(const struct sim_watch *w)
{
	return w->fd;
}

/* Re-reads the descriptor and every record; re-aims the directory watch. */
static int reload(struct sim_watch *w)
{
	struct sim_settings *s = NULL;
	struct sim_block *all = NULL;
	struct sim_summary sum;
	int r;

	r = sim_settings_load(w->fs, &s, NULL, 0);
	if (r == 0)
		r = sim_records_load(s, &all, NULL, 0);
	if (r < 0) {
		sim_settings_free(s);
		return r;
	}
	if (!w->s || !s->dir || !w->s->dir || !streq(s->dir, w->s->dir) || w->wd_dir < 0) {
		if (w->wd_dir >= 0)
			inotify_rm_watch(w->fd, w->wd_dir);
		w->wd_dir = s->dir ? inotify_add_watch(w->fd, s->dir,
						       IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
				   : -1;
		if (s->dir && w->wd_dir < 0) {
			r = -errno;
			sim_settings_free(s);
			free(all);
			return r;
		}
	}
	sim_settings_free(w->s);
	free(w->cache);
	w->s = s;
	w->cache = all;
	sim_summary_compute(all, s->n_blocks, &sum);
	w->sp = sum.sp;
	return 0;
}

int sim_watch_open(const struct sim_fs *fs, const char *state_path, struct sim_watch **out)
{
	_cleanup_free_ char *copy = NULL;
	struct sim_watch *w;
	int r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->wd_dir = w->wd_desc = w->wd_file = -1;
	w->fs = fs;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	copy = strdup(state_path);
	w->state_path = strdup(state_path);
	w->desc_name = copy ? strdup(basename(copy)) : NULL;
	if (w->fd < 0 || !copy || !w->state_path || !w->desc_name) {
		r = w->fd < 0 ? -errno : -ENOMEM;
		sim_watch_free(w);
		return r;
	}
	strcpy(copy, state_path);
	/* Not IN_CLOSE_WRITE on the folder: every write of the sim closes its
	 * lock file there, a wake-up per block step for nothing.  The
	 * descriptor's own inode is watched for that instead, and watched
	 * again whenever a new one is renamed or created in its place. */
	w->wd_desc = inotify_add_watch(w->fd, dirname(copy), IN_MOVED_TO | IN_CREATE | IN_ONLYDIR);
	w->wd_file = inotify_add_watch(w->fd, w->state_path, IN_CLOSE_WRITE | IN_DONT_FOLLOW);
	r = w->wd_desc < 0 ? -errno : reload(w);
	if (r < 0) {
		sim_watch_free(w);
		return r;
	}
	*out = w;
	return 0;
}

struct idset {
	uint64_t *ids;
	size_t n, cap;
};

static int idset_add(struct idset *v, uint64_t id)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		uint64_t *n = realloc(v->ids, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		v->ids = n;
		v->cap = cap;
	}
	v->ids[v->n++] = id;
	return 0;
}

/* Compares records file K with the cache: changed ids into V, cache updated. */
/* Whether B counts in its zone's span (sim_summary_compute()'s rule). */
static bool in_span(const struct sim_block *b)
{
	return b->state != MEM_STATE_OFFLINE && b->zone != MEM_ZONE_NONE && b->zone < MEM_ZONE_COUNT;
}

/* Block I of the cache changes from OLD to its row now: the spans follow,
 * a block that joins a zone at once; one that leaves it at an edge marks
 * the zone for spans_fix(). */
static void span_change(struct sim_watch *w, uint64_t i, const struct sim_block *old, bool *dirty)
{
	const struct sim_block *b = &w->cache[i];

	if (in_span(old) && (!in_span(b) || b->zone != old->zone) &&
	    (i == w->sp.lo[old->zone] || i + 1 == w->sp.hi[old->zone]))
		dirty[old->zone] = true;
	if (in_span(b)) {
		if (i < w->sp.lo[b->zone])
			w->sp.lo[b->zone] = i;
		if (i + 1 > w->sp.hi[b->zone])
			w->sp.hi[b->zone] = i + 1;
	}
}

/* The edges of the zones DIRTY marks, moved inwards to the first block still
 * in them: blocks taken down at an edge cost the blocks passed, not the
 * machine. */
static void spans_fix(struct sim_watch *w, const bool *dirty)
{
	for (int z = 0; z < MEM_ZONE_COUNT; z++) {
		uint64_t lo = w->sp.lo[z], hi = w->sp.hi[z];

		if (!dirty[z])
			continue;
		while (lo < hi && !(in_span(&w->cache[lo]) && w->cache[lo].zone == (enum mem_zone)z))
			lo++;
		while (hi > lo && !(in_span(&w->cache[hi - 1]) && w->cache[hi - 1].zone == (enum mem_zone)z))
			hi--;
		if (lo >= hi)
			lo = UINT64_MAX, hi = 0;
		w->sp.lo[z] = lo;
		w->sp.hi[z] = hi;
	}
}

static int diff_chunk(struct sim_watch *w, uint64_t k, struct idset *v, bool *dirty)
{
	struct sim_block now[SIM_CHUNK];
	uint64_t first = k * SIM_CHUNK;
	int r;

	if (first >= w->s->n_blocks)
		return 0;
	r = sim_chunk_load(w->s, k, now, NULL, 0);
	if (r < 0)
		return r;
	for (uint64_t i = 0; i < SIM_CHUNK && first + i < w->s->n_blocks; i++) {
		struct sim_block *c = &w->cache[first + i];

		struct sim_block old = *c;

		if (c->configured == now[i].configured && c->memmap == now[i].memmap &&
		    c->state == now[i].state && c->zone == now[i].zone)
			continue;
		*c = now[i];
		span_change(w, first + i, &old, dirty);
		r = idset_add(v, first + i);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Offline blocks whose default zone moved with the spans. */
static int diff_spans(struct sim_watch *w, const struct sim_spans *old, struct idset *v)
{
	uint64_t ranges[2 * SIM_NZONES][2];
	size_t nr = sim_spans_diff(old, &w->sp, ranges);

	for (size_t i = 0; i < nr; i++)
		for (uint64_t j = ranges[i][0]; j < ranges[i][1] && j < w->s->n_blocks; j++) {
			const struct sim_block *b = &w->cache[j];
			char before[48], after[48];

			if (!b->configured || b->state != MEM_STATE_OFFLINE)
				continue;
			sim_valid_zones(w->s, old, j, b, before, sizeof(before));
			sim_valid_zones(w->s, &w->sp, j, b, after, sizeof(after));
			if (!streq(before, after) && idset_add(v, j) < 0)
				return -ENOMEM;
		}
	return 0;
}

int sim_watch_read(struct sim_watch *w, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	_cleanup_free_ uint64_t *chunks = NULL;
	struct idset v = { 0 };
	size_t n_chunks = 0;
	bool desc = false, lost = false;
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	int r = 0;

	*n = 0;
	*overflow = false;
	for (;;) {
		ssize_t len = read(w->fd, buf, sizeof(buf));

		if (len < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			uint64_t k;
			char *end;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				lost = true;
			} else if (ev->wd == w->wd_file) {
				if (ev->mask & IN_IGNORED)
					w->wd_file = -1; /* replaced: the folder's event re-aims it */
				else
					desc = true;
			} else if (ev->wd == w->wd_desc) {
				if (ev->len && streq(ev->name, w->desc_name)) {
					desc = true;
					w->wd_file = inotify_add_watch(w->fd, w->state_path, IN_CLOSE_WRITE | IN_DONT_FOLLOW);
				}
			} else if (ev->wd == w->wd_dir) {
				if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
					lost = true; /* a new machine: sim init */
					w->wd_dir = -1;
				} else if (ev->len && startswith(ev->name, "blocks.")) {
					k = strtoull(ev->name + 7, &end, 10);
					if (*end == '\0' && !lost) {
						uint64_t *nc = realloc(chunks, (n_chunks + 1) * sizeof(*nc));

						if (!nc)
							return -ENOMEM;
						chunks = nc;
						chunks[n_chunks++] = k;
					}
				}
			}
		}
	}
	if (desc && !lost) {
		/* faults and used memory are not block state; a new machine or
		 * a new auto_online_blocks is everything to re-read */
		_cleanup_settings_ struct sim_settings *s = NULL;

		if (sim_settings_load(w->fs, &s, NULL, 0) < 0 || !s->dir || !streq(s->dir, w->s->dir) ||
		    s->n_blocks != w->s->n_blocks || s->has_firmware != w->s->has_firmware ||
		    !streq(s->auto_online, w->s->auto_online) || s->block_size != w->s->block_size)
			lost = true;
	}
	if (!lost) {
		struct sim_spans old = w->sp;
		bool dirty[MEM_ZONE_COUNT] = { false };

		if (n_chunks)
			qsort(chunks, n_chunks, sizeof(*chunks), u64_cmp);
		for (size_t i = 0; r == 0 && i < n_chunks; i++)
			if (i == 0 || chunks[i] != chunks[i - 1])
				r = diff_chunk(w, chunks[i], &v, dirty);
		if (r == 0 && v.n) {
			/* the zones' spans kept up from the blocks that changed,
			 * not computed again from every block */
			spans_fix(w, dirty);
			r = diff_spans(w, &old, &v);
		}
		if (r == -ENOMEM) {
			free(v.ids);
			return r;
		}
		lost = r < 0; /* a records file that did not read: re-read all */
	}
	if (!lost && v.n) {
		qsort(v.ids, v.n, sizeof(*v.ids), u64_cmp);
		for (size_t i = 0; i < v.n && !lost; i++) {
			if (i && v.ids[i] == v.ids[i - 1])
				continue;
			if (*n == max)
				lost = true;
			else
				ids[(*n)++] = v.ids[i];
		}
	}
	free(v.ids);
	if (lost) {
		*n = 0;
		*overflow = true;
		return reload(w);
	}
	return 0;
}
