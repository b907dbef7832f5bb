/* SPDX-License-Identifier: MIT */
/*
 * systemd's service notification protocol (sd_notify(3), sd_watchdog_enabled(3))
 * without libsystemd, whose dependencies (libgcrypt, liblz4, libzstd, liblzma,
 * libcap) would be mapped by every agent for a datagram.
 * - sdn_notify(): sends STATE ("READY=1", "STATUS=...") to $NOTIFY_SOCKET (a
 *   path, or @name for the abstract namespace); 0 when it is not set, 1 when
 *   sent, -errno when it could not be.
 * - sdn_watchdog_usec(): $WATCHDOG_USEC when it is meant for this process
 *   ($WATCHDOG_PID unset or ours): 1 with *USEC, 0 when off, -EINVAL when
 *   malformed.
 */
#ifndef MEMGRANT_LIB_SDNOTIFY_H
#define MEMGRANT_LIB_SDNOTIFY_H

#include <stdint.h>

int sdn_notify(const char *state);
int sdn_watchdog_usec(uint64_t *usec);

#endif
