/* SPDX-License-Identifier: MIT */
/*
 * The operators' words (hotplug/words.h) and lsmem-style sizes (lib/size.h):
 * zones, memmap spellings, block lists, address ranges, sizes in blocks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/size.h"
#include "hotplug/words.h"

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

static void test_zones_any_case(void **state)
{
	static const struct {
		const char *s;
		enum mem_zone z;
	} ok[] = {
		{ "Movable", MEM_ZONE_MOVABLE }, { "movable", MEM_ZONE_MOVABLE }, { "MOVABLE", MEM_ZONE_MOVABLE },
		{ "Normal", MEM_ZONE_NORMAL },   { "normal", MEM_ZONE_NORMAL },   { "kernel", MEM_ZONE_NORMAL },
		{ "online_movable", MEM_ZONE_MOVABLE },
	};
	enum mem_zone z;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(words_zone_parse(ok[i].s, false, &z), 0);
		assert_int_equal(z, ok[i].z);
	}
	assert_int_equal(words_zone_parse("auto", false, &z), -EINVAL);
	assert_int_equal(words_zone_parse("Auto", true, &z), 0);
	assert_int_equal(z, MEM_ZONE_AUTO);
	assert_int_equal(words_zone_parse("DMA", true, &z), -EINVAL);
	assert_int_equal(words_zone_parse("", true, &z), -EINVAL);
	assert_int_equal(words_zone_parse(NULL, true, &z), -EINVAL);
	assert_string_equal(words_zone_name(MEM_ZONE_MOVABLE), "movable");
	assert_string_equal(words_zone_name(MEM_ZONE_NORMAL), "normal");
}

/* The kernel's zone words (valid_zones) round-trip through the one zone enum;
 * an unknown word is MEM_ZONE_UNKNOWN, never a zone one could ask for. */
static void test_kernel_zone_words(void **state)
{
	static const char *const words[] = { "DMA", "DMA32", "Normal", "Highmem", "Movable", "Device", "none" };

	(void)state;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		enum mem_zone z = words_zone_kernel_parse(words[i], strlen(words[i]));

		assert_int_not_equal(z, MEM_ZONE_UNKNOWN);
		assert_string_equal(words_zone_kernel_name(z), words[i]);
	}
	assert_int_equal(words_zone_kernel_parse("movable", 7), MEM_ZONE_MOVABLE);
	assert_int_equal(words_zone_kernel_parse("Normal Movable", 6), MEM_ZONE_NORMAL);
	assert_int_equal(words_zone_kernel_parse("auto", 4), MEM_ZONE_UNKNOWN);
	assert_int_equal(words_zone_kernel_parse("Foo", 3), MEM_ZONE_UNKNOWN);
	assert_int_equal(words_zone_kernel_parse("DM", 2), MEM_ZONE_UNKNOWN);
	assert_string_equal(words_zone_kernel_name(MEM_ZONE_UNKNOWN), "Unknown");
	assert_string_equal(words_zone_kernel_name((enum mem_zone)99), "Unknown");
}

/* A row's valid_zones (A9) is typed: the kernel's words in its order, 4 bits
 * each; the text comes back the same (the kernel's spellings), a word memgrant
 * does not know stays a place ("Unknown"), words past MEM_ZONES_MAX are
 * dropped, and a row stays 24 bytes. */
static void test_zone_lists(void **state)
{
	static const char *const same[] = { "", "Movable", "Normal Movable", "Movable Normal", "none",
					    "DMA32 Normal Movable", "DMA Normal Movable Device" };
	char buf[MEM_ZONES_TEXT_MAX];
	mem_zones z;

	(void)state;
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		assert_string_equal(MEM_ZONES_TEXT(mem_zones_parse(same[i])), same[i]);
	z = mem_zones_parse("Normal Movable\n");
	assert_int_equal(mem_zones_first(z), MEM_ZONE_NORMAL);
	assert_true(mem_zones_has(z, MEM_ZONE_MOVABLE));
	assert_false(mem_zones_has(z, MEM_ZONE_DMA));
	assert_false(mem_zones_is(z, MEM_ZONE_NORMAL));
	assert_true(mem_zones_is(mem_zones_parse("Movable"), MEM_ZONE_MOVABLE));
	assert_int_equal(mem_zones_parse(" \n"), 0);
	assert_string_equal(MEM_ZONES_TEXT(mem_zones_parse("  movable   Foo ")), "Movable Unknown");
	z = mem_zones_parse("DMA DMA32 Normal Highmem Movable Device none Normal Movable");
	assert_string_equal(mem_zones_format(z, buf, sizeof(buf)), "DMA DMA32 Normal Highmem Movable Device none Normal");
	assert_string_equal(mem_zones_format(z, buf, 10), "DMA DMA32");
	assert_string_equal(mem_zones_format(z, buf, 12), "DMA DMA32");
	assert_int_equal(sizeof(struct mem_block), 16);
}

static void test_memmap_spellings(void **state)
{
	static const char *const on[] = { "on", "ON", "1", "true", "True", "always" };
	static const char *const off[] = { "off", "Off", "0", "false", "FALSE", "never" };
	int m = 99;

	(void)state;
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		assert_int_equal(words_memmap_parse(on[i], false, &m), 0);
		assert_int_equal(m, WORDS_MEMMAP_ON);
		assert_int_equal(words_memmap_parse(off[i], false, &m), 0);
		assert_int_equal(m, WORDS_MEMMAP_OFF);
	}
	assert_int_equal(words_memmap_parse("auto", false, &m), -EINVAL);
	assert_int_equal(words_memmap_parse("auto", true, &m), 0);
	assert_int_equal(m, WORDS_MEMMAP_AUTO);
	assert_int_equal(words_memmap_parse("maybe", true, &m), -EINVAL);
	assert_int_equal(words_memmap_parse("yes", true, &m), -EINVAL);
	assert_int_equal(words_memmap_parse("2", true, &m), -EINVAL);
	assert_string_equal(words_memmap_name(WORDS_MEMMAP_ON), "on");
	assert_string_equal(words_memmap_name(WORDS_MEMMAP_OFF), "off");
	assert_string_equal(words_memmap_name(WORDS_MEMMAP_AUTO), "auto");
}

static void test_block_lists(void **state)
{
	uint64_t *ids = NULL;
	size_t n = 0;
	char why[256];
	static const uint64_t want[] = { 16, 17, 20, 21, 22, 23 };

	(void)state;
	assert_int_equal(words_block_list("16,17,20-23", 1024, &ids, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(ids, want, sizeof(want));
	free(ids);

	static const char *const bad[] = { "", ",1", "1,", "1,,2", "a", "1-", "-1", "3-1", "1-2-3", "1 ,2", "0x10" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ids = NULL;
		n = 0;
		why[0] = '\0';
		assert_int_not_equal(words_block_list(bad[i], 1024, &ids, &n, why, sizeof(why)), 0);
		assert_true(why[0] != '\0');
		free(ids);
	}
	ids = NULL;
	n = 0;
	assert_int_equal(words_block_list("3-1", 1024, &ids, &n, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "ends before it starts"));
	assert_int_equal(words_block_list("0-2000", 1024, &ids, &n, why, sizeof(why)), -ERANGE);
	assert_non_null(strstr(why, "more than 1024 blocks"));
	free(ids);
}

static void test_addr_ranges(void **state)
{
	uint64_t first = 0, last = 0;
	char why[256];

	(void)state;
	assert_true(words_is_addr_range("0x80000000-0x8fffffff"));
	assert_false(words_is_addr_range("16-23"));
	/* chmem's example: 256M from 2G, 128M blocks = blocks 16-17 */
	assert_int_equal(words_addr_range("0x80000000-0x8fffffff", 128 * MiB, &first, &last, why, sizeof(why)), 0);
	assert_int_equal(first, 16);
	assert_int_equal(last, 17);
	assert_int_equal(words_addr_range("0X80000000-0X87FFFFFF", 128 * MiB, &first, &last, why, sizeof(why)), 0);
	assert_int_equal(first, 16);
	assert_int_equal(last, 16);

	assert_int_equal(words_addr_range("0x80000000-0x8ffffffe", 128 * MiB, &first, &last, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "aligned to the memory block size (128M)"));
	assert_non_null(strstr(why, "0x80000000-0x8fffffff"));
	assert_int_equal(words_addr_range("0x90000000-0x8fffffff", 128 * MiB, &first, &last, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "ends before it starts"));
	assert_int_equal(words_addr_range("0x8g000000-0x8fffffff", 128 * MiB, &first, &last, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(words_addr_range("80000000-0x8fffffff", 128 * MiB, &first, &last, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(words_addr_range("0x80000000", 128 * MiB, &first, &last, why, sizeof(why)), -EINVAL);
}

static void test_sizes_as_lsmem_prints(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(size_parse("1.5G", &v), 0);
	assert_int_equal(v, 1536 * MiB);
	assert_int_equal(size_parse("2.25G", &v), 0);
	assert_int_equal(v, 2304 * MiB);
	assert_int_equal(size_parse("0.5G", &v), 0);
	assert_int_equal(v, 512 * MiB);
	assert_int_equal(size_parse("1.375GiB", &v), 0);
	assert_int_equal(v, 1408 * MiB);
	/* rounded down to a byte: 1.3G is 1395864371.2 bytes */
	assert_int_equal(size_parse("1.3G", &v), 0);
	assert_int_equal(v, UINT64_C(1395864371));
	assert_int_equal(size_parse("128M", &v), 0);
	assert_int_equal(v, 128 * MiB);
	assert_int_equal(size_parse("1.5", &v), -EINVAL);
	assert_int_equal(size_parse("1.G", &v), -EINVAL);
	assert_int_equal(size_parse(".5G", &v), -EINVAL);
	assert_int_equal(size_parse("1.5.1G", &v), -EINVAL);
	assert_int_equal(size_parse("1,5G", &v), -EINVAL);
	assert_int_equal(size_parse("1.0000000001G", &v), -EINVAL);
	assert_int_equal(size_parse("16383.9999E", &v), -ERANGE);
}

/* Command-line sizes are chmem's: no unit is MiB; the configuration and the
 * wire protocol keep bare numbers as bytes. */
static void test_sizes_as_chmem_takes_them(void **state)
{
	uint64_t v = 0;

	(void)state;
	assert_int_equal(size_parse_cli("512", &v), 0);
	assert_int_equal(v, 512 * MiB);
	assert_int_equal(size_parse_cli("1.5", &v), 0);
	assert_int_equal(v, 1536 * 1024);
	assert_int_equal(size_parse_cli("1G", &v), 0);
	assert_int_equal(v, 1024 * MiB);
	assert_int_equal(size_parse_cli("512B", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(size_parse_cli("", &v), -EINVAL);
	assert_int_equal(size_parse_cli("-1", &v), -EINVAL);
	assert_int_equal(size_parse_cli("17592186044416", &v), -ERANGE); /* 2^44 MiB = 2^64 bytes */
	assert_int_equal(size_parse_cli("123456789012345678901234567890123456789012345678901234567890123", &v),
			 -ERANGE);
	/* the non-command-line parser: bytes */
	assert_int_equal(size_parse("512", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(size_parse("512B", &v), 0);
	assert_int_equal(v, 512);
	assert_int_equal(size_parse("1.5B", &v), -EINVAL);
}

static void test_size_in_blocks(void **state)
{
	char why[256], buf[32];

	(void)state;
	assert_int_equal(words_size_in_blocks(1536 * MiB, "1.5G", 128 * MiB, why, sizeof(why)), 0);
	assert_int_equal(words_size_in_blocks(UINT64_C(1395864371), "1.3G", 128 * MiB, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "size 1.3G is not a multiple of the block size 128M: the nearest valid "
				 "sizes are 1.25G and 1.375G");
	assert_int_equal(words_size_in_blocks(100 * MiB, NULL, 128 * MiB, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "size 100M is not a multiple of the block size 128M: the smallest valid "
				 "size is 128M");
	assert_int_equal(words_size_in_blocks(UINT64_C(1395864371), NULL, 128 * MiB, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "size 1.3G is not a multiple of the block size 128M: the nearest valid "
				 "sizes are 1.25G and 1.375G");
	assert_int_equal(words_size_in_blocks(0, "0", 256 * MiB, why, sizeof(why)), -EINVAL);

	words_size_exact(1408 * MiB, buf, sizeof(buf));
	assert_string_equal(buf, "1.375G");
	words_size_exact(1536 * MiB, buf, sizeof(buf));
	assert_string_equal(buf, "1.5G");
	words_size_exact(2304 * MiB, buf, sizeof(buf));
	assert_string_equal(buf, "2.25G");
	words_size_exact(2 * GiB, buf, sizeof(buf));
	assert_string_equal(buf, "2G");
	words_size_exact(GiB + MiB, buf, sizeof(buf));
	assert_string_equal(buf, "1025M");
	words_size_exact(100, buf, sizeof(buf));
	assert_string_equal(buf, "100B");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zones_any_case),      cmocka_unit_test(test_kernel_zone_words),
		cmocka_unit_test(test_zone_lists),
		cmocka_unit_test(test_memmap_spellings),
		cmocka_unit_test(test_block_lists),         cmocka_unit_test(test_addr_ranges),
		cmocka_unit_test(test_sizes_as_lsmem_prints), cmocka_unit_test(test_size_in_blocks),
		cmocka_unit_test(test_sizes_as_chmem_takes_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
