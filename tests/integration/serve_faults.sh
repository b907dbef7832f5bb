#!/bin/sh
# The I/O fault walk of memgrant-host serve (tests/crash/serve_faults.sh):
# every durable write, sync, create, rename and mkdir serve makes in its
# state_dir during a grow, a shrink, a restart and a recovery fails once with
# ENOSPC, EIO, EDQUOT or a short write; after each, a restart must agree with
# what the fake guest holds, nothing applied twice, nothing above max, and the
# events must tell the same story.
exec sh "$(dirname "$0")/../crash/serve_faults.sh"
