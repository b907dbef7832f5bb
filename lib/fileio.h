/* SPDX-License-Identifier: MIT */
/*
 * Durable file helpers.
 *
 * file_write_atomic(): writes DATA to PATH so that a crash leaves either the
 * old or the new content: write a temporary file in the same directory,
 * fsync it, rename it over PATH, fsync the directory.  Returns 0 or -errno.
 * file_write_view(): the same without the fsyncs, for a file that only shows
 * state kept elsewhere: a reader sees the old or the new content whole; a
 * crash may leave either (or an empty file, which the next write replaces).
 *
 * file_read_all(): reads a whole file (up to MAX bytes) into a NUL-terminated
 * malloc'd buffer.  -EFBIG when it is larger than MAX.  fd_read_all(): the
 * same from an open descriptor (read to its end; the caller closes it).
 */
#pragma once

#include <stddef.h>

int file_write_atomic(const char *path, const void *data, size_t len, int mode);
int file_write_view(const char *path, const void *data, size_t len, int mode);
int file_read_all(const char *path, size_t max, char **out, size_t *out_len);
int fd_read_all(int fd, size_t max, char **out, size_t *out_len);
int mkdir_p(const char *path, int mode);
int rm_rf(const char *path);
/* NAME in the folder DFD and what it holds, through descriptors only: no
 * symbolic link on the way is followed (a link is removed, not its target). */
int rm_rf_at(int dfd, const char *name);
