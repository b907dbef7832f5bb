#!/bin/sh
# memgrantd started by an ordinary user with an agent.api_group the user is
# not in (the shipped 'memgrant'): it stops with an error that names
# agent.api_group, the group and a fix, and leaves no socket behind.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "skipped: needs root to play an ordinary user (uid 65534)"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody true 2>/dev/null || skip "skipped: setpriv cannot drop privileges"
as_nobody test -x "$MEMGRANTD" || skip "skipped: uid 65534 cannot run $MEMGRANTD"
chmod 0755 "$T"
mkdir "$T/u" && chown 65534:65534 "$T/u"
U=$T/u
# the shipped configuration, as installed
CONF=$T/memgrant.yaml
cp "$(dirname "$0")/../../config/memgrant.yaml" "$CONF" && chmod 0644 "$CONF"
# a group uid 65534 is not in: root's
rc=0
as_nobody "$MEMGRANTD" -c "$CONF" --foreground -o backend.type=sim -o backend.sim.state=$U/sim/sim.json \
	-o agent.state_dir=$U/state -o agent.api_socket=$U/api.sock -o agent.api_group=root \
	>"$T/daemon.log" 2>&1 </dev/null || rc=$?
[ "$rc" -ne 0 ] || fail "memgrantd ran with an API group its user is not in"
grep -q "agent.api_group: this process (uid 65534) is not in group root (gid 0), so it cannot give the API socket $U/api.sock to that group (EPERM)" "$T/daemon.log" ||
	fail "the error does not name agent.api_group and the group: $(cat "$T/daemon.log")"
grep -qF -- "-o agent.api_group=\$(id -gn)" "$T/daemon.log" || fail "the error gives no fix: $(cat "$T/daemon.log")"
[ ! -e "$U/api.sock" ] || fail "a stale socket was left at $U/api.sock"
# with the user's own group it runs
setpriv --reuid=65534 --regid=65534 --clear-groups "$MEMGRANTD" -c "$CONF" --foreground -o backend.type=sim -o backend.sim.state=$U/sim/sim.json \
	-o agent.state_dir=$U/state -o agent.api_socket=$U/api.sock -o agent.api_group="$(id -gn 65534)" \
	>"$T/daemon2.log" 2>&1 </dev/null &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" --socket "$U/api.sock" status >/dev/null 2>&1; do
	kill -0 "$DAEMON_PID" 2>/dev/null || fail "memgrantd with the user's own group stopped: $(cat "$T/daemon2.log")"
	i=$((i + 1)); [ $i -lt 300 ] || fail "memgrantd did not answer"
	sleep 0.1
done
kill -TERM "$DAEMON_PID"; wait "$DAEMON_PID" || fail "memgrantd exited with $? on SIGTERM"
DAEMON_PID=
echo "ok: a foreign api_group is named with its fix, no stale socket; the user's own group works"
