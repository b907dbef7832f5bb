# Shared helpers for integration tests (sourced, POSIX sh).
# Each test gets its own directory under /tmp; nothing touches the real /sys.
#   T            the test's temporary directory (removed at exit)
#   CTL          memgrantctl talking to the test's daemon
#   start_daemon [yaml lines for extra config]   start memgrantd on a sim
#   stop_daemon  SIGTERM and wait (fails the test on a non-zero exit)
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
MEMGRANTD=$BUILD/memgrantd
MEMGRANTCTL=$BUILD/memgrantctl
T=$(mktemp -d /tmp/memgrant-test.XXXXXX)
SOCK=$T/api.sock
SIM=$T/sim.json
CTL="$MEMGRANTCTL --socket $SOCK"
DAEMON_PID=
trap 'cleanup' EXIT INT TERM

cleanup() {
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -KILL "$DAEMON_PID" 2>/dev/null
	fi
	rm -rf "$T"
}

fail() {
	echo "FAIL: $*"
	if [ -f "$T/daemon.log" ]; then
		echo "--- daemon log"
		tail -n 40 "$T/daemon.log"
	fi
	exit 1
}

skip() {
	echo "$*"
	exit 77
}

# write_config [extra yaml appended]: a sim-backed config in $T/memgrant.yaml
write_config() {
	cat > "$T/memgrant.yaml" <<YAML
agent:
  id: test-guest
  state_dir: $T/state
  api_socket: $SOCK
  log_level: debug
  # the test's own user: no uid change (tests/integration/privsep_*.sh drop to another)
  user: ${AGENT_USER:-$(id -un)}
  # a group the agent's user is in (--check-config refuses one that is not there)
  api_group: ${API_GROUP:-$(id -gn ${AGENT_USER:-})}
backend:
  type: sim
  own_onlining: ${OWN_ONLINING:-true}
  sim:
    state: $SIM
    online: ${SIM_ONLINE:-2G}
    standby: ${SIM_STANDBY:-2G}
    block_size: ${SIM_BLOCK:-128M}
policy:
  revoke_budget: ${REVOKE_BUDGET:-10s}
YAML
	if [ $# -gt 0 ]; then printf '%s\n' "$@" >> "$T/memgrant.yaml"; fi
}

start_daemon() {
	[ -f "$T/memgrant.yaml" ] || write_config
	"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground >> "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	i=0
	while ! $CTL status >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -gt 100 ] && fail "memgrantd did not come up"
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "memgrantd exited at start"
		sleep 0.1
	done
}

stop_daemon() {
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID"
	rc=$?
	DAEMON_PID=
	[ "$rc" -eq 0 ] || fail "memgrantd exited with $rc on SIGTERM"
}

# json_get FILE-or-TEXT PATH: read a value with python3 (test side only)
jget() {
	python3 -c 'import json,sys
v=json.loads(sys.argv[1])
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v.get(k)
print(json.dumps(v) if isinstance(v,(dict,list)) or v is None else v)' "$1" "$2"
}

expect_eq() { # what got want
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}

# wait_state ID STATE...: poll the grant until it reaches one of STATEs (max 30s)
wait_state() {
	id=$1
	shift
	i=0
	while :; do
		s=$($CTL grants --json | python3 -c 'import json,sys
g=[x for x in json.load(sys.stdin)["grants"] if x.get("id")==sys.argv[1]]
print(g[0]["state"] if g else "none")' "$id")
		for want in "$@"; do [ "$s" = "$want" ] && return 0; done
		i=$((i + 1))
		[ $i -gt 300 ] && fail "$id stayed $s, wanted $*"
		sleep 0.1
	done
}

online_bytes() {
	jget "$($CTL status --json)" memory.online_bytes
}

# as_shipped: the rest of the test runs as root with the package's user and
# folders, in a mount namespace of its own.  The user memgrant comes from the
# package's sysusers.d file (systemd-sysusers creates it when missing, as the
# packages do); /run and /var/lib/memgrant are fresh tmpfs there, in which the
# package's tmpfiles.d file makes /run/memgrant and /var/lib/memgrant.  So
# memgrantd's defaults (/run/memgrant/api.sock, /var/lib/memgrant) are the
# package's folders with the package's owners and modes, and nothing of this
# machine's /run or /var/lib changes.  The test script runs again from its
# start inside the namespace (exec); $T is then 0755 for the agent's user.
as_shipped() {
	[ "$(id -u)" -eq 0 ] || skip "skipped: needs root (memgrantd started as root, its agent as memgrant)"
	[ -z "${TEST_WRAPPER:-}" ] || skip "skipped: under qemu-user (the split as shipped is checked natively)"
	for tool in unshare systemd-sysusers systemd-tmpfiles setpriv; do
		command -v $tool >/dev/null 2>&1 || skip "skipped: no $tool"
	done
	if [ -z "${MEMGRANT_AS_SHIPPED:-}" ]; then
		unshare -m --propagation private true 2>/dev/null || skip "skipped: no mount namespaces here"
		rm -rf "$T"
		trap - EXIT INT TERM
		MEMGRANT_AS_SHIPPED=1 exec unshare -m --propagation private sh "$0" "$@"
	fi
	pkg=$(cd "$(dirname "$0")/../../packaging/systemd" && pwd)
	systemd-sysusers "$pkg/memgrant.sysusers" || fail "systemd-sysusers memgrant.sysusers"
	mount -t tmpfs -o mode=0755 memgrant-run /run || fail "cannot mount a tmpfs on /run"
	if [ -d /var/lib/memgrant ]; then
		mount -t tmpfs -o mode=0700 memgrant-state /var/lib/memgrant || fail "cannot mount /var/lib/memgrant"
	else
		mount -t tmpfs -o mode=0755 memgrant-varlib /var/lib || fail "cannot mount a tmpfs on /var/lib"
	fi
	systemd-tmpfiles --create "$pkg/memgrant.tmpfiles" || fail "systemd-tmpfiles memgrant.tmpfiles"
	[ "$(stat -c '%U:%G %a' /run/memgrant)" = "memgrant:memgrant 755" ] ||
		fail "/run/memgrant as tmpfiles made it: $(stat -c '%U:%G %a' /run/memgrant)"
	[ "$(stat -c '%U:%G %a' /var/lib/memgrant)" = "memgrant:memgrant 700" ] ||
		fail "/var/lib/memgrant as tmpfiles made it: $(stat -c '%U:%G %a' /var/lib/memgrant)"
	chmod 0755 "$T"
}

# shipped_config: the shipped /etc/memgrant/memgrant.yaml (config/memgrant.yaml,
# its defaults untouched: agent.user memgrant, api_group memgrant) copied to
# $T/etc/memgrant.yaml, 0644 root:root as the package installs it.  The
# package's build (--localstatedir=/var --runstatedir=/run) makes
# /var/lib/memgrant, /run/memgrant/api.sock and /run/memgrant-sim/sim.json the
# defaults; a build with another prefix gets them as $PKG_PATHS (-o options)
# and MEMGRANT_SOCKET.
shipped_config() {
	mkdir -p "$T/etc"
	cp "$(dirname "$0")/../../config/memgrant.yaml" "$T/etc/memgrant.yaml"
	chmod 0644 "$T/etc/memgrant.yaml"
	PKG_PATHS="-o agent.state_dir=/var/lib/memgrant -o agent.api_socket=/run/memgrant/api.sock"
	# backend.sim.state's default in the package's build: the same file name
	# as this build's default, under the package's folders (an older build
	# kept it in the state folder)
	if grep -aq 'lib/memgrant/sim\.json' "$MEMGRANTD"; then
		PKG_PATHS="$PKG_PATHS -o backend.sim.state=/var/lib/memgrant/sim.json"
	else
		PKG_PATHS="$PKG_PATHS -o backend.sim.state=/run/memgrant-sim/sim.json"
	fi
	MEMGRANT_SOCKET=/run/memgrant/api.sock
	export MEMGRANT_SOCKET
}

# as_user USER CMD...: CMD as USER with USER's own groups only
as_user() {
	u=$1
	shift
	setpriv --reuid "$u" --regid "$(id -g "$u")" --init-groups "$@"
}
