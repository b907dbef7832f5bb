#!/bin/sh
# Root never follows a path the agent can change (issue 25, point 2): on the
# package's layout (as_shipped), memgrantd started as root with the sim, a
# process running as the agent's user (memgrant) tries to make root write,
# truncate, delete or chown root-owned victims (files of modes 0600 and
# 0000, a folder with contents, a copy of the sim's tree) through the sim's
# files and the state folder:
#  1. the sim in a folder memgrant may write (/run/memgrant): the lock made a
#     symlink (root pwrite()s its marker into the target), *.new files of the
#     tree made symlinks (root truncates and rewrites the target), the
#     descriptor replaced by one that names another tree, then at the next
#     starts (memgrantd still full root) sim.json.new made a symlink to the
#     0000 file and sim.json.d a symlink to the folder;
#  2. the sim in its default folder (/run/memgrant-sim, root's): the same
#     plants, which must all be refused to memgrant, and grants work;
#  3. a hard link to a root file in the state folder /var/lib/memgrant,
#     which memgrantd's start gives to memgrant (chown) unless it refuses.
#     With fs.protected_hardlinks=1 memgrant cannot make that link itself:
#     root plants it, as memgrant could where the sysctl is 0.
# Afterwards every victim is compared byte for byte (and its owner and
# mode) with a copy taken before.  Built before the fix, 1 and 3 change
# them; now 1's starts are refused (the folder is memgrant's), naming it.
. "$(dirname "$0")/lib.sh"
as_shipped
shipped_config
C=$T/etc/memgrant.yaml
V=$T/victims
mkdir -p "$V/vdir/sub" "$T/orig"
chmod 0755 "$V"
printf 'root secret 0600\n' > "$V/f600"; chmod 0600 "$V/f600"
printf 'root secret 0600 b\n' > "$V/f600b"; chmod 0600 "$V/f600b"
printf 'root secret 0000\n' > "$V/f000"; chmod 0000 "$V/f000"
printf 'a\n' > "$V/vdir/a"; printf 'b\n' > "$V/vdir/sub/b"; chmod 0700 "$V/vdir"
snapshot() { # what the victims are: contents, owners, modes, names
	(cd "$V" && find . -print | LC_ALL=C sort | while read -r f; do
		stat -c '%n %U:%G %a %F' "$f"
		[ -f "$f" ] && sha256sum < "$f"
		[ -L "$f" ] && readlink "$f"
	done)
}
cp -a "$V/." "$T/orig/"
snapshot > "$T/before"

M() { as_user memgrant "$@" 2>/dev/null; } # the agent's user; failures expected
run() { # memgrantd with ARGS in the background; DAEMON_PID, or empty when it exited at once
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
grant() { "$MEMGRANTCTL" grant "$1" --wait > /dev/null 2>&1 || :; }

# --- 1: the sim in memgrant's folder -----------------------------------------
S=/run/memgrant/sim.json
SO="-o backend.sim.state=$S"
# shellcheck disable=SC2086
if run $SO; then
	started_in_agent_folder=1
	M rm -f $S.lock; M ln -s "$V/f600" $S.lock                          # the lock
	M mv $S.tree /run/memgrant/old.tree; M cp -r /run/memgrant/old.tree $S.tree
	M chmod -R a+rwX $S.tree
	for d in $S.tree/sys/firmware/memory/memory*; do                     # the tree's .new
		M ln -s "$V/f600b" "$d/config.new"; M ln -s "$V/f600b" "$d/memmap_on_memory.new"
	done
	grant 256M
	cp -a $S.tree "$V/vtree"; chmod 0700 "$V/vtree"; cp -a "$V/vtree" "$T/orig/"
	snapshot > "$T/before"
	M sh -c "sed 's#\"tree\": *\"[^\"]*\"#\"tree\": \"$V/vtree\"#' $S > /run/memgrant/fake.json &&
		mv -f /run/memgrant/fake.json $S"                                   # the descriptor
	grant 256M
	stop
else
	started_in_agent_folder=0
fi
grep -q "/run/memgrant: the sim's folder belongs to uid $(id -u memgrant)" "$T/daemon.log" ||
	[ $started_in_agent_folder -eq 1 ] || fail "the refusal does not name the folder and its owner"
M ln -s "$V/f000" $S.new                                                   # at start, .new
# shellcheck disable=SC2086
run $SO -o backend.sim.faults.latency_ms=1 && stop
M rm -f $S; M mv $S.d /run/memgrant/old.d; M ln -s "$V/vdir" $S.d                                  # at start, rm -rf
# shellcheck disable=SC2086
run $SO && stop

# --- 2: the sim in its default folder, root's --------------------------------
errs=
run || errs="$errs
memgrantd does not start with the sim in /run/memgrant-sim"
D=/run/memgrant-sim
expect_eq "the sim's folder" "$(stat -c '%U:%G %a' $D)" "root:root 755"
for f in $D/sim.json.lock $D/sim.json.new $D/sim.json.d/x $D/sim.json.tree/x $D/x; do
	M ln -s "$V/f600" "$f" && errs="$errs
memgrant could plant a link at $f"
done
M sh -c "echo '{}' > $D/sim.json" && errs="$errs
memgrant could write the sim's descriptor"
M mv $D/sim.json.d $D/sim.json.e && errs="$errs
memgrant could move the sim's state folder"
"$MEMGRANTCTL" grant 256M --wait > "$T/out" 2>&1 || errs="$errs
a grant with the sim in $D failed: $(head -4 "$T/out")"
stop

# --- 3: a hard link in the state folder --------------------------------------
# (a hard link stays on its file system: the victim sits on the state
# folder's, in a folder of root's)
K=/var/lib/memgrant/keep
mkdir -m 0700 $K
printf 'root secret 0600 hl\n' > $K/hl600; chmod 0600 $K/hl600
cp -a $K/hl600 "$T/orig/hl600"
M ln $K/hl600 /var/lib/memgrant/link || ln $K/hl600 /var/lib/memgrant/link
run && stop
rm -f /var/lib/memgrant/link
[ "$(stat -c '%U:%G %a' $K/hl600)" = "root:root 600" ] || errs="$errs
the hard-linked file is now $(stat -c '%U:%G %a' $K/hl600)"
cmp -s $K/hl600 "$T/orig/hl600" || errs="$errs
the hard-linked file's contents changed"

# --- the victims -----------------------------------------------------------------
snapshot > "$T/after"
diff "$T/before" "$T/after" > "$T/diff" || errs="$errs
the victims changed (memgrantd started with the sim in memgrant's folder: $started_in_agent_folder):
$(cat "$T/diff")"
for f in f600 f600b f000; do
	cmp -s "$V/$f" "$T/orig/$f" || errs="$errs
$f changed: now $(stat -c '%U:%G %a %s bytes' "$V/$f"), $(head -c 60 "$V/$f" | tr '\n' ' ')"
done
diff -r "$V/vdir" "$T/orig/vdir" > /dev/null 2>&1 || errs="$errs
the folder vdir changed: $(ls -A "$V/vdir" | tr '\n' ' ')"
grep -q "has 2 names (a hard link): not giving it to uid" "$T/daemon.log" || errs="$errs
the hard link in the state folder was not refused by name"
[ -z "$errs" ] || fail "$errs"
echo "ok: no victim changed (0600, 0000, a folder, a tree); every plant refused or without effect"
