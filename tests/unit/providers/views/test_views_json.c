/* SPDX-License-Identifier: MIT */
/*
 * The engine's typed port written as JSON (lib/wire/report_json.h,
 * views_json.h): the exact shape of a status report, of a plan, of a
 * sync's answer and of the block table with owners; and the journal's
 * decoder giving back the report it was given.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "lib/json.h"
#include "lib/util.h"
#include "lib/wire/report_json.h"
#include "providers/views/views_json.h"

#define MIB (1024ull * 1024)

static char *dump(json_t *j)
{
	char *s;

	assert_non_null(j);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	assert_non_null(s);
	return s;
}

/* A revocation in progress: a block given back, one that failed, a busy one. */
static void fill(struct report *r)
{
	static char d0[] = "by size: newest first";
	static char *decisions[] = { d0 };
	static struct report_block blocks[2] = {
		{ .block = 17, .configured = false, .memmap_on_memory = -1, .state = "offline" },
		{ .block = 18, .configured = true, .memmap_on_memory = 1, .state = "online", .zone = "Movable",
		  .error_code = "EBUSY", .error_message = "offline: device busy" },
	};
	static struct report_busy busy[1] = { { .block = 18, .attempts = 3, .error = "EBUSY" } };

	memset(r, 0, sizeof(*r));
	r->agent = "guest";
	snprintf(r->id, sizeof(r->id), "r-1");
	r->generation = 7;
	r->state = MSG_STATE_IN_PROGRESS;
	r->kind = MSG_REVOKE;
	r->requested_bytes = 256 * MIB;
	r->applied_bytes = 128 * MIB;
	r->blocks = blocks;
	r->n_blocks = 2;
	r->block_size = 128 * MIB;
	r->online_bytes = 1024 * MIB;
	r->standby_bytes = 512 * MIB;
	r->decisions = decisions;
	r->n_decisions = 1;
	snprintf(r->source, sizeof(r->source), "local");
	r->blocks_total = 2;
	r->blocks_done = 1;
	snprintf(r->cancel_requested_by, sizeof(r->cancel_requested_by), "op");
	r->busy = busy;
	r->n_busy = 1;
	r->has_budget = true;
	r->budget_ms = 30000;
	r->budget_left_ms = 1200;
}

static const char REPORT[] =
	"{\"type\":\"status\",\"agent\":\"guest\",\"id\":\"r-1\",\"generation\":7,\"state\":\"in_progress\","
	"\"requested_bytes\":268435456,\"applied_bytes\":134217728,\"blocks\":["
	"{\"block\":17,\"range\":\"0x88000000-0x8fffffff\",\"configured\":false,\"memmap_on_memory\":null,"
	"\"state\":\"offline\",\"zone\":null,\"error\":null},"
	"{\"block\":18,\"range\":\"0x90000000-0x97ffffff\",\"configured\":true,\"memmap_on_memory\":true,"
	"\"state\":\"online\",\"zone\":\"Movable\",\"error\":{\"code\":\"EBUSY\",\"message\":\"offline: device busy\"}}],"
	"\"error\":null,\"memory\":{\"block_size\":134217728,\"online_bytes\":1073741824,\"standby_bytes\":536870912},"
	"\"decisions\":[\"by size: newest first\"],\"source\":\"local\",\"kind\":\"revoke\",\"blocks_total\":2,"
	"\"blocks_done\":1,\"cancel_requested_by\":\"op\",\"busy_blocks\":[{\"block\":18,\"attempts\":3,"
	"\"error\":\"EBUSY\"}],\"budget_ms\":30000,\"budget_left_ms\":1200}";

static void test_report_shape(void **state)
{
	struct report r;
	_cleanup_free_ char *s = NULL;

	(void)state;
	fill(&r);
	s = dump(report_to_json(&r));
	assert_string_equal(s, REPORT);
}

/* What the journal stored reads back as the same report. */
static void test_report_round_trip(void **state)
{
	struct report r, back;
	_cleanup_json_ json_t *j = NULL;
	_cleanup_free_ char *s = NULL;

	(void)state;
	fill(&r);
	j = report_to_json(&r);
	assert_int_equal(report_from_json(j, &back), 0);
	back.agent = "guest";
	assert_int_equal(back.state, MSG_STATE_IN_PROGRESS);
	assert_int_equal(back.kind, MSG_REVOKE);
	assert_int_equal(back.n_blocks, 2);
	assert_string_equal(back.blocks[1].error_code, "EBUSY");
	assert_int_equal(back.blocks[0].memmap_on_memory, -1);
	s = dump(report_to_json(&back));
	assert_string_equal(s, REPORT);
	report_clear(&back);
}

static void test_report_from_json_refuses(void **state)
{
	_cleanup_json_ json_t *plan = json_pack("{s:s}", "type", "plan");
	_cleanup_json_ json_t *bad_state = json_pack("{s:s,s:s}", "type", "status", "state", "dancing");
	struct report r;

	(void)state;
	assert_int_equal(report_from_json(plan, &r), -EINVAL);
	assert_int_equal(report_from_json(bad_state, &r), -EINVAL);
}

static void test_verdict_answers(void **state)
{
	struct engine_plan_block pb[1] = { { .block = 16, .decided = true, .memmap = 0, .zone = "Movable" } };
	char d0[] = "memmap off", d1[] = "zone movable";
	char *decisions[] = { d0, d1 };
	struct engine_plan plan = {
		.kind = MSG_GRANT, .requested_bytes = 128 * MIB, .block_size = 128 * MIB, .reason = "first fit",
		.blocks = pb, .n_blocks = 1, .decisions = decisions, .n_decisions = 2, .grant = true, .memmap = 0,
		.zone = "Movable", .memmap_bytes = 2 * MIB, .online_cost_bytes = 2 * MIB, .usable_bytes = 128 * MIB,
		.online_bytes_before = 1024 * MIB, .online_bytes_after = 1152 * MIB,
	};
	struct engine_verdict v = { .kind = ENGINE_ANSWERED, .plan = &plan };
	_cleanup_free_ char *p = dump(views_verdict_json(&v));
	_cleanup_free_ char *sync = NULL;

	(void)state;
	assert_string_equal(p, "{\"type\":\"plan\",\"dry_run\":true,\"kind\":\"grant\",\"requested_bytes\":134217728,"
			       "\"block_size\":134217728,\"reason\":\"first fit\",\"memmap_on_memory\":false,"
			       "\"zone\":\"Movable\",\"decisions\":[\"memmap off\",\"zone movable\"],"
			       "\"memmap_bytes\":2097152,\"memmap_in_granted_bytes\":0,\"online_cost_bytes\":2097152,"
			       "\"usable_bytes\":134217728,\"online_bytes_before\":1073741824,"
			       "\"online_bytes_after\":1207959552,\"blocks\":[{\"block\":16,"
			       "\"range\":\"0x0000000080000000-0x0000000087ffffff\",\"memmap_on_memory\":false,"
			       "\"zone\":\"Movable\"}]}");
	v = (struct engine_verdict){ .kind = ENGINE_ANSWERED, .sync = true, .nonce = 42 };
	sync = dump(views_verdict_json(&v));
	assert_string_equal(sync, "{\"type\":\"sync\",\"nonce\":42}");
	v = (struct engine_verdict){ .kind = ENGINE_REJECTED };
	assert_null(views_verdict_json(&v));
}

/* Runs: blocks that follow each other with the same values and owner. */
static void test_blocks_runs(void **state)
{
	struct mem_table *t = mem_table_new(128 * MIB);
	int32_t owner[4] = { ENGINE_OWNER_NONE, 0, 0, ENGINE_OWNER_FOREIGN };
	char grants[1][MSG_ID_MAX + 1] = { "g-1" };
	struct engine_blocks b = { .table = t, .owner = owner, .grants = grants, .n_grants = 1 };
	json_t *j = NULL, *arr;

	(void)state;
	assert_non_null(t);
	for (uint64_t id = 16; id < 20; id++) {
		struct mem_block *mb = mem_table_add(t, id);
		assert_non_null(mb);
		mb->configured = true;
		mb->state = MEM_STATE_ONLINE;
		mb->memmap_on_memory = -1;
		mb->removable = -1;
		mb->node = 0;
	}
	assert_int_equal(views_blocks_json(&b, true, &j), 0);
	arr = json_object_get(j, "blocks");
	assert_int_equal(json_array_size(arr), 3);
	assert_true(json_is_null(json_object_get(json_array_get(arr, 0), "owner")));
	assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "owner")), "g-1");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 1), "count")), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 2), "owner")), "foreign");
	json_decref(j);
	assert_int_equal(views_blocks_json(&b, false, &j), 0);
	arr = json_object_get(j, "blocks");
	assert_int_equal(json_array_size(arr), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 2), "owner")), "g-1");
	assert_null(json_object_get(json_array_get(arr, 2), "count"));
	json_decref(j);
	mem_table_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_shape),
		cmocka_unit_test(test_report_round_trip),
		cmocka_unit_test(test_report_from_json_refuses),
		cmocka_unit_test(test_verdict_answers),
		cmocka_unit_test(test_blocks_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
