/* SPDX-License-Identifier: MIT */
/* server/queue_view.h - the queue's read side: what the console, the status page and
 * `autopatch jobs` show (counts, jobs as JSON, pages of the job list, events since an id).
 * Reads only; every write is in queue.h. */
#ifndef AP_QUEUE_VIEW_H
#define AP_QUEUE_VIEW_H

#include "server/queue.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

typedef struct q_stats {
	int64_t queued, running, succeeded, failed, cancelled;
	int64_t deliveries;
} q_stats;

int q_get_stats(queue *q, q_stats *out);

/* Jobs newest first as a JSON array of objects (id, delivery, repo, issue, trigger, state,
 * stage, attempts, created, updated (RFC 3339), created_ms, updated_ms, result, error,
 * pr_url when the job recorded it, title when its delivery carried one, and from the spending
 * ledger, over all runs: model_calls, tokens_in, tokens_out, tokens (their sum), cost_usd and cost
 * as text ("$0.0123"; null and absent when no run had a price)). id > 0 selects one job and adds
 * its "events" array ({id, time, stage, message}, oldest first). limit <= 0 means no limit.
 * *out is freed with cJSON_Delete. */
int q_jobs_json(queue *q, int64_t id, int limit, cJSON **out);

/* Which jobs q_jobs_page lists. Empty strings and zeros select everything. */
typedef struct q_job_filter {
	int64_t id;	       /* > 0: that job only */
	const char *state;     /* "queued" ... "cancelled", or NULL */
	const char *repo;      /* "owner/name", or NULL */
	int64_t before;	       /* > 0: only jobs with a smaller id (the next page) */
	int64_t changed_after; /* > 0: only jobs with an event whose id is above it */
	int limit;	       /* <= 0: no limit */
} q_job_filter;

/* A page of jobs f selects, newest first, as q_jobs_json's objects (without events; with
 * "title" when the delivery carried one, and updated_ms). *total (may be NULL) = how many jobs
 * match f's state and repo (all pages); *last_event (may be NULL) = the newest event id of
 * any job, the watermark a live list resumes from. One read snapshot. Keyset pagination: the
 * cost of a page does not grow with how far back it is. */
int q_jobs_page(queue *q, const q_job_filter *f, cJSON **out, int64_t *total, int64_t *last_event);

/* The events of job id whose event id is above after, oldest first, at most limit (<= 0: no
 * limit), as a JSON array of {id, time, stage, message}; *last (unchanged when none) gets the
 * newest event id. *out is freed with cJSON_Delete. */
int q_events_since(queue *q, int64_t id, int64_t after, int limit, cJSON **out, int64_t *last);

/* The job's state ("queued" ... "cancelled") into state[0..cap). AP_ENOTFOUND when there is
 * no such job, AP_ETOOBIG when the state does not fit (16 bytes always do). */
int q_job_state(queue *q, int64_t id, char *state, size_t cap);

#endif
