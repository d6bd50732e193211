/* SPDX-License-Identifier: MIT */
/* tests/server/test_queue.c - the SQLite queue, the group-commit writer and the worker pool
 * against a real database file: delivery dedupe, semantic dedupe, leases and their expiry,
 * attempts and backoff, cancellation, shutdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "server/ingest.h"
#include "server/queue.h"
#include "server/workers.h"

struct fixture {
	char dir[64];
	char path[96];
	queue *q;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/ap-queue-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/q.db", f->dir);
	if (q_open(&f->q, f->path, Q_OPEN_CREATE))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[160];

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

static int64_t body_len(const char *path, const char *delivery)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t n = -1;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT length(body) FROM deliveries "
					    "WHERE delivery=?",
					    -1, &st, NULL),
			 SQLITE_OK);
	sqlite3_bind_text(st, 1, delivery, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
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
	assert_int_equal(body_len(f->path, "d-job"), 20);
	assert_int_equal(body_len(f->path, "d-active"), 0);
	assert_int_equal(body_len(f->path, "d-ignored"), 0);
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
	job_info *job;

	/* one transaction, two triggers for the same issue: the second finds the first */
	assert_int_equal(q_ingest(f->q, batch, 3, 1000), 0);
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
	assert_int_equal(q_heartbeat(f->q, job->id, "w", 5000, 5000), 0);
	assert_int_equal(q_requeue_expired(f->q, 3, 8000, &n), 0);
	assert_int_equal(n, 0);
	assert_string_equal(job_state(f->q, a.job_id, s, sizeof(s)), "running");
	assert_int_equal(q_heartbeat(f->q, job->id, "other", 5000, 5000), AP_ENOTFOUND);
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
	assert_int_equal(q_event(f->q, a.job_id, "planning", "reading code", 1100), 0);
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

		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->cond, NULL);
		snprintf(w->delivery, sizeof(w->delivery), "gc-%d", i);
		snprintf(w->repo, sizeof(w->repo), "acme/r%d", i);
		w->item.d = trigger(w->delivery, w->repo, 1);
		w->item.done = waiter_done;
		w->item.ud = w;
		ing_submit(ing, &w->item);
	}
	for (int i = 0; i < N; i++) {
		struct waiter *w = &ws[i];

		pthread_mutex_lock(&w->lock);
		while (!w->done)
			pthread_cond_wait(&w->cond, &w->lock);
		pthread_mutex_unlock(&w->lock);
		assert_int_equal(w->item.d.result, Q_QUEUED);
	}
	/* every done callback came after its COMMIT: another connection sees all rows */
	assert_int_equal(q_get_stats(f->q, &st), 0);
	assert_int_equal(st.queued, N);
	assert_true(ing_max_batch(ing) > 1);
	ing_free(ing);
	free(ws);
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

	ingest1(f->q, &a, q_now_ms());
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

	ingest1(f->q, &a, q_now_ms());
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

	ingest1(f->q, &a, q_now_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	wait_state(f->q, a.job_id, "running");
	while (!atomic_load(&s.started))
		usleep(5000);
	assert_int_equal(q_cancel(f->q, "acme/w", 1, "test", q_now_ms(), &n), 0);
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

	ingest1(f->q, &a, q_now_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	while (!atomic_load(&s.started))
		usleep(5000);
	wk_stop(p, 2000);
	assert_false(atomic_load(&s.saw_cancelled));
	assert_int_equal(q_lease(f->q, "next", 1000, q_now_ms(), &job), 0);
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
	sqlite3 *db;
	char st[32];

	c.lease_ms = 300;
	ingest1(f->q, &a, q_now_ms());
	assert_int_equal(wk_start(&p, &c), 0);
	while (!atomic_load(&s.started))
		usleep(5000);
	/* another server took the job over (as if this one had been presumed dead) */
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_exec(db, "UPDATE jobs SET lease_owner='other'", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
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

	ingest1(f->q, &a, q_now_ms());
	assert_int_equal(wk_start(&abandoned_pool, &c), 0);
	while (!atomic_load(&s.started))
		usleep(5000);
	wk_stop(abandoned_pool, 100); /* the job ignores the stop: re-queued after 100 ms */
	assert_string_equal(job_state(f->q, a.job_id, st, sizeof(st)), "queued");
	usleep(1200 * 1000); /* the late "success" must not overwrite the re-queue */
	assert_string_equal(job_state(f->q, a.job_id, st, sizeof(st)), "queued");
	assert_int_equal(q_lease(f->q, "next", 1000, q_now_ms(), &job), 0);
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
	assert_int_equal(q_spend_day(f->q, "o/a", T0, &total), 0);
	assert_int_equal(total, 300);
	/* spending below the hold: still the hold; closing: only what was spent */
	assert_int_equal(q_spend_record(f->q, a, &u, false), 0);
	assert_int_equal(q_spend_day(f->q, "o/a", T0, &total), 0);
	assert_int_equal(total, 300);
	assert_int_equal(q_spend_record(f->q, a, &u, true), 0);
	assert_int_equal(q_spend_day(f->q, "o/a", T0, &total), 0);
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
	assert_int_equal(q_spend_day(f->q, NULL, T0, &total), 0);
	assert_int_equal(total, 720);
	/* spending above the hold (a provider that reported more) counts in full */
	u.cost_micro = 900;
	assert_int_equal(q_spend_record(f->q, c, &u, false), 0);
	assert_int_equal(q_spend_day(f->q, NULL, T0, &total), 0);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_delivery_dedupe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_semantic_dedupe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_body_kept_only_for_deliveries_that_act, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_lease_fields_and_payload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lease_expiry_requeue_and_max_attempts, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_heartbeat_extends_lease, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backoff_and_release, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cancel_queued_and_running, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_and_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spend_ledger_day_totals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spend_race_lets_one_through, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group_commit_batches_and_commits_before_done,
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
	return cmocka_run_group_tests(tests, NULL, NULL);
}
