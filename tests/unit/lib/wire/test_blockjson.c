/* SPDX-License-Identifier: MIT */
/*
 * mem_table <-> JSON: round trip, and every malformed input refused with
 * -EINVAL and a message naming the field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/wire/blockjson.h"
#include "lib/util.h"

static struct mem_table *sample(void)
{
	struct mem_table *t = mem_table_new(256ULL << 20);
	struct mem_block *b;

	assert_non_null(t);
	t->has_firmware = true;
	strcpy(t->auto_online, "online_movable");
	strcpy(t->memmap_param, "Y");
	b = mem_table_add(t, 3);
	b->in_firmware = true;
	b->configured = true;
	b->memmap_on_memory = 0;
	b->state = MEM_STATE_ONLINE;
	b->removable = 1;
	b->node = 0;
	b->zones = mem_zones_parse("Normal");
	b = mem_table_add(t, 9); /* standby (C14) */
	b->in_firmware = true;
	b->memmap_on_memory = 1;
	b = mem_table_add(t, 5);
	b->in_firmware = true;
	b->configured = true;
	b->memmap_on_memory = 1;
	b->state = MEM_STATE_GOING_OFFLINE;
	b->node = 1;
	b->zones = mem_zones_parse("Movable");
	mem_table_sort(t);
	return t;
}

static void test_round_trip(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = sample();
	_cleanup_mem_table_ struct mem_table *u = NULL;
	json_t *j = NULL;
	char err[160] = "";
	char *text;

	assert_int_equal(blockjson_from_table(t, &j), 0);
	/* through text, as over the wire */
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(text);
	assert_non_null(strstr(text, "\"start\":2415919104")); /* 9 * 256M */
	assert_non_null(strstr(text, "\"state\":\"going-offline\""));
	j = json_loads(text, 0, NULL);
	free(text);
	assert_int_equal(blockjson_to_table(j, &u, err, sizeof(err)), 0);
	json_decref(j);

	assert_int_equal(u->block_size, t->block_size);
	assert_true(u->has_firmware);
	assert_string_equal(u->auto_online, "online_movable");
	assert_string_equal(u->memmap_param, "Y");
	assert_int_equal(u->n, 3);
	for (size_t i = 0; i < 3; i++)
		assert_memory_equal(&u->blocks[i], &t->blocks[i], sizeof(struct mem_block));
}

static void test_unknowns_are_null(void **state)
{
	_cleanup_mem_table_ struct mem_table *t = mem_table_new(128ULL << 20);
	_cleanup_mem_table_ struct mem_table *u = NULL;
	json_t *j = NULL;
	char err[160];
	struct mem_block *b = mem_table_add(t, 0); /* no firmware (C0): -1 fields */

	b->configured = true;
	b->state = MEM_STATE_ONLINE;
	assert_int_equal(blockjson_from_table(t, &j), 0);
	assert_true(json_is_null(json_object_get(j, "auto_online_blocks")));
	assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "blocks"), 0),
						 "memmap_on_memory")));
	assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "blocks"), 0),
						 "node")));
	assert_int_equal(blockjson_to_table(j, &u, err, sizeof(err)), 0);
	assert_int_equal(u->blocks[0].memmap_on_memory, -1);
	assert_int_equal(u->blocks[0].node, -1);
	assert_int_equal(u->blocks[0].removable, -1);
	json_decref(j);
}

/* A run ("count") stands for that many blocks with the same values. */
static void test_runs(void **state)
{
	const char *text = "{\"block_size\":128,\"has_firmware\":true,\"blocks\":["
			   "{\"id\":4,\"in_firmware\":true,\"configured\":true,\"state\":\"online\",\"zones\":\"Movable\",\"count\":3},"
			   "{\"id\":7,\"in_firmware\":true,\"configured\":false,\"state\":\"offline\"}]}";
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	struct mem_table *t = NULL;
	char err[256] = "";

	(void)state;
	assert_non_null(j);
	assert_int_equal(blockjson_to_table(j, &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 4);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(t->blocks[i].id, 4 + i);
		assert_true(t->blocks[i].configured);
		assert_int_equal(t->blocks[i].state, MEM_STATE_ONLINE);
		assert_string_equal(MEM_ZONES_TEXT(t->blocks[i].zones), "Movable");
	}
	assert_int_equal(t->blocks[3].id, 7);
	assert_false(t->blocks[3].configured);
	mem_table_free(t);
	json_decref(j);
}

static void expect_bad(const char *text, const char *msg)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	struct mem_table *t = NULL;
	char err[200] = "";

	assert_non_null(j);
	assert_int_equal(blockjson_to_table(j, &t, err, sizeof(err)), -EINVAL);
	assert_null(t);
	if (!strstr(err, msg)) {
		print_error("error '%s' does not mention '%s'\n", err, msg);
		fail();
	}
	json_decref(j);
}

#define HDR "{\"block_size\":134217728,\"has_firmware\":true,\"blocks\":["
#define OKB "\"id\":1,\"in_firmware\":true,\"configured\":true,\"state\":\"online\""

static void test_rejects_bad_input(void **state)
{
	expect_bad("[]", "expected a JSON object");
	expect_bad("{\"has_firmware\":true,\"blocks\":[]}", "block_size: missing");
	expect_bad("{\"block_size\":\"128M\",\"has_firmware\":true,\"blocks\":[]}", "block_size: expected an integer");
	expect_bad("{\"block_size\":100,\"has_firmware\":true,\"blocks\":[]}", "power of two");
	expect_bad("{\"block_size\":-4,\"has_firmware\":true,\"blocks\":[]}", "negative");
	expect_bad("{\"block_size\":128,\"has_firmware\":1,\"blocks\":[]}", "has_firmware: expected true or false");
	expect_bad("{\"block_size\":128,\"has_firmware\":true}", "blocks: missing");
	expect_bad("{\"block_size\":128,\"has_firmware\":true,\"blocks\":{}}", "blocks: expected an array");
	expect_bad(HDR "7]}", "blocks[0]: expected an object");
	expect_bad(HDR "{" OKB "},{\"in_firmware\":true,\"configured\":true,\"state\":\"online\"}]}", "blocks[1].id: missing");
	expect_bad(HDR "{\"id\":1.5,\"in_firmware\":true,\"configured\":true,\"state\":\"online\"}]}", "blocks[0].id: expected an integer");
	expect_bad(HDR "{\"id\":1,\"in_firmware\":true,\"configured\":true,\"state\":\"up\"}]}", "blocks[0].state");
	expect_bad(HDR "{\"id\":1,\"in_firmware\":true,\"configured\":true}]}", "blocks[0].state: missing");
	expect_bad(HDR "{\"id\":1,\"in_firmware\":true,\"configured\":false,\"state\":\"online\"}]}", "C14");
	expect_bad(HDR "{\"id\":1,\"in_firmware\":false,\"configured\":false,\"state\":\"offline\"}]}", "must be configured");
	expect_bad(HDR "{" OKB ",\"start\":5}]}", "blocks[0].start: does not match");
	expect_bad(HDR "{" OKB ",\"memmap_on_memory\":\"yes\"}]}", "blocks[0].memmap_on_memory");
	expect_bad(HDR "{" OKB ",\"node\":-2}]}", "blocks[0].node");
	expect_bad(HDR "{" OKB ",\"zones\":7}]}", "blocks[0].zones: expected a string");
	expect_bad(HDR "{" OKB ",\"zones\":\"" "Normal Movable Normal Movable Normal Movable Normal Movable" "\"}]}",
		   "blocks[0].zones: longer than");
	expect_bad(HDR "{" OKB "},{" OKB "}]}", "id 1 appears twice");
	expect_bad(HDR "{" OKB ",\"count\":0}]}", "blocks[0].count: expected 1 or more");
	expect_bad(HDR "{" OKB ",\"count\":16777217}]}", "blocks[0].count: expected 1 or more");
	expect_bad(HDR "{" OKB ",\"count\":-1}]}", "blocks[0].count");
	expect_bad(HDR "{" OKB ",\"count\":2},{\"id\":2,\"in_firmware\":true,\"configured\":true,\"state\":\"online\"}]}",
		   "id 2 appears twice");
	/* a start that does not fit the JSON integer it is printed as (the fuzzer's find) */
	expect_bad("{\"block_size\":134217728,\"has_firmware\":true,\"blocks\":[{\"id\":121474836248,"
		   "\"in_firmware\":true,\"configured\":true,\"state\":\"online\"}]}",
		   "blocks[0].id: too large for the block size");
	expect_bad("{\"block_size\":134217728,\"has_firmware\":true,\"blocks\":[{\"id\":4294967296,"
		   "\"in_firmware\":true,\"configured\":true,\"state\":\"online\"}]}",
		   "blocks[0].id: larger than a block id (the kernel's 32-bit device id)");
	expect_bad("{\"block_size\":1099511627776,\"has_firmware\":true,\"blocks\":[{\"id\":8388607,"
		   "\"in_firmware\":true,\"configured\":true,\"state\":\"online\",\"count\":2}]}",
		   "blocks[0].count: the run goes past the end of the address space");
	expect_bad("{\"block_size\":134217728,\"has_firmware\":true,\"blocks\":[{\"id\":4294967295,"
		   "\"in_firmware\":true,\"configured\":true,\"state\":\"online\",\"count\":2}]}",
		   "blocks[0].count: the run goes past the last block id");
	expect_bad("{\"block_size\":128,\"has_firmware\":false,\"blocks\":[{" OKB "}]}", "no firmware (C0)");
	expect_bad("{\"block_size\":128,\"has_firmware\":true,\"auto_online_blocks\":5,\"blocks\":[]}",
		   "auto_online_blocks: expected a string");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_unknowns_are_null),
		cmocka_unit_test(test_rejects_bad_input),
		cmocka_unit_test(test_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
