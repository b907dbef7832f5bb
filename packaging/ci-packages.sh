#!/bin/sh
# CI for memgrant's packages (run as root on a Debian machine, by .ci/run):
#  1. installs the packaging tools and build dependencies with apt-get;
#  2. checks the systemd unit (systemd-analyze security, offline);
#  3. builds the .deb (packaging/build-deb.sh: dpkg-buildpackage + lintian,
#     which must report no errors and no warnings);
#  4. builds the .rpm with rpmbuild -bb and runs rpmlint (no errors);
#  5. installs the .deb on this machine, starts the installed memgrantd in the
#     foreground on the sim backend (the installed config plus -o overrides,
#     everything under a temporary directory), asks the installed memgrantctl
#     for the status, stops the agent; removes the package (the state in
#     /var/lib/memgrant stays) and purges it (the state goes).
# It also checks what the packages carry: the documents the shipped files
# name, the license, a unit that checks the configuration it runs with, and
# a build that prints its commands and compiles only what it installs.
# The service is never started through systemd and nothing touches this
# machine's /sys: the package does not start the unit on install, and the test
# agent runs on the sim backend, with /sys mounted read-only for it where
# mount namespaces are allowed.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/packages
# The unit's exposure score (systemd-analyze security, times 10) must not rise.
SECURITY_THRESHOLD=20

say() { printf 'ci-packages: %s\n' "$*"; }
die() { printf 'ci-packages: FAIL: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages)"

tmp=$(mktemp -d /tmp/memgrant-ci-pkg.XXXXXX)
agent_pid=
cleanup() {
	if [ -n "$agent_pid" ] && kill -0 "$agent_pid" 2>/dev/null; then
		kill -KILL "$agent_pid" 2>/dev/null || :
	fi
	for p in memgrant-host memgrant; do
		if dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q 'ok installed'; then
			dpkg --purge $p >/dev/null 2>&1 || :
		fi
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# --- 1. tools --------------------------------------------------------------
TOOLS="dpkg-dev debhelper lintian fakeroot scdoc systemd rpm rpmlint"
say "installing tools: $TOOLS"
"$top/packaging/install-deps.sh"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $TOOLS >/dev/null

# --- 2. the unit -----------------------------------------------------------
unit=$top/packaging/systemd/memgrantd.service
score=$(systemd-analyze security --offline=yes "$unit" 2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: *//p')
say "systemd-analyze security: $score"
systemd-analyze security --offline=yes --threshold=$SECURITY_THRESHOLD "$unit" >/dev/null ||
	die "unit exposure $score is above $SECURITY_THRESHOLD/10"

# --- 3. .deb ---------------------------------------------------------------
rm -rf "$out"
"$top/packaging/build-deb.sh" "$out" 2>&1 | tee "$tmp/deb-build.log"
[ "$(sed -n '$p' "$tmp/deb-build.log" | grep -c 'build-deb: wrote')" -eq 1 ] || die "build-deb.sh failed"
# --disable-silent-rules: the compiler's command lines are in the log; and
# only what is installed is compiled, none of the tests
grep -q -- '-c -o build/agent/memgrantd.o agent/memgrantd.c' "$tmp/deb-build.log" ||
	die "the .deb build does not print its compiler commands"
if grep -q 'build/tests/' "$tmp/deb-build.log"; then
	die "the .deb build compiles tests it never runs: $(grep -c 'build/tests/' "$tmp/deb-build.log") lines"
fi
deb=$(ls "$out"/memgrant_*.deb)
hostdeb=$(ls "$out"/memgrant-host_*.deb)
say "built $(basename "$deb") and $(basename "$hostdeb")"
# memgrant-host, its manual page and completion are in memgrant-host only
dpkg-deb -c "$hostdeb" > "$tmp/host.list"
dpkg-deb -c "$deb" > "$tmp/memgrant.list"
grep -q ' \./usr/bin/memgrant-host$' "$tmp/host.list" || die "memgrant-host not in $(basename "$hostdeb")"
grep -q '/man1/memgrant-host\.1\.gz$' "$tmp/host.list" || die "memgrant-host.1 not in $(basename "$hostdeb")"
grep -q '/completions/memgrant-host$' "$tmp/host.list" || die "memgrant-host completion not in $(basename "$hostdeb")"
if grep -q 'memgrant-host' "$tmp/memgrant.list"; then
	die "$(basename "$deb") still carries memgrant-host"
fi
for f in memgrantctl memgrantd; do
	grep -q "/completions/$f\$" "$tmp/memgrant.list" || die "bash completion for $f not in $(basename "$deb")"
done
# the documents the shipped YAML and the manual pages name
for f in config.md security.md operations.md protocol.md; do
	grep -q " \./usr/share/doc/memgrant/$f\$" "$tmp/memgrant.list" || die "$f not in $(basename "$deb")"
done
# the unit: no wait for a network it does not have; one set of options for
# the check before start and reload and for the agent itself
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/memgrantd.service > "$tmp/unit" 2>/dev/null ||
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./lib/systemd/system/memgrantd.service > "$tmp/unit" ||
	die "no memgrantd.service in $(basename "$deb")"
if grep -q '^[^#]*network-online' "$tmp/unit"; then die "the unit waits for network-online.target"; fi
for l in 'ExecStartPre=/usr/sbin/memgrantd $MEMGRANTD_ARGS --check-config' \
	'ExecStart=/usr/sbin/memgrantd $MEMGRANTD_ARGS --foreground' \
	'ExecReload=/usr/sbin/memgrantd $MEMGRANTD_ARGS --check-config'; do
	grep -qxF "$l" "$tmp/unit" || die "the unit has no '$l'"
done
# the prerm stops the daemon on removal (not on upgrade): run it with a stand-in
# for deb-systemd-invoke and for /run/systemd/system
mkdir -p "$tmp/ctl/bin" "$tmp/ctl/run-systemd"
dpkg-deb -e "$deb" "$tmp/ctl/DEBIAN"
grep -q 'deb-systemd-invoke stop memgrantd.service' "$tmp/ctl/DEBIAN/prerm" || die "the prerm does not stop memgrantd"
printf '#!/bin/sh\necho "$*" >> %s\n' "$tmp/ctl/invoked" > "$tmp/ctl/bin/deb-systemd-invoke"
cp "$tmp/ctl/bin/deb-systemd-invoke" "$tmp/ctl/bin/deb-systemd-helper"
chmod +x "$tmp/ctl/bin/"*
sed "s|/run/systemd/system|$tmp/ctl/run-systemd|g" "$tmp/ctl/DEBIAN/prerm" > "$tmp/ctl/prerm"
PATH=$tmp/ctl/bin:$PATH sh "$tmp/ctl/prerm" upgrade 0.1.1 || die "prerm upgrade failed"
if [ -s "$tmp/ctl/invoked" ] && grep -q '^stop' "$tmp/ctl/invoked"; then die "prerm upgrade stopped the daemon"; fi
PATH=$tmp/ctl/bin:$PATH sh "$tmp/ctl/prerm" remove || die "prerm remove failed"
grep -qx 'stop memgrantd.service' "$tmp/ctl/invoked" || die "prerm remove did not stop memgrantd: $(cat "$tmp/ctl/invoked" 2>/dev/null)"
say "prerm: stops memgrantd on remove, not on upgrade"

# --- 4. .rpm ---------------------------------------------------------------
version=$(dpkg-parsechangelog -l "$top/packaging/debian/changelog" -S Version)
spec_version=$(sed -n 's/^Version: *//p' "$top/packaging/rpm/memgrant.spec")
[ "$version" = "$spec_version" ] ||
	die "version mismatch: debian/changelog $version, memgrant.spec $spec_version"
rpmtop=$tmp/rpm
mkdir -p "$rpmtop/SOURCES" "$tmp/src/memgrant-$version"
(cd "$top" && git ls-files -z | tar --null -T - -cf -) | tar -C "$tmp/src/memgrant-$version" -xf -
tar -C "$tmp/src" -czf "$rpmtop/SOURCES/memgrant-$version.tar.gz" "memgrant-$version"
cp "$top/packaging/systemd/memgrant.sysusers" "$rpmtop/SOURCES/"
# Debian's rpm has no database of the build dependencies (--nodeps) and no
# systemd-rpm-macros (macros.ci stands in); memgrant-host is built too
# (libvirt-dev is a build dependency here).
rpmbuild -bb --nodeps --define "_topdir $rpmtop" \
	--load "$top/packaging/rpm/macros.ci" "$top/packaging/rpm/memgrant.spec" >"$tmp/rpmbuild.log" 2>&1 ||
	{ tail -40 "$tmp/rpmbuild.log" >&2; die "rpmbuild failed"; }
rpm=$(find "$rpmtop/RPMS" -name 'memgrant-[0-9]*.rpm' | head -1)
hostrpm=$(find "$rpmtop/RPMS" -name 'memgrant-host-[0-9]*.rpm' | head -1)
[ -n "$rpm" ] || die "rpmbuild produced no package"
grep -q -- '-c -o build/agent/memgrantd.o agent/memgrantd.c' "$tmp/rpmbuild.log" ||
	die "the .rpm build does not print its compiler commands"
if grep -q 'build/tests/' "$tmp/rpmbuild.log"; then die "the .rpm build compiles tests it never runs"; fi
[ -n "$hostrpm" ] || die "rpmbuild produced no memgrant-host package"
cp "$rpm" "$hostrpm" "$out/"
say "built $(basename "$rpm") and $(basename "$hostrpm")"
for f in /usr/bin/memgrant-host /usr/share/bash-completion/completions/memgrant-host; do
	rpm -qlp "$hostrpm" | grep -qx "$f" || die "$f not in $(basename "$hostrpm")"
done
rpm -qlp "$hostrpm" | grep -q '/man1/memgrant-host\.1' || die "memgrant-host.1 not in $(basename "$hostrpm")"
if rpm -qlp "$rpm" | grep -q memgrant-host; then
	die "$(basename "$rpm") still carries memgrant-host"
fi
rpm -qp --qf '%{URL}\n' "$rpm" | grep -q '^https://' || die "the rpm has no URL"
rpm -qlp "$rpm" | grep -qx '/usr/share/licenses/memgrant[^/]*/LICENSE' || die "the rpm has no %license LICENSE"
for f in config.md security.md operations.md protocol.md; do
	rpm -qlp "$rpm" | grep -qx "/usr/share/doc/memgrant/$f" || die "$f not in $(basename "$rpm")"
done
rpm -qp --scripts "$rpm" | grep -q 'systemctl\|systemd-update-helper' ||
	die "the rpm has no systemd scriptlets"
if command -v rpmlint >/dev/null 2>&1; then
	# rpmlint exits non-zero on errors (warnings are printed, not fatal)
	rpmlint -r "$top/packaging/rpm/memgrant.rpmlintrc" "$top/packaging/rpm/memgrant.spec" "$rpm" "$hostrpm" ||
		die "rpmlint reports errors"
else
	say "rpmlint not available, skipped"
fi

# --- 5. install the .deb and run it on the sim ------------------------------
say "installing $(basename "$deb")"
dpkg -i "$deb" | tee "$tmp/dpkg-i.log"
grep -q 'memgrantd is installed but not enabled' "$tmp/dpkg-i.log" ||
	die "the postinst did not say how to enable an unconfigured memgrantd"
dpkg-query -W -f='${Conffiles}\n' memgrant | grep -q ' /etc/memgrant/memgrant.yaml ' ||
	die "/etc/memgrant/memgrant.yaml is not a conffile"
getent group memgrant >/dev/null || die "group memgrant was not created"
for f in /usr/sbin/memgrantd /usr/bin/memgrantctl; do
	[ -x "$f" ] || die "$f missing"
done
unitfile=$(dpkg -L memgrant | grep '/systemd/system/memgrantd.service$') || die "unit not installed"
# with the shipped configuration the unit must stay disabled: enabled, the
# agent would take over auto_online_blocks at the next boot unconfigured
[ ! -e /etc/systemd/system/multi-user.target.wants/memgrantd.service ] ||
	die "memgrantd.service was enabled on install with the shipped, unconfigured default"
systemd-analyze verify --man=no "$unitfile" || die "systemd-analyze verify $unitfile"
for m in memgrantd.8 memgrantctl.8 memgrant.yaml.5; do
	dpkg -L memgrant | grep -q "/man/man.*/$m.gz$" || die "manual page $m not installed"
done
# (other memgrantd processes, e.g. from the test suite, are not ours to judge)
for p in $(pgrep -x memgrantd || :); do
	[ "$(readlink "/proc/$p/exe" 2>/dev/null)" != /usr/sbin/memgrantd ] ||
		die "the installed memgrantd is running after install: the package must not start it"
done

run=$tmp/run
mkdir -p "$run/state"
# the agent gives up root for the user memgrant, which must reach its state
# and socket; the socket's folder is made by memgrantd for that user, as
# tmpfiles.d makes /run/memgrant
chmod 0755 "$tmp" "$run"
sock=$run/sock/api.sock
# The one-line override: the installed config, switched to the sim, with its
# state, journal and socket in a temporary directory.
# The state goes where the package keeps it (/var/lib/memgrant, made by its
# tmpfiles.d file at install): remove and purge are judged on it below.
[ "$(stat -c '%U %a' /var/lib/memgrant 2>/dev/null)" = "memgrant 700" ] ||
	die "/var/lib/memgrant after install: $(stat -c '%U %a' /var/lib/memgrant 2>&1)"
set -- -c /etc/memgrant/memgrant.yaml -o backend.type=sim -o backend.sim.state="$run/sim.json" \
	-o agent.api_socket="$sock"
say "memgrantd --check-config $*"
/usr/sbin/memgrantd "$@" --check-config || die "installed config with the sim override is invalid"
# Belt and braces: where mount namespaces are allowed, the test agent sees
# this machine's /sys read-only, whatever its configuration says.
if unshare -m --propagation private sh -c 'mount -o bind,ro /sys /sys' 2>/dev/null; then
	set -- unshare -m --propagation private sh -c \
		'mount -o bind,ro /sys /sys && exec /usr/sbin/memgrantd "$@"' memgrantd --foreground "$@"
	say "starting the installed memgrantd on the sim (/sys read-only in its mount namespace)"
else
	set -- /usr/sbin/memgrantd --foreground "$@"
	say "starting the installed memgrantd on the sim"
fi
"$@" >"$tmp/memgrantd.log" 2>&1 &
agent_pid=$!
i=0
while [ ! -S "$sock" ]; do
	kill -0 "$agent_pid" 2>/dev/null || { cat "$tmp/memgrantd.log" >&2; die "memgrantd exited"; }
	i=$((i + 1))
	[ $i -le 100 ] || { cat "$tmp/memgrantd.log" >&2; die "no API socket after 10s"; }
	sleep 0.1
done
/usr/bin/memgrantctl --socket "$sock" status ||
	{ cat "$tmp/memgrantd.log" >&2; die "installed memgrantctl status did not answer"; }
kill -TERM "$agent_pid"
rc=0
wait "$agent_pid" || rc=$?
agent_pid=
[ $rc -eq 0 ] || { cat "$tmp/memgrantd.log" >&2; die "memgrantd exited $rc on SIGTERM"; }
say "installed memgrantd answered and stopped cleanly"

say "installing $(basename "$hostdeb")"
dpkg -i "$hostdeb" >/dev/null 2>&1 || { apt-get install -y -qq --no-install-recommends "$hostdeb" >/dev/null ||
	die "memgrant-host did not install"; }
/usr/bin/memgrant-host --help >/dev/null || die "installed memgrant-host --help failed"
rc=0
/usr/bin/memgrant-host --bogus >/dev/null 2>&1 || rc=$?
[ $rc -eq 1 ] || die "memgrant-host usage error exited $rc, want 1"
dpkg --purge memgrant-host

# remove keeps the state (a reinstall resumes), purge removes it (a later
# install must not take this one's history for its own)
ls /var/lib/memgrant/* > /dev/null 2>&1 || die "the agent left no state in /var/lib/memgrant"
dpkg --remove memgrant
[ -d /var/lib/memgrant ] && ls /var/lib/memgrant/* > /dev/null 2>&1 ||
	die "remove deleted the state in /var/lib/memgrant"
say "remove kept /var/lib/memgrant: $(ls /var/lib/memgrant | tr '\n' ' ')"
dpkg --purge memgrant
[ ! -e /var/lib/memgrant ] || die "purge left /var/lib/memgrant: $(ls -la /var/lib/memgrant)"
[ ! -e /etc/memgrant/memgrant.yaml ] || die "purge left /etc/memgrant/memgrant.yaml"
[ ! -e "$unitfile" ] || die "purge left $unitfile"
say "OK: debs and rpms (memgrant, memgrant-host) built, lintian and rpmlint clean, installed agent answered, remove kept the state, purge removed it"
