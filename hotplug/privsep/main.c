/* SPDX-License-Identifier: MIT */
/*
 * memgrant-helper: memgrantd's privileged helper (hotplug/privsep/spawn.h,
 * docs/security.md).  memgrantd executes it with its end of the socketpair
 * as fd 3; it is not meant to be run by hand.
 *
 *   memgrant-helper --sysfs ROOT | --sim STATE  [--seccomp kill|log|off] [--log-level N]
 *                   [--credential PATH | --credential ""]...
 *
 * Each --credential names, in order, a file of the credential list
 * (cred_channel.h) it serves on fd 5; an empty one holds the place of a file it
 * does not serve.
 * It opens the backend for writing, drops every capability, loads its
 * seccomp filter, says hello and serves hotplug/privsep/helper_serve.h's requests
 * until the socket closes (exit 0).  A malformed request: one log line,
 * exit 2.  Anything failing before the hello: one log line, exit 1.
 * Being its own program, it maps none of the libraries that parse outside
 * input (libcurl, OpenSSL, libmicrohttpd, libyaml).
 */
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>

#include "hotplug/privsep/helper_serve.h"
#include "hotplug/privsep/cred_channel.h"
#include "hotplug/sim/sim.h"
#include "lib/util.h"
#include "lib/log.h"
#include "hotplug/privsep/sandbox.h"

#define HELPER_FD 3

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sysfs", required_argument, NULL, 'r' },
		{ "sim", required_argument, NULL, 's' },
		{ "seccomp", required_argument, NULL, 'S' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "credential", required_argument, NULL, 'C' },
		{ 0 }
	};
	const char *root = NULL, *sim = NULL, *bad_seccomp = NULL;
	enum mg_seccomp_action act = MG_SECCOMP_KILL;
	_cleanup_backend_ struct hp_backend *w = NULL;
	_cleanup_hp_path_ struct hp_path *tree = NULL;
	struct mg_log log;
	const char *cred_paths[PH_CRED_MAX];
	struct ph_cred_list creds = { .fd = -1, .paths = cred_paths };
	bool too_many = false;
	int level = LOG_INFO, c, r;
	sigset_t none;
	char why[256] = "", walk_why[512] = "";

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': root = optarg; break;
		case 's': sim = optarg; break;
		case 'S':
			if (streq(optarg, "kill"))
				act = MG_SECCOMP_KILL;
			else if (streq(optarg, "log"))
				act = MG_SECCOMP_LOG;
			else if (streq(optarg, "off"))
				act = MG_SECCOMP_OFF; /* memgrantd warned at its start */
			else
				bad_seccomp = optarg; /* refused once the log is set up */
			break;
		case 'l': level = atoi(optarg); break;
		case 'C':
			if (creds.n == PH_CRED_MAX) {
				too_many = true;
				break;
			}
			cred_paths[creds.n++] = *optarg ? optarg : NULL;
			break;
		default: return 1;
		}
	}
	log_init(&log, "memgrantd", level);
	if (!root == !sim || optind != argc) {
		log_err(&log, "privileged helper: usage: memgrant-helper --sysfs ROOT | --sim STATE (started by memgrantd)");
		return 1;
	}
	if (too_many) {
		log_err(&log, "privileged helper: more than %d --credential files", PH_CRED_MAX);
		return 1;
	}
	if (bad_seccomp) {
		log_err(&log, "privileged helper: --seccomp %s: expected kill, log or off", bad_seccomp);
		return 1;
	}
	/* memgrantd stops it by closing the socket, after the operation in
	 * progress and the restore of auto_online_blocks */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* root writes the sim only in a folder nobody else may write, reached
	 * through folders nobody else may change (links followed by hand) */
	r = sim ? sim_check_private(sim, NULL, 0) : 0;
	if (r == 0 && sim && geteuid() == 0) {
		_cleanup_close_ int pinned = -1;

		if (ph_open_walk(sim, O_PATH, &pinned, walk_why, sizeof(walk_why)) == -EACCES)
			r = -EACCES; /* walk_why names the folder, its owner and mode */
		else
			walk_why[0] = '\0';
	}
	if (r == 0)
		r = sim ? hp_sim_open(sim, &w) : hp_sysfs_open(root, &w);
	if (r == -EACCES && walk_why[0]) {
		log_err(&log, "cannot open the sim %s: %s", sim, walk_why);
	} else if (r < 0 && sim) {
		char what[512] = "";
		if (sim_check_private(sim, what, sizeof(what)) == 0)
			sim_check_file(sim, what, sizeof(what)); /* says what is wrong with the file */
		log_err(&log, "cannot open the sim %s: %s", sim, what[0] ? what : strerror(-r));
	} else if (r < 0) {
		log_err(&log, "privileged helper: cannot open %s: %s", root, strerror(-r));
	}
	if (r == 0) {
		r = hp_path_open(w->root, &tree);
		if (r < 0)
			log_err(&log, "privileged helper: cannot open %s: %s", w->root, strerror(-r));
	}
	if (r == 0) {
		r = sandbox_drop_helper(why, sizeof(why));
		if (r == 0)
			r = sandbox_filter_helper(sim != NULL, act, why, sizeof(why));
		if (r < 0)
			log_err(&log, "privileged helper: %s", why);
	}
	if (privhelper_hello(HELPER_FD, r) < 0 || r < 0)
		return 1;
	malloc_trim(0); /* building the filter left freed heap behind */
	/* memgrantd passes the credential channel only with a list */
	if (creds.n > 0)
		creds.fd = PH_CRED_FD;
	creds.log = &log;
	r = privhelper_serve(HELPER_FD, &creds, w, tree, why, sizeof(why));
	if (r == 0)
		return 0;
	if (r == -EPROTO)
		log_err(&log, "privileged helper: refusing a malformed request and stopping: %s", why);
	else
		log_err(&log, "privileged helper: stopping: %s", why);
	return 2;
}
