/* SPDX-License-Identifier: MIT */
/*
 * Benchmark: discovery and live-table reads at a large machine size.
 * Prints figures; asserts nothing.
 *
 *   build/bench/livetable [BLOCKS]   (default 65536 blocks of 128M, 2G online)
 *
 * The sim goes to BENCH_DIR (default /dev/shm when writable, else /tmp).
 * Figures: sim discover, sysfs discover of the sim's tree (the reference: a
 * real /sys walk of that size), livetable_open, and, while another thread
 * brings blocks up through the sim and keeps the table current from the
 * watch (a grant running), the time of livetable_find, of a full in-place
 * read under the lock (what a status or metrics answer needs) and of
 * livetable_snapshot.
 */
#include "hotplug/backend.h"
#include "hotplug/livetable.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_lat(const char *what, double *lat, size_t n)
{
	qsort(lat, n, sizeof(*lat), cmp_double);
	printf("  %-44s median %8.3f ms, p99 %8.3f ms, max %8.3f ms (%zu)\n", what, lat[n / 2] / 1e3,
	       lat[n * 99 / 100] / 1e3, lat[n - 1] / 1e3, n);
}

struct grant {
	struct hp_backend *sim;
	struct livetable *lt;
	uint64_t first, n;
	volatile bool done;
	unsigned long changes;
};

/* A grant: configure + online, block after block, through the sim; the
 * table follows from the watch in the same thread, as the engine's loop. */
static void *grant_main(void *arg)
{
	struct grant *g = arg;

	for (uint64_t id = g->first; id < g->first + g->n; id++) {
		struct pollfd p = { .fd = livetable_fd(g->lt), .events = POLLIN };
		int r;

		if (block_configure(g->sim, id) < 0 || block_online(g->sim, id, ONLINE_MOVABLE) < 0)
			break;
		while (poll(&p, 1, 0) > 0 && (r = livetable_update(g->lt, NULL, NULL)) > 0)
			g->changes += (unsigned long)r;
	}
	g->done = true;
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t blocks = argc > 1 ? strtoull(argv[1], NULL, 10) : 65536;
	const char *base = getenv("BENCH_DIR") ? getenv("BENCH_DIR") : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	char dir[PATH_MAX], state[PATH_MAX + 16], tree[PATH_MAX + 32];
	struct hp_backend *sim = NULL, *sysfs = NULL;
	struct livetable *lt = NULL;
	struct mem_table *t = NULL;
	struct sim_params p;
	struct grant g = { 0 };
	pthread_t th;
	double t0, lat[8];
	size_t n;
	int r;

	snprintf(dir, sizeof(dir), "%s/memgrant-bench-lt.XXXXXX", base);
	if (blocks < 32 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: livetable [BLOCKS >= 32]; or mkdtemp %s failed\n", dir);
		return 1;
	}
	snprintf(state, sizeof(state), "%s/sim.json", dir);
	snprintf(tree, sizeof(tree), "%s/sim.json.tree", dir);
	sim_params_default(&p);
	p.online_bytes = 2 * GiB;
	p.standby_bytes = (blocks - 16) * 128 * MiB;
	printf("live table, %" PRIu64 " blocks of 128M (sim in %s)\n", blocks, dir);
	t0 = now_us();
	r = sim_init(state, &p);
	if (r == 0)
		r = hp_sim_open(state, &sim);
	if (r == 0)
		r = hp_sysfs_open(tree, &sysfs);
	if (r < 0) {
		fprintf(stderr, "sim: %s\n", strerror(-r));
		return 1;
	}
	printf("  sim init                                     %8.0f ms\n", (now_us() - t0) / 1e3);

	for (n = 0; n < 5; n++) {
		t0 = now_us();
		if (hp_discover(sim, &t) < 0)
			return 1;
		lat[n] = now_us() - t0;
		mem_table_free(t);
	}
	print_lat("sim discover", lat, n);
	for (n = 0; n < 3; n++) {
		t0 = now_us();
		if (hp_discover(sysfs, &t) < 0)
			return 1;
		lat[n] = now_us() - t0;
		mem_table_free(t);
	}
	print_lat("sysfs discover of the same tree (reference)", lat, n);
	t0 = now_us();
	r = livetable_open(sim, &lt);
	if (r < 0) {
		fprintf(stderr, "livetable_open: %s\n", strerror(-r));
		return 1;
	}
	printf("  livetable_open (watch + one discover)        %8.3f ms\n", (now_us() - t0) / 1e3);

	g.sim = sim;
	g.lt = lt;
	g.first = 16;
	g.n = blocks - 16 < 2000 ? blocks - 16 : 2000;
	pthread_create(&th, NULL, grant_main, &g);
	/* reads while the grant runs, interleaved */
	{
		static double find[20000], scan[2000], snap[400];
		size_t nf = 0, ns = 0, nc = 0;

		for (size_t i = 0; !g.done && nf < ARRAY_SIZE(find); i++) {
			struct mem_block m;

			t0 = now_us();
			(void)livetable_find(lt, (uint64_t)i * 7919 % blocks, &m);
			find[nf++] = now_us() - t0;
			if (i % 10 == 0 && ns < ARRAY_SIZE(scan)) {
				const struct mem_table *lt_t;
				uint64_t online = 0;

				t0 = now_us();
				livetable_lock(lt);
				lt_t = livetable_table(lt);
				for (size_t k = 0; k < lt_t->n; k++)
					if (lt_t->blocks[k].state == MEM_STATE_ONLINE)
						online += lt_t->block_size;
				livetable_unlock(lt);
				scan[ns++] = now_us() - t0;
				if (online == 0)
					return 1;
			}
			if (i % 50 == 0 && nc < ARRAY_SIZE(snap)) {
				t0 = now_us();
				if (livetable_snapshot(lt, &t) < 0)
					return 1;
				snap[nc++] = now_us() - t0;
				mem_table_free(t);
			}
			usleep(300);
		}
		if (nf)
			print_lat("livetable_find during a grant", find, nf);
		if (ns)
			print_lat("status-style scan under the lock, in a grant", scan, ns);
		if (nc)
			print_lat("livetable_snapshot (copy) during a grant", snap, nc);
	}
	pthread_join(th, NULL);
	printf("  the grant thread saw %lu block changes through the watch\n", g.changes);
	livetable_free(lt);
	hp_backend_close(sysfs);
	hp_backend_close(sim);
	rm_rf(dir);
	return 0;
}
