/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the one-time migration of the earlier journal
 * (STATE_DIR/journal.json + step.json, agent/intentlog_migrate.c): the input
 * is journal.json, and when it holds the line "--step.json--" what follows
 * that line is step.json (otherwise there is none).  Both are written to a
 * directory under /tmp for ilog_load_old(), which reads them from there.
 * Whatever the bytes: no crash, no leak; ilog_load_old() answers 0 or a
 * negative errno with a reason naming the file; a state it accepts, written
 * as the snapshot memgrantd then writes (journal.log), replays to the same
 * state (the next start reads it).
 * Built by tests/fuzz/build.sh; not part of make check.
 * Sources: agent/intentlog.c agent/intentlog_replay.c agent/intentlog_migrate.c agent/recordlog.c agent/message.c lib/crc32c.c
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/intentlog.h"
#include "agent/intentlog_impl.h"
#include "agent/recordlog.h"

#define SEP "\n--step.json--\n"

static char dir[64];

static void cleanup(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/journal.json", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/step.json", dir);
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/fuzz-journal-old.%d", (int)getpid());
	mkdir(dir, 0700);
	atexit(cleanup);
	return 0;
}

static void put(const char *name, const uint8_t *data, size_t size)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct intentlog il = { .dir = dir, .dir_fd = -1, .lock_fd = -1 };
	const uint8_t *sep = memmem(data, size, SEP, strlen(SEP));
	char path[128], err[512] = "";
	json_t *root = NULL, *back = NULL;
	int r;

	snprintf(path, sizeof(path), "%s/step.json", dir);
	unlink(path);
	if (sep) {
		put("journal.json", data, (size_t)(sep - data));
		put("step.json", sep + strlen(SEP), size - (size_t)(sep - data) - strlen(SEP));
	} else {
		put("journal.json", data, size);
	}
	r = ilog_load_old(&il, &root, err, sizeof(err));
	if (r < 0) {
		if (r != -EBADMSG && r != -ENOMEM && r != -EINVAL && r != -ERANGE)
			abort();
		if (!strstr(err, "journal.json") && !strstr(err, "step.json"))
			abort(); /* the reason names the file */
		return 0;
	}
	{
		char *payload = json_dumps(root, JSON_COMPACT);
		struct recordlog_rec rec = { .type = ILOG_REC_SNAPSHOT, .data = payload, .len = payload ? strlen(payload) : 0 };
		void *img = NULL;
		size_t len = 0;
		uint8_t *file;

		if (payload && recordlog_encode(&rec, 1, &img, &len) == 0) {
			file = malloc(RECORDLOG_FILE_MAGIC_LEN + len);
			if (file) {
				memcpy(file, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN);
				memcpy(file + RECORDLOG_FILE_MAGIC_LEN, img, len);
				err[0] = '\0';
				r = intentlog_replay_image(file, RECORDLOG_FILE_MAGIC_LEN + len, &back, err, sizeof(err));
				if (r == -ENOMEM) {
					back = NULL;
				} else if (r != 0 || !json_equal(root, back)) {
					fprintf(stderr, "migrated state does not replay: %s\n", err);
					abort();
				}
				json_decref(back);
				free(file);
			}
			free(img);
		}
		free(payload);
	}
	json_decref(root);
	return 0;
}
