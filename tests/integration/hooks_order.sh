#!/bin/sh
# A hooks.d program sees the events in the order they happened: each
# grant's and revocation's accepted, in_progress, then its final state;
# agent.started first and agent.stopping last.  The program appends each
# event to one file, as an operator's logger would, and is slow on the first
# event of each operation.
. "$(dirname "$0")/lib.sh"
mkdir -p "$T/hooks.d"
cat > "$T/hooks.d/10-append" <<SH
#!/bin/sh
# the first event of each operation takes longer, as a real logger may:
# the next must still come after it
case \$MEMGRANT_EVENT in agent.started|*.accepted) sleep 0.3 ;; esac
echo "\$MEMGRANT_EVENT \${MEMGRANT_GRANT_ID:--}" >> "$T/order.log"
SH
chmod 0755 "$T/hooks.d/10-append"
write_config
start_daemon
$CTL grant 256M --id g-1 --wait > /dev/null || fail "g-1"
$CTL grant 512M --id g-2 --wait > /dev/null || fail "g-2"
$CTL revoke --grant g-1 --id r-1 --wait > /dev/null || fail "r-1"
stop_daemon
cat "$T/order.log"
cat > "$T/want" <<TXT
agent.started -
grant.accepted g-1
grant.in_progress g-1
grant.applied g-1
grant.accepted g-2
grant.in_progress g-2
grant.applied g-2
revoke.accepted r-1
revoke.in_progress r-1
revoke.applied r-1
agent.stopping -
TXT
diff -u "$T/want" "$T/order.log" || fail "hooks.d saw the events out of order"
echo ok
