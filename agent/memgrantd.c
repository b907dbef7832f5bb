/* SPDX-License-Identifier: MIT */
/*
 * memgrantd: the guest agent.  main() owns the process-wide things: options,
 * configuration, signals (a signalfd; no work in signal handlers), systemd
 * notification, the watchdog, and the process-wide set-up (umask, signal
 * mask) done once before any thread starts and undone after every
 * thread stopped; libcurl is loaded by what uses it (lib/curl_dl.h).
 * The engine is agent/engine/engine.h; every way a request arrives
 * or a report leaves is an adapter in providers/, wired here.
 */
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "config/config.h"
#include "lib/timeutil.h"
#include "lib/sdnotify.h"
#include "lib/size.h"
#include "lib/util.h"
#include "providers/api.h"
#include "providers/channel.h"
#include "providers/hooks/hooks.h"
#include "providers/https.h"
#include "hotplug/backend.h"
#include "hotplug/privsep/spawn.h"
#include "agent/engine/backend_setup.h"
#include "hotplug/privsep/sandbox.h"
#include "providers/pressure.h"
#include "agent/engine/engine.h"
#include "agent/engine/events.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "agent/reload.h"
#include "lib/log_journald.h"
#include "agent/cred_files.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: memgrantd [-c FILE] [--foreground] [--check-config] [-o KEY=VALUE]... [--helper PATH]\n"
		"\n"
		"Turns standby-memory grants into online memory and gives it back.\n"
		"\n"
		"  -c, --config FILE      configuration file [%s]\n"
		"  -f, --foreground       stay in the foreground (systemd runs it so)\n"
		"  -t, --check-config     validate the configuration, print every problem, exit\n"
		"  -o, --set KEY=VALUE    override one configuration key (section.key=value)\n"
		"      --helper PATH      the privileged helper program to execute\n"
		"                         [memgrant-helper next to memgrantd]; for installs that\n"
		"                         keep it elsewhere and for tests under qemu-user, where\n"
		"                         it must be a script that starts the emulator\n"
		"  -V, --version          print the version\n"
		"  -h, --help             this text\n",
		MG_CONFIG_DEFAULT_PATH);
}

static int load_config(const char *path, const char *const *overrides, struct mg_config **out,
		       bool check_only)
{
	_cleanup_config_diag_ struct config_diag diag = { 0 };
	/* --check-config also looks for what would fail at run time */
	int r = config_load_flags(path, overrides, check_only ? CONFIG_CHECK_RUNTIME : 0, out, &diag);

	for (size_t i = 0; i < diag.n; i++)
		fprintf(stderr, "%s\n", diag.msgs[i]);
	if (r < 0 && diag.n == 0)
		fprintf(stderr, "memgrantd: %s: %s\n", path, strerror(-r));
	return r;
}

struct mainloop {
	int sigfd;
	int helper_fd; /* owned by the daemon's backend; polled for the helper's end */
	int watchdog_fd;
	struct engine *d;
	struct api *api;
	struct hooks *hooks;
	struct pressure *pressure;
	struct https_provider *https;
	struct channel_provider *channel;
	struct mg_log *log;
	const char *config_path;
	const char *const *overrides;
	struct mg_config *cfg;
	/* The systemd status line: built only under systemd (NOTIFY_SOCKET),
	 * since it takes the engine lock, and at most every STATUS_MIN_MS: a
	 * big operation notifies the engine once per block. */
	bool status_wanted;
	bool status_due;      /* something changed since the last line sent */
	uint64_t status_sent; /* mono_ms() of the last line sent */
	/* The engine's notifications are looked at again only this long after
	 * the last ones (NOTIFY_QUIET_MS): a big operation notifies once per
	 * block, and this loop needs them only for the status line and to
	 * learn that the engine stopped on a journal error */
	uint64_t notify_quiet_until;
	struct agent_creds *creds;
};

#define STATUS_MIN_MS 250
#define NOTIFY_QUIET_MS 100

static void notify_status(struct mainloop *m)
{
	char line[256], msg[270];

	m->status_due = false;
	if (!m->status_wanted)
		return;
	m->status_sent = mono_ms();
	engine_status_line(m->d, line, sizeof(line));
	snprintf(msg, sizeof(msg), "STATUS=%s", line);
	sdn_notify(msg);
}

/* poll()'s timeout: -1 when no line is due, else until it may be sent */
static int status_wait_ms(const struct mainloop *m)
{
	uint64_t now = mono_ms();

	if (!m->status_due)
		return -1;
	return now >= m->status_sent + STATUS_MIN_MS ? 0 : (int)(m->status_sent + STATUS_MIN_MS - now);
}

/* pressure.high / pressure.low go to the hooks */
static int fire_hook(void *ctx, const char *event, json_t *fields)
{
	return hooks_fire(ctx, event, fields);
}

/* The hooks (they see what the engine does from now on) and the pressure
 * monitor (it fires through them) of CFG. */
static int start_hooks(struct mainloop *m, const struct mg_config *cfg)
{
	_cleanup_free_ char *hooks_dir = hooks_dir_for_config(m->config_path);
	struct hooks_params hp = { .hooks = cfg->hooks, .n_hooks = cfg->n_hooks, .dir = hooks_dir,
				   .agent_id = cfg->agent.id, .daemon = m->d, .creds = &m->creds->store };
	int r = hooks_new(&hp, m->log, &m->hooks);

	if (r == 0)
		r = hooks_start(m->hooks);
	if (r < 0)
		log_err(m->log, "cannot start the hooks: %s", strerror(-r));
	return r;
}

static int start_pressure(struct mainloop *m, const struct mg_config *cfg)
{
	int r = cfg->pressure.enabled ? pressure_start_daemon(cfg, m->d, fire_hook, m->hooks, m->log, &m->pressure) : 0;

	if (r < 0)
		log_err(m->log, "cannot start the pressure monitor: %s", strerror(-r));
	return r;
}

/* SIGHUP: every key that can be applied live is; the keys that need a
 * restart are named in one line (reload.h has the list). */
static void reload(struct mainloop *m)
{
	struct mg_config *nc = NULL;
	char live[512], restart[512];
	bool hooks, pressure;
	int r;

	log_notice(m->log, "SIGHUP: reloading %s", m->config_path);
	sdn_notify("RELOADING=1");
	r = load_config(m->config_path, m->overrides, &nc, false);
	if (r < 0) {
		log_err(m->log, "new configuration rejected, keeping the running one");
		goto out;
	}
	reload_diff(m->cfg, nc, live, sizeof(live), restart, sizeof(restart));
	r = engine_reload(m->d, nc); /* policy, log level */
	if (r < 0) {
		log_err(m->log, "new configuration rejected: %s", strerror(-r));
		config_free(nc);
		goto out;
	}
	m->log->level = (int)nc->agent.log_level;
	api_set_body_limit(m->api, (size_t)nc->agent.api_body_limit);
	/* credential files in place are read again at their next use (a
	 * certificate rotation); webhook secrets are read when the hooks start */
	agent_creds_reload(m->creds, nc, m->log);
	hooks = reload_changed(m->cfg, nc, "hooks") || reload_changed(m->cfg, nc, "agent.log_level") ||
		agent_creds_has_secrets(nc);
	pressure = hooks || reload_changed(m->cfg, nc, "pressure") || reload_changed(m->cfg, nc, "policy.reserve");
	if (pressure) {
		pressure_stop(m->pressure);
		m->pressure = NULL;
	}
	if (hooks) {
		hooks_free(m->hooks); /* lets what runs finish */
		m->hooks = NULL;
		if (start_hooks(m, nc) < 0)
			log_err(m->log, "reload: running without hooks");
	}
	if (pressure && start_pressure(m, nc) < 0)
		log_err(m->log, "reload: running without the pressure monitor");
	if (restart[0])
		log_warn(m->log, "configuration keys changed that take effect at the next start: %s", restart);
	config_free(m->cfg);
	m->cfg = nc;
	log_notice(m->log, "configuration reloaded%s%s", live[0] ? "; applied: " : " (nothing to apply)", live);
out:
	sdn_notify("READY=1");
	notify_status(m);
}

static int run(struct mainloop *m)
{
	int r;

	for (;;) {
		uint64_t now = mono_ms();
		bool quiet = now < m->notify_quiet_until;
		struct pollfd p[4] = {
			{ .fd = m->sigfd, .events = POLLIN },
			{ .fd = m->watchdog_fd, .events = POLLIN },
			{ .fd = quiet ? -1 : engine_notify_fd(m->d), .events = POLLIN },
			{ .fd = m->helper_fd, .events = POLLRDHUP }, /* never readable: only its end shows */
		};
		int wait = status_wait_ms(m);

		if (quiet && (wait < 0 || (uint64_t)wait > m->notify_quiet_until - now))
			wait = (int)(m->notify_quiet_until - now);
		if (poll(p, ARRAY_SIZE(p), wait) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[3].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) {
			/* the executor stops where the kernel is: main() says why */
			engine_writer_gone(m->d);
			return -HP_EWRITER_GONE;
		}
		if (p[1].revents & POLLIN) {
			uint64_t n;
			if (read(m->watchdog_fd, &n, sizeof(n)) > 0)
				sdn_notify("WATCHDOG=1");
		}
		if (p[2].revents & POLLIN) {
			engine_notify_drain(m->d);
			m->notify_quiet_until = mono_ms() + NOTIFY_QUIET_MS;
			m->status_due = m->status_wanted;
			r = engine_journal_error(m->d);
			if (r < 0)
				return r; /* the engine stopped as on SIGTERM: main() says why */
		}
		if (status_wait_ms(m) == 0)
			notify_status(m);
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(m->sigfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo == SIGHUP) {
				reload(m);
				continue;
			}
			log_notice(m->log, "%s: finishing the block operation in progress, then stopping",
				   strsignal((int)si.ssi_signo));
			return 0;
		}
	}
}

static int watchdog_timer(void)
{
	uint64_t usec = 0;
	int fd;
	struct itimerspec its = { 0 };

	if (sdn_watchdog_usec(&usec) <= 0)
		return -1;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0)
		return -1;
	usec /= 2; /* ping twice per period, as sd_watchdog_enabled(3) advises */
	its.it_interval.tv_sec = (time_t)(usec / 1000000);
	its.it_interval.tv_nsec = (long)(usec % 1000000) * 1000;
	its.it_value = its.it_interval;
	timerfd_settime(fd, 0, &its, NULL);
	return fd;
}

/* memgrant-helper is installed (and built) next to memgrantd, unless
 * --helper says otherwise. */
static int helper_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if ((size_t)snprintf(slash, len - (size_t)(slash - buf), "/memgrant-helper") >= len - (size_t)(slash - buf))
		return -ENAMETOOLONG;
	return 0;
}

/*
 * The unprivileged process: started as root, it gives the state directory
 * and the API socket's directory to agent.user, becomes that user without
 * capabilities, and loads its seccomp filter.
 */
/*
 * Another memgrantd that answers on our API socket runs with this
 * configuration: say who (its pid from the socket's peer credentials) and
 * stop at once, before the helper lock would make this one wait for it.
 * A socket file nobody listens on is what a killed agent leaves: not ours
 * to judge here (api_start() replaces it).  1 when one runs, else 0.
 */
static int other_agent_runs(const struct mg_config *cfg, const struct mg_log *log)
{
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	char pid[32] = "unknown pid";

	if (fd < 0 || strlen(cfg->agent.api_socket) >= sizeof(sa.sun_path))
		return 0;
	memcpy(sa.sun_path, cfg->agent.api_socket, strlen(cfg->agent.api_socket) + 1);
	/* EAGAIN: it listens, its backlog is full */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EAGAIN)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0)
		snprintf(pid, sizeof(pid), "pid %d", (int)cred.pid);
	log_err(log, "memgrantd is already running (%s): its API answers on %s, its state folder is %s; not starting "
		"a second one (stop it first: systemctl stop memgrantd, or kill -TERM the pid; or give this one its "
		"own agent.api_socket and agent.state_dir)", pid, cfg->agent.api_socket, cfg->agent.state_dir);
	return 1;
}

/* Says once, at start, which memory interface the kernel offers and so what
 * a grant can bring up: without sys/firmware/memory (C0) there is no
 * standby memory, only blocks the kernel has and keeps offline. */
static void log_memory_interface(struct engine *d, const struct mg_log *log)
{
	struct engine_memory m;
	uint64_t blocks;
	char sz[16];

	if (engine_memory(d, &m) < 0 || m.block_size == 0)
		return;
	blocks = m.standby_bytes / m.block_size;
	size_format(m.standby_bytes, sz, sizeof(sz));
	if (m.has_firmware)
		log_notice(log, "memory interface: sys/firmware/memory (s390 standby memory): %s standby in %llu block%s "
			   "for grants", sz, (unsigned long long)blocks, blocks == 1 ? "" : "s");
	else
		log_notice(log, "memory interface: no sys/firmware/memory (no standby memory on this kernel): grants can "
			   "only online blocks the kernel keeps offline, %s in %llu block%s now", sz,
			   (unsigned long long)blocks, blocks == 1 ? "" : "s");
}

static int drop_privileges(const struct mg_config *cfg, const struct mg_log *log, pid_t helper_pid)
{
	char err[512] = "";
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int r = 0;

	if (geteuid() == 0) {
		r = sandbox_lookup_user(cfg->agent.user, &uid, &gid, err, sizeof(err));
		if (r == 0 && uid != 0)
			r = sandbox_own_dir(cfg->agent.state_dir, uid, gid, err, sizeof(err));
		if (r == 0 && uid != 0)
			r = sandbox_socket_dir(cfg->agent.api_socket, uid, gid, err, sizeof(err));
	} else if (cfg->agent.user && !streq(cfg->agent.user, "")) {
		log_debug(log, "started as uid %u, not root: agent.user is not used", (unsigned)uid);
	}
	if (r == 0)
		r = sandbox_drop(cfg->agent.user, cfg->agent.api_group, err, sizeof(err));
	if (r == 0)
		r = sandbox_filter_main(cfg->agent.seccomp, err, sizeof(err));
	if (r < 0) {
		log_err(log, "cannot give up privileges: %s", err);
		return r;
	}
	/* building the filter and the group lookup leave freed heap behind */
	malloc_trim(0);
	if (uid == 0)
		log_warn(log, "agent.user is root: the agent keeps uid 0 (without capabilities); "
			 "only for tests and development");
	log_info(log, "privileged helper is pid %d; this process runs as uid %u gid %u without capabilities%s",
		 (int)helper_pid, (unsigned)getuid(), (unsigned)getgid(),
		 cfg->agent.seccomp == MG_SECCOMP_OFF ? " (seccomp filters off)" :
		 sandbox_sanitized() ? " (sanitizer build: seccomp only logs)" : "");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "check-config", no_argument, NULL, 't' },
		{ "set", required_argument, NULL, 'o' },
		{ "helper", required_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *config_path = MG_CONFIG_DEFAULT_PATH;
	static char helper_buf[PATH_MAX];
	const char *helper_arg = NULL; /* --helper; NULL: next to memgrantd */
	const char *overrides[33] = { 0 };
	size_t n_overrides = 0;
	bool foreground = false, check_only = false, helper_gone = false;
	struct mg_log log;
	struct agent_creds creds = { .client = { .fd = -1 } };
	struct mainloop m = { .sigfd = -1, .watchdog_fd = -1, .helper_fd = -1, .log = &log, .creds = &creds };
	struct helper helper = { .pid = 0, .fd = -1, .cred_fd = -1 };
	sigset_t mask;
	int c, r, rc = 0;

	/* without per-thread caches (lib/heap.h): their chunks would keep
	 * pages of the heap that malloc_trim() hands back; on failure the
	 * agent runs with them, as before */
	heap_without_thread_caches(argv);
	/* one heap for the few threads: with an arena per thread, the blocks
	 * an operation frees stay spread over arenas that malloc_trim() cannot
	 * empty, and RSS creeps up over grant+revocation cycles
	 * (bench/scale.sh: 22.2 -> 16.6 MB after 50 cycles of 4,096 blocks) */
	mallopt(M_ARENA_MAX, 1);
	/* a fixed threshold: big temporaries (a discovery's records, a rescan's
	 * table) stay mmapped and go back to the kernel when freed; glibc's
	 * sliding one moves them onto the heap, where a small allocation made
	 * after them keeps their pages (3.5 MB at ready on 262,144 blocks) */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	while ((c = getopt_long(argc, argv, "c:fto:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'f': foreground = true; break;
		case 't': check_only = true; break;
		case 'o':
			if (n_overrides + 1 >= ARRAY_SIZE(overrides)) {
				fprintf(stderr, "memgrantd: at most %zu -o options\n", ARRAY_SIZE(overrides) - 1);
				return 1;
			}
			overrides[n_overrides++] = optarg;
			break;
		case 'H':
			/* absolute now: a classic daemon() start changes to / */
			if (!realpath(optarg, helper_buf)) {
				fprintf(stderr, "memgrantd: --helper %s: %s\n", optarg, strerror(errno));
				return 1;
			}
			helper_arg = helper_buf;
			break;
		case 'V': printf("memgrantd %s\n", MEMGRANT_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1; /* usage errors exit 1, as in memgrantctl */
		}
	}
	if (optind < argc) {
		fprintf(stderr, "memgrantd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}

	r = load_config(config_path, overrides, &m.cfg, check_only);
	if (check_only) {
		if (r == 0) {
			char restart[512];
			reload_restart_keys(restart, sizeof(restart));
			printf("%s: OK\n", config_path);
			if (m.cfg->providers.https.enabled && m.cfg->providers.https.cert_file) {
				char until[64];
				long days;

				if (config_cert_days(m.cfg->providers.https.cert_file, &days, until, sizeof(until)) == 0)
					printf("providers.https.cert_file: %s is valid until %s (%ld days left)\n",
					       m.cfg->providers.https.cert_file, until, days);
			}
			/* for an operator at a terminal, about to reload; not at every
			 * start (the unit's ExecStartPre) nor in a script.  A reload
			 * itself names the changed keys that wait for a restart. */
			if (isatty(STDOUT_FILENO))
				printf("a reload (SIGHUP) applies every key but these, which take effect at the next "
				       "start: %s\n", restart); /* the same table the reload uses */
		}
		config_free(m.cfg);
		return r == 0 ? 0 : 1;
	}
	if (r < 0)
		return 1;

	log_init(&log, "memgrantd", (int)m.cfg->agent.log_level);
	/* under journald: entries with fields (GRANT_ID=, BLOCK=, ...), before
	 * anything copies the logger */
	log_journald_use(&log);
	if (other_agent_runs(m.cfg, &log)) {
		config_free(m.cfg);
		return 1;
	}
	m.status_wanted = getenv("NOTIFY_SOCKET") != NULL;
	if (!foreground && !m.status_wanted) {
		/* classic daemon: detach, keep stderr for the few lines before */
		if (daemon(0, 1) < 0) {
			log_err(&log, "cannot detach: %s", strerror(errno));
			return 1;
		}
	}

	/* Process-wide set-up, before any thread starts.  Files are created
	 * with explicit modes; the umask only keeps them from being wider. */
	umask(022);

	if (m.cfg->agent.seccomp == MG_SECCOMP_OFF)
		log_warn(&log, "seccomp filters are off (agent.seccomp: off): neither the helper nor this process "
			 "is stopped from making system calls outside its allow-list; meant only for emulators "
			 "without seccomp (qemu-user)");

	/* The privilege split (docs/security.md): the helper first, while this
	 * is the only thread, then the rest of the agent gives up root. */
	r = agent_creds_prepare(&creds, m.cfg, &log);
	if (r < 0) {
		log_err(&log, "cannot list the credential files: %s", strerror(-r));
	} else if (helper_arg) {
		r = backend_start_helper(m.cfg, &log, helper_arg, creds.paths, creds.store.n, &helper);
	} else {
		char path[4096];
		r = helper_path(path, sizeof(path));
		if (r < 0)
			log_err(&log, "cannot find memgrant-helper next to memgrantd: %s", strerror(-r));
		else
			r = backend_start_helper(m.cfg, &log, path, creds.paths, creds.store.n, &helper);
	}
	if (r < 0) { /* logged where it failed: the sim, the lock, the helper itself */
		agent_creds_done(&creds);
		config_free(m.cfg);
		return 1;
	}
	agent_creds_connect(&creds, helper.cred_fd);
	r = drop_privileges(m.cfg, &log, helper.pid);
	if (r < 0) {
		agent_creds_done(&creds);
		close(helper.fd);
		helper_reap(&helper, &log);
		config_free(m.cfg);
		return 1;
	}
	m.helper_fd = helper.fd;

	/* Signals are read from a signalfd; every thread inherits this mask. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	sigdelset(&mask, SIGPIPE);
	m.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (m.sigfd < 0) {
		log_err(&log, "signalfd: %s", strerror(errno));
		return 1;
	}
	m.config_path = config_path;
	m.overrides = overrides;

	r = engine_new(m.cfg, &log, helper.fd, &m.d);
	if (r < 0) { /* engine_new() logged why */
		rc = 1;
		goto out;
	}
	/* the operator's source numbers its requests: registered before the
	 * recovery resumes what it sent */
	r = engine_source_add(m.d, API_SOURCE, ENGINE_SOURCE_OPERATOR, NULL);
	if (r < 0) {
		log_err(&log, "cannot start: %s", strerror(-r));
		rc = 1;
		goto out;
	}
	m.config_path = config_path;
	/* hooks before the engine starts: they see what recovery does (docs/autoscaling.md) */
	if (start_hooks(&m, m.cfg) < 0) {
		rc = 1;
		goto out;
	}
	r = engine_start(m.d);
	if (r == -HP_EWRITER_GONE) {
		helper_gone = true; /* during recovery */
		rc = 1;
		goto out;
	}
	if (r < 0) { /* engine_start() or the recovery logged why */
		rc = 1;
		goto out;
	}
	if (start_pressure(&m, m.cfg) < 0) {
		rc = 1;
		goto out;
	}
	{
		struct api_params ap = {
			.socket_path = m.cfg->agent.api_socket,
			.socket_mode = (int)strtoul(m.cfg->agent.api_socket_mode, NULL, 8), /* checked by config */
			.group = m.cfg->agent.api_group,
			.body_limit = (size_t)m.cfg->agent.api_body_limit,
		};
		r = api_start(&ap, m.d, &log, &m.api);
		if (r < 0) {
			log_err(&log, "cannot listen on %s: %s", ap.socket_path, strerror(-r));
			rc = 1;
			goto out;
		}
	}
	if (m.cfg->providers.channel.enabled) {
		r = channel_provider_start(&m.cfg->providers.channel, m.d, &log, &m.channel);
		if (r < 0) {
			log_err(&log, "cannot start the channel provider: %s", strerror(-r));
			rc = 1;
			goto out;
		}
	}
	if (m.cfg->providers.https.enabled) {
		r = https_provider_start(&m.cfg->providers.https, m.cfg->agent.id, m.d, &creds.store, &log, &m.https);
		if (r < 0) {
			log_err(&log, "cannot start the https provider: %s", strerror(-r));
			rc = 1;
			goto out;
		}
	}
	m.watchdog_fd = watchdog_timer();
	log_memory_interface(m.d, &log);
	log_notice(&log, "memgrantd %s ready, API on %s", MEMGRANT_VERSION, m.cfg->agent.api_socket);
	sdn_notify("READY=1");
	notify_status(&m);
	hooks_fire_agent(m.hooks, m.d, "agent.started");

	r = run(&m);
	if (r == -HP_EWRITER_GONE) {
		helper_gone = true;
		rc = 1;
	} else if (r < 0 && r == engine_journal_error(m.d)) {
		log_err(&log, "the journal in %s cannot record (%s): stopping with exit status 1 - nothing is answered "
			"that it does not hold; the operation in progress resumes, with everything queued, at the next "
			"start, from the kernel's state", m.cfg->agent.state_dir, strerror(-r));
		rc = 1;
	} else if (r < 0) {
		log_err(&log, "main loop: %s", strerror(-r));
		rc = 1;
	}
	sdn_notify("STOPPING=1");
	hooks_fire_agent(m.hooks, m.d, "agent.stopping");
out:
	https_provider_stop(m.https);
	channel_provider_stop(m.channel);
	/* end the event streams first: api_stop() waits for their connections */
	if (m.d)
		events_close(engine_events(m.d));
	api_stop(m.api);
	pressure_stop(m.pressure);
	hooks_free(m.hooks); /* runs what is queued (agent.stopping), at most HOOKS_STOP_GRACE_MS */
	if (m.d)
		engine_stop(m.d);
	agent_creds_done(&creds); /* every reader stopped */
	engine_free(m.d); /* closes the helper's socket: it ends */
	if (helper_gone) {
		/* one line for the whole story: the stop is not a failure of
		 * any request, and nothing is lost (docs/operations.md) */
		char how[128];
		helper_wait(&helper, how, sizeof(how));
		log_err(&log, "the privileged helper is gone (%s): no memory can be changed any more; stopping "
			"with exit status 1 - the operation in progress stays open in the journal and resumes, "
			"with everything queued, at the next start, from the kernel's state", how);
	} else if (helper_reap(&helper, &log) < 0)
		rc = 1;
	if (m.watchdog_fd >= 0)
		close(m.watchdog_fd);
	close(m.sigfd);
	log_notice(&log, "stopped");
	config_free(m.cfg);
	return rc;
}
