/* SPDX-License-Identifier: MIT */
/*
 * Runs a libFuzzer harness (tests/fuzz/fuzz_NAME.c) over files, without
 * libFuzzer: each file given, or each file of each folder given, is one
 * input to LLVMFuzzerTestOneInput(), in name order.  make check builds one
 * per harness as build/tests/fuzz/replay_NAME and tests/fuzz_corpus.sh feeds
 * it the seed corpus, so a parser that crashes or breaks a harness's
 * invariant on a seed fails there, not only in CI's fuzz step.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/fileio.h"
#include "lib/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define REPLAY_INPUT_MAX (1u << 20)

static int replay_file(const char *path, size_t *n)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r = file_read_all(path, REPLAY_INPUT_MAX, &buf, &len);

	if (r < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(-r));
		return r;
	}
	fprintf(stderr, "replay: %s\n", path); /* the last one named is the one that crashed */
	LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
	(*n)++;
	return 0;
}

static int only_files(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

int main(int argc, char **argv)
{
	size_t n = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent **ents = NULL;
		int m;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (replay_file(argv[i], &n) < 0)
				return 1;
			continue;
		}
		m = scandir(argv[i], &ents, only_files, alphasort);
		if (m < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		for (int k = 0; k < m; k++) {
			_cleanup_free_ char *p = NULL;
			int r = asprintf(&p, "%s/%s", argv[i], ents[k]->d_name) < 0 ? -ENOMEM : replay_file(p, &n);
			free(ents[k]);
			if (r < 0) {
				for (k++; k < m; k++)
					free(ents[k]);
				free(ents);
				return 1;
			}
		}
		free(ents);
	}
	printf("replay: %zu inputs, no crash\n", n);
	return 0;
}
