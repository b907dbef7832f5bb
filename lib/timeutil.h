/* SPDX-License-Identifier: MIT */
/*
 * The one monotonic clock of memgrant (CLOCK_MONOTONIC: wall-clock jumps
 * must not cut or stretch a wait or a deadline): now in milliseconds or
 * seconds, and deadlines for pthread_cond_timedwait() on condition
 * variables set up with that clock.
 */
#pragma once

#include <stdint.h>
#include <time.h>

/* Now, CLOCK_MONOTONIC, in milliseconds and in seconds. */
uint64_t mono_ms(void);
double mono_s(void);

/* *TS = now (CLOCK_MONOTONIC) + MS milliseconds. */
void deadline_after_ms(struct timespec *ts, long ms);
