#!/bin/sh
# test-runner: alone (builds the source tree twice for the README's session)
# Every command shown in README.md, docs/*.md and the man pages' EXAMPLES
# runs as written, on the sim, each in a mount namespace of its own with a
# fresh /tmp and /run and the system read-only (tests/tools/doc_examples.py
# says how, and how to mark an example that cannot run here: a real s390
# guest, systemd as PID 1, libvirtd).  Output the doc shows is compared.
# The last lines count the examples run, failed and marked, with the reasons.
# One example by hand:
#   python3 tests/tools/doc_examples.py --top . --build build --only docs/operations.md:296
set -u
BUILD=${BUILD:-build}
top=$(cd "$(dirname "$0")/../.." && pwd)
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (mount namespaces, the packages' user)"; exit 77; }
for tool in unshare setpriv python3 systemd-sysusers systemd-tmpfiles; do
	command -v $tool >/dev/null 2>&1 || { echo "skipped: no $tool"; exit 77; }
done
unshare -m --propagation private true 2>/dev/null || { echo "skipped: no mount namespaces here"; exit 77; }
[ -z "${TEST_WRAPPER:-}" ] || { echo "skipped: under qemu-user (the docs' examples run natively)"; exit 77; }
exec python3 "$top/tests/tools/doc_examples.py" --top "$top" --build "$BUILD"
