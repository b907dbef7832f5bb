/* SPDX-License-Identifier: MIT */
/*
 * The privileged helper process (docs/security.md).
 *
 * helper_start() forks it before anything else of the agent runs and
 * executes PATH (memgrant-helper, hotplug/privsep/main.c) with only stderr
 * and its end of a socketpair (fd 3): a fresh program that maps none of the
 * libraries parsing outside input.  It opens the configured backend for
 * writing, drops every capability, loads its seccomp filter, says hello and
 * serves hotplug/privsep/helper_serve.h's requests until the socket closes.  It
 * ignores SIGTERM, SIGINT and SIGHUP: the agent stops it by closing the
 * socket once the block operation in progress and the restore of
 * auto_online_blocks are done, and dies with the agent (PR_SET_PDEATHSIG)
 * when the agent is killed.  A sim the configuration describes is created
 * (and its faults set) here, before the fork.
 *
 * With a credential list, a second socketpair (the helper's fd 5) carries
 * cred_channel.h's requests; its other end is OUT->cred_fd.
 *
 * One helper per state directory: it holds an flock on
 * STATE_DIR/helper.lock for its whole life (fd 4), and helper_start()
 * waits (up to 30 s, then -EBUSY) for a helper left by a killed memgrantd
 * to exit, so that recovery reads the kernel only after the last write of
 * the previous run has landed.
 *
 * In the parent, helper_start() returns once the helper said hello, i.e.
 * its backend is open; the socket then goes to hp_privsep_open().
 * Must be called while the process has a single thread.
 *
 * Failures are logged once, with their context, where they happen: here
 * (the lock, the fork), or by the helper itself on the shared stderr (the
 * backend it cannot open, the sandbox); the caller only stops.
 */
#pragma once

#include <sys/types.h>

#include <stdbool.h>

#include "hotplug/privsep/sandbox.h"
#include "lib/log.h"

struct helper {
	pid_t pid;
	int fd;      /* the agent's end of the socketpair */
	int cred_fd; /* the agent's end of the credential channel (cred_channel.h), -1: no list */
};

/* What the helper serves: the sim's state file (created by the caller
 * beforehand) or the sysfs tree under ROOT. */
struct helper_spec {
	const char *state_dir;         /* STATE_DIR/helper.lock */
	const char *sim_state;         /* the sim's state file, or NULL: sysfs */
	const char *root;              /* sysfs: "/" or a test tree */
	enum mg_seccomp_action seccomp;
	/* the credential list (cred_channel.h), fixed for the helper's life; a NULL
	 * entry holds the place of a file it does not serve */
	const char *const *cred_paths;
	size_t n_creds;                /* at most PH_CRED_MAX */
};

int helper_start(const struct helper_spec *spec, const struct mg_log *log, const char *path, struct helper *out);

/* Waits for the helper to end (the socket must be closed by then) and logs
 * how it ended when that was not a clean exit.  0 for a clean exit. */
int helper_reap(struct helper *h, const struct mg_log *log);
/* helper_reap() without the log line: HOW says how it ended ("killed by
 * Killed", "exited with status 2"); 0 for a clean exit, -ECHILD for any
 * other end, or waitpid's -errno. */
int helper_wait(struct helper *h, char *how, size_t len);
