/* SPDX-License-Identifier: MIT */
/*
 * The kernel rule suite (kernel.md K, A, W, C), independent of the backend.
 *
 * A test environment (struct rule_env) is a machine built from struct
 * sim_params, seen through some struct hp_backend, with its sysfs-shaped
 * tree readable under env->root and its faults set through sim_set_faults()
 * on env->state.  run_rule_suite() runs every rule against environments
 * made by the factory it is given:
 *   - sim_env_open(): the sim backend on its own tree (test_rules.c);
 *   - a second factory can serve the same sim through a FUSE mount and open
 *     the sysfs backend on it: include this header from another test file
 *     and call run_rule_suite("rules-simfs", that_factory).
 * Include from exactly one .c per test binary (static definitions).
 * Needs <cmocka.h> and its prerequisites included before.
 */
#pragma once

#include "hotplug/backend.h"
#include "hotplug/sim/sim.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

struct rule_env {
	struct hp_backend *b; /* backend under test */
	char *root;           /* where sys/ and proc/ of this machine are read */
	char *state;          /* sim state file (faults, used memory) */
	char *dir;            /* private temp dir, removed on close */
	void *priv;           /* factory's own data */
	void (*close)(struct rule_env *e);
};

typedef int (*rule_env_open_fn)(const struct sim_params *p, struct rule_env **out);

static inline void rule_env_close(struct rule_env *e)
{
	if (!e)
		return;
	if (e->close)
		e->close(e);
	hp_backend_close(e->b);
	if (e->dir)
		rm_rf(e->dir);
	free(e->dir);
	free(e->root);
	free(e->state);
	free(e);
}

/* The sim in a fresh mkdtemp dir under /tmp; tree in <dir>/tree. */
static inline int sim_env_open(const struct sim_params *p, struct rule_env **out)
{
	struct rule_env *e = calloc(1, sizeof(*e));
	char tmpl[] = "/tmp/memgrant-rules.XXXXXX";
	struct sim_params q = *p;
	char *tree = NULL;
	int r;

	if (!e)
		return -ENOMEM;
	if (!mkdtemp(tmpl)) {
		free(e);
		return -errno;
	}
	e->dir = strdup(tmpl);
	if (asprintf(&e->state, "%s/sim.json", tmpl) < 0 || asprintf(&tree, "%s/tree", tmpl) < 0) {
		rule_env_close(e);
		free(tree);
		return -ENOMEM;
	}
	q.tree = tree;
	r = sim_init(e->state, &q);
	free(tree);
	if (r == 0)
		r = hp_sim_open(e->state, &e->b);
	if (r == 0)
		e->root = strdup(e->b->root);
	if (r < 0) {
		rule_env_close(e);
		return r;
	}
	*out = e;
	return 0;
}

/* Reads ROOT/REL into BUF, trailing newline removed.  0 or -errno. */
static inline int tree_read(const struct rule_env *e, const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX];
	char *text = NULL;
	size_t n;
	int r;

	snprintf(path, sizeof(path), "%s/%s", e->root, rel);
	r = file_read_all(path, 1 << 20, &text, &n);
	if (r < 0)
		return r;
	if (n && text[n - 1] == '\n')
		text[--n] = '\0';
	snprintf(buf, len, "%s", text);
	free(text);
	return 0;
}

static inline bool tree_exists(const struct rule_env *e, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", e->root, rel);
	return lstat(path, &st) == 0;
}

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- table of single writes ----------------------------------------------- */

enum {
	RP_NOFW = 1 << 0,      /* has_firmware = false (C0) */
	RP_NOMEMMAP = 1 << 1,  /* memmap_supported = false */
	RP_REFUSE = 1 << 2,    /* refuse_memmap_eopnotsupp */
	RP_EIO16 = 1 << 3,     /* configure of block 16 fails with EIO */
	RP_ENOMEM16 = 1 << 4,  /* onlining block 16 fails with ENOMEM */
	RP_EBUSY5 = 1 << 5,    /* offlining block 5 fails with EBUSY */
};

#define KEEP (-2) /* expectation not checked */

struct rule_case {
	const char *name;      /* starts with the kernel.md rule id */
	unsigned flags;        /* RP_* */
	const char *pre;       /* earlier writes: "c16=1 s16=online_movable o5=0 m16=0 a=online" */
	enum hp_attr attr;
	uint64_t id;
	const char *value;
	int err;               /* expected return of the write */
	int configured;        /* expected afterwards, KEEP to skip */
	int memmap;
	const char *state;     /* NULL to skip */
	const char *zones;     /* NULL to skip */
	const char *auto_online; /* NULL to skip */
};

#define W(attr_, id_, val_) .attr = HP_ATTR_##attr_, .id = (id_), .value = (val_)
#define EXPECT(err_, conf_, mm_, state_, zones_) \
	.err = (err_), .configured = (conf_), .memmap = (mm_), .state = (state_), .zones = (zones_)

/* Seed machine (kernel.md): blocks 0-15 online (DMA), 16-31 standby, 128M. */
static const struct rule_case rule_cases[] = {
	/* K1: kstrtobool */
	{ "K1 config '1' is true", 0, "", W(CONFIG, 16, "1"), EXPECT(0, 1, 1, "offline", "Normal Movable") },
	{ "K1 config '1\\n' is true", 0, "", W(CONFIG, 16, "1\n"), EXPECT(0, 1, KEEP, "offline", NULL) },
	{ "K1 config 'y' is true", 0, "", W(CONFIG, 16, "y"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'Y' is true", 0, "", W(CONFIG, 16, "Y"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 't' is true", 0, "", W(CONFIG, 16, "t"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'T' is true", 0, "", W(CONFIG, 16, "T"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'e' is true", 0, "", W(CONFIG, 16, "e"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'E' is true", 0, "", W(CONFIG, 16, "E"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'on' is true", 0, "", W(CONFIG, 16, "on"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'ON' is true", 0, "", W(CONFIG, 16, "ON"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config '10' is true", 0, "", W(CONFIG, 16, "10"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'yes' is true", 0, "", W(CONFIG, 16, "yes"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config 'enable' is true", 0, "", W(CONFIG, 16, "enable"), EXPECT(0, 1, KEEP, NULL, NULL) },
	{ "K1 config '0' is false", 0, "c16=1", W(CONFIG, 16, "0"), EXPECT(0, 0, 1, "offline", NULL) },
	{ "K1 config 'n' is false", 0, "c16=1", W(CONFIG, 16, "n"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'N' is false", 0, "c16=1", W(CONFIG, 16, "N"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'f' is false", 0, "c16=1", W(CONFIG, 16, "f"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'F' is false", 0, "c16=1", W(CONFIG, 16, "F"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'd' is false", 0, "c16=1", W(CONFIG, 16, "d"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'D' is false", 0, "c16=1", W(CONFIG, 16, "D"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'off' is false", 0, "c16=1", W(CONFIG, 16, "off"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'oFF' is false", 0, "c16=1", W(CONFIG, 16, "oFF"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'no' is false", 0, "c16=1", W(CONFIG, 16, "no"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 config 'disable' is false", 0, "c16=1", W(CONFIG, 16, "disable"), EXPECT(0, 0, KEEP, NULL, NULL) },
	{ "K1 C4 config '' is EINVAL", 0, "", W(CONFIG, 16, ""), EXPECT(-EINVAL, 0, 1, "offline", NULL) },
	{ "K1 C4 config '\\n' is EINVAL", 0, "", W(CONFIG, 16, "\n"), EXPECT(-EINVAL, 0, KEEP, NULL, NULL) },
	{ "K1 C4 config '2' is EINVAL", 0, "", W(CONFIG, 16, "2"), EXPECT(-EINVAL, 0, KEEP, NULL, NULL) },
	{ "K1 C4 config 'o' is EINVAL", 0, "", W(CONFIG, 16, "o"), EXPECT(-EINVAL, 0, KEEP, NULL, NULL) },
	{ "K1 C4 config ' 1' is EINVAL", 0, "", W(CONFIG, 16, " 1"), EXPECT(-EINVAL, 0, KEEP, NULL, NULL) },
	{ "K1 C4 config 'x' on configured is EINVAL", 0, "c16=1", W(CONFIG, 16, "x"), EXPECT(-EINVAL, 1, KEEP, "offline", NULL) },
	{ "K1 C4 config '-1' on online is EINVAL", 0, "", W(CONFIG, 5, "-1"), EXPECT(-EINVAL, 1, 0, "online", "DMA") },
	{ "K1 memmap 'off' is false", 0, "", W(MEMMAP, 16, "off"), EXPECT(0, 0, 0, "offline", NULL) },
	{ "K1 memmap 'y' is true", 0, "m16=0", W(MEMMAP, 16, "y"), EXPECT(0, 0, 1, NULL, NULL) },
	{ "K1 C12 memmap 'maybe' is EINVAL", 0, "", W(MEMMAP, 16, "maybe"), EXPECT(-EINVAL, 0, 1, NULL, NULL) },
	{ "K1 C12 memmap '' is EINVAL", 0, "", W(MEMMAP, 16, ""), EXPECT(-EINVAL, 0, 1, NULL, NULL) },
	{ "K1 W3 online 'off' offlines", 0, "", W(ONLINE, 5, "off"), EXPECT(0, 1, 0, "offline", "DMA Movable") },
	{ "K1 W3 online 'Yes' onlines", 0, "c16=1", W(ONLINE, 16, "Yes"), EXPECT(0, 1, 1, "online", "Normal") },
	{ "K1 W3 online '' is EINVAL", 0, "", W(ONLINE, 5, ""), EXPECT(-EINVAL, 1, 0, "online", NULL) },
	{ "K1 W3 online 'x' is EINVAL", 0, "c16=1", W(ONLINE, 16, "x"), EXPECT(-EINVAL, 1, 1, "offline", NULL) },

	/* W1, W2: state words */
	{ "W1 state 'offline\\n' accepted", 0, "", W(STATE, 5, "offline\n"), EXPECT(0, 1, 0, "offline", NULL) },
	{ "W1 state 'Offline' is EINVAL", 0, "", W(STATE, 5, "Offline"), EXPECT(-EINVAL, 1, 0, "online", NULL) },
	{ "W1 state 'offline ' is EINVAL", 0, "", W(STATE, 5, "offline "), EXPECT(-EINVAL, 1, 0, "online", NULL) },
	{ "W1 state '' is EINVAL", 0, "", W(STATE, 5, ""), EXPECT(-EINVAL, 1, 0, "online", NULL) },
	{ "W1 state '0' is EINVAL", 0, "", W(STATE, 5, "0"), EXPECT(-EINVAL, 1, 0, "online", NULL) },
	{ "W1 state 'movable' is EINVAL", 0, "c16=1", W(STATE, 16, "movable"), EXPECT(-EINVAL, 1, 1, "offline", NULL) },
	{ "W1 state 'online_movable\\n\\n' is EINVAL", 0, "c16=1", W(STATE, 16, "online_movable\n\n"), EXPECT(-EINVAL, 1, 1, "offline", NULL) },
	{ "W1 state 'online_movable\\n' accepted", 0, "c16=1", W(STATE, 16, "online_movable\n"), EXPECT(0, 1, 1, "online", "Movable") },
	{ "W2 state online on online is EINVAL", 0, "", W(STATE, 5, "online"), EXPECT(-EINVAL, 1, 0, "online", "DMA") },
	{ "W2 state online_kernel on online is EINVAL", 0, "", W(STATE, 5, "online_kernel"), EXPECT(-EINVAL, 1, 0, "online", "DMA") },
	{ "W2 state online_movable on online DMA is EINVAL", 0, "", W(STATE, 5, "online_movable"), EXPECT(-EINVAL, 1, 0, "online", "DMA") },
	{ "W2 state online_movable on online Normal is EINVAL", 0, "c16=1 s16=online", W(STATE, 16, "online_movable"), EXPECT(-EINVAL, 1, 1, "online", "Normal") },
	{ "W2 state offline on offline is EINVAL", 0, "c16=1", W(STATE, 16, "offline"), EXPECT(-EINVAL, 1, 1, "offline", NULL) },

	/* W3: online attribute */
	{ "W3 online 1 on online succeeds, no change", 0, "", W(ONLINE, 5, "1"), EXPECT(0, 1, 0, "online", "DMA") },
	{ "W3 online 0 on offline succeeds, no change", 0, "c16=1", W(ONLINE, 16, "0"), EXPECT(0, 1, 1, "offline", "Normal Movable") },
	{ "W3 online 1 onlines with the default policy", 0, "c16=1", W(ONLINE, 16, "1"), EXPECT(0, 1, 1, "online", "Normal") },

	/* W5: zones; A9 valid_zones */
	{ "W5 online goes to the kernel zone", 0, "c16=1", W(STATE, 16, "online"), EXPECT(0, 1, 1, "online", "Normal") },
	{ "W5 online_kernel goes to Normal", 0, "c16=1", W(STATE, 16, "online_kernel"), EXPECT(0, 1, 1, "online", "Normal") },
	{ "W5 online_movable goes to Movable", 0, "c16=1", W(STATE, 16, "online_movable"), EXPECT(0, 1, 1, "online", "Movable") },
	{ "W5 D3 block below 2G onlines to DMA", 0, "o5=0", W(STATE, 5, "online"), EXPECT(0, 1, 0, "online", "DMA") },
	{ "W5 D3 block below 2G may go Movable", 0, "o5=0", W(STATE, 5, "online_movable"), EXPECT(0, 1, 0, "online", "Movable") },
	{ "W5 ENOMEM leaves the block offline", RP_ENOMEM16, "c16=1", W(STATE, 16, "online"), EXPECT(-ENOMEM, 1, 1, "offline", NULL) },
	{ "W5 contig-zones: inside the Movable span defaults to Movable", 0, "c16=1 c18=1 s16=online_movable s18=online_movable c17=1",
	  W(STATE, 17, "online"), EXPECT(0, 1, 1, "online", "Movable") },
	{ "A9 offline block inside the Movable span: Movable Normal", 0, "c16=1 c18=1 s16=online_movable s18=online_movable",
	  W(CONFIG, 17, "1"), EXPECT(0, 1, 1, "offline", "Movable Normal") },
	{ "A9 offline block above 2G: Normal Movable", 0, "", W(CONFIG, 20, "1"), EXPECT(0, 1, 1, "offline", "Normal Movable") },
	{ "A9 offline block below 2G: DMA Movable", 0, "", W(ONLINE, 3, "0"), EXPECT(0, 1, 0, "offline", "DMA Movable") },
	{ "A9 online Movable block shows Movable", 0, "c20=1", W(STATE, 20, "online_movable"), EXPECT(0, 1, 1, "online", "Movable") },

	/* W6: offline failures */
	{ "W6 offline EBUSY leaves the block online", RP_EBUSY5, "", W(STATE, 5, "offline"), EXPECT(-EBUSY, 1, 0, "online", "DMA") },
	{ "W6 online=0 EBUSY leaves the block online", RP_EBUSY5, "", W(ONLINE, 5, "0"), EXPECT(-EBUSY, 1, 0, "online", "DMA") },

	/* C: firmware attributes */
	{ "C6 config=1 on configured: success, no change", 0, "c16=1 s16=online_movable", W(CONFIG, 16, "1"), EXPECT(0, 1, 1, "online", "Movable") },
	{ "C6 config=1 on boot memory: success", 0, "", W(CONFIG, 5, "1"), EXPECT(0, 1, 0, "online", "DMA") },
	{ "C7 config=1 adds the block offline", 0, "", W(CONFIG, 31, "1"), EXPECT(0, 1, 1, "offline", "Normal Movable") },
	{ "C7 config=1 EIO keeps config 0", RP_EIO16, "", W(CONFIG, 16, "1"), EXPECT(-EIO, 0, 1, "offline", NULL) },
	{ "C7 auto_online online onlines at config=1", 0, "a=online", W(CONFIG, 16, "1"), EXPECT(0, 1, 1, "online", "Normal") },
	{ "C7 auto_online online_kernel onlines Normal", 0, "a=online_kernel", W(CONFIG, 16, "1"), EXPECT(0, 1, 1, "online", "Normal") },
	{ "C7 auto_online online_movable onlines Movable", 0, "a=online_movable", W(CONFIG, 16, "1"), EXPECT(0, 1, 1, "online", "Movable") },
	{ "C7 auto_online failure is ignored", RP_ENOMEM16, "a=online", W(CONFIG, 16, "1"), EXPECT(0, 1, 1, "offline", NULL) },
	{ "C9 config=0 on deconfigured: success, no change", 0, "", W(CONFIG, 20, "0"), EXPECT(0, 0, 1, "offline", NULL) },
	{ "C10 config=0 on online is EBUSY", 0, "", W(CONFIG, 5, "0"), EXPECT(-EBUSY, 1, 0, "online", "DMA") },
	{ "C10 config=0 on online Movable is EBUSY", 0, "c16=1 s16=online_movable", W(CONFIG, 16, "0"), EXPECT(-EBUSY, 1, 1, "online", "Movable") },
	{ "C11 config=0 on offline boot block removes it", 0, "o5=0", W(CONFIG, 5, "0"), EXPECT(0, 0, 0, "offline", NULL) },
	{ "C11 config=0 on offline standby block removes it", 0, "c16=1", W(CONFIG, 16, "0"), EXPECT(0, 0, 1, "offline", NULL) },
	{ "C12 memmap on configured is EBUSY (same value)", 0, "c16=1", W(MEMMAP, 16, "1"), EXPECT(-EBUSY, 1, 1, NULL, NULL) },
	{ "C12 memmap on configured is EBUSY (new value)", 0, "c16=1", W(MEMMAP, 16, "0"), EXPECT(-EBUSY, 1, 1, NULL, NULL) },
	{ "C12 memmap on boot memory is EBUSY", 0, "", W(MEMMAP, 5, "0"), EXPECT(-EBUSY, 1, 0, "online", NULL) },
	{ "C12 memmap stored while deconfigured", 0, "o5=0 c5=0", W(MEMMAP, 5, "1"), EXPECT(0, 0, 1, "offline", NULL) },
	{ "C12 memmap kept through config=1", 0, "m16=0", W(CONFIG, 16, "1"), EXPECT(0, 1, 0, "offline", NULL) },
	{ "C12 memmap kept through config=0", 0, "o5=0 c5=0 m5=1 c5=1 o5=1 o5=0", W(CONFIG, 5, "0"), EXPECT(0, 0, 1, "offline", NULL) },
	{ "C12 memmap 1 unsupported, old kernel: stored", RP_NOMEMMAP, "", W(MEMMAP, 16, "1"), EXPECT(0, 0, 1, NULL, NULL) },
	{ "C12 memmap 1 unsupported, newer kernel: EOPNOTSUPP", RP_NOMEMMAP | RP_REFUSE, "", W(MEMMAP, 16, "1"), EXPECT(-EOPNOTSUPP, 0, 0, NULL, NULL) },
	{ "C12 memmap 0 unsupported, newer kernel: allowed", RP_NOMEMMAP | RP_REFUSE, "", W(MEMMAP, 16, "0"), EXPECT(0, 0, 0, NULL, NULL) },
	{ "C2 standby memmap 0 when unsupported", RP_NOMEMMAP, "", W(CONFIG, 16, "1"), EXPECT(0, 1, 0, "offline", NULL) },
	{ "C13 offline block stays configured", 0, "", W(ONLINE, 5, "0"), EXPECT(0, 1, 0, "offline", NULL) },

	/* C14 and missing files: ENOENT */
	{ "C14 online on a deconfigured block is ENOENT", 0, "", W(ONLINE, 16, "1"), EXPECT(-ENOENT, 0, 1, "offline", NULL) },
	{ "C14 state on a deconfigured block is ENOENT", 0, "", W(STATE, 16, "online"), EXPECT(-ENOENT, 0, 1, "offline", NULL) },
	{ "C14 ENOENT wins over a bad value", 0, "", W(STATE, 16, "bogus"), EXPECT(-ENOENT, 0, 1, NULL, NULL) },
	{ "A3 config of a block that does not exist is ENOENT", 0, "", W(CONFIG, 32, "1"), EXPECT(-ENOENT, KEEP, KEEP, NULL, NULL) },
	{ "A3 memmap of a block that does not exist is ENOENT", 0, "", W(MEMMAP, 99, "1"), EXPECT(-ENOENT, KEEP, KEEP, NULL, NULL) },
	{ "A3 online of a block that does not exist is ENOENT", 0, "", W(ONLINE, 1000000, "1"), EXPECT(-ENOENT, KEEP, KEEP, NULL, NULL) },
	{ "A3 state of a block that does not exist is ENOENT", 0, "", W(STATE, 32, "offline"), EXPECT(-ENOENT, KEEP, KEEP, NULL, NULL) },
	{ "C0 no firmware: config is ENOENT", RP_NOFW, "", W(CONFIG, 16, "1"), EXPECT(-ENOENT, 1, -1, "offline", NULL) },
	{ "C0 no firmware: memmap is ENOENT", RP_NOFW, "", W(MEMMAP, 16, "1"), EXPECT(-ENOENT, 1, -1, "offline", NULL) },
	{ "C0 no firmware: standby is present and can be onlined", RP_NOFW, "", W(ONLINE, 16, "1"), EXPECT(0, 1, -1, "online", "Normal") },
	{ "C0 no firmware: offline succeeds", RP_NOFW, "", W(STATE, 5, "offline"), EXPECT(0, 1, -1, "offline", NULL) },

	/* A2: auto_online_blocks */
	{ .name = "A2 auto_online 'online_movable\\n' accepted", .pre = "", W(AUTO_ONLINE, 0, "online_movable\n"),
	  .err = 0, .configured = KEEP, .memmap = KEEP, .auto_online = "online_movable" },
	{ .name = "A2 auto_online 'online_kernel' accepted", .pre = "", W(AUTO_ONLINE, 0, "online_kernel"),
	  .err = 0, .configured = KEEP, .memmap = KEEP, .auto_online = "online_kernel" },
	{ .name = "A2 auto_online 'offline' accepted", .pre = "a=online", W(AUTO_ONLINE, 0, "offline"),
	  .err = 0, .configured = KEEP, .memmap = KEEP, .auto_online = "offline" },
	{ .name = "A2 auto_online 'Online' is EINVAL", .pre = "", W(AUTO_ONLINE, 0, "Online"),
	  .err = -EINVAL, .configured = KEEP, .memmap = KEEP, .auto_online = "offline" },
	{ .name = "A2 auto_online 'movable' is EINVAL", .pre = "", W(AUTO_ONLINE, 0, "movable"),
	  .err = -EINVAL, .configured = KEEP, .memmap = KEEP, .auto_online = "offline" },
	{ .name = "A2 auto_online '' is EINVAL", .pre = "a=online", W(AUTO_ONLINE, 0, ""),
	  .err = -EINVAL, .configured = KEEP, .memmap = KEEP, .auto_online = "online" },
};

static inline void rule_params(unsigned flags, struct sim_params *p)
{
	sim_params_default(p);
	p->has_firmware = !(flags & RP_NOFW);
	p->memmap_supported = !(flags & RP_NOMEMMAP);
	p->refuse_memmap_eopnotsupp = flags & RP_REFUSE;
}

static inline int rule_faults(const struct rule_env *e, unsigned flags, uint64_t latency_ms)
{
	uint64_t b16 = 16, b5 = 5;
	struct sim_faults f = { .latency_ms = latency_ms };

	if (flags & RP_EIO16) {
		f.configure_eio = &b16;
		f.n_configure_eio = 1;
	}
	if (flags & RP_ENOMEM16) {
		f.online_enomem = &b16;
		f.n_online_enomem = 1;
	}
	if (flags & RP_EBUSY5) {
		f.offline_ebusy = &b5;
		f.n_offline_ebusy = 1;
	}
	return sim_set_faults(e->state, &f);
}

/* Runs the "pre" script: space-separated c<id>=v, m<id>=v, o<id>=v, s<id>=v, a=v. */
static inline void run_pre(struct rule_env *e, const char *pre)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", pre);
	for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		enum hp_attr attr;
		uint64_t id = 0;
		int r;

		assert_non_null(eq);
		*eq = '\0';
		switch (tok[0]) {
		case 'c': attr = HP_ATTR_CONFIG; break;
		case 'm': attr = HP_ATTR_MEMMAP; break;
		case 'o': attr = HP_ATTR_ONLINE; break;
		case 's': attr = HP_ATTR_STATE; break;
		case 'a': attr = HP_ATTR_AUTO_ONLINE; break;
		default: fail_msg("bad pre token %s", tok); return;
		}
		if (tok[1])
			id = strtoull(tok + 1, NULL, 10);
		r = e->b->ops->write_attr(e->b, attr, id, eq + 1);
		if (r != 0)
			fail_msg("pre step %s=%s: %s", tok, eq + 1, strerror(-r));
	}
}

/* The block as the backend reads it agrees with the tree files. */
static inline void check_tree_block(struct rule_env *e, const struct mem_block *m)
{
	char rel[128], buf[64];

	snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64, (uint64_t)m->id);
	assert_int_equal(tree_exists(e, rel), m->configured);
	if (m->configured) {
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64 "/state", (uint64_t)m->id);
		assert_int_equal(tree_read(e, rel, buf, sizeof(buf)), 0);
		assert_string_equal(buf, mem_state_name(m->state));
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64 "/online", (uint64_t)m->id);
		assert_int_equal(tree_read(e, rel, buf, sizeof(buf)), 0);
		assert_string_equal(buf, m->state == MEM_STATE_OFFLINE ? "0" : "1");
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64 "/valid_zones", (uint64_t)m->id);
		assert_int_equal(tree_read(e, rel, buf, sizeof(buf)), 0);
		assert_string_equal(buf, MEM_ZONES_TEXT(m->zones));
	}
	if (m->in_firmware) {
		snprintf(rel, sizeof(rel), "sys/firmware/memory/memory%" PRIu64 "/config", (uint64_t)m->id);
		assert_int_equal(tree_read(e, rel, buf, sizeof(buf)), 0);
		assert_string_equal(buf, m->configured ? "1" : "0");
		snprintf(rel, sizeof(rel), "sys/firmware/memory/memory%" PRIu64 "/memmap_on_memory", (uint64_t)m->id);
		assert_int_equal(tree_read(e, rel, buf, sizeof(buf)), 0);
		assert_string_equal(buf, m->memmap_on_memory ? "1" : "0");
	}
}

struct rule_ctx {
	rule_env_open_fn open_env;
	const struct rule_case *c; /* table cases */
	void (*fn)(struct rule_env *e, const struct rule_ctx *ctx); /* function cases */
};

static inline struct rule_env *rule_open(const struct rule_ctx *ctx, unsigned flags)
{
	struct sim_params p;
	struct rule_env *e = NULL;
	int r;

	rule_params(flags, &p);
	r = ctx->open_env(&p, &e);
	if (r < 0)
		fail_msg("cannot open the test machine: %s", strerror(-r));
	return e;
}

static void run_rule_case(void **state)
{
	const struct rule_ctx *ctx = *state;
	const struct rule_case *c = ctx->c;
	struct rule_env *e = rule_open(ctx, c->flags);
	struct mem_block m;
	int r;

	run_pre(e, c->pre);
	assert_int_equal(rule_faults(e, c->flags, 0), 0);
	r = e->b->ops->write_attr(e->b, c->attr, c->id, c->value);
	if (r != c->err)
		fail_msg("%s: write returned %d (%s), expected %d (%s)", c->name, r, errno_name(r), c->err,
			 errno_name(c->err));
	if (c->attr == HP_ATTR_AUTO_ONLINE) {
		char buf[32];
		assert_int_equal(e->b->ops->read_auto_online(e->b, buf, sizeof(buf)), 0);
		assert_string_equal(buf, c->auto_online);
		assert_int_equal(tree_read(e, "sys/devices/system/memory/auto_online_blocks", buf, sizeof(buf)), 0);
		assert_string_equal(buf, c->auto_online);
	} else if (c->configured != KEEP) {
		assert_int_equal(hp_read_block(e->b, c->id, &m), 0);
		assert_int_equal(m.configured, c->configured);
		if (c->memmap != KEEP)
			assert_int_equal(m.memmap_on_memory, c->memmap);
		if (c->state)
			assert_string_equal(mem_state_name(m.state), c->state);
		if (c->zones)
			assert_string_equal(MEM_ZONES_TEXT(m.zones), c->zones);
		check_tree_block(e, &m);
	}
	rule_env_close(e);
}

/* ---- rules that need more than one write ------------------------------------ */

static void rule_a_tree_files(struct rule_env *e, const struct rule_ctx *ctx)
{
	char buf[128];

	(void)ctx;
	/* A1 */
	assert_int_equal(tree_read(e, "sys/devices/system/memory/block_size_bytes", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "8000000");
	/* A2 */
	assert_int_equal(tree_read(e, "sys/devices/system/memory/auto_online_blocks", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "offline");
	/* A3: the files of a block, A4 A5 A6 their content */
	static const char *const files[] = { "online", "state", "phys_index", "phys_device", "removable",
					     "valid_zones", "uevent", "node0" };
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char rel[96];
		snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory12/%s", files[i]);
		if (!tree_exists(e, rel))
			fail_msg("A3: %s missing", rel);
	}
	assert_int_equal(tree_read(e, "sys/devices/system/memory/memory12/phys_index", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0000000c");
	assert_int_equal(tree_read(e, "sys/devices/system/memory/memory12/phys_device", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "12");
	assert_int_equal(tree_read(e, "sys/devices/system/memory/memory12/removable", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1");
	/* A7, A8 */
	assert_int_equal(tree_read(e, "sys/devices/system/memory/memory12/state", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "online");
	assert_int_equal(tree_read(e, "sys/devices/system/memory/memory12/online", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1");
	/* the node link goes both ways */
	assert_true(tree_exists(e, "sys/devices/system/node/node0/memory12"));
	/* C1 C3 */
	assert_int_equal(tree_read(e, "sys/firmware/memory/memory20/config", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0");
	assert_int_equal(tree_read(e, "sys/firmware/memory/memory20/memmap_on_memory", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1");
	assert_int_equal(tree_read(e, "sys/firmware/memory/memory12/config", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "1");
	assert_int_equal(tree_read(e, "sys/firmware/memory/memory12/memmap_on_memory", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "0");
	/* C14: standby has no devices dir */
	assert_false(tree_exists(e, "sys/devices/system/memory/memory20"));
	assert_false(tree_exists(e, "sys/devices/system/memory/memory32"));
	assert_false(tree_exists(e, "sys/firmware/memory/memory32"));
	/* P1 */
	assert_int_equal(tree_read(e, "sys/module/memory_hotplug/parameters/memmap_on_memory", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "Y");
}

static void rule_c14_dir_comes_and_goes(struct rule_env *e, const struct rule_ctx *ctx)
{
	(void)ctx;
	assert_false(tree_exists(e, "sys/devices/system/memory/memory16"));
	assert_int_equal(block_configure(e->b, 16), 0); /* C7 */
	assert_true(tree_exists(e, "sys/devices/system/memory/memory16/state"));
	assert_true(tree_exists(e, "sys/devices/system/node/node0/memory16"));
	assert_int_equal(block_deconfigure(e->b, 16), 0); /* C11 */
	assert_false(tree_exists(e, "sys/devices/system/memory/memory16"));
	assert_false(tree_exists(e, "sys/devices/system/node/node0/memory16"));
	assert_true(tree_exists(e, "sys/firmware/memory/memory16/config"));
}

static void rule_c13_offline_keeps_storage(struct rule_env *e, const struct rule_ctx *ctx)
{
	struct mem_block m;

	(void)ctx;
	/* C13: only config=0 gives storage back; online/offline cycles keep config=1 */
	assert_int_equal(block_configure(e->b, 16), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(block_online(e->b, 16, ONLINE_MOVABLE), 0);
		assert_int_equal(block_offline(e->b, 16), 0);
		assert_int_equal(hp_read_block(e->b, 16, &m), 0);
		assert_true(m.configured);
	}
}

static void rules_sig_nop(int sig)
{
	(void)sig;
}

/* Forks a child that writes VALUE to ATTR of ID and exits with -errno. */
static inline pid_t spawn_writer(struct rule_env *e, enum hp_attr attr, uint64_t id, const char *value)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* W6's caught signal: a handler without SA_RESTART, the one
		 * that would end the write if any signal did */
		struct sigaction sa = { .sa_handler = rules_sig_nop };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
		_exit(-e->b->ops->write_attr(e->b, attr, id, value));
	}
	return pid;
}

static inline int wait_exit(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* Waits up to 5 s until block ID's state file reads WANT. */
static inline bool wait_state(struct rule_env *e, uint64_t id, const char *want)
{
	char rel[96], buf[32];
	uint64_t end = now_ms() + 5000;

	snprintf(rel, sizeof(rel), "sys/devices/system/memory/memory%" PRIu64 "/state", id);
	while (now_ms() < end) {
		if (tree_read(e, rel, buf, sizeof(buf)) == 0 && streq(buf, want))
			return true;
		usleep(2000);
	}
	return false;
}

/* Whether child PID runs (not exited, not a zombie), without reaping it. */
static inline bool child_running(pid_t pid)
{
	siginfo_t si = { 0 };

	assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT), 0);
	return si.si_pid == 0;
}

static void rule_w6_going_offline_then_killed(struct rule_env *e, const struct rule_ctx *ctx)
{
	struct mem_block m;
	int status;
	pid_t pid;

	(void)ctx;
	assert_int_equal(rule_faults(e, 0, 20000), 0);
	pid = spawn_writer(e, HP_ATTR_STATE, 5, "offline");
	/* A7, W6: going-offline is visible while the migration runs */
	assert_true(wait_state(e, 5, "going-offline"));
	assert_int_equal(hp_read_block(e->b, 5, &m), 0);
	assert_int_equal(m.state, MEM_STATE_GOING_OFFLINE);
	/* W6 (docs/kernel-rules.md, "W6 and signals"): a signal the writer
	 * catches does not end the migration */
	kill(pid, SIGUSR1);
	usleep(300000);
	assert_true(child_running(pid));
	assert_int_equal(hp_read_block(e->b, 5, &m), 0);
	assert_int_equal(m.state, MEM_STATE_GOING_OFFLINE);
	/* a fatal one does, and the block is online again */
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0)
		assert_int_equal(errno, EINTR);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* the sim has no kernel of its own to do it at the writer's death:
	 * its settle does, as hp_write_with_deadline() calls it (backend.h) */
	if (e->b->ops->settle)
		assert_int_equal(e->b->ops->settle(e->b), 0);
	assert_true(wait_state(e, 5, "online"));
	assert_int_equal(hp_read_block(e->b, 5, &m), 0);
	assert_int_equal(m.state, MEM_STATE_ONLINE);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "DMA");
	check_tree_block(e, &m);
}

static void rule_w6_latency(struct rule_env *e, const struct rule_ctx *ctx)
{
	struct mem_block m;
	uint64_t t0;

	(void)ctx;
	assert_int_equal(rule_faults(e, 0, 300), 0);
	t0 = now_ms();
	assert_int_equal(block_offline(e->b, 5), 0);
	assert_true(now_ms() - t0 >= 290);
	assert_int_equal(hp_read_block(e->b, 5, &m), 0);
	assert_int_equal(m.state, MEM_STATE_OFFLINE);
	check_tree_block(e, &m);
}

static void rule_w4_writers_wait(struct rule_env *e, const struct rule_ctx *ctx)
{
	uint64_t t0, waited;
	pid_t pid;

	(void)ctx;
	assert_int_equal(rule_faults(e, 0, 600), 0);
	pid = spawn_writer(e, HP_ATTR_STATE, 5, "offline");
	assert_true(wait_state(e, 5, "going-offline"));
	/* W4: another write waits for the offline (and does not fail) */
	t0 = now_ms();
	assert_int_equal(e->b->ops->write_attr(e->b, HP_ATTR_AUTO_ONLINE, 0, "online"), 0);
	waited = now_ms() - t0;
	assert_int_equal(wait_exit(pid), 0);
	if (waited < 200)
		fail_msg("W4: second writer waited only %" PRIu64 " ms", waited);
	assert_true(wait_state(e, 5, "offline"));
}

static void rule_c7_auto_online_then_config0_busy(struct rule_env *e, const struct rule_ctx *ctx)
{
	struct mem_block m;

	(void)ctx;
	assert_int_equal(hp_set_auto_online(e->b, "online_movable"), 0);
	assert_int_equal(block_configure(e->b, 16), 0);
	assert_int_equal(hp_read_block(e->b, 16, &m), 0);
	assert_string_equal(MEM_ZONES_TEXT(m.zones), "Movable");
	/* C10 after auto-onlining: must offline first */
	assert_int_equal(block_deconfigure(e->b, 16), -EBUSY);
	assert_int_equal(block_offline(e->b, 16), 0);
	assert_int_equal(block_deconfigure(e->b, 16), 0);
}

static void rule_c0_no_firmware_tree(struct rule_env *e, const struct rule_ctx *ctx)
{
	struct mem_table *t = NULL;

	(void)ctx;
	assert_false(tree_exists(e, "sys/firmware/memory"));
	assert_true(tree_exists(e, "sys/devices/system/memory/memory31/state"));
	assert_int_equal(hp_discover(e->b, &t), 0);
	assert_false(t->has_firmware);
	for (size_t i = 0; i < t->n; i++) {
		assert_true(t->blocks[i].configured);
		assert_false(mem_block_is_standby(&t->blocks[i]));
	}
	mem_table_free(t);
}

struct rule_fn_case {
	const char *name;
	unsigned flags;
	void (*fn)(struct rule_env *e, const struct rule_ctx *ctx);
};

static const struct rule_fn_case rule_fn_cases[] = {
	{ "A1 A2 A3 A4 A5 A6 A7 A8 C1 C3 C14 P1 tree files", 0, rule_a_tree_files },
	{ "C14 C7 C11 devices dir appears and disappears", 0, rule_c14_dir_comes_and_goes },
	{ "C13 online/offline cycles keep the storage", 0, rule_c13_offline_keeps_storage },
	{ "W6 A7 going-offline visible, a caught signal goes on, SIGKILL ends it", 0, rule_w6_going_offline_then_killed },
	{ "W6 offline takes the migration latency", 0, rule_w6_latency },
	{ "W4 a writer waits for a long offline", 0, rule_w4_writers_wait },
	{ "C7 C10 auto-onlined block must be offlined first", 0, rule_c7_auto_online_then_config0_busy },
	{ "C0 without firmware every block is configured", RP_NOFW, rule_c0_no_firmware_tree },
};

static void run_rule_fn(void **state)
{
	const struct rule_ctx *ctx = *state;
	const struct rule_fn_case *fc = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(rule_fn_cases); i++)
		if (rule_fn_cases[i].fn == ctx->fn)
			fc = &rule_fn_cases[i];
	assert_non_null(fc);
	struct rule_env *e = rule_open(ctx, fc->flags);
	fc->fn(e, ctx);
	rule_env_close(e);
}

/* Runs every rule against machines made by OPEN_ENV; returns failures. */
static inline int run_rule_suite(const char *group_name, rule_env_open_fn open_env)
{
	size_t nt = ARRAY_SIZE(rule_cases), nf = ARRAY_SIZE(rule_fn_cases), n = nt + nf;
	struct CMUnitTest *tests = calloc(n, sizeof(*tests));
	struct rule_ctx *ctx = calloc(n, sizeof(*ctx));
	int failures;

	if (!tests || !ctx) {
		free(tests);
		free(ctx);
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		ctx[i].open_env = open_env;
		if (i < nt) {
			ctx[i].c = &rule_cases[i];
			tests[i].name = rule_cases[i].name;
			tests[i].test_func = run_rule_case;
		} else {
			ctx[i].fn = rule_fn_cases[i - nt].fn;
			tests[i].name = rule_fn_cases[i - nt].name;
			tests[i].test_func = run_rule_fn;
		}
		tests[i].initial_state = &ctx[i];
	}
	failures = _cmocka_run_group_tests(group_name, tests, n, NULL, NULL);
	free(tests);
	free(ctx);
	return failures;
}
