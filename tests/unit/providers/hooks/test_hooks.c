/* SPDX-License-Identifier: MIT */
/* Hooks (providers/hooks/hooks.h) and webhook signing (providers/hooks/webhook.h): event
 * matching, the run-parts list, the environment, exec hooks getting the
 * event on stdin, a hung hook killed at its timeout without holding up
 * others, the queue bound, and HMAC-SHA256 against RFC 4231. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "providers/hooks/hooks.h"
#include "providers/hooks/webhook.h"
#include "lib/fileio.h"
#include "lib/util.h"

struct fixture {
	char tmp[64];
	struct mg_log log;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-hooks-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	log_init(&f->log, "test_hooks", LOG_DEBUG);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rm_rf(f->tmp);
	free(f);
	return 0;
}

/* The "timed out" lines the hooks logged (a sink; the hooks copy the log,
 * so the count lives here, not in the fixture). */
static pthread_mutex_t timeouts_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned timeouts_logged;
static char timeout_line[256];

static int count_timeouts(const struct mg_log *l, int prio, const char *msg, const struct log_field *fl, size_t n)
{
	(void)l, (void)prio, (void)fl, (void)n;
	fprintf(stderr, "test_hooks: %s\n", msg);
	if (strstr(msg, "timed out after")) {
		pthread_mutex_lock(&timeouts_lock);
		timeouts_logged++;
		snprintf(timeout_line, sizeof(timeout_line), "%s", msg);
		pthread_mutex_unlock(&timeouts_lock);
	}
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void write_file(const char *path, const char *text, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	chmod(path, mode);
}

/* Waits up to MS for PATH to hold at least LINES lines; returns its text. */
static char *wait_lines(const char *path, size_t lines, unsigned ms)
{
	uint64_t end = now_ms() + ms;

	for (;;) {
		char *text = NULL;
		size_t n = 0, count = 0;

		if (file_read_all(path, 1 << 20, &text, &n) == 0) {
			for (size_t i = 0; i < n; i++)
				count += text[i] == '\n';
			if (count >= lines)
				return text;
		}
		free(text);
		if (now_ms() > end)
			return NULL;
		sleep_ms(20);
	}
}

static size_t count_lines(const char *path)
{
	_cleanup_free_ char *text = NULL;
	size_t n = 0, count = 0;

	if (file_read_all(path, 1 << 20, &text, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		count += text[i] == '\n';
	return count;
}

static void test_matches(void **state)
{
	(void)state;
	assert_true(hooks_event_matches("*", "grant.applied"));
	assert_true(hooks_event_matches("grant.*", "grant.applied"));
	assert_true(hooks_event_matches("grant.applied", "grant.applied"));
	assert_false(hooks_event_matches("grant.*", "revoke.applied"));
	assert_false(hooks_event_matches("grant.applied", "grant.partial"));
	assert_false(hooks_event_matches("grant.*", "grantx.applied"));
	assert_true(hooks_event_matches("pressure.*", "pressure.high"));
	assert_false(hooks_event_matches("agent.started", "agent.stopping"));
}

static void test_list_dir(void **state)
{
	struct fixture *f = *state;
	char dir[128], p[192];
	char **names = NULL;
	size_t n = 0;

	snprintf(dir, sizeof(dir), "%s/hooks.d", f->tmp);
	assert_int_equal(hooks_list_dir(dir, &names, &n), -ENOENT);
	assert_int_equal(mkdir(dir, 0755), 0);
	/* run-parts: only executable regular files named [A-Za-z0-9_-]+, sorted */
	const struct {
		const char *name;
		int mode;
	} files[] = { { "20_b", 0755 }, { "10-a", 0755 }, { "a.sh", 0755 }, { "c~", 0755 },
		      { "noexec", 0644 }, { "Z9", 0700 } };
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i].name);
		write_file(p, "#!/bin/sh\n", files[i].mode);
	}
	snprintf(p, sizeof(p), "%s/sub", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(hooks_list_dir(dir, &names, &n), 0);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "10-a");
	assert_string_equal(names[1], "20_b");
	assert_string_equal(names[2], "Z9");
	hooks_names_free(names, n);
}

static const char *env_get(char **env, const char *name)
{
	size_t l = strlen(name);

	for (char **e = env; *e; e++)
		if (strncmp(*e, name, l) == 0 && (*e)[l] == '=')
			return *e + l + 1;
	return NULL;
}

static void test_env(void **state)
{
	json_t *fields = json_pack("{s:s,s:s,s:s,s:{s:I,s:I,s:I,s:{s:I,s:I,s:I},s:n},s:{s:I,s:{s:s,s:s}}}", "id",
				   "g-42", "kind", "grant", "state", "partial", "status", "generation", (json_int_t)42,
				   "requested_bytes", (json_int_t)1073741824, "applied_bytes", (json_int_t)134217728,
				   "memory", "block_size", (json_int_t)134217728, "online_bytes",
				   (json_int_t)2281701376, "standby_bytes", (json_int_t)1, "error", "block",
				   "block", (json_int_t)17, "error", "code", "EIO", "message", "configure failed");
	json_t *ev = hooks_event_json("guest-7", "block.failed", fields);
	char **env;

	(void)state;
	assert_non_null(ev);
	assert_string_equal(json_string_value(json_object_get(ev, "type")), "event");
	assert_int_equal(strlen(json_string_value(json_object_get(ev, "event_id"))), 32);
	env = hooks_env(ev);
	assert_non_null(env);
	assert_string_equal(env_get(env, "MEMGRANT_EVENT"), "block.failed");
	assert_string_equal(env_get(env, "MEMGRANT_AGENT"), "guest-7");
	assert_string_equal(env_get(env, "MEMGRANT_GRANT_ID"), "g-42");
	assert_string_equal(env_get(env, "MEMGRANT_STATE"), "partial");
	assert_string_equal(env_get(env, "MEMGRANT_GENERATION"), "42");
	assert_string_equal(env_get(env, "MEMGRANT_ONLINE_BYTES"), "2281701376");
	assert_string_equal(env_get(env, "MEMGRANT_APPLIED_BYTES"), "134217728");
	assert_string_equal(env_get(env, "MEMGRANT_BLOCK"), "17");
	assert_string_equal(env_get(env, "MEMGRANT_ERROR_CODE"), "EIO");
	assert_non_null(env_get(env, "PATH"));
	assert_null(env_get(env, "MEMGRANT_BYTES"));
	assert_null(env_get(env, "HOME")); /* nothing of the daemon's own environment */
	hooks_env_free(env);
	json_decref(ev);
	json_decref(fields);
}

/* A hook gets the event JSON on stdin and its name in MEMGRANT_EVENT; a hook
 * for other events does not run. */
static void test_exec_stdin_env(void **state)
{
	struct fixture *f = *state;
	char hook[128], other[128], out[128], other_out[128], script[512];
	char *ev_grant[] = { "grant.applied" }, *ev_revoke[] = { "revoke.*" };
	struct mg_hook cfg[2] = {
		{ .events = ev_grant, .n_events = 1, .exec = hook, .timeout_ms = 5000 },
		{ .events = ev_revoke, .n_events = 1, .exec = other, .timeout_ms = 5000 },
	};
	struct hooks_params hp = { .hooks = cfg, .n_hooks = 2, .agent_id = "guest-7" };
	struct hooks *h = NULL;
	_cleanup_free_ char *text = NULL;
	json_t *fields, *ev;

	snprintf(hook, sizeof(hook), "%s/hook", f->tmp);
	snprintf(other, sizeof(other), "%s/other", f->tmp);
	snprintf(out, sizeof(out), "%s/out", f->tmp);
	snprintf(other_out, sizeof(other_out), "%s/other.out", f->tmp);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n{ cat; echo \"$MEMGRANT_EVENT $MEMGRANT_GRANT_ID $MEMGRANT_ONLINE_BYTES $1\"; } > %s.tmp\n"
		 "mv %s.tmp %s\necho this goes to the log\n",
		 out, out, out);
	write_file(hook, script, 0755);
	snprintf(script, sizeof(script), "#!/bin/sh\necho ran > %s\n", other_out);
	write_file(other, script, 0755);

	assert_int_equal(hooks_new(&hp, &f->log, &h), 0);
	assert_int_equal(hooks_start(h), 0);
	fields = json_pack("{s:s,s:s,s:s,s:{s:{s:I}}}", "id", "g-1", "kind", "grant", "state", "applied", "status",
			   "memory", "online_bytes", (json_int_t)4294967296);
	assert_int_equal(hooks_fire(h, "grant.applied", fields), 0);
	json_decref(fields);
	text = wait_lines(out, 2, 5000);
	assert_non_null(text);
	{
		char *nl = strchr(text, '\n');
		json_error_t err;
		assert_non_null(nl);
		*nl = '\0';
		ev = json_loads(text, 0, &err);
		assert_non_null(ev);
		assert_string_equal(json_string_value(json_object_get(ev, "event")), "grant.applied");
		assert_string_equal(json_string_value(json_object_get(ev, "agent")), "guest-7");
		assert_string_equal(json_string_value(json_object_get(ev, "id")), "g-1");
		assert_int_equal(json_integer_value(json_object_get(
					 json_object_get(json_object_get(ev, "status"), "memory"), "online_bytes")),
				 4294967296);
		json_decref(ev);
		assert_string_equal(nl + 1, "grant.applied g-1 4294967296 grant.applied\n");
	}
	hooks_free(h);
	assert_int_equal(access(other_out, F_OK), -1);
}

/* This process's threads (/proc/self/status). */
static unsigned threads_now(void)
{
	_cleanup_free_ char *text = NULL;
	size_t n = 0;
	char *at;

	assert_int_equal(file_read_all("/proc/self/status", 1 << 16, &text, &n), 0);
	at = strstr(text, "\nThreads:");
	assert_non_null(at);
	return (unsigned)strtoul(at + 9, NULL, 10);
}

/* Waits up to MS for this process to have THREADS threads. */
static bool wait_threads(unsigned threads, unsigned ms)
{
	uint64_t end = now_ms() + ms;

	while (threads_now() != threads) {
		if (now_ms() > end)
			return false;
		sleep_ms(10);
	}
	return true;
}

/* The runner is a thread while there is work: gone once its hook ended
 * (an agent idle after a grant has no thread for hooks), started again by
 * the next event, whose hook runs as the first one did. */
static void test_runner_leaves_when_idle(void **state)
{
	struct fixture *f = *state;
	char hook[128], out[128], script[512];
	char *ev[] = { "grant.*" };
	struct mg_hook cfg[1] = { { .events = ev, .n_events = 1, .exec = hook, .timeout_ms = 5000 } };
	struct hooks_params hp = { .hooks = cfg, .n_hooks = 1, .agent_id = "guest-7" };
	struct hooks *h = NULL;
	unsigned before = threads_now();
	_cleanup_free_ char *first = NULL, *second = NULL;
	json_t *fields;

	snprintf(hook, sizeof(hook), "%s/hook", f->tmp);
	snprintf(out, sizeof(out), "%s/out", f->tmp);
	snprintf(script, sizeof(script), "#!/bin/sh\necho \"$1\" >> %s\n", out);
	write_file(hook, script, 0755);
	assert_int_equal(hooks_new(&hp, &f->log, &h), 0);
	assert_int_equal(hooks_start(h), 0);
	assert_int_equal(threads_now(), before); /* none before the first event */
	fields = json_pack("{s:s,s:s}", "id", "g-1", "kind", "grant");
	assert_int_equal(hooks_fire(h, "grant.accepted", fields), 0);
	first = wait_lines(out, 1, 5000);
	assert_non_null(first);
	assert_true(wait_threads(before, 5000));
	assert_int_equal(hooks_fire(h, "grant.applied", fields), 0);
	second = wait_lines(out, 2, 5000);
	assert_non_null(second);
	assert_string_equal(second, "grant.accepted\ngrant.applied\n");
	assert_true(wait_threads(before, 5000));
	json_decref(fields);
	hooks_free(h);
	assert_int_equal(threads_now(), before);
}

static bool pid_gone(pid_t pid)
{
	char p[64], buf[256];
	_cleanup_close_ int fd = -1;
	ssize_t n;
	char *rp;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 'Z'; /* a zombie nobody reaped is dead too */
}

/* A hook that never ends is killed (with what it started) at its timeout;
 * meanwhile other hooks run and hooks_fire() returns at once: a third hook
 * blocks until the test releases it, after hooks_fire() returned (were
 * hooks_fire() to wait for it, it would be killed at its timeout instead
 * and never write "ended"). */
static void test_timeout_kills_group(void **state)
{
	struct fixture *f = *state;
	char slow[128], fast[128], block[128], pids[128], fast_out[128], release[128], ended[128], script[512];
	char *ev_slow[] = { "grant.accepted" }, *ev_fast[] = { "grant.applied" }, *ev_block[] = { "grant.failed" };
	struct mg_hook cfg[3] = {
		{ .events = ev_slow, .n_events = 1, .exec = slow, .timeout_ms = 400 },
		{ .events = ev_fast, .n_events = 1, .exec = fast, .timeout_ms = 5000 },
		{ .events = ev_block, .n_events = 1, .exec = block, .timeout_ms = 30000 },
	};
	struct hooks_params hp = { .hooks = cfg, .n_hooks = 3, .agent_id = "a", .max_running = 3 };
	struct hooks *h = NULL;
	_cleanup_free_ char *text = NULL;
	int shpid = 0, sleeppid = 0;
	struct mg_log log = f->log;

	snprintf(slow, sizeof(slow), "%s/slow", f->tmp);
	snprintf(fast, sizeof(fast), "%s/fast", f->tmp);
	snprintf(pids, sizeof(pids), "%s/pids", f->tmp);
	snprintf(fast_out, sizeof(fast_out), "%s/fast.out", f->tmp);
	snprintf(script, sizeof(script), "#!/bin/sh\nsleep 1000 &\necho $$ $! > %s\nwait\n", pids);
	write_file(slow, script, 0755);
	snprintf(script, sizeof(script), "#!/bin/sh\necho fast >> %s\n", fast_out);
	write_file(fast, script, 0755);
	snprintf(block, sizeof(block), "%s/block", f->tmp);
	snprintf(release, sizeof(release), "%s/release", f->tmp);
	snprintf(ended, sizeof(ended), "%s/ended", f->tmp);
	snprintf(script, sizeof(script), "#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.05; done\necho ended > %s\n", release,
		 ended);
	write_file(block, script, 0755);

	log.send = count_timeouts;
	pthread_mutex_lock(&timeouts_lock);
	timeouts_logged = 0;
	pthread_mutex_unlock(&timeouts_lock);
	assert_int_equal(hooks_new(&hp, &log, &h), 0);
	assert_int_equal(hooks_start(h), 0);
	assert_int_equal(hooks_fire(h, "grant.failed", NULL), 0);
	write_file(release, "", 0644); /* only now: hooks_fire() did not wait for the program */
	free(wait_lines(ended, 1, 10000));
	assert_int_equal(count_lines(ended), 1);
	assert_int_equal(hooks_fire(h, "grant.accepted", NULL), 0);
	assert_int_equal(hooks_fire(h, "grant.applied", NULL), 0);
	text = wait_lines(pids, 1, 3000);
	assert_non_null(text);
	assert_int_equal(sscanf(text, "%d %d", &shpid, &sleeppid), 2);
	/* the fast hook finished while the slow one hangs */
	free(wait_lines(fast_out, 1, 3000));
	assert_int_equal(count_lines(fast_out), 1);
	assert_false(pid_gone(sleeppid));
	/* killed at its timeout (the log says which), the background sleep with it */
	for (int i = 0; i < 500 && !(pid_gone(shpid) && pid_gone(sleeppid)); i++)
		sleep_ms(20);
	assert_true(pid_gone(shpid));
	assert_true(pid_gone(sleeppid));
	hooks_free(h);
	pthread_mutex_lock(&timeouts_lock);
	assert_int_equal(timeouts_logged, 1);
	assert_non_null(strstr(timeout_line, "timed out after 0.4s: killed"));
	pthread_mutex_unlock(&timeouts_lock);
}

/* One runs, two wait, the rest are dropped. */
static void test_queue_bound(void **state)
{
	struct fixture *f = *state;
	char hook[128], out[128], started[128], release[128], script[512];
	char *ev[] = { "*" };
	struct mg_hook cfg[1] = { { .events = ev, .n_events = 1, .exec = hook, .timeout_ms = 5000 } };
	struct hooks_params hp = {
		.hooks = cfg, .n_hooks = 1, .agent_id = "a", .max_running = 1, .max_queued = 2
	};
	struct hooks *h = NULL;

	snprintf(hook, sizeof(hook), "%s/hook", f->tmp);
	snprintf(out, sizeof(out), "%s/out", f->tmp);
	/* each run says it started, then waits for the test to release it */
	snprintf(started, sizeof(started), "%s/started", f->tmp);
	snprintf(release, sizeof(release), "%s/release", f->tmp);
	snprintf(script, sizeof(script),
		 "#!/bin/sh\necho x >> %s\nwhile [ ! -e %s ]; do sleep 0.05; done\necho \"$1\" >> %s\n", started,
		 release, out);
	write_file(hook, script, 0755);
	assert_int_equal(hooks_new(&hp, &f->log, &h), 0);
	assert_int_equal(hooks_start(h), 0);
	assert_int_equal(hooks_fire(h, "agent.started", NULL), 0);
	free(wait_lines(started, 1, 10000)); /* the first one is running now */
	assert_int_equal(count_lines(started), 1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(hooks_fire(h, "pressure.high", NULL), 0);
	write_file(release, "", 0644);
	/* hooks_free() lets what is queued and running finish: the count is final */
	hooks_free(h);
	assert_int_equal(count_lines(out), 3);
	assert_int_equal(count_lines(started), 3);
}

/* Programs in the hooks directory run for every event, in name order. */
static void test_hooks_dir(void **state)
{
	struct fixture *f = *state;
	char dir[128], p[192], out[128], script[256];
	struct hooks_params hp = { .dir = dir, .agent_id = "a", .max_running = 1 };
	struct hooks *h = NULL;
	_cleanup_free_ char *text = NULL;

	snprintf(dir, sizeof(dir), "%s/hooks.d", f->tmp);
	snprintf(out, sizeof(out), "%s/out", f->tmp);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(script, sizeof(script), "#!/bin/sh\necho \"b $MEMGRANT_EVENT\" >> %s\n", out);
	snprintf(p, sizeof(p), "%s/20-b", dir);
	write_file(p, script, 0755);
	snprintf(script, sizeof(script), "#!/bin/sh\necho \"a $MEMGRANT_EVENT\" >> %s\n", out);
	snprintf(p, sizeof(p), "%s/10-a", dir);
	write_file(p, script, 0755);
	snprintf(p, sizeof(p), "%s/10-a.dpkg-old", dir);
	write_file(p, script, 0755);
	assert_int_equal(hooks_new(&hp, &f->log, &h), 0);
	assert_int_equal(hooks_start(h), 0);
	assert_int_equal(hooks_fire(h, "revoke.applied", NULL), 0);
	text = wait_lines(out, 2, 5000);
	assert_non_null(text);
	hooks_free(h); /* lets what runs finish: the count is final */
	assert_int_equal(count_lines(out), 2);
	assert_string_equal(text, "a revoke.applied\nb revoke.applied\n");
}

static void test_dir_for_config(void **state)
{
	_cleanup_free_ char *a = hooks_dir_for_config("/nonexistent-memgrant/memgrant.yaml");

	(void)state;
	assert_string_equal(a, "/nonexistent-memgrant/hooks.d");
}

/* RFC 4231 test case 2 (HMAC-SHA256). */
static void test_sign(void **state)
{
	char sig[80], dest[WEBHOOK_DEST_MAX], dest2[WEBHOOK_DEST_MAX];
	const char *data = "what do ya want for nothing?";

	(void)state;
	assert_int_equal(webhook_sign("Jefe", 4, data, strlen(data), sig, sizeof(sig)), 0);
	assert_string_equal(sig, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	assert_int_equal(webhook_sign("Jefe", 4, data, strlen(data), sig, 20), -ENOBUFS);
	assert_int_equal(webhook_dest_for("https://a.example/x", dest, sizeof(dest)), 0);
	assert_int_equal(strlen(dest), 8 + 16);
	assert_true(startswith(dest, "webhook:"));
	assert_int_equal(webhook_dest_for("https://b.example/x", dest2, sizeof(dest2)), 0);
	assert_string_not_equal(dest, dest2);
}

static void test_secret_file(void **state)
{
	struct fixture *f = *state;
	char path[128];
	struct webhook_params wp = { .url = "https://h.example/", .secret_file = path };
	struct webhook *w = NULL;

	snprintf(path, sizeof(path), "%s/secret", f->tmp);
	assert_int_equal(webhook_new(&wp, NULL, &f->log, &w), -ENOENT);
	write_file(path, "\n", 0600);
	assert_int_equal(webhook_new(&wp, NULL, &f->log, &w), -EINVAL);
	write_file(path, "s3cret\n", 0600);
	assert_int_equal(webhook_new(&wp, NULL, &f->log, &w), 0);
	webhook_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches),
		cmocka_unit_test_setup_teardown(test_list_dir, setup, teardown),
		cmocka_unit_test(test_env),
		cmocka_unit_test_setup_teardown(test_exec_stdin_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runner_leaves_when_idle, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_kills_group, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hooks_dir, setup, teardown),
		cmocka_unit_test(test_dir_for_config),
		cmocka_unit_test(test_sign),
		cmocka_unit_test_setup_teardown(test_secret_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
