#!/bin/sh
# Builds util-linux's lsmem from a source checkout, as the reference of the
# lsmem benchmarks and of tests/integration/lsmem_compare.sh (LSMEM_UPSTREAM).
#   bench/upstream-lsmem.sh UTIL_LINUX_SRC OUT
# UTIL_LINUX_SRC is a source tree or a git directory (bare clones too: its
# HEAD is read with git archive).
# Only sys-utils/lsmem.c and the lib/ files it needs are compiled (no
# autotools needed), against the system's libsmartcols; the column
# annotations of --annotate need libsmartcols 2.40 and are left out when the
# system's is older (the output without a terminal is the same).
# Prints the version the binary reports.
set -eu
src=${1:?usage: upstream-lsmem.sh UTIL_LINUX_SRC OUT}
out=${2:?usage: upstream-lsmem.sh UTIL_LINUX_SRC OUT}
work=$(mktemp -d /tmp/memgrant-ul.XXXXXX)
trap 'rm -rf "$work"' EXIT
ver=$(git --git-dir="$src" describe --tags 2>/dev/null || git -C "$src" describe --tags 2>/dev/null ||
	cat "$src/.tarball-version" 2>/dev/null || echo unknown)
ver=${ver#v}
if [ ! -f "$src/sys-utils/lsmem.c" ] && git --git-dir="$src" rev-parse HEAD >/dev/null 2>&1; then
	mkdir "$work/src"
	git --git-dir="$src" archive HEAD sys-utils/lsmem.c lib include | tar -x -C "$work/src"
	src=$work/src
fi
[ -f "$src/sys-utils/lsmem.c" ] || { echo "upstream-lsmem: no sys-utils/lsmem.c in $src" >&2; exit 1; }
cat >"$work/config.h" <<EOF
#define PACKAGE "util-linux"
#define PACKAGE_STRING "util-linux $ver"
#define PACKAGE_VERSION "$ver"
#define LOCALEDIR "/usr/share/locale"
#define HAVE_ERR_H 1
#define HAVE_NANOSLEEP 1
#define HAVE_FSYNC 1
#define HAVE_GETDTABLESIZE 1
#define HAVE_PROGRAM_INVOCATION_SHORT_NAME 1
#define HAVE___PROGNAME 1
#define HAVE_OPENAT 1
#define HAVE_FSTATAT 1
#define HAVE_DIRFD 1
#define HAVE_DECL_DIRFD 1
#define HAVE_STRNDUP 1
#define HAVE_STRNLEN 1
#define HAVE_REALLOCARRAY 1
#define HAVE_EXPLICIT_BZERO 1
#define HAVE_MEMPCPY 1
#define HAVE_SYS_SYSMACROS_H 1
#define HAVE_LOCALE_H 1
#define HAVE_STDIO_EXT_H 1
#define HAVE___FPENDING 1
#define _GNU_SOURCE 1
EOF
: >"$work/shim.h"
if ! grep -q scols_column_refer_annotation "$(pkg-config --variable=includedir smartcols)/libsmartcols/libsmartcols.h"; then
	echo '#define scols_column_refer_annotation(cl, s) ((void)(cl), (void)(s), 0)' >"$work/shim.h"
fi
libs=
for f in path strutils fileutils sysfs buffer debug procfs mbsalign; do
	[ -f "$src/lib/$f.c" ] && libs="$libs $src/lib/$f.c"
done
# shellcheck disable=SC2086
${CC:-cc} -O2 -w -include "$work/config.h" -include "$work/shim.h" -I"$src/include" \
	$(pkg-config --cflags smartcols) -o "$out" "$src/sys-utils/lsmem.c" $libs $(pkg-config --libs smartcols)
"$out" -V
