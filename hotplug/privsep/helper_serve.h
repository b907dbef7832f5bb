/* SPDX-License-Identifier: MIT */
/*
 * The privileged helper's side of the privilege split: its wire messages and
 * its request loop.
 *
 * memgrantd forks a helper that keeps the right to write the memory hotplug
 * files; everything that parses outside input runs in the other, unprivileged
 * process and asks the helper for each write over an AF_UNIX SOCK_SEQPACKET
 * socketpair (one message per datagram, so sizes are exact).  The protocol is
 * deliberately poor: six typed operations, fixed-size little structs in host
 * byte order (both ends are the same binary), no strings, no file names.
 *
 *   request (24 bytes)  magic op arg deadline_ms flags block
 *   reply   (8 bytes)   magic err            err: 0 or a positive errno
 *
 * The helper answers one reply per request, in order.  Right after start it
 * sends one unsolicited reply (the hello): err 0 when its backend is open,
 * else why not.  A request flagged PH_FLAG_CHAINED is performed only when
 * the request before it was answered 0; else it is answered ECANCELED and
 * nothing is written.  So a block's writes in the kernel's order (offline,
 * deconfigure) are sent together and the helper stops at the first that
 * fails, as the caller would: one round trip for them, not one each.
 *
 * A request that is not exactly one well-formed struct ph_request, carries
 * anything but bytes (SCM_RIGHTS ...), names an unknown operation, argument,
 * word or zone, a block the machine does not have, or a deadline where none
 * belongs, is not answered: privhelper_serve() returns -EPROTO with a line
 * saying what was wrong, and the helper exits without writing anything.
 * Errors of the write itself (EBUSY, EINVAL from the kernel ...) are answers,
 * not protocol errors.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hotplug/backend.h"
#include "hotplug/block.h"
#include "hotplug/sysfs/path.h"

#define PH_MAGIC 0x4d475048u /* "MGPH" */
#define PH_MAX_DEADLINE_MS (24u * 3600u * 1000u)
/* Performed only if the request before it was answered 0 (see above). */
#define PH_FLAG_CHAINED 0x1u

enum ph_op {
	PH_OP_CONFIGURE = 1,   /* firmware config = 1 (C7) */
	PH_OP_DECONFIGURE,     /* firmware config = 0 (C11) */
	PH_OP_SET_MEMMAP,      /* memmap_on_memory = arg (0 or 1, C12) */
	PH_OP_ONLINE,          /* state = online_type_word(arg) (W5) */
	PH_OP_OFFLINE,         /* state = offline, within deadline_ms (W6) */
	PH_OP_SET_AUTO_ONLINE, /* auto_online_blocks = mem_auto_online_words[arg] (A2) */
};

struct ph_request {
	uint32_t magic;
	uint16_t op;          /* enum ph_op */
	uint16_t arg;         /* memmap 0/1, enum online_type, word index; else 0 */
	uint32_t deadline_ms; /* PH_OP_OFFLINE only: 0 no limit, else at most PH_MAX_DEADLINE_MS */
	uint32_t flags;       /* 0 or PH_FLAG_CHAINED */
	uint64_t block;       /* block id; 0 for PH_OP_SET_AUTO_ONLINE */
};

struct ph_reply {
	uint32_t magic;
	int32_t err; /* 0 or a positive errno */
};

_Static_assert(sizeof(struct ph_request) == 24, "the request is 24 bytes on every ABI");
_Static_assert(sizeof(struct ph_reply) == 8, "the reply is 8 bytes on every ABI");

/* A set_auto_online request's arg is an enum mem_auto_online (block.h):
 * mem_auto_online_words[arg], one of these many. */
#define PH_AUTO_ONLINE_WORDS ((unsigned)MEM_AUTO_ONLINE_MOVABLE + 1)

const char *ph_op_name(enum ph_op op); /* "configure", ...; "unknown" */

/* Checks the LEN bytes received as RQ against the rules above, with ROOT the
 * tree the writes go to (block N exists when memoryN is in either of its
 * memory directories).  0 or -EPROTO with WHY set. */
int ph_request_check(const struct ph_request *rq, size_t len, struct hp_path *root, char *why, size_t whylen);

/*
 * Serves requests on FD (the helper's end of the socketpair) until the peer
 * closes it, and those of the credential channel CREDS (NULL: none, see
 * cred_channel.h) while it is open: each valid request is performed on WRITER, which writes under
 * ROOT.  Returns 0 at end of file, -EPROTO for a bad request and -errno for a
 * broken socket, with WHY saying what happened.
 *
 * An offline with a deadline is written by a child process that is killed
 * (SIGKILL) at the deadline, the one signal that ends Linux's migration
 * loop (hp_write_with_deadline(), backend.h); the reply then says EINTR.
 * The helper waits for that child, so nothing else is served meanwhile.
 */
struct mg_log;
struct ph_cred_list {
	int fd;                    /* the credential channel (cred_channel.h), -1: none */
	const char *const *paths;  /* by index; NULL entries are not served */
	size_t n;
	const struct mg_log *log;  /* where a refused file's reason goes, once */
};
int privhelper_serve(int fd, const struct ph_cred_list *creds, struct hp_backend *writer, struct hp_path *root,
		     char *why, size_t whylen);

/* Sends the hello (ERR: 0 or a negative errno). */
int privhelper_hello(int fd, int err);
