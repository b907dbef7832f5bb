/* SPDX-License-Identifier: MIT */
/*
 * A map from block ids (uint64_t, any value but UINT64_MAX) to a uint64_t:
 * open addressing with linear probing, deletion by backward shift (no
 * tombstones), grown at 1/2 load.  O(1) expected per operation, so that a
 * look-up per block costs the same on 100 blocks and on 262,144.
 * A zeroed struct idmap is an empty map.  Not thread-safe.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct idmap {
	uint64_t *keys; /* UINT64_MAX: empty slot */
	uint64_t *vals;
	size_t cap;     /* a power of two, or 0 */
	size_t n;
};

/* KEY maps to VAL from now on (replacing what it mapped to); -ENOMEM, or
 * -EINVAL for KEY UINT64_MAX. */
int idmap_put(struct idmap *m, uint64_t key, uint64_t val);
/* Whether KEY is mapped; its value in *VAL when so (VAL may be NULL). */
bool idmap_get(const struct idmap *m, uint64_t key, uint64_t *val);
/* KEY is no longer mapped; true when it was. */
bool idmap_del(struct idmap *m, uint64_t key);
/* Empties M, keeping its memory. */
void idmap_clear(struct idmap *m);
void idmap_free(struct idmap *m);
