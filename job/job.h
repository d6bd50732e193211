/* SPDX-License-Identifier: MIT */
/* job/job.h - the contract between the worker pool and whatever runs one job.
 *
 * The pool (server/workers.c) leases a job from the queue and calls a job_run_fn with the job,
 * a control handle and its own ud; the job (job/pipeline.c) reports progress through the
 * handle's ops table and returns an explicit outcome. Neither side knows the other's
 * internals: the job never names the queue, and the pool never interprets error codes. The
 * retry policy (attempt limit, backoff) belongs to the pool alone.
 */
#ifndef AP_JOB_H
#define AP_JOB_H

#include <stdbool.h>
#include <stdint.h>

enum job_trigger { JOB_TRIGGER_LABEL, JOB_TRIGGER_COMMENT, JOB_TRIGGER_PR_FEEDBACK };

/* A leased job, read-only for the job. Strings live as long as the job. */
typedef struct job_info {
	int64_t id;
	const char *delivery; /* X-GitHub-Delivery that created it */
	const char *event;    /* X-GitHub-Event */
	const char *repo;     /* "owner/name" */
	int64_t repo_id;
	int64_t installation_id;
	int64_t issue; /* issue or pull-request number */
	enum job_trigger trigger;
	const char *feedback;	    /* comment text after "/autopatch" (may be ""), else NULL */
	int64_t trigger_comment_id; /* the comment to react to, 0 for a label trigger */
	const char *payload;	    /* the raw, verified delivery body (JSON) */
	int attempts;		    /* 1 on the first run */
	int64_t epoch;		    /* fencing epoch of this lease; grows with every re-lease */
	bool final_attempt;	    /* set by the pool: a JOB_RETRY now would fail the job */
} job_info;

enum job_stage { STAGE_PREPARING, STAGE_PLANNING, STAGE_BUILDING, STAGE_TESTING, STAGE_PUBLISHING };

/* Spending (costs and daily budgets, docs/agents.md): what a run asks of the pool's ledger. */
typedef struct job_spend_req {
	bool priced;	       /* the model has a price; else costs are 0 and no budget applies */
	int64_t reserve_micro; /* the most this run can cost (micro-dollars), held until closed */
	int64_t global_cap_micro; /* daily budget of all jobs (UTC day), 0 = none */
	int64_t repo_cap_micro;	  /* daily budget of the job's repository, 0 = none */
} job_spend_req;

/* The answer to a spend_open. */
typedef struct job_spend_verdict {
	bool refused;	     /* a budget would be exceeded: nothing is held, do not start */
	bool repo;	     /* refused by the repository's budget (else the global one) */
	int64_t spent_micro; /* refused: what that budget carries today (spent + held by others) */
	int64_t cap_micro;   /* refused: that budget */
} job_spend_verdict;

/* A run's usage so far. */
typedef struct job_usage {
	int64_t cost_micro, tokens_in, tokens_out;
	int calls;
} job_usage;

/* What the pool offers a running job. Every function is called on the job's own thread with
 * the handle's ctx; should_stop, cancelled and fence are also safe from other threads the job
 * starts (the progress comment's writer). Messages are redacted by the pool before they are
 * stored. */
typedef struct job_ops {
	/* A stage transition (an event row; also extends the lease). msg may be NULL. */
	int (*stage)(void *ctx, enum job_stage stage, const char *msg);
	/* An event row without a stage change (progress detail, Tester verdicts). */
	int (*event)(void *ctx, const char *msg);
	/* True once the job must stop: cancelled by a user, the server is shutting down, or the
	 * lease was lost. The job checks it between steps and returns JOB_CANCELLED. */
	bool (*should_stop)(void *ctx);
	/* True when the stop is a user's cancel (not a shutdown that will re-queue the job). */
	bool (*cancelled)(void *ctx);
	/* Per-job key/value state that survives a crash and a re-run (the progress comment's id,
	 * the PR number), so a retried job edits the same comment and never opens a second PR. */
	int (*state_set)(void *ctx, const char *key, const char *value);
	/* A malloc'd copy (caller frees), or NULL when unset. */
	char *(*state_get)(void *ctx, const char *key);
	/* Check the daily budgets and hold req->reserve_micro against them for this run, as one
	 * atomic step across workers and servers: of two runs racing for the last dollars at
	 * most one is let through. "Would exceed" = today's spending (finished runs' costs plus,
	 * for runs still open, the larger of their hold and their spending) + the reserve > a
	 * budget. 0 with out->refused set when refused; a negative code when the ledger cannot
	 * be read (the run must not start then either). Called at most once per run, before any
	 * model call. May be NULL (then a run with a budget is refused). */
	int (*spend_open)(void *ctx, const job_spend_req *req, job_spend_verdict *out);
	/* Record the run's usage so far (after spend_open only); final closes it, releasing the
	 * hold, so the day carries what was spent. A run that never closes (its process died)
	 * keeps charging the larger of hold and spending. May be NULL. */
	int (*spend_record)(void *ctx, const job_usage *u, bool final);
	/* Fencing: call right before every external side effect (push, PR create/update,
	 * comment create/edit, label, reaction). 0 while this run's lease is still the job's
	 * current one (and the lease is extended); AP_ESTALE once the job was rescued or leased
	 * again (this run was presumed dead: another run owns the job now), or another negative
	 * code when it cannot be checked. On any non-zero the job must not do the side effect,
	 * publish nothing further and return (should_stop is then true as well). The job's
	 * REST clients also ask it as each write goes on the wire (gh_rest_set_write_guard), so
	 * a run frozen between its check and the request sends nothing. */
	int (*fence)(void *ctx);
} job_ops;

typedef struct job_ctl {
	const job_ops *ops;
	void *ctx;
} job_ctl;

static inline int job_ctl_stage(const job_ctl *c, enum job_stage s, const char *msg)
{
	return c->ops->stage(c->ctx, s, msg);
}
static inline int job_ctl_event(const job_ctl *c, const char *msg)
{
	return c->ops->event(c->ctx, msg);
}
static inline bool job_ctl_should_stop(const job_ctl *c)
{
	return c->ops->should_stop(c->ctx);
}
static inline bool job_ctl_cancelled(const job_ctl *c)
{
	return c->ops->cancelled(c->ctx);
}
static inline int job_ctl_state_set(const job_ctl *c, const char *key, const char *value)
{
	return c->ops->state_set(c->ctx, key, value);
}
static inline char *job_ctl_state_get(const job_ctl *c, const char *key)
{
	return c->ops->state_get(c->ctx, key);
}
static inline int job_ctl_fence(const job_ctl *c)
{
	return c->ops->fence(c->ctx);
}

static inline int job_ctl_spend_open(const job_ctl *c, const job_spend_req *req,
				     job_spend_verdict *out)
{
	if (c->ops->spend_open)
		return c->ops->spend_open(c->ctx, req, out);
	out->refused = req->global_cap_micro > 0 || req->repo_cap_micro > 0;
	out->repo = req->global_cap_micro <= 0;
	out->spent_micro = 0;
	out->cap_micro = out->repo ? req->repo_cap_micro : req->global_cap_micro;
	return 0;
}
static inline int job_ctl_spend_record(const job_ctl *c, const job_usage *u, bool final)
{
	return c->ops->spend_record ? c->ops->spend_record(c->ctx, u, final) : 0;
}

enum job_outcome_kind {
	JOB_SUCCEEDED, /* done; summary is e.g. the PR URL */
	JOB_FAILED,    /* will not succeed by running again */
	JOB_CANCELLED, /* stopped because should_stop turned true; the pool tells a user's cancel
			* (recorded as cancelled) from a shutdown (re-queued, attempt refunded) */
	JOB_RETRY,     /* a passing condition (GitHub or the model unreachable, a rate limit):
			* run again later; the pool fails it instead once attempts are used up */
};

typedef struct job_outcome {
	enum job_outcome_kind kind;
	char *summary;	       /* malloc'd one line (the PR URL, or why it ended); pool frees */
	int64_t not_before_ms; /* JOB_RETRY: earliest re-run, Unix ms; 0 = the pool's backoff */
} job_outcome;

#define JOB_OUTCOME_INIT                                                                           \
	{                                                                                          \
		JOB_FAILED, NULL, 0                                                                \
	}

/* The job's entry point, registered by `serve`. Fills *out (which starts as
 * JOB_OUTCOME_INIT). Called in parallel from every worker thread. */
typedef void (*job_run_fn)(const job_info *job, const job_ctl *ctl, void *ud, job_outcome *out);

#endif
