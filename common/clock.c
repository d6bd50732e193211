/* SPDX-License-Identifier: MIT */
/* common/clock.c - clocks in milliseconds, the backoff sleep, condition-variable deadlines
 * and the tests' fake clock (see clock.h). */
#include "common/clock.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>

static atomic_bool fake_on;
static _Atomic int64_t fake_offset_ms; /* added to both clocks; 0 while off */
static _Atomic int64_t fake_wall_ms;   /* wall - monotonic when the fake clock started */
static _Atomic int64_t fake_slept_ms;  /* skipped by ap_sleep_ms since it started */

static int64_t ms_on(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool faking(void)
{
	return atomic_load_explicit(&fake_on, memory_order_acquire);
}

int64_t ap_wall_ms(void)
{
	if (!faking())
		return ms_on(CLOCK_REALTIME);
	return ms_on(CLOCK_MONOTONIC) + atomic_load(&fake_wall_ms) + atomic_load(&fake_offset_ms);
}

int64_t ap_wall_s(void)
{
	return ap_wall_ms() / 1000;
}

int64_t ap_mono_ms(void)
{
	if (!faking())
		return ms_on(CLOCK_MONOTONIC);
	return ms_on(CLOCK_MONOTONIC) + atomic_load(&fake_offset_ms);
}

void ap_sleep_ms(int64_t ms)
{
	struct timespec ts;

	if (ms <= 0)
		return;
	if (faking()) {
		atomic_fetch_add(&fake_offset_ms, ms);
		atomic_fetch_add(&fake_slept_ms, ms);
		return;
	}
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void ap_deadline_in(struct timespec *ts, clockid_t clock, int64_t ms)
{
	clock_gettime(clock, ts);
	if (ms < 0)
		ms = 0;
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void ap_clock__fake(bool on)
{
	atomic_store_explicit(&fake_on, false, memory_order_release);
	atomic_store(&fake_offset_ms, 0);
	atomic_store(&fake_slept_ms, 0);
	if (!on)
		return;
	atomic_store(&fake_wall_ms, ms_on(CLOCK_REALTIME) - ms_on(CLOCK_MONOTONIC));
	atomic_store_explicit(&fake_on, true, memory_order_release);
}

void ap_clock__advance(int64_t ms)
{
	assert(faking() && ms >= 0);
	atomic_fetch_add(&fake_offset_ms, ms);
}

int64_t ap_clock__slept_ms(void)
{
	return atomic_load(&fake_slept_ms);
}
