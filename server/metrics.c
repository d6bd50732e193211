/* SPDX-License-Identifier: MIT */
/* server/metrics.c - counters and histograms rendered for GET /metrics (see metrics.h). */
#include "server/metrics.h"

#include "common/err.h"
#include "common/stats.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *events[] = {"issues", "issue_comment", "pull_request_review_comment", "ping",
			       "other"};
static const char *outcomes[] = {"queued",
				 "duplicate",
				 "active_job",
				 "cancel",
				 "ignored",
				 "bad_request",
				 "unauthorized",
				 "too_large",
				 "unsupported_media_type",
				 "method_not_allowed",
				 "error"};
#define N_EVENTS   (sizeof(events) / sizeof(events[0]))
#define N_OUTCOMES (sizeof(outcomes) / sizeof(outcomes[0]))

static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
				 0.1,	 0.25,	0.5,	1,     2.5,  10};
#define N_BUCKETS (sizeof(buckets) / sizeof(buckets[0]))

/* Job and stage durations: seconds to an hour and beyond. */
static const double dur_buckets[] = {1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600};
#define N_DUR (sizeof(dur_buckets) / sizeof(dur_buckets[0]))

/* One histogram series over a bucket list (le[], nle <= HIST_MAX_BUCKETS). */
#define HIST_MAX_BUCKETS 16
typedef struct hist {
	const double *le;
	size_t nle;
	uint64_t b[HIST_MAX_BUCKETS];
	uint64_t count;
	double sum;
} hist;

static const char *job_outcomes[] = {"succeeded", "failed", "cancelled", "retry", "interrupted"};
#define N_JOB_OUTCOMES (sizeof(job_outcomes) / sizeof(job_outcomes[0]))
static const char *stages[] = {"preparing", "planning", "building", "testing", "publishing"};
#define N_STAGES (sizeof(stages) / sizeof(stages[0]))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define DUR_HIST                                                                                   \
	{                                                                                          \
		dur_buckets, N_DUR, {0}, 0, 0                                                      \
	}
static hist job_hist[N_JOB_OUTCOMES] = {DUR_HIST, DUR_HIST, DUR_HIST, DUR_HIST, DUR_HIST};
static hist stage_hist[N_STAGES] = {DUR_HIST, DUR_HIST, DUR_HIST, DUR_HIST, DUR_HIST};
static uint64_t deliveries[N_EVENTS][N_OUTCOMES];
static hist latency = {buckets, N_BUCKETS, {0}, 0, 0};
static uint64_t cut_headers, cut_body;
static uint64_t refused_global, refused_repo;

static size_t index_of(const char **set, size_t n, const char *s, size_t fallback)
{
	for (size_t i = 0; s && i < n; i++)
		if (strcmp(set[i], s) == 0)
			return i;
	return fallback;
}

void metrics_delivery(const char *event, const char *outcome)
{
	size_t e = index_of(events, N_EVENTS, event, N_EVENTS - 1);
	size_t o = index_of(outcomes, N_OUTCOMES, outcome, N_OUTCOMES - 1);

	pthread_mutex_lock(&lock);
	deliveries[e][o]++;
	pthread_mutex_unlock(&lock);
}

static void hist_observe(hist *h, double seconds)
{
	if (seconds < 0)
		seconds = 0;
	for (size_t i = 0; i < h->nle; i++)
		if (seconds <= h->le[i])
			h->b[i]++;
	h->count++;
	h->sum += seconds;
}

void metrics_latency(double seconds)
{
	pthread_mutex_lock(&lock);
	hist_observe(&latency, seconds);
	pthread_mutex_unlock(&lock);
}

void metrics_deadline_cut(bool body)
{
	pthread_mutex_lock(&lock);
	if (body)
		cut_body++;
	else
		cut_headers++;
	pthread_mutex_unlock(&lock);
}

void metrics_job_done(const char *outcome, double seconds)
{
	size_t o = index_of(job_outcomes, N_JOB_OUTCOMES, outcome, 1);

	pthread_mutex_lock(&lock);
	hist_observe(&job_hist[o], seconds);
	pthread_mutex_unlock(&lock);
}

void metrics_stage_done(enum job_stage stage, double seconds)
{
	if ((unsigned)stage >= N_STAGES)
		return;
	pthread_mutex_lock(&lock);
	hist_observe(&stage_hist[stage], seconds);
	pthread_mutex_unlock(&lock);
}

/* One histogram family: n series (label = values[v]; label NULL: one series without labels),
 * each with every bucket, +Inf, _sum and _count. */
static int hist_render(ap_buf *out, const char *name, const char *help, const char *label,
		       const char **values, const hist *h, size_t n)
{
	int rc = ap_buf_addf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);

	for (size_t v = 0; v < n; v++) {
		char sel[96] = "", le_sep[100] = "{";

		if (label) {
			/* Fits: label and values are our own short names ("stage", "setup"). */
			snprintf(sel, sizeof(sel), "{%s=\"%s\"}", label, values[v]);
			snprintf(le_sep, sizeof(le_sep), "{%s=\"%s\",", label, values[v]);
		}
		for (size_t i = 0; i < h[v].nle; i++)
			rc |= ap_buf_addf(out, "%s_bucket%sle=\"%g\"} %llu\n", name, le_sep,
					  h[v].le[i], (unsigned long long)h[v].b[i]);
		rc |= ap_buf_addf(out,
				  "%s_bucket%sle=\"+Inf\"} %llu\n"
				  "%s_sum%s %.6f\n"
				  "%s_count%s %llu\n",
				  name, le_sep, (unsigned long long)h[v].count, name, sel, h[v].sum,
				  name, sel, (unsigned long long)h[v].count);
	}
	return rc;
}

/* The counters lower layers keep (common/stats.h). */
static int stats_render(ap_buf *out)
{
	int rc = 0;

	rc |= ap_buf_addf(
	    out,
	    "# HELP autopatch_model_calls_total Model calls answered.\n"
	    "# TYPE autopatch_model_calls_total counter\n"
	    "autopatch_model_calls_total %lld\n"
	    "# HELP autopatch_model_calls_unreported_usage_total Model calls whose reply reported "
	    "no usage, charged the most they could have used.\n"
	    "# TYPE autopatch_model_calls_unreported_usage_total counter\n"
	    "autopatch_model_calls_unreported_usage_total %lld\n"
	    "# HELP autopatch_model_errors_total Model calls that failed after their retries.\n"
	    "# TYPE autopatch_model_errors_total counter\n"
	    "autopatch_model_errors_total %lld\n"
	    "# HELP autopatch_model_tokens_total Model tokens as charged, by direction.\n"
	    "# TYPE autopatch_model_tokens_total counter\n"
	    "autopatch_model_tokens_total{direction=\"input\"} %lld\n"
	    "autopatch_model_tokens_total{direction=\"output\"} %lld\n"
	    "# HELP autopatch_model_cost_usd_total What model calls cost (priced models only).\n"
	    "# TYPE autopatch_model_cost_usd_total counter\n"
	    "autopatch_model_cost_usd_total %.6f\n",
	    (long long)ap_stat_get(AP_STAT_MODEL_CALLS),
	    (long long)ap_stat_get(AP_STAT_MODEL_CALLS_ESTIMATED),
	    (long long)ap_stat_get(AP_STAT_MODEL_ERRORS),
	    (long long)ap_stat_get(AP_STAT_MODEL_TOKENS_IN),
	    (long long)ap_stat_get(AP_STAT_MODEL_TOKENS_OUT),
	    (double)ap_stat_get(AP_STAT_MODEL_COST_MICRO) / 1e6);
	rc |= ap_buf_addf(
	    out,
	    "# HELP autopatch_sandbox_boxes_created_total Sandbox containers started.\n"
	    "# TYPE autopatch_sandbox_boxes_created_total counter\n"
	    "autopatch_sandbox_boxes_created_total %lld\n"
	    "# HELP autopatch_sandbox_boxes_removed_total Sandbox containers removed.\n"
	    "# TYPE autopatch_sandbox_boxes_removed_total counter\n"
	    "autopatch_sandbox_boxes_removed_total %lld\n"
	    "# HELP autopatch_sandbox_boxes_active Sandbox containers alive now (warm pool "
	    "included).\n"
	    "# TYPE autopatch_sandbox_boxes_active gauge\n"
	    "autopatch_sandbox_boxes_active %lld\n"
	    "# HELP autopatch_env_cache_requests_total Environment set-ups by the cache's answer.\n"
	    "# TYPE autopatch_env_cache_requests_total counter\n"
	    "autopatch_env_cache_requests_total{result=\"hit\"} %lld\n"
	    "autopatch_env_cache_requests_total{result=\"miss\"} %lld\n"
	    "# HELP autopatch_ingest_batches_isolated_total Ingest batches whose statements failed "
	    "and that were stored again one delivery at a time.\n"
	    "# TYPE autopatch_ingest_batches_isolated_total counter\n"
	    "autopatch_ingest_batches_isolated_total %lld\n",
	    (long long)ap_stat_get(AP_STAT_BOXES_CREATED),
	    (long long)ap_stat_get(AP_STAT_BOXES_REMOVED),
	    (long long)ap_stat_get(AP_STAT_BOXES_ACTIVE),
	    (long long)ap_stat_get(AP_STAT_ENV_CACHE_HITS),
	    (long long)ap_stat_get(AP_STAT_ENV_CACHE_MISSES),
	    (long long)ap_stat_get(AP_STAT_INGEST_ISOLATED));
	return rc;
}

void metrics_budget_refusal(bool repo)
{
	pthread_mutex_lock(&lock);
	if (repo)
		refused_repo++;
	else
		refused_global++;
	pthread_mutex_unlock(&lock);
}

int metrics_render(ap_buf *out, const q_stats *s, int workers, int busy, size_t max_batch)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	rc |= ap_buf_adds(out, "# HELP autopatch_webhook_deliveries_total Webhook deliveries by "
			       "event and outcome.\n"
			       "# TYPE autopatch_webhook_deliveries_total counter\n");
	for (size_t e = 0; e < N_EVENTS; e++)
		for (size_t o = 0; o < N_OUTCOMES; o++)
			if (deliveries[e][o])
				rc |= ap_buf_addf(out,
						  "autopatch_webhook_deliveries_total{event=\"%s\","
						  "outcome=\"%s\"} %llu\n",
						  events[e], outcomes[o],
						  (unsigned long long)deliveries[e][o]);
	rc |= hist_render(out, "autopatch_http_request_duration_seconds",
			  "Webhook request latency until the response is queued.", NULL, NULL,
			  &latency, 1);
	rc |= ap_buf_addf(out,
			  "# HELP autopatch_http_deadline_closed_total Connections closed because "
			  "their headers or body took longer than the deadline.\n"
			  "# TYPE autopatch_http_deadline_closed_total counter\n"
			  "autopatch_http_deadline_closed_total{phase=\"headers\"} %llu\n"
			  "autopatch_http_deadline_closed_total{phase=\"body\"} %llu\n",
			  (unsigned long long)cut_headers, (unsigned long long)cut_body);
	rc |= ap_buf_addf(out,
			  "# HELP autopatch_budget_refusals_total Job runs not started because a "
			  "daily budget could be exceeded.\n"
			  "# TYPE autopatch_budget_refusals_total counter\n"
			  "autopatch_budget_refusals_total{budget=\"global\"} %llu\n"
			  "autopatch_budget_refusals_total{budget=\"repository\"} %llu\n",
			  (unsigned long long)refused_global, (unsigned long long)refused_repo);
	rc |= hist_render(out, "autopatch_job_duration_seconds",
			  "Wall time of one run of a job, lease to outcome, by outcome.", "outcome",
			  job_outcomes, job_hist, N_JOB_OUTCOMES);
	rc |= hist_render(out, "autopatch_stage_duration_seconds",
			  "Wall time of one job stage, by stage.", "stage", stages, stage_hist,
			  N_STAGES);
	pthread_mutex_unlock(&lock);
	rc |= stats_render(out);

	rc |= ap_buf_addf(out,
			  "# HELP autopatch_jobs Jobs by state.\n"
			  "# TYPE autopatch_jobs gauge\n"
			  "autopatch_jobs{state=\"queued\"} %lld\n"
			  "autopatch_jobs{state=\"running\"} %lld\n"
			  "autopatch_jobs{state=\"succeeded\"} %lld\n"
			  "autopatch_jobs{state=\"failed\"} %lld\n"
			  "autopatch_jobs{state=\"cancelled\"} %lld\n"
			  "# HELP autopatch_workers Worker threads configured.\n"
			  "# TYPE autopatch_workers gauge\n"
			  "autopatch_workers %d\n"
			  "# HELP autopatch_workers_busy Workers running a job.\n"
			  "# TYPE autopatch_workers_busy gauge\n"
			  "autopatch_workers_busy %d\n"
			  "# HELP autopatch_ingest_max_batch Largest group-commit batch so far.\n"
			  "# TYPE autopatch_ingest_max_batch gauge\n"
			  "autopatch_ingest_max_batch %zu\n",
			  (long long)s->queued, (long long)s->running, (long long)s->succeeded,
			  (long long)s->failed, (long long)s->cancelled, workers, busy, max_batch);
	return rc ? ap_error_set(AP_ETOOBIG, "metrics text too large") : 0;
}
