/* SPDX-License-Identifier: MIT */
#include "hotplug/policy.h"

#include <ctype.h>
#include <stdarg.h>

#include "lib/size.h"
#include "lib/util.h"

/* snprintf for reason lines: a reason cut short is acceptable, and going
 * through vsnprintf keeps -Wformat-truncation from flagging every one. */
__attribute__((format(printf, 3, 4)))
static void reasonf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

const char *policy_memmap_name(enum policy_memmap m)
{
	switch (m) {
	case POLICY_MEMMAP_ALWAYS: return "always";
	case POLICY_MEMMAP_NEVER: return "never";
	default: return "auto";
	}
}

int policy_memmap_parse(const char *s, enum policy_memmap *out)
{
	if (streq(s, "auto"))
		*out = POLICY_MEMMAP_AUTO;
	else if (streq(s, "always"))
		*out = POLICY_MEMMAP_ALWAYS;
	else if (streq(s, "never"))
		*out = POLICY_MEMMAP_NEVER;
	else
		return -EINVAL;
	return 0;
}

void policy_zone_bytes(const struct mem_table *t, uint64_t *movable, uint64_t *normal)
{
	uint64_t m = 0, k = 0;

	for (size_t i = 0; i < t->n; i++) {
		enum mem_zone side = mem_block_ratio_side(&t->blocks[i]);

		if (side == MEM_ZONE_MOVABLE)
			m += t->block_size;
		else if (side == MEM_ZONE_NORMAL)
			k += t->block_size;
	}
	if (movable)
		*movable = m;
	if (normal)
		*normal = k;
}

int policy_memmap_supported(const struct mem_table *t, char *why, size_t len)
{
	char dummy[1];
	const char *param = t->memmap_param;

	if (!why || len == 0) {
		why = dummy;
		len = sizeof(dummy);
	}
	if (!t->has_firmware) {
		snprintf(why, len, "no sys/firmware/memory, the kernel chose when it added the block (C0)");
		return -1;
	}
	if (param[0] == 'Y' || param[0] == 'y' || streq(param, "force")) {
		snprintf(why, len, "memory_hotplug.memmap_on_memory=%s", param);
		return 1;
	}
	if (param[0] == 'N' || param[0] == 'n') {
		snprintf(why, len, "the kernel does not support memmap on memory (memory_hotplug.memmap_on_memory=%s)",
			 param);
		return 0;
	}
	for (size_t i = 0; i < t->n; i++)
		if (t->blocks[i].in_firmware && t->blocks[i].memmap_on_memory == 1) {
			snprintf(why, len, "firmware block %llu offers memmap_on_memory=1 (C2)",
				 (unsigned long long)t->blocks[i].id);
			return 1;
		}
	snprintf(why, len, "the kernel does not support memmap on memory (no firmware block offers it, C2)");
	return 0;
}

/* The memmap half of the decision (grant-wide). */
static void decide_memmap(const struct policy_settings *s, const struct policy_request *req,
			  const struct mem_table *t, uint64_t avail, size_t n_ids,
			  struct policy_decision *d)
{
	char why[160], a[16], r[16], per[16], cost_s[16];
	uint64_t per_block = t->block_size / 64; /* P6 */
	uint64_t cost = per_block * n_ids;
	bool avail_known = avail != POLICY_MEM_AVAILABLE_UNKNOWN;
	bool low_now = avail_known && avail < s->reserve;
	bool low_after = !avail_known || avail < s->reserve || avail - s->reserve < cost;
	int supported = policy_memmap_supported(t, why, sizeof(why));
	int want = -1;
	const char *who = NULL;
	char note[96] = "";

	size_format(avail_known ? avail : 0, a, sizeof(a));
	size_format(s->reserve, r, sizeof(r));
	size_format(per_block, per, sizeof(per));
	size_format(cost, cost_s, sizeof(cost_s));

	if (supported < 0) {
		d->memmap = -1;
		reasonf(d->memmap_reason, sizeof(d->memmap_reason), "memmap_on_memory=keep: %s", why);
		return;
	}
	if (req && req->memmap >= 0) {
		want = req->memmap ? 1 : 0;
		who = "requested by the grant";
	} else if (s->memmap == POLICY_MEMMAP_ALWAYS) {
		want = 1;
		who = "policy memmap_on_memory is always";
	} else if (s->memmap == POLICY_MEMMAP_NEVER) {
		want = 0;
		who = "policy memmap_on_memory is never";
	}

	if (want == 1 || (want < 0 && low_after)) {
		if (!supported) {
			/* Impossible wins over every wish: say what was wanted and why not. */
			d->memmap = 0;
			if (req && req->memmap == 1)
				reasonf(d->memmap_reason, sizeof(d->memmap_reason),
					 "memmap_on_memory=off: requested on by the grant, but %s", why);
			else if (who)
				reasonf(d->memmap_reason, sizeof(d->memmap_reason),
					 "memmap_on_memory=off: %s, but %s", who, why);
			else if (avail_known)
				reasonf(d->memmap_reason, sizeof(d->memmap_reason),
					 "memmap_on_memory=off: MemAvailable %s is low for the %s reserve, but %s",
					 a, r, why);
			else
				reasonf(d->memmap_reason, sizeof(d->memmap_reason),
					 "memmap_on_memory=off: MemAvailable is unknown, but %s", why);
			return;
		}
		d->memmap = 1;
		if (who)
			reasonf(d->memmap_reason, sizeof(d->memmap_reason), "memmap_on_memory=on: %s", who);
		else if (!avail_known)
			reasonf(d->memmap_reason, sizeof(d->memmap_reason),
				 "memmap_on_memory=on: MemAvailable is unknown, the memmap stays inside the block");
		else if (low_now)
			reasonf(d->memmap_reason, sizeof(d->memmap_reason),
				 "memmap_on_memory=on: MemAvailable %s is below the %s reserve%s", a, r,
				 req && req->contiguous ? " (contiguous hint overridden)" : "");
		else
			reasonf(d->memmap_reason, sizeof(d->memmap_reason),
				 "memmap_on_memory=on: MemAvailable %s less the %s memmap of %zu block%s would fall below the %s reserve%s",
				 a, cost_s, n_ids, n_ids == 1 ? "" : "s", r,
				 req && req->contiguous ? " (contiguous hint overridden)" : "");
		return;
	}

	d->memmap = 0;
	if (who) {
		if (low_after && avail_known)
			snprintf(note, sizeof(note), " (MemAvailable %s, %s memmap, %s reserve)", a,
				 cost_s, r);
		reasonf(d->memmap_reason, sizeof(d->memmap_reason), "memmap_on_memory=off: %s%s", who,
			 note);
	} else if (req && req->contiguous)
		reasonf(d->memmap_reason, sizeof(d->memmap_reason),
			 "memmap_on_memory=off: the grant asks for contiguous memory; %s available, the %s memmap per block fits outside the block",
			 a, per);
	else
		reasonf(d->memmap_reason, sizeof(d->memmap_reason),
			 "memmap_on_memory=off: %s available, the %s memmap per block fits outside the block",
			 a, per);
}

/* MOVABLE:NORMAL in percent, rounded down (UP false) or up. */
static uint64_t ratio_pct(uint64_t movable, uint64_t normal, bool up)
{
	unsigned __int128 num = (unsigned __int128)movable * 100;

	if (normal == 0)
		return UINT64_MAX;
	if (up)
		num += normal - 1;
	num /= normal;
	return num > UINT64_MAX ? UINT64_MAX : (uint64_t)num;
}

static bool within_ratio(uint64_t movable, uint64_t normal, unsigned ratio)
{
	return (unsigned __int128)movable * 100 <= (unsigned __int128)normal * ratio;
}

static void decide_zone(const struct policy_settings *s, const struct policy_request *req,
			const struct mem_table *t, uint64_t *movable, uint64_t *normal,
			struct policy_block *pb)
{
	const struct mem_block *b = mem_table_find(t, pb->id);
	uint64_t bs = t->block_size;
	uint64_t m_after = *movable + bs;
	enum mem_zone want = MEM_ZONE_AUTO;
	const char *who = NULL;
	bool fits = within_ratio(m_after, *normal, s->movable_ratio);
	char ratio[96];

	if (*normal == 0)
		reasonf(ratio, sizeof(ratio), "no Normal/DMA memory is online");
	else if (fits)
		reasonf(ratio, sizeof(ratio), "MOVABLE:NORMAL stays %llu%% <= %u%%",
			 (unsigned long long)ratio_pct(m_after, *normal, false), s->movable_ratio);
	else
		reasonf(ratio, sizeof(ratio), "movable would reach %llu%% of normal, above the %u%% ratio",
			 (unsigned long long)ratio_pct(m_after, *normal, true), s->movable_ratio);

	if (req && req->zone != MEM_ZONE_AUTO) {
		want = req->zone;
		who = "requested by the grant";
	} else if (s->zone != MEM_ZONE_AUTO) {
		want = s->zone;
		who = want == MEM_ZONE_MOVABLE ? "policy zone is movable" : "policy zone is normal";
	}

	/* An offline block lists the zones it may go to (A9); "" (standby,
	 * not yet added) means the kernel has not said: assume Movable is
	 * possible, as it is for every hot-added block. */
	if (want != MEM_ZONE_NORMAL && b && b->zones && !mem_zones_has(b->zones, MEM_ZONE_MOVABLE)) {
		pb->online = ONLINE_KERNEL;
		reasonf(pb->zone_reason, sizeof(pb->zone_reason),
			 "zone=normal: block %llu cannot be movable (valid_zones %s)",
			 (unsigned long long)pb->id, MEM_ZONES_TEXT(b->zones));
		*normal += bs;
		return;
	}
	if (want == MEM_ZONE_NORMAL) {
		pb->online = ONLINE_KERNEL;
		reasonf(pb->zone_reason, sizeof(pb->zone_reason), "zone=normal: %s", who);
		*normal += bs;
		return;
	}
	if (want == MEM_ZONE_MOVABLE) {
		pb->online = ONLINE_MOVABLE;
		reasonf(pb->zone_reason, sizeof(pb->zone_reason), "zone=movable: %s%s%s%s", who,
			 fits ? "" : " (", fits ? "" : ratio, fits ? "" : ")");
		*movable = m_after;
		return;
	}
	if (fits && *normal) {
		pb->online = ONLINE_MOVABLE;
		reasonf(pb->zone_reason, sizeof(pb->zone_reason), "zone=movable: grant may be revoked; %s",
			 ratio);
		*movable = m_after;
	} else {
		pb->online = ONLINE_KERNEL;
		reasonf(pb->zone_reason, sizeof(pb->zone_reason), "zone=normal: %s", ratio);
		*normal += bs;
	}
}

int policy_decide(const struct policy_settings *s, const struct policy_request *req,
		  const struct mem_table *t, uint64_t mem_available,
		  const uint64_t *ids, size_t n_ids, struct policy_decision **out)
{
	struct policy_decision *d;
	uint64_t movable, normal;
	const struct policy_block *first_normal = NULL, *last_movable = NULL;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!s || !t || t->block_size == 0 || !ids || n_ids == 0)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->blocks = calloc(n_ids, sizeof(*d->blocks));
	if (!d->blocks) {
		free(d);
		return -ENOMEM;
	}
	d->n = n_ids;

	decide_memmap(s, req, t, mem_available, n_ids, d);

	if (req && req->zone_bytes_known) {
		movable = req->movable_bytes;
		normal = req->normal_bytes;
	} else {
		policy_zone_bytes(t, &movable, &normal);
	}
	for (size_t i = 0; i < n_ids; i++) {
		struct policy_block *pb = &d->blocks[i];

		pb->id = ids[i];
		pb->memmap = d->memmap;
		decide_zone(s, req, t, &movable, &normal, pb);
		if (pb->online == ONLINE_MOVABLE) {
			d->n_movable++;
			last_movable = pb;
		} else {
			d->n_normal++;
			if (!first_normal)
				first_normal = pb;
		}
	}

	if (d->n_normal == 0) {
		d->online = ONLINE_MOVABLE;
		/* The last block shows the ratio the whole grant ends at. */
		reasonf(d->zone_reason, sizeof(d->zone_reason), "%s", last_movable->zone_reason);
	} else if (d->n_movable == 0) {
		d->online = ONLINE_KERNEL;
		reasonf(d->zone_reason, sizeof(d->zone_reason), "%s", first_normal->zone_reason);
	} else {
		const char *why = strchr(first_normal->zone_reason, ':');

		d->online = ONLINE_DEFAULT;
		reasonf(d->zone_reason, sizeof(d->zone_reason), "zone=split: %zu movable, %zu normal:%s",
			 d->n_movable, d->n_normal, why ? why + 1 : "");
	}
	*out = d;
	return 0;
}

void policy_decision_free(struct policy_decision *d)
{
	if (!d)
		return;
	free(d->blocks);
	free(d);
}

/* "   4194304 kB" -> bytes. */
static int parse_kb(const char *v, uint64_t *out)
{
	uint64_t kb = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	if (!isdigit((unsigned char)*v))
		return -EINVAL;
	for (; isdigit((unsigned char)*v); v++) {
		unsigned dgt = (unsigned)(*v - '0');

		if (kb > (UINT64_MAX - dgt) / 10)
			return -ERANGE;
		kb = kb * 10 + dgt;
	}
	while (*v == ' ' || *v == '\t')
		v++;
	if (strncmp(v, "kB", 2) != 0)
		return -EINVAL;
	v += 2;
	while (*v == ' ' || *v == '\t' || *v == '\n')
		v++;
	if (*v)
		return -EINVAL;
	if (kb > UINT64_MAX / 1024)
		return -ERANGE;
	*out = kb * 1024;
	return 0;
}

int policy_read_meminfo(const char *root, uint64_t *mem_total, uint64_t *mem_available)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *line = NULL;
	_cleanup_fclose_ FILE *f = NULL;
	size_t cap = 0;
	bool have_total = false, have_avail = false;
	uint64_t total = 0, avail = 0;
	size_t rl;

	if (!root || !*root)
		root = "/";
	rl = strlen(root);
	if (asprintf(&path, "%s%sproc/meminfo", root, root[rl - 1] == '/' ? "" : "/") < 0) {
		path = NULL;
		return -ENOMEM;
	}
	f = fopen(path, "re");
	if (!f)
		return -errno;

	errno = 0;
	while (getline(&line, &cap, f) >= 0) {
		bool is_total = startswith(line, "MemTotal:");
		bool is_avail = startswith(line, "MemAvailable:");
		int r;

		/* The first occurrence counts; other keys are not ours to judge. */
		if (is_total && !have_total) {
			r = parse_kb(line + strlen("MemTotal:"), &total);
			if (r < 0)
				return r;
			have_total = true;
		} else if (is_avail && !have_avail) {
			r = parse_kb(line + strlen("MemAvailable:"), &avail);
			if (r < 0)
				return r;
			have_avail = true;
		}
	}
	if (ferror(f))
		return errno ? -errno : -EIO;
	if (!have_total || !have_avail)
		return -ENODATA;
	if (mem_total)
		*mem_total = total;
	if (mem_available)
		*mem_available = avail;
	return 0;
}
