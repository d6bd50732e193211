/* SPDX-License-Identifier: MIT */
/* server/queue_spend.c - the spending ledger: a job's reservation against the daily caps
 * (global and per repository) and what its runs used (queue.h, q_spend_*). */
#include "common/err.h"
#include "server/queue.h"
#include "server/queue_db.h"
#include "server/queue_internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void utc_day(int64_t now, char buf[32])
{
	time_t t = (time_t)(now / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, 32, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

/* What day carries for repo (NULL = every repository). Inside the caller's lock. */
static int day_total(queue *q, const char *day, const char *repo, int64_t *micro)
{
	return q__int(q,
		      "SELECT CAST(coalesce(sum(CASE WHEN open <> 0 AND reserved > spent THEN "
		      "reserved ELSE spent END), 0) AS BIGINT) FROM spend WHERE day=?1 AND (?2 IS "
		      "NULL OR repo=?2)",
		      ARGS(QT(day), QT(repo)), micro);
}

int q_spend_open(queue *q, int64_t job, const char *repo, const job_spend_req *req, int64_t now,
		 int64_t *row, job_spend_verdict *out)
{
	int64_t global = 0, per_repo = 0, reserve = req->priced ? req->reserve_micro : 0;
	q__res *r = NULL;
	char day[32];
	int rc;

	assert(job > 0 && repo && req);
	*row = 0;
	memset(out, 0, sizeof(*out));
	utc_day(now, day);
	pthread_mutex_lock(&q->lock);
	/* The check and the hold are one transaction that no other run's can interleave with:
	 * SQLite's BEGIN IMMEDIATE takes the write lock before reading; PostgreSQL serialises
	 * the day's check-and-hold with a transaction-scoped advisory lock on the day (released
	 * by COMMIT or ROLLBACK). Two runs cannot both read the same total and both insert. */
	if ((rc = q__sx(q, q->drv->begin_write)))
		goto out;
	if (q->drv->day_lock && (rc = q__x(q, q->drv->day_lock, ARGS(QT(day)), NULL, NULL)))
		goto out_rollback;
	if ((rc = day_total(q, day, NULL, &global)) || (rc = day_total(q, day, repo, &per_repo)))
		goto out_rollback;
	if (req->global_cap_micro > 0 && (!req->priced || global + reserve > req->global_cap_micro))
		*out = (job_spend_verdict){true, false, global, req->global_cap_micro};
	else if (req->repo_cap_micro > 0 &&
		 (!req->priced || per_repo + reserve > req->repo_cap_micro))
		*out = (job_spend_verdict){true, true, per_repo, req->repo_cap_micro};
	if (out->refused) {
		q__sx(q, "ROLLBACK");
		goto out;
	}
	if ((rc = q__x(
		 q,
		 "INSERT INTO spend(job, repo, day, reserved, priced) VALUES(?1, ?2, ?3, ?4, ?5) "
		 "RETURNING id",
		 ARGS(QI(job), QT(repo), QT(day), QI(reserve), QI(req->priced ? 1 : 0)), &r, NULL)))
		goto out_rollback;
	if (q->drv->res_rows(r) < 1) {
		rc = ap_error_set(AP_EIO, "open spending: no row id returned");
		goto out_rollback;
	}
	*row = q->drv->res_int(r, 0, 0);
	assert(*row > 0); /* a held run names its ledger row: q_spend_record needs it */
	if ((rc = q__sx(q, "COMMIT")))
		goto out_rollback;
	goto out;
out_rollback:
	*row = 0;
	q__rollback(q);
out:
	q->drv->res_free(r);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_spend_record(queue *q, int64_t row, const job_usage *u, bool close)
{
	int64_t changed = 0;
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = q__x(q,
		  "UPDATE spend SET spent=?1, tokens_in=?2, tokens_out=?3, calls=?4, "
		  "open=CASE WHEN ?5 <> 0 THEN 0 ELSE open END WHERE id=?6",
		  ARGS(QI(u->cost_micro), QI(u->tokens_in), QI(u->tokens_out), QI(u->calls),
		       QI(close ? 1 : 0), QI(row)),
		  NULL, &changed);
	q__assert_by_id(changed);
	if (rc == 0 && changed == 0)
		rc = ap_error_set(AP_ENOTFOUND, "no spending row %lld", (long long)row);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q__spend_day(queue *q, const char *repo, int64_t now, int64_t *micro)
{
	char day[32];
	int rc;

	utc_day(now, day);
	pthread_mutex_lock(&q->lock);
	rc = day_total(q, day, repo, micro);
	pthread_mutex_unlock(&q->lock);
	return rc;
}
