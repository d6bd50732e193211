/* SPDX-License-Identifier: MIT */
/* common/clock.c - clocks in milliseconds and condition-variable deadlines (see clock.h). */
#include "common/clock.h"

static int64_t ms_on(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ap_wall_ms(void)
{
	return ms_on(CLOCK_REALTIME);
}

int64_t ap_mono_ms(void)
{
	return ms_on(CLOCK_MONOTONIC);
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
