/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the root helper's block requests
 * (hotplug/privsep/helper_serve.h): the input is cut into datagrams (a
 * length byte, 0-31, then that many bytes; at most 64) sent on a
 * SOCK_SEQPACKET socketpair, whose other end privhelper_serve() serves
 * with a backend that only counts its writes, under a sysfs-shaped tree in
 * /tmp with blocks 0-3 in sys/devices/system/memory and 4-5 in
 * sys/firmware/memory (never the real /sys); its writes to block 3 fail
 * with EBUSY.  Whatever the bytes: no crash, no leak; the helper answers
 * exactly the requests before the first one ph_request_check() refuses, in
 * order, each with one write and its result, but a chained one after a
 * failed one (PH_FLAG_CHAINED) with ECANCELED and no write; then it stops
 * with -EPROTO and a reason, or returns 0 at end of file.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * The backend takes an offline's deadline itself (set_write_deadline, as
 * the forwarding backend does), so its offlines are written here, not in a
 * child killed at the deadline (hotplug/deadline.c), and counted.
 * Sources: hotplug/privsep/helper_serve.c hotplug/privsep/cred_channel.c hotplug/backend.c hotplug/deadline.c hotplug/sysfs/path.c lib/log.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hotplug/privsep/helper_serve.h"

#define DATAGRAMS_MAX 64

static char root[64];
static struct hp_path *tree;

struct counting_backend {
	struct hp_backend base;
	size_t writes;
};

#define BUSY_BLOCK 3

static int count_write(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value)
{
	(void)attr;
	if (!value || !value[0])
		abort();
	((struct counting_backend *)(void *)b)->writes++;
	return id == BUSY_BLOCK && attr != HP_ATTR_AUTO_ONLINE ? -EBUSY : 0;
}

static int take_deadline(struct hp_backend *b, const struct timespec *deadline)
{
	(void)b;
	(void)deadline;
	return 0;
}

static const struct hp_backend_ops counting_ops = { .name = "counting", .write_attr = count_write,
						    .set_write_deadline = take_deadline };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char cmd[8 * sizeof(root) + 256];

	(void)argc;
	(void)argv;
	snprintf(root, sizeof(root), "/tmp/fuzz-helper-request.%d", (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %s/sys/devices/system/memory/memory0 %s/sys/devices/system/memory/memory1 "
		 "%s/sys/devices/system/memory/memory2 %s/sys/devices/system/memory/memory3 "
		 "%s/sys/firmware/memory/memory4 %s/sys/firmware/memory/memory5",
		 root, root, root, root, root, root);
	if (system(cmd) != 0 || hp_path_open(root, &tree) < 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct counting_backend w = { .base = { .ops = &counting_ops } };
	size_t off = 0, sent = 0, valid = 0, replies = 0, writes = 0;
	int32_t want[DATAGRAMS_MAX], last = 0;
	bool refused = false, empty = false;
	char why[256] = "", model_why[256];
	struct ph_reply rp;
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	while (off < size && sent < DATAGRAMS_MAX) {
		size_t len = data[off++] % 32;
		union {
			struct ph_request rq;
			char bytes[32];
		} dg;

		if (len > size - off)
			len = size - off;
		memset(&dg, 0, sizeof(dg));
		memcpy(dg.bytes, data + off, len);
		off += len;
		if (send(sv[0], dg.bytes, len, MSG_NOSIGNAL) != (ssize_t)len)
			abort();
		sent++;
		/* what the helper must do with it: answer it, or stop at it */
		if (refused || empty)
			continue;
		if (len == 0)
			empty = true;
		else if (ph_request_check(&dg.rq, len, tree, model_why, sizeof(model_why)) < 0)
			refused = true;
		else {
			if ((dg.rq.flags & PH_FLAG_CHAINED) && last) {
				last = ECANCELED;
			} else {
				writes++;
				last = dg.rq.op != PH_OP_SET_AUTO_ONLINE && dg.rq.block == BUSY_BLOCK ? EBUSY : 0;
			}
			want[valid++] = last;
		}
	}
	shutdown(sv[0], SHUT_WR);
	r = privhelper_serve(sv[1], NULL, &w.base, tree, why, sizeof(why));
	/* the replies first: closing the helper's end with requests unread resets the other */
	while (recv(sv[0], &rp, sizeof(rp), MSG_DONTWAIT) == (ssize_t)sizeof(rp)) {
		if (rp.magic != PH_MAGIC || replies >= valid || rp.err != want[replies])
			abort();
		replies++;
	}
	close(sv[0]);
	close(sv[1]);
	if (replies != valid || w.writes != writes || !why[0])
		abort();
	/* a refused request ends the loop with -EPROTO; an empty datagram
	 * before the end of file is refused too, or read as the end */
	if (refused && r != -EPROTO)
		abort();
	if (!refused && !empty && r != 0)
		abort();
	if (empty && r != 0 && r != -EPROTO)
		abort();
	return 0;
}
