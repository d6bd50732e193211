/* SPDX-License-Identifier: MIT */
/* server/metrics.c - counters and the latency histogram (see metrics.h). */
#include "server/metrics.h"
#include "common/err.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t deliveries[N_EVENTS][N_OUTCOMES];
static uint64_t hist[N_BUCKETS];
static uint64_t hist_count;
static double hist_sum;
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

void metrics_latency(double seconds)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < N_BUCKETS; i++)
		if (seconds <= buckets[i])
			hist[i]++;
	hist_count++;
	hist_sum += seconds;
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
	rc |= ap_buf_adds(out, "# HELP autopatch_http_request_duration_seconds Webhook request "
			       "latency until the response is queued.\n"
			       "# TYPE autopatch_http_request_duration_seconds histogram\n");
	for (size_t i = 0; i < N_BUCKETS; i++)
		rc |= ap_buf_addf(out,
				  "autopatch_http_request_duration_seconds_bucket{le=\"%g\"} "
				  "%llu\n",
				  buckets[i], (unsigned long long)hist[i]);
	rc |= ap_buf_addf(out,
			  "autopatch_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
			  "autopatch_http_request_duration_seconds_sum %.6f\n"
			  "autopatch_http_request_duration_seconds_count %llu\n",
			  (unsigned long long)hist_count, hist_sum, (unsigned long long)hist_count);
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
	pthread_mutex_unlock(&lock);

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
