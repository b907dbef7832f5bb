#!/bin/sh
# The sim in a shared sticky folder (as /tmp is): it works for its owner, as
# root and as an ordinary user; entries another user planted there (a link,
# a file or folder of theirs, a second name of someone's file) are refused,
# with a message naming the entry, its owner and a fix that touches nobody
# else's file, and nothing outside the sim changes.  `sim init` of a missing
# file never says that it "exists".  memgrantd keeps its stricter rule: its
# helper writes as root, so a shared folder is refused at its start.
set -u
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || skip "skipped: needs root (plays two users in one shared folder)"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_nobody true 2>/dev/null || skip "skipped: setpriv cannot drop privileges"

# a sticky shared folder of root's, like /tmp, that both users reach
SH=$T/shared
mkdir -m 1777 "$SH"
chmod 0755 "$T"
errs=

# ok WHO FILE: the README's session by hand, in the shared folder
ok() {
	who=$1 f=$2
	run=; [ "$who" = root ] || run=as_nobody
	$run "$MEMGRANTCTL" sim init "$f" --online 2G --standby 2G --block-size 128M >"$T/out" 2>&1 ||
		{ errs="$errs
$who: sim init $f: $(cat "$T/out")"; return; }
	$run "$MEMGRANTCTL" --sim "$f" block configure 16 >"$T/out" 2>&1 ||
		errs="$errs
$who: block configure 16: $(cat "$T/out")"
	[ "$(stat -c %u "$f" "$f.lock" "$f.d" "$f.tree" | sort -u)" = "$($run id -u)" ] ||
		errs="$errs
$who: the sim's entries do not belong to the writer: $(stat -c '%n %u' "$f" "$f.lock" "$f.d" "$f.tree")"
	$run lsmem --sysroot "$f.tree" >"$T/out" 2>&1 && grep -q 'Total offline memory: *128M' "$T/out" ||
		errs="$errs
$who: lsmem --sysroot $f.tree: $(cat "$T/out")"
}
ok root "$SH/root.json"
ok user "$SH/user.json"

# refused WHO FILE WANT: sim init FILE as WHO fails, says WANT and not "exists"
refused() {
	who=$1 f=$2 want=$3
	run=; [ "$who" = root ] || run=as_nobody
	if $run "$MEMGRANTCTL" sim init "$f" >"$T/out" 2>&1; then
		errs="$errs
$who: sim init $f succeeded over a planted entry"
	elif ! grep -qF -- "$want" "$T/out"; then
		errs="$errs
$who: sim init $f does not say '$want': $(cat "$T/out")"
	fi
	if [ ! -e "$f" ] && grep -q "exists" "$T/out"; then
		errs="$errs
$who: sim init $f says a missing file exists: $(cat "$T/out")"
	fi
}

# what the other user plants must stay as it was
echo victim >"$T/victim"
chmod 0644 "$T/victim"
mkdir "$T/victim.d"
as_nobody ln -s "$T/victim" "$SH/a.json"
refused root "$SH/a.json" "$SH/a.json is a symbolic link (uid 65534"
as_nobody touch "$SH/b.json.lock"
refused root "$SH/b.json" "$SH/b.json.lock belongs to another user (uid 65534"
as_nobody mkdir "$SH/c.json.d"
refused root "$SH/c.json" "$SH/c.json.d belongs to another user"
as_nobody ln -s "$T/victim.d" "$SH/d.json.tree"
refused root "$SH/d.json" "the sim's tree is a symbolic link in a shared folder"
ln "$T/victim" "$SH/e.json.lock"
refused user "$SH/e.json" "has more than one name"
refused user "$SH/root.json" "the sim belongs to uid 0; choose another FILE"
grep -q "remove it first\|chown\|chmod" "$T/out" && errs="$errs
a refusal suggests a fix that changes someone else's file: $(cat "$T/out")"
[ "$(cat "$T/victim")" = victim ] && [ "$(stat -c '%u %a %h' "$T/victim")" = "0 644 2" ] &&
	[ -z "$(ls -A "$T/victim.d")" ] || errs="$errs
a planted link made the sim touch another file: $(stat -c '%n %u %a %h' "$T/victim"; ls -A "$T/victim.d")"

# a folder of another user, not sticky: refused with a fix that is the user's own
mkdir -m 0755 "$T/theirs"
chown 65534 "$T/theirs"
refused root "$T/theirs/sim.json" "belongs to uid 65534 (mode 0755)"
grep -q "chown\|chmod" "$T/out" && errs="$errs
the refusal of another user's folder suggests changing it: $(cat "$T/out")"

# memgrantd (its helper writes as root) refuses the shared folder at its start
SIM=$SH/daemon.json
write_config
"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground >"$T/daemon.log" 2>&1 &
DAEMON_PID=$!
i=0
while kill -0 "$DAEMON_PID" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$DAEMON_PID" 2>/dev/null; then
	errs="$errs
memgrantd started with its sim in a shared folder"
elif ! grep -qF "$SH: the sim's folder is a shared folder (mode 1777)" "$T/daemon.log"; then
	errs="$errs
memgrantd's refusal does not name the shared folder: $(tail -n 3 "$T/daemon.log")"
fi
[ ! -e "$SIM" ] || errs="$errs
memgrantd created $SIM in a shared folder"

[ -z "$errs" ] || fail "$errs"
echo "the sim in a shared sticky folder: works as root and as a user; 7 planted entries refused; memgrantd refuses it"
