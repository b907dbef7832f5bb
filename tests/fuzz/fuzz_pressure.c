/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the pressure monitor's inputs: a PSI file
 * (/proc/pressure/memory, pressure_parse_psi()), /proc/vmstat's OOM kill
 * count (pressure_parse_oom_kills()) and /proc/meminfo
 * (policy_read_meminfo(), read from a temporary root).  Whatever the bytes:
 * no crash, no leak; a PSI parse either fails with a negative errno or
 * yields a percentage of at most 100.00; the OOM count parses or fails with
 * -ENOENT/-EBADMSG; meminfo is read without a crash.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: providers/pressure_psi.c hotplug/policy.c
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotplug/policy.h"
#include "providers/pressure.h"

static char root[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char proc[96];

	(void)argc;
	(void)argv;
	snprintf(root, sizeof(root), "/tmp/fuzz-pressure.%d", (int)getpid());
	snprintf(proc, sizeof(proc), "%s/proc", root);
	mkdir(root, 0700);
	mkdir(proc, 0700);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), path[128];
	uint64_t total = 0, avail = 0, kills = 0;
	unsigned centi = 0;
	int r;
	FILE *f;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (int kind = 0; kind < 2; kind++)
		for (unsigned w = 10; w <= 300; w = w == 10 ? 60 : w == 60 ? 300 : 301)
			if (pressure_parse_psi(text, (enum mg_psi_kind)kind, w, &centi) == 0 && centi > 10000)
				abort();
	r = pressure_parse_oom_kills(text, &kills);
	if (r != 0 && r != -ENOENT && r != -EBADMSG)
		abort();
	free(text);

	snprintf(path, sizeof(path), "%s/proc/meminfo", root);
	f = fopen(path, "we");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	(void)policy_read_meminfo(root, &total, &avail);
	return 0;
}
