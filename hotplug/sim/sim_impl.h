/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the sim's files (not an interface of memgrant):
 *   fs.c         the folders opened once, and every file reached below them
 *                without following a link (no path another user can change)
 *   state.c      the descriptor, the per-block records, the summary, the
 *                writers' lock and its in-flight marker, zone arithmetic
 *   tree.c       the sysfs-shaped tree rendered from the records
 *   sim_watch.c  change notifications (inotify on the state directory)
 *   kernel.c     parsing of written values and the waits of a write
 *   read.c       one block read (read_block), the descriptor cached
 *   sim.c        the kernel's rules and the backend
 *
 * On disk (sim.h describes the promise):
 *   FILE              descriptor: settings and faults (JSON, format 2)
 *   FILE.lock         writers' flock (W4); its content is the marker
 *   FILE.d/s.XXXXXX/  state directory named by the descriptor:
 *       blocks.K      records of blocks K*256 .. K*256+255, one line each
 *       summary       zone spans and meminfo counters derived from them
 *   TREE/             sys/ and proc/ rendered from the records
 * Every file is replaced by rename (readers see whole versions) and never
 * fsynced: the sim outlives processes, not the machine.
 *
 * A write changes one block: the summary, then that block's records file
 * (the commit), then the tree.  The marker says "in flight" from before the
 * first file until after the last, so the next writer (or an open) that
 * finds it set after a kill rebuilds the summary and the tree from the
 * records: the tree never stays apart from the state.
 */
#pragma once

#include "hotplug/backend.h"
#include "hotplug/block.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_FORMAT 2
#define SIM_CHUNK 256 /* blocks per records file */

/* The sim's zones (enum mem_zone, hotplug/block.h), in the summary file's
 * order; an offline block is in MEM_ZONE_NONE. */
#define SIM_NZONES 3
extern const enum mem_zone sim_zones[SIM_NZONES];

/* 4 bytes: the sim's watch keeps one per block of the machine (sim_watch.c) */
struct sim_block {
	bool configured;
	bool memmap;
	uint8_t state; /* enum mem_state: OFFLINE, ONLINE or GOING_OFFLINE */
	uint8_t zone;  /* enum mem_zone, when not offline; MEM_ZONE_NONE when offline */
};

struct id_list {
	uint64_t *ids;
	size_t n;
};

/* The sim's folders, opened once (fs.c): the folder of the descriptor FILE
 * and the tree.  Both belong to this process's user or root and nobody else
 * may write them, except that FILE's folder may be a shared sticky one
 * (/tmp): then each of the sim's own entries in it (FILE, FILE.lock,
 * FILE.d) must belong to this user or root, checked on the open
 * descriptor.  Everything else is reached relative to them. */
struct sim_fs {
	int top;          /* O_PATH: the folder of FILE */
	int tree;         /* O_PATH: the tree; -1 when missing and not created */
	char *top_path;   /* for messages and inotify only */
	char *name;       /* FILE's base name */
	char *tree_path;  /* the tree as named when opened; never re-read */
	bool shared;      /* FILE's folder is sticky and others may write it */
};
#define SIM_MAX_FILE (256u << 20)
/* Opens STATE_PATH's folder and the tree (TREE, or the one the descriptor
 * names: then it must exist), creating the tree when CREATE_TREE.  -EPERM
 * with ERR set for a folder that someone else may change. */
int sim_fs_open(const char *state_path, const char *tree, bool create_tree, struct sim_fs **out, char *err,
		size_t errlen);
void sim_fs_free(struct sim_fs *fs);
static inline void sim_fs_freep(struct sim_fs **fs) { sim_fs_free(*fs); }
/* 0 when FD, an entry of FILE's folder, may be used: always in a private
 * folder; in a shared one when it belongs to this user or root, is no link
 * and (a regular file) has one name.  Else -EPERM. */
int sim_fs_entry_ok(const struct sim_fs *fs, int fd);
/* The descriptor's bytes (NUL-terminated, malloc'd), at most MAX. */
int sim_fs_read_desc(const struct sim_fs *fs, size_t max, char **out, size_t *len);
/* FILE.lock: read-write (created) when CREATE and allowed, else read-only;
 * -EPERM for anything but a regular file with one link. */
int sim_fs_lock_open(const struct sim_fs *fs, bool create);
/* The state directory FILE.d/COMPONENT (NULL: a new one, FILE.d created
 * when CREATE): its O_PATH fd and its path (for messages and inotify). */
int sim_fs_state_dir(const struct sim_fs *fs, const char *component, bool create, char **path_out, int *fd_out);
/* openat() of REL beneath DFD, never through a symbolic link (-ELOOP) nor
 * out of DFD (-EXDEV).  The fd or -errno. */
int sim_openat(int dfd, const char *rel, int flags, mode_t mode);
/* Replaces NAME in DFD by DATA: NAME.new (a stale one unlinked first) made
 * with O_EXCL, then renameat(2); no fsync. */
int sim_put_at(int dfd, const char *name, const char *data, size_t len);
/* The same for DIR/NAME beneath ROOT. */
int sim_put_rel(int root, const char *dir, const char *name, const char *data, size_t len);
/* mkdir -p of REL beneath ROOT, no component followed if it is a link. */
int sim_mkdirs_at(int root, const char *rel, mode_t mode);
/* rm -rf of REL beneath ROOT through descriptors (gone already: 0). */
int sim_rm_rf_rel(int root, const char *rel);

struct sim_settings {
	const struct sim_fs *fs; /* what it was loaded from (borrowed); NULL: parsed only */
	int dirfd;               /* O_PATH: the state directory; -1: dir_err */
	int dir_err;
	uint64_t block_size, n_blocks, boot_blocks, used_bytes;
	bool memmap_supported, has_firmware, refuse_memmap_eopnotsupp;
	char auto_online[24];
	char *tree; /* absolute: the tree fixed when the sim was opened */
	char *dir;  /* state directory, absolute (always FILE.d/s.XXXXXX); NULL in a format 1 file */
	struct id_list configure_eio, offline_ebusy, online_enomem;
	uint64_t latency_ms;
	struct sim_block *v1_blocks; /* format 1 only: the blocks it held */
};

/* [lo, hi) in block ids of the blocks not offline, per zone (A9, W5). */
struct sim_spans {
	uint64_t lo[MEM_ZONE_COUNT], hi[MEM_ZONE_COUNT];
};

struct sim_summary {
	struct sim_spans sp;
	uint64_t online_mm;   /* not offline, memmap in the block */
	uint64_t online_nomm; /* not offline, memmap outside */
	uint64_t conf_nomm;   /* configured, memmap outside (C8) */
};

void sim_settings_free(struct sim_settings *s);
static inline void sim_settings_freep(struct sim_settings **s) { sim_settings_free(*s); }
#define _cleanup_settings_ __attribute__((cleanup(sim_settings_freep)))

bool sim_is_auto_online_word(const char *s);
bool sim_valid_block_size(uint64_t bs);
bool sim_id_in(const struct id_list *l, uint64_t id);
int sim_id_list_copy(struct id_list *l, const uint64_t *ids, size_t n);
char *sim_absolute(const char *path);

/* Loads the descriptor (format 1 or 2) of FS; ERR names it and the problem.
 * Of its "tree" and "state_dir" nothing is used but the state directory's
 * last component, looked up in FILE.d (the layout is fixed).
 * sim_settings_parse() is the bytes alone (PATH only names them in ERR);
 * sim_settings_format() is what _save() writes (malloc'd JSON of format 2,
 * NULL without memory or without a state directory). */
int sim_settings_load(const struct sim_fs *fs, struct sim_settings **out, char *err, size_t errlen);
int sim_settings_parse(const char *text, size_t len, const char *path, struct sim_settings **out,
		       char *err, size_t errlen);
char *sim_settings_format(const struct sim_settings *s);
int sim_settings_save(const struct sim_settings *s);

static inline uint64_t sim_n_chunks(const struct sim_settings *s)
{
	return (s->n_blocks + SIM_CHUNK - 1) / SIM_CHUNK;
}
/* Records of chunk K into OUT (SIM_CHUNK entries; fewer in the last).
 * _parse() takes the records file's bytes (the first SIM_CHUNK_FILE_MAX of
 * it; PATH only names it in ERR) and accepts exactly what _format() writes:
 * the header, then one line of 4 characters per block. */
#define SIM_CHUNK_FILE_MAX (128 + SIM_CHUNK * 5)
/* Block ID's record alone, from its chunk's file (the header and length
 * checked as _parse() does, the one record parsed): a read of one block. */
int sim_block_load(const struct sim_settings *s, uint64_t id, struct sim_block *out, char *err, size_t errlen);
int sim_chunk_load(const struct sim_settings *s, uint64_t k, struct sim_block *out, char *err,
		   size_t errlen);
int sim_chunk_parse(const struct sim_settings *s, uint64_t k, const char *buf, size_t len,
		    const char *path, struct sim_block *out, char *err, size_t errlen);
size_t sim_chunk_format(const struct sim_settings *s, uint64_t k, const struct sim_block *blocks,
			char buf[static SIM_CHUNK_FILE_MAX]);
int sim_chunk_save(const struct sim_settings *s, uint64_t k, const struct sim_block *blocks);
/* All records (the format 1 blocks for a format 1 file), malloc'd. */
int sim_records_load(const struct sim_settings *s, struct sim_block **out, char *err, size_t errlen);
/* The summary file: 11 numbers, then a comment.  _parse() reads the first
 * SIM_SUMMARY_MAX bytes of LEN; -EINVAL unless it is for S's block count. */
#define SIM_SUMMARY_MAX 511
int sim_summary_load(const struct sim_settings *s, struct sim_summary *out);
int sim_summary_parse(const struct sim_settings *s, const char *text, size_t len, struct sim_summary *out);
size_t sim_summary_format(const struct sim_settings *s, const struct sim_summary *sum,
			  char buf[static SIM_SUMMARY_MAX + 1]);
int sim_summary_save(const struct sim_settings *s, const struct sim_summary *sum);
void sim_summary_compute(const struct sim_block *all, uint64_t n, struct sim_summary *out);
/* Adds (SIGN 1) or removes (-1) block B's share of the meminfo counters. */
void sim_summary_count(struct sim_summary *sum, const struct sim_block *b, int sign);
void sim_spans_empty(struct sim_spans *sp);
/* Merged id ranges [r[i][0], r[i][1]) where A and B place blocks differently;
 * returns how many (at most 2 per zone). */
size_t sim_spans_diff(const struct sim_spans *a, const struct sim_spans *b, uint64_t r[][2]);

enum mem_zone sim_kernel_zone(const struct sim_settings *s, uint64_t id);
enum mem_zone sim_zone_for(const struct sim_settings *s, const struct sim_spans *sp, uint64_t id,
		       enum online_type t);
/* valid_zones of a configured block (A9). */
void sim_valid_zones(const struct sim_settings *s, const struct sim_spans *sp, uint64_t id,
		     const struct sim_block *b, char *buf, size_t len);
uint64_t sim_mem_total(const struct sim_settings *s, const struct sim_summary *sum);

/* The writers' lock (W4) and the in-flight marker kept in the lock file. */
struct sim_marker {
	bool dirty;         /* a write is (or was, if its writer died) in flight */
	bool full;          /* the whole tree may be stale (init, migration) */
	bool has_id;
	uint64_t id;        /* the block being changed */
	struct sim_spans sp; /* the spans before the change */
};
int sim_lock_open(const struct sim_fs *fs);       /* fd or -errno */
int sim_lock(int fd);                              /* LOCK_EX, waits */
void sim_unlock(int fd);
#define SIM_MARKER_LEN 256 /* the lock file's content, written whole */
int sim_marker_read(int fd, struct sim_marker *m);
int sim_marker_write(int fd, const struct sim_marker *m);
/* The marker from the lock file's bytes (the first SIM_MARKER_LEN): empty
 * or "clean..." is clean, anything unreadable is dirty and full. */
void sim_marker_parse(const char *text, size_t len, struct sim_marker *m);
void sim_marker_format(const struct sim_marker *m, char buf[static SIM_MARKER_LEN]);
/* true while some process holds the writers' lock. */
bool sim_writer_active(const struct sim_fs *fs);

/* kernel.c */
int sim_parse_kbool(const char *s, bool *out);             /* K1 */
bool sim_sysfs_streq(const char *value, const char *word); /* one trailing newline allowed */
int sim_parse_state_word(const char *v, int *type);        /* W1: -1 for offline */
int sim_sleep(uint64_t ms);                                /* signals restart it */
void sim_block_signals(sigset_t *old);
/* W6: only a fatal signal ends it; -EINTR when WRITER_KILLED (NULL: none) says so */
int sim_sleep_migrating(uint64_t ms, const sigset_t *open_mask, bool (*writer_killed)(void));

/* tree.c */
int sim_tree_render_all(const struct sim_settings *s, const struct sim_block *all,
			const struct sim_summary *sum);
/* Block ID went from OLD (NULL: unknown, rewrite all of it) to NEW. */
int sim_tree_block(const struct sim_settings *s, uint64_t id, const struct sim_block *old,
		   const struct sim_block *nw, const struct sim_spans *sp);
int sim_tree_zones(const struct sim_settings *s, uint64_t id, const struct sim_block *b,
		   const struct sim_spans *sp);
int sim_tree_meminfo(const struct sim_settings *s, const struct sim_summary *sum);
int sim_tree_auto_online(const struct sim_settings *s);

/* sim_watch.c: see hp_backend_ops.watch_open/watch_read. */
struct sim_watch;
int sim_watch_open(const struct sim_fs *fs, const char *state_path, struct sim_watch **out);
int sim_watch_fd(const struct sim_watch *w);
int sim_watch_read(struct sim_watch *w, uint64_t *ids, size_t max, size_t *n, bool *overflow);
/* Block ID as the watch last read it (its records as reported, the spans
 * of all of them); -ENODATA before the first read. */
int sim_watch_row(struct sim_watch *w, uint64_t id, struct mem_block *out);
/* read_block's view of the sim (read.c): the descriptor as last read, with
 * the identity of the file it came from, so that a block read costs a stat
 * of the descriptor and its records file (the summary too for a configured
 * block), not a parse of the descriptor and two opens of the state
 * directory: the descriptor is only ever replaced by rename or rewritten,
 * so a new version is a new inode, size or mtime.  Thread-safe. */
struct sim_reader {
	pthread_mutex_t lock;
	struct sim_settings *s;
	struct stat st;
};
/* The sim's hp_backend (sim.c). */
struct sim_backend {
	struct hp_backend base;
	char *state_path;
	struct sim_fs *fs; /* opened once: nothing is looked up by path again */
	struct sim_watch *watch;
	struct sim_reader rd; /* read_block's cache of the descriptor (read.c) */
	bool (*writer_killed)(void); /* sim_set_kill_check() */
};

void sim_reader_init(struct sim_reader *rd);
void sim_reader_fini(struct sim_reader *rd);
int sim_reader_read(struct sim_reader *rd, const struct sim_fs *fs, uint64_t id, struct mem_block *out);
/* A block's struct mem_block from its record B (going-offline settled when
 * no writer holds the lock) under settings S and spans SP. */
void sim_block_to_mem(const struct sim_fs *fs, const struct sim_settings *s, const struct sim_spans *sp,
		      uint64_t id, struct sim_block *b, struct mem_block *out);
void sim_watch_free(struct sim_watch *w);
