/* SPDX-License-Identifier: MIT */
/* server/workers.h - the worker pool: N threads lease jobs and run the pipeline.
 *
 * Each worker has its own database connection. A keeper thread extends the leases of running
 * jobs (heartbeats), notices cancel requests (so q_ctl_should_stop turns true) and re-queues
 * jobs whose lease expired because their process died. Outcomes follow job.h: 0 succeeded,
 * AP_ECANCELLED cancelled (or re-queued when the stop was a shutdown), AP_EUNAVAIL,
 * AP_ETIMEOUT and AP_EIO retried with exponential backoff until max_attempts, else failed.
 */
#ifndef AP_WORKERS_H
#define AP_WORKERS_H

#include <stdint.h>

#include "server/job.h"

typedef struct wk_pool wk_pool;

typedef struct wk_config {
	const char *db_path;
	int workers;	       /* >= 1 */
	int64_t lease_ms;      /* lease length; heartbeats run every lease_ms / 3 */
	int max_attempts;      /* >= 1 */
	int64_t retry_base_ms; /* first retry delay; doubles per attempt, at most an hour */
	const char *instance;  /* unique per process, prefixes each worker's lease owner */
	job_run_fn run;
	void *ud;
} wk_config;

/* Start the pool (copies cfg). Re-queues expired leases first. */
int wk_start(wk_pool **out, const wk_config *cfg);

/* Wake idle workers: a job was queued. Safe from any thread. */
void wk_notify(wk_pool *p);

/* Number of workers running a job right now. */
int wk_busy(wk_pool *p);

/* Shutdown: q_ctl_should_stop turns true for every running job; jobs that return within
 * grace_ms are recorded normally (a shutdown stop re-queues without counting the attempt);
 * jobs still running after that are re-queued in the database and abandoned. Frees the pool
 * unless a worker had to be abandoned (the process is about to exit). Accepts NULL. */
void wk_stop(wk_pool *p, int64_t grace_ms);

#endif
