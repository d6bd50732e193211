/* SPDX-License-Identifier: MIT */
/* common/stats.c - process-wide counters (see stats.h). */
#include "common/stats.h"

#include <stdatomic.h>

static _Atomic int64_t stats[AP_STAT__COUNT];

void ap_stat_add(enum ap_stat s, int64_t n)
{
	if ((unsigned)s < AP_STAT__COUNT)
		atomic_fetch_add_explicit(&stats[s], n, memory_order_relaxed);
}

int64_t ap_stat_get(enum ap_stat s)
{
	if ((unsigned)s >= AP_STAT__COUNT)
		return 0;
	return atomic_load_explicit(&stats[s], memory_order_relaxed);
}
