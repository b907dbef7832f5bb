#!/bin/sh
# packaging/install-deps.sh --if-missing=build, which make runs before
# ./configure when config.mk is missing: quiet with everything there; as a
# user with something missing, a clear word on what and how (sudo), exit 1,
# and no apt-get.  (Installing as root is what .ci/fresh-root.sh proves.)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/memgrant-deps.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$top/packaging/install-deps.sh" --if-missing=build 2>&1) || fail "with everything installed: $out"
[ -z "$out" ] || fail "with everything installed it should say nothing: $out"

# a pkg-config that knows no library, and an apt-get that must not run
mkdir -p "$T/bin"
printf '#!/bin/sh\nexit 1\n' > "$T/bin/pkg-config"
printf '#!/bin/sh\necho ran >> %s/apt-ran\nexit 1\n' "$T" > "$T/bin/apt-get"
chmod 0755 "$T/bin/pkg-config" "$T/bin/apt-get" "$T"
if [ "$(id -u)" -eq 0 ]; then
	command -v setpriv >/dev/null 2>&1 || { echo "setpriv is needed to run as a user"; exit 77; }
	as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
else
	as_user=
fi
rc=0
out=$(PATH=$T/bin:$PATH $as_user sh "$top/packaging/install-deps.sh" --if-missing=build 2>&1) || rc=$?
[ $rc -eq 1 ] || fail "as a user with libraries missing: exit $rc, want 1: $out"
echo "$out" | grep -q "build or test dependencies are missing: jansson, cmocka" || fail "does not say what is missing: $out"
echo "$out" | grep -q "installing them needs root; run: sudo .*install-deps.sh" || fail "does not say how: $out"
[ ! -e "$T/apt-ran" ] || fail "apt-get ran as a user"
echo "$out"
# a wrong option is a usage error: exit 1
rc=0
"$top/packaging/install-deps.sh" --bogus >/dev/null 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "unknown option: exit $rc, want 1"
echo ok
