/* SPDX-License-Identifier: MIT */
/*
 * Building the hotplug backend the configuration names (sysfs, or the sim,
 * created with its faults when missing), and the takeover of
 * auto_online_blocks: when the agent owns onlining it sets "offline" at
 * start and puts the operator's value back at a clean stop.  The old value
 * is saved in STATE_DIR first, so a crash in between still restores it at
 * the next clean stop.
 *
 * Contract: backend_open() is the one place a backend is built (a wrapper
 * may put a privileged helper behind it); it logs what went wrong and
 * returns 0 or -errno.  The onlining functions run where no other thread
 * writes to the kernel (recovery on the executor thread; the stop after the
 * executor was joined) and only log failures.
 */
#pragma once

#include <stddef.h>

struct engine;
struct hp_backend;
struct mg_config;
struct mg_sim_config;
struct mg_log;
struct helper;

/* With HELPER_FD >= 0 (always closed): reads here, writes through the
 * privileged helper at its end, which opened (and for the sim created) the
 * machine already.  With -1: the backend itself, the sim created when missing. */
int backend_open(const struct mg_config *cfg, const struct mg_log *log, int helper_fd, struct hp_backend **out);
/* Creates the sim S describes when it is missing and applies its faults (the
 * helper does this before the split; tests and demos). */
int backend_prepare_sim(const struct mg_sim_config *s, const struct mg_log *log);
/* Starts the privileged helper PATH (hotplug/privsep/spawn.h) for the
 * backend CFG names, the sim prepared first, with the credential list
 * CRED_PATHS (N_CREDS entries, may be 0; spawn.h); logs what failed. */
int backend_start_helper(const struct mg_config *cfg, const struct mg_log *log, const char *path,
			 const char *const *cred_paths, size_t n_creds, struct helper *out);
void backend_take_over_onlining(struct engine *e);
void backend_give_back_onlining(struct engine *e);
