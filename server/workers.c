/* SPDX-License-Identifier: MIT */
/* server/workers.c - worker threads, lease keeper and the job_ops the pool hands each job
 * (see workers.h and job/job.h). */
#include "server/workers.h"

#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/redact.h"
#include "server/metrics.h"
#include "server/queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker {
	wk_pool *pool;
	int index;
	char owner[160];
	queue *q;
	pthread_t thread;
	bool started;
	bool exited;	    /* under pool->lock */
	int64_t job_id;	    /* running job, 0 when idle; under pool->lock */
	int64_t epoch;	    /* its lease's fencing epoch; under pool->lock */
	atomic_bool cancel; /* a user cancelled the running job */
	atomic_bool lost;   /* the lease was lost (this server was presumed dead): stop */
};

/* The ctx behind a running job's job_ctl. */
struct run_ctx {
	struct worker *w;
	int64_t job;
	int64_t epoch;
	const char *repo;
	int64_t spend_row; /* this run's row in the spending ledger, 0 before spend_open */
	int stage;	   /* the current stage (enum job_stage), -1 before the first */
	int64_t stage_ms;  /* when it started */
};

/* The current stage ended at now: observe its duration. */
static void stage_end(struct run_ctx *c, int64_t now)
{
	if (c->stage >= 0)
		metrics_stage_done((enum job_stage)c->stage, (double)(now - c->stage_ms) / 1000.0);
}

struct wk_pool {
	wk_config cfg;
	char *db_path, *instance;
	pthread_mutex_t lock;
	pthread_cond_t wake;   /* new work, or stopping */
	pthread_cond_t exited; /* a worker thread ended */
	atomic_bool stopping;
	bool abandoned; /* under lock: jobs were re-queued by wk_stop; workers must not write */
	unsigned long notify_seq;
	queue *keeper_q;
	pthread_t keeper;
	bool keeper_started;
	queue *listen_q; /* shared databases: wakes idle workers on another replica's NOTIFY */
	pthread_t listener;
	bool listener_started;
	struct worker *workers;
};

/* --- the job's control handle (job/job.h) ------------------------------------------------ */

/* Every write of a run goes through the fence: a stage or event is recorded (and the lease
 * extended) only while the run's lease is current; AP_ESTALE marks the run lost. */
static int fenced(struct run_ctx *c, const char *stage, const char *msg)
{
	struct worker *w = c->w;
	q_lease_ref ref = {c->job, w->owner, c->epoch};
	int rc;

	if (atomic_load(&w->lost))
		return ap_error_set(AP_ESTALE, "job %lld: lease lost", (long long)c->job);
	rc = q_fence(w->q, &ref, w->pool->cfg.lease_ms, stage, msg, ap_wall_ms());
	if (rc == AP_ESTALE) {
		atomic_store(&w->lost, true);
		ap_log(AP_LOG_WARN, NULL, c->job, "%s: this run stops and publishes nothing",
		       ap_error_last());
	}
	return rc;
}

static int ctl_stage(void *ctx, enum job_stage stage, const char *msg)
{
	struct run_ctx *c = ctx;
	char *clean = redact_str(msg ? msg : "");
	int64_t now = ap_wall_ms();
	int rc;

	if (!clean)
		return ap_error_set(AP_ENOMEM, "out of memory");
	if ((int)stage != c->stage) {
		stage_end(c, now);
		c->stage = (int)stage;
		c->stage_ms = now;
	}
	rc = fenced(ctx, q_stage_name(stage), clean);
	free(clean);
	return rc;
}

static int ctl_event(void *ctx, const char *msg)
{
	char *clean = redact_str(msg ? msg : "");
	int rc;

	if (!clean)
		return ap_error_set(AP_ENOMEM, "out of memory");
	rc = fenced(ctx, NULL, clean);
	free(clean);
	return rc;
}

static int ctl_fence(void *ctx)
{
	return fenced(ctx, NULL, NULL);
}

static bool ctl_should_stop(void *ctx)
{
	struct worker *w = ((struct run_ctx *)ctx)->w;

	return atomic_load(&w->cancel) || atomic_load(&w->lost) || atomic_load(&w->pool->stopping);
}

static bool ctl_cancelled(void *ctx)
{
	return atomic_load(&((struct run_ctx *)ctx)->w->cancel);
}

static int ctl_state_set(void *ctx, const char *key, const char *value)
{
	struct run_ctx *c = ctx;

	return q_state_set(c->w->q, c->job, key, value);
}

static char *ctl_state_get(void *ctx, const char *key)
{
	struct run_ctx *c = ctx;
	char *v = NULL;

	if (q_state_get(c->w->q, c->job, key, &v))
		return NULL;
	return v;
}

static int ctl_spend_open(void *ctx, const job_spend_req *req, job_spend_verdict *out)
{
	struct run_ctx *c = ctx;
	int rc;

	if (c->spend_row)
		return ap_error_set(AP_EINVAL, "job %lld: spending already open",
				    (long long)c->job);
	rc = q_spend_open(c->w->q, c->job, c->repo, req, ap_wall_ms(), &c->spend_row, out);
	if (rc == 0 && out->refused)
		metrics_budget_refusal(out->repo);
	return rc;
}

static int ctl_spend_record(void *ctx, const job_usage *u, bool final)
{
	struct run_ctx *c = ctx;

	if (!c->spend_row)
		return 0;
	return q_spend_record(c->w->q, c->spend_row, u, final);
}

static const job_ops pool_ops = {
    .stage = ctl_stage,
    .event = ctl_event,
    .should_stop = ctl_should_stop,
    .cancelled = ctl_cancelled,
    .state_set = ctl_state_set,
    .state_get = ctl_state_get,
    .spend_open = ctl_spend_open,
    .spend_record = ctl_spend_record,
    .fence = ctl_fence,
};

/* --- workers --------------------------------------------------------------------------- */

static const char *kind_name(enum job_outcome_kind k)
{
	switch (k) {
	case JOB_SUCCEEDED:
		return "succeeded";
	case JOB_CANCELLED:
		return "cancelled";
	case JOB_RETRY:
		return "retry";
	case JOB_FAILED:
		break;
	}
	return "failed";
}

/* Record the outcome of one run: the pool's retry policy lives here alone. Called with the pool
 * lock NOT held; takes it so a shutdown that already re-queued the job (abandoned) is not
 * overwritten. */
static const char *record(struct worker *w, const job_info *job, const job_outcome *o)
{
	wk_pool *p = w->pool;
	int64_t now = ap_wall_ms();
	const char *text = o->summary ? o->summary : kind_name(o->kind), *what;
	int wrc;

	pthread_mutex_lock(&p->lock);
	if (p->abandoned) {
		pthread_mutex_unlock(&p->lock);
		return "interrupted";
	}
	if (atomic_load(&w->lost)) {
		/* Another run owns the job now: its outcome is that run's to record. */
		ap_log(AP_LOG_WARN, job->delivery, job->id,
		       "lease lost (epoch %lld): this run's outcome is not recorded",
		       (long long)job->epoch);
		w->job_id = 0;
		pthread_mutex_unlock(&p->lock);
		return "interrupted";
	}
	if (o->kind == JOB_SUCCEEDED) {
		wrc = q_finish(w->q, job->id, w->owner, "succeeded", text, now);
		what = "succeeded";
		ap_log(AP_LOG_INFO, job->delivery, job->id, "job succeeded: %s", text);
	} else if (o->kind == JOB_CANCELLED && !atomic_load(&w->cancel) &&
		   atomic_load(&p->stopping)) {
		wrc = q_release(w->q, job->id, w->owner, now, "interrupted by shutdown", true, now);
		what = "interrupted";
		ap_log(AP_LOG_INFO, job->delivery, job->id, "job re-queued: server shutting down");
	} else if (o->kind == JOB_CANCELLED) {
		wrc = q_finish(w->q, job->id, w->owner, "cancelled", text, now);
		what = "cancelled";
		ap_log(AP_LOG_INFO, job->delivery, job->id, "job cancelled");
	} else if (o->kind == JOB_RETRY && job->attempts < p->cfg.max_attempts) {
		int64_t at = now + q_backoff_ms(p->cfg.retry_base_ms, job->attempts);

		if (o->not_before_ms > at)
			at = o->not_before_ms;
		wrc = q_release(w->q, job->id, w->owner, at, text, false, now);
		what = "retry";
		ap_log(AP_LOG_WARN, job->delivery, job->id,
		       "job attempt %d failed, retry in %lld ms: %s", job->attempts,
		       (long long)(at - now), text);
	} else {
		wrc = q_finish(w->q, job->id, w->owner, "failed", text, now);
		what = "failed";
		ap_log(AP_LOG_WARN, job->delivery, job->id, "job failed: %s", text);
	}
	if (wrc)
		ap_log(AP_LOG_ERROR, job->delivery, job->id, "recording the outcome failed: %s",
		       ap_error_last());
	w->job_id = 0;
	pthread_mutex_unlock(&p->lock);
	return what;
}

static void run_one(struct worker *w, job_info *job)
{
	wk_pool *p = w->pool;
	struct run_ctx rc_ctx = {w, job->id, job->epoch, job->repo, 0, -1, 0};
	job_ctl ctl = {&pool_ops, &rc_ctx};
	job_outcome o = JOB_OUTCOME_INIT;
	char *clean = NULL;
	const char *outcome;
	bool cancelled = false;
	int64_t t0;

	pthread_mutex_lock(&p->lock);
	w->job_id = job->id;
	w->epoch = job->epoch;
	/* Cancelled while queued (see q_cancel): the run only reports the cancel. */
	if (q_cancel_requested(w->q, job->id, &cancelled) != 0) {
		cancelled = false;
		ap_error_clear();
	}
	atomic_store(&w->cancel, cancelled);
	atomic_store(&w->lost, false);
	pthread_mutex_unlock(&p->lock);
	job->final_attempt = job->attempts >= p->cfg.max_attempts;
	ap_log(AP_LOG_INFO, job->delivery, job->id, "job started: %s#%lld attempt %d", job->repo,
	       (long long)job->issue, job->attempts);

	t0 = ap_wall_ms();
	p->cfg.run(job, &ctl, p->cfg.ud, &o);
	if (o.summary && (clean = redact_str(o.summary))) {
		free(o.summary);
		o.summary = clean;
	}
	outcome = record(w, job, &o);
	stage_end(&rc_ctx, ap_wall_ms());
	metrics_job_done(outcome, (double)(ap_wall_ms() - t0) / 1000.0);
	free(o.summary);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	wk_pool *p = w->pool;

	while (!atomic_load(&p->stopping)) {
		job_info *job = NULL;
		unsigned long seq;
		int rc;

		pthread_mutex_lock(&p->lock);
		seq = p->notify_seq;
		pthread_mutex_unlock(&p->lock);
		rc = q_lease(w->q, w->owner, p->cfg.lease_ms, ap_wall_ms(), &job);
		if (rc == 0) {
			run_one(w, job);
			q_job_free(job);
			continue;
		}
		if (rc != AP_ENOTFOUND)
			ap_err("worker %d: leasing failed: %s", w->index, ap_error_last());
		/* Idle: sleep until notified, or poll once a second for retries coming due. */
		pthread_mutex_lock(&p->lock);
		if (seq == p->notify_seq && !atomic_load(&p->stopping)) {
			struct timespec ts;

			ap_deadline_in(&ts, CLOCK_REALTIME, 1000);
			pthread_cond_timedwait(&p->wake, &p->lock, &ts);
		}
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_lock(&p->lock);
	w->exited = true;
	pthread_cond_broadcast(&p->exited);
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Heartbeats (every heartbeat_ms), cancel flags (every tick, at most 1 s apart for cancel
 * responsiveness) and expired leases of any replica (every rescue_ms). */
static void *keeper_main(void *arg)
{
	wk_pool *p = arg;
	int64_t tick = p->cfg.heartbeat_ms, last_beat = 0, last_rescue = 0;

	if (p->cfg.rescue_ms < tick)
		tick = p->cfg.rescue_ms;
	if (tick > 1000)
		tick = 1000;
	if (tick < 50)
		tick = 50;
	while (!atomic_load(&p->stopping)) {
		int64_t now = ap_wall_ms();
		bool beat = now - last_beat >= p->cfg.heartbeat_ms;
		bool rescue = now - last_rescue >= p->cfg.rescue_ms;
		struct timespec ts;
		int n = 0;

		pthread_mutex_lock(&p->lock);
		for (int i = 0; i < p->cfg.workers; i++) {
			struct worker *w = &p->workers[i];
			bool yes = false;
			int hb;

			if (!w->job_id || atomic_load(&w->lost))
				continue;
			if (q_cancel_requested(p->keeper_q, w->job_id, &yes) == 0 && yes)
				atomic_store(&w->cancel, true);
			if (beat) {
				q_lease_ref ref = {w->job_id, w->owner, w->epoch};

				hb = q_fence(p->keeper_q, &ref, p->cfg.lease_ms, NULL, NULL, now);
				if (hb) {
					ap_log(AP_LOG_WARN, NULL, w->job_id, "heartbeat failed: %s",
					       ap_error_last());
					/* Rescued or re-leased elsewhere: let this run stop early.
					 */
					if (hb == AP_ESTALE)
						atomic_store(&w->lost, true);
				}
			}
		}
		pthread_mutex_unlock(&p->lock);
		if (beat)
			last_beat = now;
		if (rescue) {
			last_rescue = now;
			if (q_requeue_expired(p->keeper_q, p->cfg.max_attempts, now, &n))
				ap_err("re-queueing expired leases failed: %s", ap_error_last());
			else if (n) {
				ap_info("%d job(s) with an expired lease handled", n);
				wk_notify(p);
			}
		}
		pthread_mutex_lock(&p->lock);
		if (!atomic_load(&p->stopping)) {
			ap_deadline_in(&ts, CLOCK_REALTIME, tick);
			pthread_cond_timedwait(&p->wake, &p->lock, &ts);
		}
		pthread_mutex_unlock(&p->lock);
	}
	return NULL;
}

/* Shared databases: another replica's NOTIFY (a job queued or re-queued there) wakes the idle
 * workers here at once instead of at their next poll. */
static void *listener_main(void *arg)
{
	wk_pool *p = arg;

	while (!atomic_load(&p->stopping)) {
		bool woken = false;

		if (q_wait_wake(p->listen_q, 500, &woken)) {
			ap_error_clear();
			continue;
		}
		if (woken)
			wk_notify(p);
	}
	return NULL;
}

static void pool_free(wk_pool *p)
{
	for (int i = 0; p->workers && i < p->cfg.workers; i++)
		q_close(p->workers[i].q);
	free(p->workers);
	q_close(p->keeper_q);
	q_close(p->listen_q);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->exited);
	pthread_mutex_destroy(&p->lock);
	free(p->db_path);
	free(p->instance);
	free(p);
}

int wk_start(wk_pool **out, const wk_config *cfg)
{
	wk_pool *p;
	int rc, n = 0;

	*out = NULL;
	if (cfg->workers < 1 || cfg->max_attempts < 1 || cfg->lease_ms < 100 || !cfg->run ||
	    cfg->heartbeat_ms >= cfg->lease_ms)
		return ap_error_set(AP_EINVAL, "bad worker pool configuration");
	p = calloc(1, sizeof(*p));
	if (!p)
		return ap_error_set(AP_ENOMEM, "out of memory");
	p->cfg = *cfg;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->exited, NULL);
	p->db_path = strdup(cfg->db_path);
	p->instance = strdup(cfg->instance);
	p->workers = calloc((size_t)cfg->workers, sizeof(*p->workers));
	if (!p->db_path || !p->instance || !p->workers) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto fail;
	}
	p->cfg.db_path = p->db_path;
	p->cfg.instance = p->instance;
	if (p->cfg.heartbeat_ms <= 0)
		p->cfg.heartbeat_ms = p->cfg.lease_ms / 3;
	if (p->cfg.rescue_ms <= 0)
		p->cfg.rescue_ms = p->cfg.lease_ms / 3;
	if ((rc = q_open(&p->keeper_q, p->db_path, Q_OPEN_CREATE)))
		goto fail;
	for (int i = 0; i < cfg->workers; i++) {
		struct worker *w = &p->workers[i];

		w->pool = p;
		w->index = i;
		/* A cut instance name could name another instance's worker as a lease owner. */
		if (ap_fmt(w->owner, sizeof(w->owner), "%s/w%d", p->instance, i)) {
			rc = ap_error_set(
			    AP_EINVAL,
			    "the instance name \"%.40s...\" is too long for a lease owner "
			    "(at most %zu bytes)",
			    p->instance, sizeof(w->owner) - 8);
			goto fail;
		}
		if ((rc = q_open(&w->q, p->db_path, Q_OPEN_CREATE)))
			goto fail;
	}
	if ((rc = q_requeue_expired(p->keeper_q, p->cfg.max_attempts, ap_wall_ms(), &n)))
		goto fail;
	if (n)
		ap_info("%d job(s) with an expired lease handled at start-up", n);
	for (int i = 0; i < cfg->workers; i++) {
		if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i])) {
			rc = ap_error_set(AP_ENOMEM, "cannot start worker thread %d", i);
			goto fail_threads;
		}
		p->workers[i].started = true;
	}
	if (pthread_create(&p->keeper, NULL, keeper_main, p)) {
		rc = ap_error_set(AP_ENOMEM, "cannot start the lease keeper thread");
		goto fail_threads;
	}
	p->keeper_started = true;
	if (q_shared(p->keeper_q)) {
		if (q_open(&p->listen_q, p->db_path, Q_OPEN_CREATE) == 0 &&
		    pthread_create(&p->listener, NULL, listener_main, p) == 0)
			p->listener_started = true;
		else
			ap_warn("no listener for other replicas' jobs (workers still poll): %s",
				ap_error_last());
	}
	*out = p;
	return 0;
fail_threads:
	wk_stop(p, 0);
	return rc;
fail:
	pool_free(p);
	return rc;
}

void wk_notify(wk_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->notify_seq++;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
}

int wk_busy(wk_pool *p)
{
	int n = 0;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	for (int i = 0; i < p->cfg.workers; i++)
		if (p->workers[i].job_id)
			n++;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void wk_stop(wk_pool *p, int64_t grace_ms)
{
	struct timespec ts;
	bool all_exited;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->stopping, true);
	pthread_cond_broadcast(&p->wake);
	ap_deadline_in(&ts, CLOCK_REALTIME, grace_ms);
	for (;;) {
		all_exited = true;
		for (int i = 0; i < p->cfg.workers; i++)
			if (p->workers[i].started && !p->workers[i].exited)
				all_exited = false;
		if (all_exited || pthread_cond_timedwait(&p->exited, &p->lock, &ts) == ETIMEDOUT)
			break;
	}
	all_exited = true;
	for (int i = 0; i < p->cfg.workers; i++) {
		struct worker *w = &p->workers[i];

		if (!w->started || w->exited)
			continue;
		all_exited = false;
		if (w->job_id && q_release(p->keeper_q, w->job_id, w->owner, ap_wall_ms(),
					   "interrupted by shutdown", true, ap_wall_ms()) == 0)
			ap_log(AP_LOG_WARN, NULL, w->job_id,
			       "job did not stop within the grace period: re-queued");
	}
	if (!all_exited)
		p->abandoned = true;
	pthread_mutex_unlock(&p->lock);
	if (p->keeper_started)
		pthread_join(p->keeper, NULL);
	if (p->listener_started)
		pthread_join(p->listener, NULL);
	if (!all_exited)
		return; /* a worker still runs pipeline code; the process exits next */
	for (int i = 0; i < p->cfg.workers; i++)
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
	pool_free(p);
}
