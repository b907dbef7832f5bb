/* SPDX-License-Identifier: MIT */
/*
 * A write under a deadline (contract at hp_write_with_deadline() in
 * backend.h).
 *
 * Linux ends an offline's migration loop only on a fatal signal
 * (docs/kernel-rules.md, "W6 and signals"): a timer signal to the writer,
 * caught or not, leaves it migrating.  So the write is done by a child
 * process that does nothing else, and SIGKILL of that child at the
 * deadline is the fatal signal the kernel obeys.  The child takes one
 * request after another from a pipe and answers each on another, whose
 * only writer end it holds: the parent reads end of file when the child is
 * gone, however it went.  One child serves a whole revocation (a fork per
 * block cost more than the block's writes); a new one is made only after
 * a kill.
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

/* One write, parent to child; fits a pipe's atomic write (PIPE_BUF). */
struct writer_request {
	uint32_t attr;
	uint64_t id;
	char value[24];
};

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

static ssize_t read_full(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

static ssize_t write_full(int fd, const void *buf, size_t len)
{
	ssize_t n;

	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

/* The child: dies with its parent; per request, writes and answers with the
 * write's errno; exits at the end of the requests. */
static _Noreturn void writer_child(struct hp_backend *b, pid_t parent, int req_fd, int reply_fd)
{
	struct writer_request rq;

	/* a helper or agent killed meanwhile must not leave a write behind */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(EIO);
	while (read_full(req_fd, &rq, sizeof(rq)) == (ssize_t)sizeof(rq)) {
		int32_t err;
		int r;

		rq.value[sizeof(rq.value) - 1] = '\0';
		r = b->ops->write_attr(b, (enum hp_attr)rq.attr, rq.id, rq.value);
		err = r < 0 ? -r : 0;
		if (write_full(reply_fd, &err, sizeof(err)) != (ssize_t)sizeof(err))
			_exit(EIO);
	}
	_exit(0);
}

/* Waits for child PID (not reaped yet: its pid cannot be anyone else's). */
static int reap(pid_t pid, int *status)
{
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* Closes W's ends and reaps its child: *STATUS its wait status. */
static int writer_reap(struct hp_offline_writer *w, int *status)
{
	pid_t pid = w->pid;

	close(w->req_fd);
	close(w->reply_fd);
	*w = (struct hp_offline_writer){ .pid = 0 };
	return reap(pid, status);
}

static int writer_start(struct hp_backend *b)
{
	struct hp_offline_writer *w = &b->offline_writer;
	int req[2], reply[2], r;
	pid_t parent = getpid(), pid;

	if (pipe2(req, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(reply, O_CLOEXEC) < 0) {
		r = -errno;
		close(req[0]);
		close(req[1]);
		return r;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(req[0]);
		close(req[1]);
		close(reply[0]);
		close(reply[1]);
		return r;
	}
	if (pid == 0) {
		close(req[1]);
		close(reply[0]);
		writer_child(b, parent, req[0], reply[1]);
	}
	close(req[0]);
	close(reply[1]);
	*w = (struct hp_offline_writer){ .pid = pid, .req_fd = req[1], .reply_fd = reply[0] };
	return 0;
}

void hp_offline_writer_end(struct hp_backend *b)
{
	int status;

	/* the child is between requests: end of file ends it at once */
	if (hp_offline_writer_running(b))
		(void)writer_reap(&b->offline_writer, &status);
}

int hp_write_with_deadline(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value,
			   const struct timespec *deadline)
{
	struct hp_offline_writer *w = &b->offline_writer;
	struct writer_request rq = { .attr = attr, .id = id };
	int32_t err;
	ssize_t n;
	int status, r;

	if (!deadline)
		return b->ops->write_attr(b, attr, id, value);
	if (strlen(value) >= sizeof(rq.value))
		return -EINVAL;
	if (ms_until(deadline) == 0)
		return -EINTR; /* no time left: not written, as a killed write's block reads online */
	if (b->ops->write_prompt) {
		/* a write that cannot last needs no process to kill (the sim
		 * without latency): two wake-ups fewer per block */
		r = b->ops->write_prompt(b, attr, id, value);
		if (r != -EWOULDBLOCK)
			return r;
	}
	memcpy(rq.value, value, strlen(value) + 1);
	if (!hp_offline_writer_running(b)) {
		r = writer_start(b);
		if (r < 0)
			return r;
	}
	if (write_full(w->req_fd, &rq, sizeof(rq)) != (ssize_t)sizeof(rq))
		goto gone; /* it died between two writes: said by its status */
	for (;;) {
		struct pollfd p = { .fd = w->reply_fd, .events = POLLIN };
		int ms = ms_until(deadline);
		int nready = ms > 0 ? poll(&p, 1, ms) : 0;

		if (nready > 0)
			break; /* an answer, or end of file: the child is gone */
		if (nready < 0 && errno == EINTR)
			continue;
		if (nready == 0 && ms_until(deadline) > 0)
			continue; /* woke early (rounding) */
		/* the deadline, or poll failed: either way the write must not
		 * outlive this call */
		kill(w->pid, SIGKILL);
		goto gone;
	}
	n = read_full(w->reply_fd, &err, sizeof(err));
	if (n == (ssize_t)sizeof(err))
		return err > 0 && err < 4096 ? -err : err ? -EIO : 0;
gone:
	r = writer_reap(w, &status);
	if (r < 0)
		return r;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
		if (b->ops->settle)
			b->ops->settle(b);
		return -EINTR; /* as a signalled offline (W6); what the kernel made of it is read back by the caller */
	}
	return -EIO; /* the child died: whether its write reached the kernel is for a read to say */
}
