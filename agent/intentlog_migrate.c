/* SPDX-License-Identifier: MIT */
/*
 * The one-time migration of the earlier journal.json (+ step.json) into
 * the intent log's state tree (docs/journal.md).
 */
#include "agent/intentlog_impl.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>

/* The earlier format: journal.json (+ step.json) into a state tree. */
int ilog_load_old(struct intentlog *il, json_t **out, char *err, size_t errlen)
{
	char path[4096], spath[4096], why[200] = "";
	_cleanup_free_ char *text = NULL, *stext = NULL;
	json_t *root, *step = NULL, *g;
	json_error_t jerr;
	size_t len, i;
	int r;

	snprintf(path, sizeof(path), "%s/" OLD_FILE, il->dir);
	snprintf(spath, sizeof(spath), "%s/" OLD_STEP_FILE, il->dir);
	r = file_read_all(path, OLD_FILE_MAX, &text, &len);
	if (r == -EFBIG)
		return errbuf_set(err, errlen, -EBADMSG, "%s: larger than %u bytes", path, OLD_FILE_MAX);
	if (r < 0)
		return errbuf_set(err, errlen, r, "%s: cannot read: %s", path, strerror(-r));
	if (len == 0)
		return errbuf_set(err, errlen, -EBADMSG, "%s: empty file (truncated?)", path);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return errbuf_set(err, errlen, -EBADMSG, "%s: line %d, column %d: %s", path, jerr.line, jerr.column,
				  jerr.text);
	r = ilog_check_root(root, true, why, sizeof(why));
	if (r < 0) {
		json_decref(root);
		return errbuf_set(err, errlen, r, "%s: %s", path, why);
	}
	r = file_read_all(spath, 64 * 1024, &stext, &len);
	if (r == 0) {
		struct intentlog_step s;
		json_t *o = json_loadb(stext, len, JSON_REJECT_DUPLICATES, &jerr);
		if (!o || ilog_step_from_json(o, &s) < 0 || !ilog_find_grant(root, s.op, NULL)) {
			json_decref(o);
			json_decref(root);
			return errbuf_set(err, errlen, -EBADMSG, "%s: not a valid step marker of a known operation", spath);
		}
		step = ilog_step_to_json(&s);
		json_decref(o);
	} else if (r != -ENOENT) {
		json_decref(root);
		return errbuf_set(err, errlen, r == -EFBIG ? -EBADMSG : r, "%s: cannot read: %s", spath, strerror(-r));
	}
	json_array_foreach(json_object_get(root, "grants"), i, g)
		json_object_set_new(g, "applied_bytes",
				    ilog_u64_json(ilog_u64_of(json_object_get(g, "status"), "applied_bytes")));
	if (json_object_set_new(root, "intents", json_array()) < 0 ||
	    json_object_set_new(root, "step", step ? step : json_null()) < 0) {
		json_decref(root);
		return -ENOMEM;
	}
	*out = root;
	return 0;
}

/* journal.json and step.json are kept as *.migrated once the log has their content. */
int ilog_retire_old_files(struct intentlog *il)
{
	if (renameat(il->dir_fd, OLD_FILE, il->dir_fd, OLD_FILE ".migrated") < 0 && errno != ENOENT)
		return -errno;
	if (renameat(il->dir_fd, OLD_STEP_FILE, il->dir_fd, OLD_STEP_FILE ".migrated") < 0 && errno != ENOENT)
		return -errno;
	return fsync(il->dir_fd) < 0 ? -errno : 0;
}
