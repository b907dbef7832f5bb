#!/bin/sh
# Outside changes are facts: a block of a grant that someone else takes down
# leaves the grant (record, applied_bytes, report, block.changed), and a block
# someone else brings up is foreign: never owned, never revoked.
. "$(dirname "$0")/lib.sh"
# the hooks.d next to the config gets every event
mkdir -p "$T/hooks.d"
cat > "$T/hooks.d/10-log" <<HOOK
#!/bin/sh
echo "\$MEMGRANT_EVENT" >> "$T/hook-events"
HOOK
chmod +x "$T/hooks.d/10-log"
start_daemon
SIMCTL="$MEMGRANTCTL --sim $SIM"

$CTL grant 512M --wait > "$T/grant.out" || fail "grant 512M exited $?"
grep -q "applied, 512M of 512M" "$T/grant.out" || fail "grant summary: $(cat "$T/grant.out")"
st=$($CTL grants --json)
expect_eq "first block" "$(jget "$st" grants.0.blocks.0.block)" 16
expect_eq "last block" "$(jget "$st" grants.0.blocks.3.block)" 19

# outside memgrantd: block 19 goes away
$SIMCTL block offline 19 || fail "sim block offline 19"
$SIMCTL block deconfigure 19 || fail "sim block deconfigure 19"
# within 1 s the status and the grant's record say 384M
i=0
while :; do
	g=$(jget "$($CTL status --json)" memory.granted_bytes)
	[ "$g" = 402653184 ] && break
	i=$((i + 1))
	[ $i -gt 10 ] && fail "granted_bytes still $g 1 s after the outside offline"
	sleep 0.1
done
st=$($CTL grants --json)
expect_eq "grant applied_bytes" "$(jget "$st" grants.0.applied_bytes)" 402653184
expect_eq "grant owned_blocks" "$(jget "$st" grants.0.owned_blocks)" 3
expect_eq "online after the outside offline" "$(online_bytes)" 2550136832
i=0
while ! grep -qx "block.changed" "$T/hook-events" 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 50 ] && fail "no block.changed hook: $(cat "$T/hook-events" 2>/dev/null)"
	sleep 0.1
done
curl -s --unix-socket "$SOCK" http://x/v1/blocks > "$T/blocks"
expect_eq "block 18 owner" "$(jget "$(cat "$T/blocks")" blocks.18.owner)" local-1
expect_eq "block 19 owner" "$(jget "$(cat "$T/blocks")" blocks.19.owner)" null

# outside memgrantd: block 30 comes up; it is foreign
$SIMCTL block configure 30 || fail "sim block configure 30"
$SIMCTL block online 30 || fail "sim block online 30"
i=0
while :; do
	f=$(jget "$($CTL status --json)" memory.foreign_bytes)
	[ "$f" = 134217728 ] && break
	i=$((i + 1))
	[ $i -gt 10 ] && fail "foreign_bytes $f 1 s after the outside online"
	sleep 0.1
done
curl -s --unix-socket "$SOCK" http://x/v1/blocks > "$T/blocks"
expect_eq "block 30 owner" "$(jget "$(cat "$T/blocks")" blocks.30.owner)" foreign
expect_eq "boot block owner" "$(jget "$(cat "$T/blocks")" blocks.0.owner)" null
# and so say lsmem's OWNER column and the human status
$CTL lsmem -o BLOCK,STATE,OWNER -r -n > "$T/owners"
grep -qx '16-18 online local-1' "$T/owners" || fail "lsmem OWNER of the grant's blocks: $(cat "$T/owners")"
grep -qx '30 online foreign' "$T/owners" || fail "lsmem OWNER of block 30: $(cat "$T/owners")"
grep -qx '0-15 online ' "$T/owners" || fail "lsmem OWNER of boot memory: $(cat "$T/owners")"
# lsmem through memgrantd (its table in runs) prints what lsmem on the sim prints
for opts in "" "-a" "-J" "--output-all" "-a -o BLOCK,STATE,ZONES,CONFIGURED,MEMMAP-ON-MEMORY,NODE" "-b -P" "-r -S STATE"; do
	# shellcheck disable=SC2086 # word splitting of the options is meant
	$CTL lsmem $opts > "$T/via-daemon" || fail "lsmem $opts through memgrantd"
	# shellcheck disable=SC2086
	$MEMGRANTCTL --sim "$SIM" lsmem $opts > "$T/direct" || fail "lsmem $opts on the sim"
	cmp -s "$T/via-daemon" "$T/direct" || fail "lsmem $opts: through memgrantd differs: $(diff "$T/direct" "$T/via-daemon")"
done
$CTL status > "$T/status.txt"
grep -q "^not memgrant's: *128M in 1 block" "$T/status.txt" || fail "status does not show the foreign block: $(cat "$T/status.txt")"
$MEMGRANTCTL --sim "$SIM" lsmem -o +OWNER > "$T/owner-direct" 2>&1 && fail "OWNER without the daemon accepted"
grep -q "the OWNER column needs memgrantd" "$T/owner-direct" || fail "OWNER without the daemon: $(cat "$T/owner-direct")"

# a revocation by size larger than what the grant holds takes only owned blocks
$CTL revoke 512M --wait > "$T/revoke-size.out" 2>&1
grep -q "30" "$T/revoke-size.out" && fail "revoke by size touched block 30: $(cat "$T/revoke-size.out")"
$SIMCTL lsmem -o BLOCK,STATE -r -n > "$T/lsmem"
grep -qx '30 online' "$T/lsmem" || fail "block 30 was taken: $(cat "$T/lsmem")"
f=$(jget "$($CTL status --json)" memory.foreign_bytes)
expect_eq "foreign after revoke by size" "$f" 134217728
stop_daemon

# a second machine: the undo of a grant that lost a block reports 384M
rm -rf "$T/state" "$SIM" "$T/hook-events"
start_daemon
$CTL grant 512M --wait > /dev/null || fail "second grant exited $?"
$SIMCTL block offline 19 || fail "sim block offline 19"
$SIMCTL block deconfigure 19 || fail "sim block deconfigure 19"
i=0
while [ "$(jget "$($CTL status --json)" memory.granted_bytes)" != 402653184 ]; do
	i=$((i + 1))
	[ $i -gt 10 ] && fail "granted_bytes not 384M 1 s after the outside offline"
	sleep 0.1
done
$CTL revoke --grant local-1 --wait > "$T/revoke.out" || fail "revoke --grant local-1 exited $?"
grep -q "384M" "$T/revoke.out" || fail "revoke summary: $(cat "$T/revoke.out")"
grep -q "512M of" "$T/revoke.out" && fail "revoke counted 512M: $(cat "$T/revoke.out")"
expect_eq "online after the undo" "$(online_bytes)" 2147483648
stop_daemon
echo ok
