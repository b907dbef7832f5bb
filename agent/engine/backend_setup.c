/* SPDX-License-Identifier: MIT */
/*
 * Backend construction and the auto_online_blocks takeover.  See
 * backend_setup.h.
 */
#include "agent/engine/backend_setup.h"

#include "config/config.h"
#include "hotplug/privsep/cred_channel.h"
#include "hotplug/privsep/helper_client.h"
#include "hotplug/privsep/spawn.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/size.h"
#include "lib/util.h"
#include "agent/engine/engine_impl.h"

#include <fcntl.h>

#define AUTO_ONLINE_SAVE "auto_online_blocks.orig"

static int open_through_helper(const struct mg_config *cfg, const struct mg_log *log, int helper_fd,
			       struct hp_backend **out)
{
	struct hp_backend *reader = NULL;
	int r;

	if (cfg->backend.type == MG_BACKEND_SIM) {
		r = hp_sim_open(cfg->backend.sim.state, &reader);
		if (r < 0)
			log_err(log, "cannot open the sim %s for reading: %s", cfg->backend.sim.state, strerror(-r));
	} else {
		r = hp_sysfs_open(cfg->backend.root, &reader);
		if (r < 0)
			log_err(log, "cannot open the sysfs tree under %s for reading: %s", cfg->backend.root ? cfg->backend.root : "/",
				strerror(-r));
	}
	if (r < 0) {
		close(helper_fd);
		return r;
	}
	r = hp_privsep_open(helper_fd, reader, out);
	if (r < 0)
		log_err(log, "cannot talk to the privileged helper: %s", strerror(-r));
	return r;
}

/* An existing sim keeps the machine it was made as (its blocks have a
 * state): settings of backend.sim that differ are said, with the way to
 * apply them, never ignored without a word. */
static void warn_sim_differs(const struct mg_sim_config *s, const struct mg_log *log)
{
	struct sim_params now;
	char a[32], b[32];

	if (sim_read_params(s->state, &now) < 0)
		return; /* the open that follows says what is wrong with it */
#define SIM_DIFFERS(key, conf, made)                                                                          \
	log_warn(log, "backend.sim." key ": %s in the configuration, but the sim %s was made with %s and keeps " \
		 "it; to apply it, stop memgrantd, remove the sim (rm -r %s %s.d %s.lock %s.tree) and start "   \
		 "again: memgrantd makes it anew, every block back as at boot",                                 \
		 conf, s->state, made, s->state, s->state, s->state, s->state)
	if (s->block_size != now.block_size) {
		size_format(s->block_size, a, sizeof(a));
		size_format(now.block_size, b, sizeof(b));
		SIM_DIFFERS("block_size", a, b);
	}
	if (s->online != now.online_bytes) {
		size_format(s->online, a, sizeof(a));
		size_format(now.online_bytes, b, sizeof(b));
		SIM_DIFFERS("online", a, b);
	}
	if (s->standby != now.standby_bytes) {
		size_format(s->standby, a, sizeof(a));
		size_format(now.standby_bytes, b, sizeof(b));
		SIM_DIFFERS("standby", a, b);
	}
	if (s->memmap_on_memory_supported != now.memmap_supported)
		SIM_DIFFERS("memmap_on_memory_supported", s->memmap_on_memory_supported ? "true" : "false",
			    now.memmap_supported ? "true" : "false");
	if (s->has_firmware != now.has_firmware)
		SIM_DIFFERS("has_firmware", s->has_firmware ? "true" : "false", now.has_firmware ? "true" : "false");
#undef SIM_DIFFERS
}

int backend_prepare_sim(const struct mg_sim_config *s, const struct mg_log *log)
{
	char why[512] = "";
	int r;

	/* its helper writes as root: never in a folder that others may write,
	 * sticky or not (memgrantctl's sim may live in /tmp) */
	r = sim_check_private(s->state, why, sizeof(why));
	if (r == 0 && geteuid() == 0) {
		/* ... reached through folders nobody else may change: a link the
		 * agent's user plants on the way would lead root elsewhere */
		_cleanup_close_ int pinned = -1;

		r = ph_open_walk(s->state, O_PATH, &pinned, why, sizeof(why));
		if (r != -EACCES) { /* a missing sim is made below */
			r = 0;
			why[0] = '\0';
		}
	}
	if (r < 0) {
		log_err(log, "cannot use the sim %s: %s", s->state, why[0] ? why : strerror(-r));
		return r;
	}
	if (access(s->state, F_OK) < 0) {
		_cleanup_free_ char *dir = strdup(s->state);
		char *slash = dir ? strrchr(dir, '/') : NULL;

		/* the folder, when missing, is made like the packages' (0755, this
		 * user: root when started as root) */
		if (slash && slash != dir) {
			*slash = '\0';
			r = mkdir_p(dir, 0755);
			if (r < 0) {
				log_err(log, "cannot create the sim's folder %s: %s", dir, strerror(-r));
				return r;
			}
		}
		struct sim_params p = {
			.online_bytes = s->online,
			.standby_bytes = s->standby,
			.block_size = s->block_size,
			.memmap_supported = s->memmap_on_memory_supported,
			.has_firmware = s->has_firmware,
			.used_bytes = s->used,
			.auto_online = mem_auto_online_name(s->auto_online_blocks),
			.tree = s->tree,
		};
		r = sim_init(s->state, &p);
		if (r < 0) {
			sim_check_place(s->state, s->tree, why, sizeof(why));
			log_err(log, "cannot create the sim %s: %s", s->state, why[0] ? why : strerror(-r));
			return r;
		}
		log_notice(log, "created sim machine %s", s->state);
	} else {
		warn_sim_differs(s, log);
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
			sim_check_file(s->state, why, sizeof(why));
			log_err(log, "cannot set the faults of the sim %s: %s", s->state, why[0] ? why : strerror(-r));
			return r;
		}
	}
	return 0;
}

int backend_start_helper(const struct mg_config *cfg, const struct mg_log *log, const char *path,
			 const char *const *cred_paths, size_t n_creds, struct helper *out)
{
	struct helper_spec spec = { .state_dir = cfg->agent.state_dir, .root = cfg->backend.root,
				    .seccomp = cfg->agent.seccomp, .cred_paths = cred_paths, .n_creds = n_creds };

	if (cfg->backend.type == MG_BACKEND_SIM) {
		int r = backend_prepare_sim(&cfg->backend.sim, log);
		if (r < 0)
			return r;
		spec.sim_state = cfg->backend.sim.state;
	}
	return helper_start(&spec, log, path, out);
}

int backend_open(const struct mg_config *cfg, const struct mg_log *log, int helper_fd, struct hp_backend **out)
{
	if (helper_fd >= 0)
		return open_through_helper(cfg, log, helper_fd, out);
	if (cfg->backend.type == MG_BACKEND_SIM) {
		const struct mg_sim_config *s = &cfg->backend.sim;
		int r = backend_prepare_sim(s, log);

		if (r < 0)
			return r;
		r = hp_sim_open(s->state, out);
		if (r < 0) {
			char why[256] = "";
			sim_check_file(s->state, why, sizeof(why));
			log_err(log, "cannot open the sim %s: %s", s->state, why[0] ? why : strerror(-r));
		}
		return r;
	}
	{
		int r = hp_sysfs_open(cfg->backend.root, out);

		if (r < 0)
			log_err(log, "cannot open the sysfs tree under %s: %s", cfg->backend.root ? cfg->backend.root : "/",
				strerror(-r));
		return r;
	}
}

void backend_take_over_onlining(struct engine *e)
{
	char cur[32] = "", path[4096];
	_cleanup_free_ char *saved = NULL;
	int r;

	r = e->backend->ops->read_auto_online(e->backend, cur, sizeof(cur));
	if (r < 0) {
		log_info(&e->log, "auto_online_blocks not present (%s): nothing to take over", strerror(-r));
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", e->state_dir, AUTO_ONLINE_SAVE);
	if (file_read_all(path, 64, &saved, NULL) == 0) {
		saved[strcspn(saved, "\n")] = '\0';
		snprintf(e->auto_online_saved, sizeof(e->auto_online_saved), "%s", saved);
	} else if (!streq(cur, "offline")) {
		r = file_write_atomic(path, cur, strlen(cur), 0600);
		if (r < 0) {
			log_err(&e->log, "cannot save auto_online_blocks=%s to %s: %s; leaving it as it is", cur, path,
				strerror(-r));
			return;
		}
		snprintf(e->auto_online_saved, sizeof(e->auto_online_saved), "%s", cur);
	}
	if (!streq(cur, "offline")) {
		r = hp_set_auto_online(e->backend, "offline");
		if (r < 0) {
			log_err(&e->log, "cannot set auto_online_blocks=offline: %s; the kernel will online "
				"configured blocks itself", strerror(-r));
			return;
		}
		log_notice(&e->log, "auto_online_blocks was %s: set to offline so the policy chooses each zone "
			   "(restored at exit)", cur);
	}
}

void backend_give_back_onlining(struct engine *e)
{
	char path[4096];
	int r;

	if (!e->auto_online_saved[0])
		return;
	r = hp_set_auto_online(e->backend, e->auto_online_saved);
	if (r < 0) {
		log_err(&e->log, "cannot restore auto_online_blocks=%s: %s", e->auto_online_saved, strerror(-r));
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", e->state_dir, AUTO_ONLINE_SAVE);
	unlink(path);
	log_notice(&e->log, "auto_online_blocks restored to %s", e->auto_online_saved);
}

