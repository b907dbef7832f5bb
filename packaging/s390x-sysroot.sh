#!/bin/sh
# Makes a Debian s390x target root for cross-building and testing memgrant:
# the -dev packages of every library memgrant links, with their dependencies,
# unpacked (no maintainer scripts run, nothing is executed as s390x).
#
#   packaging/s390x-sysroot.sh [--no-libvirt] [DIR]
#
# DIR defaults to $MEMGRANT_S390X_SYSROOT or /var/cache/memgrant-s390x/sysroot.
# A DIR made earlier for the same package list is reused as it is; otherwise it
# is built from scratch (as root: mmdebstrap --variant=extract, ~15 s and
# ~200 MiB with libvirt) in DIR.new and renamed into place when complete.
# The packages come from the Debian suites this machine's apt already uses
# (the same mirror, its -updates and -security), for this machine's release.
#
# Why a target root rather than Debian multiarch (apt-get install foo-dev:s390x):
# multiarch needs the s390x packages at exactly the versions of the installed
# amd64 ones, which fails whenever a mirror lags (e.g. a security update
# published for amd64 only), and it drags s390x libraries into the machine.
# A target root is self-consistent, lives outside the machine's package set,
# and qemu-s390x-static -L DIR runs the binaries against it.
#
# The root is printed on stdout at the end; messages go to stderr.
set -eu

libvirt=yes
dir=
for arg in "$@"; do
	case $arg in
	--no-libvirt) libvirt=no ;;
	-h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "s390x-sysroot: unknown option '$arg' (see --help)" >&2; exit 2 ;;
	*) [ -z "$dir" ] || { echo "s390x-sysroot: one DIR only" >&2; exit 2; }; dir=$arg ;;
	esac
done
: "${dir:=${MEMGRANT_S390X_SYSROOT:-/var/cache/memgrant-s390x/sysroot}}"
case $dir in
/*) ;;
*) dir=$(pwd)/$dir ;;
esac
dir=${dir%/}
if [ -z "$dir" ]; then
	echo "s390x-sysroot: refusing to use / as the target root" >&2
	exit 2
fi

arch=s390x
triplet=s390x-linux-gnu
# every library configure looks for, as -dev packages; libc6-dev for the C library
packages="libc6-dev libjansson-dev libcmocka-dev libmicrohttpd-dev libyaml-dev libsmartcols-dev
libcurl4-openssl-dev libssl-dev libsystemd-dev libseccomp-dev libfuse3-dev"
# a static shell and tools for the test driver that runs inside the s390x kernel test's
# guest (tests/s390/); only the guest's initramfs uses it
packages="$packages busybox-static"
[ "$libvirt" = yes ] && packages="$packages libvirt-dev libxml2-dev"
packages=$(echo "$packages" | tr -s ' \n' '  ' | sed 's/ $//') # one line, single spaces
stamp=$dir/.memgrant-sysroot
# this machine's release: the root matches what this machine builds natively
# shellcheck disable=SC1091
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || { echo "s390x-sysroot: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }

if [ -f "$stamp" ] && [ "$(sed -n 's/^packages: //p' "$stamp")" = "$packages" ] &&
	[ "$(sed -n 's/^release: //p' "$stamp")" = "$codename/$arch" ]; then
	echo "s390x-sysroot: reusing $dir ($(sed -n 's/^made: //p' "$stamp"))" >&2
	echo "$dir"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "s390x-sysroot: $dir is missing or was made for other packages or another release; run as root to make it" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v mmdebstrap >/dev/null 2>&1; then
	echo "s390x-sysroot: installing mmdebstrap" >&2
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

# the Debian repositories of this release that apt is configured with
# shellcheck disable=SC2016 # $(...) are apt's format fields
mirrors=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Identifier: Packages' | sort -u |
	while read -r uri suite; do
		case $suite in
		"$codename"|"$codename-updates"|"$codename-security") echo "deb $uri $suite main" ;;
		esac
	done)
if [ -z "$mirrors" ]; then
	echo "s390x-sysroot: apt has no repository for $codename; using http://deb.debian.org/debian" >&2
	mirrors="deb http://deb.debian.org/debian $codename main"
fi

t0=$(date +%s)
new=$dir.new
rm -rf --one-file-system "$new"
mkdir -p "$(dirname "$dir")"
echo "s390x-sysroot: making $dir for $codename/$arch from:" >&2
echo "$mirrors" | sed 's/^/    /' >&2
# a repository without s390x (some security mirrors) is skipped by apt with a notice;
# --skip=chroot/mount: nothing is mounted, nothing runs inside the root
echo "$mirrors" | mmdebstrap --quiet --variant=extract --architectures="$arch" \
	--include="$(echo "$packages" | tr ' ' ,)" --skip=chroot/mount \
	"$codename" "$new" - >&2

# Keep what compiling and loading need.  qemu-s390x-static -L looks up every
# absolute path in the root first: leftovers such as dev/, tmp/ or
# etc/resolv.conf would hide the machine's own files from the programs.
for d in dev tmp run var proc sys; do
	rm -rf --one-file-system "${new:?}/$d"
done
rm -f "$new/etc/resolv.conf" "$new/etc/hostname" "$new/etc/fstab"
rm -rf --one-file-system "$new/etc/apt" "$new/etc/dpkg"
# an empty loader cache: the s390x ld.so then searches the root's library
# directories instead of reading the machine's (amd64) /etc/ld.so.cache
: > "$new/etc/ld.so.cache"
[ -e "$new/lib/ld64.so.1" ] || { echo "s390x-sysroot: $new/lib/ld64.so.1 missing: not an s390x root" >&2; exit 1; }
[ -f "$new/usr/lib/$triplet/pkgconfig/jansson.pc" ] || { echo "s390x-sysroot: jansson.pc missing in $new" >&2; exit 1; }

{
	echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(( $(date +%s) - t0 ))s, $(du -sh "$new" | cut -f1)"
	echo "release: $codename/$arch"
	echo "packages: $packages"
} > "$new/.memgrant-sysroot"
chmod -R a+rX "$new" # the tests run some programs as uid 65534
rm -rf --one-file-system "$dir"
mv "$new" "$dir"
echo "s390x-sysroot: $(sed -n 's/^made: //p' "$stamp")" >&2
echo "$dir"
