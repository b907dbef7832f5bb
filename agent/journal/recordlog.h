/* SPDX-License-Identifier: MIT */
/*
 * An append-only file of checksummed records (docs/journal.md, "journal.log").
 *
 * File: the 8-byte magic "MGJLOG01", then records.  Record: a 16-byte
 * little-endian header {u32 magic "MGRC", u32 length, u16 type, u16 flags,
 * u32 CRC-32C of the first 12 header bytes and the payload}, then LENGTH
 * payload bytes.  Flag RECORDLOG_MORE marks a record whose batch continues:
 * a batch (records up to and including one without MORE) counts as a whole.
 *
 * Contract:
 * - recordlog_scan() reads a file image without touching any file: it finds
 *   the complete batches and where the valid part ends.  A bad record (short,
 *   bad magic, length above RECORDLOG_RECORD_MAX, bad CRC, unknown flags)
 *   followed by nothing valid is a torn tail: the valid part ends before it
 *   (before its batch when a batch was open).  A bad record followed by a valid
 *   one is corruption: -EBADMSG naming the byte offset.
 * - recordlog_open() scans the file and, for a torn tail, cuts it
 *   (ftruncate + fsync) and says so in *CUT; records are handed to the caller
 *   through the callback, in order, whole batches only.
 * - recordlog_append() writes a batch with one write and one fdatasync: it is
 *   on disk when 0 is returned.  On failure the file is cut back to where it
 *   was; when even that fails the log refuses further appends (-EIO) so memory
 *   and disk cannot drift apart silently.
 * - NAME.end, the end mark: after each append, create and rewrite, where the
 *   log now ends (not synced: it may lag, never lead).  recordlog_open()
 *   reports a log that ends before its mark (scan->short_of_mark): records
 *   were lost that a torn tail cannot explain.
 * - recordlog_rewrite() replaces the whole file with new records (temporary
 *   file, fsync, rename, fsync of the directory): after a crash the file is
 *   either the old one or the new one.  Used for compaction.
 * - Not thread-safe; returns 0 or a negative errno; never prints.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RECORDLOG_FILE_MAGIC "MGJLOG01"
#define RECORDLOG_FILE_MAGIC_LEN 8
#define RECORDLOG_HEADER_LEN 16
#define RECORDLOG_RECORD_MAX (16u << 20)  /* larger length fields are corruption */
#define RECORDLOG_FILE_MAX (1024u << 20)  /* larger files are refused on open */
#define RECORDLOG_MORE 0x0001             /* flag: the batch continues with the next record */

struct recordlog;

struct recordlog_rec {
	uint16_t type;
	const void *data;
	size_t len;
};

/* Called once per record of a complete batch; OFFSET is where its header starts.
 * A negative return stops the scan and is returned by it. */
typedef int (*recordlog_cb)(void *ctx, uint64_t offset, uint16_t type, const void *data, size_t len);

struct recordlog_scan {
	uint64_t valid_end;    /* bytes that are kept: magic and complete batches */
	uint64_t records;      /* records handed to the callback */
	bool torn;             /* a torn tail follows valid_end */
	char torn_why[96];     /* what was wrong with the first bad record, when torn */
	/* recordlog_open() only: where NAME.end (the end mark, written after
	 * every append) said the log ended, 0 unknown; SHORT_OF_MARK: the log
	 * ends before it, so records acknowledged once are gone (a cut at a
	 * record boundary, or an older copy put back) */
	uint64_t marked_end;
	bool short_of_mark;
};

/* Scans a whole file image BUF of LEN bytes.  CB (may be NULL) gets every
 * record of every complete batch.  -EBADMSG: not a journal, or corruption in
 * the middle (ERR says the offset and why). */
int recordlog_scan(const void *buf, size_t len, recordlog_cb cb, void *ctx, struct recordlog_scan *out,
		   char *err, size_t errlen);

/* Opens PATH (DIR_FD is its directory, for the fsyncs), which must exist;
 * scans it with CB, cuts a torn tail.  -EBADMSG corrupt, -EFBIG too large. */
int recordlog_open(int dir_fd, const char *dir, const char *name, recordlog_cb cb, void *ctx,
		   struct recordlog_scan *scan, struct recordlog **out, char *err, size_t errlen);
/* Creates (or replaces) NAME in DIR_FD with the magic and RECS, durably
 * (temporary file, fsync, rename, fsync dir), and opens it for appending. */
int recordlog_create(int dir_fd, const char *dir, const char *name, const struct recordlog_rec *recs, size_t n,
		     struct recordlog **out);
void recordlog_close(struct recordlog *rl);

/* One batch: one write, one fdatasync. -EINVAL empty batch or a record too large. */
int recordlog_append(struct recordlog *rl, const struct recordlog_rec *recs, size_t n);
/* Replaces the whole file with RECS (one batch), durably; the log stays open on the new file. */
int recordlog_rewrite(struct recordlog *rl, const struct recordlog_rec *recs, size_t n);

struct recordlog_stats {
	uint64_t size;          /* bytes in the file now */
	uint64_t bytes_written; /* since open, appends and rewrites */
	uint64_t syncs;         /* fsync/fdatasync calls since open */
	uint64_t rewrites;
	uint64_t failed_bytes;  /* what the last failed append or rewrite needed */
	bool broken;            /* a failed write could not be undone: no more writes */
};
void recordlog_stats(const struct recordlog *rl, struct recordlog_stats *out);

/* Encodes one batch (headers, MORE flags, CRCs) into a malloc'd buffer; for
 * tests and tools that build log images. -EINVAL empty or a record too large. */
int recordlog_encode(const struct recordlog_rec *recs, size_t n, void **out, size_t *len);
