/* SPDX-License-Identifier: MIT */
#include "agent/ctl/lsmem/lsmem.h"

#include <errno.h>
#include <inttypes.h>
#include <libsmartcols.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "lib/size.h"
#include "lib/util.h"
#include "hotplug/words.h"

/* A row holds at most this many zones (valid_zones words, enum mem_zone). */
#define MAX_NR_ZONES MEM_ZONE_COUNT

struct coldesc {
	const char *name;
	double whint;
	int flags;
	const char *help;
};

/* Header, width hint and alignment exactly as lsmem declares them. */
static const struct coldesc coldescs[LSMEM_NCOLS] = {
	[LSMEM_COL_RANGE] = { "RANGE", 0, 0, "start and end address of the memory range" },
	[LSMEM_COL_SIZE] = { "SIZE", 5, SCOLS_FL_RIGHT, "size of the memory range" },
	[LSMEM_COL_STATE] = { "STATE", 0, SCOLS_FL_RIGHT, "online status of the memory range" },
	[LSMEM_COL_REMOVABLE] = { "REMOVABLE", 0, SCOLS_FL_RIGHT, "memory is removable" },
	[LSMEM_COL_BLOCK] = { "BLOCK", 0, SCOLS_FL_RIGHT, "memory block number or blocks range" },
	[LSMEM_COL_NODE] = { "NODE", 0, SCOLS_FL_RIGHT, "numa node of memory" },
	[LSMEM_COL_ZONES] = { "ZONES", 0, SCOLS_FL_RIGHT, "valid zones for the memory range" },
	[LSMEM_COL_CONFIGURED] = { "CONFIGURED", 0, SCOLS_FL_RIGHT,
				   "configuration status of the memory range" },
	[LSMEM_COL_MEMMAP] = { "MEMMAP-ON-MEMORY", 0, SCOLS_FL_RIGHT,
			       "memmap-on-memory status of the memory range" },
	[LSMEM_COL_OWNER] = { "OWNER", 0, 0, "grant holding the range, or foreign (memgrantd only)" },
};

static const int default_columns[] = {
	LSMEM_COL_RANGE, LSMEM_COL_SIZE, LSMEM_COL_STATE, LSMEM_COL_REMOVABLE, LSMEM_COL_BLOCK,
};


void lsmem_opts_init(struct lsmem_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->format = LSMEM_FMT_TABLE;
	o->want_table = true;
	o->want_summary = true;
}

const char *lsmem_column_name(enum lsmem_col c)
{
	return (unsigned)c < LSMEM_NCOLS ? coldescs[c].name : NULL;
}

const char *lsmem_column_help(enum lsmem_col c)
{
	return (unsigned)c < LSMEM_NCOLS ? coldescs[c].help : NULL;
}

static int column_id_n(const char *name, size_t n)
{
	for (size_t i = 0; i < LSMEM_NCOLS; i++) {
		const char *cn = coldescs[i].name;
		if (strlen(cn) == n && strncasecmp(name, cn, n) == 0)
			return (int)i;
	}
	/* the seed commit message spells it with underscores */
	if (n == strlen("MEMMAP_ON_MEMORY") && strncasecmp(name, "MEMMAP_ON_MEMORY", n) == 0)
		return LSMEM_COL_MEMMAP;
	return -EINVAL;
}

int lsmem_column_id(const char *name)
{
	return name ? column_id_n(name, strlen(name)) : -EINVAL;
}

/* "A,B,C" into IDS; the same splitting rules as util-linux string_to_idarray. */
static int parse_idlist(const char *list, int *ids, size_t max, size_t *n, char *err, size_t errlen)
{
	const char *p = list;

	*n = 0;
	if (!*p) {
		errbuf_set(err, errlen, 0, "empty column list");
		return -EINVAL;
	}
	for (;;) {
		const char *end = strchrnul(p, ',');
		int id;

		if (end == p) {
			errbuf_set(err, errlen, 0, "empty column name in '%s'", list);
			return -EINVAL;
		}
		id = column_id_n(p, (size_t)(end - p));
		if (id < 0) {
			errbuf_set(err, errlen, 0, "unknown column: %.*s", (int)(end - p), p);
			return -EINVAL;
		}
		if (*n >= max) {
			errbuf_set(err, errlen, 0, "too many columns specified, the limit is %d columns",
			       LSMEM_MAX_COLUMNS - 1);
			return -E2BIG;
		}
		ids[(*n)++] = id;
		if (!*end)
			return 0;
		p = end + 1;
		if (!*p) /* trailing comma: lsmem ends the list there */
			return 0;
	}
}

int lsmem_opts_set_columns(struct lsmem_opts *o, const char *list, char *err, size_t errlen)
{
	int ids[LSMEM_MAX_COLUMNS];
	size_t n, base = 0;
	int r;

	if (!list) {
		errbuf_set(err, errlen, 0, "empty column list");
		return -EINVAL;
	}
	if (list[0] == '+') {
		/* append to what is there, the defaults when nothing is */
		if (o->ncolumns == 0) {
			memcpy(o->columns, default_columns, sizeof(default_columns));
			o->ncolumns = ARRAY_SIZE(default_columns);
		}
		base = o->ncolumns;
		list++;
	}
	r = parse_idlist(list, ids, LSMEM_MAX_COLUMNS - base, &n, err, errlen);
	if (r < 0)
		return r;
	memcpy(o->columns + base, ids, n * sizeof(*ids));
	o->ncolumns = base + n;
	return 0;
}

void lsmem_opts_all_columns(struct lsmem_opts *o)
{
	for (size_t i = 0; i < LSMEM_COL_OWNER; i++) /* lsmem's own columns */
		o->columns[i] = (int)i;
	o->ncolumns = LSMEM_COL_OWNER;
}

int lsmem_opts_set_split(struct lsmem_opts *o, const char *list, char *err, size_t errlen)
{
	int ids[LSMEM_MAX_COLUMNS];
	size_t n;
	int r;

	if (!list) {
		errbuf_set(err, errlen, 0, "empty split list");
		return -EINVAL;
	}
	memset(o->split, 0, sizeof(o->split));
	o->split_given = true;
	if (strcasecmp(list, "none") == 0)
		return 0;
	r = parse_idlist(list, ids, LSMEM_MAX_COLUMNS, &n, err, errlen);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		o->split[ids[i]] = true;
	return 0;
}

int lsmem_opts_set_summary(struct lsmem_opts *o, const char *when, char *err, size_t errlen)
{
	if (!when || streq(when, "only")) {
		o->want_table = false;
		o->summary_only_given = true;
	} else if (streq(when, "never")) {
		o->want_summary = false;
	} else if (streq(when, "always")) {
		o->want_summary = true;
	} else {
		errbuf_set(err, errlen, 0, "unsupported --summary argument: '%s' (never, always or only)", when);
		return -EINVAL;
	}
	return 0;
}

int lsmem_opts_set_format(struct lsmem_opts *o, enum lsmem_format f, char *err, size_t errlen)
{
	if (o->format != LSMEM_FMT_TABLE && o->format != f) {
		errbuf_set(err, errlen, 0, "mutually exclusive arguments: --json --pairs --raw");
		return -EINVAL;
	}
	o->format = f;
	if (f != LSMEM_FMT_TABLE)
		o->want_summary = false;
	return 0;
}

int lsmem_opts_finish(struct lsmem_opts *o, char *err, size_t errlen)
{
	if (o->split_given && o->list_all) {
		errbuf_set(err, errlen, 0, "mutually exclusive arguments: --all --split");
		return -EINVAL;
	}
	if (!o->want_table && !o->want_summary) {
		errbuf_set(err, errlen, 0,
		       "options --{raw,json,pairs} and --summary=only are mutually exclusive");
		return -EINVAL;
	}
	if (o->ncolumns == 0) {
		memcpy(o->columns, default_columns, sizeof(default_columns));
		o->ncolumns = ARRAY_SIZE(default_columns);
	}
	return 0;
}

void lsmem_opts_need(const struct lsmem_opts *o, struct lsmem_need *need)
{
	bool used[LSMEM_NCOLS] = { false };
	size_t n = o->ncolumns;
	const int *cols = o->columns;

	if (n == 0) {
		cols = default_columns;
		n = ARRAY_SIZE(default_columns);
	}
	/* a column's value is needed when it is shown or splits ranges; the
	 * summary alone counts states */
	for (size_t i = 0; o->want_table && i < n; i++)
		if ((unsigned)cols[i] < LSMEM_NCOLS)
			used[cols[i]] = true;
	for (size_t i = 0; o->want_table && o->split_given && i < LSMEM_NCOLS; i++)
		used[i] |= o->split[i];
	memset(need, 0, sizeof(*need));
	need->removable = used[LSMEM_COL_REMOVABLE];
	need->node = used[LSMEM_COL_NODE];
	need->zones = used[LSMEM_COL_ZONES];
	need->memmap = used[LSMEM_COL_MEMMAP];
	need->memmap_param = o->want_summary;
}

/* ------------------------------------------------------------------------ */

/* One block as lsmem sees it, and then one range of merged blocks. */
struct row {
	uint64_t index, count;
	enum mem_state state;
	bool removable;
	int node;
	int nr_zones;
	int zones[MAX_NR_ZONES];
	bool config;
	bool memmap;
	const char *owner; /* opts.owners of the first block, not owned */
};

struct view {
	const struct mem_table *t;
	const struct lsmem_opts *o;
	bool have_memconfig, have_nodes, have_zones;
	bool split[LSMEM_NCOLS];
	struct row *rows;
	size_t nrows;
	uint64_t mem_online, mem_offline;
};

/* lsmem capitalises the kernel's "none" (util-linux zone_names[]). */
static const char *zone_shown(int z)
{
	return z == MEM_ZONE_NONE ? "None" : words_zone_kernel_name((enum mem_zone)z);
}

static bool block_listed(const struct view *v, const struct mem_block *b)
{
	/* lsmem walks sys/firmware/memory when it exists, else the device dirs */
	return v->have_memconfig ? b->in_firmware : b->configured;
}

static void block_to_row(const struct view *v, const struct mem_block *b, struct row *r)
{
	memset(r, 0, sizeof(*r));
	r->index = b->id;
	r->count = 1;
	r->state = MEM_STATE_UNKNOWN;
	if (v->o->owners)
		r->owner = v->o->owners[b - v->t->blocks];
	if (v->have_memconfig) {
		r->config = b->configured;
		r->memmap = b->memmap_on_memory == 1;
		r->state = MEM_STATE_OFFLINE;
		/* lsmem stops here for a deconfigured block: no devices entry to
		 * read, so node 0, no zones, not removable */
		if (!b->configured)
			return;
	}
	r->removable = b->removable == 1;
	r->state = b->state;
	if (v->have_nodes)
		r->node = b->node;
	if (v->have_zones) {
		for (mem_zones z = b->zones; z && r->nr_zones < MAX_NR_ZONES; z >>= 4)
			r->zones[r->nr_zones++] = (int)mem_zones_first(z);
	}
}

static bool mergeable(const struct view *v, const struct row *cur, const struct row *r)
{
	if (v->o->list_all)
		return false;
	if (cur->index + cur->count != r->index)
		return false;
	if (v->split[LSMEM_COL_STATE] && cur->state != r->state)
		return false;
	if (v->split[LSMEM_COL_REMOVABLE] && cur->removable != r->removable)
		return false;
	if (v->split[LSMEM_COL_NODE] && v->have_nodes && cur->node != r->node)
		return false;
	if (v->split[LSMEM_COL_ZONES] && v->have_zones) {
		if (cur->nr_zones != r->nr_zones)
			return false;
		for (int i = 0; i < cur->nr_zones; i++)
			if (cur->zones[i] == MEM_ZONE_UNKNOWN || cur->zones[i] != r->zones[i])
				return false;
	}
	if (v->split[LSMEM_COL_CONFIGURED] && cur->config != r->config)
		return false;
	if (v->split[LSMEM_COL_MEMMAP] && cur->memmap != r->memmap)
		return false;
	if (v->split[LSMEM_COL_OWNER] && v->o->owners &&
	    (!cur->owner != !r->owner || (cur->owner && !streq(cur->owner, r->owner))))
		return false;
	return true;
}

static bool column_skipped(const struct view *v, int id)
{
	/* without firmware entries lsmem does not create these columns */
	if (id == LSMEM_COL_OWNER)
		return !v->o->owners;
	return (id == LSMEM_COL_CONFIGURED || id == LSMEM_COL_MEMMAP) && !v->have_memconfig;
}

static int build_view(struct view *v)
{
	const struct mem_table *t = v->t;

	v->have_memconfig = t->has_firmware;
	/* lsmem walks the device directories until one has a node link, and
	 * until one has valid_zones: the first block present need not be
	 * memory0 (aarch64 machines start higher) */
	for (size_t i = 0; i < t->n && !(v->have_nodes && v->have_zones); i++) {
		const struct mem_block *b = &t->blocks[i];

		if (!b->configured)
			continue;
		v->have_nodes |= b->node >= 0;
		v->have_zones |= b->zones != 0;
	}

	if (v->o->split_given) {
		memcpy(v->split, v->o->split, sizeof(v->split));
	} else {
		for (size_t i = 0; i < v->o->ncolumns; i++)
			v->split[v->o->columns[i]] = true;
	}

	v->rows = calloc(t->n ? t->n : 1, sizeof(*v->rows));
	if (!v->rows)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];
		struct row r;

		if (!block_listed(v, b))
			continue;
		block_to_row(v, b, &r);
		if (r.state == MEM_STATE_ONLINE)
			v->mem_online += t->block_size;
		else
			v->mem_offline += t->block_size;
		if (v->nrows && mergeable(v, &v->rows[v->nrows - 1], &r)) {
			v->rows[v->nrows - 1].count++;
			continue;
		}
		v->rows[v->nrows++] = r;
	}
	return 0;
}

static char *human(uint64_t bytes)
{
	char buf[32];

	size_format(bytes, buf, sizeof(buf));
	return strdup(buf);
}

/*
 * Text of one cell in *OUT; NULL where lsmem leaves the cell unset (which is
 * not the same as empty in JSON: null versus "").  0 or -ENOMEM.
 */
static int cell_text(const struct view *v, int id, const struct row *r, char **out)
{
	uint64_t bs = v->t->block_size;
	char *s = NULL;

	*out = NULL;

	switch (id) {
	case LSMEM_COL_RANGE: {
		uint64_t start = r->index * bs, size = r->count * bs;
		if (asprintf(&s, "0x%016" PRIx64 "-0x%016" PRIx64, start, start + size - 1) < 0)
			s = NULL;
		break;
	}
	case LSMEM_COL_SIZE:
		if (v->o->bytes) {
			if (asprintf(&s, "%" PRIu64, r->count * bs) < 0)
				s = NULL;
		} else {
			s = human(r->count * bs);
		}
		break;
	case LSMEM_COL_STATE:
		s = strdup(r->state == MEM_STATE_ONLINE	   ? "online"
			   : r->state == MEM_STATE_OFFLINE ? "offline"
			   : r->state == MEM_STATE_GOING_OFFLINE ? "on->off"
							   : "?");
		break;
	case LSMEM_COL_REMOVABLE:
		if (r->state != MEM_STATE_ONLINE)
			return 0;
		s = strdup(r->removable ? "yes" : "no");
		break;
	case LSMEM_COL_BLOCK:
		if (r->count == 1) {
			if (asprintf(&s, "%" PRIu64, r->index) < 0)
				s = NULL;
		} else if (asprintf(&s, "%" PRIu64 "-%" PRIu64, r->index, r->index + r->count - 1) < 0) {
			s = NULL;
		}
		break;
	case LSMEM_COL_NODE:
		if (!v->have_nodes)
			return 0;
		if (asprintf(&s, "%d", r->node) < 0)
			s = NULL;
		break;
	case LSMEM_COL_ZONES: {
		char buf[256] = "";
		if (!v->have_zones)
			return 0;
		for (int j = 0; j < r->nr_zones; j++) {
			if (j)
				strcat(buf, "/");
			strcat(buf, zone_shown(r->zones[j])); /* at most 9 x 8 bytes */
		}
		s = strdup(buf);
		break;
	}
	case LSMEM_COL_CONFIGURED:
		s = strdup(r->config ? "yes" : "no");
		break;
	case LSMEM_COL_MEMMAP:
		s = strdup(r->memmap ? "yes" : "no");
		break;
	case LSMEM_COL_OWNER:
		if (!r->owner)
			return 0;
		s = strdup(r->owner);
		break;
	default:
		return 0;
	}
	if (!s)
		return -ENOMEM;
	*out = s;
	return 0;
}

static void unref_table(struct libscols_table **tb)
{
	scols_unref_table(*tb);
}

static int print_table(struct view *v, FILE *out)
{
	const struct lsmem_opts *o = v->o;
	struct libscols_table *tb __attribute__((cleanup(unref_table))) = scols_new_table();
	int colmap[LSMEM_MAX_COLUMNS]; /* scols column of each wanted column, -1 skipped */
	size_t ncol = 0;

	if (!tb)
		return -ENOMEM;
	scols_table_enable_raw(tb, o->format == LSMEM_FMT_RAW);
	scols_table_enable_export(tb, o->format == LSMEM_FMT_PAIRS);
	scols_table_enable_json(tb, o->format == LSMEM_FMT_JSON);
	scols_table_enable_noheadings(tb, o->noheadings);
	if (o->format == LSMEM_FMT_JSON && scols_table_set_name(tb, "memory") != 0)
		return -ENOMEM;
	if (scols_table_set_stream(tb, out) != 0)
		return -EINVAL;

	for (size_t i = 0; i < o->ncolumns; i++) {
		int id = o->columns[i];
		const struct coldesc *cd = &coldescs[id];
		struct libscols_column *cl;

		if (column_skipped(v, id)) {
			colmap[i] = -1;
			continue;
		}
		cl = scols_table_new_column(tb, cd->name, cd->whint, cd->flags);
		if (!cl)
			return -ENOMEM;
		colmap[i] = (int)ncol++;
		if (o->format == LSMEM_FMT_JSON) {
			switch (id) {
			case LSMEM_COL_SIZE:
				if (o->bytes)
					scols_column_set_json_type(cl, SCOLS_JSON_NUMBER);
				break;
			case LSMEM_COL_NODE:
				scols_column_set_json_type(cl, SCOLS_JSON_NUMBER);
				break;
			case LSMEM_COL_REMOVABLE:
				scols_column_set_json_type(cl, SCOLS_JSON_BOOLEAN);
				break;
			}
		}
	}

	for (size_t r = 0; r < v->nrows; r++) {
		struct libscols_line *ln = scols_table_new_line(tb, NULL);

		if (!ln)
			return -ENOMEM;
		for (size_t i = 0; i < o->ncolumns; i++) {
			char *s;

			if (colmap[i] < 0)
				continue;
			if (cell_text(v, o->columns[i], &v->rows[r], &s) < 0)
				return -ENOMEM;
			if (!s)
				continue;
			if (scols_line_refer_data(ln, (size_t)colmap[i], s) != 0) {
				free(s);
				return -ENOMEM;
			}
		}
	}
	if (scols_print_table(tb) != 0)
		return -EIO;
	return 0;
}

static const char *memmap_param_word(const char *p)
{
	/* P1: Y, N or force; lsmem prints yes/no/force and nothing for others */
	if (startswith(p, "Y"))
		return "yes";
	if (startswith(p, "N"))
		return "no";
	if (startswith(p, "force"))
		return "force";
	return NULL;
}

static void print_summary(const struct view *v, FILE *out)
{
	const char *mm = memmap_param_word(v->t->memmap_param);

	if (v->o->bytes) {
		fprintf(out, "%-32s %15" PRIu64 "\n", "Memory block size:", v->t->block_size);
		fprintf(out, "%-32s %15" PRIu64 "\n", "Total online memory:", v->mem_online);
		fprintf(out, "%-32s %15" PRIu64 "\n", "Total offline memory:", v->mem_offline);
		if (mm)
			fprintf(out, "%-32s %15s\n", "Memmap on memory parameter:", mm);
	} else {
		char a[32], b[32], c[32];

		size_format(v->t->block_size, a, sizeof(a));
		size_format(v->mem_online, b, sizeof(b));
		size_format(v->mem_offline, c, sizeof(c));
		fprintf(out, "%-32s %5s\n", "Memory block size:", a);
		fprintf(out, "%-32s %5s\n", "Total online memory:", b);
		fprintf(out, "%-32s %5s\n", "Total offline memory:", c);
		if (mm)
			fprintf(out, "%-32s %5s\n", "Memmap on memory parameter:", mm);
	}
}

int lsmem_print(const struct mem_table *t, const struct lsmem_opts *opts, FILE *out)
{
	struct lsmem_opts o = *opts;
	struct view v = { .t = t, .o = &o };
	int r;

	if (!t || !out)
		return -EINVAL;
	if (o.ncolumns == 0) {
		memcpy(o.columns, default_columns, sizeof(default_columns));
		o.ncolumns = ARRAY_SIZE(default_columns);
	}
	for (size_t i = 0; i < o.ncolumns; i++)
		if ((unsigned)o.columns[i] >= LSMEM_NCOLS)
			return -EINVAL;
	r = build_view(&v);
	if (r < 0)
		goto out;
	if (o.want_table) {
		r = print_table(&v, out);
		if (r < 0)
			goto out;
		if (o.want_summary)
			fputc('\n', out);
	}
	if (o.want_summary)
		print_summary(&v, out);
	r = fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
out:
	free(v.rows);
	return r;
}
