#!/bin/sh
# A credential whose link the agent's user completes (docs/security.md,
# "Credentials"), as shipped: memgrantd started as root, its agent as
# memgrant.  providers.https.token_file is a root-owned link, in the
# operator's root-only folder, to a token not deployed yet, in a folder of
# memgrant's.  memgrant makes that target a link to a root-only victim and
# memgrantd reloads: the root helper refuses the path (memgrant could change
# it, and logs why once), and the test control plane, which records every Authorization header
# it is sent, never sees the victim's content.  The token the operator then
# puts in the folder is used.
. "$(dirname "$0")/lib.sh"
as_shipped
. "$(dirname "$0")/../controlplane/lib.sh"
shipped_config
cp_certs

E=$T/etc/memgrant # the operator's folder: root only
mkdir -p "$E" "$T/etc/secret"
chmod 0700 "$E" "$T/etc/secret"
install -m 0600 -o root -g root "$CERTS/ca.pem" "$E/ca.pem"
printf 'VICTIM-7f3a9c\n' > "$T/etc/secret/victim"
chmod 0600 "$T/etc/secret/victim"
D=$T/deploy # where the token is to be deployed: memgrant's
mkdir -p "$D"
chown memgrant:memgrant "$D"
chmod 0755 "$D"
ln -s "$D/token" "$E/token"
as_user memgrant cat "$T/etc/secret/victim" >/dev/null 2>&1 && fail "memgrant can read the victim: the test proves nothing"

cp_start --token tok-1
C=$T/etc/memgrant.yaml
sed -i '/^providers:$/d' "$C"
cat >> "$C" <<YAML
providers:
  https:
    url: $CP_URL
    ca_file: $E/ca.pem
    token_file: $E/token
    wait: 2s
YAML
"$MEMGRANTCTL" sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
chmod 0666 "$SIM"
OPTS="$PKG_PATHS -o backend.type=sim -o backend.sim.state=$SIM"
# shellcheck disable=SC2086
"$MEMGRANTD" -c "$C" $OPTS --foreground >> "$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
until "$MEMGRANTCTL" status > /dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "memgrantd did not come up: $(tail -n 5 "$T/daemon.log")"
	kill -0 $DAEMON_PID 2>/dev/null || fail "memgrantd exited at start: $(tail -n 5 "$T/daemon.log")"
	sleep 0.1
done
[ "$(ps -o user= -p "$DAEMON_PID")" = memgrant ] || fail "the agent runs as $(ps -o user= -p "$DAEMON_PID")"

# the attack: memgrant completes the link, memgrantd reads its credentials again
as_user memgrant ln -s "$T/etc/secret/victim" "$D/token" || fail "memgrant cannot make the link"
kill -HUP $DAEMON_PID
log_wait 'configuration reloaded' 20
sleep 3 # polls (wait 2s) and their retries
cp_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
leaked = [a for a in s["auths"] if "VICTIM" in a]
sys.exit(1 if leaked else 0)' || fail "the victim's content reached the control plane"
grep -q 'VICTIM' "$T/daemon.log" && fail "the victim's content is in the log"
kill -0 $DAEMON_PID || fail "memgrantd is gone after the reload"
# the helper says why, once however often the agent asks: the folder, its
# owner and its mode
n=$(grep -c "privileged helper: refusing a credential: token, on the way to $E/token, lies in a folder of uid $(id -u memgrant) with mode 0755" "$T/daemon.log")
[ "$n" = 1 ] || fail "the helper's refusal is logged $n times, not once: $(grep -i 'refus' "$T/daemon.log" | head -3)"

# the operator deploys the token the way the folder is kept (root-only,
# no link): it is read and used
rm "$E/token"
printf 'tok-1\n' > "$E/token"
chmod 0600 "$E/token"
kill -HUP $DAEMON_PID
cp_wait 'len(s["inventories"]) >= 1' 20
cp_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert s["auths"] == ["Bearer tok-1"], s["auths"]' || fail "the tokens sent: not tok-1 alone"
stop_daemon
echo ok
