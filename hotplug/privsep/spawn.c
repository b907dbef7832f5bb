/* SPDX-License-Identifier: MIT */
/*
 * The privileged helper process (contract in spawn.h).
 */
#include "hotplug/privsep/spawn.h"
#include "hotplug/privsep/sandbox.h"
#include "hotplug/privsep/helper_serve.h"
#include "hotplug/privsep/cred_channel.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#define HELPER_LOCK_FILE "helper.lock"
#define HELPER_LOCK_WAIT_MS 30000

/*
 * One helper per state directory at a time.  The lock is held by the open
 * file that the helper inherits, so it lasts exactly as long as the helper:
 * a memgrantd restarted after a SIGKILL waits here until the helper it left
 * behind has finished its last kernel write and exited, and recovery never
 * reads the kernel while an old write is still landing.
 */
static int helper_lock(const char *state_dir, const struct mg_log *log, int *out)
{
	_cleanup_close_ int dir = -1, fd = -1;
	bool told = false;
	int r, waited = 0;

	r = mkdir_p(state_dir, 0700);
	if (r < 0) {
		log_err(log, "privileged helper: %s: cannot create: %s", state_dir, strerror(-r));
		return r;
	}
	dir = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir >= 0)
		fd = openat(dir, HELPER_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		log_err(log, "privileged helper: %s/" HELPER_LOCK_FILE ": cannot open: %s", state_dir, strerror(-r));
		return r;
	}
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		struct timespec pause = { 0, 10 * 1000 * 1000 };

		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK) {
			r = -errno;
			log_err(log, "privileged helper: %s/" HELPER_LOCK_FILE ": cannot lock: %s", state_dir,
				strerror(-r));
			return r;
		}
		if (waited >= HELPER_LOCK_WAIT_MS) {
			log_err(log, "privileged helper: the helper of an earlier memgrantd still runs after %d s "
				"(it holds %s/" HELPER_LOCK_FILE "); not starting a second one",
				HELPER_LOCK_WAIT_MS / 1000, state_dir);
			return -EBUSY;
		}
		if (!told) {
			log_info(log, "privileged helper: waiting for the helper of an earlier memgrantd to exit "
				 "(%s/" HELPER_LOCK_FILE ")", state_dir);
			told = true;
		}
		nanosleep(&pause, NULL);
		waited += 10;
	}
	*out = fd;
	fd = -1;
	return 0;
}

/* Moves FD to TARGET without FD_CLOEXEC (FD was opened with it). */
static int place_fd(int fd, int target)
{
	if (fd == target)
		return fcntl(fd, F_SETFD, 0);
	return dup2(fd, target) < 0 ? -1 : 0;
}

/*
 * The child: only stderr (for the log), the socket as fd 3 and the lock as
 * fd 4 stay.  It dies with memgrantd (PR_SET_PDEATHSIG): a helper outliving
 * a killed agent would go on with a write nobody waits for.
 */
__attribute__((noreturn))
static void exec_helper(int fd, int lock_fd, int cred_fd, pid_t parent, const char *path, const struct helper_spec *spec,
			const struct mg_log *log)
{
	char level[16];
	const char *argv[12 + 2 * PH_CRED_MAX];
	int n = 0, null;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(1);
	/* out of the way of 3 and 4 first, in case either already sits there */
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	lock_fd = fcntl(lock_fd, F_DUPFD_CLOEXEC, 10);
	if (cred_fd >= 0)
		cred_fd = fcntl(cred_fd, F_DUPFD_CLOEXEC, 10);
	if (fd < 0 || lock_fd < 0 || place_fd(fd, 3) < 0 || place_fd(lock_fd, 4) < 0)
		_exit(1);
	if (spec->n_creds && (cred_fd < 0 || place_fd(cred_fd, PH_CRED_FD) < 0))
		_exit(1);
	if (close_range(spec->n_creds ? PH_CRED_FD + 1 : 5, ~0U, 0) < 0)
		_exit(1);
	null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		if (null > STDERR_FILENO && null != 3)
			close(null);
	}
	snprintf(level, sizeof(level), "%d", log->level);
	argv[n++] = "memgrant-helper";
	if (spec->sim_state) {
		argv[n++] = "--sim";
		argv[n++] = spec->sim_state;
	} else {
		argv[n++] = "--sysfs";
		argv[n++] = spec->root ? spec->root : "/";
	}
	argv[n++] = "--seccomp";
	argv[n++] = spec->seccomp == MG_SECCOMP_OFF ? "off" : spec->seccomp == MG_SECCOMP_LOG ? "log" : "kill";
	argv[n++] = "--log-level";
	argv[n++] = level;
	for (size_t i = 0; i < spec->n_creds && i < PH_CRED_MAX; i++) {
		argv[n++] = "--credential";
		argv[n++] = spec->cred_paths[i] ? spec->cred_paths[i] : "";
	}
	argv[n] = NULL;
	execv(path, (char *const *)argv);
	log_err(log, "privileged helper: cannot execute %s: %s", path, strerror(errno));
	_exit(127);
}

int helper_start(const struct helper_spec *spec, const struct mg_log *log, const char *path, struct helper *out)
{
	_cleanup_close_ int lock_fd = -1;
	int sv[2], cv[2] = { -1, -1 };
	struct ph_reply hello;
	ssize_t n;
	pid_t pid, parent = getpid();

	{
		int r = helper_lock(spec->state_dir, log, &lock_fd);
		if (r < 0)
			return r;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_err(log, "privileged helper: socketpair: %s", strerror(errno));
		return -errno;
	}
	if (spec->n_creds > PH_CRED_MAX) {
		log_err(log, "privileged helper: %zu credential files, at most %d", spec->n_creds, PH_CRED_MAX);
		close(sv[0]);
		close(sv[1]);
		return -E2BIG;
	}
	if (spec->n_creds && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cv) < 0) {
		int r = -errno;
		log_err(log, "privileged helper: socketpair: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int r = -errno;
		log_err(log, "privileged helper: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		if (cv[0] >= 0) {
			close(cv[0]);
			close(cv[1]);
		}
		return r;
	}
	if (pid == 0) {
		close(sv[0]);
		if (cv[0] >= 0)
			close(cv[0]);
		exec_helper(sv[1], lock_fd, cv[1], parent, path, spec, log);
	}
	close(sv[1]);
	if (cv[1] >= 0)
		close(cv[1]);
	out->pid = pid;
	out->fd = sv[0];
	out->cred_fd = cv[0];
	do
		n = recv(out->fd, &hello, sizeof(hello), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(hello) || hello.magic != PH_MAGIC || hello.err != 0) {
		int r = n == (ssize_t)sizeof(hello) && hello.err > 0 ? -hello.err : -EPIPE;
		int status = 0;
		close(out->fd);
		out->fd = -1;
		if (out->cred_fd >= 0)
			close(out->cred_fd);
		out->cred_fd = -1;
		/* a helper that exits logged why itself (main.c, exec_helper()): one
		 * line per failure; only a death by a signal is ours to tell */
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		out->pid = 0;
		if (WIFSIGNALED(status))
			log_err(log, "privileged helper: killed by %s before it was ready%s", strsignal(WTERMSIG(status)),
				WTERMSIG(status) == SIGSYS ? " (a system call outside its seccomp filter)" : "");
		return r;
	}
	return 0;
}

int helper_wait(struct helper *h, char *how, size_t len)
{
	int status;
	pid_t r;

	snprintf(how, len, "exited with status 0");
	if (h->pid <= 0)
		return 0;
	do
		r = waitpid(h->pid, &status, 0);
	while (r < 0 && errno == EINTR);
	h->pid = 0;
	if (r < 0) {
		int err = -errno;
		snprintf(how, len, "cannot wait for it: %s", strerror(-err));
		return err;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		snprintf(how, len, "killed by %s%s", strsignal(WTERMSIG(status)),
			 WTERMSIG(status) == SIGSYS ? " (a system call outside its seccomp filter)" : "");
	else
		snprintf(how, len, "exited with status %d", WEXITSTATUS(status));
	return -ECHILD;
}

int helper_reap(struct helper *h, const struct mg_log *log)
{
	char how[128];
	int r = helper_wait(h, how, sizeof(how));

	if (r < 0)
		log_err(log, "privileged helper: %s", how);
	return r;
}
