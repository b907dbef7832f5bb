#!/bin/sh
# Bash completion of the three programs (packaging/bash-completion/): commands,
# options, the operators' words, grant ids and block lists asked of the
# running memgrantd or the sim, and memgrantd's -o keys.
# bash-completion's own helpers are stood in for by a few lines (the test
# needs only bash), so what is checked is memgrant's completion logic.
. "$(dirname "$0")/lib.sh"
command -v bash >/dev/null 2>&1 || skip "bash is needed"
COMP=$(cd "$(dirname "$0")/../../packaging/bash-completion" && pwd)
$MEMGRANTCTL sim init "$SIM" --online 2G --standby 2G --block-size 128M > /dev/null || fail "sim init"
start_daemon
$CTL grant 256M --id first-grant --wait > /dev/null || fail "grant"
$CTL grant 128M --id second-grant --wait > /dev/null || fail "grant"

# complete PROGRAM WORDS...: the candidates for the last word, one a line
complete_words() {
	PATH=$BUILD:$PATH bash -c '
		_init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
			words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
		_filedir() { :; }
		compopt() { :; }
		. "$1/$2"
		shift 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		fn=$(complete -p "$1" | sed "s/.*-F \([^ ]*\) .*/\1/")
		"$fn"
		printf "%s\n" "${COMPREPLY[@]}"' complete "$COMP" "$@"
}
has() { # what candidates word
	printf '%s\n' "$2" | grep -qx -- "$3" || fail "$1: '$3' not among: $(printf '%s' "$2" | tr '\n' ' ')"
}

out=$(complete_words memgrantctl memgrantctl "")
has "memgrantctl commands" "$out" wait
has "memgrantctl commands" "$out" grants
has "memgrantctl commands" "$out" adopt
has "memgrantctl commands" "$out" cancel
out=$(complete_words memgrantctl memgrantctl adopt --)
has "adopt options" "$out" --json
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" cancel "f")
expect_eq "cancel ID prefix" "$out" first-grant
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" grant --dry)
expect_eq "grant --dry-run" "$out" --dry-run
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" wait "")
has "wait ID" "$out" first-grant
has "wait ID" "$out" second-grant
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" grants "f")
expect_eq "grants ID prefix" "$out" first-grant
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" revoke --grant "s")
expect_eq "revoke --grant ID" "$out" second-grant
out=$(complete_words memgrantctl memgrantctl grant 1G --zone "")
has "--zone words" "$out" Movable
has "--zone words" "$out" Normal
out=$(complete_words memgrantctl memgrantctl --sim x block online 16 --v)
has "block options" "$out" --verbose
# no daemon: no ids, no error
out=$(complete_words memgrantctl memgrantctl --socket "$T/none.sock" wait "")
expect_eq "no daemon, no ids" "$out" ""

# block lists: the blocks each command can take, from the same memgrantd or sim
# (the sim: 16 blocks online, 16 standby; first-grant and second-grant hold 16-18)
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" grant --blocks "")
has "grant --blocks" "$out" 19
printf '%s\n' "$out" | grep -qx 16 && fail "grant --blocks offers online block 16"
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" grant --blocks "19,2")
has "grant --blocks list" "$out" 19,20
has "grant --blocks list" "$out" 19,29
printf '%s\n' "$out" | grep -qx '19,2' && fail "grant --blocks offers a block that does not exist"
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" revoke --blocks "1")
has "revoke --blocks" "$out" 16
printf '%s\n' "$out" | grep -qx 19 && fail "revoke --blocks offers standby block 19"
out=$(complete_words memgrantctl memgrantctl --socket "$SOCK" adopt "")
has "adopt BLOCKS" "$out" 3
out=$(complete_words memgrantctl memgrantctl --sim "$SIM" block configure "")
has "block configure BLOCKS" "$out" 31
printf '%s\n' "$out" | grep -qx 0 && fail "block configure offers online block 0"
out=$(complete_words memgrantctl memgrantctl --sim "$SIM" block offline "1")
has "block offline BLOCKS" "$out" 17
printf '%s\n' "$out" | grep -qx 19 && fail "block offline offers standby block 19"

# -o KEY=VALUE: every key offered is one memgrantd knows
out=$(complete_words memgrantd memgrantd -o "")
has "memgrantd -o keys" "$out" backend.sim.standby=
has "memgrantd -o keys" "$out" policy.zone=
has "memgrantd -o keys" "$out" providers.https.url=
n=0
for k in $out; do
	n=$((n + 1))
	err=$("$MEMGRANTD" -c "$T/memgrant.yaml" --check-config -o "${k}x" 2>&1)
	printf '%s\n' "$err" | grep -q "unknown key\|not a section" && fail "-o $k: memgrantd says: $err"
done
[ "$n" -ge 40 ] || fail "only $n keys offered for -o"
out=$(complete_words memgrantd memgrantd --set "policy.z")
expect_eq "--set policy.z" "$out" policy.zone=
out=$(complete_words memgrantd memgrantd -o "policy.zone=m")
expect_eq "-o policy.zone=m" "$out" policy.zone=movable
out=$(complete_words memgrantd memgrantd -o "backend.type=")
has "-o backend.type=" "$out" backend.type=sim

out=$(complete_words memgrantd memgrantd --c)
has "memgrantd options" "$out" --check-config
has "memgrantd options" "$out" --config
out=$(complete_words memgrantd memgrantd --h)
has "memgrantd options" "$out" --helper

out=$(complete_words memgrant-host memgrant-host "")
has "memgrant-host commands" "$out" grant
has "memgrant-host commands" "$out" watch
has "memgrant-host commands" "$out" serve
out=$(complete_words memgrant-host memgrant-host serve --)
has "memgrant-host serve options" "$out" --config
has "memgrant-host serve options" "$out" --dry-run
out=$(complete_words memgrant-host memgrant-host grant dom 1G --m)
has "memgrant-host grant options" "$out" --memmap
stop_daemon
echo ok
