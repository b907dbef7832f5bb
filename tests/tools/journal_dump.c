/* SPDX-License-Identifier: MIT */
/*
 * journal_dump STATE_DIR: prints the live state that STATE_DIR/journal.log
 * replays to, as one JSON object (the shape of a snapshot record), for tests and operators (`journal_dump DIR | jq .`).
 * Read-only and lock-free: it may run next to memgrantd; it never cuts a
 * torn tail (it ignores it) and never writes.  Exit 0 printed, 1 the log is
 * corrupt or unreadable (the reason on stderr), 2 usage.
 */
#include "agent/journal/intentlog.h"
#include "lib/fileio.h"
#include "lib/util.h"

int main(int argc, char **argv)
{
	_cleanup_free_ char *path = NULL, *data = NULL, *out = NULL;
	char err[512] = "";
	json_t *state = NULL;
	size_t len;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: journal_dump STATE_DIR\n");
		return 2;
	}
	if (asprintf(&path, "%s/journal.log", argv[1]) < 0)
		return 1;
	r = file_read_all(path, 1u << 30, &data, &len);
	if (r < 0) {
		fprintf(stderr, "journal_dump: %s: %s\n", path, strerror(-r));
		return 1;
	}
	r = intentlog_replay_image(data, len, &state, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "journal_dump: %s: %s\n", path, err[0] ? err : strerror(-r));
		return 1;
	}
	out = json_dumps(state, JSON_COMPACT);
	json_decref(state);
	if (!out)
		return 1;
	puts(out);
	return 0;
}
