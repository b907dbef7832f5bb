#!/bin/sh
# memgrantd --check-config judges what the running agent will meet, on the
# package's layout (as_shipped: the user memgrant, /run/memgrant and
# /var/lib/memgrant from the package's sysusers.d and tmpfiles.d files) and
# the shipped configuration.  Run as root, as the unit's ExecStartPre is:
#  - the shipped config on the sim passes, and the agent starts with it;
#  - an agent.user that does not exist is refused, naming the key and the
#    fix, and memgrantd indeed does not start with it;
#  - an api_group that does not exist, or one memgrant is not in, is refused;
#  - files the agent opens as memgrant are tried as memgrant, not as root:
#    the configuration file (0600 root: no reload), a hook program and a
#    hooks.d program (0700 root), the folder of the state directory (0700
#    root); each refusal names the file or folder;
#  - api_socket_mode 0666 is refused in a folder only its owner may enter,
#    and accepted in the package's /run/memgrant.
. "$(dirname "$0")/lib.sh"
as_shipped
shipped_config
C=$T/etc/memgrant.yaml
SIMO="$PKG_PATHS -o backend.type=sim -o backend.sim.state=$T/sim.json -o backend.sim.standby=2G"

# check [WANT...] -- ARGS: --check-config with ARGS; no WANT: must pass;
# else must fail and print every WANT
check() {
	wants=
	while [ "$1" != -- ]; do wants="$wants$1
"; shift; done
	shift
	rc=0
	# shellcheck disable=SC2086
	"$MEMGRANTD" -c "$C" $SIMO "$@" --check-config > "$T/out" 2>&1 || rc=$?
	if [ -z "$wants" ]; then
		[ $rc -eq 0 ] || fail "--check-config $* refused: $(cat "$T/out")"
		return
	fi
	[ $rc -eq 1 ] || fail "--check-config $* exited $rc, want 1: $(cat "$T/out")"
	echo "$wants" | while IFS= read -r w; do
		[ -z "$w" ] || grep -qF -- "$w" "$T/out" || fail "--check-config $*: no '$w' in: $(cat "$T/out")"
	done || exit 1
}

check -- # the shipped configuration on the sim, as shipped
"$MEMGRANTD" -c "$C" $SIMO --foreground > "$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" status > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "the shipped configuration did not start"
	kill -0 $DAEMON_PID 2>/dev/null || fail "memgrantd exited at start"
	sleep 0.1
done
expect_eq "the agent's user" "$(ps -o user= -p $DAEMON_PID)" memgrant
stop_daemon

check "agent.user: there is no user 'memgrant-nosuch'" "systemd-sysusers" -- -o agent.user=memgrant-nosuch
rc=0
"$MEMGRANTD" -c "$C" $SIMO -o agent.user=memgrant-nosuch --foreground > "$T/start.log" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "memgrantd started with agent.user memgrant-nosuch"
grep -q "memgrant-nosuch" "$T/start.log" || fail "the failed start does not name the user: $(cat "$T/start.log")"

check "agent.api_group: there is no group 'memgrant-nosuch'" "groupadd memgrant-nosuch" -- \
	-o agent.api_group=memgrant-nosuch
check "agent.api_group: the user memgrant is not a member of the group daemon" "usermod -aG daemon memgrant" -- \
	-o agent.api_group=daemon

# the configuration file, as root keeps secrets: the agent could not reload it
chmod 0600 "$C"
check "$C: the agent reads it again at every reload (SIGHUP) as the user memgrant, which may not" \
	"$C has mode 0600, owner root:root" --
chmod 0644 "$C"

# a hook program only root may run, and one in hooks.d
printf '#!/bin/sh\nexit 0\n' > "$T/hook"
chmod 0700 "$T/hook"
cp "$C" "$T/orig.yaml"
sed -i "s|^hooks:\$|hooks:\n  - {events: [\"*\"], exec: $T/hook}|" "$C"
check "hooks[0].exec: $T/hook: the agent (uid $(id -u memgrant)) may not execute it" --
cp "$T/orig.yaml" "$C"
mkdir -p "$T/etc/hooks.d"
cp "$T/hook" "$T/etc/hooks.d/notify"
check "$T/etc/hooks.d/notify: the agent runs it at each event as the user memgrant, which may not" --
rm -r "$T/etc/hooks.d"

# the state directory in a folder closed to memgrant
mkdir -m 0700 "$T/private"
check "agent.state_dir: $T/private: the agent must pass through it as the user memgrant" "mode 0700, owner root:root" -- \
	-o agent.state_dir="$T/private/state"

# api_socket_mode 0666: refused where the folder lets only its owner in,
# fine in the package's /run/memgrant
mkdir -m 0700 "$T/sock"
check "agent.api_socket_mode: 0666 lets every user connect, but the socket's folder $T/sock" -- \
	-o agent.api_socket="$T/sock/api.sock" -o agent.api_socket_mode=0666
check -- -o agent.api_socket_mode=0666
echo ok
