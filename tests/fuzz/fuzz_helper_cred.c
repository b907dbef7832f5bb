/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the root helper's credential requests
 * (hotplug/privsep/cred_channel.h): the input is cut into datagrams (a
 * length byte, 0-15, then that many bytes; at most 32) sent on a
 * SOCK_SEQPACKET socketpair, whose other end ph_cred_answer() answers
 * from a list of four: a regular file, an entry not served, a path that
 * does not exist and a folder (all under /tmp).  Whatever the bytes: no
 * crash, no leak, no descriptor left open; a datagram of 8 bytes with the
 * magic and an index below 4 is answered (1) with the file's descriptor,
 * EPERM, ENOENT or EINVAL; anything else ends the channel with -EPROTO and
 * a reason; the end of file returns 0.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: hotplug/privsep/cred_channel.c
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotplug/privsep/cred_channel.h"

#define DATAGRAMS_MAX 32
#define CREDS 4

static char folder[64], file[96], missing[96];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int fd;

	(void)argc;
	(void)argv;
	snprintf(folder, sizeof(folder), "/tmp/fuzz-helper-cred.%d", (int)getpid());
	snprintf(file, sizeof(file), "%s/token", folder);
	snprintf(missing, sizeof(missing), "%s/missing", folder);
	if (mkdir(folder, 0700) < 0 && errno != EEXIST)
		abort();
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, "secret\n", 7) != 7)
		abort();
	close(fd);
	return 0;
}

/* The answer to the request just answered, with its descriptor (-1: none). */
static int read_answer(int sock, int32_t *err)
{
	struct { uint32_t magic; int32_t err; } rp;
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = &rp, .iov_len = sizeof(rp) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.bytes,
			     .msg_controllen = sizeof(ctl.bytes) };
	struct cmsghdr *c;
	int fd = -1;

	if (recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(rp) || rp.magic != PH_CRED_MAGIC)
		abort();
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	*err = rp.err;
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *const paths[CREDS] = { file, NULL, missing, folder };
	static const int32_t expected[CREDS] = { 0, EPERM, ENOENT, EINVAL };
	size_t off = 0, sent = 0;
	bool ended = false;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	while (off < size && sent < DATAGRAMS_MAX && !ended) {
		size_t len = data[off++] % 16;
		union {
			struct ph_cred_request rq;
			char bytes[16];
		} dg;
		char why[256] = "";
		int32_t err;
		int r, fd;

		if (len > size - off)
			len = size - off;
		memset(&dg, 0, sizeof(dg));
		memcpy(dg.bytes, data + off, len);
		off += len;
		if (send(sv[0], dg.bytes, len, MSG_NOSIGNAL) != (ssize_t)len)
			abort();
		sent++;
		r = ph_cred_answer(sv[1], paths, CREDS, NULL, why, sizeof(why));
		if (len == sizeof(dg.rq) && dg.rq.magic == PH_CRED_MAGIC && dg.rq.index < CREDS) {
			if (r != 1)
				abort();
			fd = read_answer(sv[0], &err);
			if (err != expected[dg.rq.index] || (fd >= 0) != (err == 0))
				abort();
			if (fd >= 0)
				close(fd);
		} else if (len == 0) {
			/* an empty datagram reads as the end of the channel */
			if (r != 0 || !why[0])
				abort();
			ended = true;
		} else {
			if (r != -EPROTO || !why[0])
				abort();
			ended = true;
		}
	}
	if (!ended) {
		char why[256] = "";

		shutdown(sv[0], SHUT_WR);
		if (ph_cred_answer(sv[1], paths, CREDS, NULL, why, sizeof(why)) != 0 || !why[0])
			abort();
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}
