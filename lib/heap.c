/* SPDX-License-Identifier: MIT */
#include "lib/heap.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

void heap_trim_after_render(size_t text_bytes)
{
	if (text_bytes >= HEAP_TRIM_RENDER_MIN)
		malloc_trim(0);
}

int heap_without_thread_caches(char *const *argv)
{
	const char *had = getenv(HEAP_TUNABLES_ENV);
	_cleanup_free_ char *saved = had ? strdup(had) : NULL, *want = NULL;
	char exe[PATH_MAX];
	struct stat self, named;
	ssize_t n;
	int r;

	if (had && strstr(had, HEAP_TCACHE_TUNABLE "="))
		return 0;
	/* a secure-execution start (setuid, file capabilities, an LSM's
	 * transition): glibc drops the tunable from the environment it
	 * passes on, so this would run the program again and again */
	if (getauxval(AT_SECURE))
		return -EPERM;
	if (had && !saved)
		return -ENOMEM;
	/* the binary's path, not /proc/self/exe itself: under an emulator
	 * (qemu-user) that link is the emulator's */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = '\0';
	/* only the very file that runs: not a binary put in its place since
	 * (an upgrade), nor what an emulator (qemu-user, valgrind) says runs */
	if (stat("/proc/self/exe", &self) < 0 || stat(exe, &named) < 0)
		return -errno;
	if (self.st_dev != named.st_dev || self.st_ino != named.st_ino)
		return -ESTALE;
	if (asprintf(&want, "%s%s" HEAP_TCACHE_TUNABLE "=0", saved ?: "", saved && *saved ? ":" : "") < 0) {
		want = NULL;
		return -ENOMEM;
	}
	if (setenv(HEAP_TUNABLES_ENV, want, 1) < 0)
		return -errno;
	execv(exe, argv);
	r = -errno;
	if (saved)
		setenv(HEAP_TUNABLES_ENV, saved, 1);
	else
		unsetenv(HEAP_TUNABLES_ENV);
	return r;
}
