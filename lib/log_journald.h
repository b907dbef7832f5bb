/* SPDX-License-Identifier: MIT */
/*
 * memgrantd's log sink for journald: when stderr is the journal
 * (JOURNAL_STREAM, lib/log.h) and journald's native socket is there, each
 * entry goes to journald's native protocol (as sd_journal_sendv() sends it,
 * without libsystemd) with MESSAGE=,
 * PRIORITY=, SYSLOG_IDENTIFIER= and the typed fields of lib/log.h (GRANT_ID=,
 * BLOCK=, STEP=, ERRNO=, ERRNO_NAME=), so that `journalctl GRANT_ID=g-1`
 * finds a grant's lines.  One datagram to /run/systemd/journal/socket, a
 * fixed path; the process needs socket(AF_UNIX, SOCK_DGRAM) and sendto,
 * which the agent's seccomp filter allows.  An entry journald does not take goes to stderr.
 * Elsewhere nothing changes: lines stay as lib/log.h prints them.
 */
#pragma once

#include "lib/log.h"

/* Sets L's sink when stderr is the journal; returns whether it did. */
bool log_journald_use(struct mg_log *l);
