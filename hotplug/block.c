/* SPDX-License-Identifier: MIT */
#include "hotplug/block.h"
#include "hotplug/words.h"
#include "lib/util.h"

const char *mem_state_name(enum mem_state s)
{
	switch (s) {
	case MEM_STATE_OFFLINE: return "offline";
	case MEM_STATE_ONLINE: return "online";
	case MEM_STATE_GOING_OFFLINE: return "going-offline";
	default: return "unknown";
	}
}

int mem_state_parse(const char *s, enum mem_state *out)
{
	if (streq(s, "online"))
		*out = MEM_STATE_ONLINE;
	else if (streq(s, "offline"))
		*out = MEM_STATE_OFFLINE;
	else if (streq(s, "going-offline"))
		*out = MEM_STATE_GOING_OFFLINE;
	else
		return -EINVAL;
	return 0;
}

const char *online_type_word(enum online_type t)
{
	switch (t) {
	case ONLINE_KERNEL: return "online_kernel";
	case ONLINE_MOVABLE: return "online_movable";
	default: return "online";
	}
}

const char *const mem_zone_words[] = { "auto", "movable", "normal", NULL };
const char *const mem_auto_online_words[] = { "offline", "online", "online_kernel", "online_movable", NULL };

static int word_index(const char *const *words, const char *s)
{
	for (int i = 0; words[i]; i++)
		if (streq(words[i], s))
			return i;
	return -EINVAL;
}

const char *mem_zone_name(enum mem_zone z)
{
	return (unsigned)z <= MEM_ZONE_NORMAL ? mem_zone_words[z] : "?";
}

int mem_zone_parse(const char *s, enum mem_zone *out)
{
	int i = word_index(mem_zone_words, s);

	if (i < 0)
		return i;
	*out = (enum mem_zone)i;
	return 0;
}

const char *mem_auto_online_name(enum mem_auto_online a)
{
	return (unsigned)a <= MEM_AUTO_ONLINE_MOVABLE ? mem_auto_online_words[a] : "?";
}

int mem_auto_online_parse(const char *s, enum mem_auto_online *out)
{
	int i = word_index(mem_auto_online_words, s);

	if (i < 0)
		return i;
	*out = (enum mem_auto_online)i;
	return 0;
}

enum mem_zone mem_block_zone(const struct mem_block *b)
{
	return mem_zones_first(b->zones) == MEM_ZONE_MOVABLE ? MEM_ZONE_MOVABLE : MEM_ZONE_NORMAL;
}

mem_zones mem_zones_parse(const char *text)
{
	mem_zones z = 0;
	unsigned k = 0;

	for (const char *p = text; *p && k < MEM_ZONES_MAX;) {
		size_t n;

		p += strspn(p, " \t\n");
		n = strcspn(p, " \t\n");
		if (!n)
			break;
		z |= (mem_zones)words_zone_kernel_parse(p, n) << (4 * k++);
		p += n;
	}
	return z;
}

char *mem_zones_format(mem_zones z, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	for (; z && at < len; z >>= 4) {
		int w = snprintf(buf + at, len - at, "%s%s", at ? " " : "",
				 words_zone_kernel_name((enum mem_zone)(z & 0xf)));

		if (w < 0 || (size_t)w >= len - at) {
			buf[at] = '\0'; /* whole words only */
			break;
		}
		at += (size_t)w;
	}
	return buf;
}

enum online_type mem_zone_online_type(enum mem_zone z)
{
	return z == MEM_ZONE_MOVABLE ? ONLINE_MOVABLE : z == MEM_ZONE_NORMAL ? ONLINE_KERNEL : ONLINE_DEFAULT;
}

struct mem_table *mem_table_new(uint64_t block_size)
{
	struct mem_table *t = calloc(1, sizeof(*t));

	if (t)
		t->block_size = block_size;
	return t;
}

void mem_table_free(struct mem_table *t)
{
	if (!t)
		return;
	free(t->blocks);
	free(t);
}

struct mem_block *mem_table_add(struct mem_table *t, uint64_t id)
{
	struct mem_block *b;

	/* ids come checked (hp_parse_block_name, blockjson, SIM_MAX_BLOCKS):
	 * never cut one short */
	if (id > MEM_BLOCK_ID_MAX)
		return NULL;
	if ((t->n & (t->n - 1)) == 0) { /* grow at powers of two */
		size_t cap = t->n ? t->n * 2 : 16;
		struct mem_block *nb = reallocarray(t->blocks, cap, sizeof(*nb));
		if (!nb)
			return NULL;
		t->blocks = nb;
	}
	b = &t->blocks[t->n++];
	memset(b, 0, sizeof(*b));
	b->id = id;
	b->memmap_on_memory = -1;
	b->removable = -1;
	b->node = -1;
	b->state = MEM_STATE_OFFLINE;
	return b;
}

static int cmp_block(const void *a, const void *b)
{
	const struct mem_block *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

void mem_table_sort(struct mem_table *t)
{
	size_t i = 1;

	/* tables mostly come in order (discovery, the daemon's runs): one pass
	 * instead of qsort's n log n comparisons and moves of 16-byte rows */
	while (i < t->n && t->blocks[i - 1].id < t->blocks[i].id)
		i++;
	if (i < t->n)
		qsort(t->blocks, t->n, sizeof(*t->blocks), cmp_block);
}

/* The index of the first of the N sorted BLOCKS whose id is at least ID (N if none). */
static size_t lower_bound(const struct mem_block *blocks, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (blocks[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct mem_block *mem_blocks_search(struct mem_block *blocks, size_t n, uint64_t id)
{
	size_t i = lower_bound(blocks, n, id);

	return i < n && blocks[i].id == id ? &blocks[i] : NULL;
}

size_t mem_table_lower_bound(const struct mem_table *t, uint64_t id)
{
	return lower_bound(t->blocks, t->n, id);
}

struct mem_block *mem_table_find(const struct mem_table *t, uint64_t id)
{
	return mem_blocks_search(t->blocks, t->n, id);
}
