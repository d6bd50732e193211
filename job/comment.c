/* SPDX-License-Identifier: MIT */
/* job/comment.c - the job's one progress comment, written by a thread of its own (see
 * comment.h): the eyes reaction, create-or-edit with pacing, finding its own comment again on
 * a re-run. */
#include "job/comment.h"

#include "common/clock.h"
#include "common/err.h"
#include "common/jsonnum.h"
#include "common/log.h"
#include "github/api.h"
#include "github/rest.h"
#include "job/progress.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CREATE_ROUNDS 3 /* posts of one body when GitHub may have applied the earlier one */

/* The progress comment is written by a per-job thread, so GitHub's write spacing and a slow
 * API never hold up the job: the job hands over the latest rendering, the thread writes the
 * newest one at most every comment_interval_ms (the final one at once) and drops the rest. */
struct job_comment {
	pthread_t th;
	bool inited; /* mu and cv exist */
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *pending;	    /* the newest body not yet written */
	bool stop;	    /* write what is pending, then exit */
	bool hold;	    /* publishing: keep GitHub's write slot free for the push and the PR */
	int64_t comment_id; /* the progress comment, once it exists */
	bool id_new;	    /* comment_id changed: the job persists it in its state */
	/* Set before the thread starts, then read-only: */
	gh_rest *rest; /* the thread's own client (a gh_rest is single-threaded) */
	const job_info *job;
	int64_t on; /* the issue or PR number the comment is on */
	int64_t interval_ms;
	bool react;	    /* add the eyes reaction first */
	bool find_existing; /* a re-run without a stored id: look for our comment first */
	const comment_fence *fence;
	bool fenced; /* the fence refused once: nothing more is written (writer thread only) */
};

/* The fencing check before a write (comment_fence); once refused, always refused. */
static bool may_write(job_comment *c)
{
	int rc;

	if (c->fenced)
		return false;
	if (!c->fence || !c->fence->check)
		return true;
	rc = c->fence->check(c->fence->ud);
	if (rc == 0)
		return true;
	c->fenced = true;
	ap_log(AP_LOG_WARN, c->job->delivery, c->job->id,
	       "progress comment not written: the lease is not current (%s)", ap_error_name(rc));
	ap_error_clear();
	return false;
}

/* The REST client's write guard (gh_rest_set_write_guard): the same check, asked again as the
 * request goes on the wire. */
static int write_guard(void *ud)
{
	if (may_write(ud))
		return 0;
	return ap_error_set(AP_ESTALE, "the job's lease is not current");
}

static void react(job_comment *c)
{
	const job_info *job = c->job;
	int rc;

	if (!may_write(c))
		return;
	if (job->trigger_comment_id > 0 &&
	    strcmp(job->event ? job->event : "", "issue_comment") == 0)
		rc = gh_reaction_add_comment(c->rest, job->repo, job->trigger_comment_id, "eyes");
	else if (job->trigger_comment_id > 0)
		return; /* review comments have their own reaction endpoint; not worth a failure */
	else
		rc = gh_reaction_add_issue(c->rest, job->repo, job->issue, "eyes");
	if (rc) {
		ap_log(AP_LOG_WARN, job->delivery, job->id, "eyes reaction failed: %s",
		       ap_error_last());
		ap_error_clear();
	}
}

/* Find autopatch's own comment of job job_id on issue or PR `on`: a comment by a bot whose
 * body starts with marker and names "(job N)" before its first blank line (the header, which
 * autopatch writes itself). *id is its id (the newest when several), 0 when there is none. 0
 * or the error of listing the comments. */
static int comment_find(gh_rest *r, const char *repo, int64_t on, const char *marker,
			int64_t job_id, int64_t *id)
{
	char needle[64];
	cJSON *list = NULL, *it;
	int rc;

	*id = 0;
	snprintf(needle, sizeof(needle), "(job %" PRId64 ")", job_id);
	rc = gh_comments_list(r, repo, on, &list);
	if (rc)
		return rc;
	cJSON_ArrayForEach (it, list) {
		const char *body = cJSON_GetStringValue(cJSON_GetObjectItem(it, "body"));
		cJSON *user = cJSON_GetObjectItem(it, "user");
		const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(user, "type"));
		cJSON *cid = cJSON_GetObjectItem(it, "id");
		const char *end = body ? strstr(body, "\n\n") : NULL;
		int64_t cid_n;

		/* The marker, and the job number in the header before the first blank line: text
		 * further down (which the model may have written) never counts. */
		if (body && !end)
			end = body + strlen(body);
		if (body && type && strcmp(type, "Bot") == 0 && ap_json_int(cid, &cid_n) &&
		    strncmp(body, marker, strlen(marker)) == 0 &&
		    memmem(body, (size_t)(end - body), needle, strlen(needle)))
			*id = cid_n;
	}
	cJSON_Delete(list);
	return 0;
}

int comment_create_once(gh_rest *r, const char *repo, int64_t on, const char *marker,
			int64_t job_id, const char *body, bool look_first, int64_t *id)
{
	gh_comment out = {0};
	int rc = 0;

	*id = 0;
	for (int round = 0; round < CREATE_ROUNDS; round++) {
		if (look_first || round > 0) {
			rc = comment_find(r, repo, on, marker, job_id, id);
			if (rc)
				return rc; /* not known whether it exists: do not post */
			if (*id > 0) {
				rc = gh_comment_update(r, repo, *id, body, NULL);
				if (rc != AP_ENOTFOUND)
					return rc;
				*id = 0; /* deleted meanwhile: post it again */
				ap_error_clear();
			}
		}
		rc = gh_comment_create(r, repo, on, body, &out);
		if (rc == 0)
			*id = out.id;
		gh_comment_release(&out);
		if (rc == 0 || !gh_rest_maybe_applied(r))
			return rc;
	}
	return rc;
}

/* Create or edit the comment with body; returns the comment id to use next (0: none yet). A
 * failure never fails the job (GitHub may be briefly unreachable): the next edit carries the
 * whole state anyway. A re-run that lost the comment id (crash between create and persist),
 * and any write after a create that GitHub may have applied, first finds the comment by the
 * marker and the job number, so there is never a second one. */
static int64_t cm_write(job_comment *c, int64_t id, const char *body)
{
	int rc = 0;

	if (!may_write(c))
		return id;
	if (id > 0) {
		rc = gh_comment_update(c->rest, c->job->repo, id, body, NULL);
		if (rc == AP_ENOTFOUND || rc == AP_EDENIED) { /* deleted, or not ours: a new one */
			id = 0;
			rc = 0;
			ap_error_clear();
		}
	}
	if (id <= 0 && rc == 0 && may_write(c)) {
		rc = comment_create_once(c->rest, c->job->repo, c->on, PROGRESS_MARKER, c->job->id,
					 body, c->find_existing, &id);
		/* After any failed create (it may have been applied, or the lookup failed), the
		 * next write looks first. */
		c->find_existing = rc != 0;
		if (rc)
			id = 0;
	}
	if (rc) {
		ap_log(AP_LOG_WARN, c->job->delivery, c->job->id,
		       "progress comment not updated: %s", ap_error_last());
		ap_error_clear();
	}
	return id;
}

static void *cm_main(void *arg)
{
	job_comment *c = arg;
	int64_t id;

	if (c->react)
		react(c);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		char *body;
		struct timespec until;
		int64_t next;

		while ((!c->pending || c->hold) && !c->stop)
			pthread_cond_wait(&c->cv, &c->mu);
		if (!c->pending)
			break;
		body = c->pending;
		c->pending = NULL;
		id = c->comment_id;
		pthread_mutex_unlock(&c->mu);
		id = cm_write(c, id, body);
		free(body);
		pthread_mutex_lock(&c->mu);
		if (id != c->comment_id) {
			c->comment_id = id;
			c->id_new = true;
		}
		/* Pace the edits; a stop (the final state) is written at once. */
		next = ap_wall_ms() + c->interval_ms;
		until.tv_sec = (time_t)(next / 1000);
		until.tv_nsec = (long)(next % 1000) * 1000000L;
		while (!c->stop && ap_wall_ms() < next)
			if (pthread_cond_timedwait(&c->cv, &c->mu, &until) != 0)
				break;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int comment_new(job_comment **out, const ap_config *cfg, const gh_creds *creds, const job_info *job,
		const comment_fence *fence, int64_t stored_id, int64_t interval_ms)
{
	job_comment *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ap_error_set(AP_ENOMEM, "out of memory");
	*out = c;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->inited = true;
	c->job = job;
	c->fence = fence;
	c->on = job->issue;
	c->interval_ms = interval_ms;
	c->comment_id = stored_id;
	c->react = job->attempts <= 1;
	c->find_existing = stored_id <= 0 && job->attempts > 1;
	rc = gh_rest_new(&c->rest, cfg, creds, job->installation_id);
	if (rc)
		return rc;
	if (fence && fence->check)
		gh_rest_set_write_guard(c->rest, write_guard, c);
	rc = pthread_create(&c->th, NULL, cm_main, c);
	if (rc)
		return ap_error_set(AP_ENOMEM, "cannot start the comment thread: %s", strerror(rc));
	c->running = true;
	return 0;
}

void comment_free(job_comment *c)
{
	int64_t ignored;

	if (!c)
		return;
	comment_finish(c, &ignored);
	free(c->pending);
	c->pending = NULL;
	gh_rest_free(c->rest);
	c->rest = NULL;
	if (c->inited) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		c->inited = false;
	}
	free(c);
}

void comment_finish(job_comment *c, int64_t *new_id)
{
	*new_id = 0;
	if (!c || !c->running)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->th, NULL);
	c->running = false;
	if (c->id_new && c->comment_id > 0)
		*new_id = c->comment_id;
	c->id_new = false;
}

void comment_post(job_comment *c, char *body, int64_t *new_id)
{
	*new_id = 0;
	if (!c || !c->running) {
		free(body);
		return;
	}
	pthread_mutex_lock(&c->mu);
	free(c->pending);
	c->pending = body;
	pthread_cond_signal(&c->cv);
	if (c->id_new) {
		*new_id = c->comment_id;
		c->id_new = false;
	}
	pthread_mutex_unlock(&c->mu);
}

void comment_hold(job_comment *c)
{
	if (!c || !c->running)
		return;
	pthread_mutex_lock(&c->mu);
	c->hold = true;
	pthread_mutex_unlock(&c->mu);
}
