/* SPDX-License-Identifier: MIT */
/* common/clock.h - the two clocks in milliseconds, the sleep for backoffs, absolute deadlines
 * for pthread_cond_timedwait, and a fake clock for tests.
 *
 * Wall-clock time (CLOCK_REALTIME) is for timestamps that are stored, compared across
 * processes or shown; monotonic time (CLOCK_MONOTONIC) is for measuring intervals on one
 * machine, since it never jumps when the clock is set. A condition variable waits on
 * CLOCK_REALTIME unless its attributes chose another clock, so its deadline must be made on
 * the clock it uses.
 *
 * Code that waits for a time it computed (a backoff, a Retry-After, a token's expiry) reads
 * the time with ap_wall_ms / ap_wall_s / ap_mono_ms and waits with ap_sleep_ms, never with
 * time(2) or nanosleep(2) of its own, so that a test can move the time on instead of sleeping
 * (ap_clock__fake below).
 */
#ifndef AP_CLOCK_H
#define AP_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds since the Unix epoch. Thread-safe, as is every function here. */
int64_t ap_wall_ms(void);

/* Seconds since the Unix epoch (ap_wall_ms() / 1000): what time(NULL) gives, on this clock. */
int64_t ap_wall_s(void);

/* Milliseconds on the monotonic clock (an arbitrary origin: use differences only). */
int64_t ap_mono_ms(void);

/* Sleep ms milliseconds (nothing when ms <= 0), resuming after a signal: the one sleep for
 * backoffs and waits the code computed. With the fake clock on it returns at once, having
 * moved both clocks on by ms. */
void ap_sleep_ms(int64_t ms);

/* *ts = the time ms milliseconds (>= 0) from now on clock: the absolute deadline
 * pthread_cond_timedwait wants for a condition that waits on that clock. Always the real
 * clock, fake clock or not: the kernel times the wait, so a test cannot move it on. */
void ap_deadline_in(struct timespec *ts, clockid_t clock, int64_t ms);

/* The fake clock. Tests only: product code never calls these.
 *
 * ap_clock__fake(true) (re)starts it at the real time: from then on ap_mono_ms is the real
 * monotonic clock plus an offset that starts at 0, ap_wall_ms (and ap_wall_s) the real wall
 * clock at the start moved on exactly as much as ap_mono_ms (so the two never drift apart),
 * and ap_sleep_ms adds its ms to the offset instead of sleeping. Real time still passes, so a
 * loop that polls other threads against these clocks still ends; only the computed waits are
 * skipped. ap_clock__fake(false) goes back to the real clocks and real sleeps. Either switch
 * makes the clocks jump: make it while no other thread is timing anything. While the fake
 * clock is off (the default) nothing here behaves differently, and it costs one atomic load
 * per call.
 *
 * A process-wide switch: every thread sees the same fake time, and a fake sleep on any thread
 * moves it on for all. Not for waits on a condition (ap_deadline_in) or a socket: those stay
 * real. */
void ap_clock__fake(bool on);

/* Move the fake clock on by ms (>= 0) without sleeping. The fake clock must be on. */
void ap_clock__advance(int64_t ms);

/* Milliseconds ap_sleep_ms skipped since ap_clock__fake(true) (ap_clock__advance not
 * included): how long the code under test waited. 0 while the fake clock is off. */
int64_t ap_clock__slept_ms(void);

#endif
