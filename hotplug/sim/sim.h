/* SPDX-License-Identifier: MIT */
/*
 * The sim backend: a model of an s390 guest's memory that enforces the rules
 * of kernel.md with the kernel's errno values.
 *
 * The state path names a small JSON descriptor (settings and faults); the
 * blocks' state lives in a state directory next to it ("<state>.d/"), one
 * records file per 256 blocks, so that a write reads and replaces a few
 * small files whatever the size of the machine (sim_impl.h has the layout).
 * Every file is replaced by rename, never fsynced: the machine outlives the
 * processes that use it, not the host.  All writers serialise on an flock
 * of "<state>.lock" (W4), readers never wait (A8).  Each change is also
 * rendered into a sysfs-shaped tree (sys/devices/system/memory,
 * sys/firmware/memory, proc/meminfo) under the tree directory, which is the
 * backend's root: `lsmem --sysroot TREE` and the policy read the same
 * machine.  A writer killed at any point leaves a mark that makes the next
 * writer (or open) rebuild what it did not finish, so the tree never stays
 * apart from the state.  A state file of the old single-file format (1) is
 * converted on the first open or write.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hotplug/backend.h"

struct sim_params {
	uint64_t online_bytes;    /* boot memory, configured and online from address 0 */
	uint64_t standby_bytes;   /* standby memory right after it, deconfigured */
	uint64_t block_size;      /* power of two, >= 1 MiB */
	bool memmap_supported;    /* C2/C12: memmap_on_memory=1 allowed */
	bool has_firmware;        /* false: a host without sys/firmware/memory (C0) */
	bool refuse_memmap_eopnotsupp; /* C12 newer kernels: EOPNOTSUPP for 1 when unsupported */
	uint64_t used_bytes;      /* memory in use by the "guest" (drives MemAvailable) */
	const char *auto_online;  /* auto_online_blocks, default "offline" */
	const char *tree;         /* tree directory; NULL: "<state>.tree" */
};

struct sim_faults {
	uint64_t *configure_eio;  /* blocks whose config=1 fails with EIO */
	size_t n_configure_eio;
	uint64_t *offline_ebusy;  /* blocks whose offlining fails with EBUSY */
	size_t n_offline_ebusy;
	uint64_t *online_enomem;  /* blocks whose onlining fails with ENOMEM (W5) */
	size_t n_online_enomem;
	uint64_t latency_ms;      /* added to every write that changes something;
				   * for offlining it is the migration time (W6) */
};

/* Creates (or replaces) the sim: descriptor, state directory, tree.  0 or -errno
 * (-EINVAL with sizes that are not block multiples or zero online memory,
 * a block size that is not a power of two >= 1 MiB, an unknown auto_online
 * word or a tree directory that is "/" or a real sysfs/procfs; -E2BIG for
 * more than SIM_MAX_BLOCKS blocks). */
#define SIM_MAX_BLOCKS (1u << 20)
_Static_assert(SIM_MAX_BLOCKS - 1 <= MEM_BLOCK_ID_MAX, "a sim's block ids fit a row (struct mem_block)");
int sim_init(const char *state_path, const struct sim_params *p);

/* The seed machine of kernel.md: 2G online, 2G standby, 128M blocks,
 * memmap on memory supported, firmware present, auto_online "offline". */
void sim_params_default(struct sim_params *p);

/* Replaces the fault set of an existing sim. */
int sim_set_faults(const char *state_path, const struct sim_faults *f);

/* Sets the memory the guest uses (MemAvailable = MemTotal - used). */
int sim_set_used(const char *state_path, uint64_t used_bytes);

/* Loads and validates the descriptor and every records file without
 * changing anything: 0 when they are sound, else -errno (-EBADMSG: not JSON
 * / truncated, -EINVAL: wrong types or inconsistent values, -ENOENT ...)
 * with a message in ERR naming the file and the problem ("sim.json: line 3
 * column 5: ...", "sim.json.d/s.x/blocks.0: block 7: unknown state 'x'"). */
int sim_check_file(const char *state_path, char *err, size_t errlen);

/* Whether a sim may live at STATE_PATH with its tree at TREE (NULL:
 * STATE_PATH.tree): 0, or -errno with ERR saying why (a folder that someone
 * other than this user or root may write is refused, unless it is sticky,
 * as /tmp is: -EPERM). */
int sim_check_place(const char *state_path, const char *tree, char *err, size_t errlen);

/* memgrantd's stricter rule, for what its helper writes as root: the
 * folder of STATE_PATH (when it exists) belongs to this user or root and
 * nobody else may write it, sticky or not.  0, or -EPERM with ERR saying
 * why and what to use instead. */
int sim_check_private(const char *state_path, char *err, size_t errlen);

/* The machine an existing sim was made as: block_size, online_bytes,
 * standby_bytes, memmap_supported, has_firmware (the rest zero). */
int sim_read_params(const char *state_path, struct sim_params *out);

/* B (from hp_sim_open()) writes for a process it serves (tests/tools/simfs.c),
 * whose death must end an offline as the writer's own would (W6):
 * WRITER_KILLED, asked during the offline's migration, says it is being
 * killed.  NULL: the writer is this process. */
void sim_set_kill_check(struct hp_backend *b, bool (*writer_killed)(void));

/* Tree directory of an existing sim (malloc'd), for callers that only
 * have the state path. */
int sim_tree_path(const char *state_path, char **out);
