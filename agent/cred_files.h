/* SPDX-License-Identifier: MIT */
/*
 * memgrantd's credential files (docs/security.md, "Credentials"): the list
 * fixed at start from the configuration, which of them the root helper
 * hands out, and the agent's end of the helper's credential channel
 * (hotplug/privsep/cred_channel.h).  The store (lib/credstore.h) is what the HTTPS
 * provider and the webhooks read through.
 *
 * agent_creds_prepare() runs as root before the helper starts: it lists the
 * files and marks served those that no folder of the agent's user can
 * change (others the agent reads itself, logged once).  PATHS gets the
 * helper's list (NULL for a file it does not serve).
 * agent_creds_connect() takes the channel once the helper runs.
 * agent_creds_reload() (SIGHUP) makes the readers read the files again at
 * their next use and warns about files the new configuration names that are
 * not in the list (they need a restart).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "hotplug/privsep/cred_channel.h"
#include "lib/credstore.h"
#include "lib/log.h"

struct agent_creds {
	struct cred_store store;
	struct ph_cred_client client;
	bool connected;
	const char *paths[PH_CRED_MAX]; /* the helper's list (into store) */
};

int agent_creds_prepare(struct agent_creds *ac, const struct mg_config *cfg, const struct mg_log *log);
void agent_creds_connect(struct agent_creds *ac, int cred_fd);
void agent_creds_reload(struct agent_creds *ac, const struct mg_config *nc, const struct mg_log *log);
/* Whether NC names a webhook secret (the hooks read them again at a reload). */
bool agent_creds_has_secrets(const struct mg_config *nc);
void agent_creds_done(struct agent_creds *ac);
