/* SPDX-License-Identifier: MIT */
/*
 * One block read of the sim (read_block), with the descriptor kept between
 * reads while its file stays the same (struct sim_reader in sim_impl.h).
 * Readers never take the writers' lock: every file is replaced by rename.
 */
#include "hotplug/sim/sim_impl.h"

#include "lib/util.h"

#include <fcntl.h>

void sim_reader_init(struct sim_reader *rd)
{
	memset(rd, 0, sizeof(*rd));
	pthread_mutex_init(&rd->lock, NULL);
}

void sim_reader_fini(struct sim_reader *rd)
{
	sim_settings_free(rd->s);
	rd->s = NULL;
	pthread_mutex_destroy(&rd->lock);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The descriptor, under rd->lock: the cached one while the file is the
 * same, else loaded again. */
static int settings_locked(struct sim_reader *rd, const struct sim_fs *fs, const struct sim_settings **out)
{
	struct sim_settings *s = NULL;
	struct stat st;
	int r;

	if (fstatat(fs->top, fs->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!rd->s || !same_file(&st, &rd->st)) {
		r = sim_settings_load(fs, &s, NULL, 0);
		if (r < 0)
			return r;
		sim_settings_free(rd->s);
		rd->s = s;
		rd->st = st;
	}
	*out = rd->s;
	return 0;
}

int sim_reader_read(struct sim_reader *rd, const struct sim_fs *fs, uint64_t id, struct mem_block *out)
{
	const struct sim_settings *s = NULL;
	_cleanup_free_ struct sim_block *all = NULL;
	struct sim_block one, *b = &one;
	struct sim_summary sum = { 0 };
	int r;

	pthread_mutex_lock(&rd->lock);
	r = settings_locked(rd, fs, &s);
	if (r < 0)
		goto out;
	r = -ENOENT;
	if (id >= s->n_blocks)
		goto out;
	r = s->v1_blocks ? -EINVAL : sim_block_load(s, id, &one, NULL, 0);
	/* the spans only matter for an offline configured block's
	 * valid_zones (an online one's is its zone, A9) */
	if (r == 0 && b->configured && b->state != MEM_STATE_ONLINE && sim_summary_load(s, &sum) < 0)
		r = -EINVAL;
	if (r < 0) { /* format 1, or a summary that does not read: from all records */
		r = sim_records_load(s, &all, NULL, 0);
		if (r < 0)
			goto out;
		sim_summary_compute(all, s->n_blocks, &sum);
		b = &all[id];
	}
	sim_block_to_mem(fs, s, &sum.sp, id, b, out);
	r = 0;
out:
	pthread_mutex_unlock(&rd->lock);
	return r;
}

void sim_set_kill_check(struct hp_backend *b, bool (*writer_killed)(void))
{
	((struct sim_backend *)b)->writer_killed = writer_killed;
}
