/* SPDX-License-Identifier: MIT */
/*
 * Block id -> value map.  See idmap.h.
 */
#include "lib/idmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY UINT64_MAX

static size_t slot_of(const struct idmap *m, uint64_t key)
{
	/* Fibonacci hashing: consecutive block ids spread over the table */
	return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (m->cap - 1);
}

static int grow(struct idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	uint64_t *keys = malloc(cap * sizeof(*keys)), *vals = malloc(cap * sizeof(*vals));
	struct idmap next = { .keys = keys, .vals = vals, .cap = cap };

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	memset(keys, 0xff, cap * sizeof(*keys));
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i] != EMPTY)
			(void)idmap_put(&next, m->keys[i], m->vals[i]); /* fits: no growth */
	free(m->keys);
	free(m->vals);
	*m = next;
	return 0;
}

int idmap_put(struct idmap *m, uint64_t key, uint64_t val)
{
	size_t i;

	if (key == EMPTY)
		return -EINVAL;
	if ((m->n + 1) * 2 > m->cap) {
		int r = grow(m);
		if (r < 0)
			return r;
	}
	for (i = slot_of(m, key); m->keys[i] != EMPTY; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
	return 0;
}

static size_t find(const struct idmap *m, uint64_t key)
{
	if (!m->cap || key == EMPTY)
		return SIZE_MAX;
	for (size_t i = slot_of(m, key); m->keys[i] != EMPTY; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key)
			return i;
	return SIZE_MAX;
}

bool idmap_get(const struct idmap *m, uint64_t key, uint64_t *val)
{
	size_t i = find(m, key);

	if (i == SIZE_MAX)
		return false;
	if (val)
		*val = m->vals[i];
	return true;
}

bool idmap_del(struct idmap *m, uint64_t key)
{
	size_t i = find(m, key), j;

	if (i == SIZE_MAX)
		return false;
	/* backward shift: move up each later entry of the run whose home slot
	 * is not between the hole and it, so no probe sequence is cut */
	for (j = (i + 1) & (m->cap - 1); m->keys[j] != EMPTY; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m, m->keys[j]);
		if (((j - home) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = EMPTY;
	m->n--;
	return true;
}

void idmap_clear(struct idmap *m)
{
	if (m->cap)
		memset(m->keys, 0xff, m->cap * sizeof(*m->keys));
	m->n = 0;
}

void idmap_free(struct idmap *m)
{
	free(m->keys);
	free(m->vals);
	*m = (struct idmap){ 0 };
}
