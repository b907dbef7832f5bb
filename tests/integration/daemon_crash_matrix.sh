#!/bin/sh
# The crash matrix (tests/crash/crash_matrix.sh: SIGKILL memgrantd at many
# points of grants, revocations and recovery, check the invariants after each
# restart), bounded for make check.  CRASH_SECONDS overrides the budget.
CRASH_SECONDS=${CRASH_SECONDS:-100}
export CRASH_SECONDS
exec sh "$(dirname "$0")/../crash/crash_matrix.sh"
