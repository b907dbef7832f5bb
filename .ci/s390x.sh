#!/bin/bash
# Cross-builds all of memgrant for s390x (big-endian) and runs its unit and
# integration tests under qemu-s390x-static.  Called by .ci/run; also fine by
# hand (docs/s390x.md).  Reconfigures this tree: run ./configure afterwards
# for a native build again.
#
#   .ci/s390x.sh [--no-libvirt]
#
# The libraries come from a Debian s390x target root made (once, then reused)
# by packaging/s390x-sysroot.sh under $MEMGRANT_S390X_SYSROOT, by default
# /var/cache/memgrant-s390x/sysroot.  binfmt_misc is not used: every s390x
# program is started explicitly as "qemu-s390x-static -L ROOT PROGRAM".
# The integration scripts find the programs under $BUILD; here BUILD is
# build/qemu, which holds one-line scripts that start build/memgrantd,
# build/memgrant-helper, build/memgrantctl, build/memgrant-host and the
# programs in build/tests/tools that way, so the scripts run unchanged.
# Test logs: build/qemu/test-logs/.
set -euo pipefail
cd "$(dirname "$0")/.."

host=s390x-linux-gnu
sysroot=${MEMGRANT_S390X_SYSROOT:-/var/cache/memgrant-s390x/sysroot}
sysroot_opts=()
for arg in "$@"; do
	case $arg in
	--no-libvirt) sysroot_opts+=(--no-libvirt) ;;
	-h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "s390x.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
	esac
done

step() { printf '\n--- s390x: %s\n' "$*"; }
t_start=$(date +%s)
lap=$t_start
laps=
took() { # NAME: record how long the step since the last call took
	local now
	now=$(date +%s)
	laps="$laps $1 $((now - lap))s,"
	lap=$now
}

step "cross compiler and qemu-user"
missing=
command -v "$host-gcc" >/dev/null 2>&1 || missing="$missing gcc-$host"
command -v qemu-s390x-static >/dev/null 2>&1 || missing="$missing qemu-user-static"
if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "s390x.sh: missing$missing; install them (apt-get install$missing) or run as root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
"$host-gcc" --version | sed -n 1p
qemu-s390x-static --version | sed -n 1p

step "target root"
sysroot=$(packaging/s390x-sysroot.sh "${sysroot_opts[@]}" "$sysroot")
sed 's/^/    /' "$sysroot/.memgrant-sysroot"
took sysroot

step "build (-Werror)"
./configure --host="$host" --with-sysroot="$sysroot"
make clean
make -j"$(nproc)"
took build
# ELF, 64-bit, big-endian, e_machine 22 (EM_S390)
case $(od -An -tx1 -N20 build/memgrantd | tr -d ' \n') in
7f454c460202*0016) ;;
*) echo "s390x.sh: build/memgrantd is not an s390x program" >&2; exit 1 ;;
esac

step "tests under qemu-s390x-static"
wrapper="qemu-s390x-static -L $sysroot"
real=$(pwd)/build
wrapped=$real/qemu
rm -rf "$wrapped"
mkdir -p "$wrapped/tests/tools"
# wrap NAME PROGRAM [ARG...]: $wrapped/NAME runs PROGRAM ARG... "$@" under qemu
wrap() {
	local name=$1 args
	shift
	args=$(printf ' %q' "$@")
	printf '#!/bin/sh\n# %s for s390x, through qemu-user (written by .ci/s390x.sh)\nexec %s%s "$@"\n' \
		"$name" "$wrapper" "$args" > "$wrapped/$name"
	chmod 0755 "$wrapped/$name"
}
# qemu-user does not let the program it runs load seccomp filters: it has no
# seccomp() call, refuses PR_SET_SECCOMP (EINVAL), and libseccomp then cannot
# even create a filter with the kill_process or log action.  memgrantd and
# its helper would stop at start, so they run with agent.seccomp=off here (a
# loud warning in each daemon log); the filters are tested natively.
no_seccomp=agent.seccomp=off
# memgrantd finds memgrant-helper next to itself (/proc/self/exe): under
# qemu that is the s390x build/memgrant-helper, which the kernel cannot
# execute without binfmt_misc (ENOEXEC); --helper names its wrapper instead.
wrap memgrant-helper "$real/memgrant-helper"
wrap memgrantd "$real/memgrantd" --helper "$wrapped/memgrant-helper" --set "$no_seccomp"
wrap memgrantctl "$real/memgrantctl"
if [ -x "$real/memgrant-host" ]; then # not built with --no-libvirt
	wrap memgrant-host "$real/memgrant-host"
fi
# every test tool; privhelper_probe starts memgrant-helper as memgrantd does,
# so it gets the same override (tests/integration/privsep_bad_requests.sh
# hands it $BUILD/memgrant-helper, the wrapper).  simfs gets a stub below.
for t in "$real"/tests/tools/*; do
	n=${t##*/}
	case $n in
	simfs | *.*) continue ;; # *.d, *.o: not programs
	privhelper_probe) wrap "tests/tools/$n" "$t" -o "$no_seccomp" ;;
	*) if [ -f "$t" ] && [ -x "$t" ]; then wrap "tests/tools/$n" "$t"; fi ;;
	esac
done
# simfs cannot work here: the FUSE protocol on /dev/fuse is in the kernel's
# byte order, and qemu-user does not convert it for a big-endian program on a
# little-endian machine (a mount would hang its first caller).  Exit 4 is
# simfs's "libfuse could not mount here", which the tests count as a skip.
cat > "$wrapped/tests/tools/simfs" <<'SH'
#!/bin/sh
echo "simfs: not run for s390x under qemu-user: FUSE requests are little-endian, qemu does not byte-swap /dev/fuse" >&2
exit 4
SH
chmod 0755 "$wrapped/tests/tools/simfs"
chmod 0755 "$real" "$wrapped" # daemon_auth runs memgrantctl as uid 65534

unit=$(find build/tests -maxdepth 1 -type f -name 'test_*' -perm -u+x | LC_ALL=C sort)
integration=$(find tests/integration -maxdepth 1 -name '*.sh' ! -name lib.sh | LC_ALL=C sort)
rc=0
# shellcheck disable=SC2086
# the crash matrix runs natively for 100 s twice (plain and sanitizer builds);
# under the emulator a shorter run still crosses the byte-order paths
CRASH_SECONDS=${CRASH_SECONDS:-30} BUILD=$wrapped TEST_WRAPPER=$wrapper tests/run.sh $unit $integration || rc=$?
took tests

printf '\ns390x: %s total %ss\n' "${laps%,}" "$(( $(date +%s) - t_start ))"
exit $rc
