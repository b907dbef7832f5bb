/* SPDX-License-Identifier: MIT */
/*
 * --check-config for the sim backend: where its files live must suit both
 * processes of the split (docs/security.md, "The sim").
 *
 * The helper writes the sim (as root without capabilities when memgrantd
 * starts as root, so only by owner and mode bits; else as this user); the
 * agent only reads it.  So the folder of backend.sim.state, and the tree
 * (backend.sim.tree, default STATE.tree) when it exists, must be folders
 * that the helper may write, that belong to the helper's user or root, that
 * nobody else may write (the sim refuses any other at its start), and that
 * the agent may read but not write; a folder on the way that the agent may
 * write would let it swap them between starts.  A missing folder is fine
 * when its parent is: memgrantd creates it at the start (0755, its user).
 * Each problem names the key, the path, its mode and owner, and the fix.
 */
#include "config/internal.h"

#include <errno.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/util.h"

#define SIM_FOLDER_FIX "use a folder that only root writes and the agent may read, as the packages' " \
	RUNSTATEDIR "/memgrant-sim (0755 root:root, from tmpfiles.d), which is the default"

static void owner(const struct stat *st, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char pb[1024];

	getpwuid_r(st->st_uid, &pw, pb, sizeof(pb), &res);
	if (res)
		snprintf(buf, len, "mode %04o, owner %s", (unsigned)(st->st_mode & 07777), res->pw_name);
	else
		snprintf(buf, len, "mode %04o, owner uid %u", (unsigned)(st->st_mode & 07777), (unsigned)st->st_uid);
}

/* Whether uid HUID (gid 0 when root; no capabilities) may create files in ST. */
static bool helper_may_write(const struct stat *st, uid_t huid, gid_t hgid)
{
	mode_t m = st->st_mode;

	if (st->st_uid == huid)
		return (m & 0300) == 0300;
	if (st->st_gid == hgid)
		return (m & 0030) == 0030;
	return (m & 0003) == 0003;
}

/* One folder of the sim (WHAT: "the sim's folder", "the sim's tree") at
 * KEY: the rules above.  Returns false after the first message. */
static bool check_folder(struct ctx *c, const struct agent_view *v, const char *key, const char *dir,
			 const char *what)
{
	uid_t huid = geteuid();
	gid_t hgid = getegid();
	const char *helper = huid == 0 && v->other ? "the helper (root without capabilities)" : "memgrantd";
	struct stat st;
	char own[160];
	int e;

	if (stat(dir, &st) < 0) {
		_cleanup_free_ char *copy = strdup(dir);

		if (errno != ENOENT || !copy)
			return true; /* said at the start, with the errno */
		return check_folder(c, v, key, dirname(copy), "the folder in which memgrantd would create it");
	}
	owner(&st, own, sizeof(own));
	if (!S_ISDIR(st.st_mode)) {
		cfg_err_at(c, cfg_where(c, key), "%s: %s (%s) is not a folder", key, dir, what);
		return false;
	}
	if ((st.st_uid != huid && st.st_uid != 0) || (st.st_mode & 0022)) {
		cfg_err_at(c, cfg_where(c, key),
			   "%s: %s (%s, %s) may be changed by others than root: the sim refuses it at the start, "
			   "since whoever may write there could choose what root writes; %s",
			   key, dir, what, own, SIM_FOLDER_FIX);
		return false;
	}
	if (!helper_may_write(&st, huid, hgid)) {
		cfg_err_at(c, cfg_where(c, key), "%s: %s (%s, %s): %s may not write there, and every grant would fail "
			   "(EACCES); %s", key, dir, what, own, helper, SIM_FOLDER_FIX);
		return false;
	}
	if (!v->known || v->uid == huid)
		return true;
	if (cfg_agent_access(v, dir, W_OK) == 0) {
		cfg_err_at(c, cfg_where(c, key), "%s: %s (%s, %s): the agent (%s) may write there, so it could choose "
			   "what root writes; %s", key, dir, what, own, v->user, SIM_FOLDER_FIX);
		return false;
	}
	e = cfg_agent_access(v, dir, R_OK | X_OK);
	if (e != 0) {
		cfg_err_at(c, cfg_where(c, key), "%s: %s (%s, %s): the agent (%s) reads the sim there and may not "
			   "(%s); %s", key, dir, what, own, v->user, e > 0 ? strerror(e) : "cannot take its identity",
			   SIM_FOLDER_FIX);
		return false;
	}
	return true;
}

/* The folders above DIR: one the agent may write (and that is not sticky)
 * lets it rename the sim's folder away and put its own in its place. */
static bool check_ancestors(struct ctx *c, const struct agent_view *v, const char *key, const char *dir)
{
	_cleanup_free_ char *copy = strdup(dir);
	char *p;
	struct stat st;

	if (!copy || !v->known || !v->other)
		return true;
	for (p = dirname(copy); !streq(p, "/") && !streq(p, "."); p = dirname(p)) {
		char own[160];

		if (stat(p, &st) < 0 || (st.st_mode & S_ISVTX) || cfg_agent_access(v, p, W_OK) != 0)
			continue;
		owner(&st, own, sizeof(own));
		cfg_err_at(c, cfg_where(c, key), "%s: %s is inside %s (%s), which the agent (%s) may write: it could "
			   "put a folder of its own in the sim's place; %s", key, dir, p, own, v->user, SIM_FOLDER_FIX);
		return false;
	}
	return true;
}

void cfg_check_sim(struct ctx *c, const struct mg_config *cfg, const struct agent_view *v)
{
	const struct mg_sim_config *s = &cfg->backend.sim;
	_cleanup_free_ char *copy = NULL, *tree = NULL;
	const char *dir;
	struct stat st;

	if (cfg->backend.type != MG_BACKEND_SIM || !s->state || cfg_bad(c, "backend.type") ||
	    cfg_bad(c, "backend.sim.state"))
		return;
	copy = strdup(s->state);
	if (!copy) {
		c->oom = true;
		return;
	}
	dir = dirname(copy);
	if (!check_folder(c, v, "backend.sim.state", dir, "the sim's folder") ||
	    !check_ancestors(c, v, "backend.sim.state", dir))
		return;
	if (lstat(s->state, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_nlink != 1 ||
					  (st.st_uid != geteuid() && st.st_uid != 0))) {
		char own[160];

		owner(&st, own, sizeof(own));
		cfg_err_at(c, cfg_where(c, "backend.sim.state"),
			   "backend.sim.state: %s (%s, %lu names) is not a file of root's with one name: the sim "
			   "refuses it; remove it (memgrantd creates the sim anew) or restore the sim's own file",
			   s->state, own, (unsigned long)st.st_nlink);
		return;
	}
	if (s->tree && !cfg_bad(c, "backend.sim.tree")) {
		if (check_folder(c, v, "backend.sim.tree", s->tree, "the sim's tree"))
			check_ancestors(c, v, "backend.sim.tree", s->tree);
	} else if (asprintf(&tree, "%s.tree", s->state) >= 0) {
		check_folder(c, v, "backend.sim.state", tree, "the sim's tree");
	}
}
