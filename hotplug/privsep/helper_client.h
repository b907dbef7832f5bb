/* SPDX-License-Identifier: MIT */
/*
 * The unprivileged side of the privilege split: a backend that reads through
 * an inner backend in its own process and sends every write to the
 * privileged helper (helper_serve.h) as one typed request.
 *
 * Reads (discover, read_block, read_auto_online) go to the inner backend
 * unchanged, so the unprivileged process parses sysfs (or the sim's files)
 * itself; the helper never sends anything but errnos back.
 *
 * Writes: write_attr takes the canonical values the typed helpers of
 * backend.h write ("1"/"0" for config and memmap_on_memory, an online type
 * word or "offline" for state, one of the four auto_online_blocks words).
 * Anything else is refused here with -EINVAL without asking the helper,
 * which would end the pair for it.  The online attribute is not written by
 * the agent and is refused the same way.  write_seq sends a block's writes
 * in one sendmmsg(), each after the first flagged PH_FLAG_CHAINED, and reads
 * their replies: the helper stops at the first that fails.
 *
 * When the helper is gone (it exited or was killed: EPIPE, ECONNRESET or EOF
 * on the socket; or it broke the protocol), the write in progress and every
 * later one return -HP_EWRITER_GONE (backend.h) without trying again: a
 * distinct condition, never an outcome of the block.  The first such write
 * shuts the socket down both ways, so the owner, which polls it, sees the
 * hang-up also when the helper still runs, and stops.
 *
 * Writes are serialised by a mutex: any thread may write.
 */
#pragma once

#include <time.h>

#include "hotplug/backend.h"

/* Wraps READER (owned from now on, also on error) with the helper at the end
 * of FD (owned too). */
int hp_privsep_open(int fd, struct hp_backend *reader, struct hp_backend **out);

