/* SPDX-License-Identifier: MIT */
/* server/workers.h - the worker pool: N threads lease jobs and run them (job/job.h).
 *
 * Each worker has its own database connection. A keeper thread extends the leases of running
 * jobs (heartbeats), notices cancel requests (so the job's should_stop turns true) and
 * re-queues jobs whose lease expired because their process died (on any replica sharing the
 * database). Each run is fenced by its lease's epoch: the job's fence op and every stage and
 * event write check that the lease is still current, so a run that was presumed dead (frozen
 * past its lease, its job leased again elsewhere) stops without publishing. On a shared
 * database a listener wakes idle workers when another replica queued work (a hint only: idle
 * workers poll every second anyway). The retry policy is here
 * alone: JOB_SUCCEEDED and JOB_FAILED are recorded as such, JOB_CANCELLED as cancelled (or
 * re-queued without counting the attempt when the stop was a shutdown), JOB_RETRY re-queued
 * after exponential backoff (or the job's not_before, whichever is later) until max_attempts
 * (AUTOPATCH_MAX_ATTEMPTS), then failed.
 */
#ifndef AP_WORKERS_H
#define AP_WORKERS_H

#include "job/job.h"

#include <stdint.h>

typedef struct wk_pool wk_pool;

typedef struct wk_config {
	const char *db_path;
	int workers;	       /* >= 1 */
	int64_t lease_ms;      /* lease length */
	int64_t heartbeat_ms;  /* lease extension interval; 0 = lease_ms / 3 */
	int64_t rescue_ms;     /* how often expired leases are looked for; 0 = lease_ms / 3 */
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

/* Shutdown: should_stop turns true for every running job; jobs that return within
 * grace_ms are recorded normally (a shutdown stop re-queues without counting the attempt);
 * jobs still running after that are re-queued in the database and abandoned. Frees the pool
 * unless a worker had to be abandoned (the process is about to exit). Accepts NULL. */
void wk_stop(wk_pool *p, int64_t grace_ms);

#endif
