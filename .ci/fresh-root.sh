#!/bin/sh
# CI: the README's two commands on a fresh Debian machine that has only make.
#
#   .ci/fresh-root.sh            (as root; called by .ci/run)
#
# 1. a Debian minbase root with make and nothing else (mmdebstrap
#    --variant=minbase --include=make, this machine's release and apt
#    repositories), kept as a tarball under $MEMGRANT_FRESH_CACHE
#    (/var/cache/memgrant-fresh-root) and remade when older than a week;
# 2. the tree (without build/, config.mk, .git) copied to /src in a new copy of
#    that root;
# 3. `make demo`, then `make check`, run in /src inside it by chroot, as root,
#    exactly as the README says: make installs the build dependencies itself.
#    make check runs tests/integration/doc_examples.sh there, so the README's
#    session by hand runs as written in /tmp, as root and as an ordinary
#    user (uid 65534), on this fresh root;
# 4. the packages' build exactly as docs/operations.md writes it ("Build the
#    packages": install-deps.sh, the apt-get line, build-deb.sh), taken from
#    the doc by tests/tools/doc_examples.py --in-place, in the same root.
#
# The root runs in a private mount namespace: /proc (with /proc/sys read-only)
# and /dev are mounted for it and vanish with it; /sys is not mounted at all,
# so nothing in it can reach this machine's memory hotplug files.  Downloaded
# packages are kept in $MEMGRANT_FRESH_CACHE/archives for the next run.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${MEMGRANT_FRESH_CACHE:-/var/cache/memgrant-fresh-root}
max_age_days=7

say() { printf 'fresh-root: %s\n' "$*"; }
die() { printf 'fresh-root: FAIL: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap, chroot, mounts)"
command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap missing (apt-get install mmdebstrap)"

# shellcheck disable=SC1091
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release"
tarball=$cache/minbase-$codename.tar
mkdir -p "$cache/archives/partial"

t0=$(date +%s)
# (the output's name ends in .tar: mmdebstrap picks the format by it)
if [ -f "$tarball" ] && [ -n "$(find "$tarball" -mtime -"$max_age_days" 2>/dev/null)" ]; then
	say "reusing $tarball ($(du -h "$tarball" | cut -f1))"
else
	# the Debian repositories of this release that apt is configured with
	# shellcheck disable=SC2016 # $(...) are apt's format fields
	mirrors=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' | sort -u |
		while read -r uri suite; do
			case $suite in
			"$codename"|"$codename-updates"|"$codename-security") echo "deb $uri $suite main" ;;
			esac
		done)
	[ -n "$mirrors" ] || mirrors="deb http://deb.debian.org/debian $codename main"
	say "making $tarball (minbase + make) from:"
	echo "$mirrors" | sed 's/^/    /'
	echo "$mirrors" | mmdebstrap --quiet --variant=minbase --include=make \
		"$codename" "$cache/new.tar" - || die "mmdebstrap failed"
	mv "$cache/new.tar" "$tarball"
	say "made $tarball in $(( $(date +%s) - t0 ))s ($(du -h "$tarball" | cut -f1))"
fi

root=$(mktemp -d /var/tmp/memgrant-fresh-root.XXXXXX)
cleanup() { rm -rf --one-file-system "$root"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
tar -C "$root" -xf "$tarball"
# the fresh root really has no compiler, no pkg-config, no libraries
for tool in cc pkg-config; do
	if chroot "$root" sh -c "command -v $tool" >/dev/null 2>&1; then
		die "the minbase root already has $tool"
	fi
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/src"
(cd "$top" && tar --exclude=./build --exclude=./config.mk --exclude=./.git \
	--exclude=./tests/vm/work -cf - .) | tar -C "$root/src" -xf -

say "make demo, make check, then the package build of docs/operations.md, in $root/src (chroot, as root)"
t1=$(date +%s)
rc=0
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private sh -eu -c '
	root=$1 cache=$2
	mount -t proc proc "$root/proc"
	mount --bind "$root/proc/sys" "$root/proc/sys"
	mount -o remount,bind,ro "$root/proc/sys"
	mount --rbind /dev "$root/dev"
	mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
	mount --bind "$cache/archives" "$root/var/cache/apt/archives"
	exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 TERM=dumb sh -ec "cd /src && make demo && make check &&
			python3 tests/tools/doc_examples.py --top /src --build /src/build \
				--in-place \"\$(python3 tests/tools/doc_examples.py --top /src --build /src/build --list docs/operations.md |
					sed -n \"s/: not run: .*fresh minbase root.*//p\")\" &&
			ls -l build/packages/*.deb"
' fresh-root "$root" "$cache" || rc=$?
t2=$(date +%s)
if [ $rc -ne 0 ]; then
	# the root goes away: keep the test logs for a look afterwards
	rm -rf "$cache/last-test-logs"
	[ -d "$root/src/build/test-logs" ] && cp -a "$root/src/build/test-logs" "$cache/last-test-logs"
	die "make demo / make check / the package build failed in the fresh root (exit $rc) after $((t2 - t1))s; logs in $cache/last-test-logs"
fi
say "OK: make demo, make check (the docs' examples included) and the package build as docs/operations.md writes it passed on a fresh $codename root: $((t2 - t1))s in the root, $((t2 - t0))s in all"
