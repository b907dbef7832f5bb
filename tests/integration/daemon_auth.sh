#!/bin/sh
# Who may do what on the local API (SO_PEERCRED, docs/bad-inputs.md "Callers"):
# with api_socket_mode "0666" every local user connects; a caller that is
# neither root nor in api_group may read (GET) and gets 403 EPERM for any
# POST, whatever its body, and nothing changes.  With mode "0660" such a
# caller cannot even connect.  Root can do both.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null 2>&1 || skip "curl is needed to send raw API requests"
[ "$(id -u)" -eq 0 ] || skip "must run as root to compare a root caller with an unprivileged one"

# as_nobody CMD...: run as uid/gid 65534 without supplementary groups
if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
elif runuser -u nobody -- true 2>/dev/null; then
	as_nobody() { runuser -u nobody -- "$@"; }
else
	skip "neither setpriv nor runuser can drop privileges to uid 65534"
fi
as_nobody test -x "$MEMGRANTCTL" || skip "uid 65534 cannot run $MEMGRANTCTL (build directory not reachable)"
chmod 0755 "$T" # the socket's directory must be reachable; the state dir stays 0700

# as_member CMD...: uid/gid 65534 with the API group (root's) among its
# supplementary groups only: the kernel's credentials of the peer decide
# (SO_PEERGROUPS), as they decide whether it may open a 0660 socket
as_member() { setpriv --reuid=65534 --regid=65534 --groups=0 "$@"; }
as_member true 2>/dev/null || skip "setpriv cannot set supplementary groups"

# config MODE: the test config with this socket mode; root's group is the API group
config() {
	rm -f "$T/memgrant.yaml"
	write_config
	sed -i "s|^agent:\$|agent:\n  api_socket_mode: \"$1\"|; s|^  api_group: .*|  api_group: root|" "$T/memgrant.yaml"
}

# req WHO METHOD PATH [BODY]: prints the HTTP status; the reply is in $T/reply
req() {
	who=$1 method=$2 path=$3
	shift 3
	rm -f "$T/reply"
	if [ $# -gt 0 ]; then
		printf '%s' "$1" > "$T/body"
		chmod 0644 "$T/body"
		set -- --data-binary "@$T/body"
	fi
	set -- curl -s -o "$T/reply" -w '%{http_code}' --unix-socket "$SOCK" -X "$method" "$@" \
		"http://memgrantd$path"
	if [ "$who" != root ]; then
		# the reply file is written by the unprivileged curl: give it a place it may write
		: > "$T/reply"
		chmod 0666 "$T/reply"
		as_$who "$@" || true
	else
		"$@" || true
	fi
}

code_of() { jget "$(cat "$T/reply")" error.code; }

snapshot() {
	mkdir -p "$1"
	$MEMGRANTCTL --sim "$SIM" lsmem -J > "$1/lsmem.json"
	cp "$SIM" "$1/sim.json"
	"$BUILD/tests/tools/journal_dump" "$T/state" > "$1/journal.json" || fail "journal_dump failed"
}
same() {
	for f in lsmem.json sim.json journal.json; do
		cmp -s "$1/$f" "$2/$f" || fail "$3: $f changed"
	done
}

# ---------------------------------------------------------------- mode 0666
config 0666
start_daemon
expect_eq "auth-mode-0666: socket mode" "$(stat -c %a "$SOCK")" 666
# something to read and to try to revoke
expect_eq "auth-root-post: HTTP" "$(req root POST /v1/grants '{"type":"grant","id":"g-root","size":"256M"}')" 202
wait_state g-root applied
snapshot "$T/before"

for path in /v1/status /v1/grants /v1/grants/g-root /v1/blocks /metrics; do
	expect_eq "auth-read GET $path as uid 65534" "$(req nobody GET "$path")" 200
done
echo "ok auth-read: uid 65534 reads status, grants, blocks, metrics"

# any POST from a reader is refused before its body is looked at
for body in '{"type":"grant","id":"g-nobody","size":"128M"}' \
	'{"type":"revoke","grant":"g-root"}' \
	'{not json' \
	"$(python3 -c 'print("{\"x-pad\":\"" + "a" * 70000 + "\"}")')"; do
	expect_eq "auth-post-403: HTTP" "$(req nobody POST /v1/grants "$body")" 403
	expect_eq "auth-post-403: code" "$(code_of)" EPERM
	grep -q "uid 65534 may read but not change anything: only root and the API group may" "$T/reply" ||
		fail "auth-post-403: message: $(cat "$T/reply")"
done
# a cancel changes things too, and a dry run is a POST like any other
expect_eq "auth-cancel-403: HTTP" "$(req nobody POST /v1/grants/g-root/cancel)" 403
expect_eq "auth-cancel-403: code" "$(code_of)" EPERM
expect_eq "auth-dry-run-403: HTTP" "$(req nobody POST '/v1/grants?dry_run=1' '{"type":"grant","size":"128M"}')" 403
kill -0 "$DAEMON_PID" || fail "memgrantd died"
echo "ok auth-post-403: POST as uid 65534 gets 403 EPERM (grants, cancel, dry run)"

# a member of the API group through a supplementary group may change things
expect_eq "auth-member-post: HTTP" "$(req member POST '/v1/grants?dry_run=1' '{"type":"grant","size":"128M"}')" 200
expect_eq "auth-member-cancel: HTTP" "$(req member POST /v1/grants/g-nobody/cancel)" 404
echo "ok auth-member: uid 65534 with the API group as a supplementary group may POST"

# memgrantctl as a reader: reads work, a grant is refused with the daemon's reason
as_nobody "$MEMGRANTCTL" --socket "$SOCK" status > /dev/null 2>&1 || fail "auth-ctl-read: memgrantctl status as uid 65534 failed"
rc=0
as_nobody "$MEMGRANTCTL" --socket "$SOCK" grant 128M > "$T/out" 2> "$T/err" || rc=$?
expect_eq "auth-ctl-grant: exit" "$rc" 1
grep -q "uid 65534 may read but not change anything.*(EPERM)" "$T/err" || fail "auth-ctl-grant: stderr: $(cat "$T/err")"
echo "ok auth-ctl: memgrantctl as uid 65534: status works, grant exits 1: $(cat "$T/err")"

snapshot "$T/after"
same "$T/before" "$T/after" "refused POSTs"
expect_eq "auth-post-403: no record" "$($CTL grants --json | grep -c g-nobody)" 0

# ---------------------------------------------------------------- mode 0660
stop_daemon
config 0660
start_daemon
expect_eq "auth-mode-0660: socket mode" "$(stat -c %a "$SOCK")" 660
expect_eq "auth-connect-0660: HTTP" "$(req nobody GET /v1/status)" 000
rc=0
as_nobody "$MEMGRANTCTL" --socket "$SOCK" status > "$T/out" 2> "$T/err" || rc=$?
expect_eq "auth-connect-0660: memgrantctl exit" "$rc" 1
grep -q "permission denied on memgrantd's socket $SOCK (mode 0660" "$T/err" || fail "auth-connect-0660: stderr: $(cat "$T/err")"
echo "ok auth-connect-0660: uid 65534 cannot connect: $(cat "$T/err")"

# a supplementary member connects and changes things; a reader cannot connect
expect_eq "auth-member-0660: HTTP" "$(req member POST '/v1/grants?dry_run=1' '{"type":"grant","size":"128M"}')" 200
echo "ok auth-member-0660: a supplementary member of the API group connects and may POST"

# root still reads and changes
expect_eq "auth-root-read: HTTP" "$(req root GET /v1/status)" 200
expect_eq "auth-root-post: HTTP" "$(req root POST /v1/grants '{"type":"revoke","id":"r-root","grant":"g-root"}')" 202
wait_state r-root applied
stop_daemon
echo "ok auth-root: root reads and changes with either mode"
