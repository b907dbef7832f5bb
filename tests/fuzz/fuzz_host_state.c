/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for memgrant-host's state file (STATE_DIR/DOMAIN.json,
 * providers/host/host_state.c): the input is the file.  Whatever the bytes:
 * no crash, no leak; reading the last generation either fails with a
 * negative errno and a reason, or yields a generation of at most 2^53, and
 * the next generation is above both it and the agent's.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/host/host_state.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/wire/message.h"
#include "providers/host/host.h"

static char dir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/fuzz-host-state.%d", (int)getpid());
	mkdir(dir, 0700);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[128], why[512] = "";
	uint64_t last = 0, next = 0;
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/guest.json", dir);
	f = fopen(path, "we");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	r = host_state_last_generation(dir, "guest", &last, why, sizeof(why));
	if (r < 0 && !why[0])
		abort();
	if (r == 0 && last > MSG_GENERATION_MAX)
		abort();
	why[0] = '\0';
	r = host_state_next_generation(dir, "guest", 5, &next, why, sizeof(why));
	if (r < 0 && !why[0])
		abort();
	if (r == 0 && (next <= 5 || next > MSG_GENERATION_MAX))
		abort();
	return 0;
}
