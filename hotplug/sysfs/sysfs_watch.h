/* SPDX-License-Identifier: MIT */
/*
 * Change notifications of the sysfs backend (the watch_open/watch_read
 * contract is in backend.h).
 *
 * Root "/": a NETLINK_KOBJECT_UEVENT socket bound to the kernel's multicast
 * group (readable by every user), keeping the uevents of subsystem memory
 * with ACTION add, remove, online, offline or change and a DEVPATH ending
 * in memoryN; only messages sent by the kernel (port id 0) count.  A full
 * receive queue (ENOBUFS) is an overflow.  An added block is reported 250 ms
 * after its "add" (the kernel links it to its node only after announcing it).
 * Any other root (a test tree): inotify on sys/devices/system/memory,
 * sys/firmware/memory and every memoryN directory of the first (one watch
 * per configured block; the firmware side of a block says nothing the
 * uevents would: see sysfs_watch.c), so that writes by any process (echo, the
 * sim, another memgrant) are seen; a change of auto_online_blocks or an
 * inotify queue overflow is an overflow.
 * Needs no privilege in either form.
 */
#pragma once

#include "hotplug/sysfs/path.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sysfs_watch;

int sysfs_watch_open(struct hp_path *p, struct sysfs_watch **out);
int sysfs_watch_fd(const struct sysfs_watch *w);
int sysfs_watch_read(struct sysfs_watch *w, uint64_t *ids, size_t max, size_t *n, bool *overflow);
void sysfs_watch_free(struct sysfs_watch *w);

/* One kernel uevent message (LEN bytes, "action@devpath\0KEY=VALUE\0...").
 * 1 and *ID (and *SETTLE, when not NULL: whether ACTION is add or remove,
 * events the kernel sends before it has finished with the block) for a
 * memory block event that counts, 0 for anything else. */
int hp_uevent_parse(const char *msg, size_t len, uint64_t *id, bool *settle);
