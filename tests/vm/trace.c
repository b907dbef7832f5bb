/* SPDX-License-Identifier: MIT */
/*
 * trace: a memory workload of anonymous memory (no swap, nothing to
 * reclaim) that follows a pressure trace, and a sampler of what the guest
 * saw.  Runs inside the libvirt test's guest only (tests/vm/libvirt.sh);
 * built -static so the initramfs needs nothing else for it.
 *
 *   trace LOG PHASE...      PHASE is SECONDS:MIB[:RAMP]
 *
 * Each phase lasts SECONDS and moves the memory in use to MIB MiB, linearly
 * over its first RAMP seconds (none or 0: at once, as fast as pages can be
 * faulted in), then holds it.  A worker process
 * (oom_score_adj 1000, so the OOM killer picks it) allocates in 1 MiB
 * chunks and touches every page; the parent (oom_score_adj -1000) samples
 * every 100 ms and writes LOG lines:
 *
 *   P <ms> <phase> <mib>                   a phase starts (ms since the trace started)
 *   S <ms> <MemTotal kB> <MemAvailable kB> <oom_kill> <worker MiB>
 *   K <ms> <signal>                        the worker died (SIGKILL: the OOM killer);
 *                                          a new one continues the trace
 *   E <ms>                                 the trace is over
 *
 * The worker reports how much it holds through a shared page, so the
 * sampler knows what the workload really had when the kernel killed it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ul << 20)
#define MAX_PHASES 32
#define MAX_CHUNKS 8192

struct phase {
	double seconds, ramp;
	unsigned long mib;
};

static struct phase phases[MAX_PHASES];
static int n_phases;
static double start_s[MAX_PHASES + 1];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* the phase at T seconds into the trace (n_phases when it is over) */
static int phase_at(double t)
{
	int i = 0;

	while (i < n_phases && t >= start_s[i + 1])
		i++;
	return i;
}

static unsigned long target_at(double t)
{
	int i = phase_at(t);
	unsigned long from;
	double f;

	if (i >= n_phases)
		return phases[n_phases - 1].mib;
	from = i ? phases[i - 1].mib : 0;
	if (phases[i].ramp <= 0)
		return phases[i].mib;
	f = (t - start_s[i]) / phases[i].ramp;
	if (f > 1)
		f = 1;
	return (unsigned long)((double)from + ((double)phases[i].mib - (double)from) * f);
}

static void oom_adj(const char *v)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, v, strlen(v)) < 0)
			perror("trace: oom_score_adj");
		close(fd);
	}
}

static void worker(double t0, volatile unsigned long *held)
{
	static char *chunk[MAX_CHUNKS];
	unsigned long n = 0;

	oom_adj("1000");
	for (;;) {
		double t = now_s() - t0;
		unsigned long want = target_at(t);

		if (want > MAX_CHUNKS)
			want = MAX_CHUNKS;
		while (n < want) {
			char *p = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				break;
			for (unsigned long o = 0; o < MIB; o += 4096)
				p[o] = 1;
			chunk[n++] = p;
			*held = n;
			/* a ramp allocates at its pace: look at the clock again */
			if (target_at(now_s() - t0) <= n)
				break;
		}
		while (n > want) {
			munmap(chunk[--n], MIB);
			*held = n;
		}
		if (phase_at(t) >= n_phases)
			_exit(0);
		usleep(10000);
	}
}

static int meminfo(unsigned long *total, unsigned long *avail, unsigned long *oom)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	*total = *avail = *oom = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "MemTotal: %lu", total);
		sscanf(line, "MemAvailable: %lu", avail);
	}
	fclose(f);
	f = fopen("/proc/vmstat", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "oom_kill %lu", oom);
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	volatile unsigned long *held;
	FILE *log;
	double t0, t;
	pid_t pid;
	int last_phase = -1;

	if (argc < 3) {
		fprintf(stderr, "usage: trace LOG SECONDS:MIB[:RAMP]...\n");
		return 2;
	}
	for (int i = 2; i < argc && n_phases < MAX_PHASES; i++) {
		struct phase *ph = &phases[n_phases];
		int n = sscanf(argv[i], "%lf:%lu:%lf", &ph->seconds, &ph->mib, &ph->ramp);
		if (n < 2 || ph->seconds <= 0 || ph->ramp < 0 || ph->ramp > ph->seconds) {
			fprintf(stderr, "trace: '%s' is not SECONDS:MIB[:RAMP] (RAMP at most SECONDS)\n", argv[i]);
			return 2;
		}
		n_phases++;
	}
	for (int i = 0; i < n_phases; i++)
		start_s[i + 1] = start_s[i] + phases[i].seconds;
	log = fopen(argv[1], "we");
	if (!log) {
		perror(argv[1]);
		return 1;
	}
	setvbuf(log, NULL, _IOLBF, 0);
	held = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (held == MAP_FAILED)
		return 1;
	oom_adj("-1000");
	t0 = now_s();
	pid = fork();
	if (pid == 0)
		worker(t0, held);
	for (;;) {
		unsigned long total, avail, oom;
		int status, ph;
		pid_t w;

		t = now_s() - t0;
		ph = phase_at(t);
		if (ph != last_phase && ph < n_phases) {
			fprintf(log, "P %ld %d %lu\n", (long)(start_s[ph] * 1000), ph, phases[ph].mib);
			last_phase = ph;
		}
		meminfo(&total, &avail, &oom);
		fprintf(log, "S %ld %lu %lu %lu %lu\n", (long)(t * 1000), total, avail, oom, *held);
		w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			if (WIFSIGNALED(status)) {
				fprintf(log, "K %ld %d\n", (long)(t * 1000), WTERMSIG(status));
				*held = 0;
				if (phase_at(now_s() - t0) < n_phases) {
					pid = fork();
					if (pid == 0)
						worker(t0, held);
					continue;
				}
			}
			fprintf(log, "E %ld\n", (long)((now_s() - t0) * 1000));
			return 0;
		}
		usleep(100000);
	}
}
