/* SPDX-License-Identifier: MIT */
/* common/clock.h - the two clocks in milliseconds, and absolute deadlines for
 * pthread_cond_timedwait.
 *
 * Wall-clock time (CLOCK_REALTIME) is for timestamps that are stored, compared across
 * processes or shown; monotonic time (CLOCK_MONOTONIC) is for measuring intervals on one
 * machine, since it never jumps when the clock is set. A condition variable waits on
 * CLOCK_REALTIME unless its attributes chose another clock, so its deadline must be made on
 * the clock it uses.
 */
#ifndef AP_CLOCK_H
#define AP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds since the Unix epoch. */
int64_t ap_wall_ms(void);

/* Milliseconds on the monotonic clock (an arbitrary origin: use differences only). */
int64_t ap_mono_ms(void);

/* *ts = the time ms milliseconds (>= 0) from now on clock: the absolute deadline
 * pthread_cond_timedwait wants for a condition that waits on that clock. */
void ap_deadline_in(struct timespec *ts, clockid_t clock, int64_t ms);

#endif
