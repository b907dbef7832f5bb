/* SPDX-License-Identifier: MIT */
/*
 * The kernel rule suite (tests/unit/hotplug/rules.h, every rule of
 * kernel.md) on the sysfs backend: each machine is a sim in a temporary
 * directory served by tests/tools/simfs over FUSE at <tmp>/mnt, and the
 * backend under test is hp_sysfs_open(<tmp>/mnt).  So the real sysfs code
 * path (openat, one write(2), errno from the "kernel") meets the kernel's
 * rules without touching /sys.
 *
 * Needs /dev/fuse, fusermount3 and a simfs built with libfuse3
 * (apt-get install libfuse3-dev fuse3).  Without them (or when the mount
 * itself is refused, as in a container without FUSE rights) the test is
 * reported SKIPPED with the reason; nothing passes by default.  Any other
 * failure of the trial mount (a sim simfs cannot open, a crash) fails.
 * simfs is found at $MEMGRANT_SIMFS, else $BUILD/tests/tools/simfs, else
 * build/tests/tools/simfs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/mount.h>

#include "hotplug/sysfs/discover.h"
#include "hotplug/sysfs/path.h"
#include "tests/unit/hotplug/rules.h"

static char simfs_bin[PATH_MAX];
static char skip_reason[PATH_MAX * 3];

/* Temp dirs with a live mount.  A failed cmocka assertion skips
 * rule_env_close(); main() unmounts and removes whatever is left here. */
static char *live[64];

static void live_add(const char *dir)
{
	for (size_t i = 0; i < ARRAY_SIZE(live); i++)
		if (!live[i]) {
			live[i] = strdup(dir);
			return;
		}
}

static void live_del(const char *dir)
{
	for (size_t i = 0; i < ARRAY_SIZE(live); i++)
		if (live[i] && streq(live[i], dir)) {
			free(live[i]);
			live[i] = NULL;
		}
}

/* Runs ARGV, returns its exit status, -1 when it could not run or was killed. */
static int run_cmd(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void unmount_simfs(const char *mnt)
{
	char *argv[] = { "fusermount3", "-u", (char *)mnt, NULL };

	if (run_cmd(argv) != 0) {
		/* Never leave a mount behind for rm_rf to walk into. */
		char *lazy[] = { "fusermount3", "-u", "-z", (char *)mnt, NULL };
		if (run_cmd(lazy) != 0)
			umount2(mnt, MNT_DETACH);
	}
}

static void simfs_env_close(struct rule_env *e)
{
	/* The backend holds an fd in the mount: close it before unmounting. */
	hp_backend_close(TAKE_PTR(e->b));
	if (e->priv) {
		unmount_simfs(e->priv);
		live_del(e->dir);
		free(e->priv);
		e->priv = NULL;
	}
}

/* The rule_env factory: sim in a temp dir, simfs on <dir>/mnt, sysfs backend on it. */
static int simfs_env_open(const struct sim_params *p, struct rule_env **out)
{
	struct rule_env *e = NULL;
	char *mnt = NULL;
	int r, rc;

	r = sim_env_open(p, &e);
	if (r < 0)
		return r;
	hp_backend_close(TAKE_PTR(e->b)); /* only simfs talks to the sim */
	if (asprintf(&mnt, "%s/mnt", e->dir) < 0) {
		rule_env_close(e);
		return -ENOMEM;
	}
	if (mkdir(mnt, 0755) < 0) {
		r = -errno;
		free(mnt);
		rule_env_close(e);
		return r;
	}
	{
		char *argv[] = { simfs_bin, e->state, mnt, NULL };
		rc = run_cmd(argv); /* returns once the mount is live (simfs daemonises after mounting) */
	}
	if (rc != 0) {
		snprintf(skip_reason, sizeof(skip_reason), "%s %s %s exited with %d%s", simfs_bin,
			 e->state, mnt, rc,
			 rc == 77 ? " (built without libfuse3)" : rc == 4 ? " (mount refused)" : "");
		free(mnt);
		rule_env_close(e);
		/* 77: no FUSE in the build; 4: libfuse could not mount here */
		return rc == 77 || rc == 4 ? -EOPNOTSUPP : -EIO;
	}
	e->priv = mnt;
	e->close = simfs_env_close;
	live_add(e->dir);
	r = hp_sysfs_open(mnt, &e->b);
	if (r == 0) {
		free(e->root);
		e->root = strdup(mnt);
		if (!e->root)
			r = -ENOMEM;
	}
	if (r < 0) {
		rule_env_close(e);
		return r;
	}
	*out = e;
	return 0;
}

/* 1: the suite can run; 0: skip (no FUSE here); -1: simfs is broken.
 * SKIP_REASON says why not. */
static int simfs_usable(void)
{
	const char *env = getenv("MEMGRANT_SIMFS"), *build = getenv("BUILD");
	struct sim_params p;
	struct rule_env *e = NULL;
	char *argv[] = { "fusermount3", "-V", NULL };
	int r;

	if (env && *env)
		snprintf(simfs_bin, sizeof(simfs_bin), "%s", env);
	else
		snprintf(simfs_bin, sizeof(simfs_bin), "%s/tests/tools/simfs",
			 build && *build ? build : "build");
	if (access(simfs_bin, X_OK) < 0) {
		snprintf(skip_reason, sizeof(skip_reason), "%s: %s (make %s)", simfs_bin,
			 strerror(errno), simfs_bin);
		return 0;
	}
	if (access("/dev/fuse", R_OK | W_OK) < 0) {
		snprintf(skip_reason, sizeof(skip_reason), "/dev/fuse: %s", strerror(errno));
		return 0;
	}
	if (run_cmd(argv) != 0) {
		snprintf(skip_reason, sizeof(skip_reason),
			 "fusermount3 not found (apt-get install fuse3)");
		return 0;
	}
	sim_params_default(&p);
	r = simfs_env_open(&p, &e);
	if (r < 0) {
		if (!skip_reason[0])
			snprintf(skip_reason, sizeof(skip_reason), "trial mount: %s", strerror(-r));
		return r == -EOPNOTSUPP ? 0 : -1;
	}
	rule_env_close(e);
	return 1;
}

static void test_skipped(void **state)
{
	(void)state;
	print_message("SKIPPED: FUSE unavailable: %s\n", skip_reason);
	skip();
}

static void test_simfs_trial_mount(void **state)
{
	(void)state;
	fail_msg("simfs does not work: %s", skip_reason);
}

/* Discovery through the mount sees exactly the sim's table (A1-A9, C1-C3). */
static void test_discover_over_simfs(void **state)
{
	struct sim_params p;
	struct rule_env *e = NULL;
	_cleanup_backend_ struct hp_backend *sim = NULL;
	_cleanup_mem_table_ struct mem_table *ts = NULL, *tm = NULL;

	(void)state;
	sim_params_default(&p);
	assert_int_equal(simfs_env_open(&p, &e), 0);
	assert_int_equal(block_configure(e->b, 16), 0);
	assert_int_equal(block_online(e->b, 16, ONLINE_MOVABLE), 0);
	assert_int_equal(block_configure(e->b, 17), 0);
	assert_int_equal(hp_sim_open(e->state, &sim), 0);
	assert_int_equal(hp_discover(sim, &ts), 0);
	assert_int_equal(hp_discover(e->b, &tm), 0);
	assert_int_equal(tm->n, ts->n);
	assert_int_equal(tm->block_size, ts->block_size);
	assert_string_equal(tm->memmap_param, ts->memmap_param);
	assert_string_equal(tm->auto_online, ts->auto_online);
	assert_memory_equal(tm->blocks, ts->blocks, ts->n * sizeof(*ts->blocks));
	assert_string_equal(MEM_ZONES_TEXT(mem_table_find(tm, 16)->zones), "Movable");
	rule_env_close(e);
}

/* sysfs behaviour simfs must imitate for the backend test to mean anything. */
static void test_simfs_is_sysfs_like(void **state)
{
	struct sim_params p;
	struct rule_env *e = NULL;
	_cleanup_hp_path_ struct hp_path *hp = NULL;
	char path[PATH_MAX];
	int fd;

	(void)state;
	sim_params_default(&p);
	assert_int_equal(simfs_env_open(&p, &e), 0);
	assert_int_equal(hp_path_open(e->root, &hp), 0);
	/* read-only attributes: EACCES on write (kernfs: no store method) */
	assert_int_equal(hp_path_write(hp, "sys/devices/system/memory/memory3/phys_index", "1"),
			 -EACCES);
	assert_int_equal(hp_path_write(hp, "sys/devices/system/memory/block_size_bytes", "1"),
			 -EACCES);
	/* nothing can be created */
	snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory16", e->root);
	assert_int_equal(mkdir(path, 0755), -1);
	snprintf(path, sizeof(path), "%s/sys/firmware/memory/memory3/extra", e->root);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_int_equal(fd, -1);
	assert_int_equal(errno, EACCES);
	/* a read after a write sees the new value (no caching) */
	assert_int_equal(hp_path_write(hp, "sys/firmware/memory/memory16/config", "1\n"), 0);
	{
		char buf[16];
		assert_int_equal(hp_path_read(hp, "sys/firmware/memory/memory16/config", buf,
					      sizeof(buf)), 1);
		assert_string_equal(buf, "1");
		assert_int_equal(hp_path_read(hp, "sys/devices/system/memory/memory16/state", buf,
					      sizeof(buf)), 7);
		assert_string_equal(buf, "offline");
	}
	hp_path_free(TAKE_PTR(hp));
	rule_env_close(e);
}

int main(void)
{
	int failures;

	switch (simfs_usable()) {
	case 0: {
		const struct CMUnitTest skipped[] = {
			cmocka_unit_test(test_skipped),
		};
		fprintf(stderr, "test_rules_sysfs: SKIPPED: %s\n", skip_reason);
		return cmocka_run_group_tests_name("rules-sysfs-over-simfs", skipped, NULL, NULL);
	}
	case -1: {
		const struct CMUnitTest broken[] = {
			cmocka_unit_test(test_simfs_trial_mount),
		};
		return cmocka_run_group_tests_name("rules-sysfs-over-simfs", broken, NULL, NULL);
	}
	}
	{
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_simfs_is_sysfs_like),
			cmocka_unit_test(test_discover_over_simfs),
		};
		failures = cmocka_run_group_tests_name("simfs", tests, NULL, NULL);
	}
	failures += run_rule_suite("rules-sysfs-over-simfs", simfs_env_open);
	for (size_t i = 0; i < ARRAY_SIZE(live); i++) {
		char mnt[PATH_MAX];
		if (!live[i])
			continue;
		snprintf(mnt, sizeof(mnt), "%s/mnt", live[i]);
		unmount_simfs(mnt);
		rm_rf(live[i]);
		free(live[i]);
	}
	return failures ? 1 : 0;
}
