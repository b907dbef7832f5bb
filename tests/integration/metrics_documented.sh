#!/bin/sh
# The metrics count what their names say, and docs/operations.md lists every
# one.  A grant of 1G (8 blocks of 128M) and its revocation: 8 block
# operations "add" and 8 "remove" in memgrant_block_operations_total, and
# every kernel write by its step in memgrant_executor_steps_total (8
# configure, 8 online, 8 offline, 8 deconfigure).  Every metric the agent
# serves, and every metric name in agent/engine/metrics.c (some appear only
# with a provider, such as memgrant_messages_skipped_total), has a row in
# the metrics table of docs/operations.md.
. "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)

start_daemon
$CTL grant 1G --wait > /dev/null || fail "grant 1G"
$CTL revoke 1G --wait > /dev/null || fail "revoke 1G"
curl -s --unix-socket "$SOCK" http://x/metrics > "$T/metrics" || fail "GET /metrics"
stop_daemon

want() { # series value
	grep -qxF "$1 $2" "$T/metrics" || fail "want '$1 $2', got: $(grep -F "${1%%\{*}" "$T/metrics" | grep -v '^#')"
}
want 'memgrant_block_operations_total{operation="add",result="ok"}' 8
want 'memgrant_block_operations_total{operation="remove",result="ok"}' 8
for step in configure online offline deconfigure; do
	want "memgrant_executor_steps_total{step=\"$step\",result=\"ok\"}" 8
done
want 'memgrant_block_operation_seconds_count' 16

# the documented names: the first column of the table under "### Metrics"
sed -n '/^### Metrics$/,/^## /p' "$top/docs/operations.md" |
	sed -n 's/^| `\(memgrant_[a-z_]*\).*/\1/p' | sort -u > "$T/documented"
[ -s "$T/documented" ] || fail "no metrics table in docs/operations.md"
{
	sed -n 's/^# TYPE \(memgrant_[a-z_]*\) .*/\1/p' "$T/metrics"
	grep -o '"# TYPE memgrant_[a-z_]*' "$top/agent/engine/metrics.c" | sed 's/.*TYPE //'
} | sort -u > "$T/served"
[ "$(wc -l < "$T/served")" -ge 10 ] || fail "too few metrics found: $(cat "$T/served")"
missing=$(comm -23 "$T/served" "$T/documented")
[ -z "$missing" ] || fail "metrics not in docs/operations.md: $missing"
gone=$(comm -13 "$T/served" "$T/documented")
[ -z "$gone" ] || fail "docs/operations.md lists metrics the agent does not have: $gone"
echo ok
