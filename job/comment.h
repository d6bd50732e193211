/* SPDX-License-Identifier: MIT */
/* job/comment.h - the progress comment writer of one job.
 *
 * GitHub's write spacing and a slow API must never hold up the job, so the comment is written
 * by a per-job thread: the job hands over the latest rendering (comment_post), the thread
 * writes the newest one at most every interval (the final one at once) and drops the rest.
 * The first write reacts with :eyes: on a first attempt; a re-run that lost the comment's id
 * finds its comment by the marker and the job number instead of posting a second one. A
 * failed write never fails the job: the next edit carries the whole state anyway.
 */
#ifndef AP_JOB_COMMENT_H
#define AP_JOB_COMMENT_H

#include <stdint.h>

#include "common/config.h"
#include "github/creds.h"
#include "job/job.h"

typedef struct job_comment job_comment;

/* The fencing check the writer makes on its own thread right before every write (the
 * reaction, each create or edit): 0 while the job's lease is current; after any non-zero the
 * writer writes nothing more (a stale run must not publish). Thread-safe (job_ctl's fence). */
typedef struct comment_fence {
	int (*check)(void *ud);
	void *ud;
} comment_fence;

/* Start the writer for job, on the job's issue or PR. stored_id is the comment id kept in the
 * job's state (0: none yet). cfg, creds, job and fence are borrowed and must outlive the
 * writer. On error *out may still hold a writer to free with comment_free(). */
int comment_new(job_comment **out, const ap_config *cfg, const gh_creds *creds, const job_info *job,
		const comment_fence *fence, int64_t stored_id, int64_t interval_ms);

/* Hand over a new body (ownership passes; freed if the writer is not running). *new_id is
 * set to a comment id the job must persist in its state when it changed since the last call,
 * else 0. Cheap; never blocks on GitHub. */
void comment_post(job_comment *c, char *body, int64_t *new_id);

/* Publishing: stop writing (keep GitHub's write slot free for the push and the PR) until
 * comment_finish. */
void comment_hold(job_comment *c);

/* Write what is pending now and stop the thread. *new_id as comment_post. */
void comment_finish(job_comment *c, int64_t *new_id);

/* Stops the thread if running (writing what is pending) and frees. Accepts NULL. */
void comment_free(job_comment *c);

#endif
