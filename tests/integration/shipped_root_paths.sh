#!/bin/sh
# Root reaches the sim and the state folder only through folders the agent's
# user cannot change, as it reaches credentials: on the package's layout
# (as_shipped), memgrant plants a link in its own folder /run/memgrant that
# leads to a folder of root's, and memgrantd (root) is configured with a
# path through that link:
#  1. agent.state_dir through it, to a root-only folder with a root-only
#     file: memgrantd's start would give both to memgrant (chown);
#  2. backend.sim.state through it, to the sim root made in /run/memgrant-sim:
#     memgrant could repoint the link before any later start and have root
#     lock, render and write a sim in a folder of its choosing;
#  3. memgrant-helper itself started (as root) with that sim path.
# Each start is refused, the log names the folder, its owner and its mode,
# and the victims keep their owners.  Before the walk, 1 chowned the victims
# and 2 and 3 started.
. "$(dirname "$0")/lib.sh"
as_shipped
shipped_config
C=$T/etc/memgrant.yaml
V=$T/victims
AGENT_UID=$(id -u memgrant)
mkdir -p "$V/vstate"
chmod 0755 "$V"
chmod 0700 "$V/vstate"
printf 'root secret 0600\n' > "$V/vstate/secret"
chmod 0600 "$V/vstate/secret"

M() { as_user memgrant "$@"; } # the agent's user
start() { # memgrantd with ARGS; 0 when it served its API, else it exited
	# shellcheck disable=SC2086
	"$MEMGRANTD" -c "$C" $PKG_PATHS -o backend.type=sim -o backend.sim.standby=2G "$@" --foreground \
		>> "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	i=0
	until "$MEMGRANTCTL" status > /dev/null 2>&1; do
		i=$((i + 1))
		if ! kill -0 $DAEMON_PID 2>/dev/null || [ $i -gt 100 ]; then
			wait $DAEMON_PID 2>/dev/null
			DAEMON_PID=
			return 1
		fi
		sleep 0.1
	done
}
stop() {
	[ -n "$DAEMON_PID" ] || return 0
	kill -TERM $DAEMON_PID; wait $DAEMON_PID; DAEMON_PID=
}
errs=

# the shipped start first: it makes /run/memgrant (memgrant's) and the sim
start || fail "memgrantd does not start as shipped: $(tail -5 "$T/daemon.log")"
stop
expect_eq "/run/memgrant" "$(stat -c '%U %a' /run/memgrant)" "memgrant 755"
[ -f /run/memgrant-sim/sim.json ] || fail "the shipped start made no sim in /run/memgrant-sim"

# --- 1: the state folder -----------------------------------------------------
M ln -s "$V" /run/memgrant/st || fail "memgrant cannot make a link in its folder"
: > "$T/daemon.log"
if start -o agent.state_dir=/run/memgrant/st/vstate; then
	stop
	errs="$errs
memgrantd started with its state folder through memgrant's link"
fi
expect_eq "the victim folder" "$(stat -c '%U:%G %a' "$V/vstate")" "root:root 700"
expect_eq "the victim file" "$(stat -c '%U:%G %a' "$V/vstate/secret")" "root:root 600"
grep -q "/run/memgrant/st/vstate: not giving it to uid $AGENT_UID: st, on the way to /run/memgrant/st/vstate, lies in a folder of uid $AGENT_UID with mode 0755" \
	"$T/daemon.log" || errs="$errs
the state folder's refusal does not name the folder, its owner and mode: $(tail -3 "$T/daemon.log")"

# --- 2: the sim ------------------------------------------------------------------
M ln -s /run/memgrant-sim /run/memgrant/simdir
: > "$T/daemon.log"
if start -o backend.sim.state=/run/memgrant/simdir/sim.json; then
	stop
	errs="$errs
memgrantd started with its sim through memgrant's link"
fi
grep -q "cannot use the sim /run/memgrant/simdir/sim.json: simdir, on the way to /run/memgrant/simdir/sim.json, lies in a folder of uid $AGENT_UID with mode 0755" \
	"$T/daemon.log" || errs="$errs
the sim's refusal does not name the folder, its owner and mode: $(tail -3 "$T/daemon.log")"

# --- 3: the helper on its own ------------------------------------------------
# (fd 3, its channel to memgrantd, is a file here: the hello fails, the
# refusal is logged first)
if "$BUILD/memgrant-helper" --sim /run/memgrant/simdir/sim.json --seccomp off 3> "$T/hello" 2> "$T/helper.err"; then
	errs="$errs
memgrant-helper accepted the sim through memgrant's link"
fi
grep -q "cannot open the sim /run/memgrant/simdir/sim.json: simdir, on the way to" "$T/helper.err" || errs="$errs
memgrant-helper does not say why it refuses the sim: $(head -3 "$T/helper.err")"

# the shipped paths still work after all this
: > "$T/daemon.log"
start || errs="$errs
memgrantd no longer starts as shipped: $(tail -3 "$T/daemon.log")"
stop
[ -z "$errs" ] || fail "$errs"
echo "ok: the state folder and the sim through a link of memgrant's refused, by name; victims root's"
