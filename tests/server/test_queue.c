/* SPDX-License-Identifier: MIT */
/* tests/server/test_queue.c - the queue, the group-commit writer and the worker pool against
 * a real database: delivery dedupe, semantic dedupe, leases and their expiry, fencing epochs,
 * attempts and backoff, cancellation, shutdown, migrations, compressed bodies, shared write
 * pacing, concurrent replicas.
 *
 * `test_queue` runs every case on a SQLite file; `test_queue pg` runs them on the PostgreSQL
 * server named by AP_TEST_PG_URI (tests/e2e/pg_util.py starts one for meson) and fails when
 * it is not set or not reachable. */
#include "common/clock.h"
#include "common/err.h"
#include "common/stats.h"
#include "server/ingest.h"
#include "server/queue.h"
#include "server/queue_db.h"
#include "server/queue_view.h"
#include "server/workers.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

struct fixture {
	char dir[64];
	char path[512]; /* the SQLite file, or the PostgreSQL URI */
	queue *q;
	PGconn *hold; /* a connection holding locks a case takes; closed (they go) at teardown */
};

/* NULL: SQLite; else the PostgreSQL server every case runs on (a fresh schema each). */
static const char *pg_uri;

/* Run sql (statements without results) directly on the database, outside the queue. */
static void raw_exec(const struct fixture *f, const char *sql)
{
	if (pg_uri) {
		PGconn *c = PQconnectdb(f->path);
		PGresult *r;

		assert_int_equal(PQstatus(c), CONNECTION_OK);
		PQclear(PQexec(c, "SET client_min_messages=warning"));
		r = PQexec(c, sql);
		if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
			fail_msg("%s: %s", sql, PQerrorMessage(c));
		PQclear(r);
		PQfinish(c);
	} else {
		sqlite3 *db;
		char *err = NULL;

		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		sqlite3_busy_timeout(db, 5000);
		if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
			fail_msg("%s: %s", sql, err);
		sqlite3_close(db);
	}
}

/* The integer the query sql returns (first column of the first row), -1 when no row. */
static int64_t raw_int(const struct fixture *f, const char *sql)
{
	int64_t n = -1;

	if (pg_uri) {
		PGconn *c = PQconnectdb(f->path);
		PGresult *r;

		assert_int_equal(PQstatus(c), CONNECTION_OK);
		r = PQexec(c, sql);
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			fail_msg("%s: %s", sql, PQerrorMessage(c));
		if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
			n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		PQclear(r);
		PQfinish(c);
	} else {
		sqlite3 *db;
		sqlite3_stmt *st;

		assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
		if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
			n = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
		sqlite3_close(db);
	}
	return n;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/ap-queue-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	if (pg_uri) {
		snprintf(f->path, sizeof(f->path), "%s", pg_uri);
		raw_exec(f, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	} else {
		snprintf(f->path, sizeof(f->path), "%s/q.db", f->dir);
	}
	if (q_open(&f->q, f->path, Q_OPEN_CREATE)) {
		print_error("q_open: %s\n", ap_error_last());
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[160];

	/* First: a case that failed while holding a lock must not stall the next one's setup. */
	if (f->hold)
		PQfinish(f->hold);
	q_close(f->q);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static q_delivery trigger(const char *delivery, const char *repo, int64_t issue)
{
	return (q_delivery){.delivery = delivery,
			    .event = "issues",
			    .body = "{\"action\":\"labeled\"}",
			    .len = 20,
			    .kind = Q_TRIGGER,
			    .repo = repo,
			    .repo_id = 9,
			    .installation_id = 3,
			    .issue = issue,
			    .trigger = JOB_TRIGGER_LABEL};
}

static void ingest1(queue *q, q_delivery *d, int64_t now)
{
	q_delivery *items[1] = {d};

	assert_int_equal(q_ingest(q, items, 1, now), 0);
}

static const char *job_state(queue *q, int64_t id, char *buf, size_t n)
{
	cJSON *arr, *j;

	assert_int_equal(q_jobs_json(q, id, 0, &arr), 0);
	j = cJSON_GetArrayItem(arr, 0);
	assert_non_null(j);
	snprintf(buf, n, "%s", cJSON_GetObjectItem(j, "state")->valuestring);
	cJSON_Delete(arr);
	return buf;
}

static void test_delivery_dedupe(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1), b = trigger("d-1", "acme/w", 1);
	q_stats st;

	ingest1(f->q, &a, 1000);
	assert_int_equal(a.result, Q_QUEUED);
	assert_true(a.job_id > 0);
	ingest1(f->q, &b, 2000);
	assert_int_equal(b.result, Q_DUPLICATE);
	assert_int_equal(q_get_stats(f->q, &st), 0);
	assert_int_equal(st.queued, 1);
	assert_int_equal(st.deliveries, 1);
}

static int64_t body_len(const struct fixture *f, const char *delivery)
{
	char sql[200];

	snprintf(sql, sizeof(sql), "SELECT length(body) FROM deliveries WHERE delivery='%s'",
		 delivery);
	return raw_int(f, sql);
}

static void test_body_kept_only_for_deliveries_that_act(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-job", "acme/w", 1), b = trigger("d-active", "acme/w", 1);
	q_delivery ign = {.delivery = "d-ignored",
			  .event = "issues",
			  .body = "{\"x\":1}",
			  .len = 7,
			  .kind = Q_RECORD,
			  .note = "not a trigger"};

	ingest1(f->q, &a, 1000);
	ingest1(f->q, &b, 1000);
	ingest1(f->q, &ign, 1000);
	assert_int_equal(b.result, Q_ACTIVE);
	assert_int_equal(ign.result, Q_RECORDED);
	assert_int_equal(body_len(f, "d-job"), 20);
	assert_int_equal(body_len(f, "d-active"), 0);
	assert_int_equal(body_len(f, "d-ignored"), 0);
	/* every one of them is still a known delivery id */
	b.delivery = "d-ignored";
	ingest1(f->q, &b, 1001);
	assert_int_equal(b.result, Q_DUPLICATE);
}

static void test_semantic_dedupe(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1), b = trigger("d-2", "acme/w", 1),
		   c = trigger("d-3", "acme/w", 2), e = trigger("d-4", "acme/w", 1);
	q_delivery *batch[3] = {&a, &b, &c};
	int64_t isolated = ap_stat_get(AP_STAT_INGEST_ISOLATED);
	job_info *job;

	/* one transaction, two triggers for the same issue: the second finds the first */
	assert_int_equal(q_ingest(f->q, batch, 3, 1000), 0);
	assert_int_equal(ap_stat_get(AP_STAT_INGEST_ISOLATED), isolated);
	assert_int_equal(a.result, Q_QUEUED);
	assert_int_equal(b.result, Q_ACTIVE);
	assert_int_equal(b.job_id, a.job_id);
	assert_int_equal(c.result, Q_QUEUED);
	/* still active while running; a new job once it finished */
	assert_int_equal(q_lease(f->q, "w", 60000, 1000, &job), 0);
	assert_int_equal(job->id, a.job_id);
	ingest1(f->q, &e, 1100);
	assert_int_equal(e.result, Q_ACTIVE);
	assert_int_equal(q_finish(f->q, job->id, "w", "failed", "boom", 1200), 0);
	q_job_free(job);
	e.delivery = "d-5";
	ingest1(f->q, &e, 1300);
	assert_int_equal(e.result, Q_QUEUED);
}

/* One batch mixing every case the multi-row path handles: a redelivery inside the batch, the
 * same id again for another issue (still a duplicate, and no job of its own), a known id, a
 * record, a trigger for an issue active in the database. */
static void test_mixed_batch(void **state)
{
	struct fixture *f = *state;
	q_delivery old = trigger("d-old", "acme/w", 2);
	q_delivery a = trigger("d-a", "acme/w", 1), a2 = trigger("d-a", "acme/w", 1),
		   known = trigger("d-old", "acme/w", 3), act = trigger("d-act", "acme/w", 2),
		   a3 = trigger("d-a", "acme/w", 9);
	q_delivery rec = {.delivery = "d-rec",
			  .event = "ping",
			  .body = "{}",
			  .len = 2,
			  .kind = Q_RECORD,
			  .note = "ping"};
	q_delivery *batch[6] = {&a, &a2, &known, &rec, &act, &a3};
	int64_t isolated = ap_stat_get(AP_STAT_INGEST_ISOLATED);

	ingest1(f->q, &old, 1000);
	assert_int_equal(q_ingest(f->q, batch, 6, 2000), 0);
	/* by the batch's own statements, not retried one at a time */
	assert_int_equal(ap_stat_get(AP_STAT_INGEST_ISOLATED), isolated);
	assert_int_equal(a.result, Q_QUEUED);
	assert_int_equal(a2.result, Q_DUPLICATE);
	assert_int_equal(a3.result, Q_DUPLICATE);
	assert_int_equal(known.result, Q_DUPLICATE);
	assert_int_equal(rec.result, Q_RECORDED);
	assert_int_equal(act.result, Q_ACTIVE);
	assert_int_equal(act.job_id, old.job_id);
	assert_int_equal(body_len(f, "d-act"), 0);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs"), 2);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM deliveries"), 4);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM job_events"), 2);
}

/* One batch of the shapes a batch must carry as a single delivery would: a text with an
 * invalid UTF-8 byte (PostgreSQL stores it with '?', SQLite as given), a two-byte character,
 * a NULL and an empty feedback, an empty body, a 200 KB body stored compressed, a record.
 * The batch's statements must not fail (no one-at-a-time retry), and what they stored reads
 * back. */
static void test_batch_carries_awkward_values(void **state)
{
	struct fixture *f = *state;
	int64_t isolated = ap_stat_get(AP_STAT_INGEST_ISOLATED);
	size_t big_len = 200 * 1024;
	char *big = malloc(big_len + 1);
	q_delivery a = trigger("d-bad-utf8", "acme/w", 1), b = trigger("d-e-acute", "acme/w", 2),
		   c = trigger("d-empty", "acme/w", 3), d = trigger("d-big", "acme/w", 4);
	q_delivery rec = {.delivery = "d-rec", .event = "ping", .kind = Q_RECORD, .note = "ping"};
	q_delivery *batch[5] = {&a, &b, &c, &d, &rec};
	job_info *job;

	assert_non_null(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = "{\"k\":[1,2,3]}"[i % 13];
	big[big_len] = '\0';
	a.trigger = JOB_TRIGGER_COMMENT;
	a.feedback = "fix\xffit";
	a.comment_id = 77;
	b.event = "issue_comment \xc3\xa9";
	b.trigger = JOB_TRIGGER_COMMENT;
	b.feedback = "";
	c.body = "";
	c.len = 0;
	d.body = big;
	d.len = big_len;
	assert_int_equal(q_ingest(f->q, batch, 5, 1000), 0);
	assert_int_equal(ap_stat_get(AP_STAT_INGEST_ISOLATED), isolated);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(batch[i]->result, Q_QUEUED);
		assert_true(batch[i]->job_id > 0);
	}
	assert_int_equal(rec.result, Q_RECORDED);
	if (pg_uri)
		assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE feedback='fix?it' "
					    "AND trigger_comment_id=77"),
				 1);
	else
		assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE "
					    "CAST(feedback AS BLOB)=X'666978ff6974' "
					    "AND trigger_comment_id=77"),
				 1);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE event='issue_comment "
				    "\xc3\xa9' AND feedback=''"),
			 1);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE feedback IS NULL"), 2);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM job_events WHERE message='queued'"), 4);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM deliveries WHERE delivery='d-rec' AND "
				    "outcome='ping'"),
			 1);
	/* the big body went in compressed and comes out whole */
	assert_true(body_len(f, "d-big") < (int64_t)big_len / 10);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(q_lease(f->q, "w", 60000, 1000, &job), 0);
		if (job->id == d.job_id)
			assert_string_equal(job->payload, big);
		else if (job->id == c.job_id)
			assert_string_equal(job->payload, "");
		q_job_free(job);
	}
	free(big);
}

/* A batch whose statements fail (here: a trigger without a repository, which no job row
 * may hold) is stored again one delivery at a time, and counted: the others are queued,
 * the bad one alone fails. */
static void test_batch_with_a_bad_item_is_stored_one_at_a_time(void **state)
{
	struct fixture *f = *state;
	int64_t isolated = ap_stat_get(AP_STAT_INGEST_ISOLATED);
	q_delivery a = trigger("d-1", "acme/w", 1), bad = trigger("d-2", NULL, 2),
		   c = trigger("d-3", "acme/w", 3);
	q_delivery *batch[3] = {&a, &bad, &c};

	assert_int_equal(q_ingest(f->q, batch, 3, 1000), 0);
	assert_int_equal(ap_stat_get(AP_STAT_INGEST_ISOLATED), isolated + 1);
	assert_int_equal(a.result, Q_QUEUED);
	assert_int_equal(bad.result, Q_FAILED);
	assert_int_equal(c.result, Q_QUEUED);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs"), 2);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM deliveries WHERE delivery='d-2'"), 0);
}

static void test_lease_fields_and_payload(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 7);
	job_info *job;

	a.trigger = JOB_TRIGGER_COMMENT;
	a.feedback = "use a mutex";
	a.comment_id = 55;
	ingest1(f->q, &a, 1000);
	assert_int_equal(q_lease(f->q, "w", 60000, 1000, &job), 0);
	assert_string_equal(job->delivery, "d-1");
	assert_string_equal(job->repo, "acme/w");
	assert_int_equal(job->issue, 7);
	assert_int_equal(job->installation_id, 3);
	assert_int_equal(job->trigger, JOB_TRIGGER_COMMENT);
	assert_string_equal(job->feedback, "use a mutex");
	assert_int_equal(job->trigger_comment_id, 55);
	assert_string_equal(job->payload, "{\"action\":\"labeled\"}");
	assert_int_equal(job->attempts, 1);
	/* nothing else to lease */
	job_info *none;
	assert_int_equal(q_lease(f->q, "w2", 60000, 1000, &none), AP_ENOTFOUND);
	q_job_free(job);
}

static void test_lease_expiry_requeue_and_max_attempts(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1);
	job_info *job;
	char s[32];
	int n;

	ingest1(f->q, &a, 1000);
	assert_int_equal(q_lease(f->q, "dead", 5000, 1000, &job), 0);
	q_job_free(job);
	/* lease still valid: nothing happens */
	assert_int_equal(q_requeue_expired(f->q, 2, 5999, &n), 0);
	assert_int_equal(n, 0);
	assert_string_equal(job_state(f->q, a.job_id, s, sizeof(s)), "running");
	/* the process died: after the lease the job is queued again */
	assert_int_equal(q_requeue_expired(f->q, 2, 6001, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(job_state(f->q, a.job_id, s, sizeof(s)), "queued");
	/* the dead owner cannot finish it any more */
	assert_int_equal(q_finish(f->q, a.job_id, "dead", "succeeded", "x", 6002), AP_ENOTFOUND);
	/* second attempt also dies: max_attempts=2 reached, so failed */
	assert_int_equal(q_lease(f->q, "dead2", 5000, 7000, &job), 0);
	assert_int_equal(job->attempts, 2);
	q_job_free(job);
	assert_int_equal(q_requeue_expired(f->q, 2, 13000, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(job_state(f->q, a.job_id, s, sizeof(s)), "failed");
}

static void test_heartbeat_extends_lease(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1);
	job_info *job;
	char s[32];
	int n;

	ingest1(f->q, &a, 1000);
	assert_int_equal(q_lease(f->q, "w", 5000, 1000, &job), 0);
	assert_int_equal(q__heartbeat(f->q, job->id, "w", 5000, 5000), 0);
	assert_int_equal(q_requeue_expired(f->q, 3, 8000, &n), 0);
	assert_int_equal(n, 0);
	assert_string_equal(job_state(f->q, a.job_id, s, sizeof(s)), "running");
	assert_int_equal(q__heartbeat(f->q, job->id, "other", 5000, 5000), AP_ENOTFOUND);
	q_job_free(job);
}

static void test_backoff_and_release(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1);
	job_info *job;

	assert_int_equal(q_backoff_ms(1000, 1), 1000);
	assert_int_equal(q_backoff_ms(1000, 2), 2000);
	assert_int_equal(q_backoff_ms(1000, 4), 8000);
	assert_int_equal(q_backoff_ms(1000, 40), 3600000);
	ingest1(f->q, &a, 1000);
	assert_int_equal(q_lease(f->q, "w", 5000, 1000, &job), 0);
	assert_int_equal(q_release(f->q, job->id, "w", 1000 + q_backoff_ms(1000, job->attempts),
				   "EUNAVAIL", false, 1000),
			 0);
	q_job_free(job);
	assert_int_equal(q_lease(f->q, "w", 5000, 1999, &job), AP_ENOTFOUND);
	assert_int_equal(q_lease(f->q, "w", 5000, 2000, &job), 0);
	assert_int_equal(job->attempts, 2);
	/* a shutdown release refunds the attempt */
	assert_int_equal(q_release(f->q, job->id, "w", 2000, "shutdown", true, 2000), 0);
	q_job_free(job);
	assert_int_equal(q_lease(f->q, "w", 5000, 2000, &job), 0);
	assert_int_equal(job->attempts, 2);
	q_job_free(job);
}

static void test_cancel_queued_and_running(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1), b = trigger("d-2", "acme/w", 2);
	q_delivery stop = {.delivery = "d-3",
			   .event = "issues",
			   .body = "{}",
			   .len = 2,
			   .kind = Q_CANCEL,
			   .repo = "acme/w",
			   .issue = 1};
	job_info *job;
	bool yes;
	char s[32];
	int n;

	ingest1(f->q, &a, 1000);
	ingest1(f->q, &b, 1000);
	/* queued: cancelled at once */
	ingest1(f->q, &stop, 1100);
	assert_int_equal(stop.result, Q_CANCELLED);
	assert_int_equal(stop.ncancelled, 1);
	assert_string_equal(job_state(f->q, a.job_id, s, sizeof(s)), "cancelled");
	/* running: flagged, the worker sees it */
	assert_int_equal(q_lease(f->q, "w", 5000, 1200, &job), 0);
	assert_int_equal(job->id, b.job_id);
	assert_int_equal(q_cancel_requested(f->q, job->id, &yes), 0);
	assert_false(yes);
	assert_int_equal(q_cancel(f->q, "acme/w", 2, "test", 1300, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(q_cancel_requested(f->q, job->id, &yes), 0);
	assert_true(yes);
	assert_string_equal(job_state(f->q, b.job_id, s, sizeof(s)), "running");
	q_job_free(job);
	/* nothing active: zero affected */
	assert_int_equal(q_cancel(f->q, "acme/w", 99, "test", 1300, &n), 0);
	assert_int_equal(n, 0);
}

static void test_state_and_events(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1);
	cJSON *arr, *events;
	char *v;

	ingest1(f->q, &a, 1000);
	assert_int_equal(q_state_get(f->q, a.job_id, "comment", &v), 0);
	assert_null(v);
	assert_int_equal(q_state_set(f->q, a.job_id, "comment", "123"), 0);
	assert_int_equal(q_state_set(f->q, a.job_id, "comment", "456"), 0);
	assert_int_equal(q_state_get(f->q, a.job_id, "comment", &v), 0);
	assert_string_equal(v, "456");
	free(v);
	assert_int_equal(q__event(f->q, a.job_id, "planning", "reading code", 1100), 0);
	assert_int_equal(q_jobs_json(f->q, a.job_id, 0, &arr), 0);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "stage")->valuestring,
			    "planning");
	events = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "events");
	assert_int_equal(cJSON_GetArraySize(events), 2);
	assert_string_equal(
	    cJSON_GetObjectItem(cJSON_GetArrayItem(events, 1), "message")->valuestring,
	    "reading code");
	cJSON_Delete(arr);
}

/* The console's list: the issue's title kept from the delivery (through the batch statements
 * and through the one-at-a-time path a cancel in the batch takes), filters by state and
 * repository, keyset pages, the jobs changed after an event id; and a page of 1,000 jobs
 * (with a spending row each) answers in under 100 ms on this backend. */
static void test_jobs_page_titles_filters_and_pages(void **state)
{
	struct fixture *f = *state;
	enum { N = 1000, BATCH = 100 };
	static q_delivery d[N];
	static char ids[N][16], titles[N][48];
	q_delivery *batch[BATCH];
	q_delivery cancel = {.delivery = "d-cancel",
			     .event = "issues",
			     .body = "{}",
			     .len = 2,
			     .kind = Q_CANCEL,
			     .repo = "acme/none",
			     .issue = 1};
	q_delivery one = trigger("d-one", "acme/c", 1);
	q_delivery *mixed[2] = {&cancel, &one};
	q_job_filter all = {.limit = 100};
	int64_t total = 0, mark = 0, before = 0, slowest = 0, seen = 0, prev = INT64_MAX;
	cJSON *arr, *j;

	for (int i = 0; i < N; i++) {
		snprintf(ids[i], sizeof(ids[i]), "d-%d", i);
		snprintf(titles[i], sizeof(titles[i]), "Mean of \"%d\" <crashes>", i);
		d[i] = trigger(ids[i], i % 2 ? "acme/b" : "acme/a", i + 1);
		d[i].title = titles[i];
	}
	for (int i = 0; i < N; i += BATCH) {
		for (int k = 0; k < BATCH; k++)
			batch[k] = &d[i + k];
		assert_int_equal(q_ingest(f->q, batch, BATCH, 1000 + i), 0);
	}
	one.title = "Through the one-at-a-time path";
	assert_int_equal(q_ingest(f->q, mixed, 2, 5000), 0);
	assert_int_equal(one.result, Q_QUEUED);
	raw_exec(f, "UPDATE jobs SET state='failed', error='not proven' WHERE id % 3 = 0");
	raw_exec(f, "INSERT INTO spend(job, repo, day, reserved, spent, tokens_in, tokens_out, "
		    "calls, priced, open) SELECT id, repo, '2026-01-01', 0, 1500, 10, 5, 1, 1, 0 "
		    "FROM jobs");
	/* Every page of all 1,001 jobs, newest first, each under 100 ms (its best of three). */
	do {
		int64_t took = INT64_MAX;

		all.before = before;
		/* The best of three: the machine is shared, and one try can lose the CPU. */
		for (int t = 0; t < 3; t++) {
			int64_t t0 = ap_mono_ms();

			arr = NULL;
			assert_int_equal(q_jobs_page(f->q, &all, &arr, &total, &mark), 0);
			took = ap_mono_ms() - t0 < took ? ap_mono_ms() - t0 : took;
			if (t < 2)
				cJSON_Delete(arr);
		}
		slowest = took > slowest ? took : slowest;
		before = 0;
		cJSON_ArrayForEach (j, arr) {
			int64_t id = (int64_t)cJSON_GetObjectItem(j, "id")->valuedouble;

			assert_true(id < prev);
			prev = before = id;
			seen++;
			assert_non_null(cJSON_GetObjectItem(j, "title"));
			assert_string_equal(cJSON_GetObjectItem(j, "cost")->valuestring, "$0.0015");
			assert_null(cJSON_GetObjectItem(j, "events"));
		}
		cJSON_Delete(arr);
	} while (before);
	print_message("jobs page of 100 out of %d (%s): slowest %lld ms\n", N + 1,
		      pg_uri ? "postgresql" : "sqlite", (long long)slowest);
	assert_int_equal(seen, N + 1);
	assert_int_equal(total, N + 1);
	assert_true(slowest < 100);
	assert_int_equal(mark, raw_int(f, "SELECT max(id) FROM job_events"));
	/* The titles, as the deliveries carried them (both ingest paths). */
	assert_int_equal(q_jobs_json(f->q, d[7].job_id, 0, &arr), 0);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "title")->valuestring,
			    "Mean of \"7\" <crashes>");
	cJSON_Delete(arr);
	assert_int_equal(q_jobs_json(f->q, one.job_id, 0, &arr), 0);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "title")->valuestring,
			    "Through the one-at-a-time path");
	cJSON_Delete(arr);
	/* Filters: failed jobs of acme/a only, and the count of all that match. */
	{
		q_job_filter failed_a = {.state = "failed", .repo = "acme/a", .limit = 100};

		assert_int_equal(q_jobs_page(f->q, &failed_a, &arr, &total, NULL), 0);
		assert_int_equal(total, raw_int(f, "SELECT count(*) FROM jobs WHERE "
						   "state='failed' AND repo='acme/a'"));
		assert_true(total > 100);
		assert_int_equal(cJSON_GetArraySize(arr), 100);
		cJSON_ArrayForEach (j, arr) {
			assert_string_equal(cJSON_GetObjectItem(j, "state")->valuestring, "failed");
			assert_string_equal(cJSON_GetObjectItem(j, "repo")->valuestring, "acme/a");
		}
		cJSON_Delete(arr);
	}
	/* Changed after the watermark: exactly the job that got an event. */
	{
		q_job_filter changed = {.changed_after = mark};
		int64_t mark2 = 0;

		assert_int_equal(q__event(f->q, d[41].job_id, "planning", "reading", 9000), 0);
		assert_int_equal(q_jobs_page(f->q, &changed, &arr, NULL, &mark2), 0);
		assert_int_equal(cJSON_GetArraySize(arr), 1);
		assert_int_equal(
		    (int64_t)cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "id")->valuedouble,
		    d[41].job_id);
		assert_true(mark2 > mark);
		cJSON_Delete(arr);
		changed.changed_after = mark2;
		assert_int_equal(q_jobs_page(f->q, &changed, &arr, NULL, NULL), 0);
		assert_int_equal(cJSON_GetArraySize(arr), 0);
		cJSON_Delete(arr);
	}
}

/* --- fencing, migrations, bodies, pacing, replicas ---------------------------------------- */

static void test_fencing_epoch_grows_and_stale_lease_is_refused(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1);
	job_info *j1, *j2;
	cJSON *arr, *events;
	int n;

	ingest1(f->q, &a, 1000);
	assert_int_equal(q_lease(f->q, "w1", 1000, 1000, &j1), 0);
	q_lease_ref r1 = {j1->id, "w1", j1->epoch};
	assert_true(j1->epoch >= 1);
	/* current: the fence passes and extends the lease to 1500 + 1000 */
	assert_int_equal(q_fence(f->q, &r1, 1000, NULL, NULL, 1500), 0);
	assert_int_equal(q_requeue_expired(f->q, 5, 2400, &n), 0);
	assert_int_equal(n, 0);
	/* the holder froze: the lease ran out, the job was rescued and leased again */
	assert_int_equal(q_requeue_expired(f->q, 5, 2600, &n), 0);
	assert_int_equal(n, 1);
	/* expired and rescued, not yet re-leased: stale already */
	assert_int_equal(q_fence(f->q, &r1, 1000, NULL, NULL, 2650), AP_ESTALE);
	assert_int_equal(q_lease(f->q, "w2", 1000, 2700, &j2), 0);
	q_lease_ref r2 = {j2->id, "w2", j2->epoch};
	assert_int_equal(j2->id, j1->id);
	assert_true(j2->epoch > j1->epoch);
	/* even with the owner name reused, the old epoch is refused */
	q_lease_ref r1b = {j1->id, "w2", j1->epoch};
	assert_int_equal(q_fence(f->q, &r1, 1000, NULL, NULL, 2800), AP_ESTALE);
	assert_int_equal(q_fence(f->q, &r1b, 1000, NULL, NULL, 2800), AP_ESTALE);
	/* a stale holder's stage/event is not recorded; the current one's is */
	assert_int_equal(q_fence(f->q, &r1, 1000, "publishing", "stale write", 2800), AP_ESTALE);
	assert_int_equal(q_fence(f->q, &r2, 1000, "building", "current write", 2800), 0);
	/* a lease that expired with nobody rescuing it yet is not current either */
	assert_int_equal(q_fence(f->q, &r2, 1000, NULL, NULL, 3900), AP_ESTALE);
	assert_int_equal(q_jobs_json(f->q, a.job_id, 0, &arr), 0);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "stage")->valuestring,
			    "building");
	events = cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "events");
	bool saw_current = false;
	cJSON *e;
	cJSON_ArrayForEach (e, events) {
		const char *m = cJSON_GetObjectItem(e, "message")->valuestring;

		assert_string_not_equal(m, "stale write");
		saw_current |= strcmp(m, "current write") == 0;
	}
	assert_true(saw_current);
	cJSON_Delete(arr);
	q_job_free(j1);
	q_job_free(j2);
}

struct opener {
	const char *path;
	int rc;
	pthread_barrier_t *go;
};

static void *open_concurrently(void *arg)
{
	struct opener *o = arg;
	queue *q = NULL;

	pthread_barrier_wait(o->go);
	o->rc = q_open(&q, o->path, Q_OPEN_CREATE);
	q_close(q);
	return NULL;
}

static void test_migrations_versioned_and_concurrent(void **state)
{
	struct fixture *f = *state;
	enum { N = 4 };
	pthread_t th[N];
	struct opener o[N];
	pthread_barrier_t go;
	int v = 0;

	assert_int_equal(q_schema_version(f->q, &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), 3);
	/* a fresh database opened by four "replicas" at the same moment */
	q_close(f->q);
	f->q = NULL;
	if (pg_uri) {
		raw_exec(f, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
	} else {
		unlink(f->path);
		raw_exec(f, "PRAGMA journal_mode=WAL");
	}
	pthread_barrier_init(&go, NULL, N);
	for (int i = 0; i < N; i++) {
		o[i] = (struct opener){f->path, -100, &go};
		pthread_create(&th[i], NULL, open_concurrently, &o[i]);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(o[i].rc, 0);
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM schema_migrations"), 3);
	assert_int_equal(q_open(&f->q, f->path, Q_OPEN_CREATE), 0);
	/* a schema newer than this build is refused */
	raw_exec(f, "INSERT INTO schema_migrations(version, applied) VALUES(99, 0)");
	queue *newer = NULL;
	assert_int_not_equal(q_open(&newer, f->path, Q_OPEN_CREATE), 0);
	assert_non_null(strstr(ap_error_last(), "newer"));
	raw_exec(f, "DELETE FROM schema_migrations WHERE version=99");
}

/* A database written by a release before versioned migrations (SQLite only: PostgreSQL
 * support starts at version 2): its rows, bodies uncompressed, stay readable. */
static void test_sqlite_v1_database_is_migrated_and_readable(void **state)
{
	struct fixture *f = *state;
	job_info *job;

	if (pg_uri)
		return;
	q_close(f->q);
	f->q = NULL;
	unlink(f->path);
	raw_exec(f,
		 "CREATE TABLE deliveries(id INTEGER PRIMARY KEY, delivery TEXT NOT NULL "
		 "UNIQUE, event TEXT NOT NULL, body BLOB NOT NULL, received INTEGER NOT NULL, "
		 "outcome TEXT NOT NULL);"
		 "CREATE TABLE jobs(id INTEGER PRIMARY KEY, delivery TEXT NOT NULL, event TEXT "
		 "NOT NULL, repo TEXT NOT NULL, repo_id INTEGER NOT NULL DEFAULT 0, "
		 "installation_id INTEGER NOT NULL DEFAULT 0, issue INTEGER NOT NULL, trigger "
		 "TEXT NOT NULL, feedback TEXT, trigger_comment_id INTEGER NOT NULL DEFAULT 0, "
		 "state TEXT NOT NULL DEFAULT 'queued', stage TEXT, attempts INTEGER NOT NULL "
		 "DEFAULT 0, lease_owner TEXT, lease_until INTEGER, not_before INTEGER NOT NULL "
		 "DEFAULT 0, created INTEGER NOT NULL, updated INTEGER NOT NULL, result TEXT, "
		 "error TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0);"
		 "INSERT INTO deliveries(delivery, event, body, received, outcome) VALUES('old', "
		 "'issues', CAST('{\"old\":\"uncompressed body of an earlier release\"}' AS "
		 "BLOB), 1, 'queued');"
		 "INSERT INTO jobs(delivery, event, repo, issue, trigger, created, updated) "
		 "VALUES('old', 'issues', 'acme/old', 4, 'label', 1, 1);");
	assert_int_equal(q_open(&f->q, f->path, Q_OPEN_CREATE), 0);
	assert_int_equal(q_lease(f->q, "w", 1000, 1000, &job), 0);
	assert_string_equal(job->payload, "{\"old\":\"uncompressed body of an earlier release\"}");
	assert_int_equal(job->epoch, 1);
	q_job_free(job);
}

/* A JSON body of len bytes (len > 200) of compressible issue text naming tag (a few bytes),
 * so bodies of different tags differ. malloc'd; the caller frees. */
static char *text_body(size_t len, const char *tag)
{
	char *b = malloc(len + 1);
	size_t n;

	assert_non_null(b);
	n = (size_t)snprintf(b, len, "{\"action\":\"labeled\",\"issue\":{\"body\":\"");
	while (n < len - 100)
		n += (size_t)snprintf(b + n, len - n, "%s line %zu of the issue text. ", tag, n);
	snprintf(b + n, len + 1 - n, "\"}}");
	return b;
}

static void test_large_body_stored_compressed(void **state)
{
	struct fixture *f = *state;
	char *body = text_body(12000, "big");
	q_delivery a = trigger("d-big", "acme/w", 1);
	job_info *job;

	a.body = body;
	a.len = strlen(body);
	ingest1(f->q, &a, 1000);
	assert_true(body_len(f, "d-big") < (int64_t)a.len / 3);
	assert_int_equal(raw_int(f, "SELECT body_encoding FROM deliveries WHERE delivery='d-big'"),
			 2);
	assert_int_equal(q_lease(f->q, "w", 1000, 1000, &job), 0);
	assert_string_equal(job->payload, body);
	q_job_free(job);
	free(body);
}

/* A body the submitter encoded ahead (q_encode_body, as ing_submit does on the HTTP thread)
 * is stored as that encoding and leases back byte for byte; a small one stays raw; one never
 * ingested is released (ASan's leak check holds this to it). */
static void test_body_encoded_by_the_submitter(void **state)
{
	struct fixture *f = *state;
	char *body = text_body(12000, "pre");
	q_delivery a = trigger("d-pre", "acme/p", 1), small = trigger("d-small", "acme/s", 1);
	q_delivery unused = trigger("d-unused", "acme/u", 1);
	q_delivery *items[2] = {&a, &small};
	size_t zlen;
	job_info *job;

	a.body = unused.body = body;
	a.len = unused.len = strlen(body);
	q_encode_body(f->q, &a);
	q_encode_body(f->q, &small);
	q_encode_body(f->q, &unused);
	assert_true(a.encoded && a.stored && a.stored_len < a.len / 3);
	assert_true(small.encoded && !small.stored); /* too small to gain: raw */
	zlen = a.stored_len;
	assert_int_equal(q_ingest(f->q, items, 2, 1000), 0);
	assert_null(a.stored);
	assert_false(a.encoded);
	assert_int_equal(body_len(f, "d-pre"), (int64_t)zlen);
	assert_int_equal(raw_int(f, "SELECT body_encoding FROM deliveries WHERE delivery='d-pre'"),
			 2);
	assert_int_equal(
	    raw_int(f, "SELECT body_encoding FROM deliveries WHERE delivery='d-small'"), 0);
	assert_int_equal(q_lease(f->q, "w", 1000, 1000, &job), 0);
	assert_string_equal(job->delivery, "d-pre");
	assert_string_equal(job->payload, body);
	q_job_free(job);
	assert_int_equal(q_lease(f->q, "w", 1000, 1000, &job), 0);
	assert_string_equal(job->payload, small.body);
	q_job_free(job);
	q_encoded_release(&unused);
	assert_null(unused.stored);
	free(body);
}

/* Several HTTP threads encode bodies on one handle at once (AUTOPATCH_HTTP_THREADS): each
 * takes its own compression context, so every stored body leases back byte for byte. */
enum { ENC_THREADS = 6, ENC_EACH = 40, ENC_LEN = 9000 };

struct enc_arg {
	queue *q;
	int t;
	char *bodies[ENC_EACH];
	q_delivery d[ENC_EACH];
	char ids[ENC_EACH][32], repos[ENC_EACH][32];
};

static void *encode_many(void *p)
{
	struct enc_arg *a = p;

	for (int i = 0; i < ENC_EACH; i++) {
		char tag[16], *b;

		snprintf(tag, sizeof(tag), "t%d-i%d", a->t, i);
		a->bodies[i] = b = text_body(ENC_LEN, tag);
		snprintf(a->ids[i], sizeof(a->ids[i]), "d-enc-%d-%d", a->t, i);
		snprintf(a->repos[i], sizeof(a->repos[i]), "acme/enc%d", a->t);
		a->d[i] = trigger(a->ids[i], a->repos[i], i + 1);
		a->d[i].body = b;
		a->d[i].len = strlen(b);
		q_encode_body(a->q, &a->d[i]);
	}
	return NULL;
}

static void test_bodies_encoded_on_several_threads_at_once(void **state)
{
	struct fixture *f = *state;
	static struct enc_arg args[ENC_THREADS];
	pthread_t th[ENC_THREADS];
	q_delivery *items[ENC_THREADS * ENC_EACH];
	size_t n = 0, leased = 0;
	job_info *job;

	for (int t = 0; t < ENC_THREADS; t++) {
		args[t] = (struct enc_arg){.q = f->q, .t = t};
		assert_int_equal(pthread_create(&th[t], NULL, encode_many, &args[t]), 0);
	}
	for (int t = 0; t < ENC_THREADS; t++)
		assert_int_equal(pthread_join(th[t], NULL), 0);
	for (int t = 0; t < ENC_THREADS; t++)
		for (int i = 0; i < ENC_EACH; i++) {
			assert_true(args[t].d[i].encoded && args[t].d[i].stored);
			items[n++] = &args[t].d[i];
		}
	assert_int_equal(q_ingest(f->q, items, n, 1000), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(items[i]->result, Q_QUEUED);
	while (q_lease(f->q, "w", 1000, 1000, &job) == 0 && job) {
		int t = -1, i = -1;

		assert_int_equal(sscanf(job->delivery, "d-enc-%d-%d", &t, &i), 2);
		assert_true(t >= 0 && t < ENC_THREADS && i >= 0 && i < ENC_EACH);
		assert_string_equal(job->payload, args[t].bodies[i]);
		leased++;
		q_job_free(job);
	}
	assert_int_equal(leased, n);
	for (int t = 0; t < ENC_THREADS; t++)
		for (int i = 0; i < ENC_EACH; i++)
			free(args[t].bodies[i]);
}

/* Bodies an earlier release stored zlib-compressed (body_encoding 1) still lease. */
static void test_zlib_body_of_earlier_release_still_read(void **state)
{
	struct fixture *f = *state;
	static const char body[] = "{\"action\":\"labeled\",\"note\":\"stored by an earlier "
				   "release, zlib-compressed, stored by an earlier release\"}";
	unsigned char z[512];
	uLongf zn = sizeof(z);
	char sql[2048];
	size_t n;
	q_delivery a = trigger("d-zlib", "acme/w", 1);
	job_info *job;

	assert_int_equal(compress2(z, &zn, (const Bytef *)body, sizeof(body) - 1, 1), Z_OK);
	a.body = body;
	a.len = sizeof(body) - 1;
	ingest1(f->q, &a, 1000);
	n = (size_t)snprintf(sql, sizeof(sql), "UPDATE deliveries SET body_encoding=1, body=%s",
			     pg_uri ? "decode('" : "X'");
	for (uLongf i = 0; i < zn; i++)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, "%02x", z[i]);
	snprintf(sql + n, sizeof(sql) - n, "%s WHERE delivery='d-zlib'",
		 pg_uri ? "', 'hex')" : "'");
	raw_exec(f, sql);
	assert_int_equal(q_lease(f->q, "w", 1000, 1000, &job), 0);
	assert_string_equal(job->payload, body);
	q_job_free(job);
}

static void test_write_pacing_is_shared(void **state)
{
	struct fixture *f = *state;
	queue *other;
	int64_t w;

	assert_int_equal(q_open(&other, f->path, Q_OPEN_CREATE), 0);
	assert_int_equal(q_pace(f->q, 7, 1000, 10000, &w), 0);
	assert_int_equal(w, 0);
	/* the next slot, taken by another process, is a spacing later */
	assert_int_equal(q_pace(other, 7, 1000, 10000, &w), 0);
	assert_int_equal(w, 1000);
	assert_int_equal(q_pace(f->q, 7, 1000, 10500, &w), 0);
	assert_int_equal(w, 1500);
	/* another installation has its own */
	assert_int_equal(q_pace(other, 8, 1000, 10500, &w), 0);
	assert_int_equal(w, 0);
	/* idle long enough: no wait */
	assert_int_equal(q_pace(other, 7, 1000, 20000, &w), 0);
	assert_int_equal(w, 0);
	q_close(other);
}

struct leaser {
	const char *path;
	char owner[16];
	int64_t ids[64];
	int n;
	pthread_barrier_t *go;
};

static void *lease_all(void *arg)
{
	struct leaser *l = arg;
	queue *q;
	job_info *job;

	assert_int_equal(q_open(&q, l->path, Q_OPEN_CREATE), 0);
	pthread_barrier_wait(l->go);
	while (q_lease(q, l->owner, 60000, ap_wall_ms(), &job) == 0) {
		l->ids[l->n++] = job->id;
		q_job_free(job);
	}
	q_close(q);
	return NULL;
}

static void test_concurrent_leases_never_share_a_job(void **state)
{
	struct fixture *f = *state;
	enum { T = 4, JOBS = 40 };
	struct leaser l[T];
	pthread_t th[T];
	pthread_barrier_t go;
	char repo[JOBS][16], del[JOBS][16];
	q_delivery d[JOBS], *items[JOBS];
	bool seen[JOBS + 1] = {false};
	int total = 0;

	for (int i = 0; i < JOBS; i++) {
		snprintf(repo[i], sizeof(repo[i]), "acme/r%d", i);
		snprintf(del[i], sizeof(del[i]), "d-%d", i);
		d[i] = trigger(del[i], repo[i], 1);
		items[i] = &d[i];
	}
	assert_int_equal(q_ingest(f->q, items, JOBS, ap_wall_ms()), 0);
	pthread_barrier_init(&go, NULL, T);
	for (int i = 0; i < T; i++) {
		l[i] = (struct leaser){.path = f->path, .go = &go};
		snprintf(l[i].owner, sizeof(l[i].owner), "w%d", i);
		pthread_create(&th[i], NULL, lease_all, &l[i]);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		for (int k = 0; k < l[i].n; k++) {
			int64_t id = l[i].ids[k];

			assert_true(id >= 1 && id <= JOBS);
			assert_false(seen[id]);
			seen[id] = true;
			total++;
		}
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(total, JOBS);
}

struct ingester {
	const char *path;
	char delivery[32];
	q_delivery d, dup;
	pthread_barrier_t *go;
};

static void *ingest_concurrently(void *arg)
{
	struct ingester *g = arg;
	q_delivery *items[2] = {&g->d, &g->dup};
	queue *q;

	assert_int_equal(q_open(&q, g->path, Q_OPEN_CREATE), 0);
	pthread_barrier_wait(g->go);
	assert_int_equal(q_ingest(q, items, 2, ap_wall_ms()), 0);
	q_close(q);
	return NULL;
}

/* Replicas storing triggers for one issue (and the same redelivered id) at the same moment:
 * one job, every other delivery a duplicate or "already active", none failed. */
static void test_concurrent_ingest_one_job_per_issue(void **state)
{
	struct fixture *f = *state;
	enum { T = 4 };
	struct ingester g[T];
	pthread_t th[T];
	pthread_barrier_t go;
	int queued = 0, active = 0, dups = 0;

	pthread_barrier_init(&go, NULL, T);
	for (int i = 0; i < T; i++) {
		g[i].path = f->path;
		g[i].go = &go;
		snprintf(g[i].delivery, sizeof(g[i].delivery), "race-%d", i);
		g[i].d = trigger(g[i].delivery, "acme/race", 5);
		g[i].dup = trigger("race-same-id", "acme/race", 6);
		pthread_create(&th[i], NULL, ingest_concurrently, &g[i]);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		assert_int_not_equal(g[i].d.result, Q_FAILED);
		assert_int_not_equal(g[i].dup.result, Q_FAILED);
		queued += g[i].d.result == Q_QUEUED;
		active += g[i].d.result == Q_ACTIVE;
		dups += g[i].dup.result == Q_DUPLICATE;
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(queued, 1);
	assert_int_equal(active, T - 1);
	assert_int_equal(dups, T - 1);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs"), 2);
}

/* PostgreSQL restarted (or failed over): the connection is dropped under the handle, and the
 * next call works on a new one. */
static void test_pg_reconnects_after_the_server_dropped_it(void **state)
{
	struct fixture *f = *state;
	q_delivery a = trigger("d-1", "acme/w", 1);
	q_stats st;

	if (!pg_uri)
		return;
	ingest1(f->q, &a, 1000);
	raw_exec(f, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
		    "application_name='autopatch' AND pid <> pg_backend_pid()");
	usleep(100 * 1000);
	assert_int_equal(q_get_stats(f->q, &st), 0);
	assert_int_equal(st.queued, 1);
	raw_exec(f, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
		    "application_name='autopatch' AND pid <> pg_backend_pid()");
	usleep(100 * 1000);
	a.delivery = "d-2";
	a.issue = 2;
	ingest1(f->q, &a, 1100);
	assert_int_equal(a.result, Q_QUEUED);
}

/* The run-time statement cache: found by text and extra key only, the least recently used
 * entry dropped when full, too long a text refused, clear drops every entry. */
static int lru_dropped[Q_LRU_SIZE + 8];
static int lru_ndropped;

static void lru_drop(void *ud, void *stmt)
{
	(void)ud;
	lru_dropped[lru_ndropped++] = (int)(intptr_t)stmt;
}

static void test_stmt_lru_keeps_the_recently_used(void **state)
{
	q__stmt_lru c;
	char sql[64];
	int key = 7, other = 8;
	char *huge;

	(void)state;
	memset(&c, 0, sizeof(c));
	lru_ndropped = 0;
	for (int i = 1; i <= Q_LRU_SIZE; i++) {
		snprintf(sql, sizeof(sql), "SELECT %d", i);
		assert_int_equal(
		    q__lru_add(&c, sql, &key, sizeof(key), (void *)(intptr_t)i, lru_drop, NULL), 0);
	}
	assert_int_equal(lru_ndropped, 0);
	assert_ptr_equal(q__lru_find(&c, "SELECT 1", &key, sizeof(key)), (void *)(intptr_t)1);
	assert_null(q__lru_find(&c, "SELECT 1", &other, sizeof(other)));
	assert_null(q__lru_find(&c, "SELECT 1", NULL, 0));
	assert_null(q__lru_find(&c, "SELECT 10 ", &key, sizeof(key)));
	/* Full: "SELECT 2" is now the least recently used (1 was just found). */
	assert_int_equal(
	    q__lru_add(&c, "SELECT 99", &key, sizeof(key), (void *)(intptr_t)99, lru_drop, NULL),
	    0);
	assert_int_equal(lru_ndropped, 1);
	assert_int_equal(lru_dropped[0], 2);
	assert_null(q__lru_find(&c, "SELECT 2", &key, sizeof(key)));
	assert_ptr_equal(q__lru_find(&c, "SELECT 1", &key, sizeof(key)), (void *)(intptr_t)1);
	assert_ptr_equal(q__lru_find(&c, "SELECT 99", &key, sizeof(key)), (void *)(intptr_t)99);
	huge = malloc(Q_LRU_TEXT_MAX + 2);
	memset(huge, 'x', Q_LRU_TEXT_MAX + 1);
	huge[Q_LRU_TEXT_MAX + 1] = '\0';
	assert_int_equal(q__lru_add(&c, huge, NULL, 0, (void *)(intptr_t)5, lru_drop, NULL),
			 AP_EINVAL);
	assert_int_equal(lru_ndropped, 1);
	free(huge);
	q__lru_clear(&c, lru_drop, NULL);
	assert_int_equal(lru_ndropped, 1 + Q_LRU_SIZE);
	assert_null(q__lru_find(&c, "SELECT 1", &key, sizeof(key)));
}

/* Ingest batches of 1..40 deliveries (three statement texts each: more than PostgreSQL's
 * cache of prepared run-time texts holds, so the first ones are deallocated), then sizes seen
 * before again, then (PostgreSQL) a size still cached after the server dropped the
 * connection: every delivery of every batch is stored once. */
static void test_batches_of_every_size_after_eviction_and_reconnect(void **state)
{
	struct fixture *f = *state;
	static char ids[1000][16];
	static q_delivery ds[1000];
	q_delivery *batch[40];
	/* Sizes seen first (deallocated by now) and last (still prepared). */
	static const int again[] = {2, 3, 39, 1, 40};
	int64_t isolated = ap_stat_get(AP_STAT_INGEST_ISOLATED);
	int used = 0, total = 0;

	for (int round = 0; round < 40 + 5 + 1; round++) {
		int n = round < 40 ? round + 1 : round < 45 ? again[round - 40] : 40;

		if (round == 45 && pg_uri) {
			raw_exec(f, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
				    "application_name='autopatch' AND pid <> pg_backend_pid()");
			usleep(100 * 1000);
		}
		assert_true(used + n <= 1000);
		for (int i = 0; i < n; i++) {
			snprintf(ids[used + i], sizeof(ids[0]), "d-%d", used + i);
			ds[used + i] = trigger(ids[used + i], "acme/w", used + i + 1);
			batch[i] = &ds[used + i];
		}
		assert_int_equal(q_ingest(f->q, batch, (size_t)n, 1000 + round), 0);
		for (int i = 0; i < n; i++)
			assert_int_equal(batch[i]->result, Q_QUEUED);
		used += n;
		total += n;
	}
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs"), total);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM deliveries"), total);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM job_events"), total);
	assert_int_equal(ap_stat_get(AP_STAT_INGEST_ISOLATED), isolated);
}

/* --- group commit ------------------------------------------------------------------------ */

struct waiter {
	ing_item item;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	char delivery[32];
	char repo[32];
};

static void waiter_done(ing_item *item)
{
	struct waiter *w = item->ud;

	pthread_mutex_lock(&w->lock);
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Hand d to the writer with w waiting for it (d's texts must outlive the wait). */
static void waiter_submit(ingest *ing, struct waiter *w, q_delivery d)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->item.d = d;
	w->item.done = waiter_done;
	w->item.ud = w;
	ing_submit(ing, &w->item);
}

/* Until w's batch committed; its result. */
static enum q_result waiter_wait(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	return w->item.d.result;
}

static void test_group_commit_batches_and_commits_before_done(void **state)
{
	struct fixture *f = *state;
	enum { N = 200 };
	struct waiter *ws = calloc(N, sizeof(*ws));
	ingest *ing;
	q_stats st;

	assert_int_equal(ing_new(&ing, f->path, NULL, NULL), 0);
	for (int i = 0; i < N; i++) {
		struct waiter *w = &ws[i];

		snprintf(w->delivery, sizeof(w->delivery), "gc-%d", i);
		snprintf(w->repo, sizeof(w->repo), "acme/r%d", i);
		waiter_submit(ing, w, trigger(w->delivery, w->repo, 1));
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(waiter_wait(&ws[i]), Q_QUEUED);
	/* every done callback came after its COMMIT: another connection sees all rows */
	assert_int_equal(q_get_stats(f->q, &st), 0);
	assert_int_equal(st.queued, N);
	assert_true(ing_max_batch(ing) > 1);
	ing_free(ing);
	free(ws);
}

/* Every issue gets a trigger, a cancel and a trigger again, submitted back to back: in that
 * order each ends with one cancelled and one queued job. A cancel applied before its trigger
 * would cancel nothing, and the second trigger would find the first active: on PostgreSQL a
 * batch is sorted into one lock order for all replicas, which must keep each issue's order. */
static void test_group_commit_keeps_the_order_of_each_issue(void **state)
{
	struct fixture *f = *state;
	enum { ISSUES = 300, N = ISSUES * 3 };
	struct waiter *ws = calloc(N, sizeof(*ws));
	ingest *ing;

	assert_int_equal(ing_new(&ing, f->path, NULL, NULL), 0);
	for (int i = 0; i < N; i++) {
		struct waiter *w = &ws[i];
		q_delivery d;

		snprintf(w->delivery, sizeof(w->delivery), "ord-%d", i);
		snprintf(w->repo, sizeof(w->repo), "acme/o%d", i / 3 % 7);
		d = trigger(w->delivery, w->repo, i / 3);
		if (i % 3 == 1) {
			d.kind = Q_CANCEL;
			d.body = "{}";
			d.len = 2;
		}
		waiter_submit(ing, w, d);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(waiter_wait(&ws[i]), i % 3 == 1 ? Q_CANCELLED : Q_QUEUED);
		if (i % 3 == 1)
			assert_int_equal(ws[i].item.d.ncancelled, 1);
	}
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE state='cancelled'"), ISSUES);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE state='queued'"), ISSUES);
	ing_free(ing);
	free(ws);
}

/* Whether w's batch committed within ms milliseconds. */
static bool waiter_wait_for(struct waiter *w, int ms)
{
	struct timespec ts;
	bool done;

	ap_deadline_in(&ts, CLOCK_REALTIME, ms);
	pthread_mutex_lock(&w->lock);
	while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
		;
	done = w->done;
	pthread_mutex_unlock(&w->lock);
	return done;
}

/* On PostgreSQL a second writer runs the next batch while one waits for its COMMIT, and one
 * issue's deliveries keep their order. The test holds one trigger's COMMIT (a deferred
 * constraint trigger waits for an advisory lock the test holds): a delivery for another issue
 * commits meanwhile; a cancel of the held issue waits for that COMMIT (the job it must cancel
 * is invisible until then) and then cancels it. SQLite has one writer. */
static void test_group_commit_overlaps_commits_in_issue_order(void **state)
{
	struct fixture *f = *state;
	struct waiter held = {0}, other = {0}, cancel = {0};
	q_delivery c = trigger("cancel-1", "acme/held", 1);
	PGresult *r;
	ingest *ing;
	int64_t waiting = 0;

	assert_int_equal(ing_new(&ing, f->path, NULL, NULL), 0);
	if (!pg_uri) {
		assert_int_equal(ing__writers(ing), 1);
		ing_free(ing);
		return;
	}
	assert_int_equal(ing__writers(ing), 2);
	/* the fixture's connection and the two writers' (no checkpointer on PostgreSQL) */
	for (int i = 0; i < 100 && waiting != 3; i++) {
		if (i)
			usleep(20 * 1000);
		waiting = raw_int(f, "SELECT count(*) FROM pg_stat_activity WHERE "
				     "application_name='autopatch'");
	}
	assert_int_equal(waiting, 3);
	waiting = 0;
	raw_exec(f, "CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
		    "PERFORM pg_advisory_lock_shared(4242); RETURN NULL; END $$; "
		    "CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON deliveries DEFERRABLE "
		    "INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.delivery = 'held-1') "
		    "EXECUTE FUNCTION hold_commit()");
	f->hold = PQconnectdb(f->path);
	assert_int_equal(PQstatus(f->hold), CONNECTION_OK);
	r = PQexec(f->hold, "SELECT pg_advisory_lock(4242)");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);

	waiter_submit(ing, &held, trigger("held-1", "acme/held", 1));
	for (int i = 0; i < 500 && waiting < 1; i++) { /* held-1 is in its COMMIT */
		usleep(20 * 1000);
		waiting = raw_int(f, "SELECT count(*) FROM pg_locks WHERE locktype='advisory' "
				     "AND NOT granted");
	}
	assert_int_equal(waiting, 1);
	waiter_submit(ing, &other, trigger("other-1", "acme/other", 1));
	assert_true(waiter_wait_for(&other, 10000));
	assert_int_equal(other.item.d.result, Q_QUEUED);
	c.kind = Q_CANCEL;
	c.body = "{}";
	c.len = 2;
	waiter_submit(ing, &cancel, c);
	assert_false(waiter_wait_for(&cancel, 300));
	assert_false(waiter_wait_for(&held, 0));

	r = PQexec(f->hold, "SELECT pg_advisory_unlock(4242)");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	assert_int_equal(waiter_wait(&held), Q_QUEUED);
	assert_int_equal(waiter_wait(&cancel), Q_CANCELLED);
	assert_int_equal(cancel.item.d.ncancelled, 1);
	assert_int_equal(raw_int(f, "SELECT count(*) FROM jobs WHERE repo='acme/held' AND "
				    "state='cancelled'"),
			 1);
	ing_free(ing);
}

/* Feeders for the WAL test: each keeps a wave of deliveries (its own issues, a 3 KB body that
 * does not compress away) with the writer until its time is up. */
struct feeder {
	ingest *ing;
	int id;
	int64_t until_ms;
	atomic_bool *stop; /* NULL, or an earlier end than until_ms */
	int sent, failed;
	pthread_t thread;
	char body[3100];
};

static void *feed(void *arg)
{
	struct feeder *fd = arg;
	enum { WAVE = 16 };
	struct waiter *ws = calloc(WAVE, sizeof(*ws));
	uint32_t x = 2463534242u + (uint32_t)fd->id;
	size_t n = (size_t)snprintf(fd->body, sizeof(fd->body), "{\"pad\":\"");

	while (n < 3000) { /* xorshift hex: zstd keeps about half of it */
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		fd->body[n++] = "0123456789abcdef"[x & 15];
	}
	n += (size_t)snprintf(fd->body + n, sizeof(fd->body) - n, "\"}");
	while (ap_mono_ms() < fd->until_ms && !(fd->stop && atomic_load(fd->stop))) {
		memset(ws, 0, WAVE * sizeof(*ws));
		for (int i = 0; i < WAVE; i++) {
			q_delivery d;

			snprintf(ws[i].delivery, sizeof(ws[i].delivery), "wal-%d-%d", fd->id,
				 fd->sent + i);
			snprintf(ws[i].repo, sizeof(ws[i].repo), "acme/wal%d", fd->id);
			d = trigger(ws[i].delivery, ws[i].repo, fd->sent + i + 1);
			d.body = fd->body;
			d.len = n;
			waiter_submit(fd->ing, &ws[i], d);
		}
		for (int i = 0; i < WAVE; i++)
			fd->failed += waiter_wait(&ws[i]) != Q_QUEUED;
		fd->sent += WAVE;
	}
	free(ws);
	return NULL;
}

/* Start n feeders into ing, each until until_ms (or stop). */
static void feeders_start(struct feeder *fds, int n, ingest *ing, int64_t until_ms,
			  atomic_bool *stop)
{
	for (int i = 0; i < n; i++) {
		fds[i] = (struct feeder){.ing = ing, .id = i, .until_ms = until_ms, .stop = stop};
		assert_int_equal(pthread_create(&fds[i].thread, NULL, feed, &fds[i]), 0);
	}
}

/* Wait for n feeders: every delivery they sent was queued, and q sees each as a job. */
static int64_t feeders_join(struct feeder *fds, int n, queue *q)
{
	int64_t total = 0;
	q_stats st;

	for (int i = 0; i < n; i++) {
		pthread_join(fds[i].thread, NULL);
		assert_int_equal(fds[i].failed, 0);
		total += fds[i].sent;
	}
	assert_int_equal(q_get_stats(q, &st), 0);
	assert_int_equal(st.queued, total);
	return total;
}

/* The SQLite database's WAL file next to f's database, into out[0..cap). */
static const char *wal_path(const struct fixture *f, char *out, size_t cap)
{
	snprintf(out, cap, "%s-wal", f->path);
	return out;
}

static long long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* SQLite: a writer that never pauses for a whole background checkpoint still lets the WAL
 * restart from its first frame. Before, the checkpointer copied frames while the writer kept
 * appending, the WAL was never fully copied when a transaction began, and it grew without end
 * (257 MB after 6 s of the benchmark). The WAL header's checkpoint sequence number counts the
 * restarts: four feeders keep the writer busy for six checkpoint intervals. On PostgreSQL the
 * same load must simply all be queued. */
static void test_group_commit_lets_the_wal_restart_under_load(void **state)
{
	struct fixture *f = *state;
	enum { FEEDERS = 4, RUN_MS = 1500 };
	struct feeder *fds = calloc(FEEDERS, sizeof(*fds));
	int64_t total = 0;
	ingest *ing;

	assert_int_equal(ing_new(&ing, f->path, NULL, NULL), 0);
	feeders_start(fds, FEEDERS, ing, ap_mono_ms() + RUN_MS, NULL);
	total = feeders_join(fds, FEEDERS, f->q);
	if (!pg_uri) {
		char wal[sizeof(f->path) + 8];
		unsigned char hdr[32];
		uint32_t restarts;
		FILE *fp;

		fp = fopen(wal_path(f, wal, sizeof(wal)), "rb");
		assert_non_null(fp);
		assert_int_equal(fread(hdr, 1, sizeof(hdr), fp), sizeof(hdr));
		fclose(fp);
		restarts = (uint32_t)hdr[12] << 24 | (uint32_t)hdr[13] << 16 |
			   (uint32_t)hdr[14] << 8 | hdr[15];
		print_message("      %lld deliveries in %d ms, WAL restarted %u times\n",
			      (long long)total, RUN_MS, restarts);
		assert_true(restarts >= 2);
	}
	ing_free(ing);
	free(fds);
}

/* A reader that keeps an old snapshot through a burst does not stop the intake, and on SQLite
 * nothing can restart the WAL under it, so the WAL grows; once the reader lets go the WAL
 * restarts and is cut back to journal_size_limit (64 MiB) instead of keeping the burst's size
 * for good. After the burst a trickle of deliveries keeps committing (the checkpointer runs
 * after commits, and the WAL restarts at a write): at the burst's rate the WAL would fill
 * 64 MiB again between two checkpoints. On PostgreSQL the reader is a REPEATABLE READ
 * transaction. */
static void test_group_commit_wal_shrinks_once_a_reader_lets_go(void **state)
{
	struct fixture *f = *state;
	enum { FEEDERS = 4, GROW_MS = 30000, PG_MS = 1000, TRICKLE = 500 };
	/* the limit, and the one delivery committed after the restart before the cut */
	const long long grown = 100LL << 20, limit = (64LL + 1) << 20;
	struct feeder *fds = calloc(FEEDERS, sizeof(*fds));
	char wal[sizeof(f->path) + 8];
	atomic_bool stop = false;
	sqlite3 *reader = NULL;
	long long size = 0;
	ingest *ing;
	int64_t t0;
	int n = 0;

	wal_path(f, wal, sizeof(wal));
	assert_int_equal(ing_new(&ing, f->path, NULL, NULL), 0);
	if (pg_uri) {
		PGresult *r;

		f->hold = PQconnectdb(f->path);
		assert_int_equal(PQstatus(f->hold), CONNECTION_OK);
		r = PQexec(f->hold,
			   "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jobs");
		assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
		PQclear(r);
	} else {
		assert_int_equal(sqlite3_open(f->path, &reader), SQLITE_OK);
		assert_int_equal(
		    sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM jobs", NULL, NULL, NULL),
		    SQLITE_OK);
	}
	t0 = ap_mono_ms();
	feeders_start(fds, FEEDERS, ing, t0 + GROW_MS + PG_MS, &stop);
	if (pg_uri) {
		usleep(PG_MS * 1000);
		PQclear(PQexec(f->hold, "COMMIT"));
	} else {
		while (ap_mono_ms() - t0 < GROW_MS && (size = file_size(wal)) < grown)
			usleep(10 * 1000);
		print_message("      WAL %lld MB with the reader holding its snapshot\n",
			      size >> 20);
		assert_true(size >= grown);
		assert_int_equal(sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	}
	atomic_store(&stop, true);
	feeders_join(fds, FEEDERS, f->q);
	/* the trickle: one delivery every 20 ms until the WAL is cut (10 s at most) */
	for (; !pg_uri && n < TRICKLE && (size = file_size(wal)) > limit; n++) {
		struct waiter w = {0};

		snprintf(w.delivery, sizeof(w.delivery), "trickle-%d", n);
		waiter_submit(ing, &w, trigger(w.delivery, "acme/trickle", n + 1));
		assert_int_equal(waiter_wait(&w), Q_QUEUED);
		usleep(20 * 1000);
	}
	if (!pg_uri) {
		print_message("      WAL %lld MB after %d more deliveries\n", size >> 20, n);
		assert_true(size >= 0 && size <= limit);
	}
	sqlite3_close(reader);
	ing_free(ing);
	free(fds);
}

/* A job queued through group commit wakes pollers of other processes (their own connection
 * LISTENing) on PostgreSQL; on SQLite there is nobody to wake and the wait only sleeps. */
static void test_group_commit_wakes_other_processes(void **state)
{
	struct fixture *f = *state;
	struct waiter w = {0};
	bool woken = true;
	queue *other;
	ingest *ing;

	assert_int_equal(q_open(&other, f->path, Q_OPEN_CREATE), 0);
	assert_int_equal(q_wait_wake(other, 10, &woken), 0); /* starts listening */
	assert_false(woken);
	assert_int_equal(ing_new(&ing, f->path, NULL, NULL), 0);
	waiter_submit(ing, &w, trigger("wake-1", "acme/wake", 1));
	assert_int_equal(waiter_wait(&w), Q_QUEUED);
	assert_int_equal(q_wait_wake(other, pg_uri ? 5000 : 50, &woken), 0);
	assert_int_equal(woken, pg_uri != NULL);
	ing_free(ing);
	q_close(other);
}

/* --- worker pool ------------------------------------------------------------------------- */

struct script {
	atomic_int runs;
	int ignore_stop_ms;  /* run this long, deaf to should_stop */
	int fail_first_with; /* the first run ends with this outcome, 0 = succeed at once */
	bool wait_for_stop;  /* loop until should_stop */
	atomic_bool saw_cancelled;
	atomic_bool started;
	atomic_bool stopped;
};

static void scripted_run(const job_info *job, const job_ctl *ctl, void *ud, job_outcome *out)
{
	struct script *s = ud;
	int run = atomic_fetch_add(&s->runs, 1);

	(void)job;
	job_ctl_stage(ctl, STAGE_PLANNING, "thinking");
	job_ctl_state_set(ctl, "comment", "42");
	atomic_store(&s->started, true);
	if (s->ignore_stop_ms) {
		usleep((useconds_t)s->ignore_stop_ms * 1000);
		out->summary = strdup("finished late");
		out->kind = JOB_SUCCEEDED;
		return;
	}
	if (s->wait_for_stop) {
		while (!job_ctl_should_stop(ctl))
			usleep(10000);
		atomic_store(&s->saw_cancelled, job_ctl_cancelled(ctl));
		atomic_store(&s->stopped, true);
		out->summary = strdup("stopped");
		out->kind = JOB_CANCELLED;
		return;
	}
	if (run == 0 && s->fail_first_with) {
		out->summary = strdup("docker unavailable");
		out->kind = (enum job_outcome_kind)s->fail_first_with;
		return;
	}
	out->summary = strdup("https://example.invalid/pr/1");
	out->kind = JOB_SUCCEEDED;
}

static wk_config pool_cfg(struct fixture *f, struct script *s)
{
	return (wk_config){.db_path = f->path,
			   .workers = 2,
			   .lease_ms = 3000,
			   .max_attempts = 3,
			   .retry_base_ms = 100,
			   .instance = "test",
			   .run = scripted_run,
			   .ud = s};
}

static void wait_state(queue *q, int64_t id, const char *want)
{
	char s[32];

	for (int i = 0; i < 1000; i++) {
		if (strcmp(job_state(q, id, s, sizeof(s)), want) == 0)
			return;
		usleep(10000);
	}
	fail_msg("job %lld never reached %s (is %s)", (long long)id, want, s);
}

static void test_pool_retries_then_succeeds(void **state)
{
	struct fixture *f = *state;
	struct script s = {.fail_first_with = JOB_RETRY};
	wk_config c = pool_cfg(f, &s);
	q_delivery a = trigger("d-1", "acme/w", 1);
	wk_pool *p;
	cJSON *arr;
	char *v;

	ingest1(f->q, &a, ap_wall_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	wk_notify(p);
	wait_state(f->q, a.job_id, "succeeded");
	wk_stop(p, 1000);
	assert_int_equal(atomic_load(&s.runs), 2);
	assert_int_equal(q_jobs_json(f->q, a.job_id, 0, &arr), 0);
	assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "attempts")->valueint, 2);
	assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, 0), "result")->valuestring,
			    "https://example.invalid/pr/1");
	cJSON_Delete(arr);
	assert_int_equal(q_state_get(f->q, a.job_id, "comment", &v), 0);
	assert_string_equal(v, "42");
	free(v);
}

static void test_pool_non_retryable_fails(void **state)
{
	struct fixture *f = *state;
	struct script s = {.fail_first_with = JOB_FAILED};
	wk_config c = pool_cfg(f, &s);
	q_delivery a = trigger("d-1", "acme/w", 1);
	wk_pool *p;

	ingest1(f->q, &a, ap_wall_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	wait_state(f->q, a.job_id, "failed");
	wk_stop(p, 1000);
	assert_int_equal(atomic_load(&s.runs), 1);
}

static void test_pool_cancel_reaches_running_job(void **state)
{
	struct fixture *f = *state;
	struct script s = {.wait_for_stop = true};
	wk_config c = pool_cfg(f, &s);
	q_delivery a = trigger("d-1", "acme/w", 1);
	wk_pool *p;
	int n;

	ingest1(f->q, &a, ap_wall_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	wait_state(f->q, a.job_id, "running");
	while (!atomic_load(&s.started))
		usleep(5000);
	assert_int_equal(q_cancel(f->q, "acme/w", 1, "test", ap_wall_ms(), &n), 0);
	wait_state(f->q, a.job_id, "cancelled");
	assert_true(atomic_load(&s.saw_cancelled));
	wk_stop(p, 1000);
}

static void test_pool_shutdown_requeues_without_counting(void **state)
{
	struct fixture *f = *state;
	struct script s = {.wait_for_stop = true};
	wk_config c = pool_cfg(f, &s);
	q_delivery a = trigger("d-1", "acme/w", 1);
	wk_pool *p;
	job_info *job;

	ingest1(f->q, &a, ap_wall_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	while (!atomic_load(&s.started))
		usleep(5000);
	wk_stop(p, 2000);
	assert_false(atomic_load(&s.saw_cancelled));
	assert_int_equal(q_lease(f->q, "next", 1000, ap_wall_ms(), &job), 0);
	assert_int_equal(job->id, a.job_id);
	assert_int_equal(job->attempts, 1); /* the interrupted attempt was refunded */
	q_job_free(job);
}

static void test_pool_lost_lease_stops_the_run(void **state)
{
	struct fixture *f = *state;
	struct script s = {.wait_for_stop = true};
	wk_config c = pool_cfg(f, &s);
	q_delivery a = trigger("d-1", "acme/w", 1);
	wk_pool *p;
	char st[32];

	c.lease_ms = 300;
	ingest1(f->q, &a, ap_wall_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	while (!atomic_load(&s.started))
		usleep(5000);
	/* another server took the job over (as if this one had been presumed dead) */
	raw_exec(f, "UPDATE jobs SET lease_owner='other', lease_epoch=lease_epoch+1");
	for (int i = 0; i < 300 && !atomic_load(&s.stopped); i++)
		usleep(10000);
	assert_true(atomic_load(&s.stopped));
	assert_false(atomic_load(&s.saw_cancelled));
	/* the stale worker did not record its "cancelled" over the new owner's job */
	assert_string_not_equal(job_state(f->q, a.job_id, st, sizeof(st)), "cancelled");
	wk_stop(p, 1000);
}

/* The pool is kept reachable: wk_stop leaves an abandoned pool to the exiting process. */
static wk_pool *abandoned_pool;

static void test_pool_grace_expiry_requeues_and_ignores_late_result(void **state)
{
	struct fixture *f = *state;
	struct script s = {.ignore_stop_ms = 800};
	wk_config c = pool_cfg(f, &s);
	q_delivery a = trigger("d-1", "acme/w", 1);
	job_info *job;
	char st[32];

	ingest1(f->q, &a, ap_wall_ms());
	assert_int_equal(wk_start(&abandoned_pool, &c), 0);
	while (!atomic_load(&s.started))
		usleep(5000);
	wk_stop(abandoned_pool, 100); /* the job ignores the stop: re-queued after 100 ms */
	assert_string_equal(job_state(f->q, a.job_id, st, sizeof(st)), "queued");
	usleep(1200 * 1000); /* the late "success" must not overwrite the re-queue */
	assert_string_equal(job_state(f->q, a.job_id, st, sizeof(st)), "queued");
	assert_int_equal(q_lease(f->q, "next", 1000, ap_wall_ms(), &job), 0);
	assert_int_equal(job->attempts, 1);
	q_job_free(job);
}

/* --- the spending ledger ---------------------------------------------------------------- */

#define DAY_MS INT64_C(86400000)
#define T0     (INT64_C(1767225600000) + 3600000) /* 2026-01-01 01:00 UTC */

static void test_spend_ledger_day_totals(void **state)
{
	struct fixture *f = *state;
	job_spend_req req = {true, 300, 1000, 500};
	job_spend_verdict v;
	job_usage u = {120, 10, 5, 1};
	int64_t a = 0, b = 0, c = 0, total = -1;
	cJSON *jobs = NULL;

	/* an open row carries its hold; a second run of the repository fits the repo cap */
	assert_int_equal(q_spend_open(f->q, 1, "o/a", &req, T0, &a, &v), 0);
	assert_false(v.refused);
	assert_true(a > 0);
	assert_int_equal(q__spend_day(f->q, "o/a", T0, &total), 0);
	assert_int_equal(total, 300);
	/* spending below the hold: still the hold; closing: only what was spent */
	assert_int_equal(q_spend_record(f->q, a, &u, false), 0);
	assert_int_equal(q__spend_day(f->q, "o/a", T0, &total), 0);
	assert_int_equal(total, 300);
	assert_int_equal(q_spend_record(f->q, a, &u, true), 0);
	assert_int_equal(q__spend_day(f->q, "o/a", T0, &total), 0);
	assert_int_equal(total, 120);
	/* 120 + 300 <= 500: allowed; then 120 + 300 + 300 > 500: refused by the repository */
	assert_int_equal(q_spend_open(f->q, 2, "o/a", &req, T0 + 1000, &b, &v), 0);
	assert_false(v.refused);
	assert_int_equal(q_spend_open(f->q, 3, "o/a", &req, T0 + 2000, &c, &v), 0);
	assert_true(v.refused);
	assert_true(v.repo);
	assert_int_equal(v.spent_micro, 420);
	assert_int_equal(v.cap_micro, 500);
	assert_int_equal(c, 0);
	/* another repository: its own cap is free, the global one (1000) holds 420 */
	assert_int_equal(q_spend_open(f->q, 4, "o/b", &req, T0, &c, &v), 0);
	assert_false(v.refused);
	assert_int_equal(q__spend_day(f->q, NULL, T0, &total), 0);
	assert_int_equal(total, 720);
	/* spending above the hold (a provider that reported more) counts in full */
	u.cost_micro = 900;
	assert_int_equal(q_spend_record(f->q, c, &u, false), 0);
	assert_int_equal(q__spend_day(f->q, NULL, T0, &total), 0);
	assert_int_equal(total, 1320);
	assert_int_equal(q_spend_open(f->q, 5, "o/c", &req, T0, &a, &v), 0);
	assert_true(v.refused);
	assert_false(v.repo);
	assert_int_equal(v.spent_micro, 1320);
	/* the next UTC day starts empty */
	assert_int_equal(q_spend_open(f->q, 5, "o/c", &req, T0 + DAY_MS, &a, &v), 0);
	assert_false(v.refused);
	/* without a price nothing is held, and a budget refuses (never free) */
	req.priced = false;
	assert_int_equal(q_spend_open(f->q, 6, "o/d", &req, T0 + DAY_MS, &a, &v), 0);
	assert_true(v.refused);
	req.global_cap_micro = req.repo_cap_micro = 0;
	assert_int_equal(q_spend_open(f->q, 6, "o/d", &req, T0 + DAY_MS, &a, &v), 0);
	assert_false(v.refused);
	assert_int_equal(q_spend_record(f->q, 999999, &u, true), AP_ENOTFOUND);

	/* the jobs view sums a job's runs (no job rows here: the view is of jobs) */
	assert_int_equal(q_jobs_json(f->q, 0, 0, &jobs), 0);
	assert_int_equal(cJSON_GetArraySize(jobs), 0);
	cJSON_Delete(jobs);
}

struct racer {
	const char *path;
	int64_t job, now;
	pthread_barrier_t *go;
	int refused;
	int rc;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	job_spend_req req = {true, 600, 1000, 0};
	job_spend_verdict v;
	queue *q = NULL;
	int64_t row;

	r->rc = q_open(&q, r->path, Q_OPEN_CREATE);
	pthread_barrier_wait(r->go);
	if (r->rc == 0)
		r->rc = q_spend_open(q, r->job, "o/race", &req, r->now, &row, &v);
	r->refused = v.refused;
	q_close(q);
	return NULL;
}

/* Two runs on two connections race for the last dollars: exactly one starts, every time. */
static void test_spend_race_lets_one_through(void **state)
{
	struct fixture *f = *state;

	for (int round = 0; round < 20; round++) {
		pthread_barrier_t go;
		pthread_t t[2];
		struct racer r[2];

		pthread_barrier_init(&go, NULL, 2);
		for (int i = 0; i < 2; i++) {
			r[i] = (struct racer){f->path, 10 + i, T0 + round * DAY_MS, &go, 0, 0};
			pthread_create(&t[i], NULL, race, &r[i]);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&go);
		assert_int_equal(r[0].rc, 0);
		assert_int_equal(r[1].rc, 0);
		assert_int_equal(r[0].refused + r[1].refused, 1);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_delivery_dedupe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_semantic_dedupe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_body_kept_only_for_deliveries_that_act, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_mixed_batch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_batch_carries_awkward_values, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_batch_with_a_bad_item_is_stored_one_at_a_time,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lease_fields_and_payload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lease_expiry_requeue_and_max_attempts, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_heartbeat_extends_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backoff_and_release, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel_queued_and_running, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_and_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_jobs_page_titles_filters_and_pages, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_spend_ledger_day_totals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spend_race_lets_one_through, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fencing_epoch_grows_and_stale_lease_is_refused,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrations_versioned_and_concurrent, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_v1_database_is_migrated_and_readable, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_large_body_stored_compressed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_body_encoded_by_the_submitter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bodies_encoded_on_several_threads_at_once, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_zlib_body_of_earlier_release_still_read, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_write_pacing_is_shared, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_leases_never_share_a_job, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_ingest_one_job_per_issue, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_pg_reconnects_after_the_server_dropped_it, setup,
					    teardown),
	    cmocka_unit_test(test_stmt_lru_keeps_the_recently_used),
	    cmocka_unit_test_setup_teardown(test_batches_of_every_size_after_eviction_and_reconnect,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_batches_and_commits_before_done,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_keeps_the_order_of_each_issue, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_overlaps_commits_in_issue_order,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_wakes_other_processes, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_lets_the_wal_restart_under_load,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_wal_shrinks_once_a_reader_lets_go,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_retries_then_succeeds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_non_retryable_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_cancel_reaches_running_job, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_shutdown_requeues_without_counting, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_pool_lost_lease_stops_the_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_grace_expiry_requeues_and_ignores_late_result,
					    setup, teardown),
	};
	if (argc > 1 && strcmp(argv[1], "pg") == 0) {
		pg_uri = getenv("AP_TEST_PG_URI");
		if (!pg_uri || !*pg_uri) {
			fprintf(stderr, "test_queue pg: AP_TEST_PG_URI is not set (run it through "
					"tests/e2e/pg_util.py, as meson does)\n");
			return 1;
		}
		return cmocka_run_group_tests_name("queue (PostgreSQL)", tests, NULL, NULL);
	}
	return cmocka_run_group_tests_name("queue (SQLite)", tests, NULL, NULL);
}
