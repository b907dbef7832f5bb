#!/bin/sh
# Every bad input in docs/bad-inputs.md, sent to a real memgrantd on the sim:
# each gets its documented HTTP status, error code and message, the daemon
# stays up, and memory is untouched (lsmem -J and the sim state file are
# byte-identical, the blocks each grant owns are the same).
#
# Rows tagged "api-*" are refused before the journal is touched: the journal
# file stays byte-identical.  Rows tagged "plan-*" reach the planner, which
# refuses them with a "rejected" status; by design (engine_submit) that status
# is journaled as a rejected record so that a replay of its generation gets
# the same answer.  For those the test checks that the journal only gained
# rejected records that own no blocks.  Rows "ctl-*" are memgrantctl
# arguments that must fail without sending anything; "start-*" are inputs
# memgrantd refuses at start.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to send raw API requests"

ROWS=0
TRAP_PID=
trap 'if [ -n "$TRAP_PID" ]; then kill "$TRAP_PID" 2>/dev/null; fi; cleanup' EXIT INT TERM

alive() { # ROW: the daemon must have survived the row
	kill -0 "$DAEMON_PID" 2>/dev/null || {
		wait "$DAEMON_PID"
		fail "$1: memgrantd died (exit $?) on this input"
	}
}

# reply FILE: "CODE<TAB>STATE<TAB>MESSAGE" of a JSON reply (error object or status)
reply() {
	python3 -c 'import json,sys
try:
    j = json.load(open(sys.argv[1], "rb"))
except Exception as e:
    print("NOTJSON\t-\t%r" % open(sys.argv[1], "rb").read()[:200]); sys.exit(0)
e = j.get("error") or {}
print("%s\t%s\t%s" % (e.get("code"), j.get("state", "-"), e.get("message")))' "$1"
}

# api ROW METHOD PATH BODY WANT-HTTP WANT-CODE WANT-TEXT [curl args...]
# BODY is the text to send, "@FILE" to send a file, "-" for no body.
# A reply with "state" must be "rejected" (a planner refusal); without, an error object.
api() {
	row=$1 method=$2 path=$3 body=$4 want_http=$5 want_code=$6 want_text=$7
	shift 7
	ROWS=$((ROWS + 1))
	case $body in
	-) set -- "$@" ;;
	@*) set -- "$@" --data-binary "$body" -H 'Content-Type: application/json' ;;
	*) printf '%s' "$body" > "$T/body"
	   set -- "$@" --data-binary "@$T/body" -H 'Content-Type: application/json' ;;
	esac
	rm -f "$T/reply"
	got_http=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X "$method" "$@" \
		"http://memgrantd$path") || true
	[ "$got_http" != 000 ] || sleep 0.3 # no answer at all: give a crash time to show
	alive "$row"
	[ "$got_http" = "$want_http" ] || fail "$row: $method $path: HTTP $got_http, want $want_http; reply: $(cat "$T/reply" 2>/dev/null)"
	r=$(reply "$T/reply")
	got_code=$(printf '%s' "$r" | cut -f1)
	got_state=$(printf '%s' "$r" | cut -f2)
	got_msg=$(printf '%s' "$r" | cut -f3-)
	[ "$got_code" = "$want_code" ] || fail "$row: error code $got_code, want $want_code ($got_msg)"
	case $got_state in
	-|rejected) ;;
	*) [ "$want_code" = None ] || fail "$row: state $got_state: the request was not refused" ;;
	esac
	case $got_msg in
	*"$want_text"*) ;;
	*) fail "$row: message '$got_msg' does not say '$want_text'" ;;
	esac
	echo "ok $row: HTTP $got_http $got_code: $got_msg"
}

snapshot() { # DIR: what must not change
	mkdir -p "$1"
	$MEMGRANTCTL --sim "$SIM" lsmem -J > "$1/lsmem.json" || fail "lsmem on the sim failed"
	cp "$SIM" "$1/sim.json"
	"$BUILD/tests/tools/journal_dump" "$T/state" > "$1/journal.json" || fail "journal_dump failed"
	$CTL grants --json > "$1/grants.json" || fail "grants --json failed"
	$CTL status --json > "$1/status.json" || fail "status --json failed"
}

# same_memory A B: memory and owned blocks unchanged between two snapshots
same_memory() {
	cmp -s "$1/lsmem.json" "$2/lsmem.json" || fail "$3: lsmem -J changed: $(diff "$1/lsmem.json" "$2/lsmem.json")"
	cmp -s "$1/sim.json" "$2/sim.json" || fail "$3: the sim state file changed"
	python3 -c 'import json,sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
for k in ("online_bytes", "standby_bytes", "block_size"):
    if a["memory"].get(k) != b["memory"].get(k):
        sys.exit("status memory.%s: %s -> %s" % (k, a["memory"].get(k), b["memory"].get(k)))' \
		"$1/status.json" "$2/status.json" || fail "$3: status changed"
}

# journal_only_rejections A B: B's journal is A's plus rejected records owning nothing
journal_only_rejections() {
	python3 -c 'import json,sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
ga = {g["id"]: g for g in a["grants"]}; gb = {g["id"]: g for g in b["grants"]}
for i, g in ga.items():
    if i not in gb: sys.exit("record %s disappeared" % i)
    for k in ("state", "blocks", "generation", "request"):
        if g.get(k) != gb[i].get(k): sys.exit("record %s: %s changed" % (i, k))
new = [g for i, g in gb.items() if i not in ga]
for g in new:
    if g["state"] != "rejected" or g.get("blocks"):
        sys.exit("new record %s is %s with blocks %s" % (g["id"], g["state"], g.get("blocks")))
for k in a:
    if k not in ("grants", "sources", "next_order", "outbox") and a[k] != b.get(k):
        sys.exit("journal %s changed: %s -> %s" % (k, a[k], b.get(k)))
print(len(new))' "$1/journal.json" "$2/journal.json"
}

# ---------------------------------------------------------------- at start
# start-*: memgrantd refuses a corrupt sim state file and leaves it alone
write_config
for kind in garbage truncated empty; do
	case $kind in
	garbage) printf 'this is not json\n' > "$SIM" ;;
	truncated) printf '{"version": 1, "block_size": 134217728, "blo' > "$SIM" ;;
	empty) : > "$SIM" ;;
	esac
	cp "$SIM" "$T/sim.orig"
	ROWS=$((ROWS + 1))
	rc=0
	"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground > "$T/start.log" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "start-sim-$kind: memgrantd started on a $kind sim state file"
	[ "$rc" -lt 128 ] || fail "start-sim-$kind: memgrantd crashed (exit $rc)"
	grep -q "cannot open the sim $SIM: $SIM: .*(corrupt or truncated sim state)" "$T/start.log" ||
		fail "start-sim-$kind: message: $(cat "$T/start.log")"
	cmp -s "$SIM" "$T/sim.orig" || fail "start-sim-$kind: the sim state file was changed"
	[ ! -e "$SOCK" ] || fail "start-sim-$kind: the API socket was left behind"
	echo "ok start-sim-$kind: exit $rc"
done
rm -f "$SIM" "$T/sim.orig"

# start-override: a bad -o is reported like a bad file line, nothing starts
ROWS=$((ROWS + 1))
rc=0
"$MEMGRANTD" -c "$T/memgrant.yaml" -o policy.reserve=2X --foreground > "$T/start.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then fail "start-override: exit $rc"; fi
grep -q "memgrant.yaml: override 'policy.reserve=2X': policy.reserve: '2X' is not a size" "$T/start.log" ||
	fail "start-override: message: $(cat "$T/start.log")"
[ ! -e "$SIM" ] || fail "start-override: a sim state file was created"
echo "ok start-override: exit $rc"

# start-args: unknown option
ROWS=$((ROWS + 1))
rc=0
"$MEMGRANTD" --bogus > "$T/start.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "start-args: exit $rc, want 1"
grep -q "unrecognized option '--bogus'" "$T/start.log" || fail "start-args: message: $(cat "$T/start.log")"
echo "ok start-args: exit 1"
rc=0
"$MEMGRANTD" extra-argument > "$T/start.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "start-args: extra argument: exit $rc, want 1"

# start-helper: --helper naming nothing, or something that cannot be executed:
# exit 1 with the path and the reason, no socket left behind.  (Under qemu
# the wrapper's own --helper comes first; the last one wins.)
ROWS=$((ROWS + 1))
rc=0
"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground --helper "$T/no-helper" > "$T/start.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "start-helper: missing: exit $rc, want 1"
grep -q -- "--helper $T/no-helper: No such file or directory" "$T/start.log" ||
	fail "start-helper: missing: message: $(cat "$T/start.log")"
printf '#!/bin/sh\nexit 0\n' > "$T/not-executable"
chmod 0644 "$T/not-executable"
rc=0
"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground --helper "$T/not-executable" > "$T/start.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "start-helper: not executable: exit $rc, want 1"
grep -q "privileged helper: cannot execute $T/not-executable: Permission denied" "$T/start.log" ||
	fail "start-helper: not executable: message: $(cat "$T/start.log")"
[ ! -e "$SOCK" ] || fail "start-helper: the API socket was left behind"
rm -rf "$SIM" "$SIM".* "$T/not-executable" # the sim was made before the exec failed
echo "ok start-helper: exit 1"

# ---------------------------------------------------------------- a daemon with one grant
start_daemon
api setup POST /v1/grants '{"type":"grant","id":"g-base","generation":100,"size":"256M"}' 202 None ""
wait_state g-base applied
snapshot "$T/before"

# ---------------------------------------------------------------- api-*: refused before the journal
big=$T/big.json
python3 -c 'import sys; sys.stdout.write("{\"type\":\"grant\",\"size\":\"128M\",\"x-pad\":\"" + "a" * 70000 + "\"}")' > "$big"
deep=$T/deep.json
python3 -c 'import sys; sys.stdout.write("{\"type\":\"grant\",\"size\":\"128M\",\"x-a\":" + "[" * 3000 + "]" * 3000 + "}")' > "$deep"
deeptop=$T/deeptop.json
python3 -c 'import sys; sys.stdout.write("[" * 5000 + "]" * 5000)' > "$deeptop"
nul=$T/nul.json
printf '{"type":"grant","size":"128M"}\000' > "$nul"
nulin=$T/nulin.json
printf '{"type":"grant","id":"g\000x","size":"128M"}' > "$nulin"
utf=$T/utf.json
printf '{"type":"grant","id":"g\377","size":"128M"}' > "$utf"
long_id=$(python3 -c 'print("g" * 64)')

api api-malformed      POST /v1/grants '{type: grant}'                                   400 EBADMSG "not valid JSON"
api api-truncated      POST /v1/grants '{"type":"grant","size":"128M"'                    400 EBADMSG "not valid JSON"
api api-empty          POST /v1/grants -                                                 400 EBADMSG "not valid JSON"
api api-array          POST /v1/grants '[{"type":"grant","size":"128M"}]'                  400 EBADMSG "expected a JSON object, got an array"
api api-scalar         POST /v1/grants '"grant"'                                          400 EBADMSG "not valid JSON"
api api-trailing       POST /v1/grants '{"type":"grant","size":"128M"} {}'                 400 EBADMSG "not valid JSON"
api api-duplicate-key  POST /v1/grants '{"type":"grant","size":"128M","size":"256M"}'     400 EINVAL "duplicate object key"
api api-nul-escape     POST /v1/grants '{"type":"grant","id":"a\u0000b","size":"128M"}'   400 EBADMSG "\\u0000 is not allowed"
api api-nul-byte       POST /v1/grants "@$nul"                                           400 EBADMSG "not valid JSON"
api api-nul-in-string  POST /v1/grants "@$nulin"                                         400 EBADMSG "not valid JSON"
api api-bad-utf8       POST /v1/grants "@$utf"                                           400 EBADMSG "not valid JSON"
api api-deep           POST /v1/grants "@$deep"                                          400 EBADMSG "maximum parsing depth"
api api-deep-top       POST /v1/grants "@$deeptop"                                       400 EBADMSG "maximum parsing depth"
api api-oversized      POST /v1/grants "@$big"                                           413 E2BIG "larger than the limit of 65536 bytes"
api api-oversized-chunked POST /v1/grants "@$big"                                        413 E2BIG "larger than the limit of 65536 bytes" -H 'Transfer-Encoding: chunked'
api api-no-type        POST /v1/grants '{"size":"128M"}'                                  400 EINVAL 'field "type"'
api api-unknown-type   POST /v1/grants '{"type":"grab","size":"128M"}'                    400 EINVAL 'field "type"'
api api-type-number    POST /v1/grants '{"type":7,"size":"128M"}'                         400 EINVAL 'field "type"'
api api-unknown-field  POST /v1/grants '{"type":"grant","size":"128M","zon":"normal"}'    400 EINVAL 'field "zon": not a field of a grant'
api api-no-target      POST /v1/grants '{"type":"grant"}'                                 400 EINVAL "size"
api api-two-targets    POST /v1/grants '{"type":"grant","size":"128M","blocks":[20]}'     400 EINVAL "size"
api api-no-id          POST /v1/grants '{"type":"grant","generation":500,"size":"128M"}'  400 EINVAL 'field "id"'
api api-bad-id         POST /v1/grants '{"type":"grant","id":"a/b","size":"128M"}'        400 EINVAL 'field "id"'
api api-long-id        POST /v1/grants "{\"type\":\"grant\",\"id\":\"$long_id\",\"size\":\"128M\"}" 400 EINVAL 'field "id"'
api api-gen-zero       POST /v1/grants '{"type":"grant","id":"x","generation":0,"size":"128M"}'   400 EINVAL 'field "generation": 0 is below the minimum 1'
api api-gen-negative   POST /v1/grants '{"type":"grant","id":"x","generation":-1,"size":"128M"}'  400 EINVAL 'field "generation"'
api api-gen-string     POST /v1/grants '{"type":"grant","id":"x","generation":"5","size":"128M"}' 400 EINVAL 'field "generation"'
api api-gen-fraction   POST /v1/grants '{"type":"grant","id":"x","generation":101.5,"size":"128M"}' 400 EINVAL 'field "generation"'
api api-gen-2p53       POST /v1/grants '{"type":"grant","id":"x","generation":9007199254740993,"size":"128M"}' 400 ERANGE "above the maximum 9007199254740992"
api api-huge-integer   POST /v1/grants '{"type":"grant","id":"x","generation":99999999999999999999,"size":"128M"}' 400 ERANGE "too big integer"
api api-huge-real      POST /v1/grants '{"type":"grant","id":"x","generation":1e999,"size":"128M"}' 400 ERANGE "real number overflow"
api api-size-2X        POST /v1/grants '{"type":"grant","size":"2X"}'                     400 EINVAL '"2X" is not a size'
api api-size-negative  POST /v1/grants '{"type":"grant","size":"-1G"}'                    400 EINVAL 'field "size"'
api api-size-negative-int POST /v1/grants '{"type":"grant","size":-1}'                    400 EINVAL 'field "size"'
api api-size-overflow  POST /v1/grants '{"type":"grant","size":"99999999999999G"}'        400 ERANGE 'field "size"'
api api-size-zero      POST /v1/grants '{"type":"grant","size":"0"}'                      400 EINVAL 'field "size": must be more than 0 bytes'
api api-size-fraction  POST /v1/grants '{"type":"grant","size":1.5}'                      400 EINVAL 'field "size"'
api api-blocks-empty   POST /v1/grants '{"type":"grant","blocks":[]}'                     400 EINVAL 'field "blocks"'
api api-blocks-twice   POST /v1/grants '{"type":"grant","blocks":[20,20]}'                400 EINVAL 'field "blocks'
api api-blocks-negative POST /v1/grants '{"type":"grant","blocks":[-1]}'                  400 EINVAL 'field "blocks[0]"'
api api-blocks-string  POST /v1/grants '{"type":"grant","blocks":["20"]}'                 400 EINVAL 'field "blocks[0]"'
api api-range-syntax   POST /v1/grants '{"type":"grant","ranges":["zz"]}'                 400 EINVAL 'field "ranges[0]": "zz" is not a range'
api api-range-empty    POST /v1/grants '{"type":"grant","ranges":[]}'                     400 EINVAL 'field "ranges"'
api api-memmap         POST /v1/grants '{"type":"grant","size":"128M","memmap_on_memory":"yes"}' 400 EINVAL 'field "memmap_on_memory"'
api api-zone           POST /v1/grants '{"type":"grant","size":"128M","zone":"dma"}'      400 EINVAL 'field "zone"'
api api-not-after-syntax POST /v1/grants '{"type":"grant","size":"128M","not_after":"tomorrow"}' 400 EINVAL 'field "not_after"'
api api-not-after-offset POST /v1/grants '{"type":"grant","size":"128M","not_after":"2030-01-01T00:00:00+01:00"}' 400 EINVAL 'field "not_after"'
api api-revoke-zone    POST /v1/grants '{"type":"revoke","size":"128M","zone":"normal"}'  400 EINVAL 'field "zone": not a field of a revoke'
api api-revoke-ranges  POST /v1/grants '{"type":"revoke","ranges":["0x80000000-0x87ffffff"]}' 400 EINVAL 'field "ranges"'
api api-stale          POST /v1/grants '{"type":"grant","id":"g-old","generation":50,"size":"128M"}' 409 ESTALE "generation 50 is not above the last generation 100 from local"
api api-duplicate-id   POST /v1/grants '{"type":"grant","id":"g-base","size":"128M"}'     409 EEXIST 'id "g-base" is already used'
api api-method-grants  DELETE /v1/grants -                                               405 EOPNOTSUPP "method DELETE is not allowed on /v1/grants"
api api-method-status  POST /v1/status '{}'                                              405 EOPNOTSUPP "method POST is not allowed on /v1/status"
api api-method-blocks  PUT /v1/blocks '{}'                                               405 EOPNOTSUPP "method PUT is not allowed on /v1/blocks"
api api-method-grant   POST /v1/grants/g-base '{}'                                       405 EOPNOTSUPP "method POST is not allowed on /v1/grants/g-base"
api api-method-events  POST /v1/events -                                                 405 EOPNOTSUPP "method POST is not allowed on /v1/events"
api api-method-metrics PUT /metrics -                                                    405 EOPNOTSUPP "method PUT is not allowed on /metrics"
api api-no-endpoint    GET /v1/nope -                                                    404 ENOENT "no such endpoint: GET /v1/nope"
api api-no-endpoint-post POST /v2/grants '{"type":"grant","size":"128M"}'                 404 ENOENT "no such endpoint: POST /v2/grants"
api api-no-grant       GET /v1/grants/nope -                                             404 ENOENT 'no grant or revocation with id "nope"'
api api-events-after   GET '/v1/events?after=abc' -                                      400 EINVAL 'query "after": "abc" is not a sequence number'
api api-events-grant   GET '/v1/events?grant=nope' -                                     404 ENOENT 'no grant or revocation with id "nope"'

# A replay of a recorded generation gets the recorded answer, nothing applied
ROWS=$((ROWS + 1))
got=$(curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X POST \
	--data-binary '{"type":"grant","id":"g-again","generation":100,"size":"1G"}' http://memgrantd/v1/grants)
alive api-replay
expect_eq "api-replay: HTTP" "$got" 200
expect_eq "api-replay: id" "$(jget "$(cat "$T/reply")" id)" g-base
expect_eq "api-replay: state" "$(jget "$(cat "$T/reply")" state)" applied
echo "ok api-replay: HTTP 200, the recorded status of g-base"

# Raw HTTP that is not a request libmicrohttpd can route, or a client that
# hangs up half way through its body: the daemon survives, nothing is applied.
ROWS=$((ROWS + 1))
python3 - "$SOCK" <<'PY' || fail "api-raw: $?"
import socket, sys
def send(data, read=True):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(sys.argv[1])
    out = b""
    try:
        s.sendall(data)
        while read:
            b = s.recv(65536)
            if not b: break
            out += b
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        pass # dropping such a client is a fine answer
    s.close()
    return out
r = send(b"GARBAGE\r\n\r\n")
assert r == b"" or r.startswith(b"HTTP/1.1 4"), r[:80]
r = send(b"GET /" + b"a" * 200000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
assert r == b"" or r.startswith(b"HTTP/1.1 4"), r[:80]
# promises 100 bytes, sends 10, hangs up
send(b"POST /v1/grants HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"type\":\"", read=False)
# promises more than the limit and sends nothing
send(b"POST /v1/grants HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n", read=False)
PY
sleep 0.2
alive api-raw
echo "ok api-raw"

snapshot "$T/after-api"
same_memory "$T/before" "$T/after-api" api-rows
cmp -s "$T/before/journal.json" "$T/after-api/journal.json" ||
	fail "api rows changed the journal: $(diff "$T/before/journal.json" "$T/after-api/journal.json" | head -20)"
cmp -s "$T/before/grants.json" "$T/after-api/grants.json" || fail "api rows changed the grant list"

# ---------------------------------------------------------------- plan-*: rejected by the planner
api plan-size-not-multiple POST /v1/grants '{"type":"grant","size":"200M"}'               409 EINVAL "size 200M is not a multiple of the block size 128M: the nearest valid sizes are 128M and 256M"
api plan-size-too-much   POST /v1/grants '{"type":"grant","size":"4G"}'                   409 ENOSPC "4G requested, 1.8G standby available"
api plan-unknown-block   POST /v1/grants '{"type":"grant","blocks":[999]}'                409 ENOENT "block 999 does not exist"
api plan-block-online    POST /v1/grants '{"type":"grant","blocks":[0]}'                  409 EBUSY "block 0 is not standby: configured already (online)"
api plan-block-owned     POST /v1/grants '{"type":"grant","blocks":[16]}'                 409 EBUSY "block 16 already belongs to grant g-base"
api plan-range-unaligned POST /v1/grants '{"type":"grant","ranges":["0x90000001-0x97ffffff"]}' 409 EINVAL "is not aligned to the block size 128M"
api plan-range-reversed  POST /v1/grants '{"type":"grant","ranges":["0x98000000-0x8fffffff"]}' 409 EINVAL "end is below start"
api plan-range-online    POST /v1/grants '{"type":"grant","ranges":["0x0-0x7ffffff"]}'    409 EBUSY "block 0 is not standby"
api plan-range-missing   POST /v1/grants '{"type":"grant","ranges":["0x200000000-0x207ffffff"]}' 409 ENOENT "block 64 does not exist"
api plan-expired         POST /v1/grants '{"type":"grant","size":"128M","not_after":"2000-01-01T00:00:00Z"}' 409 ETIME "expired at 2000-01-01T00:00:00Z (not_after): nothing applied"
api plan-revoke-unknown  POST /v1/grants '{"type":"revoke","grant":"nope"}'               409 ENOENT "grant nope owns no blocks"
api plan-revoke-too-much POST /v1/grants '{"type":"revoke","size":"1G"}'                  409 ENOSPC "1G requested, 256M owned by memgrant"
api plan-revoke-not-multiple POST /v1/grants '{"type":"revoke","size":"200M"}'            409 EINVAL "size 200M is not a multiple of the block size 128M"
api plan-revoke-not-ours POST /v1/grants '{"type":"revoke","blocks":[0]}'                 409 EPERM "block 0 is boot memory: memgrant gives back only blocks its grants hold"
api plan-revoke-standby  POST /v1/grants '{"type":"revoke","blocks":[20]}'                409 EPERM "block 20 is standby memory (not configured): no grant holds it"
api plan-revoke-unknown-block POST /v1/grants '{"type":"revoke","blocks":[999]}'          409 ENOENT "block 999 does not exist"

# ctl-rejected-*: valid arguments the daemon refuses: exit 1 and its reason
ctl_rejected() { # ROW WANT-TEXT ARGS...
	row=$1 want=$2
	shift 2
	ROWS=$((ROWS + 1))
	rc=0
	$CTL "$@" > "$T/out" 2> "$T/err" || rc=$?
	alive "$row"
	[ "$rc" -eq 1 ] || fail "$row: memgrantctl $* exited $rc, want 1"
	grep -q -- "$want" "$T/err" || fail "$row: memgrantctl $*: stderr does not say '$want': $(cat "$T/err")"
	echo "ok $row: exit 1: $(cat "$T/err")"
}
ctl_rejected ctl-rejected-multiple "rejected: size 200M is not a multiple of the block size 128M" grant 200M
ctl_rejected ctl-rejected-too-much "rejected: 64G requested" grant 64G
ctl_rejected ctl-rejected-zero 'field "size": must be more than 0 bytes' grant 0
ctl_rejected ctl-rejected-revoke "no such grant: nope (memgrantctl grants lists them)" revoke --grant nope
ctl_rejected ctl-rejected-wait "rejected: size 200M is not a multiple" grant 200M --wait
ctl_rejected ctl-grant-range-unaligned "grant RANGE: address range '0x80000000-0x80000fff': start and end + 1 must be aligned to the memory block size (128M)" grant 0x80000000-0x80000fff
ctl_rejected ctl-rejected-nearest "rejected: size 1.3G is not a multiple of the block size 128M: the nearest valid sizes are 1.25G and 1.375G" grant 1.3G

snapshot "$T/after-plan"
same_memory "$T/before" "$T/after-plan" plan-rows
n=$(journal_only_rejections "$T/after-api" "$T/after-plan") || fail "plan rows: journal: $n"
[ "$n" -eq 20 ] || fail "plan rows: $n rejected records journaled, want 20 (16 plan-* and 4 ctl-rejected-* that reach the planner; ctl-rejected-revoke is answered before)"

# ---------------------------------------------------------------- ctl-*: bad arguments, nothing sent
# A listener that records every connection stands in for the daemon.
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(16)
while True:
    c, _ = s.accept()
    with open(sys.argv[2], "a") as f:
        f.write("connection\n")
    c.close()' "$T/trap.sock" "$T/trap.log" &
TRAP_PID=$!
i=0
while [ ! -S "$T/trap.sock" ]; do
	i=$((i + 1))
	[ $i -gt 50 ] && fail "the test's listener did not start"
	sleep 0.1
done
TRAP="$MEMGRANTCTL --socket $T/trap.sock"

# ctl ROW WANT-TEXT ARGS...: exit 1, stderr says WANT-TEXT, nothing connected
XFAILS=0
ctl() {
	row=$1 want=$2
	shift 2
	ROWS=$((ROWS + 1))
	: > "$T/trap.log"
	rc=0
	$TRAP "$@" > "$T/out" 2> "$T/err" || rc=$?
	[ "$rc" -eq 1 ] || fail "$row: memgrantctl $* exited $rc, want 1"
	if [ -s "$T/trap.log" ]; then
		fail "$row: memgrantctl $* connected to the daemon despite bad arguments"
	fi
	grep -q -- "$want" "$T/err" || fail "$row: memgrantctl $*: stderr does not say '$want': '$(cat "$T/err")'"
	echo "ok $row: exit 1: $(cat "$T/err")"
}
# xctl: a row memgrantctl does not pass yet (docs/bad-inputs.md "Known gaps");
# the exit code is still checked; the rest is reported, not failed, until fixed
xctl() {
	row=$1 want=$2
	shift 2
	ROWS=$((ROWS + 1))
	: > "$T/trap.log"
	rc=0
	$TRAP "$@" > "$T/out" 2> "$T/err" || rc=$?
	[ "$rc" -ne 0 ] || fail "$row: memgrantctl $* succeeded"
	if [ "$rc" -eq 1 ] && [ ! -s "$T/trap.log" ] && grep -q -- "$want" "$T/err"; then
		echo "XPASS $row: fixed; make it a ctl row and update docs/bad-inputs.md"
	else
		echo "XFAIL $row: exit $rc, connected: $(wc -l < "$T/trap.log"), stderr: '$(cat "$T/err")'"
		XFAILS=$((XFAILS + 1))
	fi
}
ctl ctl-unknown-command "unknown command 'bogus'" bogus
ctl ctl-unknown-global "unknown option '--bogus'" --bogus status
ctl ctl-global-missing-arg "option '--socket' needs an argument" --socket
ctl ctl-grant-no-size "grant: say how much: SIZE, RANGE or --blocks LIST" grant
ctl ctl-grant-2X "grant SIZE: invalid size '2X'" grant 2X
ctl ctl-grant-fraction "grant SIZE: invalid size '1.5B'" grant 1.5B
ctl ctl-grant-range-malformed "grant RANGE: '0x80000000-zz' is not an address range" grant 0x80000000-zz
ctl ctl-grant-overflow "grant SIZE: size '99999999999999G' is too large" grant 99999999999999G
ctl ctl-grant-zone "--zone: 'bogus' is not one of auto, movable, normal" grant 1G --zone bogus
ctl ctl-grant-memmap "--memmap: 'bogus' is not one of auto, on, off" grant 1G --memmap bogus
ctl ctl-grant-two-sizes "unexpected argument '2G'" grant 1G 2G
ctl ctl-grant-size-and-blocks "give exactly one of SIZE, RANGE, --blocks" grant 1G --blocks 20
ctl ctl-grant-names-grant "--grant: only a revocation names a grant" grant --grant g-base
ctl ctl-grant-blocks "--blocks: malformed block list '1,,2'" grant --blocks 1,,2
ctl ctl-grant-blocks-reversed "--blocks: range '20-17' ends before it starts" grant --blocks 20-17
ctl ctl-revoke-nothing "revoke: say how much: SIZE, RANGE, --grant ID or --blocks LIST" revoke
ctl ctl-revoke-two-targets "give exactly one of SIZE, RANGE, --blocks, --grant" revoke 1G --grant g-base
ctl ctl-revoke-two-sizes "unexpected argument '2G'" revoke 1G 2G
ctl ctl-revoke-zone "revoke: --memmap and --zone belong to grants" revoke 1G --zone movable
ctl ctl-revoke-2X "revoke SIZE: invalid size '2X'" revoke 2X
ctl ctl-status-extra "status: unexpected argument 'extra'" status extra
ctl ctl-grant-negative "negative numbers are not allowed" grant -1G
ctl ctl-grant-missing-arg "option '--id' needs an argument" grant 1G --id
ctl ctl-grant-unknown-option "unknown option '--bogus'" grant 1G --bogus
ctl ctl-grants-unknown-option "unknown option '--bogus'" grants --bogus
ctl ctl-grants-extra "unexpected argument 'extra'" grants local-1 extra
ctl ctl-grants-bad-id "grants: 'no id!' is not an id" grants 'no id!'
ctl ctl-events-extra "unexpected argument 'extra'" events extra
kill "$TRAP_PID"
wait "$TRAP_PID" 2>/dev/null
TRAP_PID=

# ---------------------------------------------------------------- still the same, still alive
snapshot "$T/after"
same_memory "$T/before" "$T/after" all-rows
cmp -s "$T/after-plan/journal.json" "$T/after/journal.json" || fail "ctl rows changed the journal"
alive final
# and still serving: a good grant after all that goes through
api final-grant POST /v1/grants '{"type":"grant","id":"g-after","size":"128M"}' 202 None ""
wait_state g-after applied
stop_daemon
echo "$ROWS bad inputs checked, $XFAILS known gaps (XFAIL)"
