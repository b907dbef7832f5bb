#!/bin/sh
# The state folder on a small tmpfs of a mount namespace of its own, filled
# between a grant's accept and its intent and between a revocation's steps
# and its result (tests/crash/disk_full.sh): the client following each gets
# the stopped status, memgrantd stops, and after a SIGKILL and a restart the
# answers and the sim agree.
exec sh "$(dirname "$0")/../crash/disk_full.sh"
