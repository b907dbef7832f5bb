/* SPDX-License-Identifier: MIT */
/*
 * kernel_rules: the rule suite (tests/unit/hotplug/rules.h) on the real
 * kernel's /sys, each case beside the sim's result for the same machine.
 * Runs as root inside the s390x kernel test's guest (tests/s390/guest.sh),
 * whose machine is the suite's: 2G of boot memory (blocks 0-15), 2G of
 * standby (16-31), 128M blocks.
 *
 *   kernel_rules kernel     on this machine's /sys (the guest, as root)
 *   kernel_rules sim Y|N    on a sim made like a kernel booted with (Y) or
 *                           without (N) memory_hotplug.memmap_on_memory=1
 *
 * Each prints one line per case, "RULES: case NAME<TAB>OUTCOME", and
 * tests/s390/compare_rules.py compares the two sides.  Table cases: the
 * write's errno and the block afterwards (configured, memmap_on_memory,
 * state, valid_zones) or auto_online_blocks.  Without the kernel parameter
 * the sim is made as Linux 7.2 is: memmap on memory unsupported, 1 refused
 * with EOPNOTSUPP.  Function cases (more than one write, cmocka asserts):
 * "passes" or "fails".  A case needing what the kernel cannot be made to do
 * (an injected fault or latency, no sys/firmware/memory, an older kernel)
 * prints "RULES: not run NAME: why".  Between cases the kernel goes back to
 * its boot state.  The sim side runs outside the guest (under qemu-user,
 * big-endian like the guest): the emulated CPU is slow.  Exit 2 when the
 * machine is not the suite's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/hotplug/rules.h"

#define BOOT_BLOCKS 16
#define ALL_BLOCKS 32

struct outcome {
	int err;       /* the write's return, or the failing pre step's */
	int pre_failed; /* a pre step failed (err is its return) */
	int configured, memmap;
	char state[24], zones[48], auto_online[24];
};

static int write_sys(const char *path, const char *value)
{
	FILE *f = fopen(path, "w");
	int r = 0;

	if (!f)
		return -errno;
	if (fputs(value, f) < 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

/* The child's result to the parent; 0 when it went through. */
static int write_all_int(int fd, int v)
{
	return write(fd, &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1;
}

static bool read_sys(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* Writes "offline" to the state file PATH, stopped after SECONDS: offlining
 * retries its migration with no time limit, and a signal ends it (W6). */
static int offline_within(const char *path, unsigned seconds)
{
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	int r;

	sigemptyset(&sa.sa_mask); /* no SA_RESTART: the write ends with EINTR */
	sigaction(SIGALRM, &sa, &old);
	alarm(seconds);
	r = write_sys(path, "offline");
	alarm(0);
	sigaction(SIGALRM, &old, NULL);
	return r;
}

/* Writes "offline" to the state file PATH of a block online in ZONE_MOVABLE
 * in a child SIGKILLed after SECONDS: since Linux 6.5 the kernel abandons an
 * offline's migration loop only on a fatal signal, so the alarm above does
 * not end one that never finishes (the second boot of check-s390-kernel hung
 * in the reset after C10 so).  Only for Movable blocks: the fork's own kernel
 * allocations never land there, while in a Normal block they would make
 * every try EBUSY.  -EINTR when it was stopped. */
static int offline_movable_within(const char *path, unsigned seconds)
{
	int fds[2], r = -EINTR;
	pid_t pid;

	fflush(stdout);
	if (pipe(fds) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0) {
		int w = write_sys(path, "offline");
		close(fds[0]);
		_exit(write_all_int(fds[1], w));
	}
	close(fds[1]);
	struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
	if (poll(&pfd, 1, (int)seconds * 1000) == 1) {
		if (read(fds[0], &r, sizeof(r)) != (ssize_t)sizeof(r))
			r = -EIO;
	} else {
		kill(pid, SIGKILL);
	}
	close(fds[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return r;
}

/* P1: whether this boot puts memmaps in the blocks (the kernel's parameter). */
static bool memmap_supported(void)
{
	char param[8] = "";

	read_sys("/sys/module/memory_hotplug/parameters/memmap_on_memory", param, sizeof(param));
	return streq(param, "Y") || streq(param, "force");
}

/* Back to the boot state: 0-15 configured, online in their kernel zone,
 * memmap 0; 16-31 deconfigured with the boot default memmap; auto_online
 * offline.  Prints what it cannot restore. */
static int kernel_reset(void)
{
	char p[128], v[64];
	bool supported = memmap_supported();
	int bad = 0;

	write_sys("/sys/devices/system/memory/auto_online_blocks", "offline");
	for (int b = 0; b < ALL_BLOCKS; b++) {
		bool boot = b < BOOT_BLOCKS;
		const char *mm = boot ? "0" : (supported ? "1" : "0");

		snprintf(p, sizeof(p), "/sys/devices/system/memory/memory%d/state", b);
		if (read_sys(p, v, sizeof(v))) {
			char z[128];
			snprintf(z, sizeof(z), "/sys/devices/system/memory/memory%d/valid_zones", b);
			bool wrong_zone = boot && streq(v, "online") && read_sys(z, z, sizeof(z)) && !streq(z, "DMA");
			/* A block a case onlined to Normal may hold kernel allocations
			 * (EBUSY, W6): the guest's caches are dropped and the offline
			 * tried again, as an operator would. */
			char mz[128];
			snprintf(mz, sizeof(mz), "/sys/devices/system/memory/memory%d/valid_zones", b);
			bool movable = streq(v, "online") && read_sys(mz, mz, sizeof(mz)) && streq(mz, "Movable");
			for (int tries = 0; (!boot || wrong_zone) && !streq(v, "offline") && tries < 10; tries++) {
				if ((movable ? offline_movable_within(p, 20) : offline_within(p, 2)) == 0)
					break;
				write_sys("/proc/sys/vm/drop_caches", "3");
			}
		}
		snprintf(p, sizeof(p), "/sys/firmware/memory/memory%d/config", b);
		if (!boot) {
			write_sys(p, "0");
		} else if (read_sys(p, v, sizeof(v)) && streq(v, "0")) {
			char m[128];
			snprintf(m, sizeof(m), "/sys/firmware/memory/memory%d/memmap_on_memory", b);
			write_sys(m, "0");
			write_sys(p, "1");
		}
		snprintf(p, sizeof(p), "/sys/firmware/memory/memory%d/memmap_on_memory", b);
		if (!boot && read_sys(p, v, sizeof(v)) && !streq(v, mm))
			write_sys(p, mm);
		if (boot) {
			snprintf(p, sizeof(p), "/sys/devices/system/memory/memory%d/state", b);
			if (read_sys(p, v, sizeof(v)) && streq(v, "offline"))
				write_sys(p, "online_kernel");
		}
		/* check */
		snprintf(p, sizeof(p), "/sys/firmware/memory/memory%d/config", b);
		if (!read_sys(p, v, sizeof(v)) || !streq(v, boot ? "1" : "0")) {
			printf("RULES: reset: block %d config %s, not %s\n", b, v, boot ? "1" : "0");
			bad++;
		}
	}
	return bad ? -EIO : 0;
}

static int real_env_open(const struct sim_params *p, struct rule_env **out)
{
	struct rule_env *e;
	int r;

	(void)p;
	r = kernel_reset();
	if (r < 0)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	r = hp_sysfs_open("/", &e->b);
	if (r == 0)
		e->root = strdup("/");
	if (r < 0 || !e->root) {
		rule_env_close(e);
		return r < 0 ? r : -ENOMEM;
	}
	*out = e;
	return 0;
}

/* Runs case C on E. */
static void run_case(struct rule_env *e, const struct rule_case *c, struct outcome *o)
{
	char buf[256], *save = NULL;
	struct mem_block m;

	memset(o, 0, sizeof(*o));
	snprintf(buf, sizeof(buf), "%s", c->pre);
	for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		enum hp_attr attr = tok[0] == 'c' ? HP_ATTR_CONFIG : tok[0] == 'm' ? HP_ATTR_MEMMAP
				  : tok[0] == 'o' ? HP_ATTR_ONLINE : tok[0] == 's' ? HP_ATTR_STATE
				  : HP_ATTR_AUTO_ONLINE;
		uint64_t id = tok[1] ? strtoull(tok + 1, NULL, 10) : 0;

		*eq = '\0';
		o->err = e->b->ops->write_attr(e->b, attr, id, eq + 1);
		if (o->err != 0) {
			o->pre_failed = 1;
			return;
		}
	}
	o->err = e->b->ops->write_attr(e->b, c->attr, c->id, c->value);
	if (c->attr == HP_ATTR_AUTO_ONLINE) {
		e->b->ops->read_auto_online(e->b, o->auto_online, sizeof(o->auto_online));
		return;
	}
	if (hp_read_block(e->b, c->id, &m) < 0) {
		o->configured = o->memmap = -9;
		return;
	}
	o->configured = m.configured;
	o->memmap = m.memmap_on_memory;
	snprintf(o->state, sizeof(o->state), "%s", mem_state_name(m.state));
	mem_zones_format(m.zones, o->zones, sizeof(o->zones));
}

static void describe(const struct outcome *o, char *buf, size_t len)
{
	if (o->pre_failed)
		snprintf(buf, len, "a pre step failed with %s", errno_name(o->err));
	else if (o->auto_online[0])
		snprintf(buf, len, "%s, auto_online_blocks %s", errno_name(o->err), o->auto_online);
	else
		snprintf(buf, len, "%s, configured %d, memmap %d, %s, zones '%s'", errno_name(o->err), o->configured,
			 o->memmap, o->state, o->zones);
}

/* Why case C cannot run on this kernel; NULL when it can.  *FLAGS: the sim's. */
static const char *not_runnable(const struct rule_case *c, bool supported, unsigned *flags)
{
	unsigned memmap_flags = c->flags & (RP_NOMEMMAP | RP_REFUSE);

	if (c->flags & (RP_EIO16 | RP_ENOMEM16 | RP_EBUSY5))
		return "needs an injected fault (the kernel has none to inject)";
	if (c->flags & RP_NOFW)
		return "needs a machine without sys/firmware/memory (not s390)";
	if (memmap_flags == RP_NOMEMMAP)
		return "needs an older kernel that stores memmap_on_memory=1 without support";
	if (supported && memmap_flags)
		return "needs a boot without memory_hotplug.memmap_on_memory=1 (the other boot)";
	/* without the memmap parameter, offlining boot block 5 left the emulated
	 * guest stuck for good (five boots, not even SIGKILL of the writer
	 * ending it): the cases that offline it run in the other boot */
	if (!supported && (strstr(c->pre, "o5=0") || (c->attr == HP_ATTR_ONLINE && c->id == 5 && streq(c->value, "0"))))
		return "offlines boot block 5, which leaves this emulated guest stuck without the memmap parameter (docs/kernel-rules.md); run in the other boot";
	*flags = supported ? 0 : (RP_NOMEMMAP | RP_REFUSE);
	return NULL;
}

static const char *const fn_on_kernel[] = {
	"A1 A2 A3 A4 A5 A6 A7 A8 C1 C3 C14 P1 tree files",
	"C14 C7 C11 devices dir appears and disappears",
	"C13 online/offline cycles keep the storage",
	"C7 C10 auto-onlined block must be offlined first",
};

/* Prints each case's outcome on the kernel, or on the sim made like it. */
static int run_side(bool on_kernel, bool supported)
{
	struct CMUnitTest fn_tests[ARRAY_SIZE(rule_fn_cases)];
	struct rule_ctx fn_ctx[ARRAY_SIZE(rule_fn_cases)];
	const char *fn_names[ARRAY_SIZE(rule_fn_cases)];
	size_t n_fn = 0;

	for (size_t i = 0; i < ARRAY_SIZE(rule_cases); i++) {
		const struct rule_case *c = &rule_cases[i];
		struct rule_env *e = NULL;
		struct outcome o;
		struct sim_params p;
		unsigned flags = 0;
		const char *why = not_runnable(c, supported, &flags);
		char d[200];
		int r;

		if (why) {
			printf("RULES: not run %s: %s\n", c->name, why);
			continue;
		}
		rule_params(flags, &p);
		r = on_kernel ? real_env_open(&p, &e) : sim_env_open(&p, &e);
		if (r < 0) {
			printf("RULES: case %s\tcannot set up the machine: %s\n", c->name, strerror(-r));
			continue;
		}
		run_case(e, c, &o);
		describe(&o, d, sizeof(d));
		printf("RULES: case %s\t%s\n", c->name, d);
		rule_env_close(e);
	}
	for (size_t i = 0; i < ARRAY_SIZE(rule_fn_cases); i++) {
		bool runs = false;

		for (size_t j = 0; j < ARRAY_SIZE(fn_on_kernel); j++)
			runs |= streq(rule_fn_cases[i].name, fn_on_kernel[j]);
		if (!runs) {
			printf("RULES: not run %s: needs an injected latency or a machine without sys/firmware/memory\n",
			       rule_fn_cases[i].name);
			continue;
		}
		fn_names[n_fn] = rule_fn_cases[i].name;
		fn_ctx[n_fn] = (struct rule_ctx){ .open_env = on_kernel ? real_env_open : sim_env_open,
						  .fn = rule_fn_cases[i].fn };
		fn_tests[n_fn] = (struct CMUnitTest){ .name = rule_fn_cases[i].name, .test_func = run_rule_fn,
						      .initial_state = &fn_ctx[n_fn] };
		n_fn++;
	}
	/* one group per case: its result is the case's outcome (cmocka prints why on failure) */
	for (size_t i = 0; i < n_fn; i++)
		printf("RULES: case %s\t%s\n", fn_names[i],
		       _cmocka_run_group_tests(fn_names[i], &fn_tests[i], 1, NULL, NULL) ? "fails" : "passes");
	if (on_kernel)
		kernel_reset();
	return 0;
}

int main(int argc, char **argv)
{
	char param[8] = "";
	bool on_kernel = argc == 2 && streq(argv[1], "kernel");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!on_kernel && !(argc == 3 && streq(argv[1], "sim") && (streq(argv[2], "Y") || streq(argv[2], "N")))) {
		fprintf(stderr, "usage: kernel_rules kernel | kernel_rules sim Y|N\n");
		return 2;
	}
	if (on_kernel) {
		if (access("/sys/firmware/memory/memory31/config", F_OK) != 0 ||
		    access("/sys/firmware/memory/memory32/config", F_OK) == 0) {
			printf("RULES: this machine is not the suite's (blocks 0-31 in sys/firmware/memory)\n");
			return 2;
		}
		read_sys("/sys/module/memory_hotplug/parameters/memmap_on_memory", param, sizeof(param));
		printf("RULES: kernel, memory_hotplug.memmap_on_memory=%s\n", param);
		return run_side(true, memmap_supported());
	}
	return run_side(false, streq(argv[2], "Y"));
}
