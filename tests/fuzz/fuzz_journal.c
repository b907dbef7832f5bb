/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the journal log reader and replay (agent/journal/recordlog.h,
 * agent/journal/intentlog.h): whatever the bytes, no crash, no leak, and
 *   - recordlog_scan() answers 0 or -EBADMSG; on 0 the kept part ends inside
 *     the image, after the magic, and scanning just the kept part finds the
 *     same records and no torn tail;
 *   - intentlog_replay_image() answers 0, -EBADMSG or -ENOMEM; a failure
 *     says why in one printable line;
 *   - a replayed state written back as one snapshot record replays to the
 *     same state (what compaction relies on).
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: agent/journal/intentlog.c agent/journal/replay.c agent/journal/history.c agent/journal/readers.c agent/journal/recordlog.c lib/wire/message.c lib/wire/report.c lib/wire/report_json.c lib/wire/report_runs.c lib/crc32c.c lib/idmap.c
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/journal/intentlog.h"
#include "agent/journal/recordlog.h"

static void check_message(const char *err)
{
	if (!err[0])
		abort();
	for (const char *c = err; *c; c++)
		if (!isprint((unsigned char)*c))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recordlog_scan scan, again;
	char err[512] = "";
	json_t *state = NULL, *back = NULL;
	int r;

	r = recordlog_scan(data, size, NULL, NULL, &scan, err, sizeof(err));
	if (r != 0 && r != -EBADMSG)
		abort();
	if (r < 0) {
		check_message(err);
	} else {
		if (scan.valid_end > size || scan.valid_end < RECORDLOG_FILE_MAGIC_LEN)
			abort();
		if (scan.torn != (scan.valid_end < size))
			abort();
		if (recordlog_scan(data, (size_t)scan.valid_end, NULL, NULL, &again, err, sizeof(err)) != 0 ||
		    again.torn || again.records != scan.records)
			abort();
	}

	err[0] = '\0';
	r = intentlog_replay_image(data, size, &state, err, sizeof(err));
	if (r != 0 && r != -EBADMSG && r != -ENOMEM)
		abort();
	if (r < 0) {
		if (r == -EBADMSG)
			check_message(err);
		return 0;
	}
	{
		char *payload = json_dumps(state, JSON_COMPACT);
		struct recordlog_rec rec = { .type = ILOG_REC_SNAPSHOT, .data = payload, .len = payload ? strlen(payload) : 0 };
		void *img = NULL;
		size_t len = 0;
		uint8_t *file;

		if (payload && recordlog_encode(&rec, 1, &img, &len) == 0) {
			file = malloc(RECORDLOG_FILE_MAGIC_LEN + len);
			if (file) {
				memcpy(file, RECORDLOG_FILE_MAGIC, RECORDLOG_FILE_MAGIC_LEN);
				memcpy(file + RECORDLOG_FILE_MAGIC_LEN, img, len);
				if (intentlog_replay_image(file, RECORDLOG_FILE_MAGIC_LEN + len, &back, err, sizeof(err)) != 0 ||
				    !json_equal(state, back))
					abort();
				json_decref(back);
				free(file);
			}
			free(img);
		}
		free(payload);
	}
	json_decref(state);
	return 0;
}
