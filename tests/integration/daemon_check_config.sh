#!/bin/sh
# memgrantd --check-config: OK for a good file, every problem with
# file:line:column for a bad one; SIGHUP with a bad file keeps the old config.
. "$(dirname "$0")/lib.sh"
write_config
out=$("$MEMGRANTD" -c "$T/memgrant.yaml" --check-config 2>&1) || fail "good config refused: $out"
echo "$out" | grep -q "OK" || fail "no OK: $out"
# the note on what a reload does not apply: for an operator at a terminal,
# not in the journal at every start (ExecStartPre) nor in a script
echo "$out" | grep -q "next start" && fail "--check-config prints the reload note without a terminal: $out"
if command -v script > /dev/null 2>&1; then
	script -qec "$MEMGRANTD -c $T/memgrant.yaml --check-config" /dev/null > "$T/tty.out" 2>&1 ||
		fail "good config refused at a terminal: $(cat "$T/tty.out")"
	grep -q "take effect at the next start: .*agent.state_dir.*backend.sim" "$T/tty.out" ||
		fail "--check-config at a terminal does not name the keys that need a restart: $(cat "$T/tty.out")"
fi
printf 'agent:\n  state_dirr: /x\npolicy:\n  reserve: 2X\n' > "$T/bad.yaml"
out=$("$MEMGRANTD" -c "$T/bad.yaml" --check-config 2>&1) && fail "bad config accepted"
echo "$out" | grep -q "bad.yaml:2:3: agent: unknown key 'state_dirr': did you mean 'state_dir'?" || fail "unknown key: $out"
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
# live keys are applied; the keys that need a restart are named in one line
sed -i "s|state_dir: .*|state_dir: $T/state2|; s|id: test-guest|id: other-guest|" "$T/memgrant.yaml"
printf '  movable_ratio: 150\n' >> "$T/memgrant.yaml"
kill -HUP "$DAEMON_PID"
sleep 0.5
grep -q "take effect at the next start: agent.id, agent.state_dir$" "$T/daemon.log" ||
	fail "the keys that need a restart are not named in one line: $(grep 'next start' "$T/daemon.log")"
grep -q "configuration reloaded; applied: policy.movable_ratio$" "$T/daemon.log" ||
	fail "the applied keys are not named: $(grep 'reloaded' "$T/daemon.log")"
expect_eq "movable_ratio after reload" "$(jget "$($CTL status --json)" policy.movable_ratio)" 150
expect_eq "agent id kept until a restart" "$(jget "$($CTL status --json)" agent)" test-guest
# the user given up to and the seccomp action shape the processes at start
sed -i "s|^  user: .*|  user: nobody\n  seccomp: log|" "$T/memgrant.yaml"
kill -HUP "$DAEMON_PID"
sleep 0.5
want="agent.user, agent.seccomp"
# under qemu-user (.ci/s390x.sh) memgrantd runs with --set agent.seccomp=off,
# which a file cannot change: only agent.user changes there
[ -n "${TEST_WRAPPER:-}" ] && want="agent.user"
grep -q "take effect at the next start: $want\$" "$T/daemon.log" ||
	fail "$want not named as needing a restart: $(grep 'next start' "$T/daemon.log")"
stop_daemon
echo ok
