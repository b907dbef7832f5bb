#!/bin/sh
# Builds the memgrant .deb from this source tree and checks it with lintian.
#   packaging/build-deb.sh [OUTDIR]      (default OUTDIR: build/packages)
# The files git tracks (or, outside a git checkout, the tree without its
# build outputs) are copied to a temporary directory, packaging/debian/ becomes its debian/, and
# `dpkg-buildpackage -us -uc -b` builds the binary package there.  lintian
# must report neither errors nor warnings.  Needs: dpkg-dev debhelper lintian
# fakeroot scdoc and the build dependencies of packaging/debian/control.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build/packages}
version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)

tmp=$(mktemp -d /tmp/memgrant-deb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
src=$tmp/memgrant-$version

mkdir -p "$src"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# only sources: never a build folder that happens to lie in the tree
	(cd "$top" && git ls-files -z | tar --null -T - -cf -) | tar -C "$src" -xf -
else
	(cd "$top" && tar --exclude='./build*' --exclude=./config.mk --exclude=./.git \
		--exclude=./debian --exclude=./.ci-work -cf - .) | tar -C "$src" -xf -
fi
cp -a "$top/packaging/debian" "$src/debian"

echo "build-deb: building memgrant $version in $src"
# CI runs the test suite on its own; the package build does not repeat it.
(cd "$src" && DEB_BUILD_OPTIONS="nocheck${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" \
	dpkg-buildpackage -us -uc -b)

changes=$(ls "$tmp"/memgrant_"$version"_*.changes)
echo "build-deb: lintian $(basename "$changes")"
lintian --fail-on error,warning --display-info "$changes"

mkdir -p "$out"
for f in "$tmp"/*.deb "$tmp"/*.buildinfo "$changes"; do
	cp "$f" "$out/"
	echo "build-deb: wrote $out/$(basename "$f")"
done
