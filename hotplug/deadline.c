/* SPDX-License-Identifier: MIT */
/*
 * A write under a deadline (contract at hp_write_with_deadline() in
 * backend.h).
 *
 * Linux ends an offline's migration loop only on a fatal signal
 * (docs/kernel-rules.md, "W6 and signals"): a timer signal to the writer,
 * caught or not, leaves it migrating.  So the write is done by a child
 * process that does nothing else, and SIGKILL of that child at the
 * deadline is the fatal signal the kernel obeys.  The parent waits on a
 * pipe whose only writer end the child holds: it reads end of file when
 * the child is gone, however it went.
 */
#include "hotplug/backend.h"
#include "lib/util.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Milliseconds until DEADLINE (CLOCK_MONOTONIC), rounded up; 0 once past. */
static int ms_until(const struct timespec *deadline)
{
	struct timespec now;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec + 999999) / 1000000;
	if (ms <= 0)
		return 0;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The child: dies with its parent, writes, exits with the write's errno. */
static _Noreturn void write_child(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value,
				  pid_t parent, int done_fd)
{
	int r;

	(void)done_fd; /* held open until _exit: its end of file tells the parent */
	/* a helper or agent killed meanwhile must not leave a write behind */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(EIO);
	r = b->ops->write_attr(b, attr, id, value);
	_exit(r < 0 && -r < 256 ? -r : r < 0 ? EIO : 0);
}

/* Waits for child PID (not reaped yet: its pid cannot be anyone else's). */
static int reap(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

int hp_write_with_deadline(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value,
			   const struct timespec *deadline)
{
	_cleanup_close_ int done_rd = -1;
	int pipefd[2], status, r;
	pid_t parent = getpid(), pid;

	if (!deadline)
		return b->ops->write_attr(b, attr, id, value);
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return r;
	}
	if (pid == 0) {
		close(pipefd[0]);
		write_child(b, attr, id, value, parent, pipefd[1]);
	}
	done_rd = pipefd[0];
	close(pipefd[1]);
	for (;;) {
		struct pollfd p = { .fd = done_rd, .events = POLLIN };
		int ms = ms_until(deadline);
		int n = ms > 0 ? poll(&p, 1, ms) : 0;

		if (n > 0)
			break; /* end of file: the child is gone */
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && ms_until(deadline) > 0)
			continue; /* woke early (rounding) */
		/* the deadline, or poll failed: either way the child must not
		 * outlive this call */
		kill(pid, SIGKILL);
		break;
	}
	r = reap(pid, &status);
	if (r < 0)
		return r;
	if (WIFEXITED(status))
		return -WEXITSTATUS(status);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
		if (b->ops->settle)
			b->ops->settle(b);
		return -EINTR; /* as a signalled offline (W6); what the kernel made of it is read back by the caller */
	}
	return -EIO; /* the child crashed: whether its write reached the kernel is for a read to say */
}
