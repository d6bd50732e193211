/* SPDX-License-Identifier: MIT */
/* server/metrics.h - process-wide counters rendered as Prometheus text for GET /metrics.
 *
 * Label values come from fixed sets (event names outside the routed ones count as "other"),
 * so an attacker cannot grow the series count. Thread-safe.
 */
#ifndef AP_METRICS_H
#define AP_METRICS_H

#include "common/buf.h"
#include "server/queue_view.h"

#include <stdbool.h>

/* Count one delivery answered with outcome (a fixed string such as "queued", "duplicate",
 * "ignored", "unauthorized"). */
void metrics_delivery(const char *event, const char *outcome);

/* Observe one request's latency in seconds (first byte handled to response queued). */
void metrics_latency(double seconds);

/* Count one connection closed by its deadline: while its body (body) or its request line
 * and headers were awaited. */
void metrics_deadline_cut(bool body);

/* Observe one run of a job: outcome is "succeeded", "failed", "cancelled", "retry" (re-queued
 * to run again) or "interrupted" (a shutdown re-queued it, or the run lost its lease to another
 * run); anything else counts as failed. */
void metrics_job_done(const char *outcome, double seconds);

/* Observe one stage of a run (its start to the next stage or the run's end). */
void metrics_stage_done(enum job_stage stage, double seconds);

/* Count one run refused by a daily budget: the repository's (repo) or the global one. */
void metrics_budget_refusal(bool repo);

/* Append the exposition text: deliveries by event and outcome, jobs by state (from stats: the
 * queue depth), workers configured and busy, the latency histogram, connections closed by a
 * deadline, the largest group-commit batch, budget refusals, job and stage duration
 * histograms, and the counters of common/stats.h (model calls, tokens, cost, sandbox boxes,
 * environment cache). docs/internals/queue.md lists every series. */
int metrics_render(ap_buf *out, const q_stats *stats, int workers, int busy, size_t max_batch);

#endif
