/* SPDX-License-Identifier: MIT */
/*
 * Live and restart-only configuration keys.  See reload.h.
 */
#include "agent/reload.h"

#include <string.h>

#include "config/config.h"
#include "lib/util.h"

static bool str_differ(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

static bool ids_differ(const struct mg_id_list *a, const struct mg_id_list *b)
{
	return a->n != b->n || (a->n && memcmp(a->ids, b->ids, a->n * sizeof(*a->ids)) != 0);
}

static bool trigger_differ(const struct mg_psi_trigger *a, const struct mg_psi_trigger *b)
{
	return a->set != b->set || a->kind != b->kind || a->window_s != b->window_s || a->above != b->above ||
	       a->threshold_centi != b->threshold_centi;
}

#define F(field) (a->field != b->field)
#define S(field) str_differ(a->field, b->field)

static bool sim_differ(const struct mg_config *a, const struct mg_config *b)
{
	return F(backend.sim.present) || S(backend.sim.state) || F(backend.sim.online) || F(backend.sim.standby) ||
	       F(backend.sim.block_size) || F(backend.sim.memmap_on_memory_supported) ||
	       F(backend.sim.has_firmware) || F(backend.sim.auto_online_blocks) || F(backend.sim.used) ||
	       S(backend.sim.tree) || ids_differ(&a->backend.sim.faults.configure_eio, &b->backend.sim.faults.configure_eio) ||
	       ids_differ(&a->backend.sim.faults.offline_ebusy, &b->backend.sim.faults.offline_ebusy) ||
	       F(backend.sim.faults.latency_ms);
}

static bool https_differ(const struct mg_config *a, const struct mg_config *b)
{
	return F(providers.https.enabled) || S(providers.https.url) || S(providers.https.ca_file) ||
	       S(providers.https.cert_file) || S(providers.https.key_file) || S(providers.https.token_file) ||
	       F(providers.https.wait_ms) || F(providers.https.insecure_http);
}

static bool hooks_differ(const struct mg_config *a, const struct mg_config *b)
{
	if (a->n_hooks != b->n_hooks)
		return true;
	for (size_t i = 0; i < a->n_hooks; i++) {
		const struct mg_hook *x = &a->hooks[i], *y = &b->hooks[i];
		if (x->n_events != y->n_events || str_differ(x->exec, y->exec) || str_differ(x->webhook, y->webhook) ||
		    str_differ(x->secret_file, y->secret_file) || x->insecure_http != y->insecure_http ||
		    x->timeout_ms != y->timeout_ms)
			return true;
		for (size_t k = 0; k < x->n_events; k++)
			if (str_differ(x->events[k], y->events[k]))
				return true;
	}
	return false;
}

static bool pressure_differ(const struct mg_config *a, const struct mg_config *b)
{
	return F(pressure.enabled) || trigger_differ(&a->pressure.request_above, &b->pressure.request_above) ||
	       trigger_differ(&a->pressure.release_below, &b->pressure.release_below) || F(pressure.step) ||
	       F(pressure.cooldown_ms);
}

struct key {
	const char *name;
	bool live;
	bool (*differ)(const struct mg_config *a, const struct mg_config *b);
};

#define SCALAR(fn, expr) \
	static bool fn(const struct mg_config *a, const struct mg_config *b) { return expr; }
SCALAR(d_id, S(agent.id))
SCALAR(d_state_dir, S(agent.state_dir))
SCALAR(d_socket, S(agent.api_socket))
SCALAR(d_group, S(agent.api_group))
SCALAR(d_mode, S(agent.api_socket_mode))
SCALAR(d_body, F(agent.api_body_limit))
SCALAR(d_level, F(agent.log_level))
SCALAR(d_user, S(agent.user))
SCALAR(d_seccomp, F(agent.seccomp))
SCALAR(d_type, F(backend.type))
SCALAR(d_root, S(backend.root))
SCALAR(d_own, F(backend.own_onlining))
SCALAR(d_memmap, F(policy.memmap_on_memory))
SCALAR(d_reserve, F(policy.reserve))
SCALAR(d_zone, F(policy.zone))
SCALAR(d_ratio, F(policy.movable_ratio))
SCALAR(d_budget, F(policy.revoke_budget_ms))
SCALAR(d_timeout, F(policy.block_op_timeout_ms))
SCALAR(d_channel, F(providers.channel.enabled) || S(providers.channel.path))

static const struct key keys[] = {
	{ "agent.id", false, d_id },
	{ "agent.state_dir", false, d_state_dir },
	{ "agent.api_socket", false, d_socket },
	{ "agent.api_group", false, d_group },
	{ "agent.api_socket_mode", false, d_mode },
	{ "agent.api_body_limit", true, d_body },
	{ "agent.log_level", true, d_level },
	/* both shape the processes at start: the uid given up to, the filters loaded */
	{ "agent.user", false, d_user },
	{ "agent.seccomp", false, d_seccomp },
	{ "backend.type", false, d_type },
	{ "backend.root", false, d_root },
	{ "backend.own_onlining", false, d_own },
	{ "backend.sim", false, sim_differ },
	{ "policy.memmap_on_memory", true, d_memmap },
	{ "policy.reserve", true, d_reserve },
	{ "policy.zone", true, d_zone },
	{ "policy.movable_ratio", true, d_ratio },
	{ "policy.revoke_budget", true, d_budget },
	{ "policy.block_op_timeout", true, d_timeout },
	{ "providers.https", false, https_differ },
	{ "providers.channel", false, d_channel },
	{ "hooks", true, hooks_differ },
	{ "pressure", true, pressure_differ },
};

static void append(char *buf, size_t len, const char *name)
{
	size_t n = strlen(buf);

	if (len > n)
		snprintf(buf + n, len - n, "%s%s", n ? ", " : "", name);
}

size_t reload_diff(const struct mg_config *old, const struct mg_config *new, char *live, size_t live_len,
		   char *restart, size_t restart_len)
{
	size_t changed = 0;

	live[0] = restart[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		if (!keys[i].differ(old, new))
			continue;
		changed++;
		if (keys[i].live)
			append(live, live_len, keys[i].name);
		else
			append(restart, restart_len, keys[i].name);
	}
	return changed;
}

bool reload_changed(const struct mg_config *old, const struct mg_config *new, const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (streq(keys[i].name, key))
			return keys[i].differ(old, new);
	return false;
}

void reload_restart_keys(char *buf, size_t len)
{
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
		if (!keys[i].live)
			append(buf, len, keys[i].name);
}
