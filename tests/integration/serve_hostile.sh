#!/bin/sh
# A hostile guest against memgrant-host serve, with real processes: libvirt's
# test:///FILE.xml driver runs two domains with s390 standby memory (always
# plugged: no device calls), serve reaches their channels through the UNIX
# sockets their XML names (channel: socket), and two fake guests
# (serve_guest.py) listen there.  "good" asks for 256M like a real agent;
# "flood" sends thousands of 1 TiB requests, garbage, 5 MiB lines and reports
# of operations nobody sent, lies about what it applied and never reports a
# revocation.  First a run with "good" alone, then both:
#   - good gets the same grant, in the same sequence of events, within a
#     tick or so of its time alone (counted by the service: took_ms / interval)
#   - flood gets no more than its policy's max, its requests are capped and
#     its reads paused (rate limited), its garbage counted and logged
#   - serve stays up, its RSS bounded.
. "$(dirname "$0")/lib.sh"

HOSTBIN=$BUILD/memgrant-host
[ -x "$HOSTBIN" ] || skip "memgrant-host not built (configure found no libvirt)"
command -v python3 >/dev/null || skip "python3 is needed for the fake guests"
GUEST="python3 $(dirname "$0")/serve_guest.py"
M=1048576
SERVE_PID= GOOD_PID= FLOOD_PID=
trap 'for p in $SERVE_PID $GOOD_PID $FLOOD_PID; do kill -KILL $p 2>/dev/null; done; cleanup' EXIT INT TERM

domain() { # NAME
	cat <<XML
  <domain type='test'>
    <name>$1</name>
    <memory unit='MiB'>1024</memory>
    <os><type arch='s390x'>hvm</type></os>
    <devices>
      <channel type='unix'>
        <source mode='bind' path='$T/$1.sock'/>
        <target type='virtio' name='org.memgrant.0'/>
      </channel>
    </devices>
  </domain>
XML
}
{
	echo "<node>"
	domain good
	domain flood
	# the channel, but no socket path: channel: socket says so and leaves it alone
	cat <<XML
  <domain type='test'>
    <name>nopath</name>
    <memory unit='MiB'>1024</memory>
    <os><type arch='s390x'>hvm</type></os>
    <devices>
      <channel type='pty'>
        <target type='virtio' name='org.memgrant.0'/>
      </channel>
    </devices>
  </domain>
XML
	echo "</node>"
} > "$T/node.xml"

# a channel: word that is not one is refused, naming the file, line, column
# and key, the allowed words and the installed document with every key
printf 'connect: test:///default\nchannel: pipe\n' > "$T/bad.yaml"
$HOSTBIN serve --config "$T/bad.yaml" >"$T/bad.out" 2>&1 && fail "channel: pipe was accepted"
grep -qF "$T/bad.yaml:2:10: channel: 'pipe' is not one of libvirt, socket (/usr/share/doc/memgrant-host/autoscaling.md)" "$T/bad.out" ||
	fail "channel: pipe: $(cat "$T/bad.out")"

# status_get RUN DOMAIN EXPR: a field of DOMAIN in the service's status file
status_get() {
	python3 -c 'import json,sys
s=json.load(open(sys.argv[1]))
d=[d for d in s["domains"] if d["domain"]==sys.argv[2]]
print(eval(sys.argv[3], {"d": d[0]}) if d else "none")' "$T/$1/state/serve-status.json" "$2" "$3" 2>/dev/null
}

# lines_read RUN DOMAIN: the lines serve read from DOMAIN (a counter of the
# metrics file; the status file leaves routine traffic out)
lines_read() {
	sed -n "s/^memgrant_host_guest_lines_total{domain=\"$2\"} //p" "$T/$1/metrics.prom" 2>/dev/null
}

# events RUN DOMAIN: the domain's events, as "event bytes" lines, without times
events() {
	python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get("domain")==sys.argv[2] and e["event"] not in ("channel.up","channel.down"):
        print(e["event"], e.get("bytes", e.get("granted_bytes")))' "$T/$1/events.jsonl" "$2"
}

# wait_for SECONDS CMD...: poll CMD until it succeeds (the bound only ends a hung run)
wait_for() {
	end=$(($(date +%s) + $1))
	shift
	while [ "$(date +%s)" -le $end ]; do
		within_budget
		"$@" && return 0
		[ -z "$SERVE_PID" ] || kill -0 "$SERVE_PID" 2>/dev/null || fail "serve died: $(tail -n 20 "$T/$RUN/serve.log")"
		sleep 0.2
	done
	return 1
}

# within_budget: the flooder's lines read so far are within its budget (200 a
# second since serve started, burst 800; one read of 16 KiB, at most 546 of
# its shortest lines, may go past it, then it waits until its debt is paid).
# Checked at every poll, so a burst read too fast is seen while it happens.
within_budget() {
	[ "$RUN" = hostile ] || return 0
	lines=$(lines_read hostile flood)
	case $lines in '') return 0 ;; esac
	e=$(($(date +%s) - START + 1))
	[ "$lines" -le $((800 + 546 + 200 * e)) ] || fail "the flooder's $lines lines read in ${e}s: over its budget"
}

good_done() { [ "$(status_get "$RUN" good 'd["counts"]["grows"]')" = 1 ]; }
# the flooder at (or past) its cap, its flood read
flood_capped() { [ "$(status_get "$RUN" flood 'd["granted_bytes"] >= (512 << 20) and d["counts"]["requests"] > 1000')" = True ]; }

start_run() { # RUN [flood]
	RUN=$1
	mkdir -p "$T/$RUN"
	rm -f "$T"/*.sock
	cat > "$T/$RUN/serve.yaml" <<YAML
connect: test://$T/node.xml
channel: socket
state_dir: $T/$RUN/state
events: $T/$RUN/events.jsonl
metrics_file: $T/$RUN/metrics.prom
interval: 200ms
host: {budget: 8G}
defaults: {hypervisor: standby, standby: 2G, max: 1G, step: 512M, grow_cooldown: 1s, query_interval: 1s,
  online_deadline: 5s, unplug_deadline: 5s, revoke_backoff: 2s, revoke_backoff_max: 4s}
domains:
  flood: {max: 512M, step: 256M, lines_per_s: 200}
YAML
	$GUEST --socket "$T/good.sock" --mode normal --result "$T/$RUN/good.json" 2>"$T/$RUN/good.err" &
	GOOD_PID=$!
	if [ "${2:-}" = flood ]; then
		$GUEST --socket "$T/flood.sock" --mode flood --rounds 4 --result "$T/$RUN/flood.json" 2>"$T/$RUN/flood.err" &
		FLOOD_PID=$!
	fi
	wait_for 10 test -S "$T/good.sock" || fail "the fake guest did not listen"
	[ -z "$FLOOD_PID" ] || wait_for 10 test -S "$T/flood.sock" || fail "the flooder did not listen"
	START=$(date +%s)
	$HOSTBIN serve --config "$T/$RUN/serve.yaml" >"$T/$RUN/serve.log" 2>&1 &
	SERVE_PID=$!
}

stop_run() {
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID"
	rc=$?
	[ $rc -eq 0 ] || fail "serve exited $rc: $(tail -n 20 "$T/$RUN/serve.log")"
	SERVE_PID=
	for p in $GOOD_PID $FLOOD_PID; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	GOOD_PID= FLOOD_PID=
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVE_PID/status"; }

# ---- alone ----
start_run alone
wait_for 60 good_done || fail "alone: good got no grant: $(tail -n 20 "$T/alone/serve.log")"
A_TOOK=$(status_get alone good 'd["last_grow_ms"]')
A_RSS=$(rss_kb)
# the status file is written when it changes, not at every tick (200 ms):
# over 3 s each new file (a new inode: written whole, renamed) differs from
# the one before it
set -- $(python3 -c '
import os, sys, time
path, last, writes, same = sys.argv[1], None, 0, 0
for _ in range(60):
    with open(path, "rb") as f:
        ino, text = os.fstat(f.fileno()).st_ino, f.read()
    if last is None or ino != last[0]:
        writes += 1
        same += last is not None and text == last[1]
        last = (ino, text)
    time.sleep(0.05)
print(writes, same)' "$T/alone/state/serve-status.json")
expect_eq "alone: status files written with nothing changed (of $1 seen)" "$2" 0
A_GRANTED=$(status_get alone good 'd["granted_bytes"]')
stop_run
events alone good > "$T/alone/good.events"
expect_eq "alone: good granted" "$A_GRANTED" $((256 * M))
expect_eq "alone: good's grants" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grants"])' "$T/alone/good.json")" \
	"[$((256 * M))]"
grep -q "^grant.applied $((256 * M))$" "$T/alone/good.events" || fail "alone: no grant.applied: $(cat "$T/alone/good.events")"
grep -qF "domain=nopath channel: socket needs the channel org.memgrant.0 as <channel type='unix'> with <source mode='bind' path='...'/>" \
	"$T/alone/serve.log" || fail "no clear error for the domain without a socket path: $(cat "$T/alone/serve.log")"

# ---- with the flooder ----
start_run hostile flood
wait_for 60 good_done || fail "hostile: good got no grant: $(tail -n 20 "$T/hostile/serve.log")"
H_TOOK=$(status_get hostile good 'd["last_grow_ms"]')
wait_for 90 flood_capped || fail "hostile: the flooder never reached its cap (the test cannot judge it): $(cat "$T/hostile/state/serve-status.json")"
# more of its requests after it reached the cap; nothing more given
R0=$(status_get hostile flood 'd["counts"]["requests"]')
more_requests() { [ "$(status_get hostile flood 'd["counts"]["requests"]')" -gt $((R0 + 20)) ]; }
wait_for 60 more_requests ||
	fail "hostile: the flooder's requests stopped being read: $(kill -USR1 $FLOOD_PID; sleep 1; cat "$T/hostile/state/serve-status.json"; cat "$T/hostile/flood.json" "$T/hostile/flood.err"; tail -n 30 "$T/hostile/serve.log")"
H_RSS=$(rss_kb)
ELAPSED=$(($(date +%s) - START + 1))
FLOOD_GRANTED=$(status_get hostile flood 'd["granted_bytes"]')
FLOOD_LINES=$(lines_read hostile flood)
FLOOD_BAD=$(status_get hostile flood 'd["counts"]["lines_bad"]')
FLOOD_PAUSED=$(status_get hostile flood 'd["counts"]["reads_paused"]')
FLOOD_CAPPED=$(status_get hostile flood 'd["counts"]["requests_capped"]')
GOOD_GRANTED=$(status_get hostile good 'd["granted_bytes"]')
GOOD_BAD=$(status_get hostile good 'd["counts"]["lines_bad"]')
stop_run
events hostile good > "$T/hostile/good.events"

# the normal guest: the same result, the same events, within its usual ticks
expect_eq "hostile: good granted" "$GOOD_GRANTED" "$A_GRANTED"
expect_eq "hostile: good's bad lines" "$GOOD_BAD" 0
expect_eq "hostile: good's grants" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grants"])' "$T/hostile/good.json")" \
	"[$((256 * M))]"
cmp -s "$T/alone/good.events" "$T/hostile/good.events" ||
	fail "good's events differ with the flooder: alone: $(cat "$T/alone/good.events") / hostile: $(cat "$T/hostile/good.events")"
A_TICKS=$((A_TOOK / 200)) H_TICKS=$((H_TOOK / 200))
[ "$H_TICKS" -le $((A_TICKS + 5)) ] ||
	fail "good waited $H_TICKS ticks with the flooder, $A_TICKS alone"

# the flooder: its cap, no more; rate limited; its garbage counted and logged
[ "$FLOOD_GRANTED" -le $((512 * M)) ] || fail "the flooder got $FLOOD_GRANTED bytes, its max is 512M"
grep '"domain":"flood"' "$T/hostile/events.jsonl" | grep '"event":"grant.applied"' |
	python3 -c 'import json,sys
for l in sys.stdin:
    e=json.loads(l)
    assert e["bytes"] <= 512 << 20, l  # its max, whatever it asked for or claimed to have applied
    assert e["granted_bytes"] <= 512 << 20, l' || fail "a grant to the flooder above its max"
[ "$FLOOD_CAPPED" -gt 1000 ] || fail "the flooder's 1 TiB requests were not capped ($FLOOD_CAPPED)"
[ "$FLOOD_BAD" -gt 100 ] || fail "the flooder's garbage was not counted ($FLOOD_BAD)"
[ "$FLOOD_PAUSED" -gt 10 ] || fail "the flooder's channel was not paused for its line budget ($FLOOD_PAUSED)"
# its lines were read at its budget (within_budget, at every poll), no faster
[ "$FLOOD_LINES" -le $((800 + 546 + 200 * ELAPSED)) ] || fail "the flooder's $FLOOD_LINES lines in ${ELAPSED}s: over its budget"
SENT=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["requests"]+d["garbage"]+d["oversized"])' "$T/hostile/flood.json")
grep -q "domain=flood unreadable line from the guest" "$T/hostile/serve.log" || fail "no log of the flooder's garbage"
grep -q "domain=good unreadable" "$T/hostile/serve.log" && fail "good's lines were called unreadable"

# serve stayed up (stop_run checked its exit) and its memory is bounded
[ "$H_RSS" -le $((A_RSS + 32768)) ] || fail "serve's RSS grew from ${A_RSS} kB to ${H_RSS} kB under the flood"
[ "$H_RSS" -le 131072 ] || fail "serve's RSS is ${H_RSS} kB under the flood"
echo "ok: good took ${A_TOOK} ms alone, ${H_TOOK} ms with the flooder; flooder granted $((FLOOD_GRANTED / M))M of max 512M," \
	"read $FLOOD_LINES lines (it sent $SENT flood lines), $FLOOD_BAD bad, $FLOOD_CAPPED capped, $FLOOD_PAUSED pauses; RSS ${A_RSS}/${H_RSS} kB"
