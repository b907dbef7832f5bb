/* SPDX-License-Identifier: MIT */
/*
 * What each of memgrantd's two processes may still do once it runs:
 * identities, capabilities and seccomp filters (docs/security.md).
 *
 * - sandbox_drop(): the unprivileged process.  Started as root it becomes
 *   the configured user (gid, uid; as supplementary groups its primary group
 *   and GROUP, the API group, when it is a member of it); whatever it started
 *   as, it ends without any capability (effective, permitted, inheritable,
 *   ambient, bounding set) and with no_new_privs.  A configured user "root"
 *   keeps uid 0 without capabilities: for tests and development only, as
 *   uid 0 still owns the sysfs files.  Started as another user, that user
 *   stays (it cannot change).
 * - sandbox_drop_helper(): the helper keeps its uid (root owns the sysfs
 *   files it writes, so no capability is needed) and drops every capability,
 *   sets no_new_privs and becomes non-dumpable.
 * - sandbox_filter_helper() / sandbox_filter_main(): the seccomp allow-lists
 *   (libseccomp); a call outside them kills the process (SIGSYS; the audit
 *   subsystem logs the call) or, with MG_SECCOMP_LOG, is allowed and logged.
 *   With MG_SECCOMP_OFF they load nothing and return 0: for running under
 *   an emulator that refuses seccomp (qemu-user); the caller warns.
 *   In a build with AddressSanitizer the action is always "log": the
 *   sanitizer runtime makes calls (ptrace for leak checking, /proc reads)
 *   that the product never makes.
 *
 * Every function returns 0 or a negative errno with ERR saying what failed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>


/* What a system call outside a filter does (agent.seccomp). */
enum mg_seccomp_action {
	MG_SECCOMP_KILL, /* the process is killed (SIGSYS, logged by the audit subsystem) */
	MG_SECCOMP_LOG,  /* allowed and logged: for finding what a filter misses */
	MG_SECCOMP_OFF,  /* no filter is loaded: only where seccomp is unavailable (qemu-user) */
};

/* The uid and primary gid of USER: 0, or -ENOENT / -errno with ERR set. */
int sandbox_lookup_user(const char *user, uid_t *uid, gid_t *gid, char *err, size_t errlen);

/* Gives DIR (created 0700 when missing) and the files directly in it to
 * UID:GID, so that the unprivileged process may keep using a state
 * directory an earlier root-only version wrote.  Never follows a link: a
 * symbolic link is left alone, and a file with more than one name (a hard
 * link to something elsewhere, where fs.protected_hardlinks is 0) is
 * refused (-EPERM, naming it) rather than given away. */
int sandbox_own_dir(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen);

/* Makes sure the directory that will hold the API socket PATH exists and
 * that UID (with GID) may create files in it (creating it 0755 UID:GID when
 * missing). */
int sandbox_socket_dir(const char *path, uid_t uid, gid_t gid, char *err, size_t errlen);

/* See above.  USER is only used when running as root. */
int sandbox_drop(const char *user, const char *group, char *err, size_t errlen);
int sandbox_drop_helper(char *err, size_t errlen);

int sandbox_filter_helper(bool sim, enum mg_seccomp_action act, char *err, size_t errlen);
int sandbox_filter_main(enum mg_seccomp_action act, char *err, size_t errlen);

/* Which filter sandbox_filter_pfc() writes. */
enum sandbox_filter {
	SANDBOX_FILTER_HELPER,
	SANDBOX_FILTER_HELPER_SIM, /* the helper of the sim backend */
	SANDBOX_FILTER_MAIN,
};

/*
 * Writes filter WHICH as built for the architecture ARCH (libseccomp's name:
 * "s390x", "x86_64") to FD in libseccomp's pseudo filter code, without
 * loading it: how a test on one machine checks the filter of another
 * (tests/unit/hotplug/privsep/test_sandbox.c).  0 or -errno with ERR.
 */
int sandbox_filter_pfc(enum sandbox_filter which, const char *arch, int fd, char *err, size_t errlen);

/* True in a build with AddressSanitizer (see above). */
bool sandbox_sanitized(void);
