/* SPDX-License-Identifier: MIT */
/*
 * The read side of the engine: status, blocks, grants and one grant as typed
 * structs (struct engine_status, engine_blocks, engine_grant_row), the
 * metrics text and the one-line summary, from the kernel's table and the
 * journal.  The functions are declared in agent/engine/engine.h; the JSON of
 * docs/api/local.openapi.yaml is providers/views/views_json.c's.
 *
 * Contract: any thread; the engine lock is held only to copy journal state,
 * never while the kernel is read; nothing here writes anything.
 */
#pragma once

#include "agent/engine/engine.h"
