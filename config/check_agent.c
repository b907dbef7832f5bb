/* SPDX-License-Identifier: MIT */
/*
 * --check-config as the running agent meets the machine, not as root sees
 * it.  memgrantd started as root keeps a helper and runs everything else as
 * agent.user with agent.user's primary group and agent.api_group
 * (hotplug/privsep/sandbox.h); started as another user, it stays that user.
 *
 * - agent.user must exist (the start looks it up), agent.api_group must exist
 *   (otherwise only root may change grants) and agent.user must belong to it
 *   (the agent gives the API socket that group; the start refuses otherwise).
 * - What the agent opens after giving up root is tried as the agent: a child
 *   process takes the agent's uid, gid and groups and calls access(2), so
 *   modes, owners, ACLs and every folder on the way count as they will.  The
 *   files tried: the configuration file (read again at each reload), the
 *   hooks' programs (executed), the hooks directory and its programs (listed
 *   and executed at each event), the guest channel's port (opened
 *   read-write), /proc/pressure/memory (with a pressure section), and the
 *   folders holding agent.state_dir and agent.api_socket (reached).
 * - agent.api_socket_mode, when given, against the folder the socket lives in:
 *   a mode that lets a class of users connect (group, others) through a
 *   folder that class may not enter is refused, naming both.
 *
 * The credentials (providers.https files, webhook secrets) are checked in
 * check.c, the sim's folders in check_sim.c.
 */
#include "config/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"

static bool in_groups(const struct agent_view *v, gid_t g)
{
	for (size_t i = 0; i < v->n_groups; i++)
		if (v->groups[i] == g)
			return true;
	return false;
}

void cfg_agent_view(struct ctx *c, const struct mg_config *cfg, struct agent_view *v)
{
	const char *user = cfg->agent.user, *group = cfg->agent.api_group;
	struct passwd pw, *pres = NULL;
	struct group gr, *gres = NULL;
	char pbuf[4096], gbuf[16384];
	int r;

	*v = (struct agent_view){ .user = user };
	if (geteuid() == 0 && user && *user && !cfg_bad(c, "agent.user")) {
		r = getpwnam_r(user, &pw, pbuf, sizeof(pbuf), &pres);
		if (r != 0 || !pres) {
			cfg_err_at(c, cfg_where(c, "agent.user"),
				   "agent.user: there is no user '%s' on this machine%s%s%s: memgrantd, started as "
				   "root, runs everything but its helper as this user and would not start; create it "
				   "(the packages' sysusers.d file makes 'memgrant': systemd-sysusers) or name an "
				   "existing user",
				   user, r ? " (" : "", r ? strerror(r) : "", r ? ")" : "");
			return;
		}
		v->uid = pw.pw_uid;
		v->gid = pw.pw_gid;
		v->other = pw.pw_uid != 0;
	} else {
		v->uid = geteuid();
		v->gid = getegid();
	}
	v->groups[v->n_groups++] = v->gid;
	v->known = true;

	if (!group || !*group || cfg_bad(c, "agent.api_group"))
		return;
	r = getgrnam_r(group, &gr, gbuf, sizeof(gbuf), &gres);
	if (r != 0 || !gres) {
		cfg_err_at(c, cfg_where(c, "agent.api_group"),
			   "agent.api_group: there is no group '%s' on this machine: the agent would run, but only "
			   "root could change grants through the local API (members of this group may); create it "
			   "(groupadd %s; the packages' sysusers.d file makes 'memgrant') or name an existing group",
			   group, group);
		return;
	}
	if (gr.gr_gid == v->gid)
		return;
	if (v->other) {
		for (char **m = gr.gr_mem; m && *m; m++)
			if (streq(*m, user)) {
				v->groups[v->n_groups++] = gr.gr_gid;
				return;
			}
		cfg_err_at(c, cfg_where(c, "agent.api_group"),
			   "agent.api_group: the user %s is not a member of the group %s, so memgrantd could not "
			   "give the API socket that group and would not start (usermod -aG %s %s, or name "
			   "another api_group)",
			   user, group, group, user);
	} else if (v->uid != 0) {
		/* the agent is this process: it must be in the group to give it the socket */
		gid_t mine[256];
		int n = getgroups(ARRAY_SIZE(mine), mine);

		for (int i = 0; i < n; i++)
			if (mine[i] == gr.gr_gid) {
				v->groups[v->n_groups++] = gr.gr_gid;
				return;
			}
		cfg_err_at(c, cfg_where(c, "agent.api_group"),
			   "agent.api_group: this process (uid %u, not root: the agent runs as it) is not in the "
			   "group %s, so it could not give the API socket that group; name a group of yours, or "
			   "start memgrantd as root",
			   (unsigned)v->uid, group);
	} else {
		v->groups[v->n_groups++] = gr.gr_gid;
	}
}

/* access(PATH, MODE) as the agent: in a child of its identity when root
 * starts an agent of another uid, else here.  0 or a positive errno. */
int cfg_agent_access(const struct agent_view *v, const char *path, int mode)
{
	int fds[2], st = 0, e = 0;
	pid_t pid;

	if (!v->other)
		return access(path, mode) < 0 ? errno : 0;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return errno;
	pid = fork(); /* --check-config runs before any thread starts */
	if (pid < 0) {
		e = errno;
		close(fds[0]);
		close(fds[1]);
		return e;
	}
	if (pid == 0) {
		close(fds[0]);
		if (setgroups(v->n_groups, v->groups) < 0 || setresgid(v->gid, v->gid, v->gid) < 0 ||
		    setresuid(v->uid, v->uid, v->uid) < 0)
			e = -errno; /* negative: could not become the agent */
		else if (access(path, mode) < 0)
			e = errno;
		if (write(fds[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &e, sizeof(e)) != (ssize_t)sizeof(e))
		e = -EIO;
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return e;
}

/* Whether the agent may search (MODE X_OK), read or write ST by its bits. */
static bool bits_allow(const struct agent_view *v, const struct stat *st, mode_t want)
{
	mode_t m = st->st_mode;

	if (v->uid == 0)
		return true;
	if (st->st_uid == v->uid)
		return (m & (want << 6)) == (want << 6);
	if (in_groups(v, st->st_gid))
		return (m & (want << 3)) == (want << 3);
	return (m & want) == want;
}

static void owner_text(const struct stat *st, char *buf, size_t len)
{
	struct passwd pw, *pres = NULL;
	struct group gr, *gres = NULL;
	char pb[1024], gb[4096], un[32], gn[32];

	snprintf(un, sizeof(un), "%u", (unsigned)st->st_uid);
	snprintf(gn, sizeof(gn), "%u", (unsigned)st->st_gid);
	getpwuid_r(st->st_uid, &pw, pb, sizeof(pb), &pres);
	getgrgid_r(st->st_gid, &gr, gb, sizeof(gb), &gres);
	snprintf(buf, len, "mode %04o, owner %s:%s", (unsigned)(st->st_mode & 07777), pres ? pres->pw_name : un,
		 gres ? gres->gr_name : gn);
}

/* Which part of PATH stops the agent: the first folder on the way it may
 * not search, or PATH itself, with its mode and owner. */
static void denied_text(const struct agent_view *v, const char *path, char *buf, size_t len)
{
	_cleanup_free_ char *copy = strdup(path);
	char own[160];
	struct stat st;

	if (copy && path[0] == '/') {
		for (char *s = strchr(copy + 1, '/'); s; s = strchr(s + 1, '/')) {
			*s = '\0';
			if (stat(copy, &st) == 0 && S_ISDIR(st.st_mode) && !bits_allow(v, &st, S_IXOTH)) {
				owner_text(&st, own, sizeof(own));
				snprintf(buf, len, "the folder %s (%s) is closed to it", copy, own);
				return;
			}
			*s = '/';
		}
	}
	if (stat(path, &st) == 0) {
		owner_text(&st, own, sizeof(own));
		snprintf(buf, len, "%s has %s", path, own);
	} else {
		snprintf(buf, len, "%s", path);
	}
}

static const char *who(const struct agent_view *v, char *buf, size_t len)
{
	if (v->other)
		snprintf(buf, len, "the user %s", v->user);
	else
		snprintf(buf, len, "uid %u", (unsigned)v->uid);
	return buf;
}

/* KEY (idx WHERE) names PATH, which the agent opens with MODE: say what
 * stops it.  Returns whether it may. */
static bool try_as_agent(struct ctx *c, const struct agent_view *v, int where, const char *key, const char *path,
			 int mode, const char *what, const char *fix)
{
	char why[512], name[96];
	int e = cfg_agent_access(v, path, mode);

	if (e == 0)
		return true;
	if (e < 0) {
		cfg_err_at(c, where, "%s%s%s: cannot take the agent's identity (uid %u) to try it: %s", key ? key : "",
			   key ? ": " : "", path, (unsigned)v->uid, strerror(-e));
		return false;
	}
	if (e == EACCES || e == EPERM)
		denied_text(v, path, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%s (%s)", strerror(e), errno_name(e));
	cfg_err_at(c, where, "%s%s%s: the agent %s as %s, which may not: %s%s%s", key ? key : "", key ? ": " : "", path,
		   what, who(v, name, sizeof(name)), why, fix ? "; " : "", fix ? fix : "");
	return false;
}

static bool exists(const char *path, struct stat *st)
{
	return path && stat(path, st) == 0;
}

/* run-parts names, as the hooks directory takes them (providers/hooks/hooks.c) */
static bool hook_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
		      *s == '-'))
			return false;
	return true;
}

/* The hooks directory memgrantd uses: hooks.d next to the configuration
 * file (providers/hooks/hooks.h, hooks_dir_for_config()). */
static char *hooks_dir(const char *config_path)
{
	_cleanup_free_ char *abs = realpath(config_path, NULL);
	char *out = NULL;

	if (!abs)
		return NULL;
	if (asprintf(&out, "%s/hooks.d", dirname(abs)) < 0)
		return NULL;
	return out;
}

static void check_hooks_dir(struct ctx *c, const struct agent_view *v, const char *dir)
{
	DIR *d;
	struct dirent *de;
	struct stat st;

	if (!exists(dir, &st) || !S_ISDIR(st.st_mode))
		return;
	if (!try_as_agent(c, v, 0, NULL, dir, R_OK | X_OK, "lists it at each event to run its programs", NULL))
		return;
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL;

		if (!hook_name_ok(de->d_name) || fstatat(dirfd(d), de->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode) ||
		    !(st.st_mode & 0111) || asprintf(&path, "%s/%s", dir, de->d_name) < 0)
			continue;
		try_as_agent(c, v, 0, NULL, path, X_OK, "runs it at each event",
			     "the agent skips programs it may not execute");
	}
	closedir(d);
}

/* The folder of the API socket must let in whom a configured socket mode
 * lets in.  (The default, 0660, in a private folder is the usual test set-up,
 * and the packages' /run/memgrant is 0755.) */
static void check_socket_folder(struct ctx *c, const struct mg_config *cfg)
{
	_cleanup_free_ char *copy = cfg->agent.api_socket ? strdup(cfg->agent.api_socket) : NULL;
	const char *mode_s = cfg->agent.api_socket_mode;
	unsigned long mode;
	struct stat st;
	char own[160];
	const char *dir;

	if (!copy || !mode_s || !cfg_seen_get(c, "agent.api_socket_mode") || cfg_bad(c, "agent.api_socket_mode") ||
	    cfg_bad(c, "agent.api_socket"))
		return;
	mode = strtoul(mode_s, NULL, 8);
	dir = dirname(copy);
	if (!exists(dir, &st) || !S_ISDIR(st.st_mode))
		return; /* memgrantd creates it (0755) */
	owner_text(&st, own, sizeof(own));
	if ((mode & 0006) && !(st.st_mode & S_IXOTH))
		cfg_err_at(c, cfg_where(c, "agent.api_socket_mode"),
			   "agent.api_socket_mode: %s lets every user connect, but the socket's folder %s (%s) "
			   "lets only its owner and group in: open the folder (chmod o+x %s; for /run/memgrant "
			   "a tmpfiles.d line 'd /run/memgrant 0755 memgrant memgrant -') or use 0660",
			   mode_s, dir, own, dir);
	else if ((mode & 0060) && !(st.st_mode & S_IXOTH) && !(st.st_mode & S_IXGRP))
		cfg_err_at(c, cfg_where(c, "agent.api_socket_mode"),
			   "agent.api_socket_mode: %s lets the group %s connect, but the socket's folder %s (%s) "
			   "lets only its owner in: open the folder (chmod 0755 %s)",
			   mode_s, cfg->agent.api_group, dir, own, dir);
}

void cfg_check_agent(struct ctx *c, const struct mg_config *cfg, const struct agent_view *v)
{
	struct stat st;

	check_socket_folder(c, cfg);
	/* the agent as root (agent.user: root, for tests) or unknown: nothing to judge */
	if (!v->known || v->uid == 0)
		return;
	if (cfg->source && exists(cfg->source, &st) && S_ISREG(st.st_mode))
		try_as_agent(c, v, 0, NULL, cfg->source, R_OK, "reads it again at every reload (SIGHUP)",
			     "make it readable to the agent (chmod 0644; it holds no secrets: keys and tokens "
			     "are files of their own)");
	if (cfg->source) {
		_cleanup_free_ char *dir = hooks_dir(cfg->source);

		if (dir)
			check_hooks_dir(c, v, dir);
	}
	if (cfg->providers.channel.enabled && exists(cfg->providers.channel.path, &st) &&
	    !cfg_bad(c, "providers.channel.path"))
		try_as_agent(c, v, cfg_where(c, "providers.channel.path"), "providers.channel.path",
			     cfg->providers.channel.path, R_OK | W_OK, "opens it read-write",
			     "the packages' udev rule (60-memgrant.rules) gives memgrant ports to the group memgrant");
	if (cfg->pressure.enabled && exists("/proc/pressure/memory", &st))
		try_as_agent(c, v, cfg_where(c, "pressure"), "pressure", "/proc/pressure/memory", R_OK,
			     "reads it every few seconds", NULL);
	/* the state directory and the socket's folder become the agent's at the
	 * start; the folders that hold them must let it through */
	for (size_t i = 0; i < 2; i++) {
		const char *key = i ? "agent.api_socket" : "agent.state_dir";
		_cleanup_free_ char *copy = strdup(i ? cfg->agent.api_socket : cfg->agent.state_dir);
		char *parent;

		if (!copy || cfg_bad(c, key))
			continue;
		parent = dirname(copy);
		if (i)
			parent = dirname(parent); /* past the socket's own folder */
		if (exists(parent, &st))
			try_as_agent(c, v, cfg_where(c, key), key, parent, X_OK, "must pass through it", NULL);
	}
}
