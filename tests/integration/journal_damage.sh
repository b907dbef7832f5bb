#!/bin/sh
# A damaged journal next to the kernel's memory (issue 25, point 3).  A real
# run writes journal.log (grants by size with memmap_on_memory off, right
# above boot memory, a grant by blocks, a revocation, one more grant);
# then, with the kernel as that run left it, memgrantd starts on:
#   - journal.log cut at EVERY record boundary (and kept whole),
#   - journal.log deleted, the state folder deleted,
#   - a record of a future format (unknown flags, unknown type) at the tail
#     and in the middle, a newer file format, a corrupt middle record.
# After each start, once every operation is final:
#   - nothing applied twice and nothing taken: the configured standby blocks
#     are exactly those the run left (a resumed grant or revocation whose
#     records were cut would change them);
#   - every one is owned by a grant or named in the one loud line
#     ("foreign standby memory: N blocks (LIST)"), never both, and the line
#     says what to do (memgrantctl adopt LIST, restore journal.log);
#   - while some are foreign, a grant sent again (same id, as a control plane
#     does after a lost journal) is refused naming them, not applied on top;
#   - a refusal to start says what to do and leaves journal.log as it was.
# Prints the figures (boundaries, cases, failures); fails if any case does.
. "$(dirname "$0")/lib.sh"
BOOT=16
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
start_daemon
$CTL grant 384M --memmap off --id g1 --wait > /dev/null || fail "grant g1"
$CTL grant --blocks 24-25 --id g2 --wait > /dev/null || fail "grant g2"
$CTL grant 256M --memmap off --id g3 --wait > /dev/null || fail "grant g3"
$CTL revoke 256M --id rv1 --wait > /dev/null || fail "revoke rv1"
$CTL grant 128M --id g4 --wait > /dev/null || fail "grant g4"
stop_daemon
cp "$T/state/journal.log" "$T/full.log" || fail "no journal.log after the run"
# where the log had ended (memgrantd's end mark, journal.log.end): a cut
# journal.log is found shorter than it
CASES=0
FAILED=0
FAILS=
case_fail() { # case why
	FAILED=$((FAILED + 1))
	FAILS="$FAILS
  $1: $2"
}
if ! cp "$T/state/journal.log.end" "$T/full.end" 2>/dev/null; then
	case_fail "the run" "no journal.log.end (end mark) after it"
	: > "$T/full.end"
fi
mkdir "$T/kernel"
cp -a "$SIM" "$SIM.d" "$SIM.tree" "$SIM.lock" "$T/kernel/" || fail "saving the sim"
$MEMGRANTCTL --sim "$SIM" lsmem -a -o BLOCK,CONFIGURED -J > "$T/final.json" || fail "lsmem"

# the kernel as the run left it, and a state folder made by SETUP
restore_kernel() {
	rm -rf "$SIM" "$SIM.d" "$SIM.tree" "$SIM.lock"
	cp -a "$T/kernel/sim.json" "$T/kernel/sim.json.d" "$T/kernel/sim.json.tree" "$T/kernel/sim.json.lock" "$T/"
}

# settle: every operation final (bounded poll; no python here: it is slow
# to start on a loaded machine, and this runs once per case)
settle() {
	i=0
	while $CTL grants --json | grep -Eq '"state": "(accepted|in_progress)"'; do
		i=$((i + 1))
		[ $i -gt 300 ] && return 1
		sleep 0.1
	done
	return 0
}

# check_started CASE: memgrantd runs on the damaged state; the checks above
check_started() {
	c=$1
	: > "$T/daemon.log"
	"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground >> "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	i=0
	while ! $CTL status > /dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			case_fail "$c" "memgrantd did not start: $(tail -n 3 "$T/daemon.log" | tr '\n' ' ')"
			kill -KILL "$DAEMON_PID" 2>/dev/null
			wait "$DAEMON_PID" 2>/dev/null
			DAEMON_PID=
			return
		fi
		sleep 0.1
	done
	settle || case_fail "$c" "operations did not settle"
	$CTL lsmem -a -o BLOCK,STATE,CONFIGURED,OWNER -J > "$T/after.json"
	# the revocation between grants of the same blocks (rv1, then g4 takes
	# one of its blocks back): what it reads, and the same request sent
	# again must take nothing (answered from its record, or refused)
	$CTL grants rv1 --json > "$T/rv1.json" 2>&1
	$CTL revoke 256M --id rv1 --json > "$T/rv1.resend" 2>&1
	settle || case_fail "$c" "operations did not settle after rv1 was sent again"
	$CTL lsmem -a -o BLOCK,STATE,CONFIGURED,OWNER -J > "$T/after_rv1.json"
	# a grant sent again, as a control plane does after a lost journal
	$CTL grant 384M --id g1 --json > "$T/resend" 2>&1
	res=$?
	# judged all at once at the end (python is slow to start here)
	mkdir -p "$T/cases/$CASES"
	printf '%s\n' "$c" > "$T/cases/$CASES/name"
	echo "$res" > "$T/cases/$CASES/res"
	mv "$T/after.json" "$T/resend" "$T/rv1.json" "$T/rv1.resend" "$T/after_rv1.json" "$T/cases/$CASES/"
	cp "$T/daemon.log" "$T/cases/$CASES/daemon.log"
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
}

# check_refused CASE WANT: memgrantd refuses to start, the line says WANT
# (what to do), and journal.log is unchanged
check_refused() {
	c=$1
	want=$2
	: > "$T/daemon.log"
	cp "$T/state/journal.log" "$T/before.log"
	timeout 30 "$MEMGRANTD" -c "$T/memgrant.yaml" --foreground >> "$T/daemon.log" 2>&1
	rc=$?
	if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
		case_fail "$c" "memgrantd started (rc $rc) on it: $(grep -i 'journal' "$T/daemon.log" | head -n 2 | tr '\n' ' ')"
	elif ! grep -q "$want" "$T/daemon.log"; then
		case_fail "$c" "the refusal does not say '$want': $(tail -n 2 "$T/daemon.log" | tr '\n' ' ')"
	fi
	cmp -s "$T/before.log" "$T/state/journal.log" || case_fail "$c" "journal.log was changed (cut?)"
}

fresh_state() { # with the journal cut to LEN bytes and the run's end mark (or none)
	rm -rf "$T/state"
	mkdir -m 0700 "$T/state"
	[ $# -eq 0 ] || head -c "$1" "$T/full.log" > "$T/state/journal.log"
	[ $# -eq 0 ] || [ ! -s "$T/full.end" ] || cp "$T/full.end" "$T/state/journal.log.end"
}

# the record boundaries of the run's journal (after the 8-byte magic)
python3 - "$T/full.log" > "$T/bounds" <<'PY' || fail "cannot read the journal's framing"
import struct, sys
d = open(sys.argv[1], "rb").read()
pos = 8
print(pos)
while pos < len(d):
    magic, n, typ, flags, crc = struct.unpack_from("<IIHHI", d, pos)
    assert magic == 0x4352474d, pos
    pos += 16 + n
    print(pos)
PY
NB=$(wc -l < "$T/bounds")
for b in $(cat "$T/bounds"); do
	CASES=$((CASES + 1))
	restore_kernel
	fresh_state "$b"
	check_started "cut at byte $b"
done

CASES=$((CASES + 1))
restore_kernel
fresh_state "$(wc -c < "$T/full.log")"
rm "$T/state/journal.log"
check_started "journal.log deleted"

CASES=$((CASES + 1))
restore_kernel
rm -rf "$T/state"
check_started "state folder deleted"

# the way out: adopt what was named; then grants run again
restore_kernel
rm -rf "$T/state"
start_daemon
list=$(sed -n 's/.*foreign standby memory: [0-9]* blocks* (\([0-9,-]*\)).*/\1/p' "$T/daemon.log" | tail -n 1)
if [ -n "$list" ]; then
	$CTL adopt "$list" > "$T/adopt" 2>&1 || fail "adopt $list: $(cat "$T/adopt")"
	$CTL grant 128M --wait > "$T/g5" 2>&1 || fail "a grant after the foreign blocks were adopted: $(cat "$T/g5")"
fi
stop_daemon

# records of a future format, and other damage that must refuse to start
python3 - "$T/full.log" "$T" <<'PY' || fail "cannot build the damaged journals"
import struct, sys
def crc32c(data, crc=0):
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff
def rec(typ, flags, payload):
    h = struct.pack("<IIHH", 0x4352474d, len(payload), typ, flags)
    return h + struct.pack("<I", crc32c(h + payload)) + payload
d = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<I", d, 12)[0]
first = 8 + 16 + n          # end of the first record
out = sys.argv[2]
newflags = rec(2, 0x0002, b'{"future":true}')
newtype = rec(42, 0, b'{"future":true}')
open(out + "/tail_flags.log", "wb").write(d + newflags)
open(out + "/tail_type.log", "wb").write(d + newtype)
open(out + "/mid_flags.log", "wb").write(d[:first] + newflags + d[first:])
open(out + "/mid_type.log", "wb").write(d[:first] + newtype + d[first:])
open(out + "/magic.log", "wb").write(b"MGJLOG02" + d[8:])
bad = bytearray(d)
bad[first + 20] ^= 0x01     # a payload byte of the second record
open(out + "/mid_crc.log", "wb").write(bytes(bad))
PY
for k in tail_flags:upgrade tail_type:upgrade mid_flags:upgrade mid_type:upgrade magic:upgrade \
	mid_crc:"restore journal.log from a backup"; do
	name=${k%%:*}
	CASES=$((CASES + 1))
	restore_kernel
	fresh_state
	cp "$T/$name.log" "$T/state/journal.log"
	check_refused "$name" "${k#*:}"
done

# the started cases, judged: one line per failed case
python3 - "$T/final.json" "$T/cases" "$BOOT" > "$T/judged" <<'PY' || fail "cannot judge the cases"
import json, os, re, sys
final, cases, boot = sys.argv[1:]
boot = int(boot)
def blocks(path):
    return json.load(open(path))["memory"]
def ids(s):
    out = set()
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out |= set(range(int(a), int(b) + 1))
        elif part.strip():
            out.add(int(part))
    return out
want = {int(b["block"]) for b in blocks(final) if int(b["block"]) >= boot and b["configured"] == "yes"}
for n in sorted(os.listdir(cases), key=int):
    d = os.path.join(cases, n)
    name = open(d + "/name").read().strip()
    rows = {int(b["block"]): b for b in blocks(d + "/after.json")}
    have = {i for i, b in rows.items() if i >= boot and b["configured"] == "yes"}
    owned = {i for i in have if rows[i]["owner"] not in (None, "foreign")}
    lines = [l for l in open(d + "/daemon.log").read().splitlines() if "foreign standby memory:" in l]
    named = set()
    errs = []
    for l in lines:
        m = re.search(r"foreign standby memory: \d+ blocks? \(([0-9,\-]+)\)", l)
        if m:
            named |= ids(m.group(1))
        if "memgrantctl adopt" not in l or "restore" not in l:
            errs.append("the foreign line does not say what to do: " + l[:160])
    if have - want:
        errs.append("applied twice or anew: blocks %s onlined at restart" % sorted(have - want))
    if want - have:
        errs.append("taken at restart: blocks %s (a revocation run twice, or foreign memory taken)"
                    % sorted(want - have))
    if len(lines) > 1:
        errs.append("%d foreign lines, want one" % len(lines))
    unowned = have - owned
    if unowned - named:
        errs.append("blocks %s are owned by no grant and not named in a loud line" % sorted(unowned - named))
    if named & owned:
        errs.append("blocks %s named foreign but owned by a grant" % sorted(named & owned))
    if named - have:
        errs.append("blocks %s named foreign but not configured" % sorted(named - have))
    rv = " ".join(open(d + "/rv1.json").read().split())
    if '"state": "rejected"' in rv and "send it again" in rv:
        errs.append("the revocation rv1, answered applied before the cut, reads rejected, send it again: " + rv[-200:])
    rows2 = {int(b["block"]): b for b in blocks(d + "/after_rv1.json")}
    have2 = {i for i, b in rows2.items() if i >= boot and b["configured"] == "yes"}
    if "ENOENT" not in rv and have2 != have:
        errs.append("rv1 sent again changed blocks %s (over-revoked)" % sorted(have ^ have2))
    r = " ".join(open(d + "/resend").read().split())
    res = open(d + "/res").read().strip()
    if unowned and "already used" not in r:
        if res == "0" and '"rejected"' not in r:
            errs.append("a grant sent again was accepted on top of foreign blocks: " + r[:160])
        elif "memgrantctl adopt" not in r:
            errs.append("the refusal of the grant sent again does not say what to do: " + r[:160])
    if errs:
        print("%s: %s" % (name, "; ".join(errs)))
PY
while IFS= read -r line; do
	FAILED=$((FAILED + 1))
	FAILS="$FAILS
  $line"
done < "$T/judged"
echo "journal_damage: $NB record boundaries, $CASES cases, $FAILED failed$FAILS"
[ "$FAILED" -eq 0 ] || exit 1
echo ok
