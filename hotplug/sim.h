/* SPDX-License-Identifier: MIT */
/*
 * The sim backend: a model of an s390 guest's memory that enforces the rules
 * of kernel.md with the kernel's errno values.
 *
 * State lives in a JSON file (written atomically: write, fsync, rename) so the
 * machine outlives the processes that use it; all writers serialise on an
 * flock of "<state>.lock" (W4), readers never wait (A8).  After every change
 * the sim writes a sysfs-shaped tree (sys/devices/system/memory,
 * sys/firmware/memory, proc/meminfo) under its tree directory, which is the
 * backend's root: `lsmem --sysroot TREE` and the policy read the same machine.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

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

/* Creates (or replaces) the state file and writes the tree. 0 or -errno
 * (-EINVAL with sizes that are not block multiples or zero online memory,
 * a block size that is not a power of two >= 1 MiB, an unknown auto_online
 * word or a tree directory that is "/" or a real sysfs/procfs; -E2BIG for
 * more than SIM_MAX_BLOCKS blocks). */
#define SIM_MAX_BLOCKS (1u << 20)
int sim_init(const char *state_path, const struct sim_params *p);

/* The seed machine of kernel.md: 2G online, 2G standby, 128M blocks,
 * memmap on memory supported, firmware present, auto_online "offline". */
void sim_params_default(struct sim_params *p);

/* Replaces the fault set of an existing sim. */
int sim_set_faults(const char *state_path, const struct sim_faults *f);

/* Sets the memory the guest uses (MemAvailable = MemTotal - used). */
int sim_set_used(const char *state_path, uint64_t used_bytes);

/* Loads and validates the state file without changing anything: 0 when it
 * is sound, else -errno (-EBADMSG: not JSON / truncated, -EINVAL: wrong
 * types or inconsistent values, -ENOENT ...) with a message in ERR naming
 * the file and the problem ("sim.json: line 3 column 5: ..."). */
int sim_check_file(const char *state_path, char *err, size_t errlen);

/* Tree directory of an existing sim (malloc'd), for callers that only
 * have the state path. */
int sim_tree_path(const char *state_path, char **out);
