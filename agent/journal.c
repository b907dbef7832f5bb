/* SPDX-License-Identifier: MIT */
/*
 * Layout (docs/journal.md): STATE_DIR/journal.json holds everything but the
 * step marker and is replaced as a whole by file_write_atomic(); the marker
 * lives in STATE_DIR/step.json because it is written twice per block and
 * should stay small.  In memory the journal is the parsed journal.json tree:
 * a change is made on a deep copy that replaces the tree only after the copy
 * reached the disk, which is what keeps memory and disk equal on failure.
 */
#include "agent/journal.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

#define JOURNAL_VERSION 1
#define JOURNAL_FILE "journal.json"
#define STEP_FILE "step.json"
#define LOCK_FILE "lock"

#ifndef _cleanup_json_
#define _cleanup_json_ _cleanup_(json_decrefp) /* json_decrefp comes with jansson */
#endif

struct journal {
	char *dir;
	char *path;      /* DIR/journal.json */
	char *step_path; /* DIR/step.json */
	int dir_fd;
	int lock_fd;
	unsigned history_max;
	unsigned outbox_max;
	json_t *root;
	bool has_step;
	struct journal_step step;
};


static json_t *u64_json(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* Checked integer member; false when missing, not an integer or out of range. */
static bool get_u64(const json_t *o, const char *key, uint64_t min, uint64_t max, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return false;
	*out = (uint64_t)i;
	return true;
}

static uint64_t u64_of(const json_t *o, const char *key)
{
	json_int_t i = json_integer_value(json_object_get(o, key));
	return i < 0 ? 0 : (uint64_t)i;
}

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_t *now_json(void)
{
	char buf[32];

	msg_time_format(time(NULL), buf);
	return json_string(buf);
}

static json_t *find_grant(json_t *root, const char *id, size_t *idx)
{
	json_t *grants = json_object_get(root, "grants"), *g;
	size_t i;

	json_array_foreach(grants, i, g) {
		if (streq(str_of(g, "id"), id)) {
			if (idx)
				*idx = i;
			return g;
		}
	}
	return NULL;
}

/* The grant owning BLOCK and the block's index in its "blocks". */
static json_t *find_owner(json_t *root, uint64_t block, size_t *bidx)
{
	json_t *grants = json_object_get(root, "grants"), *g, *b;
	size_t i, k;

	json_array_foreach(grants, i, g) {
		json_array_foreach(json_object_get(g, "blocks"), k, b) {
			if (u64_of(b, "block") == block) {
				if (bidx)
					*bidx = k;
				return g;
			}
		}
	}
	return NULL;
}

static const char *zone_word(enum mem_zone z)
{
	return z == MEM_ZONE_MOVABLE ? "movable" : z == MEM_ZONE_NORMAL ? "normal" : NULL;
}

static int zone_parse(const char *s, enum mem_zone *out)
{
	if (streq(s, "movable"))
		*out = MEM_ZONE_MOVABLE;
	else if (streq(s, "normal"))
		*out = MEM_ZONE_NORMAL;
	else
		return -EINVAL;
	return 0;
}

/* ---- validation on load ---------------------------------------------------- */

static int check_block(const json_t *b, const char *id, uint64_t next_seq, char *err, size_t errlen)
{
	uint64_t v;
	enum mem_zone z;

	if (!json_is_object(b) || !get_u64(b, "block", 0, INT64_MAX, &v))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": an owned block has no valid \"block\"", id);
	if (!get_u64(b, "seq", 1, next_seq - 1, &v))
		return errbuf_set(err, errlen, -EBADMSG,
			    "grant \"%s\", block %" PRIu64 ": \"seq\" missing or not below next_block_seq",
			    id, u64_of(b, "block"));
	if (zone_parse(str_of(b, "zone"), &z) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\", block %" PRIu64 ": \"zone\" is not movable or normal",
			    id, u64_of(b, "block"));
	if (!json_is_boolean(json_object_get(b, "memmap")))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\", block %" PRIu64 ": \"memmap\" is not a boolean",
			    id, u64_of(b, "block"));
	return 0;
}

static int check_grant(json_t *root, json_t *g, size_t i, uint64_t next_order, uint64_t next_seq,
		       char *err, size_t errlen)
{
	const char *id = str_of(g, "id"), *source = str_of(g, "source"), *type = str_of(g, "type");
	json_t *req = json_object_get(g, "request"), *status = json_object_get(g, "status");
	json_t *blocks = json_object_get(g, "blocks"), *b;
	struct msg_error merr;
	struct msg *m = NULL;
	enum msg_state st;
	uint64_t gen, order, last;
	time_t t;
	size_t k;
	int r;

	if (!json_is_object(g) || !msg_id_valid(id))
		return errbuf_set(err, errlen, -EBADMSG, "grants[%zu]: missing or invalid \"id\"", i);
	if (find_grant(root, id, &k) && k != i)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\" is recorded twice", id);
	if (!msg_id_valid(source))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": missing or invalid \"source\"", id);
	if (!streq(type, "grant") && !streq(type, "revoke"))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"type\" is not grant or revoke", id);
	if (!get_u64(g, "generation", 1, MSG_GENERATION_MAX, &gen))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"generation\"", id);
	if (!get_u64(json_object_get(root, "sources"), source, 1, MSG_GENERATION_MAX, &last) || gen > last)
		return errbuf_set(err, errlen, -EBADMSG,
			    "grant \"%s\": generation %" PRIu64 " is above the last recorded for source \"%s\"",
			    id, gen, source);
	if (next_order == 0 || !get_u64(g, "order", 0, next_order - 1, &order))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"order\" missing or not below next_order", id);
	if (msg_state_parse(str_of(g, "state"), &st) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"state\"", id);
	if (!json_is_null(status) && !json_is_object(status))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"status\" is neither an object nor null", id);
	if (!str_of(g, "created") || msg_time_parse(str_of(g, "created"), &t) < 0 ||
	    !str_of(g, "updated") || msg_time_parse(str_of(g, "updated"), &t) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": invalid \"created\" or \"updated\" time", id);

	r = msg_from_json(req, &m, &merr);
	if (r < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": stored request is invalid: %s", id, merr.message);
	r = streq(m->id, id) && m->generation == gen && streq(msg_type_name(m->type), type) ? 0 : -EBADMSG;
	msg_free(m);
	if (r < 0)
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": stored request does not match the record", id);

	if (!json_is_array(blocks))
		return errbuf_set(err, errlen, -EBADMSG, "grant \"%s\": \"blocks\" is not an array", id);
	if (streq(type, "revoke") && json_array_size(blocks) > 0)
		return errbuf_set(err, errlen, -EBADMSG, "revocation \"%s\" owns blocks", id);
	json_array_foreach(blocks, k, b) {
		json_t *owner;
		size_t bk;

		r = check_block(b, id, next_seq, err, errlen);
		if (r < 0)
			return r;
		owner = find_owner(root, u64_of(b, "block"), &bk);
		if (owner != g || bk != k)
			return errbuf_set(err, errlen, -EBADMSG, "block %" PRIu64 " is owned twice", u64_of(b, "block"));
	}
	return 0;
}

static int check_outbox(json_t *outbox, char *err, size_t errlen)
{
	const char *dest;
	json_t *d;

	if (!json_is_object(outbox))
		return errbuf_set(err, errlen, -EBADMSG, "\"outbox\" is not an object");
	json_object_foreach(outbox, dest, d) {
		json_t *items = json_object_get(d, "items"), *it;
		uint64_t next, seq, prev = 0;
		size_t i;

		if (!msg_id_valid(dest) || !get_u64(d, "next_seq", 1, INT64_MAX, &next) || !json_is_array(items))
			return errbuf_set(err, errlen, -EBADMSG, "outbox \"%.40s\": invalid entry", dest);
		json_array_foreach(items, i, it) {
			if (!get_u64(it, "seq", prev + 1, next - 1, &seq) ||
			    !json_is_object(json_object_get(it, "report")))
				return errbuf_set(err, errlen, -EBADMSG,
					    "outbox \"%s\", item %zu: sequence out of order or report missing", dest, i);
			prev = seq;
		}
	}
	return 0;
}

static int check_root(json_t *root, char *err, size_t errlen)
{
	json_t *sources = json_object_get(root, "sources"), *grants = json_object_get(root, "grants"), *g, *v;
	uint64_t version, next_order, next_seq;
	const char *key;
	size_t i;
	int r;

	if (!json_is_object(root))
		return errbuf_set(err, errlen, -EBADMSG, "not a JSON object");
	if (!get_u64(root, "version", 0, INT64_MAX, &version))
		return errbuf_set(err, errlen, -EBADMSG, "\"version\" missing");
	if (version != JOURNAL_VERSION)
		return errbuf_set(err, errlen, -EBADMSG, "version %" PRIu64 " is not the version %d this memgrantd reads",
			    version, JOURNAL_VERSION);
	if (!get_u64(root, "next_order", 0, INT64_MAX, &next_order) ||
	    !get_u64(root, "next_block_seq", 1, INT64_MAX, &next_seq))
		return errbuf_set(err, errlen, -EBADMSG, "\"next_order\" or \"next_block_seq\" missing or invalid");
	if (!json_is_object(sources))
		return errbuf_set(err, errlen, -EBADMSG, "\"sources\" is not an object");
	json_object_foreach(sources, key, v) {
		uint64_t gen;
		if (!msg_id_valid(key) || !get_u64(sources, key, 1, MSG_GENERATION_MAX, &gen))
			return errbuf_set(err, errlen, -EBADMSG, "sources: invalid entry \"%.40s\"", key);
	}
	if (!json_is_array(grants))
		return errbuf_set(err, errlen, -EBADMSG, "\"grants\" is not an array");
	json_array_foreach(grants, i, g) {
		r = check_grant(root, g, i, next_order, next_seq, err, errlen);
		if (r < 0)
			return r;
	}
	return check_outbox(json_object_get(root, "outbox"), err, errlen);
}

/* ---- the step marker ------------------------------------------------------------ */

static bool phase_valid(const char *s)
{
	size_t n = strlen(s);

	if (n >= sizeof(((struct journal_step *)0)->phase))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] >= 'a' && s[i] <= 'z') && s[i] != '_')
			return false;
	return true;
}

static json_t *step_to_json(const struct journal_step *s)
{
	char t[32];

	msg_time_format(s->started, t);
	return json_pack("{s:i, s:s, s:s, s:I, s:s, s:o, s:o, s:s}", "version", JOURNAL_VERSION, "op", s->op,
			 "kind", s->kind == JOURNAL_STEP_BRING_UP ? "bring_up" : "take_down", "block",
			 (json_int_t)s->block, "phase", s->phase,
			 "memmap", s->memmap < 0 ? json_null() : json_boolean(s->memmap),
			 "zone", zone_word(s->zone) ? json_string(zone_word(s->zone)) : json_null(),
			 "started", t);
}

static int step_from_json(json_t *o, struct journal_step *s)
{
	const char *kind = str_of(o, "kind"), *op = str_of(o, "op"), *phase = str_of(o, "phase");
	json_t *memmap = json_object_get(o, "memmap"), *zone = json_object_get(o, "zone");
	uint64_t version;

	memset(s, 0, sizeof(*s));
	if (!json_is_object(o) || !get_u64(o, "version", 0, INT64_MAX, &version) || version != JOURNAL_VERSION)
		return -EBADMSG;
	if (!msg_id_valid(op) || !phase || !phase_valid(phase))
		return -EBADMSG;
	snprintf(s->op, sizeof(s->op), "%s", op);
	snprintf(s->phase, sizeof(s->phase), "%s", phase);
	if (streq(kind, "bring_up"))
		s->kind = JOURNAL_STEP_BRING_UP;
	else if (streq(kind, "take_down"))
		s->kind = JOURNAL_STEP_TAKE_DOWN;
	else
		return -EBADMSG;
	if (!get_u64(o, "block", 0, INT64_MAX, &s->block))
		return -EBADMSG;
	if (json_is_null(memmap))
		s->memmap = -1;
	else if (json_is_boolean(memmap))
		s->memmap = json_is_true(memmap);
	else
		return -EBADMSG;
	if (json_is_null(zone))
		s->zone = MEM_ZONE_AUTO;
	else if (zone_parse(json_string_value(zone), &s->zone) < 0)
		return -EBADMSG;
	if (!str_of(o, "started") || msg_time_parse(str_of(o, "started"), &s->started) < 0)
		return -EBADMSG;
	return 0;
}

/* ---- open / close --------------------------------------------------------------- */

static json_t *empty_root(void)
{
	return json_pack("{s:i, s:i, s:i, s:{}, s:[], s:{}}", "version", JOURNAL_VERSION, "next_order", 0,
			 "next_block_seq", 1, "sources", "grants", "outbox");
}

/* A crash between the temporary write and the rename leaves NAME.tmp.PID
 * behind; it is never read, only removed (we hold the lock, nobody else writes). */
static int remove_stale_temporaries(struct journal *j)
{
	_cleanup_close_ int fd = openat(j->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d)
		return -errno;
	fd = -1;
	while ((de = readdir(d))) {
		if (!startswith(de->d_name, JOURNAL_FILE ".tmp.") && !startswith(de->d_name, STEP_FILE ".tmp."))
			continue;
		if (unlinkat(j->dir_fd, de->d_name, 0) < 0 && errno != ENOENT) {
			r = -errno;
			break;
		}
	}
	closedir(d);
	return r;
}

static int load(struct journal *j, char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	json_t *root;
	json_error_t jerr;
	char why[200] = "";
	size_t len;
	int r;

	r = file_read_all(j->path, JOURNAL_FILE_MAX, &text, &len);
	if (r == -ENOENT) {
		j->root = empty_root();
		return j->root ? 0 : -ENOMEM;
	}
	if (r == -EFBIG)
		return errbuf_set(err, errlen, -EBADMSG, "%s: larger than %u bytes", j->path, JOURNAL_FILE_MAX);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot read: %s", j->path, strerror(-r));
	if (len == 0)
		return errbuf_set(err, errlen, -EBADMSG, "%s: empty file (truncated?)", j->path);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return errbuf_set(err, errlen, -EBADMSG, "%s: line %d, column %d: %s", j->path, jerr.line,
			    jerr.column, jerr.text);
	r = check_root(root, why, sizeof(why));
	if (r < 0) {
		json_decref(root);
		return errbuf_set(err, errlen, r, "%s: %s", j->path, why);
	}
	j->root = root;
	return 0;
}

static int load_step(struct journal *j, char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_json_ json_t *o = NULL;
	json_error_t jerr;
	size_t len;
	int r;

	r = file_read_all(j->step_path, 64 * 1024, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r == -EFBIG)
		return errbuf_set(err, errlen, -EBADMSG, "%s: larger than 64 KiB", j->step_path);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot read: %s", j->step_path, strerror(-r));
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return errbuf_set(err, errlen, -EBADMSG, "%s: line %d, column %d: %s", j->step_path, jerr.line,
			    jerr.column, len == 0 ? "empty file (truncated?)" : jerr.text);
	if (step_from_json(o, &j->step) < 0)
		return errbuf_set(err, errlen, -EBADMSG, "%s: not a valid step marker", j->step_path);
	if (!find_grant(j->root, j->step.op, NULL))
		return errbuf_set(err, errlen, -EBADMSG, "%s: step of \"%s\", which the journal does not know",
			    j->step_path, j->step.op);
	j->has_step = true;
	return 0;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	json_decref(j->root);
	if (j->dir_fd >= 0)
		close(j->dir_fd);
	if (j->lock_fd >= 0)
		close(j->lock_fd); /* releases the flock */
	free(j->dir);
	free(j->path);
	free(j->step_path);
	free(j);
}

static char *path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

int journal_open(const char *state_dir, const struct journal_options *opts, struct journal **out,
		 char *err, size_t errlen)
{
	_cleanup_journal_ struct journal *j = NULL;
	int r;

	if (!state_dir || !*state_dir)
		return errbuf_set(err, errlen, -EINVAL, "no state directory given");
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->dir_fd = j->lock_fd = -1;
	j->history_max = opts && opts->history_max ? opts->history_max : JOURNAL_HISTORY_DEFAULT;
	j->outbox_max = opts && opts->outbox_max ? opts->outbox_max : JOURNAL_OUTBOX_DEFAULT;
	j->dir = strdup(state_dir);
	j->path = path_join(state_dir, JOURNAL_FILE);
	j->step_path = path_join(state_dir, STEP_FILE);
	if (!j->dir || !j->path || !j->step_path)
		return -ENOMEM;

	r = mkdir_p(state_dir, 0700);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot create: %s", state_dir, strerror(-r));
	j->dir_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dir_fd < 0)
		return errbuf_set(err, errlen, -errno, "%s: cannot open: %m", state_dir);
	j->lock_fd = openat(j->dir_fd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (j->lock_fd < 0)
		return errbuf_set(err, errlen, -errno, "%s/" LOCK_FILE ": cannot open: %m", state_dir);
	if (flock(j->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return errbuf_set(err, errlen, -EBUSY, "%s is in use by another process (lock on %s/" LOCK_FILE ")",
				    state_dir, state_dir);
		return errbuf_set(err, errlen, -errno, "%s/" LOCK_FILE ": cannot lock: %m", state_dir);
	}
	r = remove_stale_temporaries(j);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot remove stale temporary files: %s", state_dir, strerror(-r));
	r = load(j, err, errlen);
	if (r < 0)
		return r;
	r = load_step(j, err, errlen);
	if (r < 0)
		return r;
	*out = TAKE_PTR(j);
	return 0;
}

/* ---- writing ------------------------------------------------------------------------ */

/* Finished records (final, owning nothing) beyond history_max go, oldest first. */
static void prune(struct journal *j, json_t *root)
{
	json_t *grants = json_object_get(root, "grants");
	size_t finished = 0;

	for (size_t i = json_array_size(grants); i-- > 0;) {
		json_t *g = json_array_get(grants, i);
		enum msg_state st;

		/* the op of a pending step stays: the marker must name a known record */
		if (msg_state_parse(str_of(g, "state"), &st) < 0 || !msg_state_is_final(st) ||
		    json_array_size(json_object_get(g, "blocks")) > 0 ||
		    (j->has_step && streq(str_of(g, "id"), j->step.op)))
			continue;
		if (++finished > j->history_max)
			json_array_remove(grants, i);
	}
}

/* Makes NEXT (a modified copy of the root) durable and current; consumes NEXT. */
static int commit(struct journal *j, json_t *next)
{
	_cleanup_free_ char *data = NULL;
	int r;

	prune(j, next);
	data = json_dumps(next, JSON_COMPACT);
	if (!data) {
		json_decref(next);
		return -ENOMEM;
	}
	r = file_write_atomic(j->path, data, strlen(data), 0600);
	if (r < 0) {
		json_decref(next);
		return r;
	}
	json_decref(j->root);
	j->root = next;
	return 0;
}

static int outbox_add(struct journal *j, json_t *root, const char *dest, json_t *report, uint64_t *seq_out)
{
	json_t *outbox = json_object_get(root, "outbox");
	json_t *d = json_object_get(outbox, dest), *items, *item;
	uint64_t seq;

	if (!msg_id_valid(dest) || !json_is_object(report))
		return -EINVAL;
	if (!d) {
		d = json_pack("{s:i, s:[]}", "next_seq", 1, "items");
		if (!d || json_object_set_new(outbox, dest, d) < 0)
			return -ENOMEM;
	}
	items = json_object_get(d, "items");
	if (json_array_size(items) >= j->outbox_max)
		return -ENOBUFS;
	seq = u64_of(d, "next_seq");
	item = json_pack("{s:I, s:o}", "seq", (json_int_t)seq, "report", json_deep_copy(report));
	if (!item || json_array_append_new(items, item) < 0 ||
	    json_object_set_new(d, "next_seq", u64_json(seq + 1)) < 0)
		return -ENOMEM;
	if (seq_out)
		*seq_out = seq;
	return 0;
}

/* ---- generations and records ----------------------------------------------------------- */

uint64_t journal_last_generation(struct journal *j, const char *source)
{
	return u64_of(json_object_get(j->root, "sources"), source);
}

static int grant_fill(const json_t *g, struct journal_grant *out)
{
	const json_t *status = json_object_get(g, "status");

	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", str_of(g, "id"));
	snprintf(out->source, sizeof(out->source), "%s", str_of(g, "source"));
	out->type = streq(str_of(g, "type"), "revoke") ? MSG_REVOKE : MSG_GRANT;
	out->generation = u64_of(g, "generation");
	(void)msg_state_parse(str_of(g, "state"), &out->state);
	(void)msg_time_parse(str_of(g, "created"), &out->created);
	(void)msg_time_parse(str_of(g, "updated"), &out->updated);
	out->n_blocks = json_array_size(json_object_get(g, "blocks"));
	out->request = json_deep_copy(json_object_get(g, "request"));
	out->status = json_is_object(status) ? json_deep_copy(status) : NULL;
	if (!out->request || (json_is_object(status) && !out->status)) {
		journal_grant_done(out);
		return -ENOMEM;
	}
	return 0;
}

void journal_grant_done(struct journal_grant *g)
{
	if (!g)
		return;
	json_decref(g->request);
	json_decref(g->status);
	g->request = g->status = NULL;
}

int journal_lookup_generation(struct journal *j, const char *source, uint64_t generation,
			      struct journal_grant *recorded)
{
	json_t *grants = json_object_get(j->root, "grants"), *g;
	size_t i;

	if (!msg_id_valid(source))
		return -EINVAL;
	if (generation > journal_last_generation(j, source))
		return JOURNAL_GEN_NEW;
	json_array_foreach(grants, i, g) {
		if (streq(str_of(g, "source"), source) && u64_of(g, "generation") == generation) {
			if (recorded) {
				int r = grant_fill(g, recorded);
				if (r < 0)
					return r;
			}
			return JOURNAL_GEN_REPLAY;
		}
	}
	return JOURNAL_GEN_STALE;
}

int journal_record_grant(struct journal *j, const char *source, const struct msg *m,
			 enum msg_state state, json_t *status, const char *outbox_dest)
{
	json_t *next, *rec, *req;
	int r;

	if (!m || m->type == MSG_SYNC || !msg_id_valid(source) || !msg_id_valid(m->id) ||
	    m->generation == 0 || m->generation > MSG_GENERATION_MAX ||
	    (status && !json_is_object(status)) || (outbox_dest && !status))
		return -EINVAL;
	if (m->generation <= journal_last_generation(j, source))
		return -ESTALE;
	if (find_grant(j->root, m->id, NULL))
		return -EEXIST;
	req = msg_to_json(m);
	if (!req)
		return -ENOMEM;
	rec = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:[]}", "id", m->id, "source",
			source, "type", msg_type_name(m->type), "generation", (json_int_t)m->generation, "order",
			(json_int_t)u64_of(j->root, "next_order"), "state", msg_state_name(state), "request", req,
			"status", status ? json_deep_copy(status) : json_null(), "created", now_json(), "updated",
			now_json(), "blocks");
	if (!rec)
		return -ENOMEM;
	next = json_deep_copy(j->root);
	if (!next || json_array_append_new(json_object_get(next, "grants"), rec) < 0) {
		json_decref(next);
		return -ENOMEM;
	}
	if (json_object_set_new(json_object_get(next, "sources"), source, u64_json(m->generation)) < 0 ||
	    json_object_set_new(next, "next_order", u64_json(u64_of(next, "next_order") + 1)) < 0) {
		json_decref(next);
		return -ENOMEM;
	}
	if (outbox_dest) {
		r = outbox_add(j, next, outbox_dest, status, NULL);
		if (r < 0) {
			json_decref(next);
			return r;
		}
	}
	return commit(j, next);
}

int journal_set_state(struct journal *j, const char *id, enum msg_state state, json_t *status,
		      const char *outbox_dest)
{
	json_t *next, *g, *report;
	int r = -ENOMEM;

	if (status && !json_is_object(status))
		return -EINVAL;
	if (!find_grant(j->root, id, NULL))
		return -ENOENT;
	next = json_deep_copy(j->root);
	if (!next)
		return -ENOMEM;
	g = find_grant(next, id, NULL);
	if (json_object_set_new(g, "state", json_string(msg_state_name(state))) < 0 ||
	    json_object_set_new(g, "updated", now_json()) < 0 ||
	    (status && json_object_set_new(g, "status", json_deep_copy(status)) < 0))
		goto fail;
	if (outbox_dest) {
		report = json_object_get(g, "status");
		r = json_is_object(report) ? outbox_add(j, next, outbox_dest, report, NULL) : -EINVAL;
		if (r < 0)
			goto fail;
	}
	return commit(j, next);
fail:
	json_decref(next);
	return r;
}

int journal_get_grant(struct journal *j, const char *id, struct journal_grant *out)
{
	json_t *g = find_grant(j->root, id, NULL);

	return g ? grant_fill(g, out) : -ENOENT;
}

void journal_grants_free(struct journal_grant *g, size_t n)
{
	for (size_t i = 0; g && i < n; i++)
		journal_grant_done(&g[i]);
	free(g);
}

int journal_list_grants(struct journal *j, struct journal_grant **out, size_t *n)
{
	json_t *grants = json_object_get(j->root, "grants"), *g;
	size_t count = json_array_size(grants), i;
	struct journal_grant *list = calloc(count ? count : 1, sizeof(*list));

	if (!list)
		return -ENOMEM;
	json_array_foreach(grants, i, g) {
		int r = grant_fill(g, &list[i]);
		if (r < 0) {
			journal_grants_free(list, i);
			return r;
		}
	}
	*out = list;
	*n = count;
	return 0;
}

json_t *journal_grant_json(struct journal *j, const char *id)
{
	json_t *g = find_grant(j->root, id, NULL);

	return g ? json_deep_copy(g) : NULL;
}

json_t *journal_grants_json(struct journal *j)
{
	return json_deep_copy(json_object_get(j->root, "grants"));
}

/* ---- owned blocks ---------------------------------------------------------------------- */

int journal_add_owned_block(struct journal *j, const char *grant_id, uint64_t block,
			    enum mem_zone zone, bool memmap, uint64_t *seq)
{
	json_t *next, *g, *b;
	uint64_t s;

	if (!zone_word(zone) || block > INT64_MAX)
		return -EINVAL;
	g = find_grant(j->root, grant_id, NULL);
	if (!g)
		return -ENOENT;
	if (!streq(str_of(g, "type"), "grant"))
		return -EINVAL;
	if (find_owner(j->root, block, NULL))
		return -EEXIST;
	next = json_deep_copy(j->root);
	if (!next)
		return -ENOMEM;
	s = u64_of(next, "next_block_seq");
	b = json_pack("{s:I, s:I, s:s, s:b}", "block", (json_int_t)block, "seq", (json_int_t)s, "zone",
		      zone_word(zone), "memmap", memmap);
	if (!b || json_array_append_new(json_object_get(find_grant(next, grant_id, NULL), "blocks"), b) < 0 ||
	    json_object_set_new(next, "next_block_seq", u64_json(s + 1)) < 0) {
		json_decref(next);
		return -ENOMEM;
	}
	if (seq)
		*seq = s;
	return commit(j, next);
}

int journal_remove_owned_block(struct journal *j, uint64_t block)
{
	json_t *next, *g;
	size_t k;

	if (!find_owner(j->root, block, NULL))
		return -ENOENT;
	next = json_deep_copy(j->root);
	if (!next)
		return -ENOMEM;
	g = find_owner(next, block, &k);
	if (json_array_remove(json_object_get(g, "blocks"), k) < 0 ||
	    json_object_set_new(g, "updated", now_json()) < 0) {
		json_decref(next);
		return -ENOMEM;
	}
	return commit(j, next);
}

static void block_fill(const json_t *g, const json_t *b, struct journal_block *out)
{
	memset(out, 0, sizeof(*out));
	out->block = u64_of(b, "block");
	out->seq = u64_of(b, "seq");
	(void)zone_parse(str_of(b, "zone"), &out->zone);
	out->memmap = json_is_true(json_object_get(b, "memmap"));
	snprintf(out->grant_id, sizeof(out->grant_id), "%s", str_of(g, "id"));
}

int journal_find_owned_block(struct journal *j, uint64_t block, struct journal_block *out)
{
	size_t k;
	json_t *g = find_owner(j->root, block, &k);

	if (!g)
		return -ENOENT;
	if (out)
		block_fill(g, json_array_get(json_object_get(g, "blocks"), k), out);
	return 0;
}

static int by_seq(const void *a, const void *b)
{
	const struct journal_block *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int journal_owned_blocks(struct journal *j, struct journal_block **out, size_t *n)
{
	json_t *grants = json_object_get(j->root, "grants"), *g, *b;
	struct journal_block *list;
	size_t count = 0, i, k;

	json_array_foreach(grants, i, g)
		count += json_array_size(json_object_get(g, "blocks"));
	list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return -ENOMEM;
	count = 0;
	json_array_foreach(grants, i, g)
		json_array_foreach(json_object_get(g, "blocks"), k, b)
			block_fill(g, b, &list[count++]);
	qsort(list, count, sizeof(*list), by_seq);
	*out = list;
	*n = count;
	return 0;
}

/* ---- the step in flight ------------------------------------------------------------------ */

int journal_begin_step(struct journal *j, const struct journal_step *step)
{
	_cleanup_json_ json_t *o = NULL;
	_cleanup_free_ char *data = NULL;
	struct journal_step s;
	int r;

	if (j->has_step)
		return -EBUSY;
	if (!step || !msg_id_valid(step->op) || !phase_valid(step->phase) || step->block > INT64_MAX ||
	    step->memmap < -1 || step->memmap > 1 ||
	    (step->kind != JOURNAL_STEP_BRING_UP && step->kind != JOURNAL_STEP_TAKE_DOWN) ||
	    (step->zone != MEM_ZONE_AUTO && !zone_word(step->zone)))
		return -EINVAL;
	if (!find_grant(j->root, step->op, NULL))
		return -ENOENT;
	s = *step;
	s.started = time(NULL);
	o = step_to_json(&s);
	data = o ? json_dumps(o, JSON_COMPACT) : NULL;
	if (!data)
		return -ENOMEM;
	r = file_write_atomic(j->step_path, data, strlen(data), 0600);
	if (r < 0)
		return r;
	j->step = s;
	j->has_step = true;
	return 0;
}

int journal_end_step(struct journal *j)
{
	if (!j->has_step)
		return -ENOENT;
	if (unlinkat(j->dir_fd, STEP_FILE, 0) < 0 && errno != ENOENT)
		return -errno;
	/* The removal must be durable too, or a crash resurrects a finished step. */
	if (fsync(j->dir_fd) < 0)
		return -errno;
	j->has_step = false;
	return 0;
}

int journal_pending_step(struct journal *j, struct journal_step *out)
{
	if (!j->has_step)
		return -ENOENT;
	if (out)
		*out = j->step;
	return 0;
}

/* ---- outbox -------------------------------------------------------------------------------- */

int journal_outbox_push(struct journal *j, const char *dest, json_t *report, uint64_t *seq)
{
	json_t *next;
	int r;

	if (!msg_id_valid(dest) || !json_is_object(report))
		return -EINVAL;
	next = json_deep_copy(j->root);
	if (!next)
		return -ENOMEM;
	r = outbox_add(j, next, dest, report, seq);
	if (r < 0) {
		json_decref(next);
		return r;
	}
	return commit(j, next);
}

int journal_outbox_peek(struct journal *j, const char *dest, uint64_t *seq, json_t **report)
{
	json_t *items = json_object_get(json_object_get(json_object_get(j->root, "outbox"), dest), "items");
	json_t *first = json_array_get(items, 0);

	if (!first)
		return -ENOENT;
	if (report) {
		*report = json_deep_copy(json_object_get(first, "report"));
		if (!*report)
			return -ENOMEM;
	}
	if (seq)
		*seq = u64_of(first, "seq");
	return 0;
}

int journal_outbox_ack(struct journal *j, const char *dest, uint64_t seq)
{
	json_t *items = json_object_get(json_object_get(json_object_get(j->root, "outbox"), dest), "items");
	json_t *next, *it;
	size_t i;

	json_array_foreach(items, i, it) {
		if (u64_of(it, "seq") != seq)
			continue;
		next = json_deep_copy(j->root);
		if (!next)
			return -ENOMEM;
		items = json_object_get(json_object_get(json_object_get(next, "outbox"), dest), "items");
		if (json_array_remove(items, i) < 0) {
			json_decref(next);
			return -ENOMEM;
		}
		return commit(j, next);
	}
	return -ENOENT;
}

size_t journal_outbox_count(struct journal *j, const char *dest)
{
	return json_array_size(json_object_get(json_object_get(json_object_get(j->root, "outbox"), dest), "items"));
}
