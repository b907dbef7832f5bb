/* SPDX-License-Identifier: MIT */
/*
 * The hotplug backend: the one seam through which memgrant changes memory.
 *
 * Each operation is one sysfs write as kernel.md describes it; a backend
 * returns 0 or the kernel's negative errno unchanged.  Everything above this
 * interface (executor, planner, daemon) is the same for the real kernel
 * (sysfs backend) and the model of it (sim backend).
 *
 * The interface is deliberately narrow and typed so that it could be served
 * by a small privileged process while the rest of the agent runs unprivileged.
 * Privilege per operation:
 *   discover, read_block, read_auto_online, watch_open, watch_read
 *       none: sysfs attributes are world-readable, the kernel's uevent
 *       multicast group is open to every user, inotify needs only read
 *       access; the sim's readers never take its lock.
 *   write_attr (and every block_* / hp_set_auto_online helper)
 *       root on a real guest (the attributes are 0644 root); for the sim,
 *       write access to its state file, state directory and tree.
 * Every change goes through write_attr, so a privileged server need only
 * forward that one call.
 *
 * Attribute writes take the raw string a user would echo into the file, so
 * that the kernel's parsing rules (K1, W1) are exercised exactly; the typed
 * helpers below (block_configure() ...) write the canonical values.
 */
#pragma once

#include "hotplug/block.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum hp_attr {
	HP_ATTR_CONFIG,           /* sys/firmware/memory/memoryN/config */
	HP_ATTR_MEMMAP,           /* sys/firmware/memory/memoryN/memmap_on_memory */
	HP_ATTR_ONLINE,           /* sys/devices/system/memory/memoryN/online */
	HP_ATTR_STATE,            /* sys/devices/system/memory/memoryN/state */
	HP_ATTR_AUTO_ONLINE,      /* sys/devices/system/memory/auto_online_blocks (id ignored) */
};

/*
 * What hp_reread() reads again after a write, and what it keeps.  A row read
 * whole costs a dozen opens (every attribute, the node link, the firmware
 * entry); the write changed one or two of them.
 * - HP_REREAD_MEMMAP, after a memmap_on_memory write: that file of the
 *   firmware entry (the kernel sends no notification of it); -ESTALE
 *   without it.
 * - HP_REREAD_STATE, after a configure: memoryN/state (C7: auto_online_blocks
 *   may online it); -ESTALE without it.
 * - HP_REREAD_DEVICE, after an online or an offline: state and valid_zones
 *   (A7, A9), the nodeX link (one lstat when it is the node KNOWN or node 0
 *   names); removable is the kernel's constant (A5), kept from KNOWN or from
 *   another block; memmap_on_memory and the firmware entry kept (C12: they
 *   only change while deconfigured); -ESTALE without state.
 * - HP_REREAD_DECONFIGURED, after a deconfigure: the firmware config, which
 *   must read 0, and memoryN/ under sys/devices/system/memory, which must be
 *   gone (C11); -ESTALE otherwise.
 */
enum hp_reread {
	HP_REREAD_MEMMAP,
	HP_REREAD_STATE,
	HP_REREAD_DEVICE,
	HP_REREAD_DECONFIGURED,
};

struct hp_backend;

/* One write of a sequence (hp_write_seq()): VALUE to ATTR. */
struct hp_write {
	enum hp_attr attr;
	const char *value;
};

/* The longest sequence hp_write_seq() takes: a block's writes up or down. */
#define HP_WRITE_SEQ_MAX 3

struct hp_backend_ops {
	const char *name; /* "sysfs", "sim" */
	/* Whole-machine view (A1-A9, C1-C3). */
	int (*discover)(struct hp_backend *b, struct mem_table **out);
	/* Optional: discover, but a deconfigured block's memmap_on_memory may
	 * be MEM_MEMMAP_UNREAD, its firmware entry not opened (on a big
	 * machine most blocks are standby, and their files most of the cost);
	 * hp_read_memmap() reads it.  Absent: discover. */
	int (*discover_lazy)(struct hp_backend *b, struct mem_table **out);
	/* One block; -ENOENT when neither directory exists. */
	int (*read_block)(struct hp_backend *b, uint64_t id, struct mem_block *out);
	/* Optional: block KNOWN->id read again after a write that succeeded,
	 * in the files that write changes only, the rest kept from KNOWN (the
	 * block as read before the write; see enum hp_reread).  -ESTALE when
	 * the files show what the write does not leave (someone else changed
	 * the block): the caller reads it whole.  Absent: hp_reread() says
	 * -EOPNOTSUPP and the caller reads the block. */
	int (*reread)(struct hp_backend *b, enum hp_reread what, const struct mem_block *known,
		      struct mem_block *out);
	/* Write VALUE to ATTR of block ID, as echo(1) would (with or without newline). */
	int (*write_attr)(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value);
	/* Optional: write_attr, only if the write is over at once: an offline
	 * that would migrate (W6, for as long as it takes) is not started and
	 * -EWOULDBLOCK is returned, for the caller to write it where it can be
	 * killed (hp_write_with_deadline()).  sim: an offline without latency
	 * is over at once.  Absent: every offline is taken to migrate. */
	int (*write_prompt)(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value);
	/* Optional: hp_write_seq() (below) in one exchange; a backend that
	 * writes in another process sends the writes together.  Absent: each
	 * is written in turn. */
	int (*write_seq)(struct hp_backend *b, uint64_t id, const struct hp_write *w, size_t n, size_t *done);
	/* Reads auto_online_blocks into BUF; -ENOENT when the file is absent. */
	int (*read_auto_online)(struct hp_backend *b, char *buf, size_t len);
	/*
	 * Change notifications, for changes made by anyone (this process,
	 * another one, the FUSE view of a sim, the kernel itself).
	 * watch_open: a file descriptor that polls readable (POLLIN) when
	 * blocks may have changed; owned by the backend (closed by close()),
	 * the same one on every call.  Open it before the first discover so
	 * that no change falls between the two.
	 * watch_read: never blocks; drains what is pending and stores in IDS
	 * (at most MAX, *N of them, each once) the blocks whose struct
	 * mem_block may now differ from what read_block returned before.
	 * *OVERFLOW: events were lost, or more than MAX blocks (or a
	 * table-wide value such as auto_online_blocks) changed: re-read
	 * everything with discover.  0 or -errno.
	 * sysfs backend: uevents (NETLINK_KOBJECT_UEVENT, subsystem memory:
	 * add, remove, online, offline; ENOBUFS is an overflow) when the root
	 * is "/"; inotify on the tree under any other root (test trees).  The
	 * kernel sends no uevent for sys/firmware/memory, so a memmap_on_memory
	 * change of a deconfigured block is seen at the next re-scan only.
	 * sim backend: inotify on its state directory and descriptor.
	 */
	int (*watch_open)(struct hp_backend *b);
	int (*watch_read)(struct hp_backend *b, uint64_t *ids, size_t max, size_t *n, bool *overflow);
	/* Optional: block ID (one the last watch_read stored) as the
	 * notification's own read of it found it, after the change: what
	 * read_block would return, without reading again.  -ENODATA (or no
	 * op): call read_block.  sim backend: the records file the watch
	 * read to find the changed blocks. */
	int (*watch_row)(struct hp_backend *b, uint64_t id, struct mem_block *out);
	/* Optional: an offline written from now on must end by DEADLINE
	 * (CLOCK_MONOTONIC), NULL: no limit; the write then returns -EINTR, as a
	 * killed offline on the kernel does (W6).  A backend that writes in
	 * another process has it (hotplug/privsep/helper_client.c: the request
	 * carries it); for the others hp_set_write_deadline() keeps it in
	 * struct hp_backend and block_offline() writes through
	 * hp_write_with_deadline(). */
	int (*set_write_deadline)(struct hp_backend *b, const struct timespec *deadline);
	/* Optional: a process writing through this backend was killed
	 * mid-write (hp_write_with_deadline()); puts right at once what the
	 * kernel would have on the writer's death.  sim: the going-offline
	 * record of a killed offline back to online (W6), which otherwise
	 * waits for the next write.  The kernel does it itself (sysfs: none). */
	int (*settle)(struct hp_backend *b);
	void (*close)(struct hp_backend *b);
};

/*
 * What write_attr returns when the backend's writer is gone: the privileged
 * helper exited, was killed or broke the protocol (hotplug/privsep/helper_client.h).
 * Not an outcome of the block: whether the last write reached the kernel is
 * unknown and no write after it will, so the caller stops where the kernel
 * is, undoes nothing and records nothing final; the next start reads the
 * kernel.  No kernel write returns it (the forwarding backend maps a kernel
 * ESHUTDOWN to EIO).
 */
#define HP_EWRITER_GONE ESHUTDOWN

struct hp_backend {
	const struct hp_backend_ops *ops;
	/* Directory under which sys/ and proc/ are read ("/" on a real guest;
	 * the sim's tree for the sim).  Owned by the backend. */
	char *root;
	/* hp_set_write_deadline()'s, for a backend without set_write_deadline */
	bool has_write_deadline;
	struct timespec write_deadline;
	/* hp_write_with_deadline()'s writer process, kept from one write to
	 * the next (pid 0: none; its pipes' ends are valid only with a pid) */
	struct hp_offline_writer {
		int pid;
		int req_fd, reply_fd;
	} offline_writer;
};

/* Real sysfs under ROOT ("/" in production).  Never creates files. */
int hp_sysfs_open(const char *root, struct hp_backend **out);

/* Sim: see sim.h for creating the state file. */
int hp_sim_open(const char *state_path, struct hp_backend **out);

void hp_backend_close(struct hp_backend *b);

/* The deadline (CLOCK_MONOTONIC, NULL: none) of B's offline writes from now
 * on: B's set_write_deadline, else kept in B for block_offline().  0, or
 * -EINVAL without a backend. */
int hp_set_write_deadline(struct hp_backend *b, const struct timespec *deadline);

/*
 * Writes VALUE to ATTR of block ID in a child process that is killed
 * (SIGKILL) at DEADLINE: Linux ends an offline's migration only on a fatal
 * signal (docs/kernel-rules.md, "W6 and signals").  Returns the write's
 * result, or -EINTR when the child was killed or DEADLINE had passed: the
 * write was cut short (or never made) and the block is where the kernel
 * left it (read it; it may have gone offline just before).  The child
 * serves one write after another (a revocation's offlines cost no fork
 * each) until hp_offline_writer_end(), a kill at a deadline, or its
 * parent's death (PR_SET_PDEATHSIG).  DEADLINE NULL, or a write the
 * backend's write_prompt makes at once: the write in the caller, no child.
 */
int hp_write_with_deadline(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value,
			   const struct timespec *deadline);

/*
 * Writes W[0..N) (N at most HP_WRITE_SEQ_MAX) to block ID in this order and
 * stops at the first that fails: its error, with *DONE the writes that
 * succeeded before it (N when 0 is returned).  An offline is written under
 * B's write deadline, as block_offline() writes it.  For writes whose order
 * the kernel sets (an offline, then the deconfigure) that the caller would
 * make one after the other anyway: through the privileged helper they cost
 * one round trip, not one each (hotplug/privsep/helper_client.c).
 * -EINVAL for N outside 1..HP_WRITE_SEQ_MAX.
 */
int hp_write_seq(struct hp_backend *b, uint64_t id, const struct hp_write *w, size_t n, size_t *done);

/* Ends B's writer process, if any (it exits at the end of its requests)
 * and reaps it: when the writes under a deadline are over for now. */
void hp_offline_writer_end(struct hp_backend *b);

/* Whether B has a writer process (for a caller that ends it when idle). */
static inline bool hp_offline_writer_running(const struct hp_backend *b)
{
	return b && b->offline_writer.pid > 0;
}
static inline void hp_backend_closep(struct hp_backend **b) { hp_backend_close(*b); }
#define _cleanup_backend_ __attribute__((cleanup(hp_backend_closep)))

static inline int hp_discover(struct hp_backend *b, struct mem_table **out)
{
	return b->ops->discover(b, out);
}
static inline int hp_discover_lazy(struct hp_backend *b, struct mem_table **out)
{
	return b->ops->discover_lazy ? b->ops->discover_lazy(b, out) : b->ops->discover(b, out);
}
/* The memmap_on_memory of each of the N ROWS that is MEM_MEMMAP_UNREAD,
 * read (HP_REREAD_MEMMAP); a row whose entry is gone stays unread (the
 * block's notification or the next re-scan tells).  The number read, or
 * -errno (the rows read before it keep their values). */
int hp_read_memmap(struct hp_backend *b, struct mem_block *rows, size_t n);
static inline int hp_watch_open(struct hp_backend *b)
{
	return b->ops->watch_open ? b->ops->watch_open(b) : -EOPNOTSUPP;
}
static inline int hp_watch_read(struct hp_backend *b, uint64_t *ids, size_t max, size_t *n,
				bool *overflow)
{
	return b->ops->watch_read ? b->ops->watch_read(b, ids, max, n, overflow) : -EOPNOTSUPP;
}
static inline int hp_watch_row(struct hp_backend *b, uint64_t id, struct mem_block *out)
{
	return b->ops->watch_row ? b->ops->watch_row(b, id, out) : -ENODATA;
}
static inline int hp_read_block(struct hp_backend *b, uint64_t id, struct mem_block *out)
{
	return b->ops->read_block(b, id, out);
}

static inline int hp_reread(struct hp_backend *b, enum hp_reread what, const struct mem_block *known,
			    struct mem_block *out)
{
	return b->ops->reread ? b->ops->reread(b, what, known, out) : -EOPNOTSUPP;
}

/* Typed operations: one kernel step each (kernel.md C7, C11, C12, W5, W6). */
int block_set_memmap(struct hp_backend *b, uint64_t id, bool on);
int block_configure(struct hp_backend *b, uint64_t id);
int block_deconfigure(struct hp_backend *b, uint64_t id);
int block_online(struct hp_backend *b, uint64_t id, enum online_type type);
int block_offline(struct hp_backend *b, uint64_t id);
int hp_set_auto_online(struct hp_backend *b, const char *policy);
