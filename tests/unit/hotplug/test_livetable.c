/* SPDX-License-Identifier: MIT */
/*
 * The live block table over the sim and over a sysfs-shaped tree in a
 * temporary directory: changes made by other processes are seen through
 * the backend's watch (no polling), only the changed blocks are read again,
 * and a lost-event overflow leads to a re-scan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "hotplug/backend.h"
#include "hotplug/livetable.h"
#include "hotplug/policy.h"
#include "hotplug/sim/sim.h"
#include "hotplug/sysfs/sysfs_watch.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>

struct fx {
	char dir[64];
	char state[128];
	char tree[128];
	struct hp_backend *sim;  /* the machine */
	struct hp_backend *b;    /* what the table reads: the sim or sysfs on its tree */
	struct livetable *lt;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct sim_params p;

	if (!f)
		return -1;
	/* tmpfs when there is one: the overflow tests rename files 16,000 times */
	snprintf(f->dir, sizeof(f->dir), "%s/memgrant-lt.XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->state, sizeof(f->state), "%s/sim.json", f->dir);
	snprintf(f->tree, sizeof(f->tree), "%s/sim.json.tree", f->dir);
	sim_params_default(&p);
	if (sim_init(f->state, &p) < 0 || hp_sim_open(f->state, &f->sim) < 0)
		return -1;
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	livetable_free(f->lt);
	if (f->b != f->sim)
		hp_backend_close(f->b);
	hp_backend_close(f->sim);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static void open_over_sim(struct fx *f)
{
	f->b = f->sim;
	assert_int_equal(livetable_open(f->b, &f->lt), 0);
}

static void open_over_tree(struct fx *f)
{
	assert_int_equal(hp_sysfs_open(f->tree, &f->b), 0);
	assert_int_equal(livetable_open(f->b, &f->lt), 0);
}

/* What the change callback saw. */
struct seen {
	size_t n;
	uint64_t ids[64];
	struct mem_block old[64], nw[64];
	bool had_old[64], has_new[64];
};

static void record(const struct lt_change *c, void *data)
{
	struct seen *s = data;

	if (s->n == ARRAY_SIZE(s->ids))
		return;
	s->ids[s->n] = c->nw ? c->nw->id : c->old->id;
	s->had_old[s->n] = c->old != NULL;
	s->has_new[s->n] = c->nw != NULL;
	if (c->old)
		s->old[s->n] = *c->old;
	if (c->nw)
		s->nw[s->n] = *c->nw;
	s->n++;
}

/* Waits (poll, up to 5 s) until BLOCK reads STATE in the table. */
static void wait_for(struct fx *f, uint64_t id, enum mem_state state, bool configured, struct seen *s)
{
	struct mem_block m;

	for (int i = 0; i < 100; i++) {
		struct pollfd p = { .fd = livetable_fd(f->lt), .events = POLLIN };

		if (livetable_find(f->lt, id, &m) == 0 && m.state == state && m.configured == configured)
			return;
		if (poll(&p, 1, 50) < 0)
			fail_msg("poll: %s", strerror(errno));
		assert_true(livetable_update(f->lt, record, s) >= 0);
	}
	fail_msg("block %" PRIu64 " never became %s (configured %d)", id, mem_state_name(state), configured);
}

/* Another process changes the machine through its own sim backend. */
static void other_process(struct fx *f, void (*act)(struct hp_backend *))
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct hp_backend *b = NULL;

		if (hp_sim_open(f->state, &b) < 0)
			_exit(2);
		act(b);
		hp_backend_close(b);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void bring_up_16(struct hp_backend *b)
{
	if (block_configure(b, 16) < 0 || block_online(b, 16, ONLINE_MOVABLE) < 0)
		_exit(3);
}

static void take_down_5(struct hp_backend *b)
{
	if (block_offline(b, 5) < 0 || block_deconfigure(b, 5) < 0)
		_exit(3);
}

static void expect_change(const struct seen *s, uint64_t id, enum mem_state from, enum mem_state to)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ids[i] == id && s->had_old[i] && s->has_new[i] && s->old[i].state == from &&
		    s->nw[i].state == to)
			return;
	fail_msg("no change of block %" PRIu64 " from %s to %s reported", id, mem_state_name(from),
		 mem_state_name(to));
}

/* The table's counts are what a walk of a fresh snapshot gives. */
static void expect_counts_match(struct fx *f, uint64_t mark)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct livetable_counts c, w = { 0 };

	assert_int_equal(livetable_snapshot(f->lt, &t), 0);
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];
		bool on = b->configured && b->state == MEM_STATE_ONLINE;
		w.online += on;
		w.online_from_mark += on && b->id >= mark;
		w.in_flight += b->configured && !on;
		w.standby += mem_block_is_standby(b);
	}
	policy_zone_bytes(t, &w.online_movable, &w.online_kernel);
	livetable_counts(f->lt, &c);
	assert_int_equal(c.blocks, t->n);
	assert_int_equal(c.block_size, t->block_size);
	assert_int_equal(c.online, w.online);
	assert_int_equal(c.online_from_mark, w.online_from_mark);
	assert_int_equal(c.in_flight, w.in_flight);
	assert_int_equal(c.standby, w.standby);
	assert_int_equal(c.online_movable * c.block_size, w.online_movable);
	assert_int_equal(c.online_kernel * c.block_size, w.online_kernel);
}

static void test_sim_outside_changes_seen(void **state)
{
	struct fx *f = *state;
	struct livetable_stats st0, st1;
	struct seen s = { 0 };
	struct mem_block m;

	open_over_sim(f);
	assert_int_equal(livetable_find(f->lt, 16, &m), 0);
	assert_false(m.configured);
	livetable_set_mark(f->lt, 4);
	expect_counts_match(f, 4);
	livetable_stats(f->lt, &st0);
	other_process(f, bring_up_16);
	wait_for(f, 16, MEM_STATE_ONLINE, true, &s);
	expect_counts_match(f, 4);
	expect_change(&s, 16, MEM_STATE_OFFLINE, MEM_STATE_ONLINE);
	assert_int_equal(livetable_find(f->lt, 16, &m), 0);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable");
	livetable_stats(f->lt, &st1);
	assert_int_equal(st1.rescans, st0.rescans); /* no discovery, only re-reads */
	assert_true(st1.rereads >= 1 && st1.rereads <= 4);
	/* boot memory taken down outside: online -> offline, then deconfigured */
	s.n = 0;
	other_process(f, take_down_5);
	wait_for(f, 5, MEM_STATE_OFFLINE, false, &s);
	expect_change(&s, 5, MEM_STATE_ONLINE, MEM_STATE_OFFLINE);
	/* a write through the table's own backend is seen the same way */
	s.n = 0;
	assert_int_equal(block_offline(f->sim, 16), 0);
	wait_for(f, 16, MEM_STATE_OFFLINE, true, &s);
	expect_change(&s, 16, MEM_STATE_ONLINE, MEM_STATE_OFFLINE);
	expect_counts_match(f, 4); /* 16 in flight (configured, offline), 5 standby */
	/* nothing pending: an update reports nothing */
	assert_int_equal(livetable_update(f->lt, record, &s), 0);
}

/* The zone spans move: offline blocks' valid_zones (A9) follow in the table. */
static void test_sim_neighbour_zones_follow(void **state)
{
	struct fx *f = *state;
	struct seen s = { 0 };
	struct mem_block m, direct;

	assert_int_equal(block_configure(f->sim, 17), 0);
	assert_int_equal(block_configure(f->sim, 18), 0);
	assert_int_equal(block_configure(f->sim, 19), 0);
	open_over_sim(f);
	assert_int_equal(block_online(f->sim, 19, ONLINE_MOVABLE), 0);
	assert_int_equal(block_online(f->sim, 17, ONLINE_MOVABLE), 0);
	wait_for(f, 17, MEM_STATE_ONLINE, true, &s);
	for (int i = 0; i < 10; i++) /* the rest of the events */
		assert_true(livetable_update(f->lt, record, &s) >= 0);
	/* 18 lies in the Movable span [17, 20) now */
	assert_int_equal(livetable_find(f->lt, 18, &m), 0);
	assert_int_equal(hp_read_block(f->sim, 18, &direct), 0);
	assert_int_equal(m.zones, direct.zones);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable Normal");
	/* and back: 19, then 17 offline, the span shrinks from each edge to
	 * nothing; 18's zones are what a read of the sim gives each time */
	assert_int_equal(block_offline(f->sim, 19), 0);
	wait_for(f, 19, MEM_STATE_OFFLINE, true, &s);
	for (int i = 0; i < 10; i++)
		assert_true(livetable_update(f->lt, record, &s) >= 0);
	assert_int_equal(livetable_find(f->lt, 18, &m), 0);
	assert_int_equal(hp_read_block(f->sim, 18, &direct), 0);
	assert_int_equal(m.zones, direct.zones);
	assert_int_equal(block_offline(f->sim, 17), 0);
	wait_for(f, 17, MEM_STATE_OFFLINE, true, &s);
	for (int i = 0; i < 10; i++)
		assert_true(livetable_update(f->lt, record, &s) >= 0);
	for (uint64_t id = 17; id <= 19; id++) {
		assert_int_equal(livetable_find(f->lt, id, &m), 0);
		assert_int_equal(hp_read_block(f->sim, id, &direct), 0);
		assert_int_equal(m.zones, direct.zones);
	}
}

/* A flood of events that overflows the inotify queue: one re-scan. */
static void test_sim_overflow_rescans(void **state)
{
	struct fx *f = *state;
	struct livetable_stats st0, st1;
	struct seen s = { 0 };
	char a[PATH_MAX + 16], b[PATH_MAX + 16], dir[PATH_MAX], *text = NULL, *p;
	int max = 16384, fd, r;
	struct mem_block m;

	open_over_sim(f);
	livetable_stats(f->lt, &st0);
	fd = open("/proc/sys/fs/inotify/max_queued_events", O_RDONLY);
	if (fd >= 0) {
		char buf[32] = "";
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			max = atoi(buf);
		close(fd);
	}
	if (max > 200000)
		skip();
	/* the state directory, from the descriptor */
	assert_int_equal(file_read_all(f->state, 1 << 20, &text, NULL), 0);
	p = strstr(text, "\"state_dir\":\"");
	assert_non_null(p);
	p += strlen("\"state_dir\":\"");
	*strchr(p, '"') = '\0';
	snprintf(dir, sizeof(dir), "%s", p);
	free(text);
	snprintf(a, sizeof(a), "%s/flood.a", dir);
	snprintf(b, sizeof(b), "%s/flood.b", dir);
	assert_int_equal(file_write_atomic(a, "", 0, 0644), 0);
	/* a change the flood will hide, then the flood */
	assert_int_equal(block_configure(f->sim, 20), 0);
	for (int i = 0; i < max + 64; i++) { /* each one IN_MOVED_TO */
		r = rename(i % 2 ? b : a, i % 2 ? a : b);
		assert_int_equal(r, 0);
	}
	assert_true(livetable_update(f->lt, record, &s) >= 1);
	livetable_stats(f->lt, &st1);
	assert_int_equal(st1.rescans, st0.rescans + 1);
	assert_int_equal(livetable_find(f->lt, 20, &m), 0);
	assert_true(m.configured);
	expect_change(&s, 20, MEM_STATE_OFFLINE, MEM_STATE_OFFLINE);
}

/* Writes VALUE into REL under the tree, as `echo VALUE > REL` would. */
static void echo_into(struct fx *f, const char *rel, const char *value)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", f->tree, rel);
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, value, strlen(value)), (ssize_t)strlen(value));
	close(fd);
}

static void test_tree_outside_changes_seen(void **state)
{
	struct fx *f = *state;
	struct seen s = { 0 };
	struct mem_block m;

	open_over_tree(f);
	/* the sim renders its tree: another process's writes show up */
	other_process(f, bring_up_16);
	wait_for(f, 16, MEM_STATE_ONLINE, true, &s);
	assert_int_equal(livetable_find(f->lt, 16, &m), 0);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable");
	/* a plain write into a tree file */
	s.n = 0;
	echo_into(f, "sys/devices/system/memory/memory7/state", "offline\n");
	wait_for(f, 7, MEM_STATE_OFFLINE, true, &s);
	expect_change(&s, 7, MEM_STATE_ONLINE, MEM_STATE_OFFLINE);
	/* a block directory that goes away (config=0 by the sim) */
	s.n = 0;
	other_process(f, take_down_5);
	wait_for(f, 5, MEM_STATE_OFFLINE, false, &s);
}

/* Configured blocks of the table, under livetable_lock. */
static size_t configured_of_locked(struct fx *f)
{
	size_t n = 0;

	for (size_t i = 0; i < livetable_table(f->lt)->n; i++)
		n += livetable_table(f->lt)->blocks[i].configured;
	return n;
}

static size_t configured_of(struct fx *f)
{
	size_t n;

	livetable_lock(f->lt);
	n = configured_of_locked(f);
	livetable_unlock(f->lt);
	return n;
}

/* Rows of the table whose memmap_on_memory is not read. */
static size_t unread_of(struct fx *f)
{
	size_t n = 0;

	livetable_lock(f->lt);
	for (size_t i = 0; i < livetable_table(f->lt)->n; i++)
		n += livetable_table(f->lt)->blocks[i].memmap_on_memory == MEM_MEMMAP_UNREAD;
	livetable_unlock(f->lt);
	return n;
}

/* The table discovers lazily: standby rows start with memmap_on_memory
 * unread, a block configured since is read whole, livetable_read_memmap()
 * reads the rest in batches without reporting a change, and a re-scan
 * keeps what was read. */
static void test_tree_lazy_memmap(void **state)
{
	struct fx *f = *state;
	struct seen s = { 0 };
	struct livetable_counts c;
	struct mem_block m;
	uint64_t from = 0;
	size_t standby, turns = 0;
	int r;

	open_over_tree(f);
	livetable_lock(f->lt);
	standby = livetable_table(f->lt)->n - configured_of_locked(f);
	livetable_unlock(f->lt);
	assert_true(standby > 1);
	assert_int_equal(unread_of(f), standby);
	livetable_counts(f->lt, &c);
	assert_int_equal(c.memmap_unread, standby);
	other_process(f, bring_up_16);
	wait_for(f, 16, MEM_STATE_ONLINE, true, &s);
	assert_int_equal(livetable_find(f->lt, 16, &m), 0);
	assert_int_equal(m.memmap_on_memory, 1); /* C2: the sim supports it */
	assert_int_equal(unread_of(f), standby - 1);

	echo_into(f, "sys/firmware/memory/memory17/memmap_on_memory", "0\n");
	while ((r = livetable_read_memmap(f->lt, &from)) > 0 && from != UINT64_MAX)
		turns++;
	assert_true(r >= 0);
	assert_int_equal(unread_of(f), 0);
	livetable_counts(f->lt, &c);
	assert_int_equal(c.memmap_unread, 0);
	assert_int_equal(livetable_find(f->lt, 17, &m), 0);
	assert_int_equal(m.memmap_on_memory, 0);
	assert_int_equal(livetable_find(f->lt, 18, &m), 0);
	assert_int_equal(m.memmap_on_memory, 1);
	s.n = 0;
	assert_int_equal(livetable_rescan(f->lt, record, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(unread_of(f), 0);
	livetable_counts(f->lt, &c);
	assert_int_equal(c.memmap_unread, 0);
	assert_int_equal(livetable_find(f->lt, 17, &m), 0);
	assert_int_equal(m.memmap_on_memory, 0);
}

/* The inotify watches of the live table's fd (/proc/self/fdinfo). */
static size_t watches_of(int fd)
{
	char path[64], line[512];
	size_t n = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	fp = fopen(path, "re");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp))
		n += startswith(line, "inotify wd:");
	fclose(fp);
	return n;
}


/* One watch per configured block (its devices directory) and the two
 * parents, none per standby block: a tree of 262,144 standby blocks fits
 * fs.inotify.max_user_watches; blocks configured later are watched and
 * their changes seen. */
static void test_tree_one_watch_per_configured_block(void **state)
{
	struct fx *f = *state;
	struct seen s = { 0 };
	size_t blocks, conf;
	int fd;

	open_over_tree(f);
	livetable_lock(f->lt);
	blocks = livetable_table(f->lt)->n;
	livetable_unlock(f->lt);
	conf = configured_of(f);
	assert_true(conf < blocks);
	fd = hp_watch_open(f->b);
	assert_true(fd >= 0);
	assert_int_equal(watches_of(fd), conf + 2);
	/* block 5 deconfigured: its watch goes with its devices directory */
	other_process(f, take_down_5);
	wait_for(f, 5, MEM_STATE_OFFLINE, false, &s);
	assert_int_equal(watches_of(fd), conf + 1);
	/* block 16 configured and onlined: watched from then on */
	other_process(f, bring_up_16);
	wait_for(f, 16, MEM_STATE_ONLINE, true, &s);
	assert_int_equal(watches_of(fd), conf + 2);
	s.n = 0;
	echo_into(f, "sys/devices/system/memory/memory16/state", "offline\n");
	wait_for(f, 16, MEM_STATE_OFFLINE, true, &s);
	expect_change(&s, 16, MEM_STATE_ONLINE, MEM_STATE_OFFLINE);
}

static void test_tree_overflow_rescans(void **state)
{
	struct fx *f = *state;
	struct livetable_stats st0, st1;
	struct seen s = { 0 };
	struct mem_block m;
	int max = 16384, fd;

	fd = open("/proc/sys/fs/inotify/max_queued_events", O_RDONLY);
	if (fd >= 0) {
		char buf[32] = "";
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			max = atoi(buf);
		close(fd);
	}
	if (max > 200000)
		skip();
	open_over_tree(f);
	livetable_stats(f->lt, &st0);
	/* alternating files: inotify merges only identical consecutive events */
	for (int i = 0; i < max + 64; i++)
		echo_into(f, i % 2 ? "sys/devices/system/memory/memory3/online"
				   : "sys/devices/system/memory/memory4/online", "1\n");
	echo_into(f, "sys/devices/system/memory/memory9/state", "offline\n");
	assert_true(livetable_update(f->lt, record, &s) >= 1);
	livetable_stats(f->lt, &st1);
	assert_int_equal(st1.rescans, st0.rescans + 1);
	assert_int_equal(livetable_find(f->lt, 9, &m), 0);
	assert_int_equal(m.state, MEM_STATE_OFFLINE);
	expect_change(&s, 9, MEM_STATE_ONLINE, MEM_STATE_OFFLINE);
}

/* A block that cannot be read for a moment (a file with a value it does not
 * take) is read again, alone, at the next change: the machine is not
 * re-scanned, its old row is kept meanwhile, and the row follows once the
 * block reads right. */
static void test_tree_failed_read_rereads_the_block(void **state)
{
	struct fx *f = *state;
	struct livetable_stats st0, st1;
	struct seen s = { 0 };
	struct mem_block m;

	open_over_tree(f);
	livetable_stats(f->lt, &st0);
	echo_into(f, "sys/devices/system/memory/memory9/removable", "x\n"); /* the block cannot be read */
	for (int i = 0; i < 20; i++) {
		struct pollfd p = { .fd = livetable_fd(f->lt), .events = POLLIN };

		if (poll(&p, 1, 50) < 0)
			fail_msg("poll: %s", strerror(errno));
		assert_true(livetable_update(f->lt, record, &s) >= 0);
	}
	/* the old row stays while the file cannot be read */
	assert_int_equal(livetable_find(f->lt, 9, &m), 0);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	echo_into(f, "sys/devices/system/memory/memory9/removable", "1\n");
	echo_into(f, "sys/devices/system/memory/memory9/state", "offline\n");
	wait_for(f, 9, MEM_STATE_OFFLINE, true, &s);
	livetable_stats(f->lt, &st1);
	assert_int_equal(st1.rescans, st0.rescans);
}

/* Lookups, snapshots and in-place reads agree with a discovery. */
static void test_reads(void **state)
{
	struct fx *f = *state;
	struct mem_table *snap = NULL, *t = NULL;
	struct mem_block m;

	open_over_sim(f);
	assert_int_equal(hp_discover(f->sim, &t), 0);
	assert_int_equal(livetable_snapshot(f->lt, &snap), 0);
	assert_int_equal(snap->n, t->n);
	for (size_t i = 0; i < t->n; i++) {
		assert_int_equal(livetable_find(f->lt, t->blocks[i].id, &m), 0);
		assert_true(mem_block_equal(&m, &t->blocks[i]));
		assert_true(mem_block_equal(&snap->blocks[i], &t->blocks[i]));
	}
	assert_int_equal(livetable_find(f->lt, 32, &m), -ENOENT);
	assert_int_equal(livetable_find(f->lt, UINT64_MAX, &m), -ENOENT);
	livetable_lock(f->lt);
	assert_int_equal(livetable_table(f->lt)->n, 32);
	assert_int_equal(livetable_table(f->lt)->block_size, 128u << 20);
	livetable_unlock(f->lt);
	/* a snapshot is a copy: it does not follow the machine */
	assert_int_equal(block_configure(f->sim, 16), 0);
	wait_for(f, 16, MEM_STATE_OFFLINE, true, &(struct seen){ 0 });
	assert_false(mem_table_find(snap, 16)->configured);
	mem_table_free(snap);
	mem_table_free(t);
}

/* A row read outside the notifications becomes the table's, once: the
 * change is reported and counted, the same row again changes nothing. */
static void test_note(void **state)
{
	struct fx *f = *state;
	struct livetable_counts before, after;
	struct livetable_stats st0, st1;
	struct seen s = { 0 };
	struct mem_block m;

	open_over_sim(f);
	livetable_counts(f->lt, &before);
	livetable_stats(f->lt, &st0);
	assert_int_equal(livetable_find(f->lt, 16, &m), 0);
	assert_false(m.configured);
	m.configured = true;
	m.state = MEM_STATE_ONLINE;
	assert_int_equal(livetable_note(f->lt, &m, record, &s), 1);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.ids[0], 16);
	assert_true(s.had_old[0] && s.has_new[0]);
	assert_false(s.old[0].configured);
	assert_true(s.nw[0].configured);
	assert_int_equal(livetable_find(f->lt, 16, &m), 0);
	assert_true(m.configured);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	livetable_counts(f->lt, &after);
	assert_int_equal(after.online, before.online + 1);
	assert_int_equal(after.standby, before.standby - 1);
	expect_counts_match(f, 0);
	livetable_stats(f->lt, &st1);
	assert_int_equal(st1.generation, st0.generation + 1);
	/* the same row again: nothing changes, nothing is reported */
	assert_int_equal(livetable_note(f->lt, &m, record, &s), 0);
	assert_int_equal(s.n, 1);
	livetable_stats(f->lt, &st0);
	assert_int_equal(st0.generation, st1.generation);
}

/* Readers in other threads while the table follows changes. */
struct reader {
	struct livetable *lt;
	volatile bool stop;
	unsigned long reads;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	while (!rd->stop) {
		struct mem_block m;
		struct mem_table *t = NULL;

		if (livetable_find(rd->lt, rd->reads % 32, &m) < 0 || m.id != rd->reads % 32)
			abort();
		if (rd->reads % 64 == 0) {
			if (livetable_snapshot(rd->lt, &t) < 0 || t->n != 32)
				abort();
			mem_table_free(t);
		}
		rd->reads++;
	}
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	struct fx *f = *state;
	struct reader rd = { 0 };
	pthread_t th;

	open_over_sim(f);
	rd.lt = f->lt;
	assert_int_equal(pthread_create(&th, NULL, reader_main, &rd), 0);
	for (int i = 0; i < 500 && rd.reads == 0; i++) /* the reader runs */
		usleep(10000);
	for (uint64_t id = 16; id < 24; id++) {
		assert_int_equal(block_configure(f->sim, id), 0);
		wait_for(f, id, MEM_STATE_OFFLINE, true, &(struct seen){ 0 });
	}
	rd.stop = true;
	pthread_join(th, NULL);
	assert_true(rd.reads > 0);
}

/* The uevent parser keeps memory block events and nothing else. */
static void test_uevent_parse(void **state)
{
	static const char ok[] = "online@/devices/system/memory/memory42\0ACTION=online\0"
				 "DEVPATH=/devices/system/memory/memory42\0SUBSYSTEM=memory\0SEQNUM=7\0";
	static const char add[] = "add@/devices/system/memory/memory0\0ACTION=add\0"
				  "DEVPATH=/devices/system/memory/memory0\0SUBSYSTEM=memory\0";
	static const char cpu[] = "online@/devices/system/cpu/cpu1\0ACTION=online\0"
				  "DEVPATH=/devices/system/cpu/cpu1\0SUBSYSTEM=cpu\0";
	static const char bind[] = "bind@/devices/system/memory/memory3\0ACTION=bind\0"
				   "DEVPATH=/devices/system/memory/memory3\0SUBSYSTEM=memory\0";
	static const char padded[] = "add@/devices/system/memory/memory03\0ACTION=add\0"
				     "DEVPATH=/devices/system/memory/memory03\0SUBSYSTEM=memory\0";
	static const char removed[] = "remove@/devices/system/memory/memory9\0ACTION=remove\0"
				      "DEVPATH=/devices/system/memory/memory9\0SUBSYSTEM=memory\0";
	static const char unterminated[] = "x@y\0ACTION=add\0SUBSYSTEM=memory\0DEVPATH=/devices/system/memory/memory5";
	uint64_t id = 0;
	bool added = true;

	(void)state;
	assert_int_equal(hp_uevent_parse(ok, sizeof(ok) - 1, &id, &added), 1);
	assert_int_equal(id, 42);
	assert_false(added);
	assert_int_equal(hp_uevent_parse(add, sizeof(add) - 1, &id, &added), 1);
	assert_int_equal(id, 0);
	assert_true(added); /* reported later: the kernel links it to its node after the event */
	/* reported later too: on s390 `config` reads 1 until the storage is released, after the event */
	added = false;
	assert_int_equal(hp_uevent_parse(removed, sizeof(removed) - 1, &id, &added), 1);
	assert_int_equal(id, 9);
	assert_true(added);
	assert_int_equal(hp_uevent_parse(cpu, sizeof(cpu) - 1, &id, NULL), 0);
	assert_int_equal(hp_uevent_parse(bind, sizeof(bind) - 1, &id, NULL), 0);
	assert_int_equal(hp_uevent_parse(padded, sizeof(padded) - 1, &id, NULL), 0);
	assert_int_equal(hp_uevent_parse(unterminated, sizeof(unterminated) - 1, &id, NULL), 0);
	assert_int_equal(hp_uevent_parse("", 0, &id, NULL), 0);
}

/* On the real root the watch is a uevent socket: it opens unprivileged and
 * reads without blocking (nothing is written anywhere). */
static void test_uevent_socket_opens(void **state)
{
	struct hp_backend *b = NULL;
	uint64_t ids[16];
	size_t n = 99;
	bool overflow = true;
	int fd;

	(void)state;
	assert_int_equal(hp_sysfs_open("/", &b), 0);
	fd = hp_watch_open(b);
	if (fd == -EPROTONOSUPPORT || fd == -EAFNOSUPPORT || fd == -EPERM) {
		hp_backend_close(b);
		skip(); /* a sandbox without netlink */
	}
	assert_true(fd >= 0);
	assert_int_equal(hp_watch_open(b), fd); /* the same fd */
	assert_int_equal(hp_watch_read(b, ids, ARRAY_SIZE(ids), &n, &overflow), 0);
	assert_false(overflow);
	hp_backend_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
		T(test_sim_outside_changes_seen),
		T(test_sim_neighbour_zones_follow),
		T(test_sim_overflow_rescans),
		T(test_tree_outside_changes_seen),
		T(test_tree_lazy_memmap),
		T(test_tree_one_watch_per_configured_block),
		T(test_tree_overflow_rescans),
		T(test_tree_failed_read_rereads_the_block),
		T(test_reads),
		T(test_note),
		T(test_concurrent_readers),
		cmocka_unit_test(test_uevent_parse),
		cmocka_unit_test(test_uevent_socket_opens),
	};
	return cmocka_run_group_tests_name("livetable", tests, NULL, NULL);
}
