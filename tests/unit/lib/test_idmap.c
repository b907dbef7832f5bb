/* SPDX-License-Identifier: MIT */
/*
 * The block id map (lib/idmap.h): put, get, replace, delete amid collisions
 * and growth, checked against a plain array.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "lib/idmap.h"

static void test_put_get_replace(void **state)
{
	struct idmap m = { 0 };
	uint64_t v = 0;

	(void)state;
	assert_false(idmap_get(&m, 7, &v));
	assert_false(idmap_del(&m, 7));
	assert_int_equal(idmap_put(&m, 7, 70), 0);
	assert_true(idmap_get(&m, 7, &v));
	assert_int_equal(v, 70);
	assert_int_equal(idmap_put(&m, 7, 71), 0);
	assert_true(idmap_get(&m, 7, &v));
	assert_int_equal(v, 71);
	assert_int_equal(m.n, 1);
	assert_int_equal(idmap_put(&m, UINT64_MAX, 1), -EINVAL);
	assert_true(idmap_get(&m, 7, NULL));
	idmap_clear(&m);
	assert_false(idmap_get(&m, 7, NULL));
	assert_int_equal(m.n, 0);
	idmap_free(&m);
}

/* 20,000 ids (runs of consecutive ids and scattered ones), a third deleted
 * in between: every look-up agrees with a plain array */
static void test_many_with_deletes(void **state)
{
	enum { N = 20000 };
	struct idmap m = { 0 };
	uint64_t *ids = malloc(N * sizeof(*ids));
	bool *in = calloc(N, sizeof(*in));
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		ids[i] = i < N / 2 ? 262144 - i : (uint64_t)i * 1048583u;
		assert_int_equal(idmap_put(&m, ids[i], i), 0);
		in[i] = true;
		if (i % 3 == 2) {
			assert_true(idmap_del(&m, ids[i - 1]));
			in[i - 1] = false;
		}
	}
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(idmap_get(&m, ids[i], &v), in[i]);
		if (in[i])
			assert_int_equal(v, i);
	}
	for (size_t i = 0; i < N; i++)
		if (in[i])
			assert_true(idmap_del(&m, ids[i]));
	assert_int_equal(m.n, 0);
	for (size_t i = 0; i < N; i++)
		assert_false(idmap_get(&m, ids[i], NULL));
	idmap_free(&m);
	free(ids);
	free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_replace),
		cmocka_unit_test(test_many_with_deletes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
