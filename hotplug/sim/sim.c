/* SPDX-License-Identifier: MIT */
/*
 * The sim backend (contract in sim.h, files in sim_impl.h).
 *
 * Every write is: parse the value (K1, W1) -> take the writers' flock (W4)
 * -> load the descriptor, repair what a killed writer left -> load the
 * block's records file -> apply one kernel rule -> mark in flight, write
 * the summary, the records file (the commit) and the tree -> clear the
 * mark -> release the lock.  A write reads and writes a few small files,
 * whatever the size of the machine.  Readers (discover, read_block) never
 * take the lock: every file is replaced by rename, so they see whole
 * versions.
 *
 * Simplifications against the real kernel, on purpose:
 * - one NUMA node (node0); storage increment size = block size, so
 *   phys_device equals the block id (A6);
 * - the kernel zone of a block is DMA when it starts below 2 GiB, Normal
 *   otherwise (D3); the real kernel picks the first kernel zone whose span
 *   the block intersects;
 * - zone spans are the hull of the blocks online in that zone; the default
 *   zone for "online" follows contig-zones: the kernel zone unless the block
 *   only intersects the Movable span (movable_node is never set);
 * - online_policy auto-movable (P2) is not modelled;
 * - "online" (the attribute) onlines with the default policy, as the kernel
 *   does once a previous state write has been consumed;
 * - latency applies to writes that change something, not to no-ops or
 *   refused writes.
 */
#include "hotplug/sim/sim.h"
#include "hotplug/sim/sim_impl.h"

#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

/* ---- a write under the lock ---------------------------------------------------- */

struct chunk {
	uint64_t k;
	struct sim_block b[SIM_CHUNK];
};

struct txn {
	const struct sim_fs *fs;
	int lockfd;
	struct sim_settings *s;
	struct sim_summary sum; /* kept current as blocks change */
	struct chunk **chunks;  /* the records files read so far */
	size_t n_chunks;
	bool marked;            /* the marker says in flight */
	bool (*writer_killed)(void); /* sim_set_kill_check() */
	bool prompt_only;       /* sim_write_prompt(): no offline that migrates */
};

static void txn_drop_chunks(struct txn *t)
{
	for (size_t i = 0; i < t->n_chunks; i++)
		free(t->chunks[i]);
	free(t->chunks);
	t->chunks = NULL;
	t->n_chunks = 0;
}

static void txn_end(struct txn *t)
{
	txn_drop_chunks(t);
	sim_settings_free(t->s);
	t->s = NULL;
	if (t->lockfd >= 0)
		sim_unlock(t->lockfd);
}

/* Block ID's record, its records file read on first use; NULL and *ERR. */
static struct sim_block *txn_block(struct txn *t, uint64_t id, int *err)
{
	uint64_t k = id / SIM_CHUNK;
	struct chunk *c, **nc;

	for (size_t i = 0; i < t->n_chunks; i++)
		if (t->chunks[i]->k == k)
			return &t->chunks[i]->b[id % SIM_CHUNK];
	c = calloc(1, sizeof(*c));
	nc = c ? realloc(t->chunks, (t->n_chunks + 1) * sizeof(*nc)) : NULL;
	if (!nc) {
		free(c);
		*err = -ENOMEM;
		return NULL;
	}
	t->chunks = nc;
	c->k = k;
	*err = sim_chunk_load(t->s, k, c->b, NULL, 0);
	if (*err < 0) {
		free(c);
		return NULL;
	}
	t->chunks[t->n_chunks++] = c;
	return &c->b[id % SIM_CHUNK];
}

static bool block_eq(const struct sim_block *a, const struct sim_block *b)
{
	return a->configured == b->configured && a->memmap == b->memmap && a->state == b->state &&
	       a->zone == b->zone;
}

/* The first block from FROM towards TO (exclusive, either direction) online in Z. */
static int find_online(struct txn *t, enum mem_zone z, uint64_t from, uint64_t to, uint64_t *out)
{
	int err = 0;

	for (uint64_t j = from; j != to; j = from < to ? j + 1 : j - 1) {
		const struct sim_block *b = txn_block(t, j, &err);

		if (!b)
			return err;
		if (b->state != MEM_STATE_OFFLINE && b->zone == z) {
			*out = j;
			return 1;
		}
	}
	return 0;
}

/* Sets block ID to NW, keeping the summary's counters and spans current. */
static int txn_set(struct txn *t, uint64_t id, const struct sim_block *nw)
{
	struct sim_spans *sp = &t->sum.sp;
	struct sim_block *b, old;
	uint64_t j;
	int r = 0;

	b = txn_block(t, id, &r);
	if (!b)
		return r;
	old = *b;
	sim_summary_count(&t->sum, &old, -1);
	*b = *nw;
	sim_summary_count(&t->sum, nw, 1);
	if (old.state != MEM_STATE_OFFLINE && (nw->state == MEM_STATE_OFFLINE || nw->zone != old.zone)) {
		enum mem_zone z = old.zone;

		if (id == sp->lo[z]) {
			r = find_online(t, z, id + 1, sp->hi[z], &j);
			if (r > 0)
				sp->lo[z] = j;
			else if (r == 0)
				sp->lo[z] = UINT64_MAX, sp->hi[z] = 0;
		}
		if (r >= 0 && sp->hi[z] && id + 1 == sp->hi[z]) {
			r = find_online(t, z, id - 1, sp->lo[z] - 1, &j);
			if (r > 0)
				sp->hi[z] = j + 1;
			else if (r == 0)
				sp->lo[z] = UINT64_MAX, sp->hi[z] = 0;
		}
		if (r < 0)
			return r;
	}
	if (nw->state != MEM_STATE_OFFLINE) {
		if (id < sp->lo[nw->zone])
			sp->lo[nw->zone] = id;
		if (id + 1 > sp->hi[nw->zone])
			sp->hi[nw->zone] = id + 1;
	}
	return 0;
}

static int txn_mark(struct txn *t, const struct sim_marker *m)
{
	int r = sim_marker_write(t->lockfd, m);

	t->marked = r == 0 && m->dirty;
	return r;
}

/*
 * Writes out the change of block ID from OLD (and the summary from
 * OLD_SUM): summary, records file, tree.  KEEP_MARK leaves the marker set
 * (an offline whose migration is still to run).
 */
static int txn_commit(struct txn *t, uint64_t id, const struct sim_block *old,
		      const struct sim_summary *old_sum, bool keep_mark)
{
	struct sim_marker m = { .dirty = true, .has_id = true, .id = id, .sp = old_sum->sp };
	struct sim_block *nw;
	uint64_t ranges[2 * SIM_NZONES][2];
	size_t nr;
	int r = 0;

	nw = txn_block(t, id, &r);
	if (!nw)
		return r;
	if (!t->marked && (r = txn_mark(t, &m)) < 0)
		return r;
	if (memcmp(&t->sum, old_sum, sizeof(*old_sum)) != 0 && (r = sim_summary_save(t->s, &t->sum)) < 0)
		return r;
	r = sim_chunk_save(t->s, id / SIM_CHUNK, nw - id % SIM_CHUNK);
	if (r == 0)
		r = sim_tree_block(t->s, id, old, nw, &t->sum.sp);
	/* offline blocks whose default zone moved with the spans (A9) */
	nr = r == 0 ? sim_spans_diff(&old_sum->sp, &t->sum.sp, ranges) : 0;
	for (size_t i = 0; r == 0 && i < nr; i++)
		for (uint64_t j = ranges[i][0]; r == 0 && j < ranges[i][1] && j < t->s->n_blocks; j++) {
			const struct sim_block *b = txn_block(t, j, &r);
			char before[48], after[48];

			if (!b || j == id || !b->configured || b->state != MEM_STATE_OFFLINE)
				continue;
			sim_valid_zones(t->s, &old_sum->sp, j, b, before, sizeof(before));
			sim_valid_zones(t->s, &t->sum.sp, j, b, after, sizeof(after));
			if (!streq(before, after))
				r = sim_tree_zones(t->s, j, b, &t->sum.sp);
		}
	if (r == 0 && sim_mem_total(t->s, &t->sum) != sim_mem_total(t->s, old_sum))
		r = sim_tree_meminfo(t->s, &t->sum);
	if (r == 0 && !keep_mark)
		r = txn_mark(t, &(struct sim_marker){ 0 });
	return r;
}

/* Writes a whole new state directory for S (records ALL) and the tree,
 * then the descriptor that names it: the one step that makes it current. */
static int create_state(struct txn *t, struct sim_settings *s, const struct sim_block *all)
{
	char base_name[NAME_MAX + 1];
	_cleanup_close_ int base = -1;
	struct sim_summary sum;
	const char *mine;
	DIR *d;
	int r;

	s->fs = t->fs;
	r = txn_mark(t, &(struct sim_marker){ .dirty = true, .full = true });
	if (r < 0)
		return r;
	free(s->dir);
	s->dir = NULL;
	closep(&s->dirfd);
	/* the records are read by whoever reads the sim (an unprivileged agent,
	 * memgrantctl): 0755, written only by the lock holder */
	r = sim_fs_state_dir(t->fs, NULL, true, &s->dir, &s->dirfd);
	if (r < 0)
		return r;
	mine = strrchr(s->dir, '/') + 1;
	snprintf(base_name, sizeof(base_name), "%s.d", t->fs->name);
	base = sim_openat(t->fs->top, base_name, O_PATH | O_DIRECTORY, 0);
	if (base < 0)
		return base;
	for (uint64_t k = 0; r == 0 && k < sim_n_chunks(s); k++)
		r = sim_chunk_save(s, k, all + k * SIM_CHUNK);
	sim_summary_compute(all, s->n_blocks, &sum);
	if (r == 0)
		r = sim_summary_save(s, &sum);
	if (r == 0)
		r = sim_tree_render_all(s, all, &sum);
	if (r == 0)
		r = sim_settings_save(s);
	if (r < 0) {
		rm_rf_at(base, mine);
		return r;
	}
	r = txn_mark(t, &(struct sim_marker){ 0 });
	/* earlier state directories, and those of inits that were killed:
	 * through descriptors, nothing followed */
	{
		int lfd = sim_openat(base, ".", O_RDONLY | O_DIRECTORY, 0);
		d = lfd >= 0 ? fdopendir(lfd) : NULL;
		if (!d && lfd >= 0)
			close(lfd);
	}
	for (struct dirent *de; d && (de = readdir(d));) {
		if (de->d_name[0] == '.' || streq(de->d_name, mine))
			continue;
		(void)rm_rf_at(base, de->d_name);
	}
	if (d)
		closedir(d);
	return r;
}

/* Puts right what a writer killed while it wrote left behind (sim_impl.h). */
static int txn_repair(struct txn *t, const struct sim_marker *m)
{
	_cleanup_free_ struct sim_block *all = NULL;
	struct sim_settings *s = t->s;
	uint64_t ranges[2 * SIM_NZONES][2];
	size_t nr;
	int r;

	r = sim_records_load(s, &all, NULL, 0);
	if (r < 0)
		return r;
	/* W6: the killed writer's signal ended its offline, the block is online again */
	for (uint64_t i = 0; r == 0 && i < s->n_blocks; i++)
		if (all[i].state == MEM_STATE_GOING_OFFLINE) {
			all[i].state = MEM_STATE_ONLINE;
			r = sim_chunk_save(s, i / SIM_CHUNK, all + i / SIM_CHUNK * SIM_CHUNK);
			if (r == 0 && !m->full)
				r = sim_tree_block(s, i, NULL, &all[i], &t->sum.sp);
		}
	sim_summary_compute(all, s->n_blocks, &t->sum);
	if (r == 0)
		r = sim_summary_save(s, &t->sum);
	if (r == 0 && m->full)
		return sim_tree_render_all(s, all, &t->sum);
	if (r == 0 && m->has_id && m->id < s->n_blocks)
		r = sim_tree_block(s, m->id, NULL, &all[m->id], &t->sum.sp);
	nr = sim_spans_diff(&m->sp, &t->sum.sp, ranges);
	for (size_t i = 0; r == 0 && i < nr; i++)
		for (uint64_t j = ranges[i][0]; r == 0 && j < ranges[i][1] && j < s->n_blocks; j++)
			if (all[j].configured && all[j].state == MEM_STATE_OFFLINE)
				r = sim_tree_zones(s, j, &all[j], &t->sum.sp);
	if (r == 0)
		r = sim_tree_meminfo(s, &t->sum);
	if (r == 0)
		r = sim_tree_auto_online(s);
	return r;
}

/* Takes the lock and loads the machine, converting a format 1 file and
 * repairing a killed writer's leftovers first.  txn_end() always. */
static int txn_begin(struct txn *t, const struct sim_fs *fs, int lockfd)
{
	struct sim_marker m;
	int r;

	memset(t, 0, sizeof(*t));
	t->fs = fs;
	t->lockfd = -1;
	r = sim_lock(lockfd);
	if (r < 0)
		return r;
	t->lockfd = lockfd;
	r = sim_settings_load(fs, &t->s, NULL, 0);
	if (r < 0)
		return r;
	if (t->s->v1_blocks) { /* format 1: every block in the descriptor */
		r = create_state(t, t->s, t->s->v1_blocks);
		free(t->s->v1_blocks);
		t->s->v1_blocks = NULL;
		return r < 0 ? r : sim_summary_load(t->s, &t->sum);
	}
	r = sim_marker_read(lockfd, &m);
	if (r == 0 && !m.dirty && sim_summary_load(t->s, &t->sum) < 0)
		m = (struct sim_marker){ .dirty = true, .full = true }; /* summary lost */
	if (r == 0 && m.dirty) {
		r = txn_repair(t, &m);
		if (r == 0)
			r = txn_mark(t, &(struct sim_marker){ 0 });
	}
	return r;
}

/* ---- the rules ---------------------------------------------------------------- */

static int do_online(struct txn *t, uint64_t id, struct sim_block *b, enum online_type type)
{
	if (sim_id_in(&t->s->online_enomem, id)) /* W5: the block stays offline */
		return -ENOMEM;
	b->zone = sim_zone_for(t->s, &t->sum.sp, id, type);
	b->state = MEM_STATE_ONLINE;
	return 0;
}

/*
 * W6: going-offline is visible (records and tree) while the migration
 * (latency) runs; only the writer's death ends it early (its process
 * killed, or t->writer_killed), an EBUSY fault ends it quickly; either way
 * the block is online again.
 */
static int do_offline(struct txn *t, uint64_t id, const struct sim_block *old)
{
	struct sim_summary old_sum = t->sum;
	struct sim_block cur = *old, nw;
	int r, err = 0;

	if (t->s->latency_ms > 0) { /* only worth showing when it lasts */
		sigset_t mask;

		sim_block_signals(&mask);
		cur.state = MEM_STATE_GOING_OFFLINE;
		r = txn_set(t, id, &cur);
		if (r == 0)
			r = txn_commit(t, id, old, &old_sum, true);
		if (r < 0) {
			pthread_sigmask(SIG_SETMASK, &mask, NULL);
			return r;
		}
		err = sim_sleep_migrating(t->s->latency_ms, &mask, t->writer_killed);
		pthread_sigmask(SIG_SETMASK, &mask, NULL);
	}
	if (err == 0 && sim_id_in(&t->s->offline_ebusy, id))
		err = -EBUSY;
	nw = *old;
	if (err == 0) {
		nw.state = MEM_STATE_OFFLINE;
		nw.zone = MEM_ZONE_NONE;
	}
	old_sum = t->sum;
	r = txn_set(t, id, &nw);
	if (r == 0 && (t->marked || !block_eq(&nw, &cur)))
		r = txn_commit(t, id, &cur, &old_sum, false);
	return err < 0 ? err : r;
}

static int check_exists(const struct sim_settings *s, const struct sim_block *b, enum hp_attr attr,
			uint64_t id)
{
	if (attr == HP_ATTR_AUTO_ONLINE)
		return 0;
	if (id >= s->n_blocks)
		return -ENOENT;
	if ((attr == HP_ATTR_CONFIG || attr == HP_ATTR_MEMMAP) && !s->has_firmware)
		return -ENOENT; /* C0 */
	if ((attr == HP_ATTR_ONLINE || attr == HP_ATTR_STATE) && !b->configured)
		return -ENOENT; /* C14 */
	return 0;
}

/* Applies one parsed write under the lock: 0 or -errno. */
static int apply(struct txn *t, enum hp_attr attr, uint64_t id, bool val, int type, const char *word)
{
	struct sim_settings *s = t->s;
	struct sim_summary old_sum = t->sum;
	struct sim_block *cur, old, nw;
	int r = 0;

	if (attr == HP_ATTR_AUTO_ONLINE) {
		if (streq(s->auto_online, word))
			return 0;
		snprintf(s->auto_online, sizeof(s->auto_online), "%s", word);
		r = txn_mark(t, &(struct sim_marker){ .dirty = true, .sp = t->sum.sp });
		if (r == 0)
			r = sim_settings_save(s);
		if (r == 0)
			r = sim_tree_auto_online(s);
		return r < 0 ? r : txn_mark(t, &(struct sim_marker){ 0 });
	}
	cur = id < s->n_blocks ? txn_block(t, id, &r) : NULL;
	if (id < s->n_blocks && !cur)
		return r;
	r = check_exists(s, cur, attr, id);
	if (r < 0)
		return r;
	old = nw = *cur;
	switch (attr) {
	case HP_ATTR_CONFIG:
		if (val == old.configured)
			return 0; /* C6, C9 */
		if (!val) {
			if (old.state != MEM_STATE_OFFLINE)
				return -EBUSY; /* C10 */
			(void)sim_sleep(s->latency_ms);
			nw.configured = false; /* C11: storage released (C13) */
			break;
		}
		(void)sim_sleep(s->latency_ms);
		if (sim_id_in(&s->configure_eio, id))
			return -EIO; /* C7: the hypervisor refused, config stays 0 */
		nw.configured = true;
		nw.state = MEM_STATE_OFFLINE;
		if (!streq(s->auto_online, "offline")) {
			int ty = ONLINE_DEFAULT;
			(void)sim_parse_state_word(s->auto_online, &ty);
			(void)do_online(t, id, &nw, (enum online_type)ty); /* C7: failure ignored */
		}
		break;
	case HP_ATTR_MEMMAP:
		if (val && !s->memmap_supported && s->refuse_memmap_eopnotsupp)
			return -EOPNOTSUPP; /* C12, newer kernels; checked before the lock there */
		if (old.configured)
			return -EBUSY; /* C12, even for the same value */
		if (old.memmap == val)
			return 0;
		nw.memmap = val;
		break;
	case HP_ATTR_ONLINE:
		if (val == (old.state != MEM_STATE_OFFLINE))
			return 0; /* W3 */
		type = val ? ONLINE_DEFAULT : -1;
		/* fallthrough */
	case HP_ATTR_STATE:
		if ((type < 0) == (old.state == MEM_STATE_OFFLINE))
			return -EINVAL; /* W2 */
		if (type < 0 && t->prompt_only && s->latency_ms > 0)
			return -EWOULDBLOCK; /* its migration lasts: nothing written */
		if (type < 0)
			return do_offline(t, id, &old);
		(void)sim_sleep(s->latency_ms);
		r = do_online(t, id, &nw, (enum online_type)type);
		if (r < 0)
			return r;
		break;
	default:
		return -EINVAL;
	}
	r = txn_set(t, id, &nw);
	return r < 0 ? r : txn_commit(t, id, &old, &old_sum, false);
}

/* A missing file wins over a bad value (ENOENT before EINVAL), as open(2)
 * fails before the kernel parses anything. */
static int refuse_value(struct sim_backend *sb, enum hp_attr attr, uint64_t id, int perr)
{
	_cleanup_settings_ struct sim_settings *s = NULL;
	struct sim_block chunk[SIM_CHUNK];
	int r = sim_settings_load(sb->fs, &s, NULL, 0);

	if (r < 0)
		return r;
	if (attr != HP_ATTR_AUTO_ONLINE && id < s->n_blocks) {
		if (s->v1_blocks)
			chunk[id % SIM_CHUNK] = s->v1_blocks[id];
		else if ((r = sim_chunk_load(s, id / SIM_CHUNK, chunk, NULL, 0)) < 0)
			return r;
	}
	r = check_exists(s, &chunk[id % SIM_CHUNK], attr, id);
	return r < 0 ? r : perr;
}

/* The backend's settle (backend.h): a transaction that only repairs. */
static int sim_settle(struct hp_backend *hb)
{
	const struct sim_fs *fs = ((struct sim_backend *)hb)->fs;
	_cleanup_close_ int lockfd = sim_lock_open(fs);
	struct txn t;
	int r = lockfd < 0 ? lockfd : txn_begin(&t, fs, lockfd);

	if (lockfd >= 0)
		txn_end(&t);
	return r;
}

static int sim_write(struct hp_backend *hb, enum hp_attr attr, uint64_t id, const char *value, bool prompt_only)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_close_ int lockfd = -1;
	struct txn t;
	char word[24] = "";
	bool val = false;
	int type = -1, perr = 0, r;

	if (!value)
		return -EINVAL;
	/* Parse first, as the kernel does before taking its lock. */
	switch (attr) {
	case HP_ATTR_CONFIG:
	case HP_ATTR_MEMMAP:
	case HP_ATTR_ONLINE:
		perr = sim_parse_kbool(value, &val); /* K1, C4, C12, W3 */
		break;
	case HP_ATTR_STATE:
		perr = sim_parse_state_word(value, &type); /* W1 */
		break;
	case HP_ATTR_AUTO_ONLINE:
		for (size_t i = 0; mem_auto_online_words[i]; i++)
			if (sim_sysfs_streq(value, mem_auto_online_words[i]))
				snprintf(word, sizeof(word), "%s", mem_auto_online_words[i]);
		perr = word[0] ? 0 : -EINVAL; /* A2 */
		break;
	default:
		return -EINVAL;
	}
	if (perr < 0)
		return refuse_value(sb, attr, id, perr);
	/* opened per write: a lock inherited across fork() would be shared */
	lockfd = sim_lock_open(sb->fs);
	if (lockfd < 0)
		return lockfd;
	r = txn_begin(&t, sb->fs, lockfd);
	t.writer_killed = sb->writer_killed;
	t.prompt_only = prompt_only;
	if (r == 0)
		r = apply(&t, attr, id, val, type, word);
	txn_end(&t);
	return r < 0 ? r : 0;
}

static int sim_write_attr(struct hp_backend *hb, enum hp_attr attr, uint64_t id, const char *value)
{
	return sim_write(hb, attr, id, value, false);
}

/* The backend's write_prompt (backend.h): an offline migrates only for the
 * latency the sim's settings give it (W6); without one it is over at once
 * and needs no writer that can be killed.  Decided under the lock, from the
 * settings the write itself uses. */
static int sim_write_prompt(struct hp_backend *hb, enum hp_attr attr, uint64_t id, const char *value)
{
	return sim_write(hb, attr, id, value, true);
}

/* ---- reading ------------------------------------------------------------------ */

/*
 * A writer that dies while offlining leaves going-offline behind; the
 * kernel would have ended that offline (the writer got a signal, W6) and the
 * block would be online again.  Readers see it so once no writer holds the
 * lock; the next writer repairs the records.
 */
static void settle_dead_offline(const struct sim_fs *fs, struct sim_block *b, size_t n)
{
	bool any = false, dead;

	for (size_t i = 0; i < n && !any; i++)
		any = b[i].state == MEM_STATE_GOING_OFFLINE;
	if (!any)
		return;
	dead = !sim_writer_active(fs);
	for (size_t i = 0; dead && i < n; i++)
		if (b[i].state == MEM_STATE_GOING_OFFLINE)
			b[i].state = MEM_STATE_ONLINE;
}

static void fill_block(const struct sim_settings *s, const struct sim_spans *sp, uint64_t id,
		       const struct sim_block *b, struct mem_block *out)
{
	memset(out, 0, sizeof(*out));
	out->id = id;
	out->in_firmware = s->has_firmware;
	out->configured = b->configured;
	out->memmap_on_memory = s->has_firmware ? b->memmap : -1;
	out->state = b->state;
	out->removable = b->configured ? 1 : -1;
	out->node = b->configured ? 0 : -1;
	if (b->configured) {
		char zones[MEM_ZONES_TEXT_MAX];

		sim_valid_zones(s, sp, id, b, zones, sizeof(zones));
		out->zones = mem_zones_parse(zones);
	}
}

void sim_block_to_mem(const struct sim_fs *fs, const struct sim_settings *s, const struct sim_spans *sp,
		      uint64_t id, struct sim_block *b, struct mem_block *out)
{
	settle_dead_offline(fs, b, 1);
	fill_block(s, sp, id, b, out);
}

static int sim_discover(struct hp_backend *hb, struct mem_table **out)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_settings_ struct sim_settings *s = NULL;
	_cleanup_mem_table_ struct mem_table *t = NULL;
	_cleanup_free_ struct sim_block *all = NULL;
	struct sim_summary sum;
	int r;

	r = sim_settings_load(sb->fs, &s, NULL, 0);
	if (r == 0)
		r = sim_records_load(s, &all, NULL, 0);
	if (r < 0)
		return r;
	settle_dead_offline(sb->fs, all, s->n_blocks);
	sim_summary_compute(all, s->n_blocks, &sum);
	t = mem_table_new(s->block_size);
	if (!t)
		return -ENOMEM;
	t->has_firmware = s->has_firmware;
	t->boot_known = true; /* C2: the sim's boot memory is its first boot_blocks */
	t->boot_end = s->boot_blocks;
	snprintf(t->auto_online, sizeof(t->auto_online), "%s", s->auto_online);
	snprintf(t->memmap_param, sizeof(t->memmap_param), "%s", s->memmap_supported ? "Y" : "N");
	for (uint64_t i = 0; i < s->n_blocks; i++) {
		struct mem_block *b = mem_table_add(t, i);

		if (!b)
			return -ENOMEM;
		fill_block(s, &sum.sp, i, &all[i], b);
	}
	*out = TAKE_PTR(t);
	return 0;
}

static int sim_read_block(struct hp_backend *hb, uint64_t id, struct mem_block *out)
{
	struct sim_backend *sb = (struct sim_backend *)hb;

	return sim_reader_read(&sb->rd, sb->fs, id, out);
}

static int sim_read_auto_online(struct hp_backend *hb, char *buf, size_t len)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	_cleanup_settings_ struct sim_settings *s = NULL;
	int r;

	r = sim_settings_load(sb->fs, &s, NULL, 0);
	if (r < 0)
		return r;
	if (snprintf(buf, len, "%s", s->auto_online) >= (int)len)
		return -ENOBUFS;
	return 0;
}

static int sim_watch_open_op(struct hp_backend *hb)
{
	struct sim_backend *sb = (struct sim_backend *)hb;
	int r;

	if (!sb->watch) {
		r = sim_watch_open(sb->fs, sb->state_path, &sb->watch);
		if (r < 0)
			return r;
	}
	return sim_watch_fd(sb->watch);
}

static int sim_watch_read_op(struct hp_backend *hb, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	struct sim_backend *sb = (struct sim_backend *)hb;

	if (!sb->watch)
		return -EBADF;
	return sim_watch_read(sb->watch, ids, max, n, overflow);
}

static int sim_watch_row_op(struct hp_backend *hb, uint64_t id, struct mem_block *out)
{
	struct sim_backend *sb = (struct sim_backend *)hb;

	return sb->watch ? sim_watch_row(sb->watch, id, out) : -ENODATA;
}

static void sim_close(struct hp_backend *hb)
{
	struct sim_backend *sb = (struct sim_backend *)hb;

	sim_watch_free(sb->watch);
	sim_reader_fini(&sb->rd);
	sim_fs_free(sb->fs);
	free(sb->base.root);
	free(sb->state_path);
	free(sb);
}

static const struct hp_backend_ops sim_ops = {
	.name = "sim",
	.discover = sim_discover,
	.read_block = sim_read_block,
	.write_attr = sim_write_attr,
	.write_prompt = sim_write_prompt,
	.settle = sim_settle,
	.read_auto_online = sim_read_auto_online,
	.watch_open = sim_watch_open_op,
	.watch_read = sim_watch_read_op,
	.watch_row = sim_watch_row_op,
	.close = sim_close,
};

/* Whether the tree has been rendered (a deleted or copied one has not). */
static bool tree_rendered(const struct sim_fs *fs)
{
	_cleanup_close_ int fd = sim_openat(fs->tree, "sys/devices/system/memory/block_size_bytes", O_PATH, 0);

	return fd >= 0;
}

int hp_sim_open(const char *state_path, struct hp_backend **out)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_settings_ struct sim_settings *s = NULL;
	_cleanup_free_ struct sim_block *all = NULL;
	_cleanup_close_ int lockfd = -1;
	struct sim_backend *sb;
	struct sim_marker m = { 0 };
	int r;

	r = sim_fs_open(state_path, NULL, true, &fs, NULL, 0);
	if (r == 0)
		r = sim_settings_load(fs, &s, NULL, 0);
	if (r == 0 && !s->v1_blocks) /* every record sound, as a discover would need */
		r = sim_records_load(s, &all, NULL, 0);
	if (r < 0)
		return r;
	lockfd = sim_lock_open(fs);
	if (lockfd < 0)
		return lockfd;
	/* A format 1 file is converted, a killed writer's leftovers repaired,
	 * a missing tree (deleted, or a copied state) rebuilt. */
	if (!s->v1_blocks)
		(void)sim_marker_read(lockfd, &m);
	if (s->v1_blocks || m.dirty || !tree_rendered(fs)) {
		struct txn t;

		r = txn_begin(&t, fs, lockfd);
		if (r == 0 && !tree_rendered(fs)) {
			free(all);
			all = NULL;
			r = sim_records_load(t.s, &all, NULL, 0);
			if (r == 0)
				r = sim_tree_render_all(t.s, all, &t.sum);
		}
		txn_end(&t);
		if (r < 0)
			return r;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	sim_reader_init(&sb->rd);
	sb->base.ops = &sim_ops;
	sb->base.root = strdup(fs->tree_path);
	sb->state_path = strdup(state_path);
	sb->fs = TAKE_PTR(fs);
	if (!sb->state_path || !sb->base.root) {
		sim_close(&sb->base);
		return -ENOMEM;
	}
	*out = &sb->base;
	return 0;
}

/* ---- public helpers ----------------------------------------------------------- */

void sim_params_default(struct sim_params *p)
{
	memset(p, 0, sizeof(*p));
	p->online_bytes = UINT64_C(2) << 30;
	p->standby_bytes = UINT64_C(2) << 30;
	p->block_size = UINT64_C(128) << 20;
	p->memmap_supported = true;
	p->has_firmware = true;
	p->auto_online = "offline";
}

int sim_init(const char *state_path, const struct sim_params *p)
{
	_cleanup_settings_ struct sim_settings *s = NULL;
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_free_ char *deftree = NULL;
	_cleanup_free_ struct sim_block *all = NULL;
	_cleanup_close_ int lockfd = -1;
	const char *ao = p->auto_online ? p->auto_online : "offline";
	uint64_t bs = p->block_size, n;
	struct txn t;
	int r;

	if (!sim_valid_block_size(bs) || p->online_bytes == 0 || p->online_bytes % bs || p->standby_bytes % bs ||
	    p->online_bytes > UINT64_MAX - p->standby_bytes || !sim_is_auto_online_word(ao))
		return -EINVAL;
	n = (p->online_bytes + p->standby_bytes) / bs;
	if (n > SIM_MAX_BLOCKS)
		return -E2BIG;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dirfd = -1;
	s->block_size = bs;
	s->n_blocks = n;
	s->boot_blocks = p->online_bytes / bs;
	s->used_bytes = p->used_bytes;
	s->memmap_supported = p->memmap_supported;
	s->has_firmware = p->has_firmware;
	s->refuse_memmap_eopnotsupp = p->refuse_memmap_eopnotsupp;
	snprintf(s->auto_online, sizeof(s->auto_online), "%s", ao);
	if (!p->tree && asprintf(&deftree, "%s.tree", state_path) < 0)
		return -ENOMEM;
	r = sim_fs_open(state_path, p->tree ? p->tree : deftree, true, &fs, NULL, 0);
	if (r < 0)
		return r;
	s->fs = fs;
	s->tree = strdup(fs->tree_path);
	if (!s->tree)
		return -ENOMEM;
	all = calloc(n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		struct sim_block *b = &all[i];
		if (i < s->boot_blocks) { /* C2: boot memory */
			b->configured = true;
			b->memmap = false;
			b->state = MEM_STATE_ONLINE;
			b->zone = sim_kernel_zone(s, i);
		} else {                  /* C2: standby; C0: no firmware, the kernel has it */
			b->configured = !p->has_firmware;
			b->memmap = p->memmap_supported && p->has_firmware;
			b->state = MEM_STATE_OFFLINE;
		}
	}
	lockfd = sim_lock_open(fs);
	if (lockfd < 0)
		return lockfd;
	/* another user's sim: readable, not ours to replace */
	if ((fcntl(lockfd, F_GETFL) & O_ACCMODE) == O_RDONLY)
		return -EACCES;
	memset(&t, 0, sizeof(t));
	t.fs = fs;
	r = sim_lock(lockfd);
	if (r < 0)
		return r;
	t.lockfd = lockfd;
	r = create_state(&t, s, all);
	txn_end(&t);
	return r;
}

/* The writers' lock of STATE_PATH's sim, with its folders opened once. */
static int open_for_write(const char *state_path, struct sim_fs **fs)
{
	int r = sim_fs_open(state_path, NULL, true, fs, NULL, 0);

	return r < 0 ? r : sim_lock_open(*fs);
}

int sim_set_faults(const char *state_path, const struct sim_faults *f)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_close_ int lockfd = open_for_write(state_path, &fs);
	struct txn t;
	int r;

	if (lockfd < 0)
		return lockfd;
	r = txn_begin(&t, fs, lockfd);
	if (r == 0)
		r = sim_id_list_copy(&t.s->configure_eio, f->configure_eio, f->n_configure_eio);
	if (r == 0)
		r = sim_id_list_copy(&t.s->offline_ebusy, f->offline_ebusy, f->n_offline_ebusy);
	if (r == 0)
		r = sim_id_list_copy(&t.s->online_enomem, f->online_enomem, f->n_online_enomem);
	if (r == 0) {
		t.s->latency_ms = f->latency_ms;
		r = sim_settings_save(t.s);
	}
	txn_end(&t);
	return r;
}

int sim_set_used(const char *state_path, uint64_t used_bytes)
{
	_cleanup_(sim_fs_freep) struct sim_fs *fs = NULL;
	_cleanup_close_ int lockfd = open_for_write(state_path, &fs);
	struct txn t;
	int r;

	if (lockfd < 0)
		return lockfd;
	r = txn_begin(&t, fs, lockfd);
	if (r == 0) {
		t.s->used_bytes = used_bytes;
		r = txn_mark(&t, &(struct sim_marker){ .dirty = true, .sp = t.sum.sp });
	}
	if (r == 0)
		r = sim_settings_save(t.s);
	if (r == 0)
		r = sim_tree_meminfo(t.s, &t.sum);
	if (r == 0)
		r = txn_mark(&t, &(struct sim_marker){ 0 });
	txn_end(&t);
	return r;
}
