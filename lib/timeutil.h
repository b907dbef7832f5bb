/* SPDX-License-Identifier: MIT */
/*
 * Monotonic deadlines for pthread_cond_timedwait() on condition variables
 * set up with CLOCK_MONOTONIC (wall-clock jumps must not cut or stretch a
 * wait).
 */
#pragma once

#include <time.h>

/* *TS = now (CLOCK_MONOTONIC) + MS milliseconds. */
void deadline_after_ms(struct timespec *ts, long ms);
