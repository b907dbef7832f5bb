/* SPDX-License-Identifier: MIT */
/*
 * no_network PROGRAM [ARG...]: runs PROGRAM where socket(AF_INET) and
 * socket(AF_INET6) fail with EAFNOSUPPORT, which is what the shipped
 * memgrantd.service's RestrictAddressFamilies=AF_UNIX AF_NETLINK does (systemd
 * installs the same seccomp rule).  For tests of memgrantd --check-config.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static const int families[] = { AF_INET, AF_INET6 };
	scmp_filter_ctx c;
	int r = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: no_network PROGRAM [ARG...]\n");
		return 2;
	}
	c = seccomp_init(SCMP_ACT_ALLOW);
	if (!c)
		return 1;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && r == 0; i++)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
				     SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]));
	if (r == 0)
		r = seccomp_load(c); /* sets no_new_privs itself */
	seccomp_release(c);
	if (r < 0) {
		fprintf(stderr, "no_network: cannot load the filter: %s\n", strerror(-r));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no_network: %s: %s\n", argv[1], strerror(errno));
	return 127;
}
