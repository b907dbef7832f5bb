#!/bin/sh
# A failure at start is logged once, where it is handled, with its context
# (docs/design.md, "log once"): not again by the backend set-up, the engine
# or memgrantd's main.  Two failures, each on a fresh state:
# - a sim state file that is not one: the privileged helper cannot open it
#   and says why; no "exited with status", no "cannot start the privileged
#   helper" after it;
# - a journal that is not one: the engine says so; no "cannot start" after it.
. "$(dirname "$0")/lib.sh"

# run_failing NAME: memgrantd must exit 1; its stderr in $T/NAME.log
run_failing() {
	"$MEMGRANTD" -c "$T/memgrant.yaml" --foreground > "$T/$1.log" 2>&1
	rc=$?
	[ "$rc" -eq 1 ] || { cat "$T/$1.log"; fail "$1: memgrantd exited with $rc, want 1"; }
}

# errors FILE: the error lines of the log
errors() { grep -c ': error: ' "$1"; }

write_config
echo "garbage" > "$SIM"
run_failing badsim
n=$(errors "$T/badsim.log")
[ "$n" -eq 1 ] || { cat "$T/badsim.log"; fail "a bad sim state file: $n error lines, want 1"; }
grep -q "cannot open the sim $SIM: .*line 1" "$T/badsim.log" || { cat "$T/badsim.log"; fail "the line does not say which file and why"; }
grep -q "status\|cannot start" "$T/badsim.log" && { cat "$T/badsim.log"; fail "a second line about the same failure"; }

rm -f "$SIM"
mkdir -p "$T/state"
printf 'this is no journal\n' > "$T/state/journal.log"
run_failing badjournal
n=$(errors "$T/badjournal.log")
[ "$n" -eq 1 ] || { cat "$T/badjournal.log"; fail "a bad journal: $n error lines, want 1"; }
grep -q "journal $T/state: " "$T/badjournal.log" || { cat "$T/badjournal.log"; fail "the line does not name the journal"; }
grep -q "cannot start" "$T/badjournal.log" && { cat "$T/badjournal.log"; fail "a second line about the same failure"; }
echo "ok: one line per failure at start"
