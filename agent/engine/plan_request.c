/* SPDX-License-Identifier: MIT */
/*
 * From a message to the planner's request: the translation admission (the
 * precheck) and the executor (the run) both make, here once so that neither
 * depends on the other.  See plan_request.h.
 */
#include "agent/engine/plan_request.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"
#include "agent/engine/engine_impl.h"

/* Ownership list for the planner (the journal and the running operation's
 * open intent, machine.h); called with e->lock held. */
int owned_list_locked(struct engine *e, struct owned_block **out, size_t *n)
{
	_cleanup_free_ struct intentlog_block *jb = NULL;
	struct owned_block *ob;
	size_t k = 0;
	int r = machine_owned_blocks_locked(e, &jb, &k);

	if (r < 0)
		return r;
	ob = calloc(k + 1, sizeof(*ob));
	if (!ob)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		ob[i].id = jb[i].block;
		ob[i].seq = jb[i].seq;
		ob[i].zone = jb[i].zone;
		snprintf(ob[i].grant_id, sizeof(ob[i].grant_id), "%s", jb[i].grant_id);
	}
	*out = ob;
	*n = k;
	return 0;
}

void fill_grant_request(const struct msg *m, struct grant_request *req)
{
	memset(req, 0, sizeof(*req));
	switch (m->target) {
	case MSG_BY_BLOCKS:
		req->by = GRANT_BY_BLOCKS;
		req->ids = m->blocks;
		req->n_ids = m->n_blocks;
		break;
	case MSG_BY_RANGES:
		req->by = GRANT_BY_RANGES;
		req->ranges = (const char *const *)m->ranges;
		req->n_ranges = m->n_ranges;
		break;
	default:
		req->by = GRANT_BY_SIZE;
		req->size = m->size;
		break;
	}
	req->source = PLAN_SOURCE_AUTO;
}

void fill_revoke_request(const struct msg *m, struct revoke_request *req)
{
	memset(req, 0, sizeof(*req));
	switch (m->target) {
	case MSG_BY_BLOCKS:
		req->by = REVOKE_BY_BLOCKS;
		req->ids = m->blocks;
		req->n_ids = m->n_blocks;
		break;
	case MSG_BY_GRANT:
		req->by = REVOKE_BY_GRANT;
		req->grant_id = m->grant;
		break;
	default:
		req->by = REVOKE_BY_SIZE;
		req->size = m->size;
		break;
	}
}

/* The explicit block ids of a grant by blocks or ranges (ranges expanded). */
int explicit_ids(const struct msg *m, uint64_t block_size, uint64_t **out, size_t *n)
{
	_cleanup_free_ uint64_t *ids = NULL;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	if (m->target == MSG_BY_BLOCKS) {
		ids = calloc(m->n_blocks + 1, sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		memcpy(ids, m->blocks, m->n_blocks * sizeof(*ids));
		k = m->n_blocks;
	} else if (m->target == MSG_BY_RANGES) {
		for (size_t i = 0; i < m->n_ranges; i++) {
			uint64_t first, last;
			char why[128];
			uint64_t *more;
			if (plan_parse_range(m->ranges[i], block_size, &first, &last, why, sizeof(why)) < 0)
				return -EINVAL;
			if (last - first >= (1u << 20))
				return -E2BIG;
			more = reallocarray(ids, k + (size_t)(last - first) + 2, sizeof(*ids));
			if (!more)
				return -ENOMEM;
			ids = more;
			for (uint64_t b = first; b <= last; b++)
				ids[k++] = b;
		}
	}
	*out = TAKE_PTR(ids);
	*n = k;
	return 0;
}
