#!/bin/sh
# The fleet bench (issue 24; docs/https.md "Pacing a fleet"): FLEET_N real
# memgrantd processes on sim backends long-poll the reference control plane
# (tests/controlplane/cp.py) over mTLS on loopback, once per retry rule in
# the same run: full (today: full jitter, Memgrant-Spread honoured, a default
# window after losing the control plane), nowindow (full jitter without the
# default window, the rule before it) and equal (equal jitter, the rule
# before full jitter); MEMGRANT_HTTPS_BACKOFF_RULE=nowindow|equal, a switch
# for this bench only.  The control plane counts per second
# connections, TLS handshakes (full, resumed) and requests; bench/fleet.py
# drives the scenarios and prints the figures.  Asserts nothing.
#
# Environment:
#   FLEET_N          agents                                   default 500
#   FLEET_OUTAGE     outage of the outage scenarios, seconds  default 30
#   FLEET_RESTART    the restart scenario's time down, s      default 3
#                    (restart: connections dropped, back with new TLS
#                    ticket keys, no window announced; peak reconnects/s)
#   FLEET_LONG       also an outage of this many seconds (300: the 5 min one)
#   FLEET_WINDOW     the announced window W, seconds          default 30
#   FLEET_WAIT       the agents' long-poll wait (and cap)     default 20s
#   FLEET_SCENARIOS  default "steady outage grant 429 window"; also "restart"
#   FLEET_RULES      default "full equal"; also "nowindow"
#   FLEET_AS_SHIPPED 1 (default as root): started as root, each agent runs
#                    as an unprivileged user with its root helper, in a mount
#                    namespace with the package's /run and /var/lib folders;
#                    one user per agent (mgfI, not memgrant: see below);
#                    0: plain processes of the caller
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
export BUILD
N=${FLEET_N:-500}
# per agent: the agent and its helper, two TLS connections, the API socket,
# the journal, the log; the control plane holds 2 N connections and threads
need=$((N * 4 + 256))
[ "$(ulimit -n)" -ge "$need" ] || ulimit -n "$need" 2>/dev/null || {
	echo "fleet: needs $need open files for the control plane (ulimit -n is $(ulimit -n)); try a smaller FLEET_N"
	exit 1
}
AS_SHIPPED=${FLEET_AS_SHIPPED:-$([ "$(id -u)" -eq 0 ] && echo 1 || echo 0)}
if [ "$AS_SHIPPED" = 1 ] && [ -z "${FLEET_IN_NS:-}" ]; then
	for tool in unshare systemd-sysusers systemd-tmpfiles; do
		command -v $tool >/dev/null 2>&1 || { echo "fleet: no $tool: FLEET_AS_SHIPPED=0"; AS_SHIPPED=0; }
	done
	if [ "$AS_SHIPPED" = 1 ]; then
		FLEET_IN_NS=1 exec unshare -m --propagation private sh "$0" "$@"
	fi
fi
if [ "$AS_SHIPPED" = 1 ]; then
	# as tests/integration/lib.sh as_shipped: the package's user and folders,
	# fresh tmpfs, nothing of this machine's /run or /var/lib changes
	pkg=$(pwd)/packaging/systemd
	systemd-sysusers "$pkg/memgrant.sysusers"
	mount -t tmpfs -o mode=0755 memgrant-run /run
	if [ -d /var/lib/memgrant ]; then
		mount -t tmpfs -o mode=0700 memgrant-state /var/lib/memgrant
	else
		mount -t tmpfs -o mode=0755 memgrant-varlib /var/lib
	fi
	systemd-tmpfiles --create "$pkg/memgrant.tmpfiles"
	# one user per agent, as the package makes memgrant (a system user with
	# no shell): the kernel counts inotify instances per user
	# (fs.inotify.max_user_instances, 128 here), so one user cannot run more
	# than about 128 agents on one machine; on a fleet each guest has its
	# own.  The users exist only in this namespace's copies of the files.
	cp /etc/passwd /run/fleet-passwd
	cp /etc/group /run/fleet-group
	i=1
	while [ $i -le "$N" ]; do
		echo "mgf$i:x:$((61000 + i)):$((61000 + i)):memgrant fleet bench:/nonexistent:/usr/sbin/nologin"
		i=$((i + 1))
	done >> /run/fleet-passwd
	i=1
	while [ $i -le "$N" ]; do
		echo "mgf$i:x:$((61000 + i)):"
		i=$((i + 1))
	done >> /run/fleet-group
	mount --bind /run/fleet-passwd /etc/passwd
	mount --bind /run/fleet-group /etc/group
fi
# ephemeral ports: 2 N connections now and 2 N more after each reconnect
echo "fleet: N=$N, open files $(ulimit -n), ports $(cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' '-'), somaxconn $(cat /proc/sys/net/core/somaxconn)"
FLEET_AS_SHIPPED=$AS_SHIPPED exec python3 bench/fleet.py
