#!/bin/sh
# The idle agent's footprint against issue 22's targets: memgrantd on the sim
# with the local API only, and with HTTPS to a control plane that accepts
# connections and never answers (a plain listening socket: the TLS handshake
# never completes).  Prints RSS, Pss_Anon, threads, mapped libraries and
# context switches per minute of each, the HTTPS one's connection attempts
# and CA bundle reads in a second (traced) window (the bundle is parsed at
# the first connection only: none in that window), and memgrantctl status's
# library count and time.  Asserts nothing; bench/run.sh calls it as its
# section 9 and its figures go to $FIGS when set.
#
#   BUILD           build folder (default build)
#   IDLE_SECS       each window, seconds (default 60)
#   IDLE_CTL_RUNS   memgrantctl status runs timed (default 20)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
CTL=$BUILD/memgrantctl
D=$BUILD/memgrantd
SECS=${IDLE_SECS:-60}
RUNS=${IDLE_CTL_RUNS:-20}
T=$(mktemp -d "${TMPDIR:-/tmp}/memgrant-idle.XXXXXX")
PIDS=
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $PIDS; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

# fig KEY VALUE UNIT [TARGET]: a line of text, and of JSON into $FIGS when set
fig() {
	if [ -n "${4:-}" ]; then
		ok=$(awk -v a="$2" -v b="$4" 'BEGIN { print (a <= b) ? "met" : "MISSED" }')
		printf '  %-40s %10s %-10s target <= %-8s %s\n' "$1" "$2" "$3" "$4" "$ok"
	else
		printf '  %-40s %10s %s\n' "$1" "$2" "$3"
	fi
	[ -z "${FIGS:-}" ] || printf '{"key":"%s","value":%s,"unit":"%s"%s}\n' "$1" "$2" "$3" \
		"$([ -n "${4:-}" ] && printf ',"reference":%s,"reference_is":"target","ratio":%s' "$4" \
			"$(awk -v a="$2" -v b="$4" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "null" }')")" >>"$FIGS"
}
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
pss_anon_kb() { awk '/^Pss_Anon/ { print $2 }' "/proc/$1/smaps_rollup"; }
threads() { ls "/proc/$1/task" | wc -l; }
libs() { awk '$6 ~ /\.so/ { print $6 }' "/proc/$1/maps" | sort -u | wc -l; }
ctxsw() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'; }
# a thread that went to sleep and was woken (the preemptions of a loaded machine left out)
vol() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s + 0 }'; }

# start NAME [extra yaml lines]: memgrantd on its own sim, sets DPID once ready
start() {
	name=$1
	shift
	mkdir -p "$T/$name.d"
	{
		cat <<YAML
agent: {id: idle-$name, state_dir: $T/$name.state, api_socket: $T/$name.sock, log_level: warning, user: $(id -un), api_group: $(id -gn)}
backend:
  type: sim
  sim: {state: $T/$name.d/$name.sim, online: 2G, standby: 2G, block_size: 128M}
policy: {zone: movable, memmap_on_memory: always, reserve: 0}
YAML
		for l in "$@"; do echo "$l"; done
	} >"$T/$name.yaml"
	"$D" -c "$T/$name.yaml" --foreground >"$T/$name.log" 2>&1 &
	DPID=$!
	PIDS="$PIDS $DPID"
	i=0
	until "$CTL" --socket "$T/$name.sock" status >/dev/null 2>&1; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$DPID" 2>/dev/null; then
			echo "bench/idle: memgrantd $name did not come up:" >&2
			tail -5 "$T/$name.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# the silent control plane: accepts, reads nothing, answers nothing; counts
# the connections it accepted (each one an attempt of the agent's, one
# backoff step ending) into a file, so that the attempts are counted in the
# same untraced window as the wake-ups
python3 -c '
import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    open(sys.argv[2] + ".tmp", "w").write(str(len(held)))
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
' "$T/port" "$T/accepted" &
PIDS="$PIDS $!"
i=0
while [ ! -s "$T/port" ]; do i=$((i + 1)); [ $i -lt 100 ] || exit 1; sleep 0.1; done
PORT=$(cat "$T/port")

echo "idle agent (sim, 16 blocks of 128M), windows of $SECS s"
start api
P_API=$DPID
start https "providers:" "  https: {url: 'https://127.0.0.1:$PORT/memgrant', wait: 30s}"
P_HTTPS=$DPID
sleep 3 # start-up work over
accepted() { cat "$T/accepted" 2>/dev/null || echo 0; }
# until the server accepts the next attempt (at most 20 s): the HTTPS
# window opens and closes just after one, so that a backoff step cut by an
# edge does not count its wake-ups without its attempt (or the reverse)
next_attempt() {
	_a=$(accepted) _i=0
	while [ "$(accepted)" = "$_a" ] && [ $_i -lt 400 ]; do sleep 0.05; _i=$((_i + 1)); done
}
c_api=$(ctxsw "$P_API")
next_attempt
c_https=$(ctxsw "$P_HTTPS") v_https=$(vol "$P_HTTPS") a_https=$(accepted) t_https=$(date +%s.%N)
sleep "$SECS"
w_api=$(($(ctxsw "$P_API") - c_api))
next_attempt
w_https=$(($(ctxsw "$P_HTTPS") - c_https))
wv_https=$(($(vol "$P_HTTPS") - v_https))
att_untraced=$(($(accepted) - a_https))
s_https=$(awk -v a="$t_https" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
per_min() { awk -v n="$1" -v s="${2:-$SECS}" 'BEGIN { printf "%.1f", n * 60 / s }'; }

fig idle_api_rss_kb "$(rss_kb "$P_API")" kB 6144
fig idle_api_pss_anon_kb "$(pss_anon_kb "$P_API")" kB 1024
fig idle_api_threads "$(threads "$P_API")" "" 4
fig idle_api_libraries "$(libs "$P_API")" ""
fig idle_api_wakeups_per_min "$(per_min "$w_api")" "1/min" 0
fig idle_https_silent_rss_kb "$(rss_kb "$P_HTTPS")" kB
fig idle_https_silent_pss_anon_kb "$(pss_anon_kb "$P_HTTPS")" kB
fig idle_https_silent_threads "$(threads "$P_HTTPS")" ""
fig idle_https_silent_libraries "$(libs "$P_HTTPS")" ""
fig idle_https_silent_wakeups_per_min "$(per_min "$w_https" "$s_https")" "1/min"

# second window, traced (strace's attach wakes the threads itself): the
# connection attempts (each one backoff step ending) and the CA reads
if command -v strace >/dev/null 2>&1; then
	strace -f -e trace=connect,openat -o "$T/https.trace" -p "$P_HTTPS" 2>/dev/null &
	st=$!
	PIDS="$PIDS $st"
	sleep "$SECS"
	kill -INT "$st" 2>/dev/null || true
	wait "$st" 2>/dev/null || true
	att=$(grep -c "connect(.*sin_port=htons($PORT)" "$T/https.trace" || true)
	ca=$(grep -E 'openat\(.*(ca-certificates|/certs|\.pem|\.crt)' "$T/https.trace" | grep -vc ENOENT || true)
	fig idle_https_silent_attempts "$att" "in ${SECS}s"
	fig idle_https_silent_ca_reads "$ca" "in ${SECS}s" 0
else
	echo "  (strace not installed: CA reads not measured)"
fi
# each attempt is one backoff step of one thread (poll, send): its
# voluntary sleeps are its wake-ups (the connect's result, curl's timers,
# the backoff's end); wake-ups and attempts both of the first window,
# untraced (the attempts of another window are another count of steps)
fig idle_https_silent_attempts_untraced "$att_untraced" "in $(printf %.0f "$s_https")s"
[ "$att_untraced" -eq 0 ] || fig idle_https_silent_wakeups_per_attempt \
	"$(awk -v w="$w_https" -v a="$att_untraced" 'BEGIN { printf "%.1f", w / a }')" ""
[ "$att_untraced" -eq 0 ] || fig idle_https_silent_wakeups_per_backoff_step \
	"$(awk -v w="$wv_https" -v a="$att_untraced" 'BEGIN { printf "%.1f", w / a }')" "" 2

# memgrantctl status: the libraries it maps (at start and with dlopen()) and
# its time, against lsmem's
loaded() { LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -o 'file=[^ ]*' | sort -u | wc -l; }
fig ctl_status_libraries "$(loaded "$CTL" --socket "$T/api.sock" status)" ""
t0=$(date +%s%N)
i=0
while [ $i -lt "$RUNS" ]; do "$CTL" --socket "$T/api.sock" status >/dev/null; i=$((i + 1)); done
fig ctl_status_ms "$(awk -v a="$t0" -v b="$(date +%s%N)" -v n="$RUNS" 'BEGIN { printf "%.1f", (b - a) / n / 1e6 }')" ms
ld=$(LD_DEBUG=statistics "$CTL" --socket "$T/api.sock" status 2>&1 >/dev/null |
	awk '/total startup time in dynamic loader/ { print $(NF-1) }' | head -1)
[ -z "$ld" ] || fig ctl_status_loader_cycles "$ld" ""
if command -v lsmem >/dev/null 2>&1; then
	fig lsmem_libraries "$(loaded lsmem)" ""
fi
