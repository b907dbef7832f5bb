/* SPDX-License-Identifier: MIT */
/*
 * privhelper_probe: starts memgrantd's privileged helper exactly as
 * memgrantd does (hotplug/privsep/spawn.h: same backend, capabilities and seccomp
 * filter) for a configuration file, stands in for the unprivileged process
 * and sends it one request, well-formed or not.  For
 * tests/integration/privsep_bad_requests.sh.
 *
 *   privhelper_probe [-o KEY=VALUE]... HELPER CONFIG REQUEST
 *
 * HELPER: the memgrant-helper program.  -o overrides a key of CONFIG as
 * memgrantd's does (.ci/s390x.sh sets agent.seccomp=off under qemu-user).
 *
 * Well-formed: configure:N deconfigure:N memmap:N:V online:N:ZONE
 * offline:N:DEADLINE_MS auto_online:WORD_INDEX.  Malformed: short long huge
 * empty magic pad op0 op99 noblock zone memmap2 word aoblock deadline
 * bigdeadline fd.
 *
 * Prints "answer: 0" or "answer: ENAME" when the helper answered, then
 * "closed" when it closed the socket instead, and last "helper: exit N" or
 * "helper: signal N" after closing its end.  The helper's log goes to stderr.
 * Exit status 0 unless the probe itself failed (2).
 */
#include "hotplug/privsep/spawn.h"
#include "agent/engine/backend_setup.h"
#include "config/config.h"
#include "hotplug/privsep/helper_serve.h"
#include "lib/util.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <sys/wait.h>

static int build(const char *spec, struct ph_request *rq, char *bytes, size_t *len, bool *with_fd)
{
	unsigned long long n = 0, v = 0;
	char word[32] = "";

	memset(rq, 0, sizeof(*rq));
	rq->magic = PH_MAGIC;
	rq->op = PH_OP_CONFIGURE;
	rq->block = 4;
	*len = sizeof(*rq);
	*with_fd = false;
	if (sscanf(spec, "%31[a-z_]:%llu:%llu", word, &n, &v) >= 2 || sscanf(spec, "%31[a-z_]", word) == 1) {
		if (streq(word, "configure") || streq(word, "deconfigure")) {
			rq->op = streq(word, "configure") ? PH_OP_CONFIGURE : PH_OP_DECONFIGURE;
			rq->block = n;
		} else if (streq(word, "memmap") && strchr(spec, ':')) {
			rq->op = PH_OP_SET_MEMMAP;
			rq->block = n;
			rq->arg = (uint16_t)v;
		} else if (streq(word, "online")) {
			rq->op = PH_OP_ONLINE;
			rq->block = n;
			rq->arg = (uint16_t)v;
		} else if (streq(word, "offline")) {
			rq->op = PH_OP_OFFLINE;
			rq->block = n;
			rq->deadline_ms = (uint32_t)v;
		} else if (streq(word, "auto_online")) {
			rq->op = PH_OP_SET_AUTO_ONLINE;
			rq->block = 0;
			rq->arg = (uint16_t)n;
		} else if (streq(word, "short")) {
			*len = 10;
		} else if (streq(word, "long")) {
			*len = sizeof(*rq) + 1;
		} else if (streq(word, "huge")) {
			*len = 4096;
		} else if (streq(word, "empty")) {
			*len = 0;
		} else if (streq(word, "magic")) {
			rq->magic = 0x12345678;
		} else if (streq(word, "pad")) {
			rq->flags = 2;
		} else if (streq(word, "op")) {
			rq->op = (uint16_t)n; /* op:0, op:99 */
		} else if (streq(word, "noblock")) {
			rq->block = 100000;
		} else if (streq(word, "zone")) {
			rq->op = PH_OP_ONLINE;
			rq->block = 0;
			rq->arg = 9;
		} else if (streq(word, "memmap")) {
			rq->op = PH_OP_SET_MEMMAP;
			rq->arg = 2;
		} else if (streq(word, "word")) {
			rq->op = PH_OP_SET_AUTO_ONLINE;
			rq->block = 0;
			rq->arg = 4;
		} else if (streq(word, "aoblock")) {
			rq->op = PH_OP_SET_AUTO_ONLINE;
			rq->block = 5;
		} else if (streq(word, "deadline")) {
			rq->deadline_ms = 1000;
		} else if (streq(word, "bigdeadline")) {
			rq->op = PH_OP_OFFLINE;
			rq->block = 0;
			rq->deadline_ms = PH_MAX_DEADLINE_MS + 1;
		} else if (streq(word, "fd")) {
			*with_fd = true;
		} else {
			return -EINVAL;
		}
	} else {
		return -EINVAL;
	}
	memset(bytes, 0, 4096);
	memcpy(bytes, rq, sizeof(*rq));
	return 0;
}

static ssize_t send_request(int fd, const char *bytes, size_t len, bool with_fd)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = (void *)bytes, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int extra = -1;

	if (with_fd) {
		struct cmsghdr *c;

		extra = open("/dev/null", O_RDONLY | O_CLOEXEC);
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &extra, sizeof(int));
	}
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	if (extra >= 0)
		close(extra);
	return n;
}

int main(int argc, char **argv)
{
	_cleanup_config_diag_ struct config_diag diag = { 0 };
	struct mg_config *cfg = NULL;
	struct mg_log log;
	struct helper h;
	struct ph_request rq;
	struct ph_reply rp;
	static char bytes[4096];
	size_t len;
	bool with_fd;
	const char *overrides[9] = { 0 };
	size_t n_overrides = 0;
	ssize_t n;
	int status, r, c;

	while ((c = getopt(argc, argv, "+o:")) != -1) {
		if (c != 'o' || n_overrides + 1 >= ARRAY_SIZE(overrides)) {
			fprintf(stderr, "usage: privhelper_probe [-o KEY=VALUE]... HELPER CONFIG REQUEST\n");
			return 2;
		}
		overrides[n_overrides++] = optarg;
	}
	argv += optind;
	argc -= optind;
	if (argc != 3) {
		fprintf(stderr, "usage: privhelper_probe [-o KEY=VALUE]... HELPER CONFIG REQUEST\n");
		return 2;
	}
	if (build(argv[2], &rq, bytes, &len, &with_fd) < 0) {
		fprintf(stderr, "privhelper_probe: unknown request '%s'\n", argv[2]);
		return 2;
	}
	r = config_load(argv[1], overrides, &cfg, &diag);
	if (r < 0) {
		for (size_t i = 0; i < diag.n; i++)
			fprintf(stderr, "%s\n", diag.msgs[i]);
		return 2;
	}
	log_init(&log, "memgrantd", LOG_DEBUG);
	r = backend_start_helper(cfg, &log, argv[0], NULL, 0, &h);
	if (r < 0) {
		fprintf(stderr, "privhelper_probe: the helper did not start: %s\n", strerror(-r));
		config_free(cfg);
		return 2;
	}
	fflush(stdout);
	n = send_request(h.fd, bytes, len, with_fd);
	if (n < 0)
		printf("send: %s\n", strerror(errno));
	do
		n = recv(h.fd, &rp, sizeof(rp), 0);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(rp))
		printf("answer: %s\n", rp.err ? errno_name(-rp.err) : "0");
	else
		printf("closed\n");
	close(h.fd);
	while (waitpid(h.pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		printf("helper: exit %d\n", WEXITSTATUS(status));
	else
		printf("helper: signal %d\n", WTERMSIG(status));
	config_free(cfg);
	return 0;
}
