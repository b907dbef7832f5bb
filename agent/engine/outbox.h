/* SPDX-License-Identifier: MIT */
/*
 * Outboxes: the durable queues of reports per destination (the journal's
 * outbox), the registry of destinations (for metrics) and the wait/wake
 * that lets adapters sleep until a report is due.  The functions are
 * declared in agent/engine/engine.h.
 *
 * Contract: any thread; every push and ack is durable when it returns 0;
 * a wait returns at the latest when the engine stops.
 */
#pragma once

#include "agent/engine/engine.h"
