/* SPDX-License-Identifier: MIT */
/* server/queue.c - the SQLite job queue (see queue.h and docs/internals/queue.md). */
#include "server/queue.h"
#include "common/err.h"
#include "common/money.h"
#include "server/webhook.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Texts stored per job are capped so one runaway result cannot bloat the database. */
#define Q_TEXT_MAX (16 * 1024)

/* Prepared statements are cached per connection, keyed by the address of their SQL literal:
 * preparing costs more than running most of these statements. */
#define Q_STMT_CACHE 64

struct queue {
	sqlite3 *db;
	pthread_mutex_t lock;
	char *path;
	struct {
		const char *sql;
		sqlite3_stmt *st;
	} cache[Q_STMT_CACHE];
	int ncache;
};

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS deliveries("
    " id INTEGER PRIMARY KEY,"
    " delivery TEXT NOT NULL UNIQUE,"
    " event TEXT NOT NULL,"
    " body BLOB NOT NULL,"
    " received INTEGER NOT NULL,"
    " outcome TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs("
    " id INTEGER PRIMARY KEY,"
    " delivery TEXT NOT NULL,"
    " event TEXT NOT NULL,"
    " repo TEXT NOT NULL,"
    " repo_id INTEGER NOT NULL DEFAULT 0,"
    " installation_id INTEGER NOT NULL DEFAULT 0,"
    " issue INTEGER NOT NULL,"
    " trigger TEXT NOT NULL,"
    " feedback TEXT,"
    " trigger_comment_id INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL DEFAULT 'queued'"
    "  CHECK(state IN ('queued','running','succeeded','failed','cancelled')),"
    " stage TEXT,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " lease_owner TEXT,"
    " lease_until INTEGER,"
    " not_before INTEGER NOT NULL DEFAULT 0,"
    " created INTEGER NOT NULL,"
    " updated INTEGER NOT NULL,"
    " result TEXT,"
    " error TEXT,"
    " cancel_requested INTEGER NOT NULL DEFAULT 0);"
    /* Semantic dedupe, enforced by the database too: one active job per (repo, issue). */
    "CREATE UNIQUE INDEX IF NOT EXISTS jobs_active ON jobs(repo, issue)"
    " WHERE state IN ('queued','running');"
    "CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(state, not_before, id);"
    "CREATE TABLE IF NOT EXISTS job_events("
    " id INTEGER PRIMARY KEY,"
    " job INTEGER NOT NULL,"
    " time INTEGER NOT NULL,"
    " stage TEXT,"
    " message TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS job_events_job ON job_events(job, id);"
    "CREATE TABLE IF NOT EXISTS job_state("
    " job INTEGER NOT NULL,"
    " key TEXT NOT NULL,"
    " value TEXT NOT NULL,"
    " PRIMARY KEY(job, key));"
    /* The spending ledger (docs/agents.md "Costs and budgets"): one row per run of a job.
     * Money in micro-dollars. A day carries spent for closed rows and max(reserved, spent)
     * for open ones, so a run whose process died keeps its hold (fail closed). */
    "CREATE TABLE IF NOT EXISTS spend("
    " id INTEGER PRIMARY KEY,"
    " job INTEGER NOT NULL,"
    " repo TEXT NOT NULL,"
    " day TEXT NOT NULL," /* UTC YYYY-MM-DD of the run's start */
    " reserved INTEGER NOT NULL,"
    " spent INTEGER NOT NULL DEFAULT 0,"
    " tokens_in INTEGER NOT NULL DEFAULT 0,"
    " tokens_out INTEGER NOT NULL DEFAULT 0,"
    " calls INTEGER NOT NULL DEFAULT 0,"
    " priced INTEGER NOT NULL,"
    " open INTEGER NOT NULL DEFAULT 1);"
    "CREATE INDEX IF NOT EXISTS spend_day ON spend(day, repo);"
    "CREATE INDEX IF NOT EXISTS spend_job ON spend(job);";

static const char *stage_names[] = {"preparing", "planning", "building", "testing", "publishing"};

const char *q_stage_name(enum job_stage stage)
{
	if ((unsigned)stage < sizeof(stage_names) / sizeof(stage_names[0]))
		return stage_names[stage];
	return "unknown";
}

int64_t q_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t q_backoff_ms(int64_t base_ms, int attempts)
{
	int64_t d = base_ms;

	for (int i = 1; i < attempts && d < 3600000; i++)
		d *= 2;
	return d > 3600000 ? 3600000 : d;
}

static int db_fail(queue *q, const char *what)
{
	int code = sqlite3_errcode(q->db);

	return ap_error_set(code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_BUSY ||
				    code == SQLITE_LOCKED
				? AP_EIO
				: AP_EINVAL,
			    "database %s: %s failed: %s", q->path, what, sqlite3_errmsg(q->db));
}

static int exec_raw(queue *q, const char *sql)
{
	if (sqlite3_exec(q->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_fail(q, sql);
	return 0;
}

/* The cached statement for sql (a string literal), reset and unbound. Callers "release" it
 * with sqlite3_reset(), never finalize it; q_close() does. */
static int prep(queue *q, sqlite3_stmt **st, const char *sql)
{
	for (int i = 0; i < q->ncache; i++)
		if (q->cache[i].sql == sql) {
			*st = q->cache[i].st;
			sqlite3_reset(*st);
			sqlite3_clear_bindings(*st);
			return 0;
		}
	assert(q->ncache < Q_STMT_CACHE);
	if (sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return db_fail(q, "prepare");
	q->cache[q->ncache].sql = sql;
	q->cache[q->ncache].st = *st;
	q->ncache++;
	return 0;
}

/* A single statement without results (BEGIN, COMMIT, SAVEPOINT ...), from the cache. */
static int exec(queue *q, const char *sql)
{
	sqlite3_stmt *st;
	int rc;

	if ((rc = prep(q, &st, sql)))
		return rc;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_fail(q, sql);
}

/* Bind a text that may be NULL, capped at Q_TEXT_MAX bytes. */
static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
	size_t n;

	if (!s) {
		sqlite3_bind_null(st, i);
		return;
	}
	n = strlen(s);
	sqlite3_bind_text(st, i, s, (int)(n > Q_TEXT_MAX ? Q_TEXT_MAX : n), SQLITE_TRANSIENT);
}

/* Step a statement that returns no rows, then reset it. */
static int run(queue *q, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return db_fail(q, what);
	return 0;
}

void q_close(queue *q)
{
	if (!q)
		return;
	for (int i = 0; i < q->ncache; i++)
		sqlite3_finalize(q->cache[i].st);
	sqlite3_close_v2(q->db);
	pthread_mutex_destroy(&q->lock);
	free(q->path);
	free(q);
}

int q_open(queue **out, const char *path, enum q_open_mode mode)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
	struct stat stbuf;
	queue *q;
	int rc;

	*out = NULL;
	if (mode == Q_OPEN_EXISTING && stat(path, &stbuf) != 0)
		return ap_error_set(AP_ENOTFOUND, "no database at %s (set AUTOPATCH_DB)", path);
	q = calloc(1, sizeof(*q));
	if (!q)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_init(&q->lock, NULL);
	q->path = strdup(path);
	if (!q->path) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto fail;
	}
	if (mode == Q_OPEN_CREATE)
		flags |= SQLITE_OPEN_CREATE;
	if (sqlite3_open_v2(path, &q->db, flags, NULL) != SQLITE_OK) {
		rc = ap_error_set(AP_EIO, "cannot open database %s: %s", path,
				  q->db ? sqlite3_errmsg(q->db) : "out of memory");
		goto fail;
	}
	if (sqlite3_db_readonly(q->db, "main") == 1) {
		rc = ap_error_set(AP_EIO, "database %s is read-only", path);
		goto fail;
	}
	sqlite3_busy_timeout(q->db, 10000);
	sqlite3_extended_result_codes(q->db, 0);
	/* WAL: readers never block the writer. synchronous=FULL: a COMMIT is on disk before the
	 * 2xx goes out (group commit pays one fsync per batch, not per delivery). */
	if ((rc = exec_raw(q, "PRAGMA journal_mode=WAL")) ||
	    (rc = exec_raw(q, "PRAGMA synchronous=FULL")) || (rc = exec_raw(q, "BEGIN IMMEDIATE")))
		goto fail_msg;
	if ((rc = exec_raw(q, schema))) {
		sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
		goto fail_msg;
	}
	if ((rc = exec_raw(q, "COMMIT")))
		goto fail_msg;
	*out = q;
	return 0;
fail_msg:
	rc = ap_error_set(AP_EIO, "cannot use database %s: %s", path, sqlite3_errmsg(q->db));
fail:
	q_close(q);
	return rc;
}

int q_autocheckpoint(queue *q, int pages)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = sqlite3_wal_autocheckpoint(q->db, pages) == SQLITE_OK ? 0
								   : db_fail(q, "autocheckpoint");
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_checkpoint(queue *q)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	rc = sqlite3_wal_checkpoint_v2(q->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	pthread_mutex_unlock(&q->lock);
	return rc == SQLITE_OK || rc == SQLITE_BUSY ? 0 : db_fail(q, "checkpoint");
}

/* --- intake ---------------------------------------------------------------------------- */

static int add_event(queue *q, int64_t job, const char *stage, const char *msg, int64_t now)
{
	sqlite3_stmt *st;
	int rc;

	if ((rc = prep(q, &st,
		       "INSERT INTO job_events(job, time, stage, message) "
		       "VALUES(?,?,?,?)")))
		return rc;
	sqlite3_bind_int64(st, 1, job);
	sqlite3_bind_int64(st, 2, now);
	bind_text(st, 3, stage);
	bind_text(st, 4, msg ? msg : "");
	return run(q, st, "insert event");
}

static int find_active(queue *q, const char *repo, int64_t issue, int64_t *id)
{
	sqlite3_stmt *st;
	int rc;

	*id = 0;
	if ((rc = prep(q, &st,
		       "SELECT id FROM jobs WHERE repo=? AND issue=? AND "
		       "state IN ('queued','running') LIMIT 1")))
		return rc;
	bind_text(st, 1, repo);
	sqlite3_bind_int64(st, 2, issue);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*id = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(q, "find active job");
}

static int cancel_locked(queue *q, const char *repo, int64_t issue, const char *why, int64_t now,
			 int *count)
{
	sqlite3_stmt *st;
	int64_t id;
	int rc, n = 0;
	bool running, has_comment;

	if ((rc = prep(q, &st,
		       "SELECT id, state='running', EXISTS(SELECT 1 FROM job_state s "
		       "WHERE s.job=jobs.id AND s.key='comment_id') FROM jobs WHERE repo=? "
		       "AND issue=? AND state IN ('queued','running')")))
		return rc;
	bind_text(st, 1, repo);
	sqlite3_bind_int64(st, 2, issue);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(st);
		if (count)
			*count = 0;
		return rc == SQLITE_DONE ? 0 : db_fail(q, "find job to cancel");
	}
	id = sqlite3_column_int64(st, 0);
	running = sqlite3_column_int(st, 1);
	has_comment = sqlite3_column_int(st, 2);
	sqlite3_reset(st);

	if (running)
		rc = prep(q, &st, "UPDATE jobs SET cancel_requested=1, updated=? WHERE id=?");
	else if (has_comment)
		/* A job waiting for a retry already told the issue "autopatch will retry": it is
		 * leased at once so the pipeline edits that comment to say cancelled (a worker
		 * sees cancel_requested before running it). */
		rc = prep(q, &st,
			  "UPDATE jobs SET cancel_requested=1, not_before=0, updated=? WHERE id=?");
	else
		rc = prep(q, &st,
			  "UPDATE jobs SET state='cancelled', cancel_requested=1, "
			  "error='cancelled', lease_owner=NULL, lease_until=NULL, updated=? "
			  "WHERE id=?");
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_int64(st, 2, id);
	if ((rc = run(q, st, "cancel job")))
		return rc;
	n = 1;
	if ((rc = add_event(q, id, NULL, why, now)))
		return rc;
	if (count)
		*count = n;
	return 0;
}

/* Apply one delivery inside the open transaction. */
/* Apply one delivery inside the open transaction. The raw body is kept for deliveries that
 * do something (a new job reads its payload from it; a cancel is worth auditing); ignored
 * deliveries and triggers for an already active job keep only their metadata, so the noise a
 * busy installation sends does not grow the database by a payload each. */
static int ingest_one(queue *q, q_delivery *d, int64_t now)
{
	sqlite3_stmt *st;
	int64_t active = 0;
	const char *outcome;
	bool keep_body;
	int rc;

	if (d->kind == Q_TRIGGER && (rc = find_active(q, d->repo, d->issue, &active)))
		return rc;
	if (d->kind == Q_RECORD)
		outcome = d->note ? d->note : "ignored";
	else if (d->kind == Q_CANCEL)
		outcome = "cancel";
	else
		outcome = active ? "active job" : "queued";
	keep_body = d->kind == Q_CANCEL || (d->kind == Q_TRIGGER && !active);
	if ((rc = prep(q, &st,
		       "INSERT INTO deliveries(delivery, event, body, received, outcome) "
		       "VALUES(?,?,?,?,?) ON CONFLICT(delivery) DO NOTHING")))
		return rc;
	bind_text(st, 1, d->delivery);
	bind_text(st, 2, d->event);
	if (keep_body && d->len)
		sqlite3_bind_blob64(st, 3, d->body, d->len, SQLITE_STATIC);
	else
		sqlite3_bind_zeroblob(st, 3, 0);
	sqlite3_bind_int64(st, 4, now);
	bind_text(st, 5, outcome);
	if ((rc = run(q, st, "insert delivery")))
		return rc;
	if (sqlite3_changes(q->db) == 0) {
		d->result = Q_DUPLICATE;
		return 0;
	}
	if (d->kind == Q_RECORD) {
		d->result = Q_RECORDED;
		return 0;
	}
	if (d->kind == Q_CANCEL) {
		char why[160];

		snprintf(why, sizeof(why), "cancel requested by delivery %.100s", d->delivery);
		if ((rc = cancel_locked(q, d->repo, d->issue, why, now, &d->ncancelled)))
			return rc;
		d->result = Q_CANCELLED;
		return 0;
	}
	if (active) {
		d->result = Q_ACTIVE;
		d->job_id = active;
		return 0;
	}
	if ((rc = prep(q, &st,
		       "INSERT INTO jobs(delivery, event, repo, repo_id, installation_id, "
		       "issue, trigger, feedback, trigger_comment_id, created, updated) "
		       "VALUES(?,?,?,?,?,?,?,?,?,?,?)")))
		return rc;
	bind_text(st, 1, d->delivery);
	bind_text(st, 2, d->event);
	bind_text(st, 3, d->repo);
	sqlite3_bind_int64(st, 4, d->repo_id);
	sqlite3_bind_int64(st, 5, d->installation_id);
	sqlite3_bind_int64(st, 6, d->issue);
	bind_text(st, 7, wh_trigger_name(d->trigger));
	bind_text(st, 8, d->feedback);
	sqlite3_bind_int64(st, 9, d->comment_id);
	sqlite3_bind_int64(st, 10, now);
	sqlite3_bind_int64(st, 11, now);
	if ((rc = run(q, st, "insert job")))
		return rc;
	d->job_id = sqlite3_last_insert_rowid(q->db);
	d->result = Q_QUEUED;
	return add_event(q, d->job_id, NULL, "queued", now);
}

int q_ingest(queue *q, q_delivery **items, size_t n, int64_t now)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out_fail_all;
	for (size_t i = 0; i < n; i++) {
		items[i]->result = Q_FAILED;
		items[i]->job_id = 0;
		items[i]->ncancelled = 0;
		if ((rc = exec(q, "SAVEPOINT item")))
			goto out_rollback;
		if (ingest_one(q, items[i], now)) {
			items[i]->result = Q_FAILED;
			if ((rc = exec(q, "ROLLBACK TO item")))
				goto out_rollback;
		}
		if ((rc = exec(q, "RELEASE item")))
			goto out_rollback;
	}
	if ((rc = exec(q, "COMMIT")))
		goto out_rollback;
	pthread_mutex_unlock(&q->lock);
	return 0;
out_rollback:
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out_fail_all:
	for (size_t i = 0; i < n; i++)
		items[i]->result = Q_FAILED;
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- workers --------------------------------------------------------------------------- */

static char *col_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s ? strdup((const char *)s) : NULL;
}

void q_job_free(job_info *job)
{
	if (!job)
		return;
	free((char *)job->delivery);
	free((char *)job->event);
	free((char *)job->repo);
	free((char *)job->feedback);
	free((char *)job->payload);
	free(job);
}

int q_lease(queue *q, const char *owner, int64_t lease_ms, int64_t now, job_info **out)
{
	sqlite3_stmt *st = NULL;
	job_info *job = NULL;
	int64_t id;
	int rc, t;
	char msg[160];

	*out = NULL;
	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out_unlock;
	if ((rc = prep(q, &st,
		       "SELECT id FROM jobs WHERE state='queued' AND not_before<=? "
		       "ORDER BY not_before, id LIMIT 1")))
		goto out_rollback;
	sqlite3_bind_int64(st, 1, now);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = rc == SQLITE_DONE ? AP_ENOTFOUND : db_fail(q, "select ready job");
		goto out_rollback;
	}
	id = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	st = NULL;
	if ((rc = prep(q, &st,
		       "UPDATE jobs SET state='running', attempts=attempts+1, "
		       "lease_owner=?, lease_until=?, stage='preparing', updated=? WHERE id=?")))
		goto out_rollback;
	bind_text(st, 1, owner);
	sqlite3_bind_int64(st, 2, now + lease_ms);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_int64(st, 4, id);
	rc = run(q, st, "lease job");
	st = NULL;
	if (rc)
		goto out_rollback;
	if ((rc = prep(q, &st,
		       "SELECT j.delivery, j.event, j.repo, j.repo_id, j.installation_id, "
		       "j.issue, j.trigger, j.feedback, j.trigger_comment_id, j.attempts, "
		       "d.body FROM jobs j LEFT JOIN deliveries d ON d.delivery=j.delivery "
		       "WHERE j.id=?")))
		goto out_rollback;
	sqlite3_bind_int64(st, 1, id);
	if (sqlite3_step(st) != SQLITE_ROW) {
		rc = db_fail(q, "read leased job");
		goto out_rollback;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_rollback;
	}
	job->id = id;
	job->delivery = col_dup(st, 0);
	job->event = col_dup(st, 1);
	job->repo = col_dup(st, 2);
	job->repo_id = sqlite3_column_int64(st, 3);
	job->installation_id = sqlite3_column_int64(st, 4);
	job->issue = sqlite3_column_int64(st, 5);
	t = wh_trigger_parse((const char *)sqlite3_column_text(st, 6));
	job->trigger = t < 0 ? JOB_TRIGGER_LABEL : (enum job_trigger)t;
	job->feedback = col_dup(st, 7);
	job->trigger_comment_id = sqlite3_column_int64(st, 8);
	job->attempts = sqlite3_column_int(st, 9);
	job->payload = col_dup(st, 10);
	if (!job->delivery || !job->event || !job->repo || !job->payload ||
	    (sqlite3_column_type(st, 7) != SQLITE_NULL && !job->feedback)) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_rollback;
	}
	sqlite3_reset(st);
	st = NULL;
	snprintf(msg, sizeof(msg), "leased by %.100s (attempt %d)", owner, job->attempts);
	if ((rc = add_event(q, id, "preparing", msg, now)) || (rc = exec(q, "COMMIT")))
		goto out_rollback;
	pthread_mutex_unlock(&q->lock);
	*out = job;
	return 0;
out_rollback:
	sqlite3_reset(st);
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out_unlock:
	pthread_mutex_unlock(&q->lock);
	q_job_free(job);
	return rc;
}

int q_heartbeat(queue *q, int64_t id, const char *owner, int64_t lease_ms, int64_t now)
{
	sqlite3_stmt *st;
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st,
		       "UPDATE jobs SET lease_until=? WHERE id=? AND lease_owner=? AND "
		       "state='running'")))
		goto out;
	sqlite3_bind_int64(st, 1, now + lease_ms);
	sqlite3_bind_int64(st, 2, id);
	bind_text(st, 3, owner);
	if ((rc = run(q, st, "heartbeat")) == 0 && sqlite3_changes(q->db) == 0)
		rc = ap_error_set(AP_ENOTFOUND, "job %lld: lease lost", (long long)id);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* Run st, an UPDATE of a job this worker leases, then record msg and COMMIT. AP_ENOTFOUND when
 * the UPDATE matched nothing (the lease was lost); the caller rolls back on any error. */
static int commit_leased_update(queue *q, sqlite3_stmt *st, int64_t id, const char *what,
				const char *msg, int64_t now)
{
	int rc;

	if ((rc = run(q, st, what)))
		return rc;
	if (sqlite3_changes(q->db) == 0)
		return ap_error_set(AP_ENOTFOUND, "job %lld: lease lost", (long long)id);
	if ((rc = add_event(q, id, NULL, msg, now)))
		return rc;
	return exec(q, "COMMIT");
}

int q_finish(queue *q, int64_t id, const char *owner, const char *state, const char *text,
	     int64_t now)
{
	bool ok = strcmp(state, "succeeded") == 0;
	sqlite3_stmt *st;
	char msg[200];
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if ((rc = prep(q, &st,
		       "UPDATE jobs SET state=?, result=?, error=?, lease_owner=NULL, "
		       "lease_until=NULL, updated=? WHERE id=? AND lease_owner=? AND "
		       "state='running'")))
		goto out_rollback;
	bind_text(st, 1, state);
	bind_text(st, 2, ok ? text : NULL);
	bind_text(st, 3, ok ? NULL : text);
	sqlite3_bind_int64(st, 4, now);
	sqlite3_bind_int64(st, 5, id);
	bind_text(st, 6, owner);
	snprintf(msg, sizeof(msg), "%s: %.180s", state, text ? text : "");
	if ((rc = commit_leased_update(q, st, id, "finish job", msg, now)))
		goto out_rollback;
	goto out;
out_rollback:
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_release(queue *q, int64_t id, const char *owner, int64_t not_before, const char *error,
	      bool refund, int64_t now)
{
	sqlite3_stmt *st;
	char msg[200];
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if ((rc = prep(q, &st,
		       "UPDATE jobs SET state='queued', lease_owner=NULL, "
		       "lease_until=NULL, not_before=?, error=?, "
		       "attempts=max(0, attempts-?), updated=? "
		       "WHERE id=? AND lease_owner=? AND state='running'")))
		goto out_rollback;
	sqlite3_bind_int64(st, 1, not_before);
	bind_text(st, 2, error);
	sqlite3_bind_int(st, 3, refund ? 1 : 0);
	sqlite3_bind_int64(st, 4, now);
	sqlite3_bind_int64(st, 5, id);
	bind_text(st, 6, owner);
	snprintf(msg, sizeof(msg), "re-queued%s: %.160s", refund ? " (shutdown)" : "",
		 error ? error : "");
	if ((rc = commit_leased_update(q, st, id, "release job", msg, now)))
		goto out_rollback;
	goto out;
out_rollback:
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_requeue_expired(queue *q, int max_attempts, int64_t now, int *count)
{
	sqlite3_stmt *st = NULL, *up = NULL;
	int rc, n = 0;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if ((rc = prep(q, &st,
		       "SELECT id, attempts, cancel_requested FROM jobs "
		       "WHERE state='running' AND lease_until<?")))
		goto out_rollback;
	sqlite3_bind_int64(st, 1, now);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		int attempts = sqlite3_column_int(st, 1);
		const char *state, *msg;

		if (sqlite3_column_int(st, 2)) {
			state = "cancelled";
			msg = "lease expired after a cancel request";
		} else if (attempts >= max_attempts) {
			state = "failed";
			msg = "lease expired (worker died) and no attempts are left";
		} else {
			state = "queued";
			msg = "lease expired (worker died): re-queued";
		}
		if ((rc = prep(q, &up,
			       "UPDATE jobs SET state=?, lease_owner=NULL, "
			       "lease_until=NULL, not_before=?, error=?, updated=? "
			       "WHERE id=?")))
			goto out_rollback;
		bind_text(up, 1, state);
		sqlite3_bind_int64(up, 2, now);
		bind_text(up, 3, msg);
		sqlite3_bind_int64(up, 4, now);
		sqlite3_bind_int64(up, 5, id);
		rc = run(q, up, "requeue expired");
		up = NULL;
		if (rc || (rc = add_event(q, id, NULL, msg, now)))
			goto out_rollback;
		n++;
	}
	if (rc != SQLITE_DONE) {
		rc = db_fail(q, "scan expired leases");
		goto out_rollback;
	}
	sqlite3_reset(st);
	st = NULL;
	if ((rc = exec(q, "COMMIT")))
		goto out_rollback;
	if (count)
		*count = n;
	goto out;
out_rollback:
	sqlite3_reset(st);
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- cancellation, events, state ------------------------------------------------------- */

int q_cancel(queue *q, const char *repo, int64_t issue, const char *why, int64_t now, int *count)
{
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if ((rc = cancel_locked(q, repo, issue, why, now, count)) || (rc = exec(q, "COMMIT")))
		sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_cancel_requested(queue *q, int64_t id, bool *yes)
{
	sqlite3_stmt *st;
	int rc;

	*yes = false;
	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st, "SELECT cancel_requested FROM jobs WHERE id=?")))
		goto out;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*yes = sqlite3_column_int(st, 0) != 0;
	sqlite3_reset(st);
	rc = rc == SQLITE_ROW	 ? 0
	     : rc == SQLITE_DONE ? ap_error_set(AP_ENOTFOUND, "no job %lld", (long long)id)
				 : db_fail(q, "read cancel flag");
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_event(queue *q, int64_t id, const char *stage, const char *msg, int64_t now)
{
	sqlite3_stmt *st;
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if (stage) {
		if ((rc = prep(q, &st, "UPDATE jobs SET stage=?, updated=? WHERE id=?")))
			goto out_rollback;
		bind_text(st, 1, stage);
		sqlite3_bind_int64(st, 2, now);
		sqlite3_bind_int64(st, 3, id);
		if ((rc = run(q, st, "set stage")))
			goto out_rollback;
	}
	if ((rc = add_event(q, id, stage, msg, now)) || (rc = exec(q, "COMMIT")))
		goto out_rollback;
	goto out;
out_rollback:
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_state_set(queue *q, int64_t id, const char *key, const char *value)
{
	sqlite3_stmt *st;
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st,
		       "INSERT INTO job_state(job, key, value) VALUES(?,?,?) "
		       "ON CONFLICT(job, key) DO UPDATE SET value=excluded.value")))
		goto out;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, key);
	bind_text(st, 3, value ? value : "");
	rc = run(q, st, "set job state");
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_state_get(queue *q, int64_t id, const char *key, char **value)
{
	sqlite3_stmt *st;
	int rc;

	*value = NULL;
	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st, "SELECT value FROM job_state WHERE job=? AND key=?")))
		goto out;
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, key);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*value = col_dup(st, 0);
		rc = *value ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
	} else {
		rc = rc == SQLITE_DONE ? 0 : db_fail(q, "read job state");
	}
	sqlite3_reset(st);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- spending ------------------------------------------------------------------------- */

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
	sqlite3_stmt *st;
	int rc;

	*micro = 0;
	if ((rc = prep(q, &st,
		       "SELECT coalesce(sum(CASE WHEN open THEN max(reserved, spent) ELSE spent "
		       "END), 0) FROM spend WHERE day=?1 AND (?2 IS NULL OR repo=?2)")))
		return rc;
	bind_text(st, 1, day);
	bind_text(st, 2, repo);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*micro = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : db_fail(q, "sum spending");
}

int q_spend_open(queue *q, int64_t job, const char *repo, const job_spend_req *req, int64_t now,
		 int64_t *row, job_spend_verdict *out)
{
	int64_t global = 0, per_repo = 0, reserve = req->priced ? req->reserve_micro : 0;
	sqlite3_stmt *st;
	char day[32];
	int rc;

	*row = 0;
	memset(out, 0, sizeof(*out));
	utc_day(now, day);
	pthread_mutex_lock(&q->lock);
	/* BEGIN IMMEDIATE takes the write lock before reading: two runs cannot both read the
	 * same total and both insert. */
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if ((rc = day_total(q, day, NULL, &global)) || (rc = day_total(q, day, repo, &per_repo)))
		goto out_rollback;
	if (req->global_cap_micro > 0 && (!req->priced || global + reserve > req->global_cap_micro))
		*out = (job_spend_verdict){true, false, global, req->global_cap_micro};
	else if (req->repo_cap_micro > 0 &&
		 (!req->priced || per_repo + reserve > req->repo_cap_micro))
		*out = (job_spend_verdict){true, true, per_repo, req->repo_cap_micro};
	if (out->refused) {
		sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
		goto out;
	}
	if ((rc = prep(q, &st,
		       "INSERT INTO spend(job, repo, day, reserved, priced) VALUES(?,?,?,?,?)")))
		goto out_rollback;
	sqlite3_bind_int64(st, 1, job);
	bind_text(st, 2, repo);
	bind_text(st, 3, day);
	sqlite3_bind_int64(st, 4, reserve);
	sqlite3_bind_int(st, 5, req->priced ? 1 : 0);
	if ((rc = run(q, st, "open spending")))
		goto out_rollback;
	*row = sqlite3_last_insert_rowid(q->db);
	if ((rc = exec(q, "COMMIT")))
		goto out_rollback;
	goto out;
out_rollback:
	*row = 0;
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_spend_record(queue *q, int64_t row, const job_usage *u, bool close)
{
	sqlite3_stmt *st;
	int rc;

	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st,
		       "UPDATE spend SET spent=?, tokens_in=?, tokens_out=?, calls=?, "
		       "open=open AND NOT ? WHERE id=?")))
		goto out;
	sqlite3_bind_int64(st, 1, u->cost_micro);
	sqlite3_bind_int64(st, 2, u->tokens_in);
	sqlite3_bind_int64(st, 3, u->tokens_out);
	sqlite3_bind_int(st, 4, u->calls);
	sqlite3_bind_int(st, 5, close ? 1 : 0);
	sqlite3_bind_int64(st, 6, row);
	if ((rc = run(q, st, "record spending")) == 0 && sqlite3_changes(q->db) == 0)
		rc = ap_error_set(AP_ENOTFOUND, "no spending row %lld", (long long)row);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}

int q_spend_day(queue *q, const char *repo, int64_t now, int64_t *micro)
{
	char day[32];
	int rc;

	utc_day(now, day);
	pthread_mutex_lock(&q->lock);
	rc = day_total(q, day, repo, micro);
	pthread_mutex_unlock(&q->lock);
	return rc;
}

/* --- views ----------------------------------------------------------------------------- */

int q_get_stats(queue *q, q_stats *out)
{
	sqlite3_stmt *st;
	int rc;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st, "SELECT state, count(*) FROM jobs GROUP BY state")))
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(st, 0);
		int64_t n = sqlite3_column_int64(st, 1);

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
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = db_fail(q, "count jobs");
		goto out;
	}
	if ((rc = prep(q, &st, "SELECT max(id) FROM deliveries")))
		goto out;
	if (sqlite3_step(st) == SQLITE_ROW)
		out->deliveries = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	rc = 0;
out:
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

static void add_text_or_null(cJSON *o, const char *key, sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	if (s)
		cJSON_AddStringToObject(o, key, (const char *)s);
	else
		cJSON_AddNullToObject(o, key);
}

/* Append the events of job id above event id after (at most limit; <= 0: all) to arr, each
 * {time, stage, message} and, with with_id, its id; *last gets the newest id. Under q->lock. */
static int events_into(queue *q, cJSON *arr, int64_t id, int64_t after, int limit, bool with_id,
		       int64_t *last)
{
	sqlite3_stmt *st;
	int rc;

	if ((rc = prep(q, &st,
		       "SELECT id, time, stage, message FROM job_events WHERE job=? AND id>? "
		       "ORDER BY id LIMIT ?")))
		return rc;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, after);
	sqlite3_bind_int64(st, 3, limit > 0 ? limit : -1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *e = cJSON_CreateObject();

		if (!e || !cJSON_AddItemToArray(arr, e)) {
			cJSON_Delete(e);
			sqlite3_reset(st);
			return ap_error_set(AP_ENOMEM, "out of memory");
		}
		*last = sqlite3_column_int64(st, 0);
		if (with_id)
			cJSON_AddNumberToObject(e, "id", (double)*last);
		add_time(e, "time", sqlite3_column_int64(st, 1));
		add_text_or_null(e, "stage", st, 2);
		add_text_or_null(e, "message", st, 3);
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : db_fail(q, "read events");
}

static int add_events(queue *q, cJSON *job, int64_t id)
{
	cJSON *arr = cJSON_AddArrayToObject(job, "events");
	int64_t last = 0;

	if (!arr)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return events_into(q, arr, id, 0, 0, false, &last);
}

int q_jobs_json(queue *q, int64_t id, int limit, cJSON **out)
{
	sqlite3_stmt *st = NULL;
	cJSON *arr = cJSON_CreateArray();
	int rc;

	*out = NULL;
	if (!arr)
		return ap_error_set(AP_ENOMEM, "out of memory");
	pthread_mutex_lock(&q->lock);
	/* One read transaction so the job and its events are one snapshot. */
	if ((rc = exec(q, "BEGIN")))
		goto out;
	if ((rc = prep(q, &st,
		       "SELECT j.id, j.delivery, j.repo, j.issue, j.trigger, j.state, j.stage, "
		       "j.attempts, j.created, j.updated, j.result, j.error, j.feedback, "
		       "j.cancel_requested, j.not_before, s.spent, s.tin, s.tout, s.calls, "
		       "s.priced, (SELECT value FROM job_state t WHERE t.job=j.id AND "
		       "t.key='tokens'), (SELECT value FROM job_state t WHERE t.job=j.id AND "
		       "t.key='pr_url') FROM jobs j LEFT JOIN (SELECT job, sum(spent) AS spent, "
		       "sum(tokens_in) AS tin, sum(tokens_out) AS tout, sum(calls) AS calls, "
		       "max(priced) AS priced FROM spend WHERE (?1 = 0 OR job = ?1) GROUP BY "
		       "job) s ON s.job = j.id WHERE (?1 = 0 OR j.id = ?1) ORDER BY j.id DESC "
		       "LIMIT ?2")))
		goto out_end;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, limit > 0 ? limit : -1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			rc = ap_error_set(AP_ENOMEM, "out of memory");
			goto out_end;
		}
		cJSON_AddNumberToObject(o, "id", (double)sqlite3_column_int64(st, 0));
		add_text_or_null(o, "delivery", st, 1);
		add_text_or_null(o, "repo", st, 2);
		cJSON_AddNumberToObject(o, "issue", (double)sqlite3_column_int64(st, 3));
		add_text_or_null(o, "trigger", st, 4);
		add_text_or_null(o, "state", st, 5);
		add_text_or_null(o, "stage", st, 6);
		cJSON_AddNumberToObject(o, "attempts", sqlite3_column_int(st, 7));
		add_time(o, "created", sqlite3_column_int64(st, 8));
		add_time(o, "updated", sqlite3_column_int64(st, 9));
		add_text_or_null(o, "result", st, 10);
		add_text_or_null(o, "error", st, 11);
		add_text_or_null(o, "feedback", st, 12);
		cJSON_AddBoolToObject(o, "cancel_requested", sqlite3_column_int(st, 13) != 0);
		cJSON_AddNumberToObject(o, "created_ms", (double)sqlite3_column_int64(st, 8));
		cJSON_AddNumberToObject(o, "model_calls", (double)sqlite3_column_int64(st, 18));
		cJSON_AddNumberToObject(o, "tokens_in", (double)sqlite3_column_int64(st, 16));
		cJSON_AddNumberToObject(o, "tokens_out", (double)sqlite3_column_int64(st, 17));
		/* The ledger's totals; a job from before it keeps the count its run stored. */
		if (sqlite3_column_type(st, 15) != SQLITE_NULL)
			cJSON_AddNumberToObject(
			    o, "tokens",
			    (double)(sqlite3_column_int64(st, 16) + sqlite3_column_int64(st, 17)));
		else if (sqlite3_column_type(st, 20) != SQLITE_NULL)
			cJSON_AddNumberToObject(o, "tokens", (double)sqlite3_column_int64(st, 20));
		if (sqlite3_column_int(st, 19)) {
			char usd[32];

			cJSON_AddNumberToObject(o, "cost_usd",
						(double)sqlite3_column_int64(st, 15) / 1e6);
			ap_money_format(sqlite3_column_int64(st, 15), usd, sizeof(usd));
			cJSON_AddStringToObject(o, "cost", usd);
		} else {
			cJSON_AddNullToObject(o, "cost_usd");
		}
		if (sqlite3_column_type(st, 21) != SQLITE_NULL)
			add_text_or_null(o, "pr_url", st, 21);
		if (id > 0 && (rc = add_events(q, o, id)))
			goto out_end;
	}
	rc = rc == SQLITE_DONE ? 0 : db_fail(q, "list jobs");
out_end:
	sqlite3_reset(st);
	sqlite3_exec(q->db, "COMMIT", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	if (rc) {
		cJSON_Delete(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

int q_retry(queue *q, int64_t id, const char *why, int64_t now)
{
	sqlite3_stmt *st;
	int rc, step;

	pthread_mutex_lock(&q->lock);
	if ((rc = exec(q, "BEGIN IMMEDIATE")))
		goto out;
	if ((rc = prep(q, &st,
		       "UPDATE jobs SET state='queued', attempts=0, not_before=?1, result=NULL, "
		       "error=NULL, cancel_requested=0, lease_owner=NULL, lease_until=NULL, "
		       "updated=?1 WHERE id=?2 AND state IN ('failed','cancelled')")))
		goto out_rollback;
	sqlite3_bind_int64(st, 1, now);
	sqlite3_bind_int64(st, 2, id);
	step = sqlite3_step(st);
	sqlite3_reset(st);
	if (step == SQLITE_CONSTRAINT) {
		rc = ap_error_set(AP_EDUPLICATE, "job %lld's issue already has an active job",
				  (long long)id);
		goto out_rollback;
	}
	if (step != SQLITE_DONE) {
		rc = db_fail(q, "retry job");
		goto out_rollback;
	}
	if (sqlite3_changes(q->db) == 0) {
		rc = ap_error_set(AP_EINVAL, "job %lld is not failed or cancelled", (long long)id);
		goto out_rollback;
	}
	if ((rc = add_event(q, id, NULL, why ? why : "retried", now)) || (rc = exec(q, "COMMIT")))
		goto out_rollback;
	goto out;
out_rollback:
	sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
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
	sqlite3_stmt *st;
	int rc;

	if (cap)
		state[0] = '\0';
	pthread_mutex_lock(&q->lock);
	if ((rc = prep(q, &st, "SELECT state FROM jobs WHERE id=?")))
		goto out;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		snprintf(state, cap, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_reset(st);
	rc = rc == SQLITE_ROW	 ? 0
	     : rc == SQLITE_DONE ? ap_error_set(AP_ENOTFOUND, "no job %lld", (long long)id)
				 : db_fail(q, "read job state");
out:
	pthread_mutex_unlock(&q->lock);
	return rc;
}
