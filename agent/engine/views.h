/* SPDX-License-Identifier: MIT */
/*
 * The read side of the engine: status, blocks, grants, one grant, metrics
 * and the one-line summary, rendered as the documented JSON and text
 * (docs/api/local.openapi.yaml) from the kernel's table and the journal.  The functions are
 * declared in agent/engine/engine.h.
 *
 * Contract: any thread; the engine lock is held only to copy journal state,
 * never while the kernel is read; nothing here writes anything.
 */
#pragma once

#include "agent/engine/engine.h"
