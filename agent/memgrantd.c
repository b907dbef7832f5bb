/* SPDX-License-Identifier: MIT */
/*
 * memgrantd: the guest agent.  main() owns the process-wide things: options,
 * configuration, signals (a signalfd; no work in signal handlers), systemd
 * notification and the watchdog.  The engine lives in daemon.c, the local API
 * in api.c.
 */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>

#include "../config/config.h"
#include "../lib/util.h"
#include "../providers/https.h"
#include "../providers/channel.h"
#include "../providers/api.h"
#include "daemon.h"
#include "../providers/hooks.h"
#include "../providers/pressure.h"
#include "log.h"

#ifndef MEMGRANT_VERSION
#define MEMGRANT_VERSION "0"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: memgrantd [-c FILE] [--foreground] [--check-config] [-o KEY=VALUE]...\n"
		"\n"
		"Turns standby-memory grants into online memory and gives it back.\n"
		"\n"
		"  -c, --config FILE      configuration file [%s]\n"
		"  -f, --foreground       stay in the foreground (systemd runs it so)\n"
		"  -t, --check-config     validate the configuration, print every problem, exit\n"
		"  -o, --set KEY=VALUE    override one configuration key (section.key=value)\n"
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
	int watchdog_fd;
	struct daemon *d;
	struct api *api;
	struct hooks *hooks;
	struct pressure *pressure;
	struct https_provider *https;
	struct channel_provider *channel;
	const struct mg_log *log;
	const char *config_path;
	const char *const *overrides;
	struct mg_config *cfg;
};

static void notify_status(struct mainloop *m)
{
	char line[256];

	daemon_status_line(m->d, line, sizeof(line));
	sd_notifyf(0, "STATUS=%s", line);
}

static void reload(struct mainloop *m)
{
	struct mg_config *nc = NULL;
	int r;

	log_notice(m->log, "SIGHUP: reloading %s", m->config_path);
	sd_notify(0, "RELOADING=1");
	r = load_config(m->config_path, m->overrides, &nc, false);
	if (r < 0) {
		log_err(m->log, "new configuration rejected, keeping the running one");
	} else {
		r = daemon_reload(m->d, nc);
		if (r < 0) {
			log_err(m->log, "new configuration rejected: %s", strerror(-r));
			config_free(nc);
		} else {
			config_free(m->cfg);
			m->cfg = nc;
			log_notice(m->log, "configuration reloaded");
		}
	}
	sd_notify(0, "READY=1");
	notify_status(m);
}

static int run(struct mainloop *m)
{
	for (;;) {
		struct pollfd p[3] = {
			{ .fd = m->sigfd, .events = POLLIN },
			{ .fd = m->watchdog_fd, .events = POLLIN },
			{ .fd = daemon_notify_fd(m->d), .events = POLLIN },
		};

		if (poll(p, ARRAY_SIZE(p), -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (p[1].revents & POLLIN) {
			uint64_t n;
			if (read(m->watchdog_fd, &n, sizeof(n)) > 0)
				sd_notify(0, "WATCHDOG=1");
		}
		if (p[2].revents & POLLIN) {
			daemon_notify_drain(m->d);
			notify_status(m);
		}
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

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "check-config", no_argument, NULL, 't' },
		{ "set", required_argument, NULL, 'o' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *config_path = MG_CONFIG_DEFAULT_PATH;
	const char *overrides[33] = { 0 };
	size_t n_overrides = 0;
	bool foreground = false, check_only = false;
	struct mg_log log;
	struct mainloop m = { .sigfd = -1, .watchdog_fd = -1, .log = &log };
	sigset_t mask;
	int c, r, rc = 0;

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
		if (r == 0)
			printf("%s: OK\n", config_path);
		config_free(m.cfg);
		return r == 0 ? 0 : 1;
	}
	if (r < 0)
		return 1;

	log_init(&log, "memgrantd", (int)m.cfg->agent.log_level);
	if (!foreground && !getenv("NOTIFY_SOCKET")) {
		/* classic daemon: detach, keep stderr for the few lines before */
		if (daemon(0, 1) < 0) {
			log_err(&log, "cannot detach: %s", strerror(errno));
			return 1;
		}
	}

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

	r = daemon_new(m.cfg, &log, &m.d);
	if (r < 0) {
		log_err(&log, "cannot start: %s", strerror(-r));
		rc = 1;
		goto out;
	}
	r = daemon_start(m.d);
	if (r < 0) {
		log_err(&log, "cannot start: %s", strerror(-r));
		rc = 1;
		goto out;
	}
	{ /* hooks and the pressure monitor (docs/autoscaling.md) */
		_cleanup_free_ char *hooks_dir = hooks_dir_for_config(config_path);
		struct hooks_params hp = { .hooks = m.cfg->hooks, .n_hooks = m.cfg->n_hooks, .dir = hooks_dir,
					   .agent_id = m.cfg->agent.id, .daemon = m.d };
		r = hooks_new(&hp, &log, &m.hooks);
		if (r == 0)
			r = hooks_start(m.hooks);
		if (r == 0 && m.cfg->pressure.enabled)
			r = pressure_start_daemon(m.cfg, m.d, m.hooks, &log, &m.pressure);
		if (r < 0) {
			log_err(&log, "cannot start the hooks or the pressure monitor: %s", strerror(-r));
			rc = 1;
			goto out;
		}
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
		r = https_provider_start(&m.cfg->providers.https, m.cfg->agent.id, m.d, &log, &m.https);
		if (r < 0) {
			log_err(&log, "cannot start the https provider: %s", strerror(-r));
			rc = 1;
			goto out;
		}
	}
	m.watchdog_fd = watchdog_timer();
	log_notice(&log, "memgrantd %s ready, API on %s", MEMGRANT_VERSION, m.cfg->agent.api_socket);
	sd_notify(0, "READY=1");
	notify_status(&m);
	hooks_fire_agent(m.hooks, m.d, "agent.started");

	r = run(&m);
	if (r < 0) {
		log_err(&log, "main loop: %s", strerror(-r));
		rc = 1;
	}
	sd_notify(0, "STOPPING=1");
	hooks_fire_agent(m.hooks, m.d, "agent.stopping");
out:
	https_provider_stop(m.https);
	channel_provider_stop(m.channel);
	/* end the event streams first: api_stop() waits for their connections */
	if (m.d)
		events_close(daemon_events(m.d));
	api_stop(m.api);
	pressure_stop(m.pressure);
	hooks_free(m.hooks); /* runs what is queued (agent.stopping), at most HOOKS_STOP_GRACE_MS */
	if (m.d)
		daemon_stop(m.d);
	daemon_free(m.d);
	if (m.watchdog_fd >= 0)
		close(m.watchdog_fd);
	close(m.sigfd);
	log_notice(&log, "stopped");
	config_free(m.cfg);
	return rc;
}
