#!/bin/sh
# The crash matrix (tests/crash/crash_matrix.sh: SIGKILL memgrantd, its
# helper alone, or both back to back, at many points of grants, revocations
# and recovery, check the invariants after each restart), bounded for make
# check; the three modes share the budget.  CRASH_SECONDS overrides it.
CRASH_SECONDS=${CRASH_SECONDS:-100}
export CRASH_SECONDS
exec sh "$(dirname "$0")/../crash/crash_matrix.sh"
