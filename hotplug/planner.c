/* SPDX-License-Identifier: MIT */
#include "hotplug/planner.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>

#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

static int cmp_owned_ptr_id(const void *a, const void *b)
{
	const struct owned_block *x = *(const struct owned_block *const *)a;
	const struct owned_block *y = *(const struct owned_block *const *)b;

	return (x->id > y->id) - (x->id < y->id);
}

/* Revocation order: movable first, newest first, then higher id first so
 * the order is total and does not depend on the caller's list order. */
static int cmp_owned_ptr_revoke(const void *a, const void *b)
{
	const struct owned_block *x = *(const struct owned_block *const *)a;
	const struct owned_block *y = *(const struct owned_block *const *)b;
	int xm = x->zone == MEM_ZONE_MOVABLE, ym = y->zone == MEM_ZONE_MOVABLE;

	if (xm != ym)
		return ym - xm;
	if (x->seq != y->seq)
		return x->seq < y->seq ? 1 : -1;
	return (x->id < y->id) - (x->id > y->id);
}

/* Owned blocks sorted by id, for lookups in O(log n). */
struct owned_index {
	const struct owned_block **v;
	size_t n;
};

static int owned_index_build(const struct owned_block *owned, size_t n, struct owned_index *ix)
{
	ix->v = NULL;
	ix->n = 0;
	if (n == 0)
		return 0;
	if (!owned)
		return -EINVAL;
	ix->v = calloc(n, sizeof(*ix->v));
	if (!ix->v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ix->v[i] = &owned[i];
	qsort(ix->v, n, sizeof(*ix->v), cmp_owned_ptr_id);
	ix->n = n;
	return 0;
}

static const struct owned_block *owned_index_find(const struct owned_index *ix, uint64_t id)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix->v[mid]->id == id)
			return ix->v[mid];
		if (ix->v[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* First id that the ownership list names twice, for a clear rejection. */
static bool owned_index_dup(const struct owned_index *ix, uint64_t *dup)
{
	for (size_t i = 1; i < ix->n; i++)
		if (ix->v[i]->id == ix->v[i - 1]->id) {
			*dup = ix->v[i]->id;
			return true;
		}
	return false;
}

static struct plan *plan_new(const struct mem_table *t)
{
	struct plan *p = calloc(1, sizeof(*p));

	if (p && t)
		p->block_size = t->block_size;
	return p;
}

__attribute__((format(printf, 3, 4)))
static int reject(struct plan *p, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->reason, sizeof(p->reason), fmt, ap);
	va_end(ap);
	free(p->blocks);
	p->blocks = NULL;
	p->n = 0;
	p->want_bytes = 0;
	p->err = err;
	return err;
}

void plan_free(struct plan *p)
{
	if (!p)
		return;
	free(p->blocks);
	free(p);
}

static enum plan_source resolve_source(const struct mem_table *t, enum plan_source s)
{
	if (s == PLAN_SOURCE_AUTO)
		return t->has_firmware ? PLAN_SOURCE_STANDBY : PLAN_SOURCE_OFFLINE;
	return s;
}

static const char *source_word(enum plan_source s)
{
	return s == PLAN_SOURCE_OFFLINE ? "offline" : "standby";
}

bool plan_block_is_candidate(const struct mem_table *t, const struct mem_block *b,
			     enum plan_source source)
{
	if (resolve_source(t, source) == PLAN_SOURCE_OFFLINE)
		return b->configured && b->state == MEM_STATE_OFFLINE;
	return mem_block_is_standby(b);
}

uint64_t plan_available_bytes(const struct mem_table *t, enum plan_source source,
			      const struct owned_block *owned, size_t n_owned, uint64_t at_least)
{
	struct owned_index ix;
	uint64_t count = 0, enough = t->block_size ? at_least / t->block_size + !!(at_least % t->block_size) : 0;
	bool indexed = owned_index_build(owned, n_owned, &ix) == 0;

	for (size_t i = 0; i < t->n && (at_least == UINT64_MAX || count < enough); i++) {
		bool mine = false;

		if (!plan_block_is_candidate(t, &t->blocks[i], source))
			continue;
		if (indexed)
			mine = owned_index_find(&ix, t->blocks[i].id) != NULL;
		else /* out of memory for the index: the slow way still answers */
			for (size_t j = 0; owned && j < n_owned && !mine; j++)
				mine = owned[j].id == t->blocks[i].id;
		if (!mine)
			count++;
	}
	if (indexed)
		free(ix.v);
	return count * t->block_size;
}

static int parse_hex(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	if (!isxdigit((unsigned char)*p))
		return -EINVAL;
	for (; isxdigit((unsigned char)*p); p++) {
		unsigned d = isdigit((unsigned char)*p) ? (unsigned)(*p - '0')
							: (unsigned)(tolower((unsigned char)*p) - 'a' + 10);
		if (v > (UINT64_MAX >> 4))
			return -ERANGE;
		v = (v << 4) | d;
	}
	*end = p;
	*out = v;
	return 0;
}

int plan_parse_range(const char *s, uint64_t block_size, uint64_t *first, uint64_t *last,
		     char *err, size_t errlen)
{
	char dummy[1];
	const char *p;
	uint64_t start, end;
	int r;

	if (!err || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	if (!s) {
		snprintf(err, errlen, "range missing");
		return -EINVAL;
	}
	if (block_size == 0) {
		snprintf(err, errlen, "range \"%s\": block size unknown", s);
		return -EINVAL;
	}
	r = parse_hex(s, &p, &start);
	if (r == -ERANGE) {
		snprintf(err, errlen, "range \"%s\": start does not fit in 64 bits", s);
		return r;
	}
	if (r < 0 || *p != '-') {
		snprintf(err, errlen, "range \"%s\": expected START-END in hex, e.g. 0x80000000-0x87ffffff", s);
		return -EINVAL;
	}
	r = parse_hex(p + 1, &p, &end);
	if (r == -ERANGE) {
		snprintf(err, errlen, "range \"%s\": end does not fit in 64 bits", s);
		return r;
	}
	if (r < 0 || *p != '\0') {
		snprintf(err, errlen, "range \"%s\": expected START-END in hex, e.g. 0x80000000-0x87ffffff", s);
		return -EINVAL;
	}
	if (end < start) {
		snprintf(err, errlen, "range \"%s\": end is below start", s);
		return -EINVAL;
	}
	if (end == UINT64_MAX) {
		snprintf(err, errlen, "range \"%s\": end overflows the address space", s);
		return -ERANGE;
	}
	if (start % block_size || (end + 1) % block_size) {
		char bs[16];

		size_format(block_size, bs, sizeof(bs));
		snprintf(err, errlen,
			 "range \"%s\" is not aligned to the block size %s (the end is inclusive: 0x...ffff)",
			 s, bs);
		return -EINVAL;
	}
	*first = start / block_size;
	*last = end / block_size;
	return 0;
}

void plan_format_range(uint64_t block_size, uint64_t id, char *buf, size_t len)
{
	uint64_t start = id * block_size;

	snprintf(buf, len, "0x%08" PRIx64 "-0x%08" PRIx64, start, start + block_size - 1);
}

/* Why block ID cannot be granted; 0 when it can. */
static int check_grant_block(const struct mem_table *t, enum plan_source src,
			     const struct owned_index *ix, uint64_t id, struct plan *p)
{
	const struct mem_block *b = mem_table_find(t, id);
	const struct owned_block *o;

	if (!b)
		return reject(p, -ENOENT, "block %" PRIu64 " does not exist", id);
	o = owned_index_find(ix, id);
	if (o)
		return reject(p, -EBUSY, "block %" PRIu64 " already belongs to grant %s", id,
			      o->grant_id);
	if (plan_block_is_candidate(t, b, src))
		return 0;
	if (src == PLAN_SOURCE_OFFLINE) {
		if (!b->configured)
			return reject(p, -EBUSY, "block %" PRIu64 " is not present in the kernel", id);
		return reject(p, -EBUSY, "block %" PRIu64 " is not offline (%s)", id,
			      mem_state_name(b->state));
	}
	if (b->configured)
		return reject(p, -EBUSY, "block %" PRIu64 " is not standby: configured already (%s)",
			      id, mem_state_name(b->state));
	return reject(p, -EBUSY, "block %" PRIu64 " is not standby: the hypervisor offers no storage for it",
		      id);
}

static int grant_by_size(const struct mem_table *t, enum plan_source src,
			 const struct owned_index *ix, uint64_t size, struct plan *p)
{
	size_t nc = 0, k, run = 0;
	uint64_t prev = 0;
	char want[16], bs[16], have[16];

	size_format(size, want, sizeof(want));
	size_format(t->block_size, bs, sizeof(bs));
	if (size == 0)
		return reject(p, -EINVAL, "size 0: a grant needs at least one %s block", bs);
	if (size % t->block_size) {
		char why[256];

		words_size_in_blocks(size, NULL, t->block_size, why, sizeof(why));
		return reject(p, -EINVAL, "%s", why);
	}
	k = size / t->block_size;

	/* The lowest run long enough keeps the grant physically contiguous;
	 * without one the lowest ids are taken.  One walk in id order that
	 * stops at the first run of K free candidates, keeping the lowest K
	 * seen in p->blocks meanwhile: the rows up to the grant's blocks are
	 * read, not the machine (a run breaks at any id that is not a free
	 * candidate, as the ids are sorted and unique). */
	p->blocks = k <= t->n ? calloc(k, sizeof(*p->blocks)) : NULL;
	if (k <= t->n && !p->blocks)
		return reject(p, -ENOMEM, "out of memory");
	for (size_t i = 0; i < t->n; i++) {
		uint64_t id = t->blocks[i].id;

		if (!plan_block_is_candidate(t, &t->blocks[i], src) || owned_index_find(ix, id))
			continue;
		run = nc > 0 && id == prev + 1 ? run + 1 : 1;
		prev = id;
		if (nc < k && p->blocks)
			p->blocks[nc] = id;
		nc++;
		if (run == k) {
			for (size_t j = 0; j < k; j++)
				p->blocks[j] = id - k + 1 + j;
			p->n = k;
			return 0;
		}
	}

	if (k > nc) {
		size_format(nc * t->block_size, have, sizeof(have));
		/* with nothing at all to take, say why there is nothing */
		return reject(p, -ENOSPC, "%s requested, %s %s available%s", want, have, source_word(src),
			      nc ? ""
			      : !t->has_firmware ? " (no standby memory interface: this kernel has no sys/firmware/memory, "
						   "and it keeps no block offline)"
			      : resolve_source(t, src) == PLAN_SOURCE_STANDBY ? " (no standby blocks left: every block "
										"the hypervisor offers is configured)"
			      : "");
	}
	p->n = k;
	return 0;
}

/* Turns the ranges into block ids in p->blocks (unsorted, may repeat). */
static int grant_ranges_to_ids(const struct mem_table *t, const char *const *ranges, size_t n,
			       struct plan *p)
{
	size_t cap = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t first, last;
		char err[200];
		int r = plan_parse_range(ranges ? ranges[i] : NULL, t->block_size, &first, &last,
					 err, sizeof(err));

		if (r < 0)
			return reject(p, r, "%s", err);
		/* Stop at the first id that does not exist, so a range spanning
		 * the whole address space costs at most t->n steps. */
		for (uint64_t id = first;; id++) {
			if (!mem_table_find(t, id))
				return reject(p, -ENOENT, "range \"%s\": block %" PRIu64 " does not exist",
					      ranges[i], id);
			if (p->n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				uint64_t *nb = reallocarray(p->blocks, ncap, sizeof(*nb));

				if (!nb)
					return reject(p, -ENOMEM, "out of memory");
				p->blocks = nb;
				cap = ncap;
			}
			p->blocks[p->n++] = id;
			if (id == last)
				break;
		}
	}
	return 0;
}

int plan_grant(const struct mem_table *t, const struct grant_request *req,
	       const struct owned_block *owned, size_t n_owned, struct plan **out)
{
	struct plan *p;
	struct owned_index ix = { 0 };
	enum plan_source src;
	int r = 0;

	if (!out)
		return -EINVAL;
	*out = p = plan_new(t);
	if (!p)
		return -ENOMEM;
	if (!t || !req)
		return reject(p, -EINVAL, "no block table or request");
	if (t->block_size == 0)
		return reject(p, -EINVAL, "block size unknown (0)");
	src = resolve_source(t, req->source);
	r = owned_index_build(owned, n_owned, &ix);
	if (r < 0)
		return reject(p, r, "cannot index the ownership list");

	switch (req->by) {
	case GRANT_BY_SIZE:
		r = grant_by_size(t, src, &ix, req->size, p);
		goto done;
	case GRANT_BY_BLOCKS:
		if (req->n_ids == 0 || !req->ids) {
			r = reject(p, -EINVAL, "no blocks given");
			goto done;
		}
		p->blocks = calloc(req->n_ids, sizeof(*p->blocks));
		if (!p->blocks) {
			r = reject(p, -ENOMEM, "out of memory");
			goto done;
		}
		memcpy(p->blocks, req->ids, req->n_ids * sizeof(*p->blocks));
		p->n = req->n_ids;
		break;
	case GRANT_BY_RANGES:
		if (req->n_ranges == 0 || !req->ranges) {
			r = reject(p, -EINVAL, "no ranges given");
			goto done;
		}
		r = grant_ranges_to_ids(t, req->ranges, req->n_ranges, p);
		if (r < 0)
			goto done;
		break;
	default:
		r = reject(p, -EINVAL, "unknown grant request kind %d", (int)req->by);
		goto done;
	}

	/* By blocks or ranges: sorted, each once, each a free candidate. */
	qsort(p->blocks, p->n, sizeof(*p->blocks), u64_cmp);
	for (size_t i = 1; i < p->n; i++)
		if (p->blocks[i] == p->blocks[i - 1]) {
			r = reject(p, -EINVAL, "block %" PRIu64 " is given twice%s", p->blocks[i],
				   req->by == GRANT_BY_RANGES ? " (ranges overlap)" : "");
			goto done;
		}
	for (size_t i = 0; i < p->n; i++) {
		r = check_grant_block(t, src, &ix, p->blocks[i], p);
		if (r < 0)
			goto done;
	}

done:
	free(ix.v);
	if (r < 0)
		return r;
	{
		char ids[160], sz[16];

		p->want_bytes = p->n * t->block_size;
		words_block_list_format(p->blocks, p->n, ids, sizeof(ids));
		size_format(p->want_bytes, sz, sizeof(sz));
		snprintf(p->reason, sizeof(p->reason), "%s: %zu %s block%s %s", sz, p->n,
			 source_word(src), p->n == 1 ? "" : "s", ids);
	}
	return 0;
}

int plan_revoke(const struct mem_table *t, const struct revoke_request *req,
		const struct owned_block *owned, size_t n_owned, struct plan **out)
{
	struct plan *p;
	struct owned_index ix = { 0 };
	_cleanup_free_ const struct owned_block **order = NULL;
	_cleanup_free_ uint64_t *asked = NULL;
	const struct mem_block *b;
	char bs[16], want[16], have[16], ids[160];
	uint64_t dup;
	int r = 0;

	if (!out)
		return -EINVAL;
	*out = p = plan_new(t);
	if (!p)
		return -ENOMEM;
	if (!t || !req)
		return reject(p, -EINVAL, "no block table or request");
	if (t->block_size == 0)
		return reject(p, -EINVAL, "block size unknown (0)");
	size_format(t->block_size, bs, sizeof(bs));

	r = owned_index_build(owned, n_owned, &ix);
	if (r < 0)
		return reject(p, r, "cannot index the ownership list");
	if (owned_index_dup(&ix, &dup)) {
		r = reject(p, -EINVAL, "the ownership list names block %" PRIu64 " twice", dup);
		goto done;
	}
	if (n_owned) {
		order = calloc(n_owned, sizeof(*order));
		if (!order) {
			r = reject(p, -ENOMEM, "out of memory");
			goto done;
		}
		memcpy(order, ix.v, n_owned * sizeof(*order));
		qsort(order, n_owned, sizeof(*order), cmp_owned_ptr_revoke);
	}
	p->blocks = calloc(n_owned ? n_owned : 1, sizeof(*p->blocks));
	if (!p->blocks) {
		r = reject(p, -ENOMEM, "out of memory");
		goto done;
	}

	switch (req->by) {
	case REVOKE_BY_SIZE:
		size_format(req->size, want, sizeof(want));
		size_format(n_owned * t->block_size, have, sizeof(have));
		if (req->size == 0) {
			r = reject(p, -EINVAL, "size 0: a revocation needs at least one %s block", bs);
			goto done;
		}
		if (req->size % t->block_size) {
			char why[256];

			words_size_in_blocks(req->size, NULL, t->block_size, why, sizeof(why));
			r = reject(p, -EINVAL, "%s", why);
			goto done;
		}
		if (req->size / t->block_size > n_owned) {
			r = reject(p, -ENOSPC, "%s requested, %s owned by memgrant", want, have);
			goto done;
		}
		for (size_t i = 0; i < n_owned; i++)
			p->blocks[p->n++] = order[i]->id;
		p->want_bytes = req->size;
		words_block_list_format(p->blocks, p->n, ids, sizeof(ids));
		snprintf(p->reason, sizeof(p->reason),
			 "%s of %s owned: candidates movable first, newest first: %s", want, have, ids);
		break;

	case REVOKE_BY_GRANT:
		if (!req->grant_id || !*req->grant_id) {
			r = reject(p, -EINVAL, "no grant id given");
			goto done;
		}
		for (size_t i = 0; i < n_owned; i++)
			if (streq(order[i]->grant_id, req->grant_id))
				p->blocks[p->n++] = order[i]->id;
		if (p->n == 0) {
			r = reject(p, -ENOENT, "grant %s owns no blocks", req->grant_id);
			goto done;
		}
		p->want_bytes = p->n * t->block_size;
		size_format(p->want_bytes, want, sizeof(want));
		words_block_list_format(p->blocks, p->n, ids, sizeof(ids));
		snprintf(p->reason, sizeof(p->reason), "grant %s: %s in %zu block%s %s",
			 req->grant_id, want, p->n, p->n == 1 ? "" : "s", ids);
		break;

	case REVOKE_BY_BLOCKS:
		if (req->n_ids == 0 || !req->ids) {
			r = reject(p, -EINVAL, "no blocks given");
			goto done;
		}
		asked = calloc(req->n_ids, sizeof(*asked));
		if (!asked) {
			r = reject(p, -ENOMEM, "out of memory");
			goto done;
		}
		memcpy(asked, req->ids, req->n_ids * sizeof(*asked));
		qsort(asked, req->n_ids, sizeof(*asked), u64_cmp);
		for (size_t i = 0; i < req->n_ids; i++) {
			if (i > 0 && asked[i] == asked[i - 1]) {
				r = reject(p, -EINVAL, "block %" PRIu64 " is given twice", asked[i]);
				goto done;
			}
			if (owned_index_find(&ix, asked[i]))
				continue;
			/* the cause as the kernel's table shows it now: a block a
			 * grant held and a revocation gave back is standby again */
			b = mem_table_find(t, asked[i]);
			if (!b)
				r = reject(p, -ENOENT, "block %" PRIu64 " does not exist", asked[i]);
			else if (!b->configured)
				r = reject(p, -EPERM, "block %" PRIu64 " is standby memory (not configured): no grant "
					   "holds it, there is nothing to give back", asked[i]);
			else if (t->boot_known && b->id < t->boot_end)
				r = reject(p, -EPERM, "block %" PRIu64 " is boot memory: memgrant gives back only "
					   "blocks its grants hold", asked[i]);
			else
				r = reject(p, -EPERM, "block %" PRIu64 " is %s and no grant holds it (brought up "
					   "outside memgrant: 'memgrantctl adopt %" PRIu64 "' makes it a grant)",
					   asked[i], mem_state_name(b->state), asked[i]);
			goto done;
		}
		for (size_t i = 0; i < n_owned; i++)
			if (bsearch(&order[i]->id, asked, req->n_ids, sizeof(*asked), u64_cmp))
				p->blocks[p->n++] = order[i]->id;
		p->want_bytes = p->n * t->block_size;
		size_format(p->want_bytes, want, sizeof(want));
		words_block_list_format(p->blocks, p->n, ids, sizeof(ids));
		snprintf(p->reason, sizeof(p->reason), "%s in %zu block%s %s", want, p->n,
			 p->n == 1 ? "" : "s", ids);
		break;

	default:
		r = reject(p, -EINVAL, "unknown revocation kind %d", (int)req->by);
		goto done;
	}

done:
	free(ix.v);
	return r;
}
