/* SPDX-License-Identifier: MIT */
/*
 * Which configuration keys memgrantd applies live (SIGHUP) and which take
 * effect only at the next start; one table, used by the reload and by
 * `memgrantd --check-config`, so both say the same thing.
 *
 * Live: agent.log_level, agent.api_body_limit, policy.*, hooks, pressure.
 * At a restart: agent.id, agent.state_dir, agent.api_socket,
 * agent.api_group, agent.api_socket_mode, backend.*, providers.*.
 *
 * Contract: pure functions of their arguments; no I/O, no allocation.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct mg_config;

/* The keys that differ between OLD and NEW, comma-separated into LIVE (applied
 * by a reload) and RESTART (need a restart); "" when none.  Returns the
 * number of changed keys. */
size_t reload_diff(const struct mg_config *old, const struct mg_config *new, char *live, size_t live_len,
		   char *restart, size_t restart_len);
/* Whether KEY ("hooks", "pressure", "agent.api_body_limit", ...) differs. */
bool reload_changed(const struct mg_config *old, const struct mg_config *new, const char *key);
/* Every key that needs a restart, comma-separated. */
void reload_restart_keys(char *buf, size_t len);
