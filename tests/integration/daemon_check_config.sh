#!/bin/sh
# memgrantd --check-config: OK for a good file, every problem with
# file:line:column for a bad one; SIGHUP with a bad file keeps the old config.
. "$(dirname "$0")/lib.sh"
write_config
out=$("$MEMGRANTD" -c "$T/memgrant.yaml" --check-config 2>&1) || fail "good config refused: $out"
echo "$out" | grep -q "OK" || fail "no OK: $out"
printf 'agent:\n  state_dirr: /x\npolicy:\n  reserve: 2X\n' > "$T/bad.yaml"
out=$("$MEMGRANTD" -c "$T/bad.yaml" --check-config 2>&1) && fail "bad config accepted"
echo "$out" | grep -q "bad.yaml:2:3: agent: unknown key 'state_dirr'" || fail "unknown key: $out"
echo "$out" | grep -q "bad.yaml:4:12: policy.reserve: '2X' is not a size" || fail "bad size: $out"

start_daemon
cp "$T/memgrant.yaml" "$T/good.yaml"
printf 'policy:\n  zone: sideways\n' >> "$T/memgrant.yaml"
kill -HUP "$DAEMON_PID"
sleep 0.5
grep -q "new configuration rejected" "$T/daemon.log" || fail "bad reload not rejected"
$CTL status > /dev/null || fail "daemon not answering after a bad reload"
cp "$T/good.yaml" "$T/memgrant.yaml"
sed -i 's/revoke_budget: .*/revoke_budget: 30s/' "$T/memgrant.yaml"
printf '  zone: normal\n' >> "$T/memgrant.yaml"
kill -HUP "$DAEMON_PID"
sleep 0.5
expect_eq "zone after reload" "$(jget "$($CTL status --json)" policy.zone)" normal
stop_daemon
echo ok
