#!/bin/sh
# Installs the Debian packages memgrant needs to build and test.
#   packaging/install-deps.sh               install everything (needs root)
#   packaging/install-deps.sh --if-missing  only when a build or test dependency is missing
#   packaging/install-deps.sh --if-missing=build
#                                           only when something ./configure requires is missing
#                                           (make runs this before configure on a fresh machine)
#   packaging/install-deps.sh --cross       also the s390x cross toolchain and qemu-user
set -eu
missing=

BUILD_DEPS="build-essential pkg-config libjansson-dev libmicrohttpd-dev libyaml-dev libfuse3-dev fuse3
libsmartcols-dev libcurl4-openssl-dev libsystemd-dev libseccomp-dev libcmocka-dev libvirt-dev libxml2-dev libssl-dev scdoc"
TEST_DEPS="util-linux curl openssl python3 procps"
CROSS_DEPS="gcc-s390x-linux-gnu qemu-user-static mmdebstrap"

# what ./configure cannot do without, as pkg-config modules
REQUIRED_MODULES="jansson cmocka libmicrohttpd yaml-0.1 smartcols libcurl libcrypto libssl libsystemd libseccomp"
OPTIONAL_MODULES="fuse3 libvirt libxml-2.0"

# missing_build: prints what configure would miss (nothing when all is there)
missing_build() {
	command -v cc >/dev/null 2>&1 || echo "a C compiler (cc)"
	if ! command -v pkg-config >/dev/null 2>&1; then
		echo pkg-config
		return
	fi
	for m in $REQUIRED_MODULES; do
		pkg-config --exists "$m" || echo "$m"
	done
}

have_all() {
	[ -z "$(missing_build)" ] || return 1
	for m in $OPTIONAL_MODULES; do
		pkg-config --exists "$m" || return 1
	done
	command -v scdoc >/dev/null 2>&1 || return 1
	command -v curl >/dev/null 2>&1 && command -v lsmem >/dev/null 2>&1 &&
		command -v python3 >/dev/null 2>&1
}

apt_install() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: build or test dependencies are missing${missing:+:$missing}" >&2
		echo "install-deps: installing them needs root; run: sudo $0" >&2
		echo "install-deps: (or install these Debian packages yourself: $*)" >&2
		exit 1
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "install-deps: no apt-get (not Debian); install these libraries with their headers:" \
			"$REQUIRED_MODULES $OPTIONAL_MODULES, and cc, pkg-config, scdoc" >&2
		exit 1
	fi
	echo "install-deps: installing the build and test dependencies (apt-get)${missing:+, missing:$missing}"
	export DEBIAN_FRONTEND=noninteractive
	echo "install-deps: apt-get update"
	apt-get update -qq
	# the packages' build needs systemd's pkg-config file (systemd.pc):
	# systemd-dev from Debian 13 on, systemd itself before
	if apt-cache show systemd-dev >/dev/null 2>&1; then
		set -- "$@" systemd-dev
	else
		set -- "$@" systemd
	fi
	echo "install-deps: apt-get install $# packages and what they need: $*"
	# a line every few packages instead of minutes of silence; apt-get's
	# own exit status is kept (no pipefail in sh)
	st=$(mktemp /tmp/memgrant-install-deps.XXXXXX)
	{ apt-get install -y --no-install-recommends "$@" 2>&1; echo $? >"$st"; } | awk '
		/^Need to get/ { print "install-deps: " $0; fflush() }
		/^Get:/ { got++; if (got % 25 == 1) { print "install-deps: downloading, " got " so far (" $5 ")"; fflush() } }
		/^Setting up / { set++; if (set % 25 == 1) { print "install-deps: setting up, " set " so far (" $3 ")"; fflush() } }
		/^E: / { print; fflush() }
		END { print "install-deps: " set + 0 " packages set up"; fflush() }'
	rc=$(cat "$st")
	rm -f "$st"
	[ "$rc" -eq 0 ] || { echo "install-deps: apt-get install failed (exit $rc)" >&2; exit 1; }
}

case ${1:-} in
--if-missing=build)
	missing=$(missing_build | tr '\n' ',' | sed 's/,$//; s/,/, /g')
	[ -z "$missing" ] && exit 0
	missing=" $missing"
	# shellcheck disable=SC2086
	apt_install $BUILD_DEPS $TEST_DEPS
	;;
--if-missing)
	have_all && exit 0
	# shellcheck disable=SC2086
	apt_install $BUILD_DEPS $TEST_DEPS
	;;
--cross)
	# the s390x libraries come in a target root (packaging/s390x-sysroot.sh),
	# not as multiarch packages: Debian's security updates carry no s390x index
	# shellcheck disable=SC2086
	apt_install $BUILD_DEPS $TEST_DEPS $CROSS_DEPS
	;;
"")
	# shellcheck disable=SC2086
	apt_install $BUILD_DEPS $TEST_DEPS
	;;
*) echo "usage: $0 [--if-missing[=build]|--cross]" >&2; exit 1 ;;
esac
