/* SPDX-License-Identifier: MIT */
/*
 * sysfs access: the one module through which memgrant reads and writes
 * sysfs-shaped trees (the real /sys, a captured or generated tree in a test,
 * the sim's tree, a FUSE mount of the sim).
 *
 * A struct hp_path holds a root prefix ("/" on a real guest) and an
 * O_PATH|O_DIRECTORY fd of it; every access is an openat() relative to that
 * fd with O_CLOEXEC, so a test root and the real root behave alike.
 * Relative names are given without the root ("sys/devices/system/memory");
 * a leading '/' is ignored.
 *
 * Contract:
 * - Every function returns 0 (or a length) or a negative errno; nothing
 *   prints, nothing exits.
 * - Reads strip trailing newlines and NUL-terminate.  A value that does not
 *   fit the buffer is -EOVERFLOW (sysfs values are short; a long one means a
 *   wrong file).  Reads are retried on EINTR: they change nothing.
 * - Writes open without O_CREAT (a missing attribute is -ENOENT, never a new
 *   file) and with O_TRUNC (the shell's `echo v > f`; sysfs ignores it and a
 *   plain file in a test tree gets exactly the value), then write the whole
 *   value in one write(2).  A short write is -EIO.
 * - Writes are NOT retried on EINTR and errno is passed through unchanged:
 *   the kernel itself restarts a write that waits for the hotplug lock (W4),
 *   so EINTR only reaches us when a signal stopped the operation (offlining,
 *   W6), which is a result the caller must see, not a hiccup to retry.
 */
#pragma once

#include <dirent.h>
#include <stddef.h>
#include <sys/types.h>

struct hp_path;

/* Opens ROOT (NULL means "/").  -ENOENT/-ENOTDIR/... from open(2). */
int hp_path_open(const char *root, struct hp_path **out);
void hp_path_free(struct hp_path *p);
static inline void hp_path_freep(struct hp_path **p) { hp_path_free(*p); }
#define _cleanup_hp_path_ __attribute__((cleanup(hp_path_freep)))

/* The root as given to hp_path_open ("/" for NULL). */
const char *hp_path_root(const struct hp_path *p);

/* Reads REL into BUF (LEN bytes incl. NUL).  Returns the length (>= 0). */
int hp_path_read(struct hp_path *p, const char *rel, char *buf, size_t len);
/* Writes VALUE to REL as described above.  0 or -errno. */
int hp_path_write(struct hp_path *p, const char *rel, const char *value);
/* 0 when REL exists (lstat), else -errno. */
int hp_path_exists(struct hp_path *p, const char *rel);
/* Opens directory REL for reading (readdir).  Caller closedir()s. */
int hp_path_opendir(struct hp_path *p, const char *rel, DIR **out);
/* Opens directory REL as an fd usable with the *_at helpers (O_RDONLY, so it
 * also works with fdopendir).  Returns the fd or -errno. */
int hp_path_open_dir(struct hp_path *p, const char *rel);

/* The same primitives relative to any directory fd, for loops over
 * thousands of blocks that open each block directory once. */
int hp_read_at(int dirfd, const char *rel, char *buf, size_t len);
int hp_write_at(int dirfd, const char *rel, const char *value);
int hp_open_dir_at(int dirfd, const char *rel);
