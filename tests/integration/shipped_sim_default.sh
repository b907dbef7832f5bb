#!/bin/sh
# The sim works as documented with the package's defaults (issue 21): as
# root, on the package's layout (as_shipped: the state folder
# /var/lib/memgrant 0700 memgrant, /run/memgrant-sim 0755 root, from the
# package's tmpfiles.d) and the shipped configuration, memgrantd with only
# -o backend.type=sim -o backend.sim.standby=2G (and, for a build of another
# prefix, the package's paths: $PKG_PATHS) starts, `memgrantctl grant 256M
# --wait` is applied, and status and lsmem show the memory online;
# `memgrantctl revoke 256M --wait` gives it back through the helper's
# offline writer under the shipped seccomp filter.  Built
# before the fix, the sim's default state sat in the agent's 0700 folder and
# every grant failed with EACCES.  --check-config passes that layout, and
# refuses the old default, naming the key, the folder and the fix.
. "$(dirname "$0")/lib.sh"
as_shipped
shipped_config
C=$T/etc/memgrant.yaml
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $PKG_PATHS -o backend.type=sim -o backend.sim.standby=2G --check-config > "$T/out" 2>&1 ||
	fail "--check-config refuses the packaged sim: $(cat "$T/out")"
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $PKG_PATHS -o backend.type=sim -o backend.sim.standby=2G --foreground >> "$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" status > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "memgrantd did not come up"
	kill -0 $DAEMON_PID 2>/dev/null || fail "memgrantd exited at start"
	sleep 0.1
done
before=$(jget "$("$MEMGRANTCTL" status --json)" memory.online_bytes)
"$MEMGRANTCTL" grant 256M --wait > "$T/out" 2>&1 || fail "grant 256M: $(cat "$T/out")"
after=$(jget "$("$MEMGRANTCTL" status --json)" memory.online_bytes)
expect_eq "online bytes after the grant" "$after" "$((before + 256 * 1024 * 1024))"
"$MEMGRANTCTL" lsmem --summary=only > "$T/lsmem" 2>&1 || fail "lsmem: $(cat "$T/lsmem")"
grep -q "2.3G" "$T/lsmem" || fail "lsmem does not show 2.3G online: $(cat "$T/lsmem")"
# and back: the revocation's offlines go through the helper's writer child,
# under the shipped seccomp filter and budget
"$MEMGRANTCTL" revoke 256M --wait > "$T/out" 2>&1 || fail "revoke 256M: $(cat "$T/out")"
grep -q "applied, 256M of 256M" "$T/out" || fail "revoke summary: $(cat "$T/out")"
expect_eq "online bytes after the revocation" "$(jget "$("$MEMGRANTCTL" status --json)" memory.online_bytes)" "$before"
grep -q "EACCES\|Permission denied" "$T/daemon.log" && fail "permission errors in the log"
kill -TERM $DAEMON_PID; wait $DAEMON_PID || fail "memgrantd exited with $? on SIGTERM"
DAEMON_PID=
expect_eq "the sim's folder" "$(stat -c '%U:%G %a' /run/memgrant-sim)" "root:root 755"

# the old default, in the agent's 0700 folder: refused before the start
rc=0
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $PKG_PATHS -o backend.type=sim -o backend.sim.state=/var/lib/memgrant/sim.json \
	--check-config > "$T/out" 2>&1 || rc=$?
expect_eq "--check-config with the sim in the state folder: exit" "$rc" 1
grep -qF "backend.sim.state: /var/lib/memgrant (the sim's folder, mode 0700, owner memgrant) may be changed by others than root" "$T/out" ||
	fail "--check-config does not name key, folder and owner: $(cat "$T/out")"
grep -qF "/run/memgrant-sim" "$T/out" || fail "--check-config does not give the fix: $(cat "$T/out")"
echo "ok: granted and revoked 256M on the packaged sim ($before -> $after -> $before bytes online)"
