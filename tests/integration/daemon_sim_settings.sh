#!/bin/sh
# Sim settings changed in the configuration once the sim exists: the sim
# keeps the machine it was made as, and memgrantd says so at its start, per
# key, with both values and how to apply the new ones; nothing is ignored
# without a word.  Unchanged settings say nothing.
. "$(dirname "$0")/lib.sh"
write_config
start_daemon
stop_daemon
if grep -q "in the configuration, but" "$T/daemon.log"; then
	fail "a warning with unchanged settings: $(cat "$T/daemon.log")"
fi
SIM_STANDBY=4G SIM_BLOCK=256M write_config
start_daemon
standby=$(jget "$($CTL status --json)" memory.standby_bytes)
stop_daemon
expect_eq "standby bytes (the sim keeps what it was made with)" "$standby" $((2 * 1024 * 1024 * 1024))
grep -qF "backend.sim.standby: 4G in the configuration, but the sim $SIM was made with 2G and keeps it; to apply it, stop memgrantd, remove the sim (rm -r $SIM $SIM.d $SIM.lock $SIM.tree)" "$T/daemon.log" ||
	fail "no word on the changed standby: $(cat "$T/daemon.log")"
grep -qF "backend.sim.block_size: 256M in the configuration, but the sim $SIM was made with 128M" "$T/daemon.log" ||
	fail "no word on the changed block size: $(cat "$T/daemon.log")"
# the way the message gives applies it
rm -r "$SIM" "$SIM.d" "$SIM.lock" "$SIM.tree"
start_daemon
standby=$(jget "$($CTL status --json)" memory.standby_bytes)
stop_daemon
expect_eq "standby bytes after the sim was made anew" "$standby" $((4 * 1024 * 1024 * 1024))
echo "ok: changed sim settings are named with both values and the fix; the fix applies them"
