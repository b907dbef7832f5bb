/* SPDX-License-Identifier: MIT */
/*
 * What a configuration that loads would still fail on at run time, for
 * memgrantd --check-config (and so the unit's ExecStartPre): the programs
 * the hooks run, the network, and the folder of the guest channel.  The
 * credential files are check_creds.c's.  check_agent.c checks the agent's identity and
 * tries the files it opens as the agent.  Each problem is a message at the key, as the
 * load's own are; nothing is created or changed.
 */
#include "config/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

/* PATH (the value of KEY) must be a regular file the agent V may execute. */
static void check_executable(struct ctx *c, const struct agent_view *v, const char *key, const char *path)
{
	struct stat st;
	int e;

	if (!path || cfg_bad(c, key))
		return;
	if (stat(path, &st) < 0) {
		e = errno;
		cfg_err_at(c, cfg_where(c, key), "%s: %s: %s (%s); the hook could not run", key, path,
			   e == ENOENT ? "no such file" : strerror(e), errno_name(e));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		cfg_err_at(c, cfg_where(c, key), "%s: %s is not a regular file; the hook could not run", key, path);
		return;
	}
	if (!(st.st_mode & 0111) || (v->uid == 0 && access(path, X_OK) < 0))
		cfg_err_at(c, cfg_where(c, key),
			   "%s: %s is not executable (mode %04o); the hook could not run (chmod +x)", key, path,
			   (unsigned)(st.st_mode & 07777));
	else if (v->known && v->uid != 0 && (e = cfg_agent_access(v, path, X_OK)) != 0)
		cfg_err_at(c, cfg_where(c, key), "%s: %s: the agent (uid %u) may not execute it: %s (mode %04o, owner "
			   "uid %u); the hook could not run", key, path, (unsigned)v->uid,
			   e > 0 ? strerror(e) : "cannot take its identity", (unsigned)(st.st_mode & 07777),
			   (unsigned)st.st_uid);
}

/* The folder of PATH (the value of KEY) must exist. */
static void check_folder_of(struct ctx *c, const char *key, const char *path, const char *hint)
{
	_cleanup_free_ char *copy = path ? strdup(path) : NULL;
	const char *dir;
	struct stat st;

	if (!path || cfg_bad(c, key))
		return;
	if (!copy) {
		c->oom = true;
		return;
	}
	dir = dirname(copy);
	if (stat(dir, &st) < 0)
		cfg_err_at(c, cfg_where(c, key), "%s: the folder %s does not exist; %s", key, dir, hint);
	else if (!S_ISDIR(st.st_mode))
		cfg_err_at(c, cfg_where(c, key), "%s: %s is not a folder; %s", key, dir, hint);
}

/*
 * Whether this process may open IPv4 and IPv6 sockets: under the shipped
 * memgrantd.service it may not (RestrictAddressFamilies=AF_UNIX AF_NETLINK,
 * PrivateNetwork=yes) until the operator adds the network drop-in.  The
 * errno of the refusal, 0 when either family works.
 */
static int network_refused(void)
{
	static const int families[] = { AF_INET6, AF_INET };
	int e = 0;

	for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
		int fd = socket(families[i], SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd >= 0) {
			close(fd);
			return 0;
		}
		e = errno;
	}
	return e == EAFNOSUPPORT || e == EPERM || e == EACCES ? e : 0;
}

/* KEY needs the network: say so when this process has none. */
static void check_network(struct ctx *c, const char *key, int refused)
{
	if (!refused || cfg_bad(c, key))
		return;
	cfg_err_at(c, cfg_where(c, key),
		   "%s: this process may not open network sockets (%s): memgrantd.service runs without network "
		   "unless its network drop-in is installed (see NETWORK in memgrantd(8))",
		   key, errno_name(refused));
}

void cfg_check_runtime(struct ctx *c, const struct mg_config *cfg)
{
	int refused = cfg->providers.https.enabled || cfg->n_hooks ? network_refused() : 0;
	struct agent_view v;

	cfg_agent_view(c, cfg, &v);
	cfg_check_agent(c, cfg, &v);
	cfg_check_sim(c, cfg, &v);

	if (cfg->providers.https.enabled)
		check_network(c, "providers.https.url", refused);
	/* the TLS files, the token and webhook secrets: check_creds.c */
	cfg_check_credentials(c, cfg, &v);
	if (cfg->providers.channel.enabled)
		check_folder_of(c, "providers.channel.path", cfg->providers.channel.path,
				"this guest has no such virtio-serial port (add the channel to the domain, "
				"see memgrant-host(1))");
	for (size_t i = 0; i < cfg->n_hooks; i++) {
		const struct mg_hook *h = &cfg->hooks[i];
		char key[64];

		snprintf(key, sizeof(key), "hooks[%zu].exec", i);
		check_executable(c, &v, key, h->exec);
		if (h->webhook) {
			snprintf(key, sizeof(key), "hooks[%zu].webhook", i);
			check_network(c, key, refused);
		}
	}
}
