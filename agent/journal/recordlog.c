/* SPDX-License-Identifier: MIT */
/*
 * The framing of journal.log.  The whole file is read at open (it is kept
 * small by compaction); appends go to the end with pwrite so that a failed
 * write can be cut back with ftruncate to exactly the old end.
 */
#include "agent/journal/recordlog.h"
#include "lib/crc32c.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>

#define REC_MAGIC 0x4352474du /* "MGRC" little-endian */

struct recordlog {
	int dir_fd;  /* not owned */
	int fd;
	int mark_fd; /* NAME.end, -1 when it cannot be opened (then no mark) */
	char *dir;
	char *name;
	uint64_t end;
	bool broken;  /* a failed append could not be cut back */
	struct recordlog_stats stats;
};

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

/* ---- reading ---------------------------------------------------------------------- */

/* Checks the record at POS; 0 and its fields, or a reason (static string).
 * A record whose checksum holds but whose flags this version does not know
 * was written whole, by a newer memgrant: *NEWER is set (never a torn tail). */
static const char *record_at_v(const unsigned char *buf, size_t len, size_t pos, uint16_t *type, uint16_t *flags,
			       size_t *plen, bool *newer)
{
	uint32_t n;

	if (len - pos < RECORDLOG_HEADER_LEN)
		return "short header";
	if (get32(buf + pos) != REC_MAGIC)
		return "bad record magic";
	n = get32(buf + pos + 4);
	if (n > RECORDLOG_RECORD_MAX)
		return "length field above the record limit";
	if (len - pos - RECORDLOG_HEADER_LEN < n)
		return "record runs past the end of the file";
	if (crc32c(crc32c(0, buf + pos, 12), buf + pos + RECORDLOG_HEADER_LEN, n) != get32(buf + pos + 12))
		return "checksum mismatch";
	if (get16(buf + pos + 10) & ~RECORDLOG_MORE) {
		if (newer)
			*newer = true;
		return "unknown flags";
	}
	*type = get16(buf + pos + 8);
	*flags = get16(buf + pos + 10);
	*plen = n;
	return NULL;
}

static const char *record_at(const unsigned char *buf, size_t len, size_t pos, uint16_t *type, uint16_t *flags,
			     size_t *plen)
{
	return record_at_v(buf, len, pos, type, flags, plen, NULL);
}

/* The first offset after POS where a whole valid record starts, or 0. */
static size_t valid_record_after(const unsigned char *buf, size_t len, size_t pos)
{
	for (size_t q = pos + 1; q + RECORDLOG_HEADER_LEN <= len; q++) {
		uint16_t t, f;
		size_t n;

		if (buf[q] != (REC_MAGIC & 0xff) || get32(buf + q) != REC_MAGIC)
			continue;
		if (!record_at(buf, len, q, &t, &f, &n))
			return q;
	}
	return 0;
}

int recordlog_scan(const void *image, size_t len, recordlog_cb cb, void *ctx, struct recordlog_scan *out,
		   char *err, size_t errlen)
{
	const unsigned char *buf = image;
	size_t pos = RECORDLOG_FILE_MAGIC_LEN, batch_start = pos;
	bool in_batch = false;
	int r;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return errbuf_set(err, errlen, -EBADMSG, "empty file (truncated?)");
	/* a newer format is "MGJLOG" and two digits above ours; other bytes
	 * there are no journal at all (and not printable in the line) */
	if (len >= RECORDLOG_FILE_MAGIC_LEN && memcmp(buf, RECORDLOG_FILE_MAGIC, 6) == 0 &&
	    buf[6] >= '0' && buf[6] <= '9' && buf[7] >= '0' && buf[7] <= '9' &&
	    memcmp(buf, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN) > 0)
		return errbuf_set(err, errlen, -EBADMSG,
				  "journal format \"%.8s\" is newer than this memgrant's \"%s\": "
				  "upgrade memgrant (this version will not cut or rewrite it)",
				  (const char *)buf, RECORDLOG_FILE_MAGIC);
	if (len < RECORDLOG_FILE_MAGIC_LEN || memcmp(buf, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN) != 0)
		return errbuf_set(err, errlen, -EBADMSG, "not a memgrant journal log (no \"%s\" magic at offset 0)",
				  RECORDLOG_FILE_MAGIC);

	/* first pass: find where the complete batches end */
	while (pos < len) {
		uint16_t type, flags;
		size_t n, later;
		bool newer = false;
		const char *why = record_at_v(buf, len, pos, &type, &flags, &n, &newer);

		if (newer)
			return errbuf_set(err, errlen, -EBADMSG,
					  "record at byte offset %zu is whole (its checksum holds) but has flags 0x%x "
					  "this memgrant does not know: a newer memgrant wrote it; upgrade memgrant "
					  "(refusing rather than cutting it as a torn tail)",
					  pos, (unsigned)get16(buf + pos + 10));
		if (why) {
			later = valid_record_after(buf, len, pos);
			if (later)
				return errbuf_set(err, errlen, -EBADMSG,
						  "corrupt record at byte offset %zu (%s); a valid record follows at "
						  "offset %zu, so this is not a torn tail: refusing to guess",
						  pos, why, later);
			out->torn = true;
			snprintf(out->torn_why, sizeof(out->torn_why), "%s at byte offset %zu", why, pos);
			break;
		}
		if (!in_batch)
			batch_start = pos;
		in_batch = flags & RECORDLOG_MORE;
		pos += RECORDLOG_HEADER_LEN + n;
	}
	if (in_batch && !out->torn) {
		out->torn = true;
		snprintf(out->torn_why, sizeof(out->torn_why), "batch starting at byte offset %zu never ends",
			 batch_start);
	}
	out->valid_end = in_batch ? batch_start : pos;

	/* second pass: hand out the records that are kept */
	for (pos = RECORDLOG_FILE_MAGIC_LEN; pos < out->valid_end;) {
		uint16_t type, flags;
		size_t n;

		(void)record_at(buf, len, pos, &type, &flags, &n);
		if (cb) {
			r = cb(ctx, pos, type, buf + pos + RECORDLOG_HEADER_LEN, n);
			if (r < 0)
				return r;
		}
		out->records++;
		pos += RECORDLOG_HEADER_LEN + n;
	}
	return 0;
}

/* ---- writing ----------------------------------------------------------------------- */

int recordlog_encode(const struct recordlog_rec *recs, size_t n, void **out, size_t *len)
{
	size_t total = 0, pos = 0;
	unsigned char *buf;

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (recs[i].len > RECORDLOG_RECORD_MAX || (recs[i].len && !recs[i].data))
			return -EINVAL;
		total += RECORDLOG_HEADER_LEN + recs[i].len;
	}
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		unsigned char *h = buf + pos;
		uint16_t flags = i + 1 < n ? RECORDLOG_MORE : 0;

		put32(h, REC_MAGIC);
		put32(h + 4, (uint32_t)recs[i].len);
		h[8] = (unsigned char)recs[i].type;
		h[9] = (unsigned char)(recs[i].type >> 8);
		h[10] = (unsigned char)flags;
		h[11] = (unsigned char)(flags >> 8);
		if (recs[i].len)
			memcpy(h + RECORDLOG_HEADER_LEN, recs[i].data, recs[i].len);
		put32(h + 12, crc32c(crc32c(0, h, 12), h + RECORDLOG_HEADER_LEN, recs[i].len));
		pos += RECORDLOG_HEADER_LEN + recs[i].len;
	}
	*out = buf;
	*len = total;
	return 0;
}

static int pwrite_full(int fd, const void *data, size_t len, off_t off)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* ---- the end mark ---------------------------------------------------------------------
 * NAME.end holds where the log ended after its last append ("%020llu\n"),
 * written after the append's fdatasync and never synced itself: it may lag
 * behind the log (a crash before it), never run ahead of what was synced.
 * A log found shorter than its mark lost records that were acknowledged
 * (cut, or an older copy put back); a mark of 0 means "unknown" (set while
 * the file is replaced). */
#define MARK_LEN 21

static void mark_set(struct recordlog *rl, uint64_t end)
{
	char buf[MARK_LEN + 1];

	if (rl->mark_fd < 0)
		return;
	snprintf(buf, sizeof(buf), "%020" PRIu64 "\n", end);
	if (pwrite_full(rl->mark_fd, buf, MARK_LEN, 0) < 0) {
		/* a hint only: a stale mark is repaired by the next append */
	}
}

static void mark_open(struct recordlog *rl, uint64_t *marked)
{
	char buf[MARK_LEN + 1] = "", name[NAME_MAX + 1];
	ssize_t n;

	*marked = 0;
	if (snprintf(name, sizeof(name), "%s.end", rl->name) >= (int)sizeof(name))
		return;
	rl->mark_fd = openat(rl->dir_fd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (rl->mark_fd < 0)
		return;
	n = pread(rl->mark_fd, buf, MARK_LEN, 0);
	if (n == MARK_LEN && buf[MARK_LEN - 1] == '\n') {
		char *end;
		unsigned long long v = strtoull(buf, &end, 10);
		if (end == buf + MARK_LEN - 1)
			*marked = v;
	}
}

int recordlog_append(struct recordlog *rl, const struct recordlog_rec *recs, size_t n)
{
	_cleanup_free_ void *buf = NULL;
	size_t len;
	int r;

	if (rl->broken)
		return -EIO;
	r = recordlog_encode(recs, n, &buf, &len);
	if (r < 0)
		return r;
	r = pwrite_full(rl->fd, buf, len, (off_t)rl->end);
	if (r == 0) {
		rl->stats.syncs++;
		if (fdatasync(rl->fd) < 0)
			r = -errno;
	}
	if (r < 0) {
		rl->stats.failed_bytes = len;
		/* the caller keeps the old state in memory: so must the file */
		if (ftruncate(rl->fd, (off_t)rl->end) < 0 || fdatasync(rl->fd) < 0)
			rl->broken = true;
		return r;
	}
	rl->end += len;
	rl->stats.bytes_written += len;
	rl->stats.size = rl->end;
	mark_set(rl, rl->end);
	return 0;
}

/* Writes DIR/NAME.tmp.PID with the magic and RECS, fsyncs it and renames it
 * over NAME, then fsyncs the directory.  *FD_OUT is the new file, open, and
 * *SIZE_OUT its size (on failure: the bytes it needed).  A failed fsync of
 * the directory after the rename still returns the new file in *FD_OUT: NAME
 * is that file now, whether or not the rename is durable. */
static int write_new_file(int dir_fd, const char *name, const struct recordlog_rec *recs, size_t n, int *fd_out,
			  uint64_t *size_out)
{
	_cleanup_free_ void *buf = NULL;
	_cleanup_close_ int fd = -1;
	char tmp[NAME_MAX + 1];
	size_t len = 0;
	int r;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", name, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if (n > 0) {
		r = recordlog_encode(recs, n, &buf, &len);
		if (r < 0)
			return r;
	}
	*size_out = RECORDLOG_FILE_MAGIC_LEN + len;
	fd = openat(dir_fd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	r = pwrite_full(fd, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN, 0);
	if (r == 0 && len)
		r = pwrite_full(fd, buf, len, RECORDLOG_FILE_MAGIC_LEN);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dir_fd, tmp, 0);
		return r;
	}
	r = fsync(dir_fd) < 0 ? -errno : 0;
	*fd_out = TAKE_FD(fd);
	return r;
}

static struct recordlog *recordlog_alloc(int dir_fd, const char *dir, const char *name)
{
	struct recordlog *rl = calloc(1, sizeof(*rl));

	if (!rl)
		return NULL;
	rl->fd = -1;
	rl->mark_fd = -1;
	rl->dir_fd = dir_fd;
	rl->dir = strdup(dir);
	rl->name = strdup(name);
	if (!rl->dir || !rl->name) {
		recordlog_close(rl);
		return NULL;
	}
	return rl;
}

int recordlog_create(int dir_fd, const char *dir, const char *name, const struct recordlog_rec *recs, size_t n,
		     struct recordlog **out)
{
	struct recordlog *rl = recordlog_alloc(dir_fd, dir, name);
	uint64_t marked;
	int r;

	if (!rl)
		return -ENOMEM;
	mark_open(rl, &marked);
	mark_set(rl, 0); /* unknown until the new file is in place */
	r = write_new_file(dir_fd, name, recs, n, &rl->fd, &rl->end);
	if (r < 0) {
		recordlog_close(rl);
		return r;
	}
	mark_set(rl, rl->end);
	rl->stats.syncs = 2;
	rl->stats.bytes_written = rl->stats.size = rl->end;
	*out = rl;
	return 0;
}

int recordlog_rewrite(struct recordlog *rl, const struct recordlog_rec *recs, size_t n)
{
	uint64_t size = 0;
	int fd = -1, r;

	if (rl->broken)
		return -EIO;
	mark_set(rl, 0); /* a crash before the rename leaves no mark, not a wrong one */
	r = write_new_file(rl->dir_fd, rl->name, recs, n, &fd, &size);
	if (r < 0 && fd < 0) {
		rl->stats.failed_bytes = size;
		mark_set(rl, rl->end);
		return r;
	}
	if (r < 0) {
		/* renamed, but the directory's fsync failed: the name may still
		 * point at the old file after a crash, so no more appends go to
		 * either; the next start reads whichever it finds (the same state) */
		rl->broken = true;
	}
	close(rl->fd);
	rl->fd = fd;
	rl->end = size;
	mark_set(rl, size);
	rl->stats.syncs += 2;
	rl->stats.bytes_written += size;
	rl->stats.size = size;
	rl->stats.rewrites++;
	return r;
}

int recordlog_open(int dir_fd, const char *dir, const char *name, recordlog_cb cb, void *ctx,
		   struct recordlog_scan *scan, struct recordlog **out, char *err, size_t errlen)
{
	struct recordlog *rl;
	_cleanup_free_ unsigned char *buf = NULL;
	char why[256] = "";
	struct stat st;
	size_t len = 0;
	int r;

	rl = recordlog_alloc(dir_fd, dir, name);
	if (!rl)
		return -ENOMEM;
	rl->fd = openat(dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (rl->fd < 0) {
		r = -errno;
		recordlog_close(rl);
		return errbuf_set(err, errlen, r, "%s/%s: cannot open: %s", dir, name, strerror(-r));
	}
	if (fstat(rl->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		recordlog_close(rl);
		return errbuf_set(err, errlen, -EBADMSG, "%s/%s: not a regular file", dir, name);
	}
	if ((uint64_t)st.st_size > RECORDLOG_FILE_MAX) {
		recordlog_close(rl);
		return errbuf_set(err, errlen, -EFBIG, "%s/%s: larger than %u bytes", dir, name, RECORDLOG_FILE_MAX);
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		recordlog_close(rl);
		return -ENOMEM;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = pread(rl->fd, buf + len, (size_t)st.st_size - len, (off_t)len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			recordlog_close(rl);
			return errbuf_set(err, errlen, r, "%s/%s: cannot read: %s", dir, name, strerror(-r));
		}
		len += (size_t)n;
	}
	r = recordlog_scan(buf, len, cb, ctx, scan, why, sizeof(why));
	if (r < 0) {
		recordlog_close(rl);
		return errbuf_set(err, errlen, r, "%s/%s: %s", dir, name, why[0] ? why : strerror(-r));
	}
	if (scan->torn) {
		/* an append that never returned: it was not acknowledged, so it goes */
		if (ftruncate(rl->fd, (off_t)scan->valid_end) < 0 || fsync(rl->fd) < 0) {
			r = -errno;
			recordlog_close(rl);
			return errbuf_set(err, errlen, r, "%s/%s: cannot cut the torn tail at offset %" PRIu64 ": %s", dir,
					  name, scan->valid_end, strerror(-r));
		}
		rl->stats.syncs++;
	}
	rl->end = scan->valid_end;
	rl->stats.size = rl->end;
	mark_open(rl, &scan->marked_end);
	scan->short_of_mark = scan->marked_end > scan->valid_end;
	mark_set(rl, rl->end);
	*out = rl;
	return 0;
}

void recordlog_close(struct recordlog *rl)
{
	if (!rl)
		return;
	if (rl->fd >= 0)
		close(rl->fd);
	if (rl->mark_fd >= 0)
		close(rl->mark_fd);
	free(rl->dir);
	free(rl->name);
	free(rl);
}

void recordlog_stats(const struct recordlog *rl, struct recordlog_stats *out)
{
	*out = rl->stats;
	out->broken = rl->broken;
}
