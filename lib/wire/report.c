/* SPDX-License-Identifier: MIT */
/*
 * The typed status report's memory.  See report.h.
 */
#include "lib/wire/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void report_clear(struct report *r)
{
	free(r->blocks);
	for (size_t i = 0; i < r->n_decisions; i++)
		free(r->decisions[i]);
	free(r->decisions);
	free(r->busy);
	memset(r, 0, sizeof(*r));
}

int report_copy(struct report *dst, const struct report *src)
{
	*dst = *src;
	dst->blocks = NULL;
	dst->decisions = NULL;
	dst->busy = NULL;
	dst->n_blocks = dst->n_decisions = dst->n_busy = 0;
	if (src->n_blocks) {
		dst->blocks = malloc(src->n_blocks * sizeof(*dst->blocks));
		if (!dst->blocks)
			goto nomem;
		memcpy(dst->blocks, src->blocks, src->n_blocks * sizeof(*dst->blocks));
		dst->n_blocks = src->n_blocks;
	}
	if (src->n_busy) {
		dst->busy = malloc(src->n_busy * sizeof(*dst->busy));
		if (!dst->busy)
			goto nomem;
		memcpy(dst->busy, src->busy, src->n_busy * sizeof(*dst->busy));
		dst->n_busy = src->n_busy;
	}
	for (size_t i = 0; i < src->n_decisions; i++)
		if (report_add_decision(dst, src->decisions[i]) < 0)
			goto nomem;
	return 0;
nomem:
	report_clear(dst);
	return -ENOMEM;
}

const struct report_block *report_find_block(const struct report *r, uint64_t block)
{
	for (size_t i = 0; i < r->n_blocks; i++)
		if (r->blocks[i].block == block)
			return &r->blocks[i];
	return NULL;
}

int report_add_decision(struct report *r, const char *text)
{
	char **nd = reallocarray(r->decisions, r->n_decisions + 1, sizeof(*nd));
	char *s;

	if (!nd)
		return -ENOMEM;
	r->decisions = nd;
	s = strdup(text ? text : "");
	if (!s)
		return -ENOMEM;
	r->decisions[r->n_decisions++] = s;
	return 0;
}

struct report *report_dup(const struct report *src)
{
	struct report *r = malloc(sizeof(*r));

	if (r && report_copy(r, src) < 0) {
		free(r);
		return NULL;
	}
	return r;
}

void report_free(struct report *r)
{
	if (!r)
		return;
	report_clear(r);
	free(r);
}
