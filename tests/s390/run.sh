#!/bin/bash
# make check-s390-kernel: memgrant on the real s390x kernel (docs/vm-test.md).
#
#   tests/s390/run.sh            (BUILD=build: an s390x build, see below)
#
# Boots the kit in ../shared/s390-kernel (beside the project; another with
# MEMGRANT_S390_KIT=DIR): Linux 7.2.13 for s390x, whose
# drivers/s390/char/sclp_mem.c drives standby memory through
# /sys/firmware/memory, under the kit's QEMU (TCG, no KVM needed).  The guest
# runs from an initramfs (tests/s390/mkroot.py): memgrantd, memgrant-helper,
# memgrantctl and kernel_rules from $BUILD with their libraries from the s390x
# target root, busybox, and tests/s390/guest.sh as /init.  Two boots, each
# with 2G of core and 2G of standby memory (the machine of the rule suite):
# with memory_hotplug.memmap_on_memory=1 and without it.
#
# $BUILD must hold an s390x build: .ci/s390x.sh makes one (or ./configure
# --host=s390x-linux-gnu --with-sysroot=ROOT && make), and the target root is
# $MEMGRANT_S390X_SYSROOT or /var/cache/memgrant-s390x/sysroot
# (packaging/s390x-sysroot.sh).  Exit 77 (skip) without the kit; 0 when every
# check passed in both boots; 1 otherwise.  Console logs: $BUILD/s390-kernel/.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD:-build}
kit=${MEMGRANT_S390_KIT:-../shared/s390-kernel}
sysroot=${MEMGRANT_S390X_SYSROOT:-/var/cache/memgrant-s390x/sysroot}
out=$BUILD/s390-kernel
t_start=$(date +%s)

if [ ! -x "$kit/run.sh" ] || [ ! -f "$kit/bzImage" ] || [ ! -f "$kit/mkinitrd.py" ]; then
	echo "check-s390-kernel: skipped: no s390 kernel kit at $kit (run.sh, bzImage, mkinitrd.py);" \
		"set MEMGRANT_S390_KIT to the kit's folder"
	exit 77
fi
missing=$(ldd "$kit/qemu-system-s390x" 2> /dev/null | sed -n 's/^[[:space:]]*\([^ ]*\) => not found.*/\1/p' | tr '\n' ' ')
if [ -n "$missing" ]; then
	echo "check-s390-kernel: the kit's qemu-system-s390x needs $missing(its README lists the Debian packages:" \
		"libglib2.0-0 libpixman-1-0 zlib1g libbz2-1.0 libcurl4 libgnutls30 libnettle8)" >&2
	exit 1
fi
# ELF, 64-bit, big-endian, e_machine 22 (EM_S390)
case $(od -An -tx1 -N20 "$BUILD/memgrantd" 2> /dev/null | tr -d ' \n') in
7f454c460202*0016) ;;
*)
	echo "check-s390-kernel: $BUILD/memgrantd is not an s390x program: build for s390x first" \
		"(.ci/s390x.sh, or ./configure --host=s390x-linux-gnu --with-sysroot=$sysroot && make)" >&2
	exit 1
	;;
esac
if [ ! -x "$sysroot/bin/busybox" ]; then
	echo "check-s390-kernel: $sysroot has no bin/busybox: make the target root again" \
		"(packaging/s390x-sysroot.sh $sysroot)" >&2
	exit 1
fi

mkdir -p "$out"
python3 tests/s390/mkroot.py "$BUILD" "$sysroot" "$out/root"
python3 "$kit/mkinitrd.py" "$out/root" "$out/initrd.cpio.gz"
echo "check-s390-kernel: initramfs $(du -h "$out/initrd.cpio.gz" | cut -f1)"

rc=0
passed=0
failed=0
S390_QUIET_S=${S390_QUIET_S:-120}
boot() { # NAME KERNEL-ARGS P1: P1 the sim's memmap parameter (Y or N)
	local name=$1 args=$2 p1=$3 log=$out/console-$1.log t0 qrc=0 result
	t0=$(date +%s)
	echo "--- boot $name: $args"
	# -k: a guest that hangs the emulator ignores the timeout's TERM.  The
	# guest can get stuck for good offlining a Movable block in the rule
	# suite's resets (without the memmap parameter, after C10; no signal,
	# not even SIGKILL of the writer, ends it): a console silent for
	# $S390_QUIET_S s is such a guest, stopped (the whole process group,
	# KILL) and booted again, up to 4 times; a verdict, passed or failed,
	# is final.  A healthy boot prints a line every few seconds.
	for try in 1 2 3 4; do
		qrc=0
		: > "$log"
		setsid timeout -k 10 480 "$kit/run.sh" -m 2G -s 2G -t 450 -a "quiet $args" "$out/initrd.cpio.gz" > "$log" 2>&1 &
		local qpid=$! last=-1 quiet=0 size
		while kill -0 "$qpid" 2> /dev/null; do
			sleep 5
			size=$(stat -c %s "$log" 2> /dev/null || echo 0)
			if [ "$size" = "$last" ]; then quiet=$((quiet + 5)); else quiet=0 last=$size; fi
			if [ "$quiet" -ge "$S390_QUIET_S" ]; then
				kill -KILL -- "-$qpid" 2> /dev/null || true
				break
			fi
		done
		wait "$qpid" || qrc=$?
		grep -q '^S390: RESULT ' "$log" && break
		[ "$try" = 4 ] || echo "check-s390-kernel: boot $name ended without a verdict (QEMU exit $qrc, console silent ${quiet}s: the guest stuck): booting it again"
	done
	tr -d '\r' < "$log" | grep -E '^(S390|RULES: kernel)' || true
	result=$(tr -d '\r' < "$log" | sed -n 's/^S390: RESULT \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
	if [ -z "$result" ]; then
		echo "check-s390-kernel: boot $name ended without a result (QEMU exit $qrc); the console's end:" >&2
		tail -n 30 "$log" >&2
		rc=1
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + ${result% *}))
	failed=$((failed + ${result#* }))
	[ "${result#* }" = 0 ] || rc=1
	echo "--- boot $name: ${result% *} passed, ${result#* } failed in $(($(date +%s) - t0))s (log: $log)"
	# the same cases on the sim made like this kernel, big-endian as in the guest
	echo "--- the rule suite: the real kernel ($name) against the sim"
	qemu-s390x-static -L "$sysroot" "$BUILD/tests/tools/kernel_rules" sim "$p1" > "$out/rules-sim-$name.txt" 2>&1 || true
	if python3 tests/s390/compare_rules.py <(tr -d '\r' < "$log") "$out/rules-sim-$name.txt" \
		docs/kernel-rules.md > "$out/rules-$name.txt"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		rc=1
	fi
	grep -v '^RULES: agree' "$out/rules-$name.txt" || true
}
boot memmap-on-memory memory_hotplug.memmap_on_memory=1 Y
boot no-memmap-on-memory "" N

echo "check-s390-kernel: $passed passed, $failed failed in $(($(date +%s) - t_start))s"
exit $rc
