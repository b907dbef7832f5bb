#!/bin/sh
# The shipped hook example (config/memgrant.yaml: hooks[0] runs
# /etc/memgrant/hooks.d/notify for grant.applied and grant.partial) runs
# once per event it lists and for no other event, although its program lies
# in the hooks directory, whose programs run run-parts style for every event.
# Another program there still runs for every event.  The example is taken
# from the shipped file as written, its path moved under the test's folder.
. "$(dirname "$0")/lib.sh"

shipped=$(dirname "$0")/../../config/memgrant.yaml
etc=$T/etc/memgrant
mkdir -p "$etc/hooks.d"
# the commented example, uncommented, /etc/memgrant moved to the test's folder
example=$(sed -n '/^hooks:$/,/^$/p' "$shipped" | sed -n '/^#  - events: \[grant.applied/,/^#    timeout:/p' |
	sed "s|^#||; s|/etc/memgrant|$etc|")
echo "$example" | grep -q "exec: $etc/hooks.d/notify" || fail "no notify example in $shipped: $example"
cat > "$etc/hooks.d/notify" <<SH
#!/bin/sh
echo "\$1" >> "$T/notify.log"
SH
cat > "$etc/hooks.d/20-every" <<SH
#!/bin/sh
echo "\$1" >> "$T/every.log"
SH
chmod 0755 "$etc/hooks.d/notify" "$etc/hooks.d/20-every"
write_config
printf 'hooks:\n%s\n' "$example" >> "$T/memgrant.yaml"
mv "$T/memgrant.yaml" "$etc/memgrant.yaml"
"$MEMGRANTD" -c "$etc/memgrant.yaml" --check-config > "$T/check" 2>&1 || fail "check-config: $(cat "$T/check")"
"$MEMGRANTD" -c "$etc/memgrant.yaml" --foreground >> "$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
while ! $CTL status >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "memgrantd did not come up"
	sleep 0.1
done
$CTL grant 256M --wait > /dev/null || fail "grant 256M"
$CTL revoke 256M --wait > /dev/null || fail "revoke 256M"
stop_daemon

expect_eq "notify runs (it lists grant.applied and grant.partial)" "$(cat "$T/notify.log" 2>/dev/null)" grant.applied
for ev in agent.started grant.accepted grant.applied revoke.applied agent.stopping; do
	expect_eq "runs of 20-every for $ev" "$(grep -cx "$ev" "$T/every.log")" 1
done
echo ok
