/* SPDX-License-Identifier: MIT */
/* server/job.h - what a worker hands the pipeline: one leased job and a control handle.
 *
 * The queue (server/queue.c) owns persistence; the pipeline (agents/pipeline.c) does the work.
 * They meet here so neither depends on the other's internals. Until the pipeline exists the
 * worker runs a placeholder that fails every job with "pipeline not available".
 */
#ifndef AP_JOB_H
#define AP_JOB_H

#include <stdbool.h>
#include <stdint.h>

enum job_trigger { JOB_TRIGGER_LABEL, JOB_TRIGGER_COMMENT, JOB_TRIGGER_PR_FEEDBACK };

/* A leased job, read-only for the pipeline. Strings live as long as the job. */
typedef struct q_job {
	int64_t id;
	const char *delivery;        /* X-GitHub-Delivery that created it */
	const char *event;           /* X-GitHub-Event */
	const char *repo;            /* "owner/name" */
	int64_t repo_id;
	int64_t installation_id;
	int64_t issue;               /* issue or pull-request number */
	enum job_trigger trigger;
	const char *feedback;        /* comment text after "/autopatch" (may be ""), else NULL */
	int64_t trigger_comment_id;  /* the comment to react to, 0 for a label trigger */
	const char *payload;         /* the raw, verified delivery body (JSON) */
	int attempts;                /* 1 on the first run */
} q_job;

/* Control handle the worker passes to the pipeline. */
typedef struct q_ctl q_ctl;

enum job_stage { STAGE_PREPARING, STAGE_PLANNING, STAGE_BUILDING, STAGE_TESTING, STAGE_PUBLISHING };

/* Record a stage transition (a row in job_events; also extends the lease). msg may be NULL. */
int q_ctl_stage(q_ctl *ctl, enum job_stage stage, const char *msg);

/* Append an event row without changing stage (progress detail, Tester verdicts). */
int q_ctl_event(q_ctl *ctl, const char *msg);

/* True once the job was cancelled (label removed, /autopatch stop) or the server is shutting
 * down; the pipeline checks it between steps and returns AP_ECANCELLED. */
bool q_ctl_should_stop(q_ctl *ctl);

/* True when the stop is a cancellation by a user (not a shutdown that will re-queue). */
bool q_ctl_cancelled(q_ctl *ctl);

/* Per-job key/value state that survives a crash and a re-run (e.g. the progress comment's id,
 * the PR number), so a retried job edits the same comment and never opens a second PR. */
int q_ctl_state_set(q_ctl *ctl, const char *key, const char *value);
/* Returns a malloc'd copy (caller frees) or NULL when unset. */
char *q_ctl_state_get(q_ctl *ctl, const char *key);

/* The pipeline's entry point, registered by `serve`. Returns 0 on success with *result a
 * malloc'd one-line summary (e.g. the PR URL), or a negative code with *result the reason
 * (already redacted). The worker records the outcome: 0 → succeeded, AP_ECANCELLED →
 * cancelled, AP_EUNAVAIL/AP_ETIMEOUT/AP_EIO → retried with backoff up to the attempt limit,
 * anything else → failed. */
typedef int (*job_run_fn)(const q_job *job, q_ctl *ctl, void *ud, char **result);

#endif
