/* SPDX-License-Identifier: MIT */
/*
 * The sim's share of the kernel's mechanics: how a written value is parsed
 * (K1, W1) and how a write waits (latency, W4, W6).
 */
#include "hotplug/sim/sim_impl.h"

#include "lib/util.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

/* ---- parsing of written values ------------------------------------------ */

/* K1: kstrtobool, first character decides; "on"/"off" need the second. */
int sim_parse_kbool(const char *s, bool *out)
{
	switch (s[0]) {
	case '1': case 'y': case 'Y': case 't': case 'T': case 'e': case 'E':
		*out = true;
		return 0;
	case '0': case 'n': case 'N': case 'f': case 'F': case 'd': case 'D':
		*out = false;
		return 0;
	case 'o': case 'O':
		if (s[1] == 'n' || s[1] == 'N') {
			*out = true;
			return 0;
		}
		if (s[1] == 'f' || s[1] == 'F') {
			*out = false;
			return 0;
		}
		return -EINVAL;
	default:
		return -EINVAL;
	}
}

/* sysfs_streq: equal, ignoring one trailing newline on either side. */
bool sim_sysfs_streq(const char *value, const char *word)
{
	size_t n = strlen(word);

	return strncmp(value, word, n) == 0 && (value[n] == '\0' || streq(value + n, "\n"));
}

/* W1: the words memoryN/state accepts; -1 for "offline". */
int sim_parse_state_word(const char *v, int *type)
{
	if (sim_sysfs_streq(v, "offline"))
		*type = -1;
	else if (sim_sysfs_streq(v, "online"))
		*type = ONLINE_DEFAULT;
	else if (sim_sysfs_streq(v, "online_kernel"))
		*type = ONLINE_KERNEL;
	else if (sim_sysfs_streq(v, "online_movable"))
		*type = ONLINE_MOVABLE;
	else
		return -EINVAL;
	return 0;
}

/* ---- sleeping (latency, W6) ------------------------------------------------- */

static void deadline(uint64_t ms, struct timespec *end)
{
	clock_gettime(CLOCK_MONOTONIC, end);
	end->tv_sec += (time_t)(ms / 1000);
	end->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end->tv_nsec >= 1000000000L) {
		end->tv_sec++;
		end->tv_nsec -= 1000000000L;
	}
}

/* Sleeps MS milliseconds, restarting after signals (a write the kernel
 * does not let signals interrupt). */
int sim_sleep(uint64_t ms)
{
	struct timespec end;

	if (ms == 0)
		return 0;
	deadline(ms, &end);
	for (;;) {
		int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL);
		if (r < 0) /* some interposers (sanitizers) return -1 and set errno */
			r = errno;
		if (r == 0)
			return 0;
		if (r != EINTR)
			return -r;
	}
}

/*
 * W6 as Linux does it: offlining ends only on a fatal signal
 * (docs/kernel-rules.md, "W6 and signals").  Signals are blocked from
 * before going-offline becomes visible until ppoll() unblocks them, so a
 * signal sent once a reader saw going-offline lands in the sleep: a caught
 * one runs its handler and the migration goes on; one that kills the
 * writer ends it with the process.  Synchronous fault signals stay open.
 */
void sim_block_signals(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGABRT);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

int sim_sleep_migrating(uint64_t ms, const sigset_t *open_mask, bool (*writer_killed)(void))
{
	struct timespec end, now, left;

	deadline(ms, &end);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			return 0;
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		/* a writer in another process is looked at every 20 ms too: its
		 * kill may come after the one interruption FUSE passes on */
		if (writer_killed && (left.tv_sec > 0 || left.tv_nsec > 20000000L))
			left = (struct timespec){ .tv_nsec = 20000000L };
		if (ppoll(NULL, 0, &left, open_mask) < 0 && errno != EINTR)
			return -errno;
		if (writer_killed && writer_killed())
			return -EINTR;
	}
}
