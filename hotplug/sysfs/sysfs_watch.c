/* SPDX-License-Identifier: MIT */
#include "hotplug/sysfs/sysfs_watch.h"
#include "hotplug/sysfs/discover.h"

#include "lib/idmap.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

#define DEV_DIR "sys/devices/system/memory"
#define FW_DIR "sys/firmware/memory"
#define UEVENT_RCVBUF (4 << 20) /* a burst of thousands of blocks */
/* An added or removed block is read this long after its uevent (see settle_defer). */
#define ADD_SETTLE_MS 250
#define ADD_PENDING_MAX 4096

/* Parent directories are watched for memoryN entries, block directories for
 * their attributes. */
#define PARENT_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR)
#define BLOCK_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR)

struct wd_entry {
	int wd;
	bool parent;   /* DEV_DIR or FW_DIR itself */
	bool fw;       /* under FW_DIR */
	uint64_t id;   /* block directories */
};

struct sysfs_watch {
	struct hp_path *path;
	bool netlink;
	int fd;           /* inotify; or an epoll set of NLFD and TFD */
	int nlfd, tfd;    /* the uevent socket; the timer of the settling blocks */
	uint64_t *settling; /* blocks added or removed, not yet reported (ADD_SETTLE_MS) */
	size_t n_settling;
	bool settling_overflow;
	struct wd_entry *wds; /* sorted by wd (inotify hands them out increasing) */
	size_t n_wds;
	struct idmap seen;    /* the ids of the read in progress: one look-up per event */
};

int sysfs_watch_fd(const struct sysfs_watch *w)
{
	return w->fd;
}

void sysfs_watch_free(struct sysfs_watch *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (w->nlfd >= 0)
		close(w->nlfd);
	if (w->tfd >= 0)
		close(w->tfd);
	free(w->settling);
	free(w->wds);
	idmap_free(&w->seen);
	free(w);
}

/* ---- uevents ------------------------------------------------------------------ */

int hp_uevent_parse(const char *msg, size_t len, uint64_t *id, bool *settle)
{
	const char *action = NULL, *devpath = NULL, *subsystem = NULL, *end = msg + len, *base;
	const char *const actions[] = { "add", "remove", "online", "offline", "change" };
	bool known = false;

	/* the header "action@devpath", then NUL-separated KEY=VALUE */
	for (const char *p = msg; p < end;) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		size_t n = z ? (size_t)(z - p) : (size_t)(end - p);

		if (!z)
			break; /* an unterminated last field is not trusted */
		if (n > 7 && startswith(p, "ACTION="))
			action = p + 7;
		else if (n > 8 && startswith(p, "DEVPATH="))
			devpath = p + 8;
		else if (n > 10 && startswith(p, "SUBSYSTEM="))
			subsystem = p + 10;
		p += n + 1;
	}
	if (!action || !devpath || !streq(subsystem, "memory"))
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(actions); i++)
		known = known || streq(action, actions[i]);
	base = strrchr(devpath, '/');
	if (!known || !base || hp_parse_block_name(base + 1, id) < 0)
		return 0;
	if (settle)
		*settle = streq(action, "add") || streq(action, "remove");
	return 1;
}

static int netlink_open(struct sysfs_watch *w)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = 1 };
	struct epoll_event ev = { .events = EPOLLIN };
	int sz = UEVENT_RCVBUF;

	w->nlfd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
	if (w->nlfd < 0)
		return -errno;
	/* FORCE needs CAP_NET_ADMIN; unprivileged, the plain size (capped by rmem_max) */
	if (setsockopt(w->nlfd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(w->nlfd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (bind(w->nlfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	w->fd = epoll_create1(EPOLL_CLOEXEC);
	if (w->tfd < 0 || w->fd < 0)
		return -errno;
	if (epoll_ctl(w->fd, EPOLL_CTL_ADD, w->nlfd, &ev) < 0 || epoll_ctl(w->fd, EPOLL_CTL_ADD, w->tfd, &ev) < 0)
		return -errno;
	w->settling = calloc(ADD_PENDING_MAX, sizeof(*w->settling));
	return w->settling ? 0 : -ENOMEM;
}

static int add_id(struct sysfs_watch *w, uint64_t *ids, size_t max, size_t *n, uint64_t id, bool *overflow)
{
	if (idmap_get(&w->seen, id, NULL))
		return 0;
	if (*n == max) {
		*overflow = true;
		return 0;
	}
	if (idmap_put(&w->seen, id, 0) < 0) {
		*overflow = true; /* no memory to tell duplicates apart: re-scan */
		return 0;
	}
	ids[(*n)++] = id;
	return 0;
}

/*
 * A block is not read at its "add" or "remove" uevent but ADD_SETTLE_MS
 * later: the kernel announces the block's device before it links the block
 * to its node, and some kernels (6.1 on x86) dereference the unset node when
 * valid_zones is read in between; on s390 both events come from inside the
 * write to sys/firmware/memory/memoryN/config, before `config` changes (the
 * storage is assigned before the add and released after the remove), so a
 * read at the event finds the old `config`, and no later event corrects it.
 * Nothing is lost by waiting: an added block is offline (or, with
 * auto_online_blocks, announced again by its "online" event), a removed
 * one is gone.
 */
static void settle_defer(struct sysfs_watch *w, uint64_t id)
{
	struct itimerspec its = { .it_value = { .tv_sec = ADD_SETTLE_MS / 1000,
						.tv_nsec = (ADD_SETTLE_MS % 1000) * 1000000L } };

	for (size_t i = 0; i < w->n_settling; i++)
		if (w->settling[i] == id)
			return;
	if (w->n_settling == ADD_PENDING_MAX)
		w->settling_overflow = true; /* re-scanned then, all together */
	else
		w->settling[w->n_settling++] = id;
	/* re-armed at every add: a burst is read once, after its last add */
	(void)timerfd_settime(w->tfd, 0, &its, NULL);
}

static int netlink_read(struct sysfs_watch *w, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	char buf[8192];
	uint64_t expirations;

	if (read(w->tfd, &expirations, sizeof(expirations)) == (ssize_t)sizeof(expirations)) {
		for (size_t i = 0; i < w->n_settling; i++)
			add_id(w, ids, max, n, w->settling[i], overflow);
		*overflow = *overflow || w->settling_overflow;
		w->n_settling = 0;
		w->settling_overflow = false;
	}
	for (;;) {
		struct sockaddr_nl sa;
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = { .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t len = recvmsg(w->nlfd, &mh, 0);
		uint64_t id;
		bool settle = false;

		if (len < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) { /* the kernel dropped some: re-scan */
				*overflow = true;
				continue;
			}
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		if (sa.nl_pid != 0 || (mh.msg_flags & MSG_TRUNC))
			continue; /* not from the kernel, or not whole */
		if (hp_uevent_parse(buf, (size_t)len, &id, &settle) != 1)
			continue;
		if (settle)
			settle_defer(w, id);
		else
			add_id(w, ids, max, n, id, overflow);
	}
}

/* ---- inotify on a tree ------------------------------------------------------------ */

static int wd_add(struct sysfs_watch *w, const char *rel, const struct wd_entry *e)
{
	_cleanup_free_ char *abs = NULL;
	const char *root = hp_path_root(w->path);
	struct wd_entry *nw;
	size_t i;
	int wd;

	if (asprintf(&abs, "%s/%s", streq(root, "/") ? "" : root, rel) < 0)
		return -ENOMEM;
	wd = inotify_add_watch(w->fd, abs, e->parent ? PARENT_MASK : BLOCK_MASK);
	if (wd < 0)
		return errno == ENOENT ? 0 : -errno; /* gone already: its parent said so */
	for (i = w->n_wds; i > 0 && w->wds[i - 1].wd >= wd; i--)
		if (w->wds[i - 1].wd == wd) {
			w->wds[i - 1] = *e; /* the same directory again */
			w->wds[i - 1].wd = wd;
			return wd;
		}
	nw = realloc(w->wds, (w->n_wds + 1) * sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	w->wds = nw;
	memmove(&w->wds[i + 1], &w->wds[i], (w->n_wds - i) * sizeof(*nw));
	w->wds[i] = *e;
	w->wds[i].wd = wd;
	w->n_wds++;
	return wd;
}

static struct wd_entry *wd_find(struct sysfs_watch *w, int wd)
{
	size_t lo = 0, hi = w->n_wds;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->wds[mid].wd == wd)
			return &w->wds[mid];
		if (w->wds[mid].wd < wd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Block directories: only the devices side (sys/devices/system/memory/memoryN),
 * one watch per configured block, so that a tree of 262,144 standby blocks
 * needs a handful of watches and one of any size fits
 * fs.inotify.max_user_watches as long as its configured blocks do.  That is
 * what the kernel's uevents say on the real root too: a block configured or
 * deconfigured shows as its devices directory coming and going (seen on the
 * parent), and a firmware-side change of a deconfigured block
 * (memmap_on_memory) is seen at the next re-scan only (backend.h).
 */
static int watch_block_dir(struct sysfs_watch *w, bool fw, const char *name, uint64_t id)
{
	char rel[320];
	int wd;

	if (fw)
		return 0;
	snprintf(rel, sizeof(rel), "%s/%s", DEV_DIR, name);
	wd = wd_add(w, rel, &(struct wd_entry){ .id = id });
	return wd < 0 ? wd : 0;
}

static int watch_parent(struct sysfs_watch *w, bool fw)
{
	DIR *d = NULL;
	struct dirent *de;
	int r;

	r = wd_add(w, fw ? FW_DIR : DEV_DIR, &(struct wd_entry){ .parent = true, .fw = fw });
	if (r < 0)
		return r;
	r = hp_path_opendir(w->path, fw ? FW_DIR : DEV_DIR, &d);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	while (r == 0 && (de = readdir(d))) {
		uint64_t id;

		if (hp_parse_block_name(de->d_name, &id) == 0)
			r = watch_block_dir(w, fw, de->d_name, id);
	}
	closedir(d);
	return r;
}

static int tree_read(struct sysfs_watch *w, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));

	for (;;) {
		ssize_t len = read(w->fd, buf, sizeof(buf));

		if (len < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			struct wd_entry *e;
			uint64_t id;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				*overflow = true;
				continue;
			}
			e = wd_find(w, ev->wd);
			if (!e)
				continue;
			if (ev->mask & IN_IGNORED) { /* the directory went away */
				size_t i = (size_t)(e - w->wds);

				memmove(e, e + 1, (w->n_wds - i - 1) * sizeof(*e));
				w->n_wds--;
				continue;
			}
			if (!e->parent) {
				add_id(w, ids, max, n, e->id, overflow);
				continue;
			}
			if (!ev->len)
				continue;
			if (hp_parse_block_name(ev->name, &id) < 0) {
				/* auto_online_blocks and the like: the whole table */
				if (!e->fw && !(ev->mask & IN_ISDIR) && !strstr(ev->name, ".new"))
					*overflow = true;
				continue;
			}
			if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR)) {
				bool fw = e->fw; /* wd_add may move the entries */
				int r = watch_block_dir(w, fw, ev->name, id);

				if (r < 0)
					return r;
			}
			add_id(w, ids, max, n, id, overflow);
		}
	}
}

/* ---- the watch -------------------------------------------------------------------- */

int sysfs_watch_open(struct hp_path *p, struct sysfs_watch **out)
{
	struct sysfs_watch *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->fd = w->nlfd = w->tfd = -1;
	w->path = p;
	w->netlink = streq(hp_path_root(p), "/");
	if (w->netlink) {
		r = netlink_open(w);
	} else {
		w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		r = w->fd < 0 ? -errno : watch_parent(w, false);
		if (r == 0 && hp_path_exists(p, FW_DIR) == 0)
			r = watch_parent(w, true);
	}
	if (r < 0) {
		sysfs_watch_free(w);
		return r;
	}
	*out = w;
	return 0;
}

int sysfs_watch_read(struct sysfs_watch *w, uint64_t *ids, size_t max, size_t *n, bool *overflow)
{
	int r;

	*n = 0;
	*overflow = false;
	idmap_clear(&w->seen);
	r = w->netlink ? netlink_read(w, ids, max, n, overflow) : tree_read(w, ids, max, n, overflow);
	if (*overflow)
		*n = 0;
	return r;
}
