/* SPDX-License-Identifier: MIT */
/* memgrant-host serve's control law (providers/host/serve/serve_law.c), and a
 * guest line's generation (serve_gmsg.c): bounded
 * grow steps, the dead band, the floor (use plus reserve), min/max,
 * cooldowns, slack that must last, and the fair share of a short budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "providers/host/serve/serve.h"

#define M (1ull << 20)
#define G (1ull << 30)
#define B (128 * M)

static struct serve_policy pol(void)
{
	struct serve_policy p;
	serve_policy_defaults(&p);
	p.max = 4 * G;
	p.step = 512 * M;
	p.shrink_step = 256 * M;
	p.reserve = 256 * M;
	p.slack_after = 60000;
	return p;
}

static struct law_input in0(void)
{
	return (struct law_input){ .block = B, .have_usage = true, .mem_total = 2 * G, .mem_available = 1 * G,
				   .slack_since = -1, .now = 100000 };
}

static void test_grow_by_deficit_bounded_by_max(void **state)
{
	struct serve_policy p = pol();
	struct law_input in = in0();
	struct law_out o;
	(void)state;

	in.request = 10 * G; /* a guest asking for far too much gets what is left below max */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, p.max);
	in.request = 1536 * M; /* a deficit above the step: all of it, in one grow */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, 1536 * M);
	in.pending = p.max - 512 * M; /* a grant given up on may still be applied: room for 512M */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, 512 * M);
	in.pending = 0;
	in.request = 100 * M; /* rounded up to a block */
	law_decide(&p, &in, &o);
	assert_int_equal(o.bytes, B);
	in.request = 512 * M;
	in.granted = p.max - B; /* never past max */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, B);
	in.granted = p.max;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
}

/* A guest's status line (serve_gmsg.c): its generation is taken up to 2^53,
 * the largest integer every JSON reader keeps exact, and refused above. */
static void test_gmsg_generation_edge(void **state)
{
	static const char max[] = "{\"type\":\"status\",\"id\":\"g-1\",\"generation\":9007199254740992,\"state\":\"applied\"}";
	static const char over[] = "{\"type\":\"status\",\"id\":\"g-1\",\"generation\":9007199254740993,\"state\":\"applied\"}";
	struct gmsg m;
	char why[256] = "";
	(void)state;

	gmsg_parse(max, strlen(max), &m, why, sizeof(why));
	if (m.kind != GMSG_STATUS)
		fail_msg("2^53 refused: %s", why);
	assert_int_equal(m.generation, 1ull << 53);
	gmsg_parse(over, strlen(over), &m, why, sizeof(why));
	assert_int_equal(m.kind, GMSG_BAD);
	assert_non_null(strstr(why, "generation"));
}

static void test_cooldown_and_dead_band(void **state)
{
	struct serve_policy p = pol();
	struct law_input in = in0();
	struct law_out o;
	(void)state;

	in.request = 512 * M;
	in.grow_ok_at = in.now + 1;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	/* an offer smaller than a block is inside the dead band */
	in = in0();
	in.granted = 1 * G;
	in.offer = 64 * M;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	assert_false(o.refused_floor);
	/* a shrink cooldown (or backoff) holds an offer back */
	in.offer = 256 * M;
	in.shrink_ok_at = in.now + 1;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	/* and ends at its time: at shrink_ok_at the offer is taken */
	in.shrink_ok_at = in.now;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
}

static void test_shrink_floor(void **state)
{
	struct serve_policy p = pol();
	struct law_input in = in0();
	struct law_out o;
	(void)state;

	in.granted = 1 * G;
	in.offer = 1 * G;
	in.mem_available = 1 * G; /* room above the reserve: 768M */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, 768 * M); /* an offer goes whole, shrink_step (256M) or not */
	assert_true(o.refused_floor);
	in.offer = 512 * M;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, 512 * M);
	assert_false(o.refused_floor);
	in.offer = 1 * G;
	/* the guest uses nearly everything: the offer is refused, not executed */
	in.mem_available = 300 * M;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	assert_true(o.refused_floor);
	assert_int_equal(o.floor_total, 2 * G - 300 * M + 256 * M);
	/* partly: cut to what keeps use plus reserve */
	in.mem_available = 256 * M + 200 * M;
	p.shrink_step = 1 * G;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, B);
	assert_true(o.refused_floor);
	/* no usage figures from the agent: no shrink at all */
	in.have_usage = false;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	assert_true(o.refused_floor);
}

static void test_min_and_slack(void **state)
{
	struct serve_policy p = pol();
	struct law_input in = in0();
	struct law_out o;
	(void)state;

	p.min = 256 * M;
	law_decide(&p, &in, &o); /* below min: grow to it */
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, 256 * M);
	in.granted = 512 * M;
	in.offer = 1 * G; /* never below min */
	in.mem_available = 2 * G;
	p.shrink_step = 4 * G;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, 256 * M);
	/* slack without an offer: only once it lasted slack_after */
	in.offer = 0;
	in.slack_since = in.now - 59000;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	in.slack_since = in.now - 60000;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	/* slack nobody offered goes by shrink_step */
	in.granted = 2 * G;
	p.shrink_step = 256 * M;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, 256 * M);
}

static void test_share(void **state)
{
	uint64_t want[3] = { 512 * M, 512 * M, 128 * M }, gran[3] = { B, B, B }, give[3];
	(void)state;

	law_share(want, gran, 3, 4 * G, give); /* enough for all */
	assert_int_equal(give[0], 512 * M);
	assert_int_equal(give[2], 128 * M);
	law_share(want, gran, 2, 512 * M, give); /* two for one: half each */
	assert_int_equal(give[0], 256 * M);
	assert_int_equal(give[1], 256 * M);
	law_share(want, gran, 3, 640 * M, give); /* the small one fully, the rest split */
	assert_int_equal(give[2], 128 * M);
	assert_int_equal(give[0], 256 * M);
	assert_int_equal(give[1], 256 * M);
	law_share(want, gran, 2, 384 * M, give); /* rounding: 3 blocks, never more than the budget */
	assert_int_equal(give[0] + give[1], 384 * M);
	assert_true(give[0] >= B && give[1] >= B);
	law_share(want, gran, 2, 100 * M, give); /* below one block: nothing */
	assert_int_equal(give[0] + give[1], 0);
}

/* The baselines the libvirt test and bench/autoscale compare with. */
static void test_baseline_laws(void **state)
{
	struct serve_policy p = pol();
	struct law_input in = in0();
	struct law_out o;
	(void)state;

	/* MoM-style: 5 % of max (4G: 204.8M, a block multiple up: 256M) below 20 % available */
	p.law = SERVE_LAW_MOM;
	in.have_usage = true;
	in.mem_total = 2 * G;
	in.mem_available = 300 * M;
	in.request = 2 * G; /* not read */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, 256 * M);
	in.grow_ok_at = in.now + 1; /* once per cooldown */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);
	in.grow_ok_at = 0;
	in.mem_available = 1 * G; /* 50 %: shrink 5 % */
	in.granted = 1 * G;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, 256 * M);
	in.mem_available = 600 * M; /* 29 %: nothing */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_NONE);

	/* naive: what is asked, at once, cooldown or not; what is offered, down to the floor */
	p.law = SERVE_LAW_NAIVE;
	in = in0();
	in.grow_ok_at = in.shrink_ok_at = in.now + 100000;
	in.request = 1536 * M;
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_GROW);
	assert_int_equal(o.bytes, 1536 * M);
	in.request = 0;
	in.granted = 1 * G;
	in.offer = 1 * G;
	in.have_usage = true;
	in.mem_total = 3 * G;
	in.mem_available = 256 * M + 640 * M; /* room for 640M above the reserve */
	law_decide(&p, &in, &o);
	assert_int_equal(o.action, LAW_SHRINK);
	assert_int_equal(o.bytes, 640 * M);
	assert_true(o.refused_floor);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_by_deficit_bounded_by_max),
		cmocka_unit_test(test_gmsg_generation_edge),
		cmocka_unit_test(test_cooldown_and_dead_band),
		cmocka_unit_test(test_shrink_floor),
		cmocka_unit_test(test_min_and_slack),
		cmocka_unit_test(test_share),
		cmocka_unit_test(test_baseline_laws),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
