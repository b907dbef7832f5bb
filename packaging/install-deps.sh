#!/bin/sh
# Installs the Debian packages memgrant needs to build and test.
#   packaging/install-deps.sh               install everything (needs root)
#   packaging/install-deps.sh --if-missing  only when a build dependency is missing
#   packaging/install-deps.sh --cross       also the s390x cross toolchain and qemu-user
set -eu

BUILD_DEPS="build-essential pkg-config libjansson-dev libmicrohttpd-dev libyaml-dev libfuse3-dev fuse3
libsmartcols-dev libcurl4-openssl-dev libsystemd-dev libseccomp-dev libcmocka-dev libvirt-dev libxml2-dev libssl-dev scdoc"
TEST_DEPS="util-linux curl openssl python3 procps"
CROSS_DEPS="gcc-s390x-linux-gnu qemu-user-static mmdebstrap"

have_all() {
	command -v cc >/dev/null 2>&1 || return 1
	command -v pkg-config >/dev/null 2>&1 || return 1
	for m in jansson libmicrohttpd yaml-0.1 smartcols libcurl libsystemd libseccomp cmocka fuse3 libvirt libxml-2.0 libcrypto; do
		pkg-config --exists "$m" || return 1
	done
	command -v scdoc >/dev/null 2>&1 || return 1
	command -v curl >/dev/null 2>&1 && command -v lsmem >/dev/null 2>&1 &&
		command -v python3 >/dev/null 2>&1
}

apt_install() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing build dependencies; run as root: $0" >&2
		echo "install-deps: needs:" $* >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

case ${1:-} in
--if-missing)
	have_all && exit 0
	echo "install-deps: installing missing build dependencies (apt-get)"
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
*) echo "usage: $0 [--if-missing|--cross]" >&2; exit 2 ;;
esac
