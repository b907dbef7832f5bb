/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the sysfs attributes discovery reads
 * (hotplug/sysfs/discover.c through hp_discover_table()): the input, cut at 0xff
 * bytes, becomes block_size_bytes, then memory0's state, valid_zones,
 * removable, phys_index and memmap_on_memory (memory1 stays a good offline
 * block) in a sysfs-shaped tree under /tmp (never the real /sys); a missing piece
 * keeps a good value.  Whatever the bytes: no crash, no leak; discovery
 * either fails with a negative errno and a message naming the file, or
 * returns a table whose blocks have the tree's block size.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: hotplug/sysfs/discover.c hotplug/sysfs/path.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotplug/block.h"
#include "hotplug/sysfs/discover.h"
#include "hotplug/sysfs/path.h"

static char root[64], dev[128];

static void put(const char *rel, const char *val, size_t n)
{
	char path[320];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dev, rel);
	f = fopen(path, "we");
	if (!f)
		return;
	fwrite(val, 1, n, f);
	fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char d[2 * sizeof(dev) + 32];

	(void)argc;
	(void)argv;
	snprintf(root, sizeof(root), "/tmp/fuzz-discover.%d", (int)getpid());
	snprintf(dev, sizeof(dev), "%s/sys/devices/system/memory", root);
	snprintf(d, sizeof(d), "mkdir -p %s/memory0 %s/memory1", dev, dev);
	if (system(d) != 0)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const files[] = { "block_size_bytes", "memory0/state", "memory0/valid_zones",
					     "memory0/removable", "memory0/phys_index", "memory0/memmap_on_memory" };
	static const char *const good[] = { "8000000\n", "online\n", "Normal Movable\n", "1\n", "00000000\n", "1\n" };
	struct hp_path *p = NULL;
	struct mem_table *t = NULL;
	const char *at = (const char *)data, *end = at + size;
	char err[512] = "";
	int r;

	put("memory1/state", "offline\n", 8);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		const char *cut = at < end ? memchr(at, 0xff, (size_t)(end - at)) : NULL;
		if (at < end) {
			size_t n = cut ? (size_t)(cut - at) : (size_t)(end - at);
			put(files[i], at, n);
			at = cut ? cut + 1 : end;
		} else {
			put(files[i], good[i], strlen(good[i]));
		}
	}
	if (hp_path_open(root, &p) < 0)
		abort();
	r = hp_discover_table(p, false, &t, err, sizeof(err));
	if (r < 0 && (t || !err[0]))
		abort();
	if (r == 0) {
		if (!t || t->block_size == 0 || (t->block_size & (t->block_size - 1)))
			abort();
		mem_table_free(t);
	}
	hp_path_free(p);
	return 0;
}
