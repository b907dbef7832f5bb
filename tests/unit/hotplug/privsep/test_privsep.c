/* SPDX-License-Identifier: MIT */
/*
 * The privilege split's two ends over a socketpair, in one test process: the
 * helper loop (privhelper_serve) in a forked child writing a generated sysfs
 * tree, the forwarding backend (hp_privsep_open) in the parent.  The
 * request checks one by one; writes land in exactly the kernel's file;
 * values the typed helpers never write are refused before the helper sees
 * them; an offline with a deadline ends with EINTR, its writer killed and
 * reaped (a FIFO stands in for a state file whose write blocks); a dead
 * helper makes every write -HP_EWRITER_GONE.
 * (The helper program with its seccomp filter is tested by
 * tests/integration/privsep_bad_requests.sh.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hotplug/backend.h"
#include "hotplug/privsep/helper_serve.h"
#include "hotplug/privsep/helper_client.h"
#include "lib/util.h"
#include "tests/fixtures/gentree.h"

struct fx {
	char *root;
	pid_t pid;
	struct hp_backend *b; /* forwarding backend */
	struct hp_path *path;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct hp_backend *reader = NULL;
	int sv[2];

	f->root = gt_mktemp();
	gt_machine(f->root, 4, 4, 1); /* blocks 0-3 online, 4-7 standby */
	if (hp_path_open(f->root, &f->path) < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	f->pid = fork();
	if (f->pid == 0) {
		struct hp_backend *w = NULL;
		char why[256];
		int r;

		close(sv[0]);
		if (hp_sysfs_open(f->root, &w) < 0)
			_exit(1);
		privhelper_hello(sv[1], 0);
		r = privhelper_serve(sv[1], NULL, w, f->path, why, sizeof(why));
		_exit(r == 0 ? 0 : r == -EPROTO ? 2 : 3);
	}
	close(sv[1]);
	{
		struct ph_reply hello;
		if (recv(sv[0], &hello, sizeof(hello), 0) != sizeof(hello) || hello.err != 0)
			return -1;
	}
	if (hp_sysfs_open(f->root, &reader) < 0 || hp_privsep_open(sv[0], reader, &f->b) < 0)
		return -1;
	*state = f;
	return 0;
}

static int helper_status(struct fx *f)
{
	int st;

	if (f->pid <= 0)
		return -1;
	assert_int_equal(waitpid(f->pid, &st, 0), f->pid);
	f->pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	hp_backend_close(f->b); /* closes the socket: the helper ends */
	if (f->pid > 0)
		helper_status(f);
	hp_path_free(f->path);
	gt_rm(f->root);
	free(f);
	return 0;
}

static void assert_file(const char *root, const char *rel, const char *want)
{
	char buf[256];

	assert_true(gt_get(root, rel, buf, sizeof(buf)) >= 0);
	buf[strcspn(buf, "\n")] = '\0'; /* the generated files end in a newline, the agent's writes do not */
	assert_string_equal(buf, want);
}

static void test_writes(void **state)
{
	struct fx *f = *state;

	assert_string_equal(f->b->ops->name, "sysfs"); /* the reader's name */
	assert_int_equal(block_set_memmap(f->b, 5, true), 0);
	assert_file(f->root, "sys/firmware/memory/memory5/memmap_on_memory", "1");
	assert_int_equal(block_configure(f->b, 5), 0);
	assert_file(f->root, "sys/firmware/memory/memory5/config", "1");
	assert_int_equal(block_deconfigure(f->b, 6), 0);
	assert_file(f->root, "sys/firmware/memory/memory6/config", "0");
	assert_int_equal(block_online(f->b, 2, ONLINE_MOVABLE), 0);
	assert_file(f->root, "sys/devices/system/memory/memory2/state", "online_movable");
	assert_int_equal(block_offline(f->b, 3), 0);
	assert_file(f->root, "sys/devices/system/memory/memory3/state", "offline");
	assert_int_equal(hp_set_auto_online(f->b, "online_kernel"), 0);
	assert_file(f->root, "sys/devices/system/memory/auto_online_blocks", "online_kernel");
	/* block 6 is in the machine but has no devices entry: the write's ENOENT is an answer */
	assert_int_equal(block_offline(f->b, 6), -ENOENT);
	/* reads go through the reader */
	{
		struct mem_block m;
		assert_int_equal(hp_read_block(f->b, 5, &m), 0);
		assert_true(m.configured);
	}
	assert_int_equal(block_configure(f->b, 4), 0); /* the helper is still there */
}

/* A block's writes in one exchange: the helper stops at the first that
 * fails (PH_FLAG_CHAINED), the writes before it landed, none after. */
static void test_write_seq(void **state)
{
	struct fx *f = *state;
	const struct hp_write up[] = { { HP_ATTR_MEMMAP, "0" }, { HP_ATTR_CONFIG, "1" },
				       { HP_ATTR_STATE, "online_movable" } };
	const struct hp_write down[] = { { HP_ATTR_STATE, "offline" }, { HP_ATTR_CONFIG, "0" } };
	const struct hp_write bad_word[] = { { HP_ATTR_CONFIG, "1" }, { HP_ATTR_STATE, "going-offline" } };
	size_t done = 99;

	/* block 2: online, both writes land in the kernel's order */
	assert_int_equal(hp_write_seq(f->b, 2, down, 2, &done), 0);
	assert_int_equal(done, 2);
	assert_file(f->root, "sys/devices/system/memory/memory2/state", "offline");
	assert_file(f->root, "sys/firmware/memory/memory2/config", "0");
	/* block 6: standby, no state file: the offline's ENOENT stops the
	 * sequence and the deconfigure after it is not written */
	assert_int_equal(block_configure(f->b, 6), 0);
	assert_int_equal(hp_write_seq(f->b, 6, down, 2, &done), -ENOENT);
	assert_int_equal(done, 0);
	assert_file(f->root, "sys/firmware/memory/memory6/config", "1");
	/* block 5: memmap and configure land, the online's ENOENT (no devices
	 * entry in this tree) comes back with done 2 */
	assert_int_equal(hp_write_seq(f->b, 5, up, 3, &done), -ENOENT);
	assert_int_equal(done, 2);
	assert_file(f->root, "sys/firmware/memory/memory5/memmap_on_memory", "0");
	assert_file(f->root, "sys/firmware/memory/memory5/config", "1");
	/* a word the helper never takes refuses the whole sequence here */
	assert_int_equal(hp_write_seq(f->b, 4, bad_word, 2, &done), -EINVAL);
	assert_int_equal(done, 0);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "0");
	assert_int_equal(hp_write_seq(f->b, 4, up, 0, &done), -EINVAL);
	assert_int_equal(hp_write_seq(f->b, 4, up, HP_WRITE_SEQ_MAX + 1, &done), -EINVAL);
	/* the chain ends with its sequence: the next write is the helper's again */
	assert_int_equal(block_configure(f->b, 4), 0);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "1");
}

/* Values the typed helpers never write never reach the helper. */
static void test_refused_locally(void **state)
{
	struct fx *f = *state;

	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_CONFIG, 4, "yes"), -EINVAL);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_CONFIG, 4, "1\n"), -EINVAL);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_MEMMAP, 4, "2"), -EINVAL);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_STATE, 0, "going-offline"), -EINVAL);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_ONLINE, 0, "1"), -EINVAL);
	assert_int_equal(hp_set_auto_online(f->b, "sometimes"), -EINVAL);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_CONFIG, 4, NULL), -EINVAL);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "0");
	assert_int_equal(block_configure(f->b, 4), 0);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "1");
}

/* The children of process PID, as /proc lists them ("" for none). */
static void children_of(pid_t pid, char *buf, size_t len)
{
	char rel[64];
	FILE *f;
	size_t n = 0;

	snprintf(rel, sizeof(rel), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(rel, "re");
	assert_non_null(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void test_deadline(void **state)
{
	struct fx *f = *state;
	char path[4096];
	struct timespec t0, t1, end;
	double secs;

	/* a FIFO without a reader: opening it for writing blocks until a signal */
	snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory1/state", f->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0644), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	end = t0;
	end.tv_nsec += 200 * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	assert_int_equal(hp_set_write_deadline(f->b, &end), 0);
	assert_int_equal(block_offline(f->b, 1), -EINTR);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(secs >= 0.15);
	assert_true(secs < 5.0);
	/* the writer was a child of the helper's, killed and reaped */
	{
		char kids[256];
		children_of(f->pid, kids, sizeof(kids));
		assert_string_equal(kids, "");
	}
	/* a deadline already past is the shortest one the wire carries (1 ms),
	 * never 0, which means no limit: the write is cut at once (the alarm,
	 * uncaught, ends this test rather than let it hang on the FIFO) */
	snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory3/state", f->root);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(mkfifo(path, 0644), 0);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec -= 1;
	assert_int_equal(hp_set_write_deadline(f->b, &end), 0);
	alarm(20);
	assert_int_equal(block_offline(f->b, 3), -EINTR);
	alarm(0);
	/* the deadline only applies to offline; without one the helper goes on */
	assert_int_equal(hp_set_write_deadline(f->b, NULL), 0);
	assert_int_equal(block_offline(f->b, 2), 0);
	/* a backend that writes in this process keeps the deadline for
	 * block_offline(), which then writes from a child it kills */
	{
		struct hp_backend *s = NULL;
		char kids[256];

		snprintf(path, sizeof(path), "%s/sys/devices/system/memory/memory0/state", f->root);
		assert_int_equal(unlink(path), 0);
		assert_int_equal(mkfifo(path, 0644), 0);
		assert_int_equal(hp_sysfs_open(f->root, &s), 0);
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_nsec += 100 * 1000000L;
		if (end.tv_nsec >= 1000000000L) {
			end.tv_sec++;
			end.tv_nsec -= 1000000000L;
		}
		assert_int_equal(hp_set_write_deadline(s, &end), 0);
		alarm(20);
		assert_int_equal(block_offline(s, 0), -EINTR);
		alarm(0);
		/* of this process's children only the helper is left */
		children_of(getpid(), kids, sizeof(kids));
		assert_int_equal(atoi(kids), f->pid);
		assert_null(strchr(kids, ' ') ? strchr(strchr(kids, ' ') + 1, ' ') : NULL);
		/* no deadline: no child, the write in this process */
		assert_int_equal(hp_set_write_deadline(s, NULL), 0);
		assert_int_equal(block_offline(s, 2), 0);
		assert_int_equal(hp_set_write_deadline(NULL, NULL), -EINVAL);
		hp_backend_close(s);
	}
}

/* A revocation's offlines under a deadline share one writer process: the
 * helper has the same single child across them (a fork per block cost more
 * than the writes), and none once they stopped coming for a second; a
 * backend writing in this process keeps its child until
 * hp_offline_writer_end(). */
static void test_deadline_writer_kept(void **state)
{
	struct fx *f = *state;
	struct timespec end;
	char first[256], kids[256];

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += 30;
	assert_int_equal(hp_set_write_deadline(f->b, &end), 0);
	assert_int_equal(block_offline(f->b, 1), 0);
	children_of(f->pid, first, sizeof(first));
	assert_true(atoi(first) > 0);
	assert_null(strchr(first, ' ') ? strchr(strchr(first, ' ') + 1, ' ') : NULL); /* one child */
	assert_int_equal(block_offline(f->b, 2), 0);
	assert_int_equal(block_offline(f->b, 3), 0);
	children_of(f->pid, kids, sizeof(kids));
	assert_string_equal(kids, first);
	assert_file(f->root, "sys/devices/system/memory/memory3/state", "offline");
	/* idle: gone within the helper's second, and reaped (no zombie) */
	for (int i = 0; i < 100; i++) {
		children_of(f->pid, kids, sizeof(kids));
		if (!kids[0])
			break;
		usleep(50000);
	}
	assert_string_equal(kids, "");
	/* the next offline under a deadline makes a new one */
	assert_int_equal(block_online(f->b, 1, ONLINE_MOVABLE), 0);
	assert_int_equal(block_offline(f->b, 1), 0);
	children_of(f->pid, kids, sizeof(kids));
	assert_true(atoi(kids) > 0);
	assert_int_equal(hp_set_write_deadline(f->b, NULL), 0);
	{
		struct hp_backend *s = NULL;
		char mine[256];
		pid_t writer;

		children_of(getpid(), mine, sizeof(mine));
		assert_int_equal(hp_sysfs_open(f->root, &s), 0);
		assert_int_equal(hp_set_write_deadline(s, &end), 0);
		assert_int_equal(block_online(s, 2, ONLINE_MOVABLE), 0);
		assert_int_equal(block_offline(s, 2), 0);
		assert_true(hp_offline_writer_running(s));
		writer = s->offline_writer.pid;
		assert_int_equal(block_online(s, 2, ONLINE_MOVABLE), 0);
		assert_int_equal(block_offline(s, 2), 0);
		assert_int_equal(s->offline_writer.pid, writer);
		hp_offline_writer_end(s);
		assert_false(hp_offline_writer_running(s));
		assert_int_equal(waitpid(writer, NULL, WNOHANG), -1); /* reaped */
		children_of(getpid(), kids, sizeof(kids));
		assert_string_equal(kids, mine);
		hp_backend_close(s);
	}
}

static void test_helper_gone(void **state)
{
	struct fx *f = *state;

	kill(f->pid, SIGKILL);
	assert_int_equal(helper_status(f), 128 + SIGKILL);
	/* a distinct condition, not a refusal of the block: HP_EWRITER_GONE, for
	 * the write that finds the helper gone and every one after it */
	assert_int_equal(block_configure(f->b, 4), -HP_EWRITER_GONE);
	assert_int_equal(block_configure(f->b, 4), -HP_EWRITER_GONE);
	assert_int_equal(hp_set_auto_online(f->b, "online"), -HP_EWRITER_GONE);
	assert_file(f->root, "sys/firmware/memory/memory4/config", "0");
}

/* Each rule of ph_request_check, against the generated machine. */
static void test_check(void **state)
{
	struct fx *f = *state;
	const struct ph_request ok = { .magic = PH_MAGIC, .op = PH_OP_CONFIGURE, .block = 4 };
	struct {
		struct ph_request rq;
		size_t len;
		const char *why;
	} bad[] = {
		{ ok, 23, "request of 23 bytes, expected 24" },
		{ ok, 25, "request of 25 bytes" },
		{ { .magic = 1, .op = PH_OP_CONFIGURE, .block = 4 }, 24, "magic" },
		{ { .magic = PH_MAGIC, .op = PH_OP_CONFIGURE, .block = 4, .flags = 6 }, 24, "unknown flags" },
		{ { .magic = PH_MAGIC, .op = 0, .block = 4 }, 24, "unknown operation 0" },
		{ { .magic = PH_MAGIC, .op = 7, .block = 4 }, 24, "unknown operation 7" },
		{ { .magic = PH_MAGIC, .op = PH_OP_CONFIGURE, .arg = 1, .block = 4 }, 24, "configure with argument 1" },
		{ { .magic = PH_MAGIC, .op = PH_OP_CONFIGURE, .block = 8 }, 24, "block 8, which this machine does not have" },
		{ { .magic = PH_MAGIC, .op = PH_OP_ONLINE, .block = UINT64_MAX }, 24, "does not have" },
		{ { .magic = PH_MAGIC, .op = PH_OP_SET_MEMMAP, .arg = 2, .block = 4 }, 24, "set_memmap to 2" },
		{ { .magic = PH_MAGIC, .op = PH_OP_ONLINE, .arg = 3, .block = 0 }, 24, "zone 3" },
		{ { .magic = PH_MAGIC, .op = PH_OP_OFFLINE, .arg = 1, .block = 0 }, 24, "offline with argument 1" },
		{ { .magic = PH_MAGIC, .op = PH_OP_OFFLINE, .deadline_ms = PH_MAX_DEADLINE_MS + 1 }, 24, "at most" },
		{ { .magic = PH_MAGIC, .op = PH_OP_SET_AUTO_ONLINE, .arg = 4 }, 24, "word 4" },
		{ { .magic = PH_MAGIC, .op = PH_OP_SET_AUTO_ONLINE, .arg = 1, .block = 1 }, 24, "expected 0" },
		{ { .magic = PH_MAGIC, .op = PH_OP_ONLINE, .block = 0, .deadline_ms = 5 }, 24, "only offline takes" },
	};
	char why[256];

	assert_int_equal(ph_request_check(&ok, sizeof(ok), f->path, why, sizeof(why)), 0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		why[0] = '\0';
		assert_int_equal(ph_request_check(&bad[i].rq, bad[i].len, f->path, why, sizeof(why)), -EPROTO);
		if (!strstr(why, bad[i].why))
			fail_msg("case %zu: '%s' does not say '%s'", i, why, bad[i].why);
	}
	{
		struct ph_request rq = { .magic = PH_MAGIC, .op = PH_OP_OFFLINE, .block = 3,
					 .deadline_ms = PH_MAX_DEADLINE_MS };
		assert_int_equal(ph_request_check(&rq, sizeof(rq), f->path, why, sizeof(why)), 0);
		rq = (struct ph_request){ .magic = PH_MAGIC, .op = PH_OP_SET_AUTO_ONLINE, .arg = 3 };
		assert_int_equal(ph_request_check(&rq, sizeof(rq), f->path, why, sizeof(why)), 0);
		rq = (struct ph_request){ .magic = PH_MAGIC, .op = PH_OP_ONLINE, .arg = ONLINE_KERNEL, .block = 7 };
		assert_int_equal(ph_request_check(&rq, sizeof(rq), f->path, why, sizeof(why)), 0); /* firmware entry */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_seq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_locally, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_writer_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_helper_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
