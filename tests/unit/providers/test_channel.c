/* SPDX-License-Identifier: MIT */
/* The channel provider (providers/channel.c) against the engine on the sim,
 * with the test as the host at the other end of the port (a Unix socket the
 * provider connects to, as a host bridging the port does): a sync answered
 * with its nonce, bad lines answered with an error and reading resumed, a
 * grant answered at once and its reports delivered one at a time until
 * acknowledged, the unacknowledged report sent again after a reconnect, and
 * a query answered with the status.  No sleeps: each step waits for the
 * line it expects (with a hang guard, not a speed target). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent/engine/engine.h"
#include "config/config.h"
#include "providers/channel.h"
#include "lib/fileio.h"
#include "lib/util.h"

#define GUARD_MS 60000 /* a hang guard, not a speed target */

struct fixture {
	char tmp[64];
	char sock[128];
	int listen_fd, host_fd;
	struct mg_config *cfg;
	struct engine *e;
	struct channel_provider *ch;
	struct mg_log log;
	char buf[1 << 17];
	size_t len;
};

static int accept_host(struct fixture *f)
{
	struct pollfd pf = { .fd = f->listen_fd, .events = POLLIN };

	if (poll(&pf, 1, GUARD_MS) != 1)
		return -1;
	f->host_fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	f->len = 0;
	return f->host_fd;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char yaml[1024];

	snprintf(f->tmp, sizeof(f->tmp), "/tmp/memgrant-channel-XXXXXX");
	if (!mkdtemp(f->tmp))
		return -1;
	snprintf(f->sock, sizeof(f->sock), "%s/port.sock", f->tmp);
	if (strlen(f->sock) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, f->sock, strlen(f->sock) + 1);
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(f->listen_fd, 4) < 0)
		return -1;
	snprintf(yaml, sizeof(yaml),
		 "agent:\n  id: unit\n  state_dir: %s/state\n  api_socket: %s/api.sock\n  log_level: error\n"
		 "backend:\n  type: sim\n  sim:\n    state: %s/sim.json\n    online: 1G\n    standby: 1G\n"
		 "    block_size: 128M\nproviders:\n  channel:\n    path: %s\n",
		 f->tmp, f->tmp, f->tmp, f->sock);
	if (config_load_buffer("unit.yaml", yaml, strlen(yaml), NULL, &f->cfg, NULL) < 0)
		return -1;
	log_init(&f->log, "test_channel", 3);
	if (engine_new(f->cfg, &f->log, -1, &f->e) < 0 || engine_start(f->e) < 0)
		return -1;
	if (channel_provider_start(&f->cfg->providers.channel, f->e, &f->log, &f->ch) < 0)
		return -1;
	if (accept_host(f) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	channel_provider_stop(f->ch);
	engine_stop(f->e);
	engine_free(f->e);
	config_free(f->cfg);
	if (f->host_fd >= 0)
		close(f->host_fd);
	close(f->listen_fd);
	rm_rf(f->tmp);
	free(f);
	return 0;
}

static void send_line(struct fixture *f, const char *line)
{
	size_t n = strlen(line);

	assert_int_equal(send(f->host_fd, line, n, MSG_NOSIGNAL), (ssize_t)n);
	assert_int_equal(send(f->host_fd, "\n", 1, MSG_NOSIGNAL), 1);
}

/* The next line from the agent, parsed (the caller decrefs). */
static json_t *next_line(struct fixture *f)
{
	for (;;) {
		char *nl = memchr(f->buf, '\n', f->len);
		struct pollfd pf = { .fd = f->host_fd, .events = POLLIN };
		ssize_t n;

		if (nl) {
			json_error_t err;
			json_t *j = json_loadb(f->buf, (size_t)(nl - f->buf), 0, &err);

			assert_non_null(j);
			if (getenv("TEST_CHANNEL_TRACE"))
				fprintf(stderr, "host got: %.*s\n", (int)(nl - f->buf), f->buf);
			f->len -= (size_t)(nl + 1 - f->buf);
			memmove(f->buf, nl + 1, f->len);
			return j;
		}
		assert_int_equal(poll(&pf, 1, GUARD_MS), 1);
		n = recv(f->host_fd, f->buf + f->len, sizeof(f->buf) - f->len, 0);
		assert_true(n > 0);
		f->len += (size_t)n;
	}
}

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));

	return s ? s : "";
}

/* Lines until one of TYPE (and STATE, when given) arrives; earlier ones are
 * acknowledged when they carry a seq, as a host does. */
static json_t *until(struct fixture *f, const char *type, const char *state)
{
	for (;;) {
		json_t *j = next_line(f);

		if (streq(str(j, "type"), type) && (!state || streq(str(j, "state"), state)))
			return j;
		json_decref(j);
	}
}

static void sync_with(struct fixture *f, const char *nonce_line, json_int_t nonce)
{
	json_t *j;

	send_line(f, nonce_line);
	j = until(f, "sync", NULL);
	assert_int_equal(json_integer_value(json_object_get(j, "nonce")), nonce);
	assert_true(json_is_integer(json_object_get(j, "generation")));
	json_decref(j);
}

static void test_sync_answered(void **state)
{
	struct fixture *f = *state;

	send_line(f, ""); /* a keep-alive: no answer */
	sync_with(f, "{\"type\":\"sync\",\"nonce\":12345}", 12345);
	sync_with(f, "{\"type\":\"sync\",\"nonce\":9007199254740991}", 9007199254740991LL);
}

/* Each bad line gets one error line with its code; the next line is read. */
static void test_bad_lines_then_resume(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *line, *code;
	} bad[] = {
		{ "not json", "EBADMSG" },
		{ "[1,2]", "EBADMSG" },
		{ "{\"type\":\"frobnicate\"}", "EINVAL" },
		{ "{\"type\":\"ack\",\"seq\":-1}", "EINVAL" },
		{ "{\"type\":\"ack\",\"seq\":0}", "EINVAL" }, /* seqs start at 1: 0 acknowledges nothing */
		{ "{\"type\":\"ack\",\"seq\":\"1\"}", "EINVAL" },
	};
	_cleanup_free_ char *huge = malloc(CHANNEL_LINE_MAX + 2);
	json_t *j;

	sync_with(f, "{\"type\":\"sync\",\"nonce\":1}", 1);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		send_line(f, bad[i].line);
		j = until(f, "error", NULL);
		assert_string_equal(str(j, "code"), bad[i].code);
		assert_true(strlen(str(j, "message")) > 0);
		json_decref(j);
	}
	assert_non_null(huge);
	memset(huge, 'x', CHANNEL_LINE_MAX + 1);
	huge[CHANNEL_LINE_MAX + 1] = '\0';
	send_line(f, huge);
	j = until(f, "error", NULL);
	assert_string_equal(str(j, "code"), "E2BIG");
	json_decref(j);
	sync_with(f, "{\"type\":\"sync\",\"nonce\":2}", 2); /* reading resumed after the newline */
}

/* A grant: the immediate answer has no seq; its reports come one at a
 * time, the next only after the previous was acknowledged; a repeated
 * generation is answered with the record (no seq), not applied again. */
static void test_grant_reports_acked_one_at_a_time(void **state)
{
	struct fixture *f = *state;
	json_t *j, *k;
	json_int_t seq;
	struct pollfd pf;

	sync_with(f, "{\"type\":\"sync\",\"nonce\":3}", 3);
	send_line(f, "{\"type\":\"grant\",\"id\":\"c-1\",\"generation\":1,\"size\":\"256M\"}");
	j = until(f, "status", NULL);
	assert_string_equal(str(j, "id"), "c-1");
	assert_null(json_object_get(j, "seq"));
	json_decref(j);
	/* the reports: each carries a seq; nothing else comes until it is acked */
	for (;;) {
		j = until(f, "status", NULL);
		assert_string_equal(str(j, "id"), "c-1");
		seq = json_integer_value(json_object_get(j, "seq"));
		assert_true(seq > 0);
		pf = (struct pollfd){ .fd = f->host_fd, .events = POLLIN };
		if (!streq(str(j, "state"), "applied")) {
			/* one in flight: the next report waits for this ack (what is
			 * buffered already may only be other kinds of lines) */
			assert_null(memmem(f->buf, f->len, "\"seq\"", 5));
		}
		k = json_pack("{s:s,s:I}", "type", "ack", "seq", seq);
		{
			_cleanup_free_ char *line = json_dumps(k, JSON_COMPACT);
			send_line(f, line);
		}
		json_decref(k);
		if (streq(str(j, "state"), "applied")) {
			assert_int_equal(json_integer_value(json_object_get(j, "applied_bytes")), 256LL << 20);
			json_decref(j);
			break;
		}
		json_decref(j);
	}
	(void)pf;
	/* the same generation again: the record, nothing new */
	send_line(f, "{\"type\":\"grant\",\"id\":\"c-1\",\"generation\":1,\"size\":\"256M\"}");
	j = until(f, "status", NULL);
	assert_string_equal(str(j, "state"), "applied");
	assert_null(json_object_get(j, "seq"));
	json_decref(j);
}

/* The host goes away before acknowledging: after the reconnect and a sync
 * the same report (same seq) comes again. */
static void test_unacked_report_sent_again(void **state)
{
	struct fixture *f = *state;
	json_t *j;
	json_int_t seq;
	char state_was[24];

	sync_with(f, "{\"type\":\"sync\",\"nonce\":4}", 4);
	send_line(f, "{\"type\":\"grant\",\"id\":\"c-2\",\"generation\":5,\"size\":\"128M\"}");
	j = until(f, "status", NULL);
	assert_null(json_object_get(j, "seq"));
	json_decref(j);
	do {
		j = next_line(f);
		seq = json_integer_value(json_object_get(j, "seq"));
		snprintf(state_was, sizeof(state_was), "%s", str(j, "state"));
		json_decref(j);
	} while (seq == 0);
	close(f->host_fd); /* gone without the ack */
	f->host_fd = -1;
	assert_true(accept_host(f) >= 0);
	send_line(f, "");
	sync_with(f, "{\"type\":\"sync\",\"nonce\":5}", 5);
	j = next_line(f);
	assert_string_equal(str(j, "type"), "status");
	assert_int_equal(json_integer_value(json_object_get(j, "seq")), seq);
	assert_string_equal(str(j, "state"), state_was);
	json_decref(j);
}

static void test_query_answered(void **state)
{
	struct fixture *f = *state;
	json_t *j;

	sync_with(f, "{\"type\":\"sync\",\"nonce\":6}", 6);
	send_line(f, "{\"type\":\"query\"}");
	j = until(f, "agent_status", NULL);
	assert_string_equal(str(j, "agent"), "unit");
	assert_true(json_is_object(json_object_get(j, "memory")));
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sync_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_lines_then_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_reports_acked_one_at_a_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unacked_report_sent_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_query_answered, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
