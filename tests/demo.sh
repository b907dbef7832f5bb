#!/bin/sh
# make demo: memgrantd on a simulated s390 guest (2G online, 2G standby,
# 128M blocks), driven through its local API with memgrantctl.
# Everything lives in a temporary directory; nothing touches the real /sys.
set -eu
BUILD=${BUILD:-build}
D=$(mktemp -d /tmp/memgrant-demo.XXXXXX)
# The agent gives up root, as a package's does: run by root, the demo's agent
# runs as nobody in two folders of its own (a package runs it as memgrant);
# run by a user, as that user.  Its API group is one the agent's user is in.
if [ "$(id -u)" = 0 ]; then
	AGENT_USER=nobody
	AGENT_GROUP=$(id -gn nobody)
else
	AGENT_USER=$(id -un)
	AGENT_GROUP=$(id -gn)
fi
mkdir -m 0755 "$D/run" "$D/state"
chmod 0755 "$D"
[ "$(id -u)" = 0 ] && chown "$AGENT_USER:$AGENT_GROUP" "$D/run" "$D/state"
SOCK=$D/run/api.sock
CTL="$BUILD/memgrantctl --socket $SOCK"
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$D"
}
trap cleanup EXIT INT TERM

# bold commands on a terminal only: a log or a pipe gets no escape codes
if [ -t 1 ]; then
	step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
else
	step() { printf '\n$ %s\n' "$*"; }
fi

cat > "$D/memgrant.yaml" <<YAML
agent:
  id: demo-guest
  state_dir: $D/state
  user: $AGENT_USER
  api_group: $AGENT_GROUP
  api_socket: $SOCK
backend:
  type: sim
  sim:
    state: $D/sim.json
    online: 2G
    standby: 2G
    block_size: 128M
    used: 1850M         # the guest is busy: MemAvailable is low, the policy will say so
policy:
  memmap_on_memory: auto
  zone: auto
YAML

echo "memgrant demo: a simulated s390 guest with 2G online and 2G standby memory in 128M blocks,"
echo "1850M of the online memory in use"
echo "(state, socket and sysfs-shaped tree under $D)"
"$BUILD/memgrantd" -c "$D/memgrant.yaml" --foreground 2> "$D/memgrantd.log" &
PID=$!
i=0
until $CTL status >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 "$PID" 2>/dev/null; then
		echo "memgrantd did not start:"; cat "$D/memgrantd.log"; exit 1
	fi
	sleep 0.1
done

step memgrantctl lsmem
$CTL lsmem -o RANGE,SIZE,STATE,BLOCK,ZONES,CONFIGURED,MEMMAP_ON_MEMORY
step memgrantctl grant 1G --wait
$CTL grant 1G --wait
step memgrantctl lsmem
$CTL lsmem -o RANGE,SIZE,STATE,BLOCK,ZONES,CONFIGURED,MEMMAP_ON_MEMORY
step memgrantctl revoke 512M --wait
$CTL revoke 512M --wait
step memgrantctl lsmem
$CTL lsmem -o RANGE,SIZE,STATE,BLOCK,ZONES,CONFIGURED,MEMMAP_ON_MEMORY
step memgrantctl grants
$CTL grants
step memgrantctl status
$CTL status

kill -TERM "$PID"
wait "$PID" || { echo "memgrantd exited with $?"; exit 1; }
PID=
printf '\nmemgrantd log:\n'
sed 's/^/  /' "$D/memgrantd.log"
