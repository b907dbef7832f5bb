#!/bin/sh
# The I/O fault walk (tests/crash/io_faults.sh) over what memgrantd tells its
# peers: a control plane's grant and revocation over HTTPS with their status
# reports, a webhook's events, and a host's grant and revocation over the
# guest channel.  Every durable write, sync, truncate,
# create, rename and mkdir in the state folder fails once, in turn; after
# each, a restart must deliver every recorded state's report and event, none
# contradicting the record, and a grant the journal could not record must be
# taken once the disk has room, without a restart.
FAULT_SCENARIOS=controlplane,webhook,channel exec sh "$(dirname "$0")/../crash/io_faults.sh"
