/* SPDX-License-Identifier: MIT */
/* server/queue_view.c - the read side of the queue for the console, `autopatch jobs` and
 * the status page: counts, job lists and pages as JSON, events since an id (queue_view.h). */
#include "server/queue_view.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/money.h"
#include "server/queue.h"
#include "server/queue_db.h"
#include "server/queue_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int q_get_stats(queue *q, q_stats *out)
{
	q__res *r = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&q->lock);
	if ((rc = q__x(q, "SELECT state, count(*) FROM jobs GROUP BY state", NULL, 0, &r, NULL)))
		goto out;
	for (int i = 0; i < q->drv->res_rows(r); i++) {
		const char *s = q->drv->res_text(r, i, 0);
		int64_t n = q->drv->res_int(r, i, 1);

		if (!s)
			continue;
		if (strcmp(s, "queued") == 0)
			out->queued = n;
		else if (strcmp(s, "running") == 0)
			out->running = n;
		else if (strcmp(s, "succeeded") == 0)
			out->succeeded = n;
		else if (strcmp(s, "failed") == 0)
			out->failed = n;
		else if (strcmp(s, "cancelled") == 0)
			out->cancelled = n;
	}
	q->drv->res_free(r);
	r = NULL;
	rc = q__int(q, "SELECT max(id) FROM deliveries", NULL, 0, &out->deliveries);
out:
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

static void add_time(cJSON *o, const char *key, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[64];

	gmtime_r(&t, &tm);
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	cJSON_AddStringToObject(o, key, buf);
}

static void add_text_or_null(queue *q, cJSON *o, const char *key, const q__res *r, int row, int col)
{
	const char *s = q->drv->res_text(r, row, col);

	if (s)
		cJSON_AddStringToObject(o, key, s);
	else
		cJSON_AddNullToObject(o, key);
}

/* Append the events of job id above event id after (at most limit; <= 0: all) to arr, each
 * {time, stage, message} and, with with_id, its id; *last gets the newest id. Under q->lock. */
static int events_into(queue *q, cJSON *arr, int64_t id, int64_t after, int limit, bool with_id,
		       int64_t *last)
{
	q__res *r = NULL;
	int rc;

	if ((rc = q__x(q,
		       "SELECT id, time, stage, message FROM job_events WHERE job=?1 AND id>?2 "
		       "ORDER BY id LIMIT ?3",
		       ARGS(QI(id), QI(after), QI(limit > 0 ? limit : INT64_MAX)), &r, NULL)))
		return rc;
	for (int i = 0; i < q->drv->res_rows(r); i++) {
		cJSON *e = cJSON_CreateObject();

		if (!e || !cJSON_AddItemToArray(arr, e)) {
			cJSON_Delete(e);
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			break;
		}
		*last = q->drv->res_int(r, i, 0);
		if (with_id)
			cJSON_AddNumberToObject(e, "id", (double)*last);
		add_time(e, "time", q->drv->res_int(r, i, 1));
		add_text_or_null(q, e, "stage", r, i, 2);
		add_text_or_null(q, e, "message", r, i, 3);
	}
	q->drv->res_free(r);
	return rc;
}

static int add_events(queue *q, cJSON *job, int64_t id)
{
	cJSON *arr = cJSON_AddArrayToObject(job, "events");
	int64_t last = 0;

	if (!arr)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return events_into(q, arr, id, 0, 0, true, &last);
}

/* One job row of jobs_select as JSON (see q_jobs_json). */
static void job_row(queue *q, cJSON *o, const q__res *r, int i)
{
	cJSON_AddNumberToObject(o, "id", (double)q->drv->res_int(r, i, 0));
	add_text_or_null(q, o, "delivery", r, i, 1);
	add_text_or_null(q, o, "repo", r, i, 2);
	cJSON_AddNumberToObject(o, "issue", (double)q->drv->res_int(r, i, 3));
	add_text_or_null(q, o, "trigger", r, i, 4);
	add_text_or_null(q, o, "state", r, i, 5);
	add_text_or_null(q, o, "stage", r, i, 6);
	cJSON_AddNumberToObject(o, "attempts", (double)q->drv->res_int(r, i, 7));
	add_time(o, "created", q->drv->res_int(r, i, 8));
	add_time(o, "updated", q->drv->res_int(r, i, 9));
	add_text_or_null(q, o, "result", r, i, 10);
	add_text_or_null(q, o, "error", r, i, 11);
	add_text_or_null(q, o, "feedback", r, i, 12);
	cJSON_AddBoolToObject(o, "cancel_requested", q->drv->res_int(r, i, 13) != 0);
	cJSON_AddNumberToObject(o, "created_ms", (double)q->drv->res_int(r, i, 8));
	cJSON_AddNumberToObject(o, "updated_ms", (double)q->drv->res_int(r, i, 9));
	cJSON_AddNumberToObject(o, "model_calls", (double)q->drv->res_int(r, i, 18));
	cJSON_AddNumberToObject(o, "tokens_in", (double)q->drv->res_int(r, i, 16));
	cJSON_AddNumberToObject(o, "tokens_out", (double)q->drv->res_int(r, i, 17));
	/* The ledger's totals; a job from before it keeps the count its run stored. */
	if (!q->drv->res_null(r, i, 15))
		cJSON_AddNumberToObject(
		    o, "tokens", (double)(q->drv->res_int(r, i, 16) + q->drv->res_int(r, i, 17)));
	else if (!q->drv->res_null(r, i, 20))
		cJSON_AddNumberToObject(o, "tokens", (double)q->drv->res_int(r, i, 20));
	if (!q->drv->res_null(r, i, 19) && q->drv->res_int(r, i, 19)) {
		char usd[32];

		cJSON_AddNumberToObject(o, "cost_usd", (double)q->drv->res_int(r, i, 15) / 1e6);
		ap_money_format(q->drv->res_int(r, i, 15), usd, sizeof(usd));
		cJSON_AddStringToObject(o, "cost", usd);
	} else {
		cJSON_AddNullToObject(o, "cost_usd");
	}
	if (!q->drv->res_null(r, i, 21))
		add_text_or_null(q, o, "pr_url", r, i, 21);
	if (!q->drv->res_null(r, i, 22))
		add_text_or_null(q, o, "title", r, i, 22);
}

/* The jobs f selects (id > 0: that one) into arr, newest first, and the newest event id into
 * *last_event. Under q->lock, in a read transaction. The page's jobs are picked first (the
 * CTE p, by the primary key: keyset pagination), so the spending ledger is summed for them
 * only, whatever the table's size. */
static int jobs_select(queue *q, int64_t id, const q_job_filter *f, bool events, cJSON *arr,
		       int64_t *last_event)
{
	int limit = f && f->limit > 0 ? f->limit : 0;
	q__res *r = NULL;
	int rc;

	if ((rc = q__x(
		 q,
		 "WITH p AS (SELECT * FROM jobs j WHERE (?1 = 0 OR j.id = ?1) AND "
		 "(?3 = '' OR j.state = ?3) AND (?4 = '' OR j.repo = ?4) AND "
		 "(?5 = 0 OR j.id < ?5) AND (?6 = 0 OR j.id IN (SELECT job FROM job_events "
		 "WHERE id > ?6)) ORDER BY j.id DESC LIMIT ?2) "
		 "SELECT j.id, j.delivery, j.repo, j.issue, j.trigger, j.state, j.stage, "
		 "j.attempts, j.created, j.updated, j.result, j.error, j.feedback, "
		 "j.cancel_requested, j.not_before, s.spent, s.tin, s.tout, s.calls, "
		 "s.priced, (SELECT value FROM job_state t WHERE t.job=j.id AND "
		 "t.key='tokens'), (SELECT value FROM job_state t WHERE t.job=j.id AND "
		 "t.key='pr_url'), (SELECT value FROM job_state t WHERE t.job=j.id AND "
		 "t.key='title') FROM p j LEFT JOIN (SELECT job, "
		 "CAST(sum(spent) AS BIGINT) AS spent, CAST(sum(tokens_in) AS BIGINT) AS tin, "
		 "CAST(sum(tokens_out) AS BIGINT) AS tout, CAST(sum(calls) AS BIGINT) AS calls, "
		 "max(priced) AS priced FROM spend WHERE job IN (SELECT id FROM p) GROUP BY "
		 "job) s ON s.job = j.id ORDER BY j.id DESC",
		 ARGS(QI(id), QI(limit > 0 ? limit : INT64_MAX), QT(f && f->state ? f->state : ""),
		      QT(f && f->repo ? f->repo : ""), QI(f ? f->before : 0),
		      QI(f ? f->changed_after : 0)),
		 &r, NULL)))
		return rc;
	for (int i = 0; i < q->drv->res_rows(r); i++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out;
		}
		job_row(q, o, r, i);
		if (events && id > 0 && (rc = add_events(q, o, id)))
			goto out;
	}
	q->drv->res_free(r);
	r = NULL;
	if (last_event && (rc = q__x(q, "SELECT max(id) FROM job_events", NULL, 0, &r, NULL)) == 0)
		*last_event = q->drv->res_rows(r) > 0 && !q->drv->res_null(r, 0, 0)
				  ? q->drv->res_int(r, 0, 0)
				  : 0;
out:
	q->drv->res_free(r);
	return rc;
}

/* jobs_select in one read transaction (the jobs and their events are one snapshot). */
static int jobs_json(queue *q, int64_t id, const q_job_filter *f, bool events, cJSON **out,
		     int64_t *total, int64_t *last_event)
{
	cJSON *arr = cJSON_CreateArray();
	int rc;

	*out = NULL;
	if (!arr)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_lock(&q->lock);
	if ((rc = q__sx(q, q->drv->begin_read)))
		goto out;
	rc = jobs_select(q, id, f, events, arr, last_event);
	if (rc == 0 && total)
		rc =
		    q__int(q,
			   "SELECT count(*) FROM jobs WHERE (?1 = '' OR state = ?1) AND "
			   "(?2 = '' OR repo = ?2)",
			   ARGS(QT(f && f->state ? f->state : ""), QT(f && f->repo ? f->repo : "")),
			   total);
	q__sx(q, rc ? "ROLLBACK" : "COMMIT");
out:
	pthread_mutex_unlock(&q->lock);
	if (rc) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

int q_jobs_json(queue *q, int64_t id, int limit, cJSON **out)
{
	q_job_filter f = {.id = id, .limit = limit};

	return jobs_json(q, id, &f, true, out, NULL, NULL);
}

int q_jobs_page(queue *q, const q_job_filter *f, cJSON **out, int64_t *total, int64_t *last_event)
{
	if (last_event)
		*last_event = 0;
	if (total)
		*total = 0;
	return jobs_json(q, f->id, f, false, out, total, last_event);
}

int q_events_since(queue *q, int64_t id, int64_t after, int limit, cJSON **out, int64_t *last)
{
	cJSON *arr = cJSON_CreateArray();
	int rc;

	*out = NULL;
	if (!arr)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_lock(&q->lock);
	rc = events_into(q, arr, id, after, limit, true, last);
	pthread_mutex_unlock(&q->lock);
	if (rc) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

int q_job_state(queue *q, int64_t id, char *state, size_t cap)
{
	q__res *r = NULL;
	int rc;

	if (cap)
		state[0] = '\0';
	pthread_mutex_lock(&q->lock);
	rc = q__x(q, "SELECT state FROM jobs WHERE id=?1", ARGS(QI(id)), &r, NULL);
	if (rc == 0 && q->drv->res_rows(r) == 0)
		rc = ap_error_set(AP_ENOTFOUND, "no job %lld", (long long)id);
	else if (rc == 0 && cap)
		rc = ap_fmt(state, cap, "%s", q->drv->res_text(r, 0, 0)); /* never a cut state */
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}
