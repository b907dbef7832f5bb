/* SPDX-License-Identifier: MIT */
/*
 * lsmem rendering of hand-built tables: merging and splitting of ranges,
 * firmware view (kernel.md C0, C14), summary lines (P1), -o parsing,
 * JSON/raw/pairs forms, sizes like util-linux.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "agent/ctl/lsmem/lsmem.h"
#include "agent/ctl/lsmem/lsmemread.h"
#include "tests/fixtures/gentree.h"
#include "hotplug/block.h"
#include "lib/size.h"
#include "lib/util.h"

#define MiB (1024ULL * 1024)

/* The seed machine (kernel.md): blocks 0-15 online boot memory, 16-31 standby. */
static struct mem_table *seed_machine(bool firmware)
{
	struct mem_table *t = mem_table_new(128 * MiB);

	assert_non_null(t);
	t->has_firmware = firmware;
	strcpy(t->memmap_param, "Y");
	for (uint64_t id = 0; id < 32; id++) {
		struct mem_block *b;

		if (!firmware && id >= 16)
			break;
		b = mem_table_add(t, id);
		assert_non_null(b);
		b->in_firmware = firmware;
		if (id < 16) {
			b->configured = true;
			b->memmap_on_memory = firmware ? 0 : -1;
			b->state = MEM_STATE_ONLINE;
			b->removable = 1;
			b->node = 0;
			b->zones = mem_zones_parse("DMA");
		} else {
			b->memmap_on_memory = 1; /* C2 */
		}
	}
	return t;
}

static void configure(struct mem_table *t, uint64_t id, enum mem_state st)
{
	struct mem_block *b = mem_table_find(t, id);

	assert_non_null(b);
	b->configured = true;
	b->state = st;
	b->removable = 1;
	b->node = 0;
	b->zones = mem_zones_parse(st == MEM_STATE_ONLINE ? "Movable" : "Movable Normal");
}

static void deconfigure(struct mem_table *t, uint64_t id)
{
	struct mem_block *b = mem_table_find(t, id);

	assert_non_null(b);
	b->configured = false;
	b->state = MEM_STATE_OFFLINE;
	b->removable = -1;
	b->node = -1;
	b->zones = 0;
}

static char *render(const struct mem_table *t, const struct lsmem_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(lsmem_print(t, o, f), 0);
	fclose(f);
	return buf;
}

static void expect_text(const char *got, const char *want)
{
	if (strcmp(got, want) != 0) {
		print_error("--- want\n%s--- got\n%s---\n", want, got);
		fail();
	}
}

static void opts_cols(struct lsmem_opts *o, const char *cols)
{
	char err[128];

	lsmem_opts_init(o);
	if (cols)
		assert_int_equal(lsmem_opts_set_columns(o, cols, err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_finish(o, err, sizeof(err)), 0);
}

#define SEED_COLS "RANGE,SIZE,STATE,BLOCK,CONFIGURED,MEMMAP_ON_MEMORY"
#define SEED_HDR "RANGE                                 SIZE   STATE BLOCK CONFIGURED MEMMAP-ON-MEMORY\n"
/* libsmartcols widens SIZE to its width hint (5) once a value fills the header width */
#define SEED_HDR5 "RANGE                                  SIZE   STATE BLOCK CONFIGURED MEMMAP-ON-MEMORY\n"

/* Seed workflow, initial state: standby blocks listed from firmware as offline (C14). */
static void test_seed_initial_c14(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	opts_cols(&o, SEED_COLS);
	out = render(t, &o);
	expect_text(out, SEED_HDR
		    "0x0000000000000000-0x000000007fffffff   2G  online  0-15        yes               no\n"
		    "0x0000000080000000-0x00000000ffffffff   2G offline 16-31         no              yes\n"
		    "\n"
		    "Memory block size:                128M\n"
		    "Total online memory:                2G\n"
		    "Total offline memory:               2G\n"
		    "Memmap on memory parameter:        yes\n");
}

/* config=1 on block 16 (C7): it splits off the standby range by CONFIGURED. */
static void test_seed_configure16_split_by_configured(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	configure(t, 16, MEM_STATE_OFFLINE);
	opts_cols(&o, SEED_COLS);
	o.want_summary = false;
	out = render(t, &o);
	expect_text(out, SEED_HDR5
		    "0x0000000000000000-0x000000007fffffff    2G  online  0-15        yes               no\n"
		    "0x0000000080000000-0x0000000087ffffff  128M offline    16        yes              yes\n"
		    "0x0000000088000000-0x00000000ffffffff  1.9G offline 17-31         no              yes\n");
}

/* Block 5 offline and deconfigured (C11) keeps memmap 0: split by STATE and CONFIGURED. */
static void test_seed_block5_deconfigured(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	deconfigure(t, 5);
	opts_cols(&o, SEED_COLS);
	out = render(t, &o);
	expect_text(out, SEED_HDR5
		    "0x0000000000000000-0x0000000027ffffff  640M  online   0-4        yes               no\n"
		    "0x0000000028000000-0x000000002fffffff  128M offline     5         no               no\n"
		    "0x0000000030000000-0x000000007fffffff  1.3G  online  6-15        yes               no\n"
		    "0x0000000080000000-0x00000000ffffffff    2G offline 16-31         no              yes\n"
		    "\n"
		    "Memory block size:                128M\n"
		    "Total online memory:              1.9G\n"
		    "Total offline memory:             2.1G\n"
		    "Memmap on memory parameter:        yes\n");
}

/* Ranges merge across differing MEMMAP values when that column is not shown. */
static void test_merge_ignores_hidden_columns(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	mem_table_find(t, 5)->memmap_on_memory = 1;
	opts_cols(&o, "RANGE,BLOCK,STATE");
	o.want_summary = false;
	out = render(t, &o);
	expect_text(out, "RANGE                                 BLOCK   STATE\n"
			 "0x0000000000000000-0x000000007fffffff  0-15  online\n"
			 "0x0000000080000000-0x00000000ffffffff 16-31 offline\n");
	free(out);
	/* shown: block 5 is its own range */
	opts_cols(&o, "BLOCK,MEMMAP-ON-MEMORY");
	o.want_summary = false;
	out = render(t, &o);
	expect_text(out, "BLOCK MEMMAP-ON-MEMORY\n"
			 "  0-4               no\n"
			 "    5              yes\n"
			 " 6-15               no\n"
			 "16-31              yes\n");
}

/* -S none merges everything adjacent; -a lists every block. */
static void test_split_none_and_all(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	char err[128];
	_cleanup_free_ char *out = NULL;
	char *line;
	int n = 0;

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_columns(&o, "BLOCK,STATE", err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_set_split(&o, "none", err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), 0);
	o.want_summary = false;
	out = render(t, &o);
	expect_text(out, "BLOCK  STATE\n 0-31 online\n");
	free(out);

	opts_cols(&o, "BLOCK");
	o.list_all = true;
	o.want_summary = false;
	o.noheadings = true;
	out = render(t, &o);
	for (line = out; (line = strchr(line, '\n')); line++)
		n++;
	assert_int_equal(n, 32);
	assert_non_null(strstr(out, "\n   31\n")); /* BLOCK keeps its header width */

	/* -S with -a is refused like lsmem does */
	lsmem_opts_init(&o);
	o.list_all = true;
	assert_int_equal(lsmem_opts_set_split(&o, "STATE", err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), -EINVAL);
}

/* Host without sys/firmware/memory (C0): no CONFIGURED/MEMMAP columns, no standby rows. */
static void test_no_firmware_c0(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(false);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	t->memmap_param[0] = '\0'; /* no P1 parameter: no summary line for it */
	opts_cols(&o, SEED_COLS);
	out = render(t, &o);
	expect_text(out, "RANGE                                 SIZE  STATE BLOCK\n"
			 "0x0000000000000000-0x000000007fffffff   2G online  0-15\n"
			 "\n"
			 "Memory block size:                128M\n"
			 "Total online memory:                2G\n"
			 "Total offline memory:               0B\n");
}

/* Default columns and REMOVABLE left empty for offline ranges. */
static void test_default_columns(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	configure(t, 16, MEM_STATE_ONLINE);
	opts_cols(&o, NULL);
	o.want_summary = false;
	out = render(t, &o);
	expect_text(out, "RANGE                                  SIZE   STATE REMOVABLE BLOCK\n"
			 "0x0000000000000000-0x0000000087ffffff  2.1G  online       yes  0-16\n"
			 "0x0000000088000000-0x00000000ffffffff  1.9G offline           17-31\n");
}

/* ZONES splits ranges and joins valid_zones words with '/' (A9). */
static void test_zones_and_node(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	configure(t, 16, MEM_STATE_OFFLINE);
	configure(t, 17, MEM_STATE_ONLINE);
	opts_cols(&o, "BLOCK,NODE,ZONES");
	o.want_summary = false;
	out = render(t, &o);
	/* deconfigured blocks have no devices entry: lsmem shows node 0, no zones */
	expect_text(out, "BLOCK NODE          ZONES\n"
			 " 0-15    0            DMA\n"
			 "   16    0 Movable/Normal\n"
			 "   17    0        Movable\n"
			 "18-31    0 \n"); /* empty last cell: libsmartcols pads nothing */
}

static void test_json_types(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	char err[128];
	_cleanup_free_ char *out = NULL;
	json_t *j, *arr, *row;
	json_error_t jerr;

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_columns(&o, "RANGE,SIZE,STATE,REMOVABLE,NODE,CONFIGURED",
						err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_set_format(&o, LSMEM_FMT_JSON, err, sizeof(err)), 0);
	o.bytes = true;
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), 0);
	out = render(t, &o);
	j = json_loads(out, 0, &jerr);
	assert_non_null(j);
	arr = json_object_get(j, "memory");
	assert_true(json_is_array(arr));
	assert_int_equal(json_array_size(arr), 2);
	row = json_array_get(arr, 0);
	assert_string_equal(json_string_value(json_object_get(row, "range")),
			    "0x0000000000000000-0x000000007fffffff");
	assert_true(json_is_integer(json_object_get(row, "size")));
	assert_int_equal(json_integer_value(json_object_get(row, "size")), 2048 * MiB);
	assert_true(json_is_true(json_object_get(row, "removable")));
	assert_true(json_is_integer(json_object_get(row, "node")));
	assert_string_equal(json_string_value(json_object_get(row, "configured")), "yes");
	row = json_array_get(arr, 1);
	assert_string_equal(json_string_value(json_object_get(row, "state")), "offline");
	/* no summary after JSON */
	assert_null(strstr(out, "Memory block size"));
	json_decref(j);
}

static void test_raw_pairs(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	char err[128];
	_cleanup_free_ char *out = NULL;

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_columns(&o, "BLOCK,STATE,MEMMAP-ON-MEMORY", err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_set_format(&o, LSMEM_FMT_PAIRS, err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_set_format(&o, LSMEM_FMT_RAW, err, sizeof(err)), -EINVAL);
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), 0);
	out = render(t, &o);
	expect_text(out, "BLOCK=\"0-15\" STATE=\"online\" MEMMAP-ON-MEMORY=\"no\"\n"
			 "BLOCK=\"16-31\" STATE=\"offline\" MEMMAP-ON-MEMORY=\"yes\"\n");
	free(out);

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_columns(&o, "BLOCK,STATE", err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_set_format(&o, LSMEM_FMT_RAW, err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), 0);
	out = render(t, &o);
	expect_text(out, "BLOCK STATE\n0-15 online\n16-31 offline\n");
}

static void test_summary_only_bytes(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = seed_machine(true);
	struct lsmem_opts o;
	char err[128];
	_cleanup_free_ char *out = NULL;

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_summary(&o, NULL, err, sizeof(err)), 0);
	o.bytes = true;
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), 0);
	out = render(t, &o);
	expect_text(out, "Memory block size:                     134217728\n"
			 "Total online memory:                  2147483648\n"
			 "Total offline memory:                 2147483648\n"
			 "Memmap on memory parameter:                  yes\n");

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_summary(&o, "sometimes", err, sizeof(err)), -EINVAL);
	assert_int_equal(lsmem_opts_set_summary(&o, "only", err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_set_format(&o, LSMEM_FMT_JSON, err, sizeof(err)), 0);
	assert_int_equal(lsmem_opts_finish(&o, err, sizeof(err)), -EINVAL);
}

static void test_column_parsing(void **state)
{
	struct lsmem_opts o;
	char err[128];

	assert_int_equal(lsmem_column_id("memmap_on_memory"), LSMEM_COL_MEMMAP);
	assert_int_equal(lsmem_column_id("MEMMAP-ON-MEMORY"), LSMEM_COL_MEMMAP);
	assert_int_equal(lsmem_column_id("zones"), LSMEM_COL_ZONES);
	assert_int_equal(lsmem_column_id("RANG"), -EINVAL);

	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_columns(&o, "RANGE,BOGUS", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "unknown column: BOGUS");
	assert_int_equal(lsmem_opts_set_columns(&o, "+NODE,ZONES", err, sizeof(err)), 0);
	assert_int_equal(o.ncolumns, 7);
	assert_int_equal(o.columns[5], LSMEM_COL_NODE);
	assert_int_equal(lsmem_opts_set_columns(&o, "SIZE", err, sizeof(err)), 0);
	assert_int_equal(o.ncolumns, 1);
	assert_int_equal(lsmem_opts_set_columns(&o, "", err, sizeof(err)), -EINVAL);
	assert_int_equal(lsmem_opts_set_columns(&o,
		"RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,"
		"RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE,RANGE", err, sizeof(err)), -E2BIG);
}

/* util-linux size_to_human_string(): thousandths rounded to one decimal. */
static void test_size_format_like_util_linux(void **state)
{
	static const struct { uint64_t b; const char *s; } cases[] = {
		{ 0, "0B" }, { 1023, "1023B" }, { 1024, "1K" }, { 128 * MiB, "128M" },
		{ 640 * MiB, "640M" }, { 1920 * MiB, "1.9G" }, { 1408 * MiB, "1.4G" },
		{ 1280 * MiB, "1.3G" }, { 2176 * MiB, "2.1G" },
		/* 1.449G: 1/1024ths rounding would give 1.5G */
		{ 1024 * MiB + 460 * MiB, "1.4G" },
		{ 1024 * MiB + 1000 * MiB, "2G" }, /* 1.977G rounds up to the next unit */
		{ 24ULL * 1024 * MiB, "24G" },
	};
	char buf[32];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_format(cases[i].b, buf, sizeof(buf));
		assert_string_equal(buf, cases[i].s);
	}
}

/*
 * The shape of util-linux's aarch64 dump: 128M blocks from memory8192 on,
 * no memory0, a hole (8317-8318), valid_zones and node links.  ZONES and NODE
 * must show: lsmem finds them on the first block present.
 */
static void make_aarch64_tree(const char *root)
{
	gt_put(root, "sys/devices/system/memory/block_size_bytes", "8000000\n");
	gt_put(root, "sys/devices/system/memory/auto_online_blocks", "offline\n");
	for (uint64_t id = 8192; id <= 8319; id++) {
		if (id == 8317 || id == 8318)
			continue;
		gt_dev_block(root, id, "online", id < 8200 ? "DMA" : "Normal", 0);
	}
}

static char *render_tree(const char *root, struct lsmem_opts *o)
{
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct lsmem_need need;
	char err[256];

	lsmem_opts_need(o, &need);
	assert_int_equal(lsmem_read_tree(root, &need, &t, err, sizeof(err)), 0);
	return render(t, o);
}

static void test_tree_first_block_not_memory0(void **state)
{
	char *root = gt_mktemp();
	struct lsmem_opts o;
	_cleanup_free_ char *out = NULL;

	make_aarch64_tree(root);
	opts_cols(&o, "RANGE,SIZE,STATE,BLOCK,NODE,ZONES");
	out = render_tree(root, &o);
	expect_text(out, "RANGE                                  SIZE  STATE     BLOCK NODE  ZONES\n"
			 "0x0000010000000000-0x000001003fffffff    1G online 8192-8199    0    DMA\n"
			 "0x0000010040000000-0x00000103e7ffffff 14.6G online 8200-8316    0 Normal\n"
			 "0x00000103f8000000-0x00000103ffffffff  128M online      8319    0 Normal\n"
			 "\n"
			 "Memory block size:                128M\n"
			 "Total online memory:             15.8G\n"
			 "Total offline memory:               0B\n");
	gt_rm(root);
}

/* Only what the output needs is read: a block with a broken valid_zones or
 * removable does not matter unless those columns are asked for. */
static void test_tree_reads_only_needed(void **state)
{
	char *root = gt_mktemp();
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct lsmem_opts o;
	struct lsmem_need need;
	char err[256];

	gt_machine(root, 4, 4, 1);
	opts_cols(&o, NULL);
	lsmem_opts_need(&o, &need);
	assert_true(need.removable);
	assert_false(need.zones);
	assert_false(need.node);
	assert_false(need.memmap);
	assert_true(need.memmap_param);
	assert_int_equal(lsmem_read_tree(root, &need, &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 8);
	assert_true(t->has_firmware);
	assert_string_equal(t->memmap_param, "Y");
	assert_int_equal(t->blocks[0].state, MEM_STATE_ONLINE);
	assert_int_equal(t->blocks[0].removable, 1);
	assert_string_equal(MEM_ZONES_TEXT(t->blocks[0].zones), ""); /* not read */
	assert_int_equal(t->blocks[0].node, -1);      /* not read */
	assert_false(t->blocks[5].configured);         /* config 0: standby */
	assert_int_equal(t->blocks[5].memmap_on_memory, -1);
	mem_table_free(TAKE_PTR(t));

	/* -S NODE with -o RANGE: the split column is read, the summary alone reads states */
	opts_cols(&o, "RANGE");
	assert_int_equal(lsmem_opts_set_split(&o, "NODE,MEMMAP-ON-MEMORY", err, sizeof(err)), 0);
	lsmem_opts_need(&o, &need);
	assert_true(need.node);
	assert_true(need.memmap);
	assert_false(need.removable);
	assert_int_equal(lsmem_read_tree(root, &need, &t, err, sizeof(err)), 0);
	assert_int_equal(t->blocks[0].node, 0);
	assert_int_equal(t->blocks[5].memmap_on_memory, 1);
	lsmem_opts_init(&o);
	assert_int_equal(lsmem_opts_set_summary(&o, "only", err, sizeof(err)), 0);
	lsmem_opts_need(&o, &need);
	assert_false(need.removable || need.node || need.zones || need.memmap);
	gt_rm(root);
}

/* No block_size_bytes: ENOENT naming the file; not hex: EINVAL. */
static void test_tree_errors(void **state)
{
	char *root = gt_mktemp();
	_cleanup_mem_table_ struct mem_table *t = NULL;
	struct lsmem_need need = { 0 };
	char err[512];

	assert_int_equal(lsmem_read_tree(root, &need, &t, err, sizeof(err)), -ENOENT);
	gt_put(root, "sys/devices/system/memory/block_size_bytes", "zz\n");
	assert_int_equal(lsmem_read_tree(root, &need, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "block_size_bytes"));
	assert_null(t);
	gt_rm(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seed_initial_c14),
		cmocka_unit_test(test_seed_configure16_split_by_configured),
		cmocka_unit_test(test_seed_block5_deconfigured),
		cmocka_unit_test(test_merge_ignores_hidden_columns),
		cmocka_unit_test(test_split_none_and_all),
		cmocka_unit_test(test_no_firmware_c0),
		cmocka_unit_test(test_default_columns),
		cmocka_unit_test(test_zones_and_node),
		cmocka_unit_test(test_json_types),
		cmocka_unit_test(test_raw_pairs),
		cmocka_unit_test(test_summary_only_bytes),
		cmocka_unit_test(test_column_parsing),
		cmocka_unit_test(test_size_format_like_util_linux),
		cmocka_unit_test(test_tree_first_block_not_memory0),
		cmocka_unit_test(test_tree_reads_only_needed),
		cmocka_unit_test(test_tree_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
