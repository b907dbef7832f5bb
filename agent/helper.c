/* SPDX-License-Identifier: MIT */
/*
 * The privileged helper process (contract in helper.h).
 */
#include "helper.h"
#include "sandbox.h"
#include "../hotplug/privhelper.h"
#include "../hotplug/sim.h"
#include "../lib/util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static void on_alarm(int sig)
{
	(void)sig; /* only there to end an offline with EINTR (W6) */
}

/* Creates the sim when it is missing and applies the configured faults, as
 * the configuration describes the machine (tests and demos). */
static int prepare_sim(const struct mg_sim_config *s, const struct mg_log *log)
{
	int r;

	if (access(s->state, F_OK) < 0) {
		struct sim_params p = {
			.online_bytes = s->online,
			.standby_bytes = s->standby,
			.block_size = s->block_size,
			.memmap_supported = s->memmap_on_memory_supported,
			.has_firmware = s->has_firmware,
			.used_bytes = s->used,
			.auto_online = mg_auto_online_name(s->auto_online_blocks),
			.tree = s->tree,
		};
		r = sim_init(s->state, &p);
		if (r < 0) {
			log_err(log, "cannot create the sim %s: %s", s->state, strerror(-r));
			return r;
		}
		log_notice(log, "created sim machine %s", s->state);
	}
	if (s->faults.configure_eio.n || s->faults.offline_ebusy.n || s->faults.latency_ms) {
		struct sim_faults f = {
			.configure_eio = s->faults.configure_eio.ids,
			.n_configure_eio = s->faults.configure_eio.n,
			.offline_ebusy = s->faults.offline_ebusy.ids,
			.n_offline_ebusy = s->faults.offline_ebusy.n,
			.latency_ms = s->faults.latency_ms,
		};
		r = sim_set_faults(s->state, &f);
		if (r < 0) {
			log_err(log, "cannot set the faults of the sim %s: %s", s->state, strerror(-r));
			return r;
		}
	}
	return 0;
}

static int open_writer(const struct mg_config *cfg, const struct mg_log *log, struct hp_backend **out)
{
	int r;

	if (cfg->backend.type == MG_BACKEND_SIM) {
		r = prepare_sim(&cfg->backend.sim, log);
		if (r < 0)
			return r;
		r = hp_sim_open(cfg->backend.sim.state, out);
		if (r < 0) {
			char why[256] = "";
			sim_check_file(cfg->backend.sim.state, why, sizeof(why));
			log_err(log, "cannot open the sim %s: %s", cfg->backend.sim.state, why[0] ? why : strerror(-r));
		}
		return r;
	}
	r = hp_sysfs_open(cfg->backend.root, out);
	if (r < 0)
		log_err(log, "privileged helper: cannot open %s: %s", cfg->backend.root ? cfg->backend.root : "/",
			strerror(-r));
	return r;
}

/* The child: never returns. */
__attribute__((noreturn))
static void helper_main(int fd, const struct mg_config *cfg, const struct mg_log *log)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct hp_backend *w = NULL;
	struct hp_path *root = NULL;
	sigset_t none;
	char why[256] = "";
	int r;

	/* only stderr (for the log) and the socket stay open */
	if (fd != 3) {
		if (dup2(fd, 3) < 0)
			_exit(1);
		fd = 3;
	}
	if (close_range(4, ~0U, 0) < 0)
		_exit(1);
	r = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (r >= 0) {
		dup2(r, STDIN_FILENO);
		dup2(r, STDOUT_FILENO);
		close(r);
	}
	sigemptyset(&sa.sa_mask); /* no SA_RESTART: the alarm must end the write */
	sigaction(SIGALRM, &sa, NULL);
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	r = open_writer(cfg, log, &w);
	if (r == 0) {
		r = hp_path_open(w->root, &root);
		if (r < 0)
			log_err(log, "privileged helper: cannot open %s: %s", w->root, strerror(-r));
	}
	if (r == 0) {
		r = sandbox_drop_helper(why, sizeof(why));
		if (r == 0)
			r = sandbox_filter_helper(cfg->backend.type == MG_BACKEND_SIM, cfg->agent.seccomp, why, sizeof(why));
		if (r < 0)
			log_err(log, "privileged helper: %s", why);
	}
	if (privhelper_hello(fd, r) < 0 || r < 0)
		_exit(1);
	r = privhelper_serve(fd, w, root, why, sizeof(why));
	if (r == 0)
		_exit(0);
	if (r == -EPROTO)
		log_err(log, "privileged helper: refusing a malformed request and stopping: %s", why);
	else
		log_err(log, "privileged helper: stopping: %s", why);
	_exit(2);
}

int helper_start(const struct mg_config *cfg, const struct mg_log *log, struct helper *out)
{
	int sv[2];
	struct ph_reply hello;
	ssize_t n;
	pid_t pid;

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
		helper_main(sv[1], cfg, log);
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
