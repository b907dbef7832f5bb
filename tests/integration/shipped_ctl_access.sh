#!/bin/sh
# memgrantctl says what is wrong, on the package's layout (as_shipped) with
# the shipped configuration on the sim, memgrantd started as root and its
# agent running as memgrant:
#  - a user outside the API group (nobody) is told permission denied on
#    /run/memgrant/api.sock, with its mode and the group to join, never that
#    memgrantd is not running;
#  - memgrantctl lsmem for that user says it could not ask memgrantd and
#    reads this machine's /sys directly (never silently);
#  - with the group (nobody with the supplementary group memgrant) the same
#    socket answers;
#  - a folder closed to the user is named as the cause, not "not running";
#  - api_socket_mode 0666 means what it says in the package's folder:
#    nobody reads the status, and may not change anything (403);
#  - stopped, memgrantctl says memgrantd is not running.
. "$(dirname "$0")/lib.sh"
as_shipped
shipped_config
as_user nobody test -x "$MEMGRANTCTL" || skip "skipped: nobody cannot run $MEMGRANTCTL (its folder is closed)"
C=$T/etc/memgrant.yaml
SIMO="$PKG_PATHS -o backend.type=sim -o backend.sim.state=$T/sim.json -o backend.sim.standby=2G"

start() { # extra memgrantd options
	# shellcheck disable=SC2086
	"$MEMGRANTD" -c "$C" $SIMO "$@" --foreground >> "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	i=0
	until "$MEMGRANTCTL" status > /dev/null 2>&1; do
		i=$((i + 1))
		[ $i -le 100 ] || fail "memgrantd did not come up"
		kill -0 $DAEMON_PID 2>/dev/null || fail "memgrantd exited at start"
		sleep 0.1
	done
}
# nobody_ctl ARGS: memgrantctl as nobody; exit in $rc, stderr in $T/err
nobody_ctl() {
	rc=0
	as_user nobody env MEMGRANT_SOCKET="$MEMGRANT_SOCKET" "$MEMGRANTCTL" "$@" > "$T/out" 2> "$T/err" || rc=$?
}
no_not_running() {
	grep -q "not running" "$T/err" && fail "$1: says memgrantd is not running while it runs: $(cat "$T/err")"
	:
}

start
expect_eq "the socket as shipped" "$(stat -c '%U:%G %a' /run/memgrant/api.sock)" "memgrant:memgrant 660"
nobody_ctl status
expect_eq "status as nobody: exit" "$rc" 1
grep -qF "permission denied on memgrantd's socket /run/memgrant/api.sock (mode 0660, owner memgrant:memgrant): only root and the group memgrant may connect; join it (sudo usermod -aG memgrant \$USER, then log in again)" "$T/err" ||
	fail "status as nobody: $(cat "$T/err")"
no_not_running "status as nobody"

nobody_ctl lsmem --summary=only
grep -q "permission denied on memgrantd's socket" "$T/err" || fail "lsmem as nobody: no reason: $(cat "$T/err")"
grep -q "reading this machine's /sys directly" "$T/err" || fail "lsmem as nobody falls back silently: $(cat "$T/err")"
no_not_running "lsmem as nobody"

# a member of the group (here by a supplementary group) reaches the same socket
rc=0
setpriv --reuid nobody --regid nogroup --groups "$(getent group memgrant | cut -d: -f3)" \
	"$MEMGRANTCTL" status > "$T/out" 2> "$T/err" || rc=$?
expect_eq "status with the group memgrant: exit ($(cat "$T/err"))" "$rc" 0

# a folder on the way closed to the user: named, and still not "not running"
chmod 0750 /run/memgrant
nobody_ctl status
expect_eq "status through a closed folder: exit" "$rc" 1
grep -qF "permission denied: the folder /run/memgrant (mode 0750, owner memgrant:memgrant) keeps you (uid $(id -u nobody))" "$T/err" ||
	fail "status through a closed folder: $(cat "$T/err")"
grep -q "join the group memgrant" "$T/err" || fail "status through a closed folder: no group: $(cat "$T/err")"
no_not_running "status through a closed folder"
chmod 0755 /run/memgrant
stop_daemon

# api_socket_mode 0666: everyone may connect and read; only the group may change
start -o agent.api_socket_mode=0666
expect_eq "the socket with api_socket_mode 0666" "$(stat -c %a /run/memgrant/api.sock)" 666
nobody_ctl status
expect_eq "status as nobody with 0666: exit ($(cat "$T/err"))" "$rc" 0
nobody_ctl grant 128M
expect_eq "grant as nobody with 0666: exit" "$rc" 1
grep -q "may read but not change anything" "$T/err" || fail "grant as nobody with 0666: $(cat "$T/err")"
stop_daemon

nobody_ctl status
grep -q "memgrantd is not running" "$T/err" || fail "stopped: $(cat "$T/err")"
echo ok
