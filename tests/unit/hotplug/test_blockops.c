/* SPDX-License-Identifier: MIT */
/*
 * Executor primitives on the sim: order of steps, read-before-write, undo.
 * A recording wrapper around the sim backend logs every write and can
 * refuse chosen ones, for failures the sim has no fault for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "hotplug/blockops.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <inttypes.h>
#include <limits.h>

struct rec {
	struct hp_backend base;
	struct hp_backend *inner;
	char log[512];        /* "config=1 state=online_movable ..." */
	enum hp_attr fail_attr;
	const char *fail_value; /* NULL: never fail */
	int fail_err;
	bool fail_after_write; /* the write reaches the sim, then fails (cut just after the kernel finished) */
};

static const char *attr_word(enum hp_attr a)
{
	static const char *const w[] = { "config", "memmap", "online", "state", "auto" };
	return w[a];
}

static int rec_discover(struct hp_backend *b, struct mem_table **out)
{
	return hp_discover(((struct rec *)b)->inner, out);
}

static int rec_read_block(struct hp_backend *b, uint64_t id, struct mem_block *out)
{
	return hp_read_block(((struct rec *)b)->inner, id, out);
}

static int rec_write(struct hp_backend *b, enum hp_attr attr, uint64_t id, const char *value)
{
	struct rec *r = (struct rec *)b;
	size_t n = strlen(r->log);

	snprintf(r->log + n, sizeof(r->log) - n, "%s%s%" PRIu64 "=%s", n ? " " : "", attr_word(attr), id, value);
	if (r->fail_value && attr == r->fail_attr && streq(value, r->fail_value)) {
		if (r->fail_after_write)
			assert_int_equal(r->inner->ops->write_attr(r->inner, attr, id, value), 0);
		return r->fail_err;
	}
	return r->inner->ops->write_attr(r->inner, attr, id, value);
}

static int rec_read_auto(struct hp_backend *b, char *buf, size_t len)
{
	struct rec *r = (struct rec *)b;
	return r->inner->ops->read_auto_online(r->inner, buf, len);
}

static void rec_close(struct hp_backend *b)
{
	(void)b; /* owned by the fixture */
}

static const struct hp_backend_ops rec_ops = {
	.name = "recording sim",
	.discover = rec_discover,
	.read_block = rec_read_block,
	.write_attr = rec_write,
	.read_auto_online = rec_read_auto,
	.close = rec_close,
};

struct fx {
	char dir[64];
	char state[128];
	struct rec rec;
	struct hp_backend *b; /* &rec.base */
};

static int setup_with(void **state, bool firmware)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct sim_params p;

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/memgrant-exec.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->state, sizeof(f->state), "%s/sim.json", f->dir);
	sim_params_default(&p);
	p.has_firmware = firmware;
	if (sim_init(f->state, &p) < 0 || hp_sim_open(f->state, &f->rec.inner) < 0)
		return -1;
	f->rec.base.ops = &rec_ops;
	f->rec.base.root = f->rec.inner->root;
	f->b = &f->rec.base;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, true);
}

static int setup_nofw(void **state)
{
	return setup_with(state, false);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	hp_backend_close(f->rec.inner);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static void set_faults(struct fx *f, uint64_t *eio, uint64_t *busy, uint64_t *enomem)
{
	struct sim_faults fl = {
		.configure_eio = eio, .n_configure_eio = eio ? 1 : 0,
		.offline_ebusy = busy, .n_offline_ebusy = busy ? 1 : 0,
		.online_enomem = enomem, .n_online_enomem = enomem ? 1 : 0,
	};
	assert_int_equal(sim_set_faults(f->state, &fl), 0);
}

static void read_block(struct fx *f, uint64_t id, struct mem_block *m)
{
	assert_int_equal(hp_read_block(f->b, id, m), 0);
}

static void test_step_names(void **state)
{
	(void)state;
	assert_string_equal(block_step_name(STEP_NONE), "none");
	assert_string_equal(block_step_name(STEP_READ), "read");
	assert_string_equal(block_step_name(STEP_MEMMAP), "memmap_on_memory");
	assert_string_equal(block_step_name(STEP_CONFIGURE), "configure");
	assert_string_equal(block_step_name(STEP_ONLINE), "online");
	assert_string_equal(block_step_name(STEP_OFFLINE), "offline");
	assert_string_equal(block_step_name(STEP_DECONFIGURE), "deconfigure");
}

static void test_bring_up_and_take_down(void **state)
{
	struct fx *f = *state;
	struct block_result res;

	/* kernel order: config=1 then online (C7, W5); memmap already 1 (C2) */
	assert_int_equal(block_bring_up(f->b, 16, 1, ONLINE_MOVABLE, &res), 0);
	assert_string_equal(f->rec.log, "config16=1 state16=online_movable");
	assert_int_equal(res.failed_step, STEP_NONE);
	assert_int_equal(res.err, 0);
	assert_false(res.was_noop);
	assert_false(res.auto_onlined);
	assert_true(res.after.configured);
	assert_int_equal(res.after.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(res.after.zones), "Movable");

	f->rec.log[0] = '\0';
	assert_int_equal(block_take_down(f->b, 16, &res), 0);
	assert_string_equal(f->rec.log, "state16=offline config16=0"); /* W6, C11 */
	assert_int_equal(res.failed_step, STEP_NONE);
	assert_false(res.after.configured);
	assert_int_equal(res.after.memmap_on_memory, 1);
}

static void test_bring_up_changes_memmap_first(void **state)
{
	struct fx *f = *state;
	struct block_result res;

	/* C12: memmap_on_memory only while deconfigured, so before config=1 */
	assert_int_equal(block_bring_up(f->b, 17, 0, ONLINE_KERNEL, &res), 0);
	assert_string_equal(f->rec.log, "memmap17=0 config17=1 state17=online_kernel");
	assert_int_equal(res.after.memmap_on_memory, 0);
	assert_string_equal(MEM_ZONES_TEXT(res.after.zones), "Normal");
}

/* A reader whose rows came from a lazy discover: memmap_on_memory unread
 * until it is asked with STEP_MEMMAP, which reads the backend. */
struct lazy_reader {
	char asked[64]; /* the steps it was asked after, "N" none, "M" memmap, "R" read */
};

static int lazy_read(void *ctx, struct hp_backend *b, uint64_t id, enum block_step after, struct mem_block *out)
{
	struct lazy_reader *lr = ctx;
	size_t n = strlen(lr->asked);
	int r = hp_read_block(b, id, out);

	if (n + 1 < sizeof(lr->asked)) {
		lr->asked[n] = after == STEP_NONE ? 'N' : after == STEP_MEMMAP ? 'M' : after == STEP_READ ? 'R' : '.';
		lr->asked[n + 1] = '\0';
	}
	if (r == 0 && after == STEP_NONE && !out->configured)
		out->memmap_on_memory = MEM_MEMMAP_UNREAD;
	return r;
}

/* An unread memmap_on_memory is read before the writes: written only when
 * it differs, put back by the undo to what it was (and the reader told),
 * reported as it is even when the grant keeps it (-1). */
static void test_bring_up_reads_unread_memmap(void **state)
{
	struct fx *f = *state;
	struct lazy_reader lr = { "" };
	struct block_reader rd = { .read = lazy_read, .ctx = &lr };
	struct block_result res;
	struct mem_block m;
	uint64_t b18 = 18;

	assert_int_equal(block_bring_up_r(f->b, &rd, 16, 1, ONLINE_MOVABLE, &res), 0);
	assert_string_equal(f->rec.log, "config16=1 state16=online_movable"); /* C2: it was 1 */
	assert_true(startswith(lr.asked, "NM"));
	assert_int_equal(res.after.memmap_on_memory, 1);

	f->rec.log[0] = lr.asked[0] = '\0';
	assert_int_equal(block_bring_up_r(f->b, &rd, 17, -1, ONLINE_MOVABLE, &res), 0);
	assert_string_equal(f->rec.log, "config17=1 state17=online_movable");
	assert_int_equal(res.after.memmap_on_memory, 1);

	f->rec.log[0] = lr.asked[0] = '\0';
	set_faults(f, &b18, NULL, NULL);
	assert_int_equal(block_bring_up_r(f->b, &rd, 18, 0, ONLINE_MOVABLE, &res), -EIO);
	assert_string_equal(f->rec.log, "memmap18=0 config18=1 memmap18=1");
	/* read before, after the write and after its undo: a reader's row
	 * never keeps the value the undo took back (no notification tells) */
	assert_string_equal(lr.asked, "NMMM");
	read_block(f, 18, &m);
	assert_false(m.configured);
	assert_int_equal(m.memmap_on_memory, 1);
}

static void test_noops(void **state)
{
	struct fx *f = *state;
	struct block_result res;

	assert_int_equal(block_bring_up(f->b, 5, -1, ONLINE_DEFAULT, &res), 0);
	assert_true(res.was_noop);
	assert_int_equal(block_take_down(f->b, 20, &res), 0);
	assert_true(res.was_noop);
	assert_string_equal(f->rec.log, ""); /* read before write: nothing written */

	/* a configured offline block only needs onlining */
	assert_int_equal(block_configure(f->b, 18), 0);
	f->rec.log[0] = '\0';
	assert_int_equal(block_bring_up(f->b, 18, -1, ONLINE_MOVABLE, &res), 0);
	assert_string_equal(f->rec.log, "state18=online_movable");
	assert_false(res.was_noop);
	/* an offline configured block only needs deconfiguring */
	assert_int_equal(block_offline(f->b, 18), 0);
	f->rec.log[0] = '\0';
	assert_int_equal(block_take_down(f->b, 18, &res), 0);
	assert_string_equal(f->rec.log, "config18=0");
}

static void test_configure_eio_restores_memmap(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;
	uint64_t b16 = 16;

	set_faults(f, &b16, NULL, NULL);
	assert_int_equal(block_bring_up(f->b, 16, 0, ONLINE_MOVABLE, &res), -EIO); /* C7 */
	assert_int_equal(res.failed_step, STEP_CONFIGURE);
	assert_int_equal(res.err, -EIO);
	assert_int_equal(res.undo_err, 0);
	assert_string_equal(f->rec.log, "memmap16=0 config16=1 memmap16=1");
	read_block(f, 16, &m);
	assert_false(m.configured);
	assert_int_equal(m.memmap_on_memory, 1);
	assert_false(res.after.configured);
	assert_int_equal(res.after.memmap_on_memory, 1);
}

static void test_online_failure_rolls_back(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;
	uint64_t b16 = 16;

	set_faults(f, NULL, NULL, &b16);
	assert_int_equal(block_bring_up(f->b, 16, 0, ONLINE_MOVABLE, &res), -ENOMEM); /* W5 */
	assert_int_equal(res.failed_step, STEP_ONLINE);
	assert_int_equal(res.undo_err, 0);
	assert_string_equal(f->rec.log,
			    "memmap16=0 config16=1 state16=online_movable config16=0 memmap16=1");
	read_block(f, 16, &m);
	assert_false(m.configured);
	assert_int_equal(m.memmap_on_memory, 1);
}

static void test_online_failure_on_configured_block_keeps_it(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;
	uint64_t b16 = 16;

	/* the executor did not configure it, so it does not deconfigure it */
	assert_int_equal(block_configure(f->b, 16), 0);
	set_faults(f, NULL, NULL, &b16);
	f->rec.log[0] = '\0';
	assert_int_equal(block_bring_up(f->b, 16, -1, ONLINE_DEFAULT, &res), -ENOMEM);
	assert_string_equal(f->rec.log, "state16=online");
	read_block(f, 16, &m);
	assert_true(m.configured);
}

static void test_offline_ebusy_keeps_block_online(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;
	uint64_t b5 = 5;

	set_faults(f, NULL, &b5, NULL);
	assert_int_equal(block_take_down(f->b, 5, &res), -EBUSY); /* W6 */
	assert_int_equal(res.failed_step, STEP_OFFLINE);
	assert_int_equal(res.err, -EBUSY);
	assert_string_equal(f->rec.log, "state5=offline");
	read_block(f, 5, &m);
	assert_true(m.configured);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	assert_int_equal(res.after.state, MEM_STATE_ONLINE);
}

/* An offline cut at its deadline (EINTR, hp_write_with_deadline()) is
 * judged by the block's state read back: still online, the step failed;
 * offline (the kernel finished just before the kill), it is done. */
static void test_offline_cut_reads_the_kernel(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;

	f->rec.fail_attr = HP_ATTR_STATE;
	f->rec.fail_value = "offline";
	f->rec.fail_err = -EINTR;
	assert_int_equal(block_take_down(f->b, 5, &res), -EINTR);
	assert_int_equal(res.failed_step, STEP_OFFLINE);
	assert_string_equal(f->rec.log, "state5=offline");
	read_block(f, 5, &m);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	assert_int_equal(res.after.state, MEM_STATE_ONLINE);

	f->rec.log[0] = '\0';
	f->rec.fail_after_write = true;
	assert_int_equal(block_take_down(f->b, 5, &res), 0);
	assert_int_equal(res.err, 0);
	assert_true(res.steps_done & (1u << STEP_OFFLINE));
	assert_string_equal(f->rec.log, "state5=offline config5=0");
	read_block(f, 5, &m);
	assert_false(m.configured);
}

static void test_deconfigure_failure_reonlines_in_old_zone(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;

	assert_int_equal(block_configure(f->b, 16), 0);
	assert_int_equal(block_online(f->b, 16, ONLINE_MOVABLE), 0);
	f->rec.log[0] = '\0';
	f->rec.fail_attr = HP_ATTR_CONFIG;
	f->rec.fail_value = "0";
	f->rec.fail_err = -EBUSY;
	assert_int_equal(block_take_down(f->b, 16, &res), -EBUSY);
	assert_int_equal(res.failed_step, STEP_DECONFIGURE);
	assert_int_equal(res.undo_err, 0);
	assert_string_equal(f->rec.log, "state16=offline config16=0 state16=online_movable");
	read_block(f, 16, &m);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable");
}

static void test_failed_undo_is_reported(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	uint64_t b16 = 16;

	set_faults(f, NULL, NULL, &b16);
	f->rec.fail_attr = HP_ATTR_CONFIG;
	f->rec.fail_value = "0";
	f->rec.fail_err = -EIO;
	assert_int_equal(block_bring_up(f->b, 16, 0, ONLINE_MOVABLE, &res), -ENOMEM);
	assert_int_equal(res.failed_step, STEP_ONLINE);
	assert_int_equal(res.undo_err, -EIO);
	/* memmap cannot be restored while the block is still configured */
	assert_string_equal(f->rec.log, "memmap16=0 config16=1 state16=online_movable config16=0");
	assert_true(res.after.configured);
}

/* A writer that is gone (the privileged helper died) is not a refusal of the
 * block: nothing is undone through it, and its errno is what comes back. */
static void test_writer_gone_no_undo(void **state)
{
	struct fx *f = *state;
	struct block_result res;
	struct mem_block m;

	f->rec.fail_attr = HP_ATTR_STATE;
	f->rec.fail_value = "online_movable";
	f->rec.fail_err = -HP_EWRITER_GONE;
	assert_int_equal(block_bring_up(f->b, 16, 0, ONLINE_MOVABLE, &res), -HP_EWRITER_GONE);
	assert_int_equal(res.failed_step, STEP_ONLINE);
	assert_int_equal(res.undo_err, 0);
	assert_string_equal(f->rec.log, "memmap16=0 config16=1 state16=online_movable"); /* no config16=0 */
	read_block(f, 16, &m);
	assert_true(m.configured); /* left for recovery, which reads the kernel */

	/* memmap set, configure gone: memmap stays as set */
	f->rec.log[0] = '\0';
	f->rec.fail_attr = HP_ATTR_CONFIG;
	f->rec.fail_value = "1";
	assert_int_equal(block_bring_up(f->b, 17, 0, ONLINE_MOVABLE, &res), -HP_EWRITER_GONE);
	assert_string_equal(f->rec.log, "memmap17=0 config17=1");

	/* taken offline, deconfigure gone: not onlined again */
	f->rec.fail_value = NULL;
	assert_int_equal(block_configure(f->b, 18), 0);
	assert_int_equal(block_online(f->b, 18, ONLINE_MOVABLE), 0);
	f->rec.log[0] = '\0';
	f->rec.fail_value = "0";
	assert_int_equal(block_take_down(f->b, 18, &res), -HP_EWRITER_GONE);
	assert_int_equal(res.failed_step, STEP_DECONFIGURE);
	assert_string_equal(f->rec.log, "state18=offline config18=0");
	read_block(f, 18, &m);
	assert_int_equal(m.state, MEM_STATE_OFFLINE);
}

static void test_auto_online_detected(void **state)
{
	struct fx *f = *state;
	struct block_result res;

	assert_int_equal(hp_set_auto_online(f->b, "online_movable"), 0); /* A2, C7 */
	f->rec.log[0] = '\0';
	assert_int_equal(block_bring_up(f->b, 16, -1, ONLINE_KERNEL, &res), 0);
	assert_true(res.auto_onlined);
	/* the online write of the sequence is refused (W2) and changes nothing */
	assert_string_equal(f->rec.log, "config16=1 state16=online_kernel");
	assert_int_equal(res.steps_done, (1u << STEP_CONFIGURE));
	assert_int_equal(res.after.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(res.after.zones), "Movable"); /* the kernel's choice, reported */
}

static void test_read_failure(void **state)
{
	struct fx *f = *state;
	struct block_result res;

	assert_int_equal(block_bring_up(f->b, 99, -1, ONLINE_DEFAULT, &res), -ENOENT);
	assert_int_equal(res.failed_step, STEP_READ);
	assert_int_equal(block_take_down(f->b, 99, &res), -ENOENT);
	assert_int_equal(res.failed_step, STEP_READ);
}

static void test_without_firmware(void **state)
{
	struct fx *f = *state;
	struct block_result res;

	/* C0: standby is present and configured: only online/offline */
	assert_int_equal(block_bring_up(f->b, 16, 1, ONLINE_MOVABLE, &res), 0);
	assert_string_equal(f->rec.log, "state16=online_movable");
	f->rec.log[0] = '\0';
	assert_int_equal(block_take_down(f->b, 16, &res), 0);
	assert_string_equal(f->rec.log, "state16=offline");
	assert_true(res.after.configured);
	assert_int_equal(res.after.state, MEM_STATE_OFFLINE);
	f->rec.log[0] = '\0';
	assert_int_equal(block_take_down(f->b, 16, &res), 0);
	assert_true(res.was_noop);
	assert_string_equal(f->rec.log, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_names),
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(test_bring_up_and_take_down),
		T(test_bring_up_changes_memmap_first),
		T(test_bring_up_reads_unread_memmap),
		T(test_noops),
		T(test_configure_eio_restores_memmap),
		T(test_online_failure_rolls_back),
		T(test_online_failure_on_configured_block_keeps_it),
		T(test_offline_ebusy_keeps_block_online),
		T(test_offline_cut_reads_the_kernel),
		T(test_deconfigure_failure_reonlines_in_old_zone),
		T(test_failed_undo_is_reported),
		T(test_writer_gone_no_undo),
		T(test_auto_online_detected),
		T(test_read_failure),
		cmocka_unit_test_setup_teardown(test_without_firmware, setup_nofw, teardown),
	};
	return cmocka_run_group_tests_name("executor", tests, NULL, NULL);
}
