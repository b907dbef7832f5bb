/* SPDX-License-Identifier: MIT */
/*
 * The typed status report (lib/wire/report.h) as JSON: the one
 * encoder every adapter and the journal use, so a report has one shape
 * ({"type":"status", ...} of docs/protocol.md with the engine's progress
 * fields), and the journal's decoder of what it stored.
 */
#pragma once

#include <jansson.h>

#include "lib/wire/report.h"

/* New reference, NULL on ENOMEM. */
json_t *report_to_json(const struct report *r);
/* One block's entry ("block", "range", ...) as in the report's "blocks". */
json_t *report_block_json(const struct report_block *b, uint64_t block_size);
/* Reads a report written by report_to_json() (a journal's record): fields
 * it lacks stay zero; AGENT is not read (the reader's own).  0, -EINVAL
 * (J is not a status report), -ENOMEM. */
int report_from_json(const json_t *j, struct report *out);
