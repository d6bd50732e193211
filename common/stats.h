/* SPDX-License-Identifier: MIT */
/* common/stats.h - process-wide counters that modules below server/ bump and server/metrics.c
 * renders for GET /metrics: the hook that lets sandbox/, agents/ and job/ be counted without
 * server/ including them (docs/internals/layout.md).
 *
 * Each counter is a relaxed atomic: ap_stat_add() is cheap and safe from any thread. The set
 * is fixed (an enum), so nothing outside can grow the series count.
 */
#ifndef AP_STATS_H
#define AP_STATS_H

#include <stdint.h>

enum ap_stat {
	AP_STAT_MODEL_CALLS,	       /* model calls answered (agents/agent.c) */
	AP_STAT_MODEL_CALLS_ESTIMATED, /* ... of which reported no usage (charged at most) */
	AP_STAT_MODEL_TOKENS_IN,       /* input tokens of those calls (as charged) */
	AP_STAT_MODEL_TOKENS_OUT,      /* output tokens of those calls (as charged) */
	AP_STAT_MODEL_COST_MICRO,      /* their cost in micro-dollars (priced models only) */
	AP_STAT_MODEL_ERRORS,	       /* model calls that failed after their retries */
	AP_STAT_BOXES_CREATED,	       /* sandbox boxes started (sandbox/core.c) */
	AP_STAT_BOXES_REMOVED,	       /* ... removed again */
	AP_STAT_BOXES_ACTIVE,	       /* gauge: started and not yet removed (warm pool included) */
	AP_STAT_ENV_CACHE_HITS,	       /* environment set-up served from the cache (hook) */
	AP_STAT_ENV_CACHE_MISSES,      /* environment set-up run afresh (hook) */
	AP_STAT_INGEST_ISOLATED,       /* ingest batches that failed whole and were tried again
					  one delivery at a time (server/queue.c) */
	AP_STAT__COUNT
};

/* Add n (may be negative for a gauge). */
void ap_stat_add(enum ap_stat s, int64_t n);

/* The current value. */
int64_t ap_stat_get(enum ap_stat s);

#endif
