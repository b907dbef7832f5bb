#!/bin/sh
# The I/O fault walk (tests/crash/io_faults.sh): every durable write, sync,
# truncate, create, rename and mkdir memgrantd makes in its state folder
# during grants, revocations, a cancel, a restart and a recovery fails once
# with ENOSPC, EIO, EDQUOT or a short write; after each, a restart must keep
# every answer given and the sim must match the grants.  (The control plane's
# and the webhook's scenarios: daemon_io_faults_peers.sh.)
FAULT_SCENARIOS=${FAULT_SCENARIOS:-grants,revocations,cancel,restart,recovery} exec sh "$(dirname "$0")/../crash/io_faults.sh"
