/* SPDX-License-Identifier: MIT */
/*
 * The intent log's API (agent/journal/intentlog.h): open and close, the durable
 * calls (each one record through ilog_apply() on a copy of the tree, then
 * appended), batches and compaction; the readers are in readers.c.
 */
#include "agent/journal/intentlog_impl.h"
#include "lib/wire/report_json.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

/* ---- open / close ---------------------------------------------------------------------------- */

static int remove_stale_temporaries(struct intentlog *il)
{
	_cleanup_close_ int fd = openat(il->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -1;
	while ((de = readdir(d))) {
		if (!startswith(de->d_name, LOG_FILE ".tmp."))
			continue;
		if (unlinkat(il->dir_fd, de->d_name, 0) < 0 && errno != ENOENT) {
			r = -errno;
			break;
		}
	}
	closedir(d);
	return r;
}

static bool exists_at(int dir_fd, const char *name)
{
	struct stat st;

	return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}


/* The state as a snapshot holds it: the tree with the history in place. */
static char *state_text(struct intentlog *il)
{
	return ilog_history_state_text(il->root, &il->history);
}

static int write_snapshot(struct intentlog *il, bool create)
{
	_cleanup_free_ char *data = state_text(il);
	struct recordlog_rec rec;
	int r;

	if (!data)
		return -ENOMEM;
	rec = (struct recordlog_rec){ .type = ILOG_REC_SNAPSHOT, .data = data, .len = strlen(data) };
	r = create ? recordlog_create(il->dir_fd, il->dir, LOG_FILE, &rec, 1, &il->log) : recordlog_rewrite(il->log, &rec, 1);
	if (r == 0)
		il->snapshot_size = rec.len;
	return r;
}

void intentlog_close(struct intentlog *il)
{
	if (!il)
		return;
	for (size_t i = 0; i < il->n_batch; i++)
		free(il->batch[i].data);
	free(il->batch);
	json_decref(il->batch_saved);
	json_decref(il->root);
	ilog_history_free(&il->history);
	idmap_free(&il->owners);
	recordlog_close(il->log);
	if (il->dir_fd >= 0)
		close(il->dir_fd);
	if (il->lock_fd >= 0)
		close(il->lock_fd);
	free(il->dir);
	free(il);
}

/* Every refusal of a damaged journal says what to do (docs/journal.md,
 * "When the journal is refused"); one written by a newer memgrant says so
 * itself ("upgrade memgrant").  Returns R. */
static int advise(char *err, size_t errlen, int r)
{
	size_t n = err ? strnlen(err, errlen) : 0;

	if (r != -EBADMSG || !err || !errlen || strstr(err, "upgrade memgrant") || strstr(err, "move journal.log aside"))
		return r;
	snprintf(err + n, errlen - n, "; to start: restore journal.log from a backup, or move it aside (memgrantd "
		 "then starts with a fresh journal and names the standby blocks it finds online: `memgrantctl adopt` "
		 "them into a grant)");
	return r;
}

/* The current tree's finished operations to the history (history.c). */
static void settle(struct intentlog *il)
{
	bool moved = false;

	ilog_history_settle(&il->history, il->root, il->history_max, il->revived, &moved);
	il->revived = false;
	if (moved)
		il->owners_valid = false;
}

int intentlog_open(const char *state_dir, const struct intentlog_options *opts, struct intentlog **out,
		   struct intentlog_opened *opened, char *err, size_t errlen)
{
	_cleanup_(intentlog_closep) struct intentlog *il = calloc(1, sizeof(*il));
	struct intentlog_opened info = { 0 };
	int r;

	*out = NULL;
	if (!il)
		return -ENOMEM;
	il->dir_fd = il->lock_fd = -1;
	il->history_max = opts && opts->history_max ? opts->history_max : INTENTLOG_HISTORY_DEFAULT;
	il->outbox_max = opts && opts->outbox_max ? opts->outbox_max : INTENTLOG_OUTBOX_DEFAULT;
	il->compact_min = opts && opts->compact_min ? opts->compact_min : INTENTLOG_COMPACT_MIN_DEFAULT;
	il->dir = strdup(state_dir);
	if (!il->dir)
		return -ENOMEM;
	r = mkdir_p(state_dir, 0700);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot create: %s", state_dir, strerror(-r));
	il->dir_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (il->dir_fd < 0)
		return errbuf_set(err, errlen, -errno, "%s: cannot open: %m", state_dir);
	il->lock_fd = openat(il->dir_fd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (il->lock_fd < 0)
		return errbuf_set(err, errlen, -errno, "%s/" LOCK_FILE ": cannot open: %m", state_dir);
	if (flock(il->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return errbuf_set(err, errlen, -EBUSY, "%s is in use by another process (lock on %s/" LOCK_FILE ")",
					  state_dir, state_dir);
		return errbuf_set(err, errlen, -errno, "%s/" LOCK_FILE ": cannot lock: %m", state_dir);
	}
	r = remove_stale_temporaries(il);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot remove stale temporary files: %s", state_dir, strerror(-r));

	if (exists_at(il->dir_fd, LOG_FILE)) {
		char why[256] = "", cbwhy[512] = "";
		struct replay rp = { .root = ilog_empty_root(), .history_max = il->history_max, .err = cbwhy,
				     .errlen = sizeof(cbwhy) };
		struct recordlog_scan scan;
		_cleanup_free_ char *data = NULL;

		if (!rp.root)
			return -ENOMEM;
		r = recordlog_open(il->dir_fd, il->dir, LOG_FILE, ilog_replay_cb, &rp, &scan, &il->log, err, errlen);
		if (r < 0) {
			json_decref(rp.root);
			if (cbwhy[0]) /* a record that frames well but does not apply */
				errbuf_set(err, errlen, r, "%s/" LOG_FILE ": %s", state_dir, cbwhy);
			return advise(err, errlen, r);
		}
		il->root = rp.root;
		il->owners_valid = false;
		r = ilog_check_root(il->root, why, sizeof(why));
		if (r < 0) {
			errbuf_set(err, errlen, r, "%s/" LOG_FILE ": the replayed state is inconsistent: %s", state_dir, why);
			return advise(err, errlen, r);
		}
		info.lost = scan.short_of_mark;
		info.lost_end = scan.marked_end;
		info.torn = scan.torn;
		info.torn_offset = scan.valid_end;
		snprintf(info.torn_why, sizeof(info.torn_why), "%s", scan.torn_why);
		info.records = scan.records;
		settle(il);
		data = state_text(il);
		il->snapshot_size = data ? strlen(data) : 0;
	} else {
		il->root = ilog_empty_root();
		il->owners_valid = false;
		if (!il->root)
			return -ENOMEM;
		r = write_snapshot(il, true);
		if (r < 0)
			return errbuf_set(err, errlen, r, "%s/" LOG_FILE ": cannot create: %s", state_dir, strerror(-r));
		info.fresh = true;
	}
	if (opened)
		*opened = info;
	*out = TAKE_PTR(il);
	return 0;
}

/* ---- writing -------------------------------------------------------------------------------- */

static int maybe_compact(struct intentlog *il)
{
	struct recordlog_stats st;
	uint64_t limit = il->snapshot_size * 4;

	recordlog_stats(il->log, &st);
	if (limit < il->compact_min)
		limit = il->compact_min;
	if (st.size <= limit)
		return 0;
	return intentlog_compact(il);
}

int intentlog_compact(struct intentlog *il)
{
	int r;

	if (il->in_batch)
		return -EBUSY;
	r = write_snapshot(il, false);
	if (r == 0)
		il->compactions++;
	return r;
}

/* A copy of the outbox for a record to change: new lists, shared items. */
static json_t *outbox_copy(json_t *outbox)
{
	json_t *out = json_object(), *d;
	const char *dest;

	if (!out)
		return NULL;
	json_object_foreach(outbox, dest, d) {
		json_t *nd = json_copy(d), *items = nd ? json_copy(json_object_get(d, "items")) : NULL;

		if (!items || json_object_set_new(nd, "items", items) < 0 || json_object_set_new(out, dest, nd) < 0) {
			json_decref(nd);
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/*
 * A copy of the state for a record to apply to: new containers (the root,
 * the lists of grants and intents, the sources, each outbox and its list),
 * shared members.  No record changes a member in place but a grant, which
 * an apply function first makes its own (ilog_grant_writable()); an intent,
 * an owned block, a request, a status report and a queued report never
 * change once recorded.  A copy then costs one pointer per grant, intent
 * and queued report, not their bytes: a deep copy per record made every
 * rejected request cost the whole history's reports.
 */
static json_t *state_copy(json_t *root)
{
	json_t *next = json_copy(root), *v;
	const char *k;

	if (!next)
		return NULL;
	json_object_foreach(root, k, v) {
		json_t *c;

		if (streq(k, "outbox") && json_is_object(v))
			c = outbox_copy(v);
		else if (json_is_object(v) || json_is_array(v))
			c = json_copy(v);
		else
			continue;
		if (!c || json_object_set_new(next, k, c) < 0) {
			json_decref(next);
			return NULL;
		}
	}
	return next;
}

/* Applies REC (consumed) of TYPE to a copy of the state, makes it durable (or
 * queues it in the open batch), then current.  Errors leave everything as it was. */
static int commit(struct intentlog *il, unsigned type, json_t *rec)
{
	struct apply_ctx c = { .history_max = il->history_max, .history = &il->history, .outbox_max = il->outbox_max };
	json_t *next;
	char *data;
	int r;

	if (!rec)
		return -ENOMEM;
	next = state_copy(il->root);
	if (!next) {
		json_decref(rec);
		return -ENOMEM;
	}
	r = ilog_apply(&next, type, rec, &c);
	data = r == 0 ? json_dumps(rec, JSON_COMPACT) : NULL;
	json_decref(rec);
	if (r == 0 && !data)
		r = -ENOMEM;
	if (r == 0 && il->in_batch) {
		if (il->n_batch == il->cap_batch) {
			size_t cap = il->cap_batch ? il->cap_batch * 2 : 8;
			struct pending_rec *v = realloc(il->batch, cap * sizeof(*v));
			if (!v)
				r = -ENOMEM;
			else {
				il->batch = v;
				il->cap_batch = cap;
			}
		}
		if (r == 0) {
			il->batch[il->n_batch++] = (struct pending_rec){ .type = (uint16_t)type, .data = data, .len = strlen(data) };
			data = NULL;
		}
	} else if (r == 0) {
		struct recordlog_rec lr = { .type = (uint16_t)type, .data = data, .len = strlen(data) };
		r = recordlog_append(il->log, &lr, 1);
	}
	free(data);
	if (r < 0) {
		json_decref(next);
		return r;
	}
	json_decref(il->root);
	il->root = next;
	il->owners_valid = false;
	il->revived |= c.revived;
	if (!il->in_batch) {
		settle(il);
		(void)maybe_compact(il); /* a failed compaction leaves the log valid: retried next time */
	}
	return 0;
}

int intentlog_batch_begin(struct intentlog *il)
{
	if (il->in_batch)
		return -EBUSY;
	il->batch_saved = state_copy(il->root);
	if (!il->batch_saved)
		return -ENOMEM;
	il->in_batch = true;
	return 0;
}

int intentlog_batch_end(struct intentlog *il)
{
	struct recordlog_rec *recs;
	int r = 0;

	if (!il->in_batch)
		return -EINVAL;
	if (il->n_batch > 0) {
		recs = calloc(il->n_batch, sizeof(*recs));
		if (!recs)
			r = -ENOMEM;
		for (size_t i = 0; recs && i < il->n_batch; i++)
			recs[i] = (struct recordlog_rec){ .type = il->batch[i].type, .data = il->batch[i].data,
							  .len = il->batch[i].len };
		if (recs)
			r = recordlog_append(il->log, recs, il->n_batch);
		free(recs);
	}
	for (size_t i = 0; i < il->n_batch; i++)
		free(il->batch[i].data);
	il->n_batch = 0;
	il->in_batch = false;
	if (r < 0) {
		json_decref(il->root);
		il->root = il->batch_saved;
		il->owners_valid = false;
	} else {
		json_decref(il->batch_saved);
	}
	il->batch_saved = NULL;
	if (r == 0) {
		settle(il);
		(void)maybe_compact(il);
	}
	return r;
}

void intentlog_batch_abort(struct intentlog *il)
{
	if (!il->in_batch)
		return;
	for (size_t i = 0; i < il->n_batch; i++)
		free(il->batch[i].data);
	il->n_batch = 0;
	il->in_batch = false;
	json_decref(il->root);
	il->root = il->batch_saved;
	il->owners_valid = false;
	il->batch_saved = NULL;
}

/* Whether a record that puts G in STATE tells subscribers: an event is a
 * change of state (or a step of one in progress), not the same state
 * recorded again, as a resumed operation does. */
static bool state_news(const json_t *g, enum msg_state state)
{
	return !g || state == MSG_STATE_IN_PROGRESS || !streq(ilog_str_of(g, "state"), msg_state_name(state));
}

/* "status" and "outbox" members of a record, and "events": what each
 * subscriber queues for REPORT, in the same record (when NEWS).  The
 * record keeps the report with its blocks as runs, built from the typed
 * blocks; the whole list is written only for a subscriber. */
static int add_report(struct intentlog *il, json_t *rec, const struct report *report, const char *outbox_dest,
		      bool news)
{
	_cleanup_json_ json_t *status = NULL;
	json_t *events = NULL;

	if (!rec)
		return -ENOMEM;
	if (outbox_dest && !msg_id_valid(outbox_dest))
		return -EINVAL;
	if (report && news && il->n_subs && !(status = report_to_json(report)))
		return -ENOMEM;
	for (size_t i = 0; status && i < il->n_subs; i++) {
		json_t *doc = il->subs[i].fn(il->subs[i].ctx, status);

		if (!doc)
			continue;
		if ((!events && !(events = json_array())) ||
		    json_array_append_new(events, json_pack("{s:s, s:o}", "dest", il->subs[i].dest, "report", doc)) < 0) {
			json_decref(events);
			return -ENOMEM;
		}
	}
	if (json_object_set_new(rec, "status", report ? report_runs_of_report(report) : json_null()) < 0 ||
	    json_object_set_new(rec, "outbox", outbox_dest ? json_string(outbox_dest) : json_null()) < 0 ||
	    (events && json_object_set_new(rec, "events", events) < 0))
		return -ENOMEM;
	return 0;
}

int intentlog_subscribe(struct intentlog *il, const char *dest, intentlog_event_fn fn, void *ctx)
{
	if (!msg_id_valid(dest) || !fn)
		return -EINVAL;
	if (il->n_subs == INTENTLOG_SUBSCRIBERS_MAX)
		return -ENOSPC;
	il->subs[il->n_subs] = (struct intentlog_subscriber){ .fn = fn, .ctx = ctx };
	snprintf(il->subs[il->n_subs].dest, sizeof(il->subs[0].dest), "%s", dest);
	il->n_subs++;
	return 0;
}

void intentlog_unsubscribe(struct intentlog *il, intentlog_event_fn fn, void *ctx)
{
	for (size_t i = 0; i < il->n_subs;)
		if (il->subs[i].fn == fn && il->subs[i].ctx == ctx)
			il->subs[i] = il->subs[--il->n_subs];
		else
			i++;
}

int intentlog_accept(struct intentlog *il, const char *source, const struct msg *m, enum msg_state state,
		     const struct report *report, const char *outbox_dest)
{
	json_t *rec, *req;
	int r;

	if (!m || m->type == MSG_SYNC || !msg_id_valid(source) || !msg_id_valid(m->id) || m->generation == 0 ||
	    m->generation > MSG_GENERATION_MAX || (outbox_dest && !report))
		return -EINVAL;
	if (m->generation <= intentlog_last_generation(il, source))
		return -ESTALE;
	if (ilog_grant_known(il->root, &il->history, m->id))
		return -EEXIST;
	req = msg_to_json(m);
	if (!req)
		return -ENOMEM;
	rec = json_pack("{s:s, s:s, s:o, s:o}", "source", source, "state", msg_state_name(state), "request", req,
			"time", ilog_now_json());
	r = add_report(il, rec, report, outbox_dest, true);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_ACCEPT, rec);
}

int intentlog_set_state(struct intentlog *il, const char *id, enum msg_state state, const struct report *report,
			const char *outbox_dest)
{
	_cleanup_json_ json_t *g = ilog_grant_ref(il->root, &il->history, id);
	json_t *rec;
	int r;

	if (!g)
		return -ENOENT;
	if (outbox_dest && !report && !json_is_object(json_object_get(g, "status")))
		return -EINVAL;
	rec = json_pack("{s:s, s:s, s:o}", "id", id, "state", msg_state_name(state), "time", ilog_now_json());
	r = add_report(il, rec, report, outbox_dest, state_news(g, state));
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_STATE, rec);
}

int intentlog_intent(struct intentlog *il, const char *op, enum intentlog_dir dir,
		     const struct intentlog_target *blocks, size_t n, const struct report *report,
		     const char *outbox_dest)
{
	_cleanup_json_ json_t *g = msg_id_valid(op) ? ilog_grant_ref(il->root, &il->history, op) : NULL;
	json_t *rec, *list;
	int r;

	if (!msg_id_valid(op) || (dir != ILOG_UP && dir != ILOG_DOWN) || n == 0 || !blocks ||
	    (outbox_dest && !report && !json_is_object(json_object_get(g, "status"))))
		return -EINVAL;
	list = json_array();
	for (size_t i = 0; list && i < n; i++) {
		const struct intentlog_target *t = &blocks[i];
		if (t->block > INT64_MAX || t->memmap < -1 || t->memmap > 1 || (t->zone != MEM_ZONE_AUTO && !ilog_zone_word(t->zone))) {
			json_decref(list);
			return -EINVAL;
		}
		json_array_append_new(list, json_pack("{s:I, s:o, s:o}", "block", (json_int_t)t->block, "memmap",
						      t->memmap < 0 ? json_null() : json_boolean(t->memmap), "zone",
						      ilog_zone_word(t->zone) ? json_string(ilog_zone_word(t->zone)) : json_null()));
	}
	if (!list || json_array_size(list) != n) {
		json_decref(list);
		return -ENOMEM;
	}
	rec = json_pack("{s:s, s:s, s:o, s:o}", "op", op, "dir", dir == ILOG_UP ? "up" : "down", "blocks", list, "time",
			ilog_now_json());
	r = add_report(il, rec, report, outbox_dest, true);
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_INTENT, rec);
}

static json_t *done_list(const struct intentlog_done *done, size_t n, bool zoned)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < n; i++) {
		json_t *e;
		if (done[i].block > INT64_MAX || (zoned && !ilog_zone_word(done[i].zone))) {
			json_decref(list);
			return NULL;
		}
		e = zoned ? json_pack("{s:I, s:s, s:b}", "block", (json_int_t)done[i].block, "zone", ilog_zone_word(done[i].zone),
				      "memmap", done[i].memmap)
			  : json_integer((json_int_t)done[i].block);
		if (json_array_append_new(list, e) < 0) {
			json_decref(list);
			return NULL;
		}
	}
	return list;
}

int intentlog_result(struct intentlog *il, const char *op, enum msg_state state, uint64_t applied_bytes,
		     const struct intentlog_done *done, size_t n, const struct report *report,
		     const char *outbox_dest)
{
	json_t *it = ilog_find_intent(il->root, op, NULL), *rec, *list;
	_cleanup_json_ json_t *g = msg_id_valid(op) ? ilog_grant_ref(il->root, &il->history, op) : NULL;
	bool up = it && streq(ilog_str_of(it, "dir"), "up");
	int r;

	if (!msg_id_valid(op) || applied_bytes > INT64_MAX || (n && !done))
		return -EINVAL;
	if (!g)
		return -ENOENT;
	if (outbox_dest && !report && !json_is_object(json_object_get(g, "status")))
		return -EINVAL;
	list = done_list(done, n, up);
	if (!list)
		return -EINVAL;
	rec = json_pack("{s:s, s:s, s:I, s:o, s:o}", "op", op, "state", msg_state_name(state), "applied_bytes",
			(json_int_t)applied_bytes, "blocks", list, "time", ilog_now_json());
	r = add_report(il, rec, report, outbox_dest, state_news(g, state));
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	return commit(il, ILOG_REC_RESULT, rec);
}

/* The owner of BLOCK in the current state, its place in the owner's
 * "blocks" in *BIDX: O(1) with the index, which is built once per state
 * (O(owned blocks)) rather than searched per block. */
json_t *ilog_owner_of(struct intentlog *il, uint64_t block, size_t *bidx)
{
	json_t *grants = json_object_get(il->root, "grants"), *g, *b;
	uint64_t v;
	size_t i, k;

	if (!il->owners_valid) {
		idmap_clear(&il->owners);
		json_array_foreach(grants, i, g)
			json_array_foreach(json_object_get(g, "blocks"), k, b)
				if (!idmap_get(&il->owners, ilog_u64_of(b, "block"), NULL) &&
				    idmap_put(&il->owners, ilog_u64_of(b, "block"), (uint64_t)i << 32 | k) < 0)
					return ilog_find_owner(il->root, block, bidx); /* ENOMEM: the slow way */
		il->owners_valid = true;
	}
	if (!idmap_get(&il->owners, block, &v))
		return NULL;
	if (bidx)
		*bidx = (size_t)(v & UINT32_MAX);
	return json_array_get(grants, (size_t)(v >> 32));
}

int intentlog_adopt(struct intentlog *il, const char *grant_id, const struct intentlog_done *blocks, size_t n,
		    uint64_t *seq)
{
	uint64_t first = ilog_u64_of(il->root, "next_block_seq");
	json_t *list;
	int r;

	if (!msg_id_valid(grant_id) || n == 0 || !blocks)
		return -EINVAL;
	if (!ilog_grant_known(il->root, &il->history, grant_id))
		return -ENOENT;
	list = done_list(blocks, n, true);
	if (!list)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (ilog_owner_of(il, blocks[i].block, NULL)) {
			json_decref(list);
			return -EEXIST;
		}
	r = commit(il, ILOG_REC_ADOPT, json_pack("{s:s, s:o, s:o}", "grant", grant_id, "blocks", list, "time", ilog_now_json()));
	if (r == 0 && seq)
		*seq = first;
	return r;
}

int intentlog_release(struct intentlog *il, const uint64_t *blocks, size_t n)
{
	json_t *list = json_array();

	if (!list)
		return -ENOMEM;
	if (n == 0 || !blocks) {
		json_decref(list);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!ilog_owner_of(il, blocks[i], NULL)) {
			json_decref(list);
			return -ENOENT;
		}
		json_array_append_new(list, json_integer((json_int_t)blocks[i]));
	}
	return commit(il, ILOG_REC_RELEASE, json_pack("{s:o, s:o}", "blocks", list, "time", ilog_now_json()));
}

int intentlog_add_owned_block(struct intentlog *il, const char *grant_id, uint64_t block, enum mem_zone zone,
			      bool memmap, uint64_t *seq)
{
	struct intentlog_done d = { .block = block, .zone = zone, .memmap = memmap };
	_cleanup_json_ json_t *g = ilog_grant_ref(il->root, &il->history, grant_id);

	if (!ilog_zone_word(zone) || block > INT64_MAX)
		return -EINVAL;
	if (!g)
		return -ENOENT;
	if (!streq(ilog_str_of(g, "type"), "grant"))
		return -EINVAL;
	return intentlog_adopt(il, grant_id, &d, 1, seq);
}

int intentlog_remove_owned_block(struct intentlog *il, uint64_t block)
{
	return intentlog_release(il, &block, 1);
}

int intentlog_outbox_push(struct intentlog *il, const char *dest, json_t *report, uint64_t *seq)
{
	json_t *d = json_object_get(json_object_get(il->root, "outbox"), dest);
	uint64_t next = d ? ilog_u64_of(d, "next_seq") : 1;
	int r;

	if (!msg_id_valid(dest) || !json_is_object(report))
		return -EINVAL;
	r = commit(il, ILOG_REC_OUTBOX_PUSH, json_pack("{s:s, s:O}", "dest", dest, "report", report));
	if (r == 0 && seq)
		*seq = next;
	return r;
}

int intentlog_outbox_ack(struct intentlog *il, const char *dest, uint64_t seq)
{
	json_t *items = json_object_get(json_object_get(json_object_get(il->root, "outbox"), dest), "items"), *it;
	size_t i;

	if (!msg_id_valid(dest) || seq == 0 || seq > INT64_MAX)
		return -EINVAL;
	json_array_foreach(items, i, it)
		if (ilog_u64_of(it, "seq") == seq)
			return commit(il, ILOG_REC_OUTBOX_ACK,
				      json_pack("{s:s, s:I}", "dest", dest, "seq", (json_int_t)seq));
	return -ENOENT;
}

int intentlog_outbox_push_text(struct intentlog *il, const char *dest, const char *doc, uint64_t *seq)
{
	json_t *report = doc ? json_loads(doc, JSON_REJECT_DUPLICATES, NULL) : NULL;
	int r = report ? intentlog_outbox_push(il, dest, report, seq) : -EINVAL;

	json_decref(report);
	return r;
}

void intentlog_stats(struct intentlog *il, struct intentlog_stats *out)
{
	struct recordlog_stats st;

	recordlog_stats(il->log, &st);
	*out = (struct intentlog_stats){ .log_bytes = st.size, .bytes_written = st.bytes_written, .syncs = st.syncs,
					 .compactions = il->compactions, .failed_bytes = st.failed_bytes,
					 .broken = st.broken };
}
