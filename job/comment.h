/* SPDX-License-Identifier: MIT */
/* job/comment.h - the progress comment writer of one job.
 *
 * GitHub's write spacing and a slow API must never hold up the job, so the comment is written
 * by a per-job thread: the job hands over the latest rendering (comment_post), the thread
 * writes the newest one at most every interval (the final one at once) and drops the rest.
 * The first write reacts with :eyes: on a first attempt; a re-run that lost the comment's id,
 * and a write after a create that GitHub answered with a 5xx (it may have made the comment),
 * find the comment by the marker and the job number instead of posting a second one. A failed
 * write never fails the job: the next edit carries the whole state anyway.
 */
#ifndef AP_JOB_COMMENT_H
#define AP_JOB_COMMENT_H

#include "common/config.h"
#include "github/creds.h"
#include "github/rest.h"
#include "job/job.h"

#include <stdbool.h>
#include <stdint.h>

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

/* Post body (which starts with marker and names "(job job_id)" in its header) on `on`
 * without ever making a second copy: with look_first, and after a create that GitHub may have
 * applied (gh_rest_maybe_applied(): a 5xx, or a connection cut once the request was out), the
 * comment is first looked up (a comment by a bot whose body starts with marker and names
 * "(job N)" in its header; the newest when several); one that exists is edited to body instead.
 * At most 3 creates. A failed lookup is returned as is, without posting. *id is the comment's
 * id (0 on failure). 0 or the error of the last call. */
int comment_create_once(gh_rest *r, const char *repo, int64_t on, const char *marker,
			int64_t job_id, const char *body, bool look_first, int64_t *id);

#endif
