#!/bin/sh
# The operator's words and long operations through memgrantd:
#  - grant 1.5G (a size as lsmem prints it), --zone Movable, --memmap 1;
#    grant RANGE as chmem takes it; revoke --blocks LIST and revoke RANGE;
#    --help naming what grant and revoke take;
#  - memgrantctl grants ID (one grant in detail, --json);
#  - Ctrl-C during --wait stops waiting, says the grant goes on and how to
#    follow it; memgrantctl wait ID follows it to the end;
#  - wait on an unknown id, or a bad one: exit 1 with a clear message.
. "$(dirname "$0")/lib.sh"
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 4G --block-size 128M > /dev/null || fail "sim init"
start_daemon

# --- words -----------------------------------------------------------------
$CTL grant 1.5G --zone Movable --memmap 1 --id words-1 --wait > "$T/out" || fail "grant 1.5G: $(cat "$T/out")"
grep -q '^grant words-1: applied, 1.5G of 1.5G$' "$T/out" || fail "grant 1.5G summary: $(cat "$T/out")"
g=$($CTL grants words-1 --json) || fail "grants words-1 --json"
expect_eq "1.5G in bytes" "$(jget "$g" applied_bytes)" 1610612736
expect_eq "blocks of 1.5G" "$(jget "$g" blocks_total)" 12
grep -q 'zone=movable: requested by the grant' "$T/out" || fail "zone Movable not taken as movable: $(cat "$T/out")"
grep -q 'memmap_on_memory=on: requested by the grant' "$T/out" || fail "memmap 1 not taken as on: $(cat "$T/out")"

# grants ID: one grant in detail
$CTL grants words-1 > "$T/one" || fail "grants words-1"
grep -q '^grant words-1$' "$T/one" || fail "grants ID header: $(cat "$T/one")"
grep -q '^  state: *applied$' "$T/one" || fail "grants ID state: $(cat "$T/one")"
grep -q '^  memory: *1.5G of 1.5G$' "$T/one" || fail "grants ID memory: $(cat "$T/one")"
grep -q '^  blocks: *12 of 12: 16-27$' "$T/one" || fail "grants ID blocks: $(cat "$T/one")"
rc=0
$CTL grants no-such-grant > "$T/out" 2> "$T/err" || rc=$?
expect_eq "grants unknown id exit" "$rc" 1
grep -q 'no grant or revocation with id "no-such-grant"' "$T/err" || fail "grants unknown: $(cat "$T/err")"

# an address range, as chmem takes it: blocks 32-33 (0x100000000-0x10fffffff)
$CTL grant 0x100000000-0x10fffffff --id range-1 --wait > "$T/out" || fail "grant RANGE: $(cat "$T/out")"
g=$($CTL grants range-1 --json)
expect_eq "range first block" "$(jget "$g" blocks.0.block)" 32
expect_eq "range second block" "$(jget "$g" blocks.1.block)" 33
expect_eq "range size" "$(jget "$g" applied_bytes)" 268435456
$CTL revoke --blocks 32,33 --id range-back --wait > "$T/out" || fail "revoke --blocks 32,33: $(cat "$T/out")"
expect_eq "revoked range" "$(jget "$($CTL grants range-back --json)" state)" applied
# a revocation by address range, as chmem takes it: blocks 34-35 (0x110000000-0x11fffffff)
$CTL grant --blocks 34,35 --id range-2 --wait > "$T/out" || fail "grant --blocks 34,35: $(cat "$T/out")"
$CTL revoke 0x110000000-0x11fffffff --dry-run > "$T/out" || fail "revoke RANGE --dry-run: $(cat "$T/out")"
grep -q '^  blocks: *35,34 (2 of 128M)$' "$T/out" || fail "revoke RANGE plan: $(cat "$T/out")"
$CTL revoke 0x110000000-0x11fffffff --id range-back-2 --wait > "$T/out" || fail "revoke RANGE: $(cat "$T/out")"
g=$($CTL grants range-back-2 --json)
expect_eq "revoke RANGE state" "$(jget "$g" state)" applied
expect_eq "revoke RANGE bytes" "$(jget "$g" applied_bytes)" 268435456
expect_eq "revoke RANGE blocks" "$(jget "$g" blocks.0.block),$(jget "$g" blocks.1.block)" 35,34
$MEMGRANTCTL --sim "$SIM" lsmem -o BLOCK,STATE,CONFIGURED -r -n -a > "$T/lsmem"
grep -qx '34 offline no' "$T/lsmem" && grep -qx '35 offline no' "$T/lsmem" ||
	fail "blocks 34-35 not given back: $(cat "$T/lsmem")"
rc=0
$CTL revoke 0x110000000-0x118000000 > "$T/out" 2> "$T/err" || rc=$?
expect_eq "unaligned revoke RANGE exit" "$rc" 1
grep -q 'aligned to the memory block size' "$T/err" || fail "unaligned revoke RANGE: $(cat "$T/err")"
# --help names what grant and revoke take
$MEMGRANTCTL --help > "$T/help"
grep -q '^  revoke   revoke (SIZE | RANGE | --grant ID | --blocks LIST) \[--id ID\] \[--wait | --dry-run\] \[--json\]' \
	"$T/help" || fail "--help revoke line: $(grep -A1 revoke "$T/help")"
grep -q '^  grant    grant (SIZE | RANGE | --blocks LIST) ' "$T/help" || fail "--help grant line: $(grep -A1 grant "$T/help")"
$MEMGRANTCTL revoke --help | grep -q -- '--dry-run' || fail "revoke --help has no --dry-run"

# --- Ctrl-C during --wait, then memgrantctl wait ID ------------------------
# each block step takes 300 ms: 8 blocks take several seconds
$MEMGRANTCTL sim fault "$SIM" --latency 300 > /dev/null || fail "sim fault --latency"
# a shell's background job ignores SIGINT: python starts memgrantctl with the
# default disposition, as a terminal's Ctrl-C finds it, and sends the SIGINT
# once the grant is under way
python3 - "$T/int.err" $CTL grant 1G --id slow-1 --wait <<'PY' > "$T/int.rc" || fail "Ctrl-C driver failed"
import signal, subprocess, sys, time, json
err, argv = sys.argv[1], sys.argv[2:]
with open(err, "w") as e:
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=e,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    sock = argv[argv.index("--socket") + 1]
    for _ in range(300):  # until slow-1 is in progress
        out = subprocess.run(argv[:3] + ["grants", "slow-1", "--json"], capture_output=True, text=True).stdout
        if out and json.loads(out).get("state") == "in_progress":
            break
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    print(p.wait())
PY
expect_eq "exit after Ctrl-C" "$(cat "$T/int.rc")" 130
grep -q "stopped waiting; grant slow-1 goes on in memgrantd" "$T/int.err" || fail "Ctrl-C message: $(cat "$T/int.err")"
grep -q "Follow it with: memgrantctl --socket $SOCK wait slow-1" "$T/int.err" || fail "Ctrl-C follow hint: $(cat "$T/int.err")"
state=$(jget "$($CTL grants slow-1 --json)" state)
[ "$state" = in_progress ] || [ "$state" = accepted ] || fail "slow-1 should still be running, is $state"
# grants ID of the running grant says when it was recorded and last changed, as the list does
$CTL grants slow-1 > "$T/running" || fail "grants slow-1 while it runs"
grep -q '^  created_at: *20[0-9-]*T[0-9:]*Z$' "$T/running" && grep -q '^  updated_at: *20[0-9-]*T[0-9:]*Z$' "$T/running" ||
	fail "grants ID of a running grant has no times: $(cat "$T/running")"
$CTL wait slow-1 > "$T/wait.out" || fail "wait slow-1: $(cat "$T/wait.out")"
grep -q '^grant slow-1: applied, 1G of 1G$' "$T/wait.out" || fail "wait summary: $(cat "$T/wait.out")"
# waiting for something already final answers at once, with --json too
$CTL wait slow-1 --json > "$T/wait.json" || fail "wait --json on a final grant"
expect_eq "wait --json state" "$(jget "$(cat "$T/wait.json")" state)" applied

rc=0
$CTL wait nope > "$T/out" 2> "$T/err" || rc=$?
expect_eq "wait unknown exit" "$rc" 1
grep -q 'no grant or revocation with id "nope"' "$T/err" || fail "wait unknown: $(cat "$T/err")"
rc=0
$CTL wait 'bad id!' > "$T/out" 2> "$T/err" || rc=$?
expect_eq "wait bad id exit" "$rc" 1
grep -q "wait: 'bad id!' is not an id" "$T/err" || fail "wait bad id: $(cat "$T/err")"
rc=0
$CTL wait > "$T/out" 2> "$T/err" || rc=$?
expect_eq "wait without id exit" "$rc" 1
# the build's version, as the usual info metric
if command -v curl >/dev/null 2>&1; then
	version=$(cat "$(dirname "$0")/../../VERSION")
	curl -s --unix-socket "$SOCK" http://agent/metrics > "$T/metrics" || fail "GET /metrics"
	grep -qx "memgrant_build_info{version=\"$version\"} 1" "$T/metrics" ||
		fail "no memgrant_build_info for $version: $(grep build_info "$T/metrics")"
	grep -qx '# TYPE memgrant_build_info gauge' "$T/metrics" || fail "memgrant_build_info has no TYPE line"
fi
stop_daemon
cat "$T/int.err" "$T/one"; echo ok
