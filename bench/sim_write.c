/* SPDX-License-Identifier: MIT */
/*
 * Benchmark: what one sim write costs, and what discovery costs, as the
 * machine grows.  Prints figures; asserts nothing.
 *
 *   build/bench/sim_write [BLOCKS...]    (default 64 512 8192 standby blocks)
 *
 * For each size: a sim with 2G online and BLOCKS standby blocks of 128M;
 * then 4 writes per block (configure, online_movable, offline, deconfigure)
 * over up to 256 standby blocks, each timed alone; median, p99 and max per
 * write, and the sim's discover() time.  The reference is one write(2) into
 * a plain file of a sysfs-shaped tree on the same file system (what
 * `memgrantctl --sysroot` costs per block), measured in the same run.
 *   BENCH_DIR=/dev/shm build/bench/sim_write   puts the sims on tmpfs
 */
#include "hotplug/backend.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
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

static int bench_size(const char *dir, uint64_t standby)
{
	char state[PATH_MAX];
	struct sim_params p;
	struct hp_backend *b = NULL;
	struct mem_table *t = NULL;
	uint64_t steps = standby < 256 ? standby : 256;
	double *lat, t0, disc[5];
	size_t n = 0;
	int r;

	snprintf(state, sizeof(state), "%s/sim-%" PRIu64 ".json", dir, standby);
	sim_params_default(&p);
	p.online_bytes = 2 * GiB;
	p.standby_bytes = standby * 128 * MiB;
	t0 = now_us();
	r = sim_init(state, &p);
	if (r < 0) {
		fprintf(stderr, "sim_init: %s\n", strerror(-r));
		return r;
	}
	printf("%6" PRIu64 " standby blocks: init %.0f ms", standby, (now_us() - t0) / 1e3);
	r = hp_sim_open(state, &b);
	if (r < 0) {
		fprintf(stderr, "hp_sim_open: %s\n", strerror(-r));
		return r;
	}
	lat = calloc(steps * 4, sizeof(*lat));
	if (!lat)
		return -ENOMEM;
	for (uint64_t i = 0; i < steps; i++) {
		uint64_t id = 16 + i;
		int (*const ops[4])(struct hp_backend *, uint64_t) = {
			block_configure, NULL, block_offline, block_deconfigure,
		};

		for (int k = 0; k < 4; k++) {
			t0 = now_us();
			r = k == 1 ? block_online(b, id, ONLINE_MOVABLE) : ops[k](b, id);
			lat[n++] = now_us() - t0;
			if (r < 0) {
				fprintf(stderr, "write %d on block %" PRIu64 ": %s\n", k, id, strerror(-r));
				return r;
			}
		}
	}
	qsort(lat, n, sizeof(*lat), cmp_double);
	for (int k = 0; k < 5; k++) {
		t0 = now_us();
		r = hp_discover(b, &t);
		disc[k] = now_us() - t0;
		mem_table_free(t);
		t = NULL;
		if (r < 0)
			return r;
	}
	qsort(disc, 5, sizeof(*disc), cmp_double);
	printf(", one write: median %.3f ms, p99 %.3f ms, max %.3f ms (%zu writes); discover %.2f ms\n",
	       lat[n / 2] / 1e3, lat[n * 99 / 100] / 1e3, lat[n - 1] / 1e3, n, disc[2] / 1e3);
	free(lat);
	hp_backend_close(b);
	return 0;
}

/* The reference: `echo 1 > config` into a plain file, 1024 times. */
static void bench_reference(const char *dir)
{
	char path[PATH_MAX + 16];
	double lat[1024], t0;

	snprintf(path, sizeof(path), "%s/config", dir);
	if (file_write_atomic(path, "0\n", 2, 0644) < 0)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(lat); i++) {
		int fd;

		t0 = now_us();
		fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		if (fd < 0 || write(fd, i % 2 ? "1\n" : "0\n", 2) != 2)
			return;
		close(fd);
		lat[i] = now_us() - t0;
	}
	qsort(lat, ARRAY_SIZE(lat), sizeof(*lat), cmp_double);
	printf("reference, one write into a plain tree file: median %.3f ms, p99 %.3f ms\n", lat[512] / 1e3,
	       lat[1013] / 1e3);
}

int main(int argc, char **argv)
{
	static const uint64_t sizes[] = { 64, 512, 8192 };
	const char *base = getenv("BENCH_DIR") ? getenv("BENCH_DIR") : "/tmp";
	char dir[PATH_MAX];
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/memgrant-bench-sim.XXXXXX", base);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	printf("sim write (128M blocks, 2G online; state in %s)\n", dir);
	if (argc > 1) {
		for (int i = 1; i < argc && r == 0; i++)
			r = bench_size(dir, strtoull(argv[i], NULL, 10));
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(sizes) && r == 0; i++)
			r = bench_size(dir, sizes[i]);
	}
	bench_reference(dir);
	rm_rf(dir);
	return r < 0 ? 1 : 0;
}
