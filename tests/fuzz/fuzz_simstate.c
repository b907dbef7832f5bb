/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness for the sim's state files (hotplug/sim/sim_impl.h): the
 * input is given to each of the four parsers of what lies in the state
 * directory, as the readers do with a file's bytes:
 *   - the descriptor FILE (sim_settings_parse): 0 or a negative errno with
 *     a reason naming the file; what it accepts obeys the limits (block
 *     size, block counts, absolute paths, every format 1 block consistent)
 *     and, written back by sim_settings_format, parses to the same settings;
 *   - a records file blocks.K (sim_chunk_parse; the chunk and the block
 *     count are taken from the input's header when it names a sane one,
 *     with and without firmware entries): 0 or -EINVAL with a reason; what
 *     it accepts is consistent block by block and is exactly the bytes
 *     sim_chunk_format writes for it;
 *   - the summary (sim_summary_parse): 0 or -EINVAL; what it accepts is
 *     read back the same after sim_summary_format;
 *   - the in-flight marker in FILE.lock (sim_marker_parse): never fails,
 *     "full" and an id never together, and read back the same after
 *     sim_marker_format.
 * No crash, no leak whatever the bytes.
 * Built by tests/fuzz/build.sh; make check replays its seeds (tests/fuzz_corpus.sh).
 * Sources: hotplug/sim/state.c hotplug/sim/fs.c
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotplug/sim/sim.h"
#include "hotplug/sim/sim_impl.h"

static void check_err(int r, const char *err, const char *path)
{
	if (r >= 0)
		return;
	if (strncmp(err, path, strlen(path)) != 0 || !err[strlen(path)])
		abort();
}

static void check_block(const struct sim_settings *s, const struct sim_block *b)
{
	if (b->state != MEM_STATE_OFFLINE && b->state != MEM_STATE_ONLINE && b->state != MEM_STATE_GOING_OFFLINE)
		abort();
	if ((unsigned)b->zone >= MEM_ZONE_COUNT)
		abort();
	if (b->state != MEM_STATE_OFFLINE && (!b->configured || b->zone == MEM_ZONE_NONE))
		abort();
	if (!s->has_firmware && !b->configured)
		abort();
}

static void check_summary(const struct sim_block *all, uint64_t n)
{
	struct sim_summary sum;

	sim_summary_compute(all, n, &sum);
	if (sum.online_mm + sum.online_nomm > n || sum.conf_nomm > n)
		abort();
	for (int z = 0; z < MEM_ZONE_COUNT; z++)
		if (sum.sp.lo[z] < sum.sp.hi[z] && sum.sp.hi[z] > n)
			abort();
}

static bool ids_eq(const struct id_list *a, const struct id_list *b)
{
	return a->n == b->n && (a->n == 0 || memcmp(a->ids, b->ids, a->n * sizeof(*a->ids)) == 0);
}

static bool settings_eq(const struct sim_settings *a, const struct sim_settings *b)
{
	return a->block_size == b->block_size && a->n_blocks == b->n_blocks && a->boot_blocks == b->boot_blocks &&
	       a->used_bytes == b->used_bytes && a->memmap_supported == b->memmap_supported &&
	       a->has_firmware == b->has_firmware && a->refuse_memmap_eopnotsupp == b->refuse_memmap_eopnotsupp &&
	       !strcmp(a->auto_online, b->auto_online) && !strcmp(a->tree, b->tree) && a->dir && b->dir &&
	       !strcmp(a->dir, b->dir) && ids_eq(&a->configure_eio, &b->configure_eio) &&
	       ids_eq(&a->offline_ebusy, &b->offline_ebusy) && ids_eq(&a->online_enomem, &b->online_enomem) &&
	       a->latency_ms == b->latency_ms;
}

static void fuzz_descriptor(const uint8_t *data, size_t size)
{
	struct sim_settings *s = NULL, *again = NULL;
	char err[512] = "", *text;
	int r;

	r = sim_settings_parse((const char *)data, size, "sim.json", &s, err, sizeof(err));
	if (r != 0 && r != -EBADMSG && r != -EINVAL && r != -ENOMEM)
		abort();
	check_err(r, err, "sim.json");
	if (r < 0)
		return;
	if (!sim_valid_block_size(s->block_size) || s->boot_blocks == 0 || s->n_blocks < s->boot_blocks ||
	    s->n_blocks > SIM_MAX_BLOCKS || s->n_blocks > UINT64_MAX / s->block_size || s->tree[0] != '/' ||
	    !sim_is_auto_online_word(s->auto_online) || (s->dir == NULL) == (s->v1_blocks == NULL) ||
	    (s->dir && s->dir[0] != '/'))
		abort();
	if (s->v1_blocks) { /* format 1: converted, with a state directory, on open */
		for (uint64_t i = 0; i < s->n_blocks; i++)
			check_block(s, &s->v1_blocks[i]);
		check_summary(s->v1_blocks, s->n_blocks);
		s->dir = strdup("/fuzz/sim.json.d/s.x");
		if (!s->dir)
			abort();
	}
	text = sim_settings_format(s);
	if (text) {
		r = sim_settings_parse(text, strlen(text), "again", &again, err, sizeof(err));
		if (r == -ENOMEM) {
			free(text);
			sim_settings_free(s);
			return;
		}
		if (r != 0 || again->v1_blocks || !settings_eq(s, again))
			abort();
		sim_settings_free(again);
		free(text);
	}
	sim_settings_free(s);
}

static void fuzz_chunk(const uint8_t *data, size_t size)
{
	struct sim_settings s = { .block_size = 128u << 20, .n_blocks = 300, .boot_blocks = 1 };
	struct sim_block out[SIM_CHUNK];
	char head[64] = "", err[512], back[SIM_CHUNK_FILE_MAX];
	unsigned long long first, last;
	uint64_t k = 0;
	int r;

	/* the chunk the header claims, when it is one a sim could have */
	memcpy(head, data, size < sizeof(head) - 1 ? size : sizeof(head) - 1);
	if (sscanf(head, "# blocks %llu-%llu", &first, &last) == 2 && first % SIM_CHUNK == 0 && last >= first &&
	    last - first < SIM_CHUNK && last < SIM_MAX_BLOCKS) {
		s.n_blocks = last + 1;
		k = first / SIM_CHUNK;
	}
	for (int fw = 0; fw < 2; fw++) {
		s.has_firmware = fw;
		err[0] = '\0';
		r = sim_chunk_parse(&s, k, (const char *)data, size, "blocks", out, err, sizeof(err));
		if (r != 0 && r != -EINVAL)
			abort();
		check_err(r, err, "blocks");
		if (r < 0)
			continue;
		uint64_t n = s.n_blocks - k * SIM_CHUNK < SIM_CHUNK ? s.n_blocks - k * SIM_CHUNK : SIM_CHUNK;

		for (uint64_t i = 0; i < n; i++)
			check_block(&s, &out[i]);
		check_summary(out, n);
		if (sim_chunk_format(&s, k, out, back) != size || memcmp(back, data, size) != 0)
			abort();
	}
	/* past the last chunk: refused, not read */
	if (sim_chunk_parse(&s, sim_n_chunks(&s), (const char *)data, size, "blocks", out, err, sizeof(err)) !=
	    -EINVAL)
		abort();
}

static void fuzz_summary(const uint8_t *data, size_t size)
{
	struct sim_settings s = { .block_size = 128u << 20, .n_blocks = 32 };
	struct sim_summary sum, again;
	char text[SIM_SUMMARY_MAX + 1], *p = text, *end;
	size_t len = size < SIM_SUMMARY_MAX ? size : SIM_SUMMARY_MAX;
	uint64_t v = 0;
	int i;

	/* the block count it names, if it names one */
	memcpy(text, data, len);
	text[len] = '\0';
	for (i = 0; i < 10; i++, p = end) {
		v = strtoull(p, &end, 10);
		if (end == p)
			break;
	}
	if (i == 10)
		s.n_blocks = v;
	if (sim_summary_parse(&s, (const char *)data, size, &sum) < 0)
		return;
	if (sum.sp.lo[MEM_ZONE_NONE] != UINT64_MAX || sum.sp.hi[MEM_ZONE_NONE] != 0)
		abort();
	len = sim_summary_format(&s, &sum, text);
	if (len > SIM_SUMMARY_MAX || sim_summary_parse(&s, text, len, &again) != 0 ||
	    memcmp(&sum.sp, &again.sp, sizeof(sum.sp)) != 0 || sum.online_mm != again.online_mm ||
	    sum.online_nomm != again.online_nomm || sum.conf_nomm != again.conf_nomm)
		abort();
}

static void fuzz_marker(const uint8_t *data, size_t size)
{
	struct sim_marker m, again;
	char buf[SIM_MARKER_LEN];

	sim_marker_parse((const char *)data, size, &m);
	if ((!m.dirty && (m.full || m.has_id)) || (m.full && m.has_id))
		abort();
	sim_marker_format(&m, buf);
	sim_marker_parse(buf, sizeof(buf), &again);
	if (again.dirty != m.dirty || again.full != m.full || again.has_id != m.has_id || again.id != m.id)
		abort();
	if (m.dirty && !m.full && memcmp(&m.sp, &again.sp, sizeof(m.sp)) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_descriptor(data, size);
	fuzz_chunk(data, size);
	fuzz_summary(data, size);
	fuzz_marker(data, size);
	return 0;
}
