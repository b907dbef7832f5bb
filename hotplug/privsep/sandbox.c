/* SPDX-License-Identifier: MIT */
/*
 * Identities, capabilities and seccomp filters (contract in sandbox.h).
 *
 * The filters list system calls by name and resolve them for the build's
 * architecture; a name the architecture does not have (open on arm64) is
 * skipped, so one list serves x86-64 and s390x.
 *
 * s390x: its glibc (built for kernels older than 4.3) makes every socket
 * call through socketcall(CALL, ARGS), and send() and recv() have no system
 * call of their own there at all.  libseccomp turns each socket call's name
 * into "socketcall with A0 == that call's number" on s390x, so socketcall is
 * allowed only for the calls a list names.  What it cannot see is behind
 * ARGS, a pointer: socket()'s family check holds for the direct socket call
 * only (docs/security.md, "seccomp on s390x").
 */
#include "hotplug/privsep/sandbox.h"
#include "hotplug/privsep/cred_channel.h"
#include "lib/fileio.h"
#include "lib/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#if defined(__SANITIZE_ADDRESS__)
#define MG_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MG_SANITIZED 1
#endif
#endif
#ifndef MG_SANITIZED
#define MG_SANITIZED 0
#endif

bool sandbox_sanitized(void)
{
	return MG_SANITIZED;
}

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r;
}

int sandbox_lookup_user(const char *user, uid_t *uid, gid_t *gid, char *err, size_t errlen)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int r = getpwnam_r(user, &pw, buf, sizeof(buf), &res);

	if (r != 0)
		return fail(err, errlen, -r, "agent.user: cannot look up '%s': %s", user, strerror(r));
	if (!res)
		return fail(err, errlen, -ENOENT, "agent.user: there is no user '%s' (the packages create "
			    "'memgrant' with sysusers.d)", user);
	*uid = pw.pw_uid;
	*gid = pw.pw_gid;
	return 0;
}

int sandbox_own_dir(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	DIR *d;
	struct dirent *de;
	struct stat st;
	int r = mkdir_p(dir, 0700);

	if (r < 0)
		return fail(err, errlen, r, "%s: cannot create: %s", dir, strerror(-r));
	/* root is about to give DIR and what it holds away: reached only
	 * through folders the agent's user cannot change, so that no link it
	 * planted on the way leads root to a folder of its choosing */
	if (geteuid() == 0) {
		char why[512] = "";

		r = ph_open_walk(dir, O_RDONLY | O_DIRECTORY, &fd, why, sizeof(why));
		if (r == -EACCES)
			return fail(err, errlen, r, "%s: not giving it to uid %u: %s", dir, (unsigned)uid, why);
		if (r < 0)
			return fail(err, errlen, r, "%s: cannot open: %s", dir, strerror(-r));
	} else {
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail(err, errlen, -errno, "%s: cannot open: %m", dir);
	}
	/* only what is not the user's yet: a chown to the owner it has would
	 * still need CAP_CHOWN, which the service does not have */
	if (fstat(fd, &st) < 0)
		return fail(err, errlen, -errno, "%s: %m", dir);
	if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
		return fail(err, errlen, -errno, "%s: cannot give it to uid %u: %m", dir, (unsigned)uid);
	d = fdopendir(dup(fd));
	if (!d)
		return fail(err, errlen, -errno, "%s: cannot list: %m", dir);
	while ((de = readdir(d))) {
		_cleanup_close_ int efd = -1;

		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		/* The folder is the agent's: what it holds may be a link to
		 * anything.  Each entry is pinned (O_PATH|O_NOFOLLOW: a symbolic
		 * link is the link itself) and judged and changed through that
		 * descriptor, so nothing can be swapped in between; an inode with
		 * a second name (a hard link, where fs.protected_hardlinks is 0)
		 * may be a file of root's elsewhere and is never given away. */
		efd = openat(fd, de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (efd < 0 || fstat(efd, &st) < 0) {
			if (errno == ENOENT)
				continue;
			r = fail(err, errlen, -errno, "%s/%s: %m", dir, de->d_name);
			break;
		}
		if (st.st_uid == uid && st.st_gid == gid)
			continue;
		if (S_ISLNK(st.st_mode))
			continue; /* a link's owner changes nothing it reaches */
		if (!S_ISDIR(st.st_mode) && st.st_nlink != 1) {
			r = fail(err, errlen, -EPERM, "%s/%s: has %lu names (a hard link): not giving it to uid %u, "
				 "it may be another file's; remove it (it is not memgrant's)", dir, de->d_name,
				 (unsigned long)st.st_nlink, (unsigned)uid);
			break;
		}
		if (fchownat(efd, "", uid, gid, AT_EMPTY_PATH) < 0) {
			r = fail(err, errlen, -errno, "%s/%s: cannot give it to uid %u: %m", dir, de->d_name,
				 (unsigned)uid);
			break;
		}
	}
	closedir(d);
	return r;
}

static bool may_create_in(const struct stat *st, uid_t uid, gid_t gid)
{
	if (st->st_uid == uid)
		return (st->st_mode & S_IWUSR) && (st->st_mode & S_IXUSR);
	if (st->st_gid == gid)
		return (st->st_mode & S_IWGRP) && (st->st_mode & S_IXGRP);
	return (st->st_mode & S_IWOTH) && (st->st_mode & S_IXOTH);
}

int sandbox_socket_dir(const char *path, uid_t uid, gid_t gid, char *err, size_t errlen)
{
	_cleanup_free_ char *dir = strdup(path);
	char *slash;
	struct stat st;
	int r;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		return fail(err, errlen, -EINVAL, "%s: not an absolute path", path);
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (stat(dir, &st) < 0) {
		if (errno != ENOENT)
			return fail(err, errlen, -errno, "%s: %m", dir);
		/* open to all: the socket's own mode and group decide who connects */
		r = mkdir_p(dir, 0755);
		if (r < 0)
			return fail(err, errlen, r, "%s: cannot create: %s", dir, strerror(-r));
		if (chown(dir, uid, gid) < 0)
			return fail(err, errlen, -errno, "%s: cannot give it to uid %u: %m", dir, (unsigned)uid);
		return 0;
	}
	if (!S_ISDIR(st.st_mode))
		return fail(err, errlen, -ENOTDIR, "%s: not a directory", dir);
	if (!may_create_in(&st, uid, gid))
		return fail(err, errlen, -EACCES, "%s: uid %u may not create the API socket there (owner %u, mode %04o); "
			    "the packages' tmpfiles.d gives /run/memgrant to memgrant", dir, (unsigned)uid,
			    (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

/* The bounding and ambient sets: nothing can come back through an exec.
 * The bounding set needs CAP_SETPCAP, which only a privileged start has. */
static int drop_inheritable_caps(char *err, size_t errlen)
{
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return fail(err, errlen, -errno, "cannot clear the ambient capabilities: %m");
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			break; /* past the kernel's last capability */
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
			return fail(err, errlen, -errno, "cannot drop capability %d from the bounding set: %m", cap);
	}
	return 0;
}

/* Empties the effective, permitted and inheritable sets and checks it. */
static int drop_caps(char *err, size_t errlen)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { { 0 } };
	int r = drop_inheritable_caps(err, errlen);

	if (r < 0)
		return r;
	if (syscall(SYS_capset, &h, data) < 0)
		return fail(err, errlen, -errno, "cannot drop the capabilities: %m");
	if (syscall(SYS_capget, &h, data) < 0)
		return fail(err, errlen, -errno, "cannot read the capabilities back: %m");
	if (data[0].effective || data[1].effective || data[0].permitted || data[1].permitted)
		return fail(err, errlen, -EPERM, "capabilities are still there after dropping them");
	return 0;
}

/* The user's primary group, plus GROUP when the user is a member of it:
 * the one supplementary group the agent needs (to give the API socket its
 * group).  No enumeration of every group database either.  A GROUP that
 * exists without the user in it is an error: the agent could not give the
 * socket that group. */
static int agent_groups(const char *user, gid_t gid, const char *group, gid_t out[2], size_t *n, char *err,
			size_t errlen)
{
	struct group gr, *res = NULL;
	char buf[16384];

	*n = 0;
	out[(*n)++] = gid;
	if (!group || !*group || getgrnam_r(group, &gr, buf, sizeof(buf), &res) != 0 || !res || gr.gr_gid == gid)
		return 0;
	for (char **m = gr.gr_mem; m && *m; m++)
		if (streq(*m, user)) {
			out[(*n)++] = gr.gr_gid;
			return 0;
		}
	return fail(err, errlen, -EPERM, "agent.api_group: %s is not a member of the group %s, so it could not give "
		    "the API socket that group (usermod -aG %s %s, or another api_group)", user, group, group, user);
}

int sandbox_drop(const char *user, const char *group, char *err, size_t errlen)
{
	int r;

	if (geteuid() == 0 || getuid() == 0) {
		uid_t uid;
		gid_t gid;

		r = sandbox_lookup_user(user, &uid, &gid, err, errlen);
		if (r < 0)
			return r;
		if (uid == 0) {
			/* agent.user: root (sandbox.h): uid 0 without capabilities
			 * can give the API socket a group it is a member of only */
			struct group gr, *res = NULL;
			char buf[16384];

			if (group && *group && getgrnam_r(group, &gr, buf, sizeof(buf), &res) == 0 && res &&
			    gr.gr_gid != gid) {
				gid_t both[2] = { gid, gr.gr_gid };

				if (setgroups(2, both) < 0)
					return fail(err, errlen, -errno, "cannot add the group %s: %m", group);
			}
			goto caps;
		}
		gid_t groups[2];
		size_t n;

		r = agent_groups(user, gid, group, groups, &n, err, errlen);
		if (r < 0)
			return r;
		if (setgroups(n, groups) < 0)
			return fail(err, errlen, -errno, "cannot set the groups of %s: %m", user);
		if (setresgid(gid, gid, gid) < 0)
			return fail(err, errlen, -errno, "cannot become gid %u: %m", (unsigned)gid);
		r = drop_inheritable_caps(err, errlen);
		if (r < 0)
			return r;
		/* leaving uid 0 empties the permitted and effective sets (no keepcaps) */
		if (setresuid(uid, uid, uid) < 0)
			return fail(err, errlen, -errno, "cannot become %s (uid %u): %m", user, (unsigned)uid);
		if (setuid(0) == 0 || seteuid(0) == 0)
			return fail(err, errlen, -EPERM, "could become root again after dropping to %s", user);
	}
caps:
	r = drop_caps(err, errlen);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(err, errlen, -errno, "cannot set no_new_privs: %m");
	if (MG_SANITIZED)
		prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); /* LeakSanitizer ptraces its own threads */
	return 0;
}

int sandbox_drop_helper(char *err, size_t errlen)
{
	int r = drop_caps(err, errlen);

	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(err, errlen, -errno, "cannot set no_new_privs: %m");
	if (!MG_SANITIZED && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return fail(err, errlen, -errno, "cannot make the helper non-dumpable: %m");
	return 0;
}

/* --- seccomp ------------------------------------------------------------------ */

static void ctx_releasep(scmp_filter_ctx *c)
{
	if (*c)
		seccomp_release(*c);
}

static int allow_names(scmp_filter_ctx c, const char *const *names, size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		int r;

		if (nr == __NR_SCMP_ERROR)
			continue; /* not a system call on this architecture */
		r = seccomp_rule_add(c, SCMP_ACT_ALLOW, nr, 0);
		if (r < 0 && r != -EEXIST)
			return fail(err, errlen, r, "seccomp: cannot allow %s: %s", names[i], strerror(-r));
	}
	return 0;
}

static int load(scmp_filter_ctx c, const char *who, char *err, size_t errlen)
{
	int r;

	/* no_new_privs is set already; libseccomp need not */
	seccomp_attr_set(c, SCMP_FLTATR_CTL_NNP, 0);
	r = seccomp_load(c);
	if (r < 0)
		return fail(err, errlen, r, "seccomp: cannot load the %s filter: %s", who, strerror(-r));
	return 0;
}

static uint32_t default_action(enum mg_seccomp_action act)
{
	if (act == MG_SECCOMP_LOG || MG_SANITIZED)
		return SCMP_ACT_LOG;
	return SCMP_ACT_KILL_PROCESS;
}

/* seccomp_init() fails when out of memory or when the kernel does not offer
 * the default action: both actions need API level 3 (the seccomp() call with
 * SECCOMP_GET_ACTION_AVAIL).  qemu-user offers neither seccomp() nor
 * PR_SET_SECCOMP, so it ends up here: say that rather than "no memory". */
static int init_failed(enum mg_seccomp_action act, char *err, size_t errlen)
{
	unsigned level = seccomp_api_get();

	if (level < 3)
		return fail(err, errlen, -EOPNOTSUPP, "seccomp: this kernel (or emulator) cannot load filters with the "
			    "action %s (libseccomp API level %u, 3 needed); agent.seccomp: off runs without filters",
			    act == MG_SECCOMP_LOG || MG_SANITIZED ? "log" : "kill_process", level);
	return fail(err, errlen, -ENOMEM, "seccomp: cannot create a filter");
}

/*
 * The helper: receive a request, open one file, write it, answer (a
 * sequence's answers in one sendmmsg).  The sim
 * (a model kept in files) additionally loads and saves its state file and
 * rewrites its tree, under a lock, sleeping to model latency.  send and recv
 * are named for s390x, where they are socketcall's SYS_SEND and SYS_RECV
 * (elsewhere glibc makes them sendto and recvfrom).
 */
static const char *const helper_calls[] = {
	"recvmsg", "recv", "send", "sendto", "sendmsg", "sendmmsg", "poll", "ppoll", "openat", "write", "close", "newfstatat",
	"fstatat64", "fstat", "rt_sigreturn", "sigreturn", "brk", "mmap", "munmap", "exit_group", "exit",
	"clock_gettime", "clock_nanosleep", "restart_syscall", "madvise",
	/* ph_cred_open_walk: links followed by hand, folders checked against its own uid */
	"readlinkat", "readlink", "geteuid", "geteuid32",
};
static const char *const helper_sim_calls[] = {
	"openat2", "read", "lseek", "flock", "fsync", "fdatasync", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
	"unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "getdents64", "statfs",
	"fstatfs", "fcntl", "rt_sigprocmask", "getrandom", "getpid", "gettid", "access",
	"faccessat", "faccessat2", "umask", "ftruncate", "fchmod", "mremap", "pread64", "pwrite64", "rmdir",
	"link", "linkat", "futex",
};

/*
 * Offlines under a deadline (hp_write_with_deadline()): two pipes, fork()
 * (glibc's clone with exactly its flags, nothing that shares memory or
 * makes a thread), the child's parent-death signal and its check of its
 * parent (getpid before the fork, getppid after), the requests and answers
 * read from the pipes, SIGKILL for the child at the deadline (no other
 * signal), and the child reaped.  glibc's fork also registers the child's
 * robust futex list.  s390x passes clone's flags second (the kernel's
 * CLONE_BACKWARDS2).
 */
static const char *const helper_offline_calls[] = { "pipe2", "read", "wait4", "getpid", "getppid", "set_robust_list" };

static int build_helper(scmp_filter_ctx c, uint32_t arch, bool sim, char *err, size_t errlen)
{
	const scmp_datum_t fork_flags = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;
	bool flags_second = arch == SCMP_ARCH_S390 || arch == SCMP_ARCH_S390X;
	int r = allow_names(c, helper_calls, ARRAY_SIZE(helper_calls), err, errlen);

	if (r == 0)
		r = allow_names(c, helper_offline_calls, ARRAY_SIZE(helper_offline_calls), err, errlen);
	if (r < 0)
		return r;
	r = seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				     flags_second ? SCMP_A1(SCMP_CMP_EQ, fork_flags) : SCMP_A0(SCMP_CMP_EQ, fork_flags));
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_PDEATHSIG));
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A1(SCMP_CMP_EQ, SIGKILL));
	if (r < 0)
		return fail(err, errlen, r, "seccomp: cannot allow the offline's child: %s", strerror(-r));
	if (sim)
		r = allow_names(c, helper_sim_calls, ARRAY_SIZE(helper_sim_calls), err, errlen);
	return r;
}

int sandbox_filter_helper(bool sim, enum mg_seccomp_action act, char *err, size_t errlen)
{
	_cleanup_(ctx_releasep) scmp_filter_ctx c = NULL;
	int r;

	if (act == MG_SECCOMP_OFF)
		return 0; /* the caller says so in the log */
	c = seccomp_init(default_action(act));
	if (!c)
		return init_failed(act, err, errlen);
	r = build_helper(c, seccomp_arch_native(), sim, err, errlen);
	if (r < 0)
		return r;
	return load(c, "helper", err, errlen);
}

/*
 * The unprivileged process: threads (pthreads, libmicrohttpd's per
 * connection), files (journal, sim state, sysfs and procfs reads), sockets
 * (the API, libcurl with OpenSSL, sd_notify, uevents over netlink), event
 * fds, and hooks started with posix_spawn (a hook inherits this filter: what
 * a shell script does with coreutils is covered).
 */
static const char *const main_calls[] = {
	/* memory, threads, signals, time */
	"brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mlock", "munlock", "membarrier",
	"clone", "clone3", "fork", "vfork", "futex", "futex_time64", "set_robust_list", "get_robust_list",
	"rseq", "set_tid_address", "gettid", "getpid", "getppid", "tgkill", "tkill", "kill", "exit",
	"exit_group", "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
	"sched_getscheduler", "getpriority", "setpriority", "prlimit64", "getrlimit", "ugetrlimit",
	"setrlimit", "getrusage", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigreturn",
	"rt_sigtimedwait", "rt_sigsuspend", "rt_sigpending", "sigaltstack", "restart_syscall", "pause",
	"alarm", "clock_gettime", "clock_gettime64", "clock_getres", "clock_nanosleep", "nanosleep",
	"gettimeofday", "time", "times", "timer_create", "timer_settime", "timer_gettime", "timer_delete",
	"setitimer", "getitimer", "getrandom", "uname", "sysinfo", "prctl", "arch_prctl", "capget",
	/* identity (read only) */
	"getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups", "getpgrp",
	"getpgid", "getsid", "setpgid", "setsid",
	/* files */
	"open", "openat", "openat2", "creat", "read", "write", "pread64", "pwrite64", "readv", "writev",
	"preadv", "pwritev", "close", "close_range", "fstat", "stat", "lstat", "newfstatat", "fstatat64",
	"statx", "statfs", "fstatfs", "lseek", "_llseek", "fsync", "fdatasync", "sync_file_range",
	"fadvise64", "fallocate", "ftruncate", "truncate", "rename", "renameat", "renameat2", "link",
	"linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "mkdir",
	"mkdirat", "rmdir", "getdents", "getdents64", "fcntl", "fcntl64", "flock", "access", "faccessat",
	"faccessat2", "chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown", "umask",
	"getcwd", "chdir", "fchdir", "dup", "dup2", "dup3", "pipe", "pipe2", "ioctl", "utimensat",
	"copy_file_range", "sendfile", "splice", "memfd_create", "inotify_init", "inotify_init1",
	"inotify_add_watch", "inotify_rm_watch",
	/* waiting */
	"poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6", "pselect6_time64",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"eventfd", "eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime",
	"timerfd_gettime",
	/* sockets (the families are checked below) */
	"socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname", "getpeername",
	"getsockopt", "setsockopt", "send", "recv", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
	"recvmmsg", "shutdown",
	/* hooks */
	"execve", "execveat", "wait4", "waitid", "waitpid", "pidfd_open", "pidfd_send_signal",
};

static int build_main(scmp_filter_ctx c, char *err, size_t errlen)
{
	static const int families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
	int r = allow_names(c, main_calls, ARRAY_SIZE(main_calls), err, errlen);

	if (r < 0)
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
		r = seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]));
		if (r < 0 && r != -EEXIST)
			return fail(err, errlen, r, "seccomp: cannot allow socket(%d): %s", families[i], strerror(-r));
	}
	/* socket() of another family fails like an unsupported one, not fatally:
	 * libraries probe for what the kernel offers.  On s390x these rules
	 * collide with the socketcall(SYS_SOCKET) allowed above (-EEXIST): there
	 * the family is checked for the direct call only. */
	for (int fam = 0; fam < AF_MAX; fam++) {
		bool ok = false;
		for (size_t i = 0; i < ARRAY_SIZE(families); i++)
			ok |= fam == families[i];
		if (!ok)
			seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
					 SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam));
	}
	return 0;
}

int sandbox_filter_main(enum mg_seccomp_action act, char *err, size_t errlen)
{
	_cleanup_(ctx_releasep) scmp_filter_ctx c = NULL;
	int r;

	if (act == MG_SECCOMP_OFF)
		return 0; /* the caller says so in the log */
	c = seccomp_init(default_action(act));
	if (!c)
		return init_failed(act, err, errlen);
	r = build_main(c, err, errlen);
	if (r < 0)
		return r;
	return load(c, "main process", err, errlen);
}

int sandbox_filter_pfc(enum sandbox_filter which, const char *arch, int fd, char *err, size_t errlen)
{
	_cleanup_(ctx_releasep) scmp_filter_ctx c = seccomp_init(SCMP_ACT_KILL_PROCESS);
	uint32_t token = seccomp_arch_resolve_name(arch);
	int r;

	if (!c)
		return fail(err, errlen, -ENOMEM, "seccomp: cannot create a filter");
	if (token == 0)
		return fail(err, errlen, -EINVAL, "seccomp: libseccomp knows no architecture '%s'", arch);
	/* the names are resolved for this machine and translated by libseccomp;
	 * one filter holds architectures of one byte order only: native goes first */
	if (token != seccomp_arch_native()) {
		r = seccomp_arch_remove(c, SCMP_ARCH_NATIVE);
		if (r == 0)
			r = seccomp_arch_add(c, token);
		if (r < 0)
			return fail(err, errlen, r, "seccomp: cannot make a filter for %s: %s", arch, strerror(-r));
	}
	r = which == SANDBOX_FILTER_MAIN ? build_main(c, err, errlen)
					 : build_helper(c, token, which == SANDBOX_FILTER_HELPER_SIM, err, errlen);
	if (r < 0)
		return r;
	r = seccomp_export_pfc(c, fd);
	if (r < 0)
		return fail(err, errlen, r, "seccomp: cannot write the filter: %s", strerror(-r));
	return 0;
}
