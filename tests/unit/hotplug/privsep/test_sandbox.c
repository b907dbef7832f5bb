/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filters as built for s390x, checked on any machine: s390x's
 * glibc makes every socket call through socketcall(CALL, ARGS), so each
 * filter must allow socketcall for exactly the calls its process makes
 * (the helper: send, recv, sendto, sendmsg, sendmmsg, recvmsg; never socket) and
 * nothing else.  The filters are written as libseccomp's pseudo filter code
 * (sandbox_filter_pfc()) and the values socketcall's first argument may take
 * are read from it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <linux/net.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hotplug/privsep/sandbox.h"
#include "lib/util.h"

/* The filter WHICH for ARCH as pseudo filter code (malloc'd). */
static char *pfc(enum sandbox_filter which, const char *arch)
{
	char err[256] = "";
	int fd = memfd_create("pfc", MFD_CLOEXEC);
	off_t n;
	char *text;

	assert_true(fd >= 0);
	/* qemu-user (the s390x test step) emulates no seccomp: libseccomp
	 * cannot make a filter there; the native run checks every arch */
	if (getenv("TEST_WRAPPER") && *getenv("TEST_WRAPPER")) {
		close(fd);
		skip();
	}
	if (sandbox_filter_pfc(which, arch, fd, err, sizeof(err)) < 0)
		fail_msg("sandbox_filter_pfc(%s): %s", arch, err);
	n = lseek(fd, 0, SEEK_END);
	assert_true(n > 0);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(pread(fd, text, (size_t)n, 0), n);
	close(fd);
	return text;
}

/* Which values of socketcall's first argument the filter allows: a bit per
 * call number; -1 when the filter has no socketcall rule at all. */
static long long socketcall_calls(const char *text)
{
	const char *p = strstr(text, "# filter for syscall \"socketcall\"");
	long long calls = 0;

	if (!p)
		return -1;
	p = strchr(p, '\n');
	while (p && *++p) {
		unsigned v;
		const char *eol = strchr(p, '\n');

		if (strncmp(p + strspn(p, " "), "# ", 2) == 0)
			break; /* the next syscall's rules or the default action */
		if (sscanf(p + strspn(p, " "), "if ($a0.lo32 == %u)", &v) == 1) {
			const char *next = eol ? eol + 1 : "";
			/* the rule under the comparison must allow */
			if (strstr(next, "action ALLOW;") == next + strspn(next, " "))
				calls |= 1LL << v;
		}
		p = eol;
	}
	return calls;
}

#define BIT(n) (1LL << (n))

static void helper_s390x_socketcall_only_its_calls(void **state)
{
	(void)state;
	long long want = BIT(SYS_SEND) | BIT(SYS_RECV) | BIT(SYS_SENDTO) | BIT(SYS_SENDMSG) | BIT(SYS_RECVMSG) |
			 BIT(SYS_SENDMMSG);

	for (int sim = 0; sim < 2; sim++) {
		_cleanup_free_ char *text = pfc(sim ? SANDBOX_FILTER_HELPER_SIM : SANDBOX_FILTER_HELPER, "s390x");
		long long got = socketcall_calls(text);

		if (got != want)
			fail_msg("helper%s filter for s390x allows socketcall calls %#llx, want %#llx (send, recv, "
				 "sendto, sendmsg, recvmsg, sendmmsg):\n%s", sim ? " (sim)" : "", got, want, text);
		assert_false(got & BIT(SYS_SOCKET));
	}
}

static void main_s390x_socketcall_every_socket_call(void **state)
{
	_cleanup_free_ char *text = pfc(SANDBOX_FILTER_MAIN, "s390x");
	long long want = 0;

	(void)state;
	for (int call = SYS_SOCKET; call <= SYS_SENDMMSG; call++)
		want |= BIT(call);
	if (socketcall_calls(text) != want)
		fail_msg("main filter for s390x allows socketcall calls %#llx, want %#llx (1-20):\n%s",
			 socketcall_calls(text), want, text);
	/* the direct socket call keeps its family check: AF_UNIX (1) allowed */
	assert_non_null(strstr(text, "# filter for syscall \"socket\" (359)"));
}

static void x86_64_has_no_socketcall(void **state)
{
	_cleanup_free_ char *helper = pfc(SANDBOX_FILTER_HELPER, "x86_64");
	_cleanup_free_ char *main_text = pfc(SANDBOX_FILTER_MAIN, "x86_64");

	(void)state;
	assert_int_equal(socketcall_calls(helper), -1);
	assert_int_equal(socketcall_calls(main_text), -1);
	assert_non_null(strstr(helper, "\"recvmsg\""));
}

static void unknown_arch_is_an_error(void **state)
{
	char err[256] = "";

	(void)state;
	if (getenv("TEST_WRAPPER") && *getenv("TEST_WRAPPER"))
		skip(); /* no seccomp under qemu-user: see pfc() */
	assert_int_equal(sandbox_filter_pfc(SANDBOX_FILTER_MAIN, "vax", 1, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "vax"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(helper_s390x_socketcall_only_its_calls),
		cmocka_unit_test(main_s390x_socketcall_every_socket_call),
		cmocka_unit_test(x86_64_has_no_socketcall),
		cmocka_unit_test(unknown_arch_is_an_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
