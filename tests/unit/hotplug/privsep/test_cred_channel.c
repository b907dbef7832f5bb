/* SPDX-License-Identifier: MIT */
/*
 * The credential channel (hotplug/privsep/cred_channel.h) over a socketpair: the
 * helper's side (ph_cred_answer in a forked child) and the agent's
 * (ph_cred_fetch).  A served file comes back as a read-only descriptor of
 * exactly that file; an unserved index is EPERM; a missing file ENOENT; a
 * folder EINVAL; an index past the list ends the helper (EPROTO), after
 * which every fetch is EPIPE.  ph_cred_path_safe() refuses a folder the
 * agent's uid owns or may write, and accepts root's folders and a sticky
 * one whose next component is not the agent's.  At every open the helper
 * walks the path itself: a link planted after the start in a folder the
 * agent owns is refused (EACCES), a link through root's folders followed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "hotplug/privsep/cred_channel.h"
#include "lib/util.h"

#define AGENT_UID 54321

struct fx {
	char dir[64];
	char file[96], folder[96], missing[96];
	const char *paths[4];
	pid_t pid;
	struct ph_cred_client c;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int sv[2], fd;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_creds.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->file, sizeof(f->file), "%s/key", f->dir);
	snprintf(f->folder, sizeof(f->folder), "%s/sub", f->dir);
	snprintf(f->missing, sizeof(f->missing), "%s/none", f->dir);
	fd = open(f->file, O_WRONLY | O_CREAT, 0600);
	if (fd < 0 || write(fd, "SECRET\n", 7) != 7 || mkdir(f->folder, 0700) < 0)
		return -1;
	close(fd);
	f->paths[0] = f->file;
	f->paths[1] = NULL; /* not served */
	f->paths[2] = f->missing;
	f->paths[3] = f->folder;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	f->pid = fork();
	if (f->pid == 0) {
		char why[256];
		int r;

		close(sv[0]);
		while ((r = ph_cred_answer(sv[1], f->paths, 4, NULL, why, sizeof(why))) == 1)
			;
		_exit(r == 0 ? 0 : r == -EPROTO ? 2 : 1);
	}
	close(sv[1]);
	ph_cred_client_init(&f->c, sv[0]);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int st;
	char cmd[128];

	ph_cred_client_done(&f->c);
	if (f->pid > 0)
		waitpid(f->pid, &st, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static void served_file_comes_as_a_read_only_descriptor(void **state)
{
	struct fx *f = *state;
	char buf[16] = "";
	int fd = -1;

	assert_int_equal(ph_cred_fetch(&f->c, 0, &fd), 0);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 7);
	assert_string_equal(buf, "SECRET\n");
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	assert_true(write(fd, "x", 1) < 0);
	close(fd);
}

static void refusals_are_errnos(void **state)
{
	struct fx *f = *state;
	int fd = -1;

	assert_int_equal(ph_cred_fetch(&f->c, 1, &fd), -EPERM);
	assert_int_equal(fd, -1);
	assert_int_equal(ph_cred_fetch(&f->c, 2, &fd), -ENOENT);
	assert_int_equal(ph_cred_fetch(&f->c, 3, &fd), -EINVAL);
	/* still serving */
	assert_int_equal(ph_cred_fetch(&f->c, 0, &fd), 0);
	close(fd);
}

static void index_past_the_list_ends_the_helper(void **state)
{
	struct fx *f = *state;
	int fd = -1, st = 0;

	assert_int_equal(ph_cred_fetch(&f->c, 4, &fd), -EPIPE);
	assert_int_equal(waitpid(f->pid, &st, 0), f->pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
	f->pid = -1;
	assert_int_equal(ph_cred_fetch(&f->c, 0, &fd), -EPIPE);
}

static void paths_the_agent_can_change_are_not_served(void **state)
{
	struct fx *f = *state;
	gid_t g = 4242;
	char why[256];

	/* root's own: the test runs as root when it matters; as another user
	 * its own folders are refused like the agent's */
	if (geteuid() == 0) {
		assert_true(ph_cred_path_safe(f->file, AGENT_UID, &g, 1, why, sizeof(why)));
		assert_int_equal(chown(f->dir, AGENT_UID, 0), 0);
		assert_false(ph_cred_path_safe(f->file, AGENT_UID, &g, 1, why, sizeof(why)));
		assert_non_null(strstr(why, f->dir));
		assert_int_equal(chown(f->dir, 0, 0), 0);
		assert_int_equal(chmod(f->dir, 0777), 0);
		assert_false(ph_cred_path_safe(f->file, AGENT_UID, &g, 1, why, sizeof(why)));
		assert_int_equal(chmod(f->dir, 01777), 0); /* sticky: the key is root's */
		assert_true(ph_cred_path_safe(f->file, AGENT_UID, &g, 1, why, sizeof(why)));
		assert_false(ph_cred_path_safe(f->missing, AGENT_UID, &g, 1, why, sizeof(why)));
		assert_int_equal(chmod(f->dir, 0770), 0);
		assert_int_equal(chown(f->dir, 0, g), 0); /* writable by its group */
		assert_false(ph_cred_path_safe(f->file, AGENT_UID, &g, 1, why, sizeof(why)));
		assert_int_equal(chmod(f->dir, 0700), 0);
	} else {
		assert_false(ph_cred_path_safe(f->file, geteuid(), &g, 1, why, sizeof(why)));
	}
	assert_true(ph_cred_path_safe(f->file, 0, &g, 1, why, sizeof(why)));
	assert_false(ph_cred_path_safe("relative/key", AGENT_UID, &g, 1, why, sizeof(why)));
}

/* A root-owned link to a file not yet there, in a folder the agent owns:
 * the agent then makes that file a link to a root-only victim.  The helper,
 * which checks at every open, must not hand the victim out; a link whose
 * folders are all root's is followed. */
static void a_planted_link_never_reaches_a_root_file(void **state)
{
	struct fx *f = *state;
	char agent_dir[96], link[160], target[160], victim[160], good[160], why[512] = "";
	const char *paths[2];
	int sv[2], fd = -1, st;
	pid_t pid;
	struct ph_cred_client c;

	if (geteuid() != 0)
		skip();
	snprintf(agent_dir, sizeof(agent_dir), "%s/agent", f->dir);
	snprintf(link, sizeof(link), "%s/token", f->dir);
	snprintf(target, sizeof(target), "%s/token", agent_dir);
	snprintf(victim, sizeof(victim), "%s/victim", f->dir);
	snprintf(good, sizeof(good), "%s/good", f->dir);
	assert_int_equal(mkdir(agent_dir, 0755), 0);
	assert_int_equal(chown(agent_dir, AGENT_UID, AGENT_UID), 0);
	assert_int_equal(symlink(target, link), 0); /* root's, dangling */
	assert_int_equal(symlink(f->file, good), 0); /* root's, to root's key */
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "VICTIM\n", 7), 7);
	close(fd);
	/* the agent's move, after the start */
	assert_int_equal(symlink(victim, target), 0);
	assert_int_equal(lchown(target, AGENT_UID, AGENT_UID), 0);

	assert_int_equal(ph_cred_open_walk(link, &fd, why, sizeof(why)), -EACCES);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(why, link));
	assert_int_equal(ph_cred_open_walk(good, &fd, why, sizeof(why)), 0);
	close(fd);

	paths[0] = link;
	paths[1] = good;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		close(f->c.fd); /* the setup's helper ends when the test closes it */
		while (ph_cred_answer(sv[1], paths, 2, NULL, why, sizeof(why)) == 1)
			;
		_exit(0);
	}
	close(sv[1]);
	ph_cred_client_init(&c, sv[0]);
	assert_int_equal(ph_cred_fetch(&c, 0, &fd), -EACCES);
	assert_int_equal(fd, -1);
	assert_int_equal(ph_cred_fetch(&c, 1, &fd), 0);
	{
		char buf[16] = "";

		assert_int_equal(read(fd, buf, sizeof(buf) - 1), 7);
		assert_string_equal(buf, "SECRET\n");
	}
	close(fd);
	ph_cred_client_done(&c);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(served_file_comes_as_a_read_only_descriptor, setup, teardown),
		cmocka_unit_test_setup_teardown(refusals_are_errnos, setup, teardown),
		cmocka_unit_test_setup_teardown(index_past_the_list_ends_the_helper, setup, teardown),
		cmocka_unit_test_setup_teardown(paths_the_agent_can_change_are_not_served, setup, teardown),
		cmocka_unit_test_setup_teardown(a_planted_link_never_reaches_a_root_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
