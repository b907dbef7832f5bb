#!/bin/sh
# The guest channel end to end: memgrant-host --socket -> relay (standing in
# for QEMU's chardev) -> memgrantd's channel provider (sim backend).
# grant, revoke, status, watch; the host disconnecting mid-grant (without
# --wait, and killed during --wait) loses no final status; acknowledged
# reports leave the outbox; generations survive the tool and a lost state dir.
. "$(dirname "$0")/lib.sh"

HOSTBIN=$BUILD/memgrant-host
[ -x "$HOSTBIN" ] || skip "memgrant-host not built (configure found no libvirt)"
RELAY_PID=
trap 'kill $RELAY_PID 2>/dev/null; cleanup' EXIT INT TERM

python3 "$(dirname "$0")/channel_relay.py" "$T/guest.sock" "$T/host.sock" &
RELAY_PID=$!
i=0
while [ ! -S "$T/host.sock" ]; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "relay did not start"; sleep 0.1
done

write_config "providers:" "  channel:" "    path: $T/guest.sock"
# every block operation takes a while, so a host can leave mid-grant
sed -i "s|^    block_size: .*|&\n    faults:\n      latency_ms: 150|" "$T/memgrant.yaml"
start_daemon
H="$HOSTBIN --socket $T/host.sock --state-dir $T/hoststate --timeout 10s"

pending() {
	curl -s --unix-socket "$SOCK" http://agent/metrics | sed -n 's/^memgrant_outbox_pending //p'
}

# status: the agent answers a query over the channel
out=$($H status guest) || fail "status failed: $out"
echo "$out" | grep -q "^agent: *test-guest" || fail "status: $out"
echo "$out" | grep -q "2G online, 2G standby" || fail "status memory: $out"
# the global options also after the command word, as operators type them
out=$($HOSTBIN status guest --socket "$T/host.sock" --state-dir "$T/hoststate" --timeout=10s) ||
	fail "status with options after the command word failed: $out"
echo "$out" | grep -q "2G online, 2G standby" || fail "status (options after the word): $out"
# without DOMAIN, --state-dir DIR reads the service's DIR/serve-status.json, as serve --state-dir writes it
mkdir -p "$T/svc" && echo '{"domains": {}}' > "$T/svc/serve-status.json"
out=$($HOSTBIN status --state-dir "$T/svc" --json 2>&1) || fail "status --state-dir DIR refused: $out"
[ "$out" = '{"domains": {}}' ] || fail "status --state-dir DIR printed: $out"

# grant --wait: accepted, in_progress, applied; exit 0
out=$($H grant guest 256M --wait) || fail "grant --wait exited $?: $out"
echo "$out"
echo "$out" | grep -q "^host-1 grant: applied, 256M of 256M (generation 1)" || fail "grant output: $out"
expect_eq "online after grant" "$(online_bytes)" $((2048 * 1048576 + 256 * 1048576))
expect_eq "state file generation" "$(jget "$(cat "$T/hoststate/guest.json")" generation)" 1
expect_eq "outbox after acks" "$(pending)" 0

# grant without --wait: returns after "accepted", the host is gone mid-grant
out=$($H grant guest 512M) || fail "grant exited $?: $out"
echo "$out" | grep -q "^host-2 grant: accepted" || fail "grant without wait: $out"
[ "$(pending)" -ge 1 ] || fail "reports for the absent host should wait in the outbox"
# a later watch gets the rest, final state included
$H watch guest --json > "$T/watch.out" 2>"$T/watch.err" &
W=$!
i=0
until grep -q '"id":"host-2".*"state":"applied"' "$T/watch.out" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 200 ] && { kill $W; fail "watch never saw host-2 applied: $(cat "$T/watch.out")"; }
	sleep 0.1
done
grep -q '"id":"host-2".*"seq":' "$T/watch.out" || fail "outbox reports carry seq"
i=0
while [ "$(pending)" != 0 ]; do
	i=$((i + 1)); [ $i -gt 50 ] && fail "watch did not acknowledge"; sleep 0.1
done
kill $W; wait $W 2>/dev/null
expect_eq "online after host-2" "$(online_bytes)" $((2048 * 1048576 + 768 * 1048576))

# acknowledged reports are not sent again
$H watch guest --json > "$T/watch2.out" 2>/dev/null &
W=$!
sleep 1
kill $W; wait $W 2>/dev/null
[ -s "$T/watch2.out" ] && fail "acknowledged reports came again: $(cat "$T/watch2.out")"

# killed during grant --wait: the final status is still delivered later
$H grant guest 512M --wait > "$T/killed.out" 2>&1 &
G=$!
i=0
until grep -q "host-3 grant: accepted" "$T/killed.out" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "grant --wait never accepted: $(cat "$T/killed.out")"; sleep 0.05
done
kill -KILL $G; wait $G 2>/dev/null
grep -q "host-3 grant: applied" "$T/killed.out" && fail "grant finished before the kill; latency too short"
$H watch guest > "$T/watch3.out" 2>/dev/null &
W=$!
i=0
until grep -q "^host-3 grant: applied" "$T/watch3.out" 2>/dev/null; do
	i=$((i + 1)); [ $i -gt 200 ] && { kill $W; fail "final status of host-3 lost: $(cat "$T/watch3.out")"; }
	sleep 0.1
done
kill $W; wait $W 2>/dev/null

# revoke a grant by id, then by size
out=$($H revoke guest --grant host-1 --wait) || fail "revoke --grant exited $?: $out"
echo "$out" | grep -q "^host-4 revoke: applied, 256M of 256M" || fail "revoke output: $out"
out=$($H revoke guest 128M --wait) || fail "revoke SIZE exited $?: $out"
echo "$out" | grep -q "^host-5 revoke: applied, 128M of 128M" || fail "revoke size output: $out"
expect_eq "online after revokes" "$(online_bytes)" $((2048 * 1048576 + 896 * 1048576))

# refused by the planner: more than the standby memory; exit 1, rejected
out=$($H grant guest 64G --wait 2>&1) && fail "grant 64G succeeded: $out"
echo "$out" | grep -q "host-6 grant: rejected" || fail "rejection output: $out"

# the state directory is lost: the agent's last generation from the sync keeps
# the next grant from being stale
rm -rf "$T/hoststate"
out=$($H grant guest 128M --wait) || fail "grant after losing state exited $?: $out"
echo "$out" | grep -q "^host-7 grant: applied" || fail "generation after state loss: $out"

# the operators' words over the channel: an address range as chmem takes it
# (blocks 30-31 of 128M), zone Movable in lsmem's case, memmap 1
out=$($H grant guest 0xf0000000-0xffffffff --zone Movable --memmap 1 --wait) || fail "grant RANGE exited $?: $out"
echo "$out" | grep -q "^host-8 grant: applied, 256M of 256M" || fail "grant RANGE output: $out"
g=$($CTL grants host-8 --json)
expect_eq "range grant first block" "$(jget "$g" blocks.0.block)" 30
expect_eq "range grant zone" "$(jget "$g" blocks.0.zone)" Movable

# reports left over from an earlier command are not part of the next one's
# answer: stdout holds only this command's reports, the earlier ones go to
# stderr, labelled, and are acknowledged (shown once, then gone)
out=$($H grant guest 128M) || fail "grant without --wait exited $?: $out"
echo "$out" | grep -q "^host-9 grant: accepted" || fail "host-9: $out"
[ "$(pending)" -ge 1 ] || fail "host-9's later reports should wait in the outbox"
$H grant guest 128M --wait > "$T/ans.out" 2> "$T/ans.err" || fail "host-10 exited $?: $(cat "$T/ans.out" "$T/ans.err")"
cat "$T/ans.out"; cat "$T/ans.err"
grep -qv "^host-10 " "$T/ans.out" && fail "the answer to host-10 holds other reports: $(cat "$T/ans.out")"
grep -q "^host-10 grant: applied" "$T/ans.out" || fail "host-10 answer: $(cat "$T/ans.out")"
grep -q "earlier report: host-9 grant: applied" "$T/ans.err" || fail "host-9's final report was not shown: $(cat "$T/ans.err")"
$H --json status guest > "$T/st.out" 2> "$T/st.err" || fail "status: $(cat "$T/st.err")"
[ "$(wc -l < "$T/st.out")" -eq 1 ] || fail "status printed more than the agent's status: $(cat "$T/st.out")"
expect_eq "outbox after the answer" "$(pending)" 0

stop_daemon
echo ok
