#!/bin/sh
# memgrantctl grant SIZE --dry-run and POST /v1/grants?dry_run=1: the plan
# (blocks, zone and memmap with their reasons, the memmap's cost in online
# memory) and nothing else: no journal record, no generation used, no
# kernel write.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to send raw API requests"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 4G --block-size 128M > /dev/null || fail "sim init"
start_daemon
$CTL grant 256M --id first --wait > /dev/null || fail "grant first"

snapshot() {
	mkdir -p "$1"
	$MEMGRANTCTL --sim "$SIM" lsmem -J > "$1/lsmem.json"
	cp "$SIM" "$1/sim.json"
	cp "$T/state/journal.log" "$1/journal.log"
	$CTL grants --json > "$1/grants.json"
}
snapshot "$T/before"

$CTL grant 1G --dry-run --memmap on --zone Movable > "$T/plan" || fail "grant --dry-run: $(cat "$T/plan")"
grep -q '^grant of 1G (dry run: nothing was changed)$' "$T/plan" || fail "plan header: $(cat "$T/plan")"
grep -q '^  blocks: *18-25 (8 of 128M)$' "$T/plan" || fail "plan blocks: $(cat "$T/plan")"
grep -q '^  zone: *Movable, memmap_on_memory on$' "$T/plan" || fail "plan zone: $(cat "$T/plan")"
grep -q '^  decision: *memmap_on_memory=on: requested by the grant' "$T/plan" || fail "plan memmap reason: $(cat "$T/plan")"
grep -q '^  decision: *zone=movable: requested by the grant' "$T/plan" || fail "plan zone reason: $(cat "$T/plan")"
grep -q '^  memmap: *16M (in the granted blocks)$' "$T/plan" || fail "plan memmap: $(cat "$T/plan")"
grep -q '^  cost: *0B of the memory online now$' "$T/plan" || fail "plan cost: $(cat "$T/plan")"
grep -q '^  online: *2.3G -> 3.3G$' "$T/plan" || fail "plan online: $(cat "$T/plan")"

# memmap off: the memmap comes out of the memory online now
$CTL grant 1G --dry-run --memmap off --json > "$T/plan.json" || fail "grant --dry-run --json"
p=$(cat "$T/plan.json")
expect_eq "plan type" "$(jget "$p" type)" plan
expect_eq "plan blocks" "$(jget "$p" blocks.0.block)" 18
expect_eq "plan range" "$(jget "$p" blocks.0.range)" 0x0000000090000000-0x0000000097ffffff
expect_eq "plan memmap" "$(jget "$p" memmap_on_memory)" False
expect_eq "plan cost off" "$(jget "$p" online_cost_bytes)" 16777216
expect_eq "plan usable off" "$(jget "$p" usable_bytes)" 1073741824
# the API's own form; and a revocation's plan
code=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X POST --data '{"type":"grant","size":"512M"}' \
	'http://agent/v1/grants?dry_run=1')
expect_eq "dry run HTTP" "$code" 200
expect_eq "dry run API blocks" "$(jget "$(cat "$T/reply")" blocks.3.block)" 21
$CTL revoke 128M --dry-run > "$T/rplan" || fail "revoke --dry-run: $(cat "$T/rplan")"
grep -q '^revoke of 128M (dry run: nothing was changed)$' "$T/rplan" || fail "revoke plan: $(cat "$T/rplan")"
grep -q '^  online: *2.3G -> 2.1G$' "$T/rplan" || fail "revoke plan online: $(cat "$T/rplan")"
# a revocation by size takes as many blocks as the size needs, not every
# candidate: 128M of the 2 blocks owned is 1 block, the newest (17)
grep -q '^  blocks: *17 (1 of 128M)$' "$T/rplan" || fail "revoke plan blocks: $(cat "$T/rplan")"
code=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X POST --data '{"type":"revoke","size":"128M"}' \
	'http://agent/v1/grants?dry_run=1')
expect_eq "revoke dry run HTTP" "$code" 200
expect_eq "revoke dry run API blocks" "$(jget "$(cat "$T/reply")" blocks)" '[{"block": 17, "range": "0x0000000088000000-0x000000008fffffff"}]'

# what cannot be done is said as a submit would say it, and not recorded
rc=0
$CTL grant 8G --dry-run > "$T/out" 2> "$T/err" || rc=$?
expect_eq "too big dry run exit" "$rc" 1
grep -q 'standby available' "$T/err" || fail "too big dry run: $(cat "$T/err")"
code=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X POST --data '{"type":"grant","size":"128M"}' \
	'http://agent/v1/grants?dry_run=maybe')
expect_eq "bad dry_run HTTP" "$code" 400
rc=0
$CTL grant 128M --dry-run --wait > "$T/out" 2> "$T/err" || rc=$?
expect_eq "dry run with --wait exit" "$rc" 1
grep -q -- '--dry-run changes nothing' "$T/err" || fail "dry run --wait: $(cat "$T/err")"

# nothing changed: the kernel, the sim's state, the journal, the records
snapshot "$T/after"
for f in lsmem.json sim.json journal.log grants.json; do
	cmp -s "$T/before/$f" "$T/after/$f" || fail "a dry run changed $f"
done
# no generation used: the next operator request is local-2
$CTL grant 128M --wait > "$T/out" || fail "grant after dry runs"
grep -q '^grant local-2: applied' "$T/out" || fail "a dry run used a generation: $(cat "$T/out")"

# a revocation's plan names the blocks the revocation then takes, in its
# order: 256M of the 3 blocks owned (16, 17, 18) is 18 then 17; and the dry
# run changes nothing
snapshot "$T/before2"
$CTL revoke 256M --dry-run --json > "$T/rplan.json" || fail "revoke 256M --dry-run --json"
$CTL revoke 256M --dry-run > "$T/rplan2" || fail "revoke 256M --dry-run"
snapshot "$T/after2"
for f in lsmem.json sim.json journal.log grants.json; do
	cmp -s "$T/before2/$f" "$T/after2/$f" || fail "a revocation's dry run changed $f"
done
planned=$(python3 -c 'import json,sys; print(",".join(str(b["block"]) for b in json.load(open(sys.argv[1]))["blocks"]))' \
	"$T/rplan.json")
expect_eq "revoke 256M plan" "$planned" 18,17
grep -q '^  blocks: *18,17 (2 of 128M)$' "$T/rplan2" || fail "revoke 256M plan blocks: $(cat "$T/rplan2")"
grep -q '^  addresses: *0x0000000088000000-0x0000000097ffffff$' "$T/rplan2" || fail "revoke 256M addresses: $(cat "$T/rplan2")"
$CTL revoke 256M --id back-1 --wait > "$T/out" || fail "revoke 256M: $(cat "$T/out")"
$CTL grants back-1 --json > "$T/back.json" || fail "grants back-1"
taken=$(python3 -c 'import json,sys; print(",".join(str(b["block"]) for b in json.load(open(sys.argv[1]))["blocks"]))' \
	"$T/back.json")
expect_eq "blocks the revocation took (the plan's)" "$taken" "$planned"
stop_daemon
cat "$T/plan"; echo ok
