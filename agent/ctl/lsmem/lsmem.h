/* SPDX-License-Identifier: MIT */
/*
 * lsmem: render a struct mem_table the way util-linux 2.42 lsmem prints the
 * same machine, through libsmartcols.
 *
 * What "the same" means here (taken from util-linux sys-utils/lsmem.c):
 *  - columns RANGE SIZE STATE REMOVABLE BLOCK NODE ZONES CONFIGURED
 *    MEMMAP-ON-MEMORY (MEMMAP_ON_MEMORY accepted as an alias), default
 *    RANGE,SIZE,STATE,REMOVABLE,BLOCK; "-o +COL" appends to the defaults;
 *    memgrant adds OWNER (opts.owners; not in --output-all, so that stays
 *    lsmem's);
 *  - NODE and ZONES exist when some present block has a node link or
 *    valid_zones (lsmem walks the device directories for them, so a machine
 *    without memory0 still shows zones);
 *  - adjacent blocks merge into one range unless they differ in a value of
 *    a shown column (STATE, REMOVABLE, NODE, ZONES, CONFIGURED,
 *    MEMMAP-ON-MEMORY) or of the -S list; -a lists every block;
 *  - when the table has firmware entries (sys/firmware/memory, kernel.md
 *    C0/C1) the rows are the firmware blocks and a deconfigured block shows
 *    STATE offline; without firmware the rows are the present blocks and
 *    the CONFIGURED and MEMMAP-ON-MEMORY columns are left out;
 *  - summary lines "Memory block size:", "Total online memory:",
 *    "Total offline memory:" and, when the module parameter exists (P1),
 *    "Memmap on memory parameter:".
 *
 * Library code: returns 0 or -errno, never prints except to the FILE it is
 * given.  Option helpers fill an error text for the CLI to print.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "agent/ctl/lsmem/lsmemread.h"
#include "hotplug/block.h"

enum lsmem_col {
	LSMEM_COL_RANGE,
	LSMEM_COL_SIZE,
	LSMEM_COL_STATE,
	LSMEM_COL_REMOVABLE,
	LSMEM_COL_BLOCK,
	LSMEM_COL_NODE,
	LSMEM_COL_ZONES,
	LSMEM_COL_CONFIGURED,
	LSMEM_COL_MEMMAP,
	LSMEM_COL_OWNER, /* memgrant's own: the grant that holds the range, "foreign" or empty */
	LSMEM_NCOLS,
};

/* lsmem allows each of its 9 columns twice in -o (and says so). */
#define LSMEM_MAX_COLUMNS (2 * LSMEM_COL_OWNER)

enum lsmem_format {
	LSMEM_FMT_TABLE,
	LSMEM_FMT_RAW,   /* -r */
	LSMEM_FMT_JSON,  /* -J */
	LSMEM_FMT_PAIRS, /* -P */
};

struct lsmem_opts {
	int columns[LSMEM_MAX_COLUMNS]; /* enum lsmem_col; ncolumns == 0: defaults */
	size_t ncolumns;
	bool split_given;               /* -S given: split[] decides, not the columns */
	bool split[LSMEM_NCOLS];
	enum lsmem_format format;
	bool list_all;                  /* -a */
	bool bytes;                     /* -b */
	bool noheadings;                /* -n */
	bool want_table;
	bool want_summary;
	bool summary_only_given;        /* --summary / --summary=only */
	/* per block of the table printed: the id of the grant that holds it,
	 * "foreign" (online, no grant's), or NULL; only memgrantd knows, so
	 * NULL here (direct reads) leaves the OWNER column out */
	const char *const *owners;
};

/* Defaults of lsmem: table and summary, default columns. */
void lsmem_opts_init(struct lsmem_opts *o);

/* Column id for NAME (case-insensitive, alias MEMMAP_ON_MEMORY), -EINVAL. */
int lsmem_column_id(const char *name);
const char *lsmem_column_name(enum lsmem_col c);
const char *lsmem_column_help(enum lsmem_col c);

/* -o LIST ("A,B" replaces, "+A,B" appends to the current/default columns).
 * -EINVAL unknown column, -E2BIG too many; ERR says which. */
int lsmem_opts_set_columns(struct lsmem_opts *o, const char *list, char *err, size_t errlen);
/* --output-all */
void lsmem_opts_all_columns(struct lsmem_opts *o);
/* -S LIST or "none". */
int lsmem_opts_set_split(struct lsmem_opts *o, const char *list, char *err, size_t errlen);
/* --summary[=WHEN]: WHEN NULL or "only", "never", "always". */
int lsmem_opts_set_summary(struct lsmem_opts *o, const char *when, char *err, size_t errlen);
/* -J/-P/-r (they exclude each other and turn the summary off). */
int lsmem_opts_set_format(struct lsmem_opts *o, enum lsmem_format f, char *err, size_t errlen);
/* Cross-option checks after parsing (like lsmem: -S with -a,
 * --summary=only with -J/-P/-r). */
int lsmem_opts_finish(struct lsmem_opts *o, char *err, size_t errlen);

/* Which attributes the output of O needs (for lsmem_read_tree): the shown
 * columns and the split columns; the summary needs only states. */
void lsmem_opts_need(const struct lsmem_opts *o, struct lsmem_need *need);

/* Prints table and/or summary of T to OUT.  0, -ENOMEM, -EIO (write error). */
int lsmem_print(const struct mem_table *t, const struct lsmem_opts *o, FILE *out);
