/* SPDX-License-Identifier: MIT */
/*
 * The privileged helper process (contract in helper.h).
 */
#include "helper.h"
#include "sandbox.h"
#include "../hotplug/privhelper.h"
#include "../hotplug/sim.h"
#include "backend_setup.h"
#include "../lib/util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

/* The child: only stderr (for the log) and the socket, as fd 3, stay. */
__attribute__((noreturn))
static void exec_helper(int fd, const char *path, const struct mg_config *cfg, const struct mg_log *log)
{
	char level[16];
	const char *argv[10];
	int n = 0, null;

	if (fd != 3) {
		if (dup2(fd, 3) < 0)
			_exit(1);
		fd = 3;
	} else if (fcntl(fd, F_SETFD, 0) < 0) {
		_exit(1);
	}
	if (close_range(4, ~0U, 0) < 0)
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
	if (cfg->backend.type == MG_BACKEND_SIM) {
		argv[n++] = "--sim";
		argv[n++] = cfg->backend.sim.state;
	} else {
		argv[n++] = "--sysfs";
		argv[n++] = cfg->backend.root ? cfg->backend.root : "/";
	}
	argv[n++] = "--seccomp";
	argv[n++] = mg_seccomp_action_name(cfg->agent.seccomp); /* kill, log or off */
	argv[n++] = "--log-level";
	argv[n++] = level;
	argv[n] = NULL;
	execv(path, (char *const *)argv);
	log_err(log, "privileged helper: cannot execute %s: %s", path, strerror(errno));
	_exit(127);
}

int helper_start(const struct mg_config *cfg, const struct mg_log *log, const char *path, struct helper *out)
{
	int sv[2];
	struct ph_reply hello;
	ssize_t n;
	pid_t pid;

	if (cfg->backend.type == MG_BACKEND_SIM) {
		int r = backend_prepare_sim(&cfg->backend.sim, log);
		if (r < 0)
			return r;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_err(log, "privileged helper: socketpair: %s", strerror(errno));
		return -errno;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int r = -errno;
		log_err(log, "privileged helper: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	if (pid == 0) {
		close(sv[0]);
		exec_helper(sv[1], path, cfg, log);
	}
	close(sv[1]);
	out->pid = pid;
	out->fd = sv[0];
	do
		n = recv(out->fd, &hello, sizeof(hello), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(hello) || hello.magic != PH_MAGIC || hello.err != 0) {
		int r = n == (ssize_t)sizeof(hello) && hello.err > 0 ? -hello.err : -EPIPE;
		close(out->fd);
		out->fd = -1;
		helper_reap(out, log);
		return r;
	}
	return 0;
}

int helper_reap(struct helper *h, const struct mg_log *log)
{
	int status;
	pid_t r;

	if (h->pid <= 0)
		return 0;
	do
		r = waitpid(h->pid, &status, 0);
	while (r < 0 && errno == EINTR);
	h->pid = 0;
	if (r < 0) {
		log_err(log, "privileged helper: wait: %s", strerror(errno));
		return -errno;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		log_err(log, "privileged helper: killed by %s%s", strsignal(WTERMSIG(status)),
			WTERMSIG(status) == SIGSYS ? " (a system call outside its seccomp filter)" : "");
	else
		log_err(log, "privileged helper: exited with status %d", WEXITSTATUS(status));
	return -ECHILD;
}
