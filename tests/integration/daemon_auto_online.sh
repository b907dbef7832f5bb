#!/bin/sh
# auto_online_blocks (A2, C7): when the kernel onlines a block at configure
# time, the agent says what the policy wanted and what happened; with
# backend.own_onlining it sets "offline" at start and restores it at exit.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M --auto-online online > /dev/null || fail "sim init"
AUTO=$SIM.tree/sys/devices/system/memory/auto_online_blocks

OWN_ONLINING=false
start_daemon
$CTL grant 128M --wait --json > "$T/g1" || fail "grant with auto-onlining"
grep -q "auto_online_blocks" "$T/g1" || fail "no decision about auto-onlining: $(cat "$T/g1")"
grep -q "policy wanted Movable" "$T/g1" || fail "does not say what the policy wanted"
expect_eq "zone the kernel chose" "$(jget "$(cat "$T/g1")" blocks.0.zone)" Normal
stop_daemon
expect_eq "auto_online_blocks untouched" "$(cat "$AUTO")" online

rm -f "$T/memgrant.yaml"
OWN_ONLINING=true
start_daemon
expect_eq "auto_online_blocks while running" "$(cat "$AUTO")" offline
$CTL grant 128M --wait --json > "$T/g2" || fail "grant owning onlining"
expect_eq "zone the policy chose" "$(jget "$(cat "$T/g2")" blocks.0.zone)" Movable
stop_daemon
expect_eq "auto_online_blocks restored" "$(cat "$AUTO")" online
echo ok
