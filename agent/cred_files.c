/* SPDX-License-Identifier: MIT */
/*
 * memgrantd's credential files (contract in cred_files.h).
 */
#include "agent/cred_files.h"

#include <grp.h>
#include <unistd.h>

#include "hotplug/privsep/sandbox.h"
#include "lib/util.h"

static int fetch(void *ctx, unsigned index, int *fd)
{
	return ph_cred_fetch(ctx, index, fd);
}

int agent_creds_prepare(struct agent_creds *ac, const struct mg_config *cfg, const struct mg_log *log)
{
	uid_t uid = 0;
	gid_t groups[2];
	size_t n_groups = 0;
	char why[512] = "";
	int r;

	*ac = (struct agent_creds){ .client = { .fd = -1 } };
	r = config_credentials(cfg, &ac->store);
	if (r < 0)
		return r;
	if (ac->store.n > PH_CRED_MAX) {
		log_err(log, "%zu credential files configured, at most %d", ac->store.n, PH_CRED_MAX);
		return -E2BIG;
	}
	if (geteuid() == 0) {
		gid_t gid;

		if (sandbox_lookup_user(cfg->agent.user, &uid, &gid, why, sizeof(why)) == 0) {
			struct group gr, *res = NULL;
			char buf[16384];

			groups[n_groups++] = gid;
			/* the API group counts even when the start would refuse it */
			if (cfg->agent.api_group && getgrnam_r(cfg->agent.api_group, &gr, buf, sizeof(buf), &res) == 0 &&
			    res && gr.gr_gid != gid)
				groups[n_groups++] = gr.gr_gid;
		}
		/* an unknown user: the drop fails later and says so */
	}
	for (size_t i = 0; i < ac->store.n; i++) {
		struct cred_file *f = &ac->store.files[i];

		/* not root: the helper is this user, it may as well serve */
		f->served = uid == 0 || ph_cred_path_safe(f->path, uid, groups, n_groups, why, sizeof(why));
		if (!f->served)
			log_notice(log, "%s %s: %s; the root helper does not hand it out, the agent reads it itself "
				   "(see Credentials in docs/security.md)", f->key, f->path, why);
		ac->paths[i] = f->served ? f->path : NULL;
	}
	return 0;
}

void agent_creds_connect(struct agent_creds *ac, int cred_fd)
{
	if (cred_fd < 0)
		return;
	ph_cred_client_init(&ac->client, cred_fd);
	ac->connected = true;
	ac->store.fetch = fetch;
	ac->store.fetch_ctx = &ac->client;
}

void agent_creds_reload(struct agent_creds *ac, const struct mg_config *nc, const struct mg_log *log)
{
	struct cred_store fresh = { 0 };

	cred_store_bump(&ac->store);
	if (config_credentials(nc, &fresh) < 0)
		return;
	for (size_t i = 0; i < fresh.n; i++)
		if (!cred_store_find(&ac->store, fresh.files[i].path))
			log_warn(log, "%s: %s is not one of the credential files fixed at the start: the root helper "
				 "opens it only after a restart (systemctl restart memgrantd)",
				 fresh.files[i].key, fresh.files[i].path);
	cred_store_free(&fresh);
}

bool agent_creds_has_secrets(const struct mg_config *nc)
{
	for (size_t i = 0; i < nc->n_hooks; i++)
		if (nc->hooks[i].secret_file)
			return true;
	return false;
}

void agent_creds_done(struct agent_creds *ac)
{
	if (ac->connected)
		ph_cred_client_done(&ac->client);
	ac->connected = false;
	ac->store.fetch = NULL;
	cred_store_free(&ac->store);
}
