/* SPDX-License-Identifier: MIT */
/*
 * The privileged helper's request loop (contract in serve.h).
 *
 * Every request is checked completely before anything is written; a check
 * that fails ends the loop, because only a broken or subverted peer sends
 * such a request and nothing it asks for afterwards can be trusted.
 */
#include "hotplug/privsep/helper_serve.h"
#include "hotplug/privsep/cred_channel.h"
#include "lib/log.h"
#include "lib/timeutil.h"
#include "lib/util.h"

#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>

const char *ph_op_name(enum ph_op op)
{
	switch (op) {
	case PH_OP_CONFIGURE: return "configure";
	case PH_OP_DECONFIGURE: return "deconfigure";
	case PH_OP_SET_MEMMAP: return "set_memmap";
	case PH_OP_ONLINE: return "online";
	case PH_OP_OFFLINE: return "offline";
	case PH_OP_SET_AUTO_ONLINE: return "set_auto_online";
	}
	return "unknown";
}

__attribute__((format(printf, 3, 4)))
static int bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

static bool block_exists(struct hp_path *root, uint64_t id)
{
	char rel[96];

	snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64, id);
	if (hp_path_exists(root, rel) == 0)
		return true;
	snprintf(rel, sizeof(rel), "sys/firmware/memory/memory%" PRIu64, id);
	return hp_path_exists(root, rel) == 0;
}

int ph_request_check(const struct ph_request *rq, size_t len, struct hp_path *root, char *why, size_t whylen)
{
	if (len != sizeof(*rq))
		return bad(why, whylen, "request of %zu bytes, expected %zu", len, sizeof(*rq));
	if (rq->magic != PH_MAGIC)
		return bad(why, whylen, "request with magic 0x%08" PRIx32 ", expected 0x%08x", rq->magic, PH_MAGIC);
	if (rq->flags & ~PH_FLAG_CHAINED)
		return bad(why, whylen, "request with unknown flags 0x%08" PRIx32 ", only 0x%x is defined", rq->flags,
			   PH_FLAG_CHAINED);
	switch (rq->op) {
	case PH_OP_CONFIGURE:
	case PH_OP_DECONFIGURE:
		if (rq->arg != 0)
			return bad(why, whylen, "%s with argument %u, expected 0", ph_op_name(rq->op), rq->arg);
		break;
	case PH_OP_SET_MEMMAP:
		if (rq->arg > 1)
			return bad(why, whylen, "set_memmap to %u, expected 0 or 1", rq->arg);
		break;
	case PH_OP_ONLINE:
		if (rq->arg != ONLINE_DEFAULT && rq->arg != ONLINE_KERNEL && rq->arg != ONLINE_MOVABLE)
			return bad(why, whylen, "online into zone %u, which is none of online, online_kernel, online_movable",
				   rq->arg);
		break;
	case PH_OP_OFFLINE:
		if (rq->arg != 0)
			return bad(why, whylen, "offline with argument %u, expected 0", rq->arg);
		if (rq->deadline_ms > PH_MAX_DEADLINE_MS)
			return bad(why, whylen, "offline with a deadline of %" PRIu32 " ms, at most %u allowed",
				   rq->deadline_ms, PH_MAX_DEADLINE_MS);
		break;
	case PH_OP_SET_AUTO_ONLINE:
		if (rq->arg >= PH_AUTO_ONLINE_WORDS)
			return bad(why, whylen, "auto_online_blocks word %u, there are %u", rq->arg,
				   PH_AUTO_ONLINE_WORDS);
		if (rq->block != 0)
			return bad(why, whylen, "set_auto_online for block %" PRIu64 ", expected 0", rq->block);
		break;
	default:
		return bad(why, whylen, "unknown operation %u", rq->op);
	}
	if (rq->op != PH_OP_OFFLINE && rq->deadline_ms != 0)
		return bad(why, whylen, "%s with a deadline, which only offline takes", ph_op_name(rq->op));
	if (rq->op != PH_OP_SET_AUTO_ONLINE && !block_exists(root, rq->block))
		return bad(why, whylen, "%s of block %" PRIu64 ", which this machine does not have", ph_op_name(rq->op),
			   rq->block);
	return 0;
}

static int perform(struct hp_backend *w, const struct ph_request *rq)
{
	struct timespec deadline;
	int r;

	switch (rq->op) {
	case PH_OP_CONFIGURE: return block_configure(w, rq->block);
	case PH_OP_DECONFIGURE: return block_deconfigure(w, rq->block);
	case PH_OP_SET_MEMMAP: return block_set_memmap(w, rq->block, rq->arg == 1);
	case PH_OP_ONLINE: return block_online(w, rq->block, (enum online_type)rq->arg);
	case PH_OP_OFFLINE:
		if (!rq->deadline_ms)
			return block_offline(w, rq->block);
		/* a child killed at the deadline (hp_write_with_deadline) */
		deadline_after_ms(&deadline, (long)rq->deadline_ms);
		hp_set_write_deadline(w, &deadline);
		r = block_offline(w, rq->block);
		hp_set_write_deadline(w, NULL);
		return r;
	case PH_OP_SET_AUTO_ONLINE: return hp_set_auto_online(w, mem_auto_online_words[rq->arg]);
	}
	return -EINVAL; /* not reached: checked */
}

/* Whether the next request on FD is already there and chained to the one
 * just performed (a look, not a read: the loop reads and checks it). */
static bool chained_request_waiting(int fd)
{
	struct ph_request rq;
	struct iovec iov = { .iov_base = &rq, .iov_len = sizeof(rq) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	do
		n = recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(rq) && (rq.flags & PH_FLAG_CHAINED);
}

/* How long the offline writer of a revocation outlives its last offline. */
#define OFFLINE_WRITER_IDLE_MS 1000

/* Answers not sent yet: their sequence goes on. */
struct held {
	int err[HP_WRITE_SEQ_MAX];
	size_t n;
};

/* Sends the answers H holds, in order, in one call (the peer takes them
 * in one, helper_client.c): 0 or -errno with WHY set. */
static int send_held(int fd, struct held *h, char *why, size_t whylen)
{
	struct ph_reply rp[HP_WRITE_SEQ_MAX];
	struct iovec iov[HP_WRITE_SEQ_MAX];
	struct mmsghdr msgs[HP_WRITE_SEQ_MAX];
	size_t n = h->n, sent = 0;

	h->n = 0;
	for (size_t i = 0; i < n; i++) {
		rp[i] = (struct ph_reply){ .magic = PH_MAGIC, .err = h->err[i] < 0 ? -h->err[i] : h->err[i] };
		iov[i] = (struct iovec){ .iov_base = &rp[i], .iov_len = sizeof(rp[i]) };
		msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	while (sent < n) {
		int k = sendmmsg(fd, msgs + sent, (unsigned)(n - sent), MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || msgs[sent].msg_len != sizeof(rp[0])) {
			int r = k < 0 ? -errno : -EIO;

			snprintf(why, whylen, "cannot answer: %s", strerror(-r));
			return r;
		}
		sent += (size_t)k;
	}
	return 0;
}

int privhelper_hello(int fd, int err)
{
	struct held h = { .err = { err }, .n = 1 };
	char why[64];

	return send_held(fd, &h, why, sizeof(why));
}

static int serve_requests(int fd, const struct ph_cred_list *creds, struct hp_backend *writer, struct hp_path *root,
			  struct held *held, char *why, size_t whylen)
{
	int cred_fd = creds ? creds->fd : -1;
	uint32_t refusals_said = 0; /* by index: a retried request is not logged again */
	int last_err = 0;           /* the last request's answer, for a chained one */

	for (;;) {
		/* one byte more than a request, so that a longer one shows */
		union {
			struct ph_request rq;
			char bytes[sizeof(struct ph_request) + 1];
		} buf;
		union {
			struct cmsghdr align;
			char bytes[CMSG_SPACE(sizeof(int) * 4)];
		} ctl;
		struct iovec iov = { .iov_base = buf.bytes, .iov_len = sizeof(buf.bytes) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.bytes,
				     .msg_controllen = sizeof(ctl.bytes) };
		ssize_t n;
		int r;

		if (cred_fd >= 0 || hp_offline_writer_running(writer)) {
			/* a credential request is answered between two block
			 * requests; the offline writer ends once offlines under a
			 * deadline stopped coming (a revocation is over) */
			struct pollfd pf[2] = { { .fd = fd, .events = POLLIN }, { .fd = cred_fd, .events = POLLIN } };
			int ready = poll(pf, cred_fd >= 0 ? 2 : 1,
					 hp_offline_writer_running(writer) ? OFFLINE_WRITER_IDLE_MS : -1);

			if (ready < 0) {
				if (errno == EINTR)
					continue;
				r = -errno;
				snprintf(why, whylen, "poll: %s", strerror(errno));
				return r;
			}
			if (ready == 0) {
				hp_offline_writer_end(writer);
				continue;
			}
			if (cred_fd >= 0 && pf[1].revents) {
				r = ph_cred_answer(cred_fd, creds->paths, creds->n, &refusals_said, why, whylen);
				if (r < 0)
					return r;
				if (r == 1 && why[0] && creds->log)
					log_err(creds->log, "privileged helper: refusing a credential: %s", why);
				if (r == 0)
					cred_fd = -1; /* closed: the block channel goes on */
				continue;
			}
		}
		memset(&buf, 0, sizeof(buf));
		n = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			snprintf(why, whylen, "cannot read a request: %s", strerror(errno));
			return r;
		}
		if (n == 0) {
			/* end of file, or a zero-length message on a socket still open */
			struct pollfd p = { .fd = fd, .events = POLLRDHUP };
			if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP))) {
				snprintf(why, whylen, "the unprivileged process closed the socket");
				return 0;
			}
			return bad(why, whylen, "request of 0 bytes, expected %zu", sizeof(buf.rq));
		}
		if (mh.msg_controllen > 0 || (mh.msg_flags & MSG_CTRUNC)) {
			/* close what came along: none of it is used */
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
					for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
						close(((int *)(void *)CMSG_DATA(c))[i]);
			return bad(why, whylen, "request with ancillary data (file descriptors or credentials)");
		}
		r = ph_request_check(&buf.rq, (size_t)n, root, why, whylen);
		if (r < 0)
			return r;
		last_err = (buf.rq.flags & PH_FLAG_CHAINED) && last_err ? -ECANCELED : perform(writer, &buf.rq);
		held->err[held->n++] = last_err;
		/* the answers of a sequence go together, after its last write:
		 * the peer then wakes once for them */
		if (held->n < ARRAY_SIZE(held->err) && chained_request_waiting(fd))
			continue;
		r = send_held(fd, held, why, whylen);
		if (r < 0)
			return r;
	}
}

int privhelper_serve(int fd, const struct ph_cred_list *creds, struct hp_backend *writer, struct hp_path *root,
		     char *why, size_t whylen)
{
	struct held held = { .n = 0 };
	int r = serve_requests(fd, creds, writer, root, &held, why, whylen);
	char ignored[64];

	/* a sequence cut short by a refused request, or by the end: every
	 * request performed is answered all the same */
	(void)send_held(fd, &held, ignored, sizeof(ignored));
	return r;
}
