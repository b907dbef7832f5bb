#!/bin/sh
# Sizes without a unit are MiB on the command line, as chmem(8) reads them:
# memgrantctl grant 256 asks for 256M (the wire carries bytes: the agent's
# report says requested_bytes 268435456), revoke 256 gives it back, and sim
# init --standby 1024 makes 1G of standby memory.  "B" says bytes: grant
# 256B asks for 256 bytes, which the agent refuses as no whole block.
. "$(dirname "$0")/lib.sh"

"$MEMGRANTCTL" sim init "$T/bare.json" --online 512 --standby 1024 --block-size 128 ||
	fail "sim init with bare sizes"
"$MEMGRANTCTL" --sim "$T/bare.json" lsmem -b --summary=only > "$T/sum"
grep -q '^Total online memory: *536870912$' "$T/sum" || fail "--online 512 is not 512M: $(cat "$T/sum")"
grep -q '^Memory block size: *134217728$' "$T/sum" || fail "--block-size 128 is not 128M: $(cat "$T/sum")"
grep -q '^Total offline memory: *1073741824$' "$T/sum" || fail "--standby 1024 is not 1G: $(cat "$T/sum")"

start_daemon
before=$(online_bytes)
$CTL grant 256 --wait --json > "$T/grant.json" || fail "grant 256: $(cat "$T/grant.json")"
expect_eq "requested_bytes of grant 256" "$(jget "$(cat "$T/grant.json")" requested_bytes)" 268435456
expect_eq "state of grant 256" "$(jget "$(cat "$T/grant.json")" state)" applied
expect_eq "online after grant 256" "$(online_bytes)" $((before + 268435456))
$CTL revoke 256 --wait > "$T/revoke.out" || fail "revoke 256: $(cat "$T/revoke.out")"
expect_eq "online after revoke 256" "$(online_bytes)" "$before"
rc=0
$CTL grant 256B --json > "$T/bytes.json" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "grant 256B (256 bytes) was not refused"
expect_eq "requested_bytes of grant 256B" "$(jget "$(cat "$T/bytes.json")" requested_bytes)" 256
stop_daemon
echo ok
