/* SPDX-License-Identifier: MIT */
/*
 * The forwarding backend (contract in helper_client.h).
 */
#include "hotplug/privsep/helper_client.h"
#include "hotplug/privsep/helper_serve.h"
#include "lib/util.h"

#include <pthread.h>
#include <sys/socket.h>

struct privsep_backend {
	struct hp_backend base; /* first: the vtable casts back */
	struct hp_backend_ops ops; /* the inner backend's name with our functions */
	struct hp_backend *reader;
	int fd;
	pthread_mutex_t lock;
	bool gone; /* the helper is gone: every write fails from now on */
	bool has_deadline;
	struct timespec deadline;
};

static struct privsep_backend *of(struct hp_backend *b)
{
	return (struct privsep_backend *)b;
}

static int ps_discover(struct hp_backend *b, struct mem_table **out)
{
	return hp_discover(of(b)->reader, out);
}

static int ps_discover_lazy(struct hp_backend *b, struct mem_table **out)
{
	return hp_discover_lazy(of(b)->reader, out);
}

static int ps_read_block(struct hp_backend *b, uint64_t id, struct mem_block *out)
{
	return hp_read_block(of(b)->reader, id, out);
}

static int ps_reread(struct hp_backend *b, enum hp_reread what, const struct mem_block *known,
		     struct mem_block *out)
{
	return hp_reread(of(b)->reader, what, known, out);
}

static int ps_read_auto_online(struct hp_backend *b, char *buf, size_t len)
{
	struct hp_backend *r = of(b)->reader;

	return r->ops->read_auto_online(r, buf, len);
}

/* Change notifications are reads too: the reader's own. */
static int ps_watch_open(struct hp_backend *b)
{
	return hp_watch_open(of(b)->reader);
}

static int ps_watch_row(struct hp_backend *b, uint64_t id, struct mem_block *out)
{
	return hp_watch_row(of(b)->reader, id, out);
}

static int ps_watch_read(struct hp_backend *b, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	return hp_watch_read(of(b)->reader, ids, max, n, overflow);
}

/* Milliseconds left until the deadline, at least 1 (0 means no limit). */
static uint32_t ms_left(const struct timespec *deadline)
{
	struct timespec now;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
	if (ms < 1)
		return 1;
	return ms > PH_MAX_DEADLINE_MS ? PH_MAX_DEADLINE_MS : (uint32_t)ms;
}

/* The request for writing VALUE to ATTR of ID, or -EINVAL (see helper_serve.h). */
static int encode(enum hp_attr attr, uint64_t id, const char *value, struct ph_request *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->magic = PH_MAGIC;
	rq->block = id;
	if (!value)
		return -EINVAL;
	switch (attr) {
	case HP_ATTR_CONFIG:
		if (!streq(value, "1") && !streq(value, "0"))
			return -EINVAL;
		rq->op = streq(value, "1") ? PH_OP_CONFIGURE : PH_OP_DECONFIGURE;
		return 0;
	case HP_ATTR_MEMMAP:
		if (!streq(value, "1") && !streq(value, "0"))
			return -EINVAL;
		rq->op = PH_OP_SET_MEMMAP;
		rq->arg = streq(value, "1");
		return 0;
	case HP_ATTR_STATE:
		if (streq(value, "offline")) {
			rq->op = PH_OP_OFFLINE;
			return 0;
		}
		for (int t = ONLINE_DEFAULT; t <= ONLINE_MOVABLE; t++)
			if (streq(value, online_type_word((enum online_type)t))) {
				rq->op = PH_OP_ONLINE;
				rq->arg = (uint16_t)t;
				return 0;
			}
		return -EINVAL;
	case HP_ATTR_AUTO_ONLINE:
	{
		enum mem_auto_online a;

		if (mem_auto_online_parse(value, &a) < 0)
			return -EINVAL;
		rq->op = PH_OP_SET_AUTO_ONLINE;
		rq->arg = (uint16_t)a;
		rq->block = 0;
		return 0;
	}
	case HP_ATTR_ONLINE:
	default:
		return -EINVAL;
	}
}

/*
 * The helper cannot be asked anything any more (p->lock held): it exited, was
 * killed, or its reply broke the protocol.  Both directions of the socket are
 * shut, so a helper still running sees the end of its input and exits, and
 * the owner's poll sees the hang-up in every case.
 */
static int helper_gone_locked(struct privsep_backend *p)
{
	if (!p->gone)
		shutdown(p->fd, SHUT_RDWR);
	p->gone = true;
	return -HP_EWRITER_GONE;
}

/* Sends RQ[0..N) in one call and reads their N replies (p->lock held):
 * the first failure's errno, *DONE the requests answered 0 before it. */
static int exchange_locked(struct privsep_backend *p, struct ph_request *rq, size_t n, size_t *done)
{
	struct mmsghdr msgs[HP_WRITE_SEQ_MAX];
	struct iovec iov[HP_WRITE_SEQ_MAX];
	struct ph_reply rp[HP_WRITE_SEQ_MAX];
	size_t sent = 0;
	int first_err = 0;

	if (p->gone)
		return -HP_EWRITER_GONE;
	for (size_t i = 0; i < n; i++) {
		if (rq[i].op == PH_OP_OFFLINE && p->has_deadline)
			rq[i].deadline_ms = ms_left(&p->deadline);
		iov[i] = (struct iovec){ .iov_base = &rq[i], .iov_len = sizeof(rq[i]) };
		msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	while (sent < n) {
		int k = sendmmsg(p->fd, msgs + sent, (unsigned)(n - sent), MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || msgs[sent].msg_len != sizeof(rq[0]))
			/* EPIPE, ECONNRESET, ENOTCONN...: the requests did not
			 * reach the helper and no later one will (one sent before
			 * is answered into a socket nobody reads) */
			return helper_gone_locked(p);
		sent += (size_t)k;
	}
	/* The helper is doing the writes; a signal here changes nothing.  It
	 * answers each, a chained one after a failure with ECANCELED, all of
	 * a sequence together: one call takes them. */
	for (size_t i = 0; i < n; i++) {
		iov[i] = (struct iovec){ .iov_base = &rp[i], .iov_len = sizeof(rp[i]) };
		msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	for (size_t i = 0; i < n;) {
		int k = recvmmsg(p->fd, msgs + i, (unsigned)(n - i), MSG_TRUNC | MSG_WAITFORONE, NULL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			/* EOF or a reset: the helper died with the write in its
			 * hands, which may or may not have reached the kernel */
			if (!first_err)
				*done = i;
			return helper_gone_locked(p);
		}
		for (size_t end = i + (size_t)k; i < end; i++) {
			if (msgs[i].msg_len != sizeof(rp[i]) || rp[i].magic != PH_MAGIC || rp[i].err < 0) {
				if (!first_err)
					*done = i;
				return helper_gone_locked(p);
			}
			if (rp[i].err && !first_err) {
				/* the kernel's own errno; it never says ESHUTDOWN,
				 * which would read as the helper's end */
				first_err = rp[i].err == HP_EWRITER_GONE ? -EIO : -rp[i].err;
				*done = i;
			}
		}
	}
	if (!first_err)
		*done = n;
	return first_err;
}

static int ps_write_seq(struct hp_backend *b, uint64_t id, const struct hp_write *w, size_t n, size_t *done)
{
	struct privsep_backend *p = of(b);
	struct ph_request rq[HP_WRITE_SEQ_MAX];
	int r;

	*done = 0;
	if (n == 0 || n > HP_WRITE_SEQ_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		r = encode(w[i].attr, id, w[i].value, &rq[i]);
		if (r < 0)
			return r;
		rq[i].flags = i ? PH_FLAG_CHAINED : 0;
	}
	pthread_mutex_lock(&p->lock);
	r = exchange_locked(p, rq, n, done);
	pthread_mutex_unlock(&p->lock);
	return r;
}

static int ps_write_attr(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value)
{
	size_t done;

	return ps_write_seq(b, id, &(struct hp_write){ attr, value }, 1, &done);
}

static void ps_close(struct hp_backend *b)
{
	struct privsep_backend *p = of(b);

	hp_backend_close(p->reader);
	if (p->fd >= 0)
		close(p->fd);
	pthread_mutex_destroy(&p->lock);
	free(p->base.root);
	free(p);
}

/* The backend's set_write_deadline (backend.h): the helper enforces it. */
static int ps_set_write_deadline(struct hp_backend *b, const struct timespec *deadline)
{
	struct privsep_backend *p = of(b);

	pthread_mutex_lock(&p->lock);
	p->has_deadline = deadline != NULL;
	if (deadline)
		p->deadline = *deadline;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int hp_privsep_open(int fd, struct hp_backend *reader, struct hp_backend **out)
{
	struct privsep_backend *p = calloc(1, sizeof(*p));

	if (!p || !(p->base.root = strdup(reader->root))) {
		free(p);
		hp_backend_close(reader);
		close(fd);
		return -ENOMEM;
	}
	p->ops = (struct hp_backend_ops){
		.name = reader->ops->name,
		.discover = ps_discover,
		.discover_lazy = ps_discover_lazy,
		.read_block = ps_read_block,
		.reread = ps_reread,
		.write_attr = ps_write_attr,
		.write_seq = ps_write_seq,
		.read_auto_online = ps_read_auto_online,
		.watch_open = ps_watch_open,
		.watch_read = ps_watch_read,
		.watch_row = ps_watch_row,
		.set_write_deadline = ps_set_write_deadline,
		.close = ps_close,
	};
	p->base.ops = &p->ops;
	p->reader = reader;
	p->fd = fd;
	pthread_mutex_init(&p->lock, NULL);
	*out = &p->base;
	return 0;
}
