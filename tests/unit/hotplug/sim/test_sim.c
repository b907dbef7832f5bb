/* SPDX-License-Identifier: MIT */
/*
 * The sim itself: parameters, the state file, faults, the tree, meminfo and
 * the seed workflows of kernel.md.  The per-rule behaviour is in
 * test_rules.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "hotplug/backend.h"
#include "hotplug/livetable.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/timeutil.h"
#include "lib/util.h"

#include <dirent.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define MiB (UINT64_C(1) << 20)
#define GiB (UINT64_C(1) << 30)

struct fx {
	char dir[64];
	char state[128];
	char tree[128];
	struct hp_backend *b;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/memgrant-sim.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->state, sizeof(f->state), "%s/sim.json", f->dir);
	snprintf(f->tree, sizeof(f->tree), "%s/sim.json.tree", f->dir);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	hp_backend_close(f->b);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/* Inits the seed machine with P (NULL: defaults) and opens it. */
static void fx_init(struct fx *f, const struct sim_params *p)
{
	struct sim_params d;

	if (!p) {
		sim_params_default(&d);
		p = &d;
	}
	assert_int_equal(sim_init(f->state, p), 0);
	assert_int_equal(hp_sim_open(f->state, &f->b), 0);
}

static void read_tree(struct fx *f, const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX];
	char *text = NULL;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", f->tree, rel);
	if (file_read_all(path, 1 << 20, &text, &n) < 0)
		fail_msg("cannot read %s", path);
	if (n && text[n - 1] == '\n')
		text[n - 1] = '\0';
	snprintf(buf, len, "%s", text);
	free(text);
}

static bool tree_has(struct fx *f, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", f->tree, rel);
	return lstat(path, &st) == 0;
}

/* ---- sim_init validation ---------------------------------------------------- */

static void test_init_rejects_bad_params(void **state)
{
	struct fx *f = *state;
	struct sim_params p;
	struct stat st;
	static const struct {
		uint64_t online, standby, bs;
		const char *auto_online, *tree;
		int err;
	} cases[] = {
		{ 2 * GiB, 2 * GiB, 96 * MiB, NULL, NULL, -EINVAL },   /* not a power of two */
		{ 2 * GiB, 2 * GiB, 512 * 1024, NULL, NULL, -EINVAL }, /* below 1 MiB */
		{ 2 * GiB, 2 * GiB, 0, NULL, NULL, -EINVAL },
		{ 0, 2 * GiB, 128 * MiB, NULL, NULL, -EINVAL },        /* no boot memory */
		{ 2 * GiB + MiB, 0, 128 * MiB, NULL, NULL, -EINVAL },  /* not a block multiple */
		{ 2 * GiB, 64 * MiB, 128 * MiB, NULL, NULL, -EINVAL },
		{ UINT64_MAX - 127 * MiB, 256 * MiB, 128 * MiB, NULL, NULL, -EINVAL }, /* overflow */
		{ 2 * GiB, 2 * GiB, 128 * MiB, "online_normal", NULL, -EINVAL },
		{ 2 * GiB, 2 * GiB, 128 * MiB, NULL, "/", -EINVAL },   /* never the real root */
		{ 2 * GiB, 2 * GiB, 128 * MiB, NULL, "/proc", -EINVAL },
		{ 1024 * GiB, 1024 * GiB, MiB, NULL, NULL, -E2BIG },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		/* qemu-user -L (the s390x test step) maps "/" and "/proc" onto
		 * its target root's, which are not this machine's there */
		if (cases[i].tree && getenv("TEST_WRAPPER") && *getenv("TEST_WRAPPER"))
			continue;
		sim_params_default(&p);
		p.online_bytes = cases[i].online;
		p.standby_bytes = cases[i].standby;
		p.block_size = cases[i].bs;
		if (cases[i].auto_online)
			p.auto_online = cases[i].auto_online;
		p.tree = cases[i].tree;
		if (sim_init(f->state, &p) != cases[i].err)
			fail_msg("case %zu: expected %s", i, errno_name(cases[i].err));
		assert_int_equal(stat(f->state, &st), -1); /* nothing written */
	}
	/* the smallest sensible machine works */
	sim_params_default(&p);
	p.online_bytes = MiB;
	p.standby_bytes = 0;
	p.block_size = MiB;
	assert_int_equal(sim_init(f->state, &p), 0);
}

/* ---- state file ------------------------------------------------------------ */

static void test_state_persists_across_open(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b2 = NULL;
	struct mem_block m;

	fx_init(f, NULL);
	assert_int_equal(block_configure(f->b, 16), 0);
	assert_int_equal(block_online(f->b, 16, ONLINE_MOVABLE), 0);
	hp_backend_close(f->b);
	f->b = NULL;
	assert_int_equal(hp_sim_open(f->state, &b2), 0);
	assert_string_equal(b2->root, f->tree);
	assert_int_equal(hp_read_block(b2, 16, &m), 0);
	assert_true(m.configured);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable");
	hp_backend_close(b2);
}

static void test_tree_rebuilt_when_missing(void **state)
{
	struct fx *f = *state;
	char buf[32];

	fx_init(f, NULL);
	assert_int_equal(block_configure(f->b, 20), 0);
	hp_backend_close(f->b);
	f->b = NULL;
	assert_int_equal(rm_rf(f->tree), 0);
	assert_int_equal(hp_sim_open(f->state, &f->b), 0);
	read_tree(f, "sys/devices/system/memory/memory20/state", buf, sizeof(buf));
	assert_string_equal(buf, "offline");
	assert_false(tree_has(f, "sys/devices/system/memory/memory21"));
}

/* Overwrites the state file with TEXT and checks it is refused with ERR and
 * a message containing WHAT, and that a write through an open backend
 * changes nothing. */
static void expect_rejected(struct fx *f, const char *text, int err, const char *what)
{
	struct hp_backend *b2 = NULL;
	char msg[256], *after = NULL;

	assert_int_equal(file_write_atomic(f->state, text, strlen(text), 0644), 0);
	assert_int_equal(sim_check_file(f->state, msg, sizeof(msg)), err);
	if (!strstr(msg, what) || !strstr(msg, f->state))
		fail_msg("message \"%s\" should name the file and \"%s\"", msg, what);
	assert_int_equal(hp_sim_open(f->state, &b2), err);
	assert_int_equal(block_configure(f->b, 16), err);
	assert_int_equal(sim_set_faults(f->state, &(struct sim_faults){ .latency_ms = 1 }), err);
	assert_int_equal(file_read_all(f->state, 1 << 20, &after, NULL), 0);
	assert_string_equal(after, text);
	free(after);
}

static void test_corrupt_state_rejected(void **state)
{
	struct fx *f = *state;
	char *good = NULL, msg[256];
	size_t len;

	fx_init(f, NULL);
	assert_int_equal(sim_check_file(f->state, msg, sizeof(msg)), 0);
	assert_int_equal(file_read_all(f->state, 1 << 20, &good, &len), 0);
	good[len / 2] = '\0'; /* truncated */
	expect_rejected(f, good, -EBADMSG, "line");
	expect_rejected(f, "", -EBADMSG, "corrupt or truncated");
	expect_rejected(f, "not json", -EBADMSG, "line 1");
	expect_rejected(f, "[1,2]", -EINVAL, "not a JSON object");
	expect_rejected(f, "{\"format\":3}", -EINVAL, "format");
	free(good);

	/* wrong types and inconsistent values in an otherwise good file */
	static const struct { const char *from, *to, *what; } edits[] = {
		{ "\"block_size\":134217728", "\"block_size\":\"128M\"", "block_size" },
		{ "\"block_size\":134217728", "\"block_size\":100000000", "block_size" },
		{ "\"used_bytes\":0", "\"used_bytes\":-1", "used_bytes" },
		{ "\"has_firmware\":true", "\"has_firmware\":1", "has_firmware" },
		{ "\"auto_online\":\"offline\"", "\"auto_online\":\"sometimes\"", "auto_online" },
		{ "\"latency_ms\":0", "\"latency_ms\":1.5", "latency_ms" },
		{ "\"configure_eio\":[]", "\"configure_eio\":[\"16\"]", "configure_eio" },
		{ "\"n_blocks\":32", "\"n_blocks\":7", "\"n_blocks\" must be" },
		{ "\"n_blocks\":32", "\"n_blocks\":\"32\"", "\"n_blocks\" must be" },
		{ "\"state_dir\":\"/", "\"state_dir\":\"", "\"state_dir\" must be" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(edits); i++) {
		char *text = NULL, *p, *edited;
		struct sim_params d;

		sim_params_default(&d);
		assert_int_equal(sim_init(f->state, &d), 0);
		assert_int_equal(file_read_all(f->state, 1 << 20, &text, &len), 0);
		p = strstr(text, edits[i].from);
		assert_non_null(p);
		assert_true(asprintf(&edited, "%.*s%s%s", (int)(p - text), text, edits[i].to,
				     p + strlen(edits[i].from)) > 0);
		expect_rejected(f, edited, -EINVAL, edits[i].what);
		free(text);
		free(edited);
	}
}

/* The seed machine in format 1 (every block in the descriptor), with block
 * 16 configured and online in Movable and BLOCK0 as block 0's entry. */
static char *v1_text(struct fx *f, const char *block0)
{
	char *text = NULL, *blocks = NULL, *tmp;

	for (int i = 0; i < 32; i++) {
		const char *b = i == 0 ? block0 : i < 16 ? "[true,false,\"online\",\"DMA\"]"
					: i == 16 ? "[true,true,\"online\",\"Movable\"]" : "[false,true,\"offline\",\"\"]";
		assert_true(asprintf(&tmp, "%s%s\n  %s", blocks ? blocks : "", i ? "," : "", b) > 0);
		free(blocks);
		blocks = tmp;
	}
	assert_true(asprintf(&text,
			     "{\n \"format\":1,\n \"block_size\":134217728,\n \"boot_blocks\":16,\n \"used_bytes\":0,\n"
			     " \"memmap_supported\":true,\n \"has_firmware\":true,\n \"refuse_memmap_eopnotsupp\":false,\n"
			     " \"auto_online\":\"offline\",\n \"tree\":\"%s\",\n"
			     " \"faults\":{\"configure_eio\":[],\"offline_ebusy\":[],\"online_enomem\":[],\"latency_ms\":0},\n"
			     " \"blocks\":[%s\n ]\n}\n", f->tree, blocks) > 0);
	free(blocks);
	return text;
}

/* A format 1 state file is converted on open; a bad one is refused as before. */
static void test_format1_migrated(void **state)
{
	struct fx *f = *state;
	struct mem_block m;
	char *text, buf[32], msg[256];
	static const struct { const char *block0, *what; } bad[] = {
		{ "[true,false,\"online\",\"HighMem\"]", "block 0: unknown zone" },
		{ "[true,false,\"busy\",\"DMA\"]", "block 0: unknown state" },
		{ "[false,false,\"online\",\"DMA\"]", "block 0: online but not configured" },
		{ "[true,false,\"online\"]", "block 0: must be" },
		{ "{}", "block 0: must be" },
	};

	fx_init(f, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		text = v1_text(f, bad[i].block0);
		expect_rejected(f, text, -EINVAL, bad[i].what);
		free(text);
	}
	hp_backend_close(f->b);
	f->b = NULL;
	text = v1_text(f, "[true,false,\"online\",\"DMA\"]");
	assert_int_equal(file_write_atomic(f->state, text, strlen(text), 0644), 0);
	free(text);
	assert_int_equal(sim_check_file(f->state, msg, sizeof(msg)), 0);
	assert_int_equal(hp_sim_open(f->state, &f->b), 0);
	assert_int_equal(file_read_all(f->state, 1 << 20, &text, NULL), 0);
	assert_non_null(strstr(text, "\"format\":2"));
	assert_null(strstr(text, "\"blocks\""));
	free(text);
	assert_int_equal(hp_read_block(f->b, 16, &m), 0);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable");
	read_tree(f, "sys/devices/system/memory/memory16/state", buf, sizeof(buf));
	assert_string_equal(buf, "online");
	assert_int_equal(hp_read_block(f->b, 17, &m), 0);
	assert_false(m.configured);
	/* and it works on from there */
	assert_int_equal(block_offline(f->b, 16), 0);
	assert_int_equal(block_deconfigure(f->b, 16), 0);
	assert_false(tree_has(f, "sys/devices/system/memory/memory16"));
}

/* Path of the records file holding block 0. */
static void records_path(struct fx *f, char *buf, size_t len)
{
	glob_t g;
	char pat[PATH_MAX];

	snprintf(pat, sizeof(pat), "%s.d/s.*/blocks.0", f->state);
	assert_int_equal(glob(pat, 0, NULL, &g), 0);
	assert_int_equal(g.gl_pathc, 1);
	snprintf(buf, len, "%s", g.gl_pathv[0]);
	globfree(&g);
}

/* A bad records file is refused by every entry point and left as it is. */
static void test_corrupt_records_rejected(void **state)
{
	struct fx *f = *state;
	static const struct { const char *from, *to, *what; } edits[] = {
		{ "\n10oD\n", "\n10oH\n", "block 0: unknown zone" },
		{ "\n10oD\n", "\n10xD\n", "block 0: unknown state" },
		{ "\n10oD\n", "\n00oD\n", "block 0: online but not configured" },
		{ "\n10oD\n", "\n10-D\n", "block 0: offline block with zone" },
		{ "\n10oD\n", "\n10o\n", "must hold 32 lines" },
		{ "\n10oD\n", "\n2\noD\n", "block 0: must be 4 characters" },
		{ "# blocks 0-31", "# blocks 1-32", "must start with" },
	};
	char path[PATH_MAX], msg[512], *good = NULL, *after = NULL;
	struct hp_backend *b2 = NULL;
	size_t len;

	fx_init(f, NULL);
	records_path(f, path, sizeof(path));
	assert_int_equal(file_read_all(path, 1 << 20, &good, &len), 0);
	for (size_t i = 0; i < ARRAY_SIZE(edits); i++) {
		char *p = strstr(good, edits[i].from), *edited;

		assert_non_null(p);
		assert_true(asprintf(&edited, "%.*s%s%s", (int)(p - good), good, edits[i].to,
				     p + strlen(edits[i].from)) > 0);
		assert_int_equal(file_write_atomic(path, edited, strlen(edited), 0644), 0);
		assert_int_equal(sim_check_file(f->state, msg, sizeof(msg)), -EINVAL);
		if (!strstr(msg, edits[i].what) || !strstr(msg, path))
			fail_msg("edit %zu: message \"%s\" should name %s and \"%s\"", i, msg, path, edits[i].what);
		assert_int_equal(hp_sim_open(f->state, &b2), -EINVAL);
		assert_int_equal(block_configure(f->b, 16), -EINVAL);
		assert_int_equal(file_read_all(path, 1 << 20, &after, NULL), 0);
		assert_string_equal(after, edited);
		free(after);
		free(edited);
	}
	assert_int_equal(file_write_atomic(path, good, len, 0644), 0);
	assert_int_equal(block_configure(f->b, 16), 0);
	free(good);
}

static void test_missing_state_file(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b = NULL;
	char msg[256];

	assert_int_equal(hp_sim_open(f->state, &b), -ENOENT);
	assert_int_equal(sim_check_file(f->state, msg, sizeof(msg)), -ENOENT);
	assert_non_null(strstr(msg, f->state));
}

/* ---- faults ------------------------------------------------------------------ */

static void test_faults_persist_and_replace(void **state)
{
	struct fx *f = *state;
	uint64_t eio[] = { 16, 18 }, busy[] = { 3 };
	struct sim_faults fl = { .configure_eio = eio, .n_configure_eio = 2,
				 .offline_ebusy = busy, .n_offline_ebusy = 1 };
	struct hp_backend *b2 = NULL;

	fx_init(f, NULL);
	assert_int_equal(sim_set_faults(f->state, &fl), 0);
	/* a second process (another open) sees them */
	assert_int_equal(hp_sim_open(f->state, &b2), 0);
	assert_int_equal(block_configure(b2, 16), -EIO); /* C7 */
	assert_int_equal(block_configure(b2, 17), 0);
	assert_int_equal(block_configure(b2, 18), -EIO);
	assert_int_equal(block_offline(b2, 3), -EBUSY); /* W6 */
	assert_int_equal(block_offline(b2, 4), 0);
	hp_backend_close(b2);
	/* replacing the set clears the old faults */
	assert_int_equal(sim_set_faults(f->state, &(struct sim_faults){ 0 }), 0);
	assert_int_equal(block_configure(f->b, 16), 0);
	assert_int_equal(block_offline(f->b, 3), 0);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_latency_applies_to_changes(void **state)
{
	struct fx *f = *state;
	uint64_t t0;

	fx_init(f, NULL);
	assert_int_equal(sim_set_faults(f->state, &(struct sim_faults){ .latency_ms = 150 }), 0);
	t0 = now_ms();
	assert_int_equal(block_configure(f->b, 16), 0);
	assert_true(now_ms() - t0 >= 145);
	t0 = now_ms();
	assert_int_equal(block_online(f->b, 16, ONLINE_MOVABLE), 0);
	assert_true(now_ms() - t0 >= 145);
	/* refused writes are answered at once */
	t0 = now_ms();
	assert_int_equal(block_deconfigure(f->b, 16), -EBUSY);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_CONFIG, 16, "bogus"), -EINVAL);
	assert_true(now_ms() - t0 < 145);
}

/* An offline that cannot last is written in the caller, one that migrates
 * (latency, W6) by a writer that can be killed at the deadline; the sim says
 * which under its lock (write_prompt), from the settings the write uses. */
static void test_offline_prompt_or_killable(void **state)
{
	struct fx *f = *state;
	struct timespec deadline;
	struct mem_block m;

	fx_init(f, NULL);
	assert_int_equal(block_configure(f->b, 16), 0);
	assert_int_equal(block_online(f->b, 16, ONLINE_MOVABLE), 0);
	assert_int_equal(block_configure(f->b, 17), 0);
	assert_int_equal(block_online(f->b, 17, ONLINE_MOVABLE), 0);
	/* no latency: over at once, in this process */
	assert_int_equal(f->b->ops->write_prompt(f->b, HP_ATTR_STATE, 16, "offline"), 0);
	assert_int_equal(hp_read_block(f->b, 16, &m), 0);
	assert_int_equal(m.state, MEM_STATE_OFFLINE);
	/* refusals are the kernel's, prompt or not (W2) */
	assert_int_equal(f->b->ops->write_prompt(f->b, HP_ATTR_STATE, 16, "offline"), -EINVAL);
	deadline_after_ms(&deadline, 60000);
	assert_int_equal(hp_set_write_deadline(f->b, &deadline), 0);
	assert_int_equal(block_online(f->b, 16, ONLINE_MOVABLE), 0);
	assert_int_equal(block_offline(f->b, 16), 0);
	assert_false(hp_offline_writer_running(f->b)); /* no child for it */
	/* latency: not started, for a writer that can be killed */
	assert_int_equal(sim_set_faults(f->state, &(struct sim_faults){ .latency_ms = 50 }), 0);
	assert_int_equal(f->b->ops->write_prompt(f->b, HP_ATTR_STATE, 17, "offline"), -EWOULDBLOCK);
	assert_int_equal(hp_read_block(f->b, 17, &m), 0);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	/* other writes are prompt whatever they cost */
	assert_int_equal(f->b->ops->write_prompt(f->b, HP_ATTR_STATE, 16, "online_movable"), 0);
	assert_int_equal(block_offline(f->b, 17), 0);
	assert_true(hp_offline_writer_running(f->b)); /* written by the child */
	assert_int_equal(hp_read_block(f->b, 17, &m), 0);
	assert_int_equal(m.state, MEM_STATE_OFFLINE);
	hp_offline_writer_end(f->b);
	assert_int_equal(hp_set_write_deadline(f->b, NULL), 0);
}

/* ---- tree ------------------------------------------------------------------ */

static void test_tree_layout(void **state)
{
	struct fx *f = *state;
	struct sim_params p;
	char buf[64];
	DIR *d;
	struct dirent *de;
	size_t nfiles = 0;

	sim_params_default(&p);
	p.block_size = 256 * MiB;
	p.online_bytes = 4 * GiB;
	p.standby_bytes = 1 * GiB;
	fx_init(f, &p);
	read_tree(f, "sys/devices/system/memory/block_size_bytes", buf, sizeof(buf));
	assert_string_equal(buf, "10000000"); /* A1: hex, no 0x */
	/* A3: decimal, unpadded names; A4: %08lx phys_index; A6 */
	read_tree(f, "sys/devices/system/memory/memory10/phys_index", buf, sizeof(buf));
	assert_string_equal(buf, "0000000a");
	read_tree(f, "sys/devices/system/memory/memory10/phys_device", buf, sizeof(buf));
	assert_string_equal(buf, "10");
	read_tree(f, "sys/devices/system/memory/memory10/removable", buf, sizeof(buf)); /* A5 */
	assert_string_equal(buf, "1");
	read_tree(f, "sys/devices/system/memory/memory10/valid_zones", buf, sizeof(buf));
	assert_string_equal(buf, "Normal"); /* D3: above 2G */
	read_tree(f, "sys/devices/system/memory/memory7/valid_zones", buf, sizeof(buf));
	assert_string_equal(buf, "DMA");
	assert_true(tree_has(f, "sys/devices/system/memory/memory10/node0"));
	assert_false(tree_has(f, "sys/devices/system/memory/memory010"));
	/* C14: standby 16-19 have no devices dir; C2 their firmware entries */
	assert_false(tree_has(f, "sys/devices/system/memory/memory16"));
	read_tree(f, "sys/firmware/memory/memory16/config", buf, sizeof(buf));
	assert_string_equal(buf, "0");
	read_tree(f, "sys/firmware/memory/memory16/memmap_on_memory", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	read_tree(f, "sys/firmware/memory/memory15/config", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	read_tree(f, "sys/firmware/memory/memory15/memmap_on_memory", buf, sizeof(buf));
	assert_string_equal(buf, "0");
	assert_false(tree_has(f, "sys/firmware/memory/memory20"));
	/* C1: exactly two files */
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/sys/firmware/memory/memory16", f->tree);
	d = opendir(path);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			assert_true(streq(de->d_name, "config") || streq(de->d_name, "memmap_on_memory"));
			nfiles++;
		}
	closedir(d);
	assert_int_equal(nfiles, 2);
	read_tree(f, "sys/module/memory_hotplug/parameters/memmap_on_memory", buf, sizeof(buf));
	assert_string_equal(buf, "Y"); /* P1 */
	read_tree(f, "sys/devices/system/memory/auto_online_blocks", buf, sizeof(buf));
	assert_string_equal(buf, "offline"); /* A2 */
}

static void test_tree_without_memmap_support(void **state)
{
	struct fx *f = *state;
	struct sim_params p;
	char buf[16];

	sim_params_default(&p);
	p.memmap_supported = false;
	fx_init(f, &p);
	read_tree(f, "sys/firmware/memory/memory16/memmap_on_memory", buf, sizeof(buf));
	assert_string_equal(buf, "0"); /* C2 */
	read_tree(f, "sys/module/memory_hotplug/parameters/memmap_on_memory", buf, sizeof(buf));
	assert_string_equal(buf, "N");
}

static void meminfo(struct fx *f, uint64_t *total, uint64_t *avail)
{
	char path[PATH_MAX], *text = NULL;
	unsigned long long t = 0, a = 0, fr = 0;

	snprintf(path, sizeof(path), "%s/proc/meminfo", f->tree);
	assert_int_equal(file_read_all(path, 1 << 16, &text, NULL), 0);
	assert_int_equal(sscanf(text, "MemTotal: %llu kB MemFree: %llu kB MemAvailable: %llu kB", &t, &fr, &a), 3);
	free(text);
	*total = t * 1024;
	*avail = a * 1024;
}

static void test_meminfo_arithmetic(void **state)
{
	struct fx *f = *state;
	uint64_t total, avail, bs = 128 * MiB, mm = bs / 64; /* P6 */

	fx_init(f, NULL);
	meminfo(f, &total, &avail);
	assert_int_equal(total, 16 * (bs - mm)); /* boot: memmap outside (C2 memmap=0) */
	assert_int_equal(avail, total);
	/* C8: memmap=1 block: nothing taken at config=1, loses 1/64 of itself online */
	assert_int_equal(block_configure(f->b, 16), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(total, 16 * (bs - mm));
	assert_int_equal(block_online(f->b, 16, ONLINE_MOVABLE), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(total, 16 * (bs - mm) + bs - mm);
	/* memmap=0 block: its memmap comes from online memory at config=1 */
	assert_int_equal(block_set_memmap(f->b, 17, false), 0);
	assert_int_equal(block_configure(f->b, 17), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(total, 16 * (bs - mm) + bs - mm - mm);
	assert_int_equal(block_online(f->b, 17, ONLINE_DEFAULT), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(total, 18 * (bs - mm));
	/* MemAvailable = MemTotal - used, floor 0 */
	assert_int_equal(sim_set_used(f->state, GiB), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(avail, total - GiB);
	assert_int_equal(sim_set_used(f->state, 100 * GiB), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(avail, 0);
	/* going back removes exactly what was added */
	assert_int_equal(sim_set_used(f->state, 0), 0);
	assert_int_equal(block_offline(f->b, 17), 0);
	assert_int_equal(block_deconfigure(f->b, 17), 0);
	assert_int_equal(block_offline(f->b, 16), 0);
	assert_int_equal(block_deconfigure(f->b, 16), 0);
	meminfo(f, &total, &avail);
	assert_int_equal(total, 16 * (bs - mm));
}

/* ---- the seed workflows (kernel.md) ------------------------------------------- */

/* EXPECT: "first-last:configured:memmap:state ..." covering all blocks. */
static void expect_table(struct fx *f, const char *expect)
{
	struct mem_table *t = NULL;
	char buf[512], *save = NULL;
	size_t covered = 0;

	assert_int_equal(hp_discover(f->b, &t), 0);
	snprintf(buf, sizeof(buf), "%s", expect);
	for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		unsigned first, last, conf, mm;
		char st[16];

		assert_int_equal(sscanf(tok, "%u-%u:%u:%u:%15s", &first, &last, &conf, &mm, st), 5);
		for (unsigned i = first; i <= last; i++) {
			struct mem_block *b = mem_table_find(t, i);
			assert_non_null(b);
			if (b->configured != (bool)conf || b->memmap_on_memory != (int)mm ||
			    !streq(mem_state_name(b->state), st))
				fail_msg("block %u: configured %d memmap %d %s, expected %s", i, b->configured,
					 b->memmap_on_memory, mem_state_name(b->state), tok);
			covered++;
		}
	}
	assert_int_equal(covered, t->n);
	mem_table_free(t);
}

#define INITIAL "0-15:1:0:online 16-31:0:1:offline"

static void test_seed_workflows(void **state)
{
	struct fx *f = *state;
	struct hp_backend *b;

	fx_init(f, NULL);
	b = f->b;
	expect_table(f, INITIAL);
	/* echo 1 > .../memory16/config */
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 16, "1\n"), 0);
	expect_table(f, "0-15:1:0:online 16-16:1:1:offline 17-31:0:1:offline");
	/* echo 0 > .../memory16/config: back to the start */
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 16, "0\n"), 0);
	expect_table(f, INITIAL);
	/* block 5: offline, deconfigure */
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_ONLINE, 5, "0\n"), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 5, "0\n"), 0);
	expect_table(f, "0-4:1:0:online 5-5:0:0:offline 6-15:1:0:online 16-31:0:1:offline");
	/* memmap on, configure, online */
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_MEMMAP, 5, "1\n"), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 5, "1\n"), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_ONLINE, 5, "1\n"), 0);
	expect_table(f, "0-4:1:0:online 5-5:1:1:online 6-15:1:0:online 16-31:0:1:offline");
	/* offline, deconfigure (memmap stays 1), memmap off, configure, online */
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_ONLINE, 5, "0\n"), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 5, "0\n"), 0);
	expect_table(f, "0-4:1:0:online 5-5:0:1:offline 6-15:1:0:online 16-31:0:1:offline");
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_MEMMAP, 5, "0\n"), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_CONFIG, 5, "1\n"), 0);
	assert_int_equal(b->ops->write_attr(b, HP_ATTR_ONLINE, 5, "1\n"), 0);
	expect_table(f, INITIAL);
}

/* util-linux lsmem reads the tree (skipped when lsmem is not installed). */
static void test_lsmem_reads_tree(void **state)
{
	struct fx *f = *state;
	char cmd[512], out[4096];
	size_t n;
	FILE *p;
	int rc;

	fx_init(f, NULL);
	assert_int_equal(block_offline(f->b, 5), 0);
	assert_int_equal(block_configure(f->b, 16), 0);
	snprintf(cmd, sizeof(cmd), "lsmem --sysroot '%s' -r -n -o RANGE,STATE,BLOCK 2>/dev/null", f->tree);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	rc = pclose(p);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) == 127)
		skip();
	assert_int_equal(WEXITSTATUS(rc), 0);
	assert_string_equal(out, "0x0000000000000000-0x0000000027ffffff online 0-4\n"
				 "0x0000000028000000-0x000000002fffffff offline 5\n"
				 "0x0000000030000000-0x000000007fffffff online 6-15\n"
				 "0x0000000080000000-0x0000000087ffffff offline 16\n");
}

/* A large machine stays usable: one write touches a few files, not all. */
static void test_large_sim(void **state)
{
	struct fx *f = *state;
	struct sim_params p;
	struct mem_table *t = NULL;
	uint64_t t0, took;

	sim_params_default(&p);
	p.online_bytes = 64 * GiB;
	p.standby_bytes = 448 * GiB; /* 4096 blocks */
	fx_init(f, &p);
	t0 = now_ms();
	for (uint64_t id = 600; id < 610; id++) {
		assert_int_equal(block_configure(f->b, id), 0);
		assert_int_equal(block_online(f->b, id, ONLINE_MOVABLE), 0);
	}
	took = now_ms() - t0;
	print_message("20 writes on 4096 blocks: %" PRIu64 " ms\n", took);
	assert_true(took < 60000); /* generous: the s390x run is emulated */
	assert_int_equal(hp_discover(f->b, &t), 0);
	assert_int_equal(t->n, 4096);
	assert_string_equal(MEM_ZONES_TEXT(mem_table_find(t, 605)->zones), "Movable");
	mem_table_free(t);
}


/* A writer that keeps changing blocks 16-23 until it is killed. */
static void churn(const char *state_path)
{
	struct hp_backend *b = NULL;

	if (hp_sim_open(state_path, &b) < 0)
		_exit(2);
	for (unsigned n = 0;; n++) {
		uint64_t id = 16 + n % 8;

		(void)block_set_memmap(b, id, n % 3 != 0);
		(void)block_configure(b, id);
		(void)block_online(b, id, n % 2 ? ONLINE_MOVABLE : ONLINE_DEFAULT);
		if (n % 5 != 0) { /* leave some up: the spans move */
			(void)block_offline(b, id);
			(void)block_deconfigure(b, id);
		}
	}
}

/* MemTotal as the records say it must be (C8, P6). */
static uint64_t expected_total(const struct mem_table *t)
{
	uint64_t bs = t->block_size, mm = bs / 64, total = 0, taken = 0;

	for (size_t i = 0; i < t->n; i++) {
		const struct mem_block *b = &t->blocks[i];

		if (b->configured && b->memmap_on_memory == 0)
			taken += mm;
		if (b->state != MEM_STATE_OFFLINE)
			total += b->memmap_on_memory == 1 ? bs - mm : bs;
	}
	return total - taken;
}

/* SIGKILL a writer at random moments: after each kill the tree says what the
 * state says (the next open repairs it), and writing goes on. */
static void test_kill_never_tears(void **state)
{
	struct fx *f = *state;
	unsigned seed = (unsigned)time(NULL);

	fx_init(f, NULL);
	print_message("seed %u\n", seed);
	srand(seed);
	for (int round = 0; round < 40; round++) {
		struct hp_backend *sim = NULL, *tree = NULL;
		struct mem_table *a = NULL, *b = NULL;
		uint64_t total, avail;
		pid_t pid;

		/* every third round with a migration time: kills during going-offline */
		assert_int_equal(sim_set_faults(f->state, &(struct sim_faults){ .latency_ms = round % 3 == 0 ? 2 : 0 }), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			churn(f->state);
		usleep((useconds_t)(1000 + rand() % 20000));
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, NULL, 0), pid);

		assert_int_equal(hp_sim_open(f->state, &sim), 0);
		assert_int_equal(hp_discover(sim, &a), 0);
		assert_int_equal(hp_sysfs_open(f->tree, &tree), 0);
		assert_int_equal(hp_discover(tree, &b), 0);
		assert_int_equal(a->n, b->n);
		for (size_t i = 0; i < a->n; i++)
			if (!mem_block_equal(&a->blocks[i], &b->blocks[i]))
				fail_msg("round %d: block %" PRIu64 ": sim %s/%d/%s, tree %s/%d/%s", round, a->blocks[i].id,
					 mem_state_name(a->blocks[i].state), a->blocks[i].configured, MEM_ZONES_TEXT(a->blocks[i].zones),
					 mem_state_name(b->blocks[i].state), b->blocks[i].configured, MEM_ZONES_TEXT(b->blocks[i].zones));
		meminfo(f, &total, &avail);
		if (total != expected_total(a))
			fail_msg("round %d: MemTotal %" PRIu64 ", records say %" PRIu64, round, total, expected_total(a));
		/* and later writes do not trip over anything */
		assert_int_equal(sim_set_faults(f->state, &(struct sim_faults){ 0 }), 0);
		if (!mem_table_find(a, 30)->configured) {
			assert_int_equal(block_configure(sim, 30), 0);
			assert_int_equal(block_deconfigure(sim, 30), 0);
		}
		mem_table_free(a);
		mem_table_free(b);
		hp_backend_close(tree);
		hp_backend_close(sim);
	}
}

/* ---- no link followed, no folder of someone else's (docs/security.md) ---------------- */

static void victim_is(const char *path, const char *want)
{
	char *text = NULL;
	size_t n;

	assert_int_equal(file_read_all(path, 4096, &text, &n), 0);
	assert_string_equal(text, want);
	free(text);
}

static void test_links_never_followed(void **state)
{
	struct fx *f = *state;
	char victim[192], vdir[192], p[PATH_MAX], q[PATH_MAX], buf[64];
	char *dir = NULL, *desc = NULL;
	size_t n;
	struct hp_backend *b2 = NULL;

	fx_init(f, NULL);
	snprintf(victim, sizeof(victim), "%s/victim", f->dir);
	snprintf(vdir, sizeof(vdir), "%s/vdir", f->dir);
	assert_int_equal(file_write_atomic(victim, "victim\n", 7, 0600), 0);
	assert_int_equal(mkdir(vdir, 0700), 0);

	/* a tree file's .new: unlinked, never opened */
	snprintf(p, sizeof(p), "%s/sys/firmware/memory/memory16/config.new", f->tree);
	assert_int_equal(symlink(victim, p), 0);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_CONFIG, 16, "1"), 0);
	victim_is(victim, "victim\n");
	read_tree(f, "sys/firmware/memory/memory16/config", buf, sizeof(buf));
	assert_string_equal(buf, "1");

	/* a records file's .new in the state directory */
	assert_int_equal(sim_tree_path(f->state, &dir), 0); /* (the tree: unchanged) */
	assert_string_equal(dir, f->tree);
	free(dir);
	assert_int_equal(file_read_all(f->state, 1 << 20, &desc, &n), 0);
	{
		char *sd = strstr(desc, "\"state_dir\":\"");
		assert_non_null(sd);
		sd += strlen("\"state_dir\":\"");
		snprintf(q, sizeof(q), "%.*s/blocks.0.new", (int)strcspn(sd, "\""), sd);
	}
	assert_int_equal(symlink(victim, q), 0);
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_STATE, 16, "online_movable"), 0);
	victim_is(victim, "victim\n");

	/* a block's folder made a link to another folder: refused */
	snprintf(p, sizeof(p), "%s/sys/devices/system/memory/memory16", f->tree);
	snprintf(q, sizeof(q), "%s/sys/devices/system/memory/moved", f->tree);
	assert_int_equal(rename(p, q), 0);
	assert_int_equal(symlink(vdir, p), 0);
	{
		int r = f->b->ops->write_attr(f->b, HP_ATTR_STATE, 16, "offline");
		assert_true(r == -ELOOP || r == -ENOTDIR); /* O_DIRECTORY|O_NOFOLLOW on a link */
	}
	assert_int_equal(rmdir(vdir), 0); /* still empty */
	assert_int_equal(mkdir(vdir, 0700), 0);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rename(q, p), 0);

	/* the lock made a link: refused, its target untouched */
	snprintf(p, sizeof(p), "%s.lock", f->state);
	assert_int_equal(unlink(p), 0);
	assert_int_equal(symlink(victim, p), 0);
	assert_true(f->b->ops->write_attr(f->b, HP_ATTR_STATE, 16, "offline") < 0);
	victim_is(victim, "victim\n");
	assert_int_equal(unlink(p), 0);

	/* a descriptor that names another tree: the tree stays the one opened */
	{
		char *t = strstr(desc, "\"tree\":\"");
		char *out = NULL;
		assert_non_null(t);
		t += strlen("\"tree\":\"");
		assert_true(asprintf(&out, "%.*s%s%s", (int)(t - desc), desc, vdir, t + strcspn(t, "\"")) > 0);
		assert_int_equal(file_write_atomic(f->state, out, strlen(out), 0644), 0);
		free(out);
	}
	/* (the refused offline above went through: the records are the commit) */
	assert_int_equal(f->b->ops->write_attr(f->b, HP_ATTR_STATE, 16, "online_movable"), 0);
	read_tree(f, "sys/devices/system/memory/memory16/state", buf, sizeof(buf));
	assert_string_equal(buf, "online");
	assert_int_equal(rmdir(vdir), 0); /* nothing was written there */
	free(desc);

	/* a folder others may write: refused, with a message naming it */
	assert_int_equal(chmod(f->dir, 0777), 0);
	assert_int_equal(hp_sim_open(f->state, &b2), -EPERM);
	assert_int_equal(sim_check_file(f->state, buf, sizeof(buf)), -EPERM);
	assert_int_equal(chmod(f->dir, 0700), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
		T(test_init_rejects_bad_params),
		T(test_state_persists_across_open),
		T(test_tree_rebuilt_when_missing),
		T(test_corrupt_state_rejected),
		T(test_format1_migrated),
		T(test_corrupt_records_rejected),
		T(test_missing_state_file),
		T(test_faults_persist_and_replace),
		T(test_latency_applies_to_changes),
		T(test_offline_prompt_or_killable),
		T(test_tree_layout),
		T(test_tree_without_memmap_support),
		T(test_meminfo_arithmetic),
		T(test_seed_workflows),
		T(test_lsmem_reads_tree),
		T(test_large_sim),
		T(test_kill_never_tears),
		T(test_links_never_followed),
	};
	return cmocka_run_group_tests_name("sim", tests, NULL, NULL);
}
