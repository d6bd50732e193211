/* SPDX-License-Identifier: MIT */
/* job/pipeline.c - one server job end to end (see pipeline.h).
 *
 * A job is a short state machine whose every step is idempotent across a crash and a re-run:
 * the progress comment's id and the PR number live in the job's state (job_ctl_state_*), the
 * branch is pushed with force (it belongs to autopatch), and the PR is looked up by its head
 * branch before one is created. Between steps the job checks for cancellation. The box is
 * destroyed on every path. Everything user-visible is rendered by progress.c (redacted).
 */
#include "job/pipeline.h"

#include "agents/cost.h"
#include "agents/fixer.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/jsonnum.h"
#include "common/log.h"
#include "common/redact.h"
#include "github/api.h"
#include "github/app.h"
#include "github/git.h"
#include "github/patch.h"
#include "github/rest.h"
#include "github/urls.h"
#include "job/comment.h"
#include "job/environment.h"
#include "job/patch_policy.h"
#include "job/progress.h"
#include "job/repo_config.h"
#include "job/run_config.h"
#include "job/tester_box.h"
#include "sandbox/sandbox.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EVENTS	 400
#define BRANCH_PREFIX	 "autopatch/issue-"
#define FAILED_LABEL	 "autopatch: failed"
#define HARNESS_LABEL	 "autopatch: changes the test harness - not proven"
#define PREV_SUMMARY_MAX 6000
#define PR_CREATE_ROUNDS 3 /* creates of the PR when GitHub may have applied the last one */

struct pipeline {
	const ap_config *cfg;
	gh_app *app;
	gh_git *git;
	sbx_engine *sbx;
	char *data_dir;
	int64_t comment_interval_ms;
	int64_t ratelimit_wait_s;     /* the first wait when GitHub names none; doubles */
	int64_t ratelimit_max_wait_s; /* total a job waits out rate limits before re-queueing */
	cost_plan plan;		      /* prices and daily budgets */
	gh_urls urls;		      /* GITHUB_URL (git goes there) and GITHUB_API_URL */
	int64_t gh_backoff_ms;	      /* before looking for a PR whose create got a 5xx */
};

/* One running job. */
struct run {
	pipeline *p;
	const job_info *job;
	const job_ctl *ctl;
	gh_rest *rest;
	progress_event ev[MAX_EVENTS];
	size_t n_ev;
	int last_stage;	 /* index into stage_names, -1 before the first */
	job_comment *cm; /* writes the progress comment */
	char *test_note;
	char *trajectory;
	char *pr_url;
	char *failure; /* why the job failed or stopped */
	char *tried;
	char *environment; /* image and setup, for the comment */
	char *blocked;	   /* refused connections, for the comment */
	ssize_t live_ev;   /* index of the live setup step, -1 when none */
	enum progress_state state;
	bool harness;  /* the published patch changes the test harness: not proven */
	bool spending; /* the run holds a row in the spending ledger (close it at the end) */
	comment_fence cm_fence; /* the comment writer's fencing check (job_ctl's fence) */
	bool stale;		/* the lease is no longer current: publish nothing more */
};

static const char *const stage_names[] = {"preparing", "planning", "building", "testing",
					  "publishing"};

static char *xstrdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void set_str(char **dst, const char *s)
{
	char *c = xstrdup(s);

	free(*dst);
	*dst = c;
}

static int pipeline_create(pipeline **out, const ap_config *cfg, const char *app_id,
			   const char *pem)
{
	pipeline *p;
	char path[4096];
	int rc, reaped;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return ap_error_set(AP_ENOMEM, "out of memory");
	p->cfg = cfg;
	p->data_dir = strdup(cfg_str(cfg, "AUTOPATCH_DATA_DIR"));
	if (!p->data_dir) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out_free;
	}
	rc = cfg_int(cfg, "AUTOPATCH_COMMENT_INTERVAL_MS", 0, 600000, &p->comment_interval_ms);
	if (rc)
		goto out_free;
	/* The same minimum wait as the REST client's secondary limit (see github/rest.h). */
	rc = cfg_int(cfg, "AUTOPATCH_GH_SECONDARY_WAIT_S", 0, 3600, &p->ratelimit_wait_s);
	if (rc)
		goto out_free;
	rc = cfg_int(cfg, "AUTOPATCH_RATELIMIT_MAX_WAIT_S", 0, 86400, &p->ratelimit_max_wait_s);
	if (rc)
		goto out_free;
	rc = cost_plan_from_cfg(cfg, &p->plan);
	if (rc)
		goto out_free;
	rc = run_config_check_settings(cfg); /* the Tester's: a bad one would fail every job */
	if (rc)
		goto out_free;
	rc = gh_urls_get(cfg, &p->urls);
	if (rc)
		goto out_free;
	/* The REST client's first backoff for 5xx (see github/rest.h). */
	rc = cfg_int(cfg, "AUTOPATCH_GH_BACKOFF_MS", 1, 600000, &p->gh_backoff_ms);
	if (rc)
		goto out_free;
	if (mkdir(p->data_dir, 0700) != 0 && errno != EEXIST) {
		rc = ap_error_set(AP_EIO, "cannot create AUTOPATCH_DATA_DIR %s: %s", p->data_dir,
				  strerror(errno));
		goto out_free;
	}
	if ((rc = ap_fmt(path, sizeof(path), "%s/trajectories", p->data_dir)))
		goto out_free;
	if (mkdir(path, 0700) != 0 && errno != EEXIST) {
		rc = ap_error_set(AP_EIO, "cannot create %s: %s", path, strerror(errno));
		goto out_free;
	}
	rc = app_id ? gh_app_new_as(&p->app, cfg, app_id, pem) : gh_app_new(&p->app, cfg);
	if (rc)
		goto out_free;
	rc = gh_git_new(&p->git, cfg);
	if (rc)
		goto out_free;
	rc = sbx_engine_new(&p->sbx, cfg);
	if (rc)
		goto out_free;
	/* A crash leaves boxes behind; they hold no credential but they hold resources. */
	reaped = sbx_reap_orphans(p->sbx);
	if (reaped > 0)
		ap_info("removed %d orphaned sandbox containers or networks", reaped);
	else if (reaped < 0)
		ap_warn("could not reap orphaned sandbox containers: %s", ap_error_last());
	/* Warm the pool now, so the first job does not wait for a container. */
	if (sbx_pool_start(p->sbx) != 0) {
		ap_warn("sandbox warm pool not started: %s", ap_error_last());
		ap_error_clear();
	}
	*out = p;
	return 0;

out_free:
	pipeline_free(p);
	return rc;
}

int pipeline_new(pipeline **out, const ap_config *cfg)
{
	return pipeline_create(out, cfg, NULL, NULL);
}

int pipeline_new_as(pipeline **out, const ap_config *cfg, const char *app_id, const char *pem)
{
	if (!app_id || !*app_id) {
		*out = NULL;
		return ap_error_set(AP_EINVAL, "the registration handed over no App ID");
	}
	return pipeline_create(out, cfg, app_id, pem);
}

int pipeline_set_app(pipeline *p, const char *app_id, const char *pem)
{
	return gh_app_set_identity(p->app, app_id, pem);
}

void pipeline_free(pipeline *p)
{
	if (!p)
		return;
	sbx_engine_free(p->sbx);
	gh_git_free(p->git);
	gh_app_free(p->app);
	free(p->data_dir);
	free(p);
}

/* ---- progress: events, the comment ---- */

static void run_release(struct run *r)
{
	comment_free(r->cm);
	for (size_t i = 0; i < r->n_ev; i++)
		free((char *)r->ev[i].message);
	gh_rest_free(r->rest);
	free(r->test_note);
	free(r->trajectory);
	free(r->pr_url);
	free(r->failure);
	free(r->tried);
	free(r->environment);
	free(r->blocked);
}

static void add_event(struct run *r, int stage, const char *msg)
{
	progress_event *e;

	if (r->n_ev == MAX_EVENTS) {
		/* Keep the stage transitions; drop the oldest detail line. */
		for (size_t i = 0; i < r->n_ev; i++)
			if (!r->ev[i].stage) {
				free((char *)r->ev[i].message);
				memmove(&r->ev[i], &r->ev[i + 1],
					(r->n_ev - i - 1) * sizeof(r->ev[0]));
				r->n_ev--;
				break;
			}
		if (r->n_ev == MAX_EVENTS)
			return;
	}
	e = &r->ev[r->n_ev++];
	e->time_ms = ap_wall_ms();
	e->stage = stage >= 0 ? stage_names[stage] : NULL;
	e->message = msg ? redact_str(msg) : NULL;
}

static int render_comment(struct run *r, char **out)
{
	progress_view v = PROGRESS_VIEW_INIT;

	v.job_id = r->job->id;
	v.state = r->state;
	v.events = r->ev;
	v.n_events = r->n_ev;
	v.test_note = r->test_note;
	v.pr_url = r->pr_url;
	v.failure = r->failure;
	v.tried = r->tried;
	v.trajectory = r->state == PROGRESS_FAILED ? r->trajectory : NULL;
	v.now_ms = ap_wall_ms();
	v.iteration = r->job->trigger == JOB_TRIGGER_PR_FEEDBACK;
	v.environment = r->environment;
	v.blocked = r->blocked;
	v.harness = r->harness;
	return progress_render_comment(&v, out);
}

/* Hand the current state to the comment thread; persist a new comment id in the job's state
 * (here, on the job's thread: the job_ctl belongs to it). */
static void comment_sync(struct run *r)
{
	char *body = NULL, idbuf[32];
	int64_t new_id = 0;

	if (!r->cm)
		return;
	if (render_comment(r, &body) != 0) {
		ap_error_clear();
		return;
	}
	comment_post(r->cm, body, &new_id);
	if (new_id > 0) {
		snprintf(idbuf, sizeof(idbuf), "%" PRId64, new_id);
		job_ctl_state_set(r->ctl, "comment_id", idbuf);
	}
}

/* The final state: written before the job returns, and its id persisted. */
static void comment_final(struct run *r)
{
	char idbuf[32];
	int64_t new_id = 0;

	comment_sync(r);
	comment_finish(r->cm, &new_id);
	if (new_id > 0) {
		snprintf(idbuf, sizeof(idbuf), "%" PRId64, new_id);
		job_ctl_state_set(r->ctl, "comment_id", idbuf);
	}
}

static void stage(struct run *r, enum job_stage s, const char *msg)
{
	job_ctl_stage(r->ctl, s, msg);
	add_event(r, (int)s, msg);
	r->last_stage = (int)s;
	comment_sync(r);
}

static void event(struct run *r, const char *msg)
{
	job_ctl_event(r->ctl, msg);
	add_event(r, -1, msg);
	comment_sync(r);
}

/* The setup phase's one live step: added once, then its message replaced. */
static void live_event(struct run *r, const char *msg)
{
	if (r->live_ev >= 0 && (size_t)r->live_ev < r->n_ev && !r->ev[r->live_ev].stage) {
		free((char *)r->ev[r->live_ev].message);
		r->ev[r->live_ev].message = redact_str(msg);
		comment_sync(r);
		return;
	}
	event(r, msg);
	r->live_ev = (ssize_t)r->n_ev - 1;
}

static void env_note_cb(void *ud, const char *msg)
{
	struct run *r = ud;

	r->live_ev = -1; /* a new line after the live step */
	event(r, msg);
}

static void env_live_cb(void *ud, const char *msg)
{
	live_event(ud, msg);
}

/* Fencing (job.h): right before every side effect on GitHub. Non-zero: the side effect is
 * not made, and the run publishes nothing more (AP_ESTALE: another run owns the job now). */
static int fence(struct run *r)
{
	int rc = job_ctl_fence(r->ctl);

	if (rc == AP_ESTALE)
		r->stale = true;
	return rc;
}

static int fence_cb(void *ud)
{
	return job_ctl_fence((const job_ctl *)ud);
}

/* The job's REST client asks the fence again as each write goes on the wire. */
static int write_guard(void *ud)
{
	return fence(ud);
}

/* Between steps: stopped by a cancel or a shutdown (AP_ECANCELLED), or because this run's
 * lease is no longer current (AP_ESTALE). */
static int checkpoint(struct run *r)
{
	if (!job_ctl_should_stop(r->ctl))
		return 0;
	if (r->stale || fence(r) == AP_ESTALE)
		return ap_error_set(AP_ESTALE, "the job's lease is no longer current: another run "
					       "owns it now");
	return ap_error_set(AP_ECANCELLED, "the job was stopped");
}

/* The fixer's progress: map its stage names to job stages. */
static void on_progress(void *ud, const char *stage_name, const char *line)
{
	struct run *r = ud;
	char verdict[600];

	/* The Tester's verdicts ("round 2: rejected - ...") become "tester:" events, which the
	 * comment shows as the latest verdict. */
	if (stage_name && strcmp(stage_name, "testing") == 0 && line &&
	    (strstr(line, ": proven") || strstr(line, ": rejected") ||
	     strstr(line, "NOT proven"))) {
		/* cut between characters: the line may carry a test's name */
		snprintf(verdict, sizeof(verdict), "tester: %.*s",
			 (int)ap_utf8_cut(line, sizeof(verdict) - 10), line);
		line = verdict;
		/* Proven: the PR comes next. GitHub spaces an installation's writes, so a comment
		 * edit now would delay it; the final state is written right after. */
		if (strstr(verdict, ": proven"))
			comment_hold(r->cm);
	}

	for (int i = 0; i < (int)(sizeof(stage_names) / sizeof(stage_names[0])); i++)
		if (stage_name && strcmp(stage_name, stage_names[i]) == 0 && i != r->last_stage) {
			stage(r, (enum job_stage)i, line);
			return;
		}
	event(r, line);
}

static job_usage usage_of(const fixer_result *res)
{
	job_usage u = {res->cost_micro, res->tokens_in, res->tokens_out, res->model_calls};

	return u;
}

/* After every model call: the ledger learns the run's spending as it happens. */
static void on_usage(void *ud, const fixer_result *so_far)
{
	struct run *r = ud;
	job_usage u = usage_of(so_far);

	if (r->spending && job_ctl_spend_record(r->ctl, &u, false) != 0) {
		ap_log(AP_LOG_WARN, r->job->delivery, r->job->id, "recording spending: %s",
		       ap_error_last());
		ap_error_clear();
	}
}

/* The job ends before the fixer for the reason msg (malloc'd; freed here): it becomes the
 * failure the comment shows and an event, and rc is returned with msg as the error. */
static int job_stops(struct run *r, int rc, char *msg)
{
	set_str(&r->failure, msg);
	event(r, msg);
	rc = ap_error_set(rc, "%s", msg);
	free(msg);
	return rc;
}

/* Before anything that costs: hold the most this run can cost against the daily budgets, or
 * refuse to start (AP_EBUDGET, the failure says which budget and the sums). */
static int open_spending(struct run *r)
{
	const cost_plan *pl = &r->p->plan;
	job_spend_req req = {pl->priced, pl->max_micro, pl->global_cap, pl->repo_cap};
	job_spend_verdict v = {0};
	char spent[32], cap[32], most[32], *msg = NULL;
	int rc;

	rc = job_ctl_spend_open(r->ctl, &req, &v);
	if (rc)
		return rc;
	if (!v.refused) {
		r->spending = true;
		return 0;
	}
	cost_format_usd(v.spent_micro, spent, sizeof(spent));
	cost_format_usd(v.cap_micro, cap, sizeof(cap));
	cost_format_usd(pl->max_micro, most, sizeof(most));
	if (asprintf(&msg,
		     "not started: the daily budget %s%s (%s per UTC day) could be exceeded: %s "
		     "is spent or held today and this job may cost up to %s (AUTOPATCH_MAX_TOKENS "
		     "= %" PRId64 " tokens of %s at its dearer price); it was not run, no model "
		     "was called",
		     v.repo ? "of " : "for all repositories", v.repo ? r->job->repo : "", cap,
		     spent, most, pl->max_tokens, pl->model) < 0)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return job_stops(r, AP_EBUDGET, msg);
}

static bool on_should_stop(void *ud)
{
	struct run *r = ud;

	return job_ctl_should_stop(r->ctl);
}

/* ---- the job ---- */

/* Inputs gathered before the fixer runs. */
struct work {
	gh_repo repo;
	gh_issue issue;
	gh_pull pull;			/* iteration: the PR being changed */
	int64_t issue_no;		/* the issue being fixed */
	char git_url[GH_URL_MAX + 256]; /* GITHUB_URL/owner/name.git: clone and push */
	char *branch;			/* autopatch/issue-N */
	char *base_ref;			/* checkout ref */
	sbx_box *box;			/* warm-pool box whose repo dir holds the checkout */
	sbx_box *custom; /* a second box when the repo config asks for another image/network */
	repo_config *rc;
	env_choice choice; /* the image the job's box runs */
	env_setup_result env;
	env_snapshot *snapshot; /* the setup products, as the host holds them for the Tester */
	tester_boxes tboxes;	/* the Tester's fresh boxes */
	char label[32];		/* the autopatch.job label of the job's boxes */
	patch_policy policy;	/* what the Tester's hook and publish() judge the patch by */
	run_config run;		/* the repository's settings (run_in) ... */
	env_setup_opts eo;	/* ... as the setup phase's options */
	fixer_opts fo;		/* ... and as the fixer's */
	fixer_result res;
	char *files; /* "Files changed", from the pushed commit (gh_git_changed_files) */
};

static void work_release(struct work *w)
{
	int rc;

	fixer_result_release(&w->res);
	tester_boxes_stop(&w->tboxes); /* before the snapshot it restores from */
	env_snapshot_free(w->snapshot);
	free(w->files);
	repo_config_free(w->rc);
	/* The custom box binds the first box's repo dir: destroy it first. */
	rc = sbx_destroy(w->custom);
	if (rc)
		ap_warn("destroying a sandbox failed: %s", ap_error_last());
	rc = sbx_destroy(w->box);
	if (rc)
		ap_warn("destroying a sandbox failed: %s", ap_error_last());
	gh_repo_release(&w->repo);
	gh_issue_release(&w->issue);
	gh_pull_release(&w->pull);
	free(w->branch);
	free(w->base_ref);
}

/* Iteration: the PR must be one of ours, in the same repository. */
static int load_pull(struct run *r, struct work *w)
{
	const char *h;
	char *end;
	int rc;

	rc = gh_pull_get(r->rest, r->job->repo, r->job->issue, &w->pull);
	if (rc)
		return rc;
	h = w->pull.head_ref ? w->pull.head_ref : "";
	if (strncmp(h, BRANCH_PREFIX, strlen(BRANCH_PREFIX)) != 0 || !w->pull.head_repo ||
	    strcmp(w->pull.head_repo, r->job->repo) != 0)
		return ap_error_set(AP_EDENIED,
				    "pull request #%" PRId64 " is not an autopatch pull "
				    "request (its branch is not autopatch/issue-N in this "
				    "repository)",
				    r->job->issue);
	w->issue_no = strtoll(h + strlen(BRANCH_PREFIX), &end, 10);
	if (*end || w->issue_no <= 0)
		return ap_error_set(AP_EDENIED, "branch %s does not name an issue", h);
	w->branch = strdup(h);
	w->base_ref = strdup(h);
	return w->branch && w->base_ref ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
}

/* An iteration checks out the PR branch, which autopatch itself wrote: its
 * .github/autopatch.yml (test, image, network, paths) could come from an earlier patch.
 * The rules a patch is proven by come from the default branch, which a person merged. */
static int load_default_branch_config(struct run *r, struct work *w, const char *token)
{
	char dir[4096], kept[1024];
	const char *ref = w->repo.default_branch ? w->repo.default_branch : "main";
	int rc;

	if ((rc = ap_fmt(dir, sizeof(dir), "%s/config-job-%" PRId64, r->p->data_dir, r->job->id)))
		return rc;
	/* A crashed earlier attempt's copy; what cannot go, the checkout reports. */
	if (fs_rm_rf(dir) != 0)
		ap_error_clear();
	rc = gh_git_checkout(r->p->git, w->git_url, token, ref, dir, NULL);
	if (rc == 0)
		rc = repo_config_load(&w->rc, dir);
	snprintf(kept, sizeof(kept), "%s", ap_error_last());
	if (fs_rm_rf(dir) != 0) {
		ap_warn("config checkout: %s", ap_error_last());
		ap_error_set(rc, "%s", kept); /* the caller reports the checkout or load error */
	}
	return rc;
}

/* The warm-pool box runs the default image with no network: `image:`, a detected flavour
 * whose image is another (by id), or an allow-list for setup, needs a box of its own. */
static bool needs_own_box(struct run *r, const struct work *w)
{
	char def[80];

	if (w->rc->network[0] || w->rc->image)
		return true;
	if (sbx_image_id(r->p->sbx, NULL, def, sizeof(def)) != 0) {
		ap_error_clear();
		return true;
	}
	return strcmp(def, w->choice.image_id) != 0;
}

/* An environment problem found before the fixer (image, toolchain, setup): the job fails
 * with the reason prefixed "environment failure: ", as the Tester's baseline says it, before
 * any model call. Returns AP_EINVAL (not retried: the repository's settings must change). */
static int env_failure(struct run *r)
{
	char *msg = NULL;

	if (asprintf(&msg, "environment failure: %s", ap_error_last()) < 0)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return job_stops(r, AP_EINVAL, msg);
}

/* The repository, and the issue (or the pull request and its issue) the job is about. */
static int read_issue(struct run *r, struct work *w, bool iterate)
{
	int rc;

	rc = gh_repo_get(r->rest, r->job->repo, &w->repo);
	if (rc)
		return rc;
	/* Git goes to the configured web host, never to a URL an API answer names. */
	rc = gh_urls_git(&r->p->urls, w->repo.full_name, w->git_url, sizeof(w->git_url));
	if (rc)
		return rc;
	if (iterate) {
		rc = load_pull(r, w);
		if (rc)
			return rc;
	} else {
		w->issue_no = r->job->issue;
		if (asprintf(&w->branch, BRANCH_PREFIX "%" PRId64, w->issue_no) < 0) {
			w->branch = NULL;
			return ap_error_set(AP_ENOMEM, "out of memory");
		}
		w->base_ref = xstrdup(w->repo.default_branch ? w->repo.default_branch : "main");
	}
	rc = gh_issue_get(r->rest, r->job->repo, w->issue_no, &w->issue);
	if (rc)
		return rc;
	if (!iterate && w->issue.is_pull)
		return ap_error_set(AP_EINVAL, "#%" PRId64 " is a pull request, not an issue",
				    w->issue_no);
	return 0;
}

/* The job's box, the base checked out into it, and the repository's settings. */
static int check_out(struct run *r, struct work *w, bool iterate)
{
	char *token = NULL, *sha = NULL, msg[1024];
	const char *repo_dir;
	int rc;

	rc = sbx_acquire(r->p->sbx, w->label, &w->box);
	if (rc)
		return rc;
	snprintf(msg, sizeof(msg), "sandbox %.12s ready", sbx_box_id(w->box));
	event(r, msg);
	repo_dir = sbx_box_repo_dir(w->box);
	rc = gh_app_token(r->p->app, r->job->installation_id, &token);
	if (rc)
		return rc;
	rc = gh_git_checkout(r->p->git, w->git_url, token, w->base_ref, repo_dir, &sha);
	if (rc == 0 && iterate)
		rc = load_default_branch_config(r, w, token);
	free(token);
	if (rc) {
		free(sha);
		return rc;
	}
	snprintf(msg, sizeof(msg), "checked out %.100s at %.12s", w->base_ref, sha ? sha : "?");
	free(sha);
	event(r, msg);
	if (!iterate)
		rc = repo_config_load(&w->rc, repo_dir);
	else
		event(r, "configuration read from the default branch");
	if (rc)
		return rc;
	set_str(&r->test_note, w->rc->test_source);
	if (!w->rc->test)
		return ap_error_set(AP_EINVAL, "%s; add `test: <command>` to %s",
				    w->rc->test_source, REPO_CONFIG_PATH);
	return 0;
}

/* The image the job runs in, checked to exist (a missing one ends the job here, with how to
 * make it available), and said in the progress comment. */
static int choose_image(struct run *r, struct work *w, bool iterate, const char *repo_dir)
{
	char msg[1024];
	int rc;

	rc = env_choose_image(&w->choice, r->p->cfg, repo_dir, w->rc->image,
			      iterate ? REPO_CONFIG_PATH " on the default branch"
				      : REPO_CONFIG_PATH);
	if (rc)
		return rc;
	env_describe_choice(&w->choice, msg, sizeof(msg));
	set_str(&r->environment, msg);
	event(r, msg);
	rc = env_check_image(r->p->sbx, r->p->cfg, &w->choice, env_note_cb, env_live_cb, r);
	if (rc)
		return rc == AP_ENOTFOUND ? env_failure(r) : rc;
	r->live_ev = -1; /* the build's progress line stays; setup gets its own */
	if (w->choice.toolchain[0]) {
		snprintf(msg, sizeof(msg), "toolchain: %s", w->choice.toolchain);
		event(r, msg);
		/* Fits: image 255 + flavour 15 + why 319 + toolchain 299 + text < 1024. */
		env_describe_choice(&w->choice, msg, sizeof(msg));
		snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "; toolchain %s",
			 w->choice.toolchain);
		set_str(&r->environment, msg);
	}
	return 0;
}

/* A box of the chosen image (and setup's egress allow-list) when the pool's will not do. */
static int make_own_box(struct run *r, struct work *w, const char *repo_dir)
{
	sbx_spec spec = {.version = SBX_SPEC_VERSION};
	char msg[1024];
	int rc;

	spec.image = w->choice.image;
	spec.repo_dir = repo_dir;
	spec.job_label = w->label;
	if (w->rc->network[0]) {
		spec.network = SBX_NET_ALLOWLIST;
		spec.allow = (const char *const *)w->rc->network;
	}
	rc = sbx_create(r->p->sbx, &spec, &w->custom);
	if (rc)
		return rc;
	snprintf(msg, sizeof(msg), "sandbox %.12s ready (%.100s%s)", sbx_box_id(w->custom),
		 w->choice.image, w->rc->network[0] ? ", egress allow-list for setup" : "");
	event(r, msg);
	return 0;
}

/* Everything before setup: the issue read, the base checked out in a box, the image chosen
 * and the box ready; an environment problem ends the job here, before any model call. */
static int prepare(struct run *r, struct work *w, bool iterate)
{
	const char *repo_dir;
	int rc;

	snprintf(w->label, sizeof(w->label), "job-%" PRId64, r->job->id);
	if ((rc = read_issue(r, w, iterate)) || (rc = checkpoint(r)) ||
	    (rc = check_out(r, w, iterate)))
		return rc;
	repo_dir = sbx_box_repo_dir(w->box);
	if ((rc = choose_image(r, w, iterate, repo_dir)))
		return rc;
	if (needs_own_box(r, w) && (rc = make_own_box(r, w, repo_dir)))
		return rc;
	if ((rc = checkpoint(r)))
		return rc;
	if ((rc = sbx_prepare(w->custom ? w->custom : w->box)))
		return rc;
	/* A toolchain command the image lacks: say which flavour has it, before any model call. */
	rc = env_check_tools(w->custom ? w->custom : w->box, &w->choice,
			     (const char *const *)w->rc->setup_steps, w->rc->test);
	return rc == AP_ENOTFOUND ? env_failure(r) : rc;
}

/* The setup phase's and the fixer's options from the repository's settings, as fix and
 * serve both read them (job/run_config.h). With a budget, the run must stay within what it
 * holds. */
static void run_in(struct run *r, struct work *w)
{
	w->run = (run_config)RUN_CONFIG_INIT;
	w->run.cfg = r->p->cfg;
	w->run.rc = w->rc;
	w->run.choice = &w->choice;
	w->run.box = w->custom ? w->custom : w->box;
	w->run.repo_id = r->job->repo;
	w->run.repo_dir = sbx_box_repo_dir(w->box);
	if (r->p->plan.global_cap || r->p->plan.repo_cap)
		w->run.cost_cap_micro = r->p->plan.max_micro;
	w->eo = (env_setup_opts)ENV_SETUP_OPTS_INIT;
	w->fo = (fixer_opts)FIXER_OPTS_INIT;
	run_config_options(&w->run, &w->eo, &w->fo);
}

/* The setup phase (docs/environments.md): restore the cached environment or run `setup:`,
 * then the network goes off for the agent phase. */
static int setup_env(struct run *r, struct work *w)
{
	env_setup_opts *o = &w->eo;
	char *s = NULL;
	int rc;

	run_in(r, w);
	o->note = env_note_cb;
	o->live = env_live_cb;
	o->ud = r;
	rc = env_setup(o, &w->env);
	r->live_ev = -1;
	/* What setup made, held by the host before any model call: the Tester's boxes are
	 * filled from it, never from the Builder's workspace. */
	if (rc == 0)
		rc = env_snapshot_take(o, &w->env, &w->snapshot);
	/* A failed setup, or one past its deadline, is the repository's environment: not a
	 * passing problem to retry, and no model call is spent on it. */
	if (rc == AP_ETIMEOUT || rc == AP_EINVAL)
		rc = env_failure(r);
	if (w->env.summary[0] &&
	    asprintf(&s, "%s; %s", r->environment ? r->environment : "", w->env.summary) >= 0) {
		free(r->environment);
		r->environment = s;
	}
	return rc;
}

/* The refused connections so far, for the comment. */
static void collect_blocked(struct run *r, struct work *w)
{
	sbx_box *b = w->custom ? w->custom : w->box;
	char *rep = NULL, kept[2048];

	/* The job's error stays what it was. */
	snprintf(kept, sizeof(kept), "%s", ap_error_last());
	if (b && env_blocked_report(b, &rep) == 0 && rep) {
		free(r->blocked);
		r->blocked = rep;
	}
	if (kept[0])
		ap_error_set(AP_EIO, "%s", kept);
	else
		ap_error_clear();
}

static int run_fixer(struct run *r, struct work *w, bool iterate)
{
	fixer_opts o = w->fo; /* the repository's settings, from run_in() */
	char *prev = NULL, tline[160];
	int rc;

	o.issue_title = w->issue.title ? w->issue.title : "";
	o.issue_body = w->issue.body ? w->issue.body : "";
	o.trajectory_path = r->trajectory;
	o.progress = on_progress;
	o.should_stop = on_should_stop;
	o.usage = on_usage;
	o.ud = r;
	/* The Tester tests only a diff the host's policy accepts, judged on the bytes against
	 * the host checkout (the box's /repo). */
	rc = patch_policy_init(&w->policy, r->p->cfg, w->rc, sbx_box_repo_dir(w->box));
	if (rc)
		return rc;
	run_config_tester(&w->run, &w->env, w->snapshot, r->p->sbx, w->label, &w->policy,
			  &w->tboxes, &o);
	if (iterate) {
		o.feedback =
		    r->job->feedback && *r->job->feedback ? r->job->feedback : "(no feedback text)";
		/* The earlier run is summarised by the PR it opened. */
		if (w->pull.body) {
			prev = strndup(w->pull.body, PREV_SUMMARY_MAX);
			o.previous_summary = prev;
		}
	}
	rc = fixer_run(&o, &w->res);
	tester_boxes_stop(&w->tboxes); /* no spare outlives the fixer run */
	tester_boxes_describe(&w->tboxes, tline, sizeof(tline));
	event(r, tline);
	free(prev);
	{ /* for the console's job list */
		char tokens[32];

		snprintf(tokens, sizeof(tokens), "%lld",
			 (long long)(w->res.tokens_in + w->res.tokens_out));
		job_ctl_state_set(r->ctl, "tokens", tokens);
	}
	return rc;
}

/* "what was tried" for a failure comment. The files are libgit2's reading of the last diff
 * (gh_patch_files()), never the box's own list. */
static void describe_tried(struct run *r, const fixer_result *res)
{
	char *s = NULL, *files = NULL, cost[48] = "";
	int n;

	if (res->model_calls == 0 && res->iterations == 0)
		return;
	if (res->priced) {
		memcpy(cost, ", ", 3);
		cost_format_usd(res->cost_micro, cost + 2, sizeof(cost) - 2);
	}
	if (res->diff && *res->diff && gh_patch_files(res->diff, strlen(res->diff), &files) != 0)
		ap_error_clear();
	n = asprintf(&s,
		     "%d Builder/Tester round%s with %d model call%s (%s, %" PRId64
		     " tokens in, %" PRId64 " out%s)%s%s",
		     res->iterations, res->iterations == 1 ? "" : "s", res->model_calls,
		     res->model_calls == 1 ? "" : "s", res->model ? res->model : "model",
		     res->tokens_in, res->tokens_out, cost,
		     files && *files ? "; last patch touched " : "", files && *files ? files : "");
	free(files);
	if (n < 0)
		return;
	for (char *c = s; *c; c++)
		if (*c == '\n')
			*c = ' ';
	free(r->tried);
	r->tried = s;
}

static void body_input(const struct run *r, const struct work *w, pr_body_input *in)
{
	in->issue = w->issue_no;
	in->job_id = r->job->id;
	in->summary = w->res.summary;
	in->cause = w->res.cause;
	in->repro_test = w->res.repro_test;
	in->evidence = w->res.evidence;
	in->files_changed = w->files;
	in->test_note = r->test_note;
	in->environment = r->environment;
	in->model = w->res.model;
	in->tokens_in = w->res.tokens_in;
	in->tokens_out = w->res.tokens_out;
	in->model_calls = w->res.model_calls;
	in->iterations = w->res.iterations;
	in->priced = w->res.priced;
	in->cost_micro = w->res.cost_micro;
	in->estimated_calls = w->res.estimated_calls;
	in->weak_evidence = w->res.weak_evidence;
	in->harness_changed = w->res.harness_changed;
	in->harness_list = w->res.harness_list;
	in->file_kinds = w->res.file_kinds;
}

/* Sleep ms, in slices, checking for a stop: 0, or AP_ECANCELLED when the job was stopped. */
static int nap(struct run *r, int64_t ms)
{
	int64_t until = ap_wall_ms() + ms;

	while (ap_wall_ms() < until) {
		int64_t left = until - ap_wall_ms();

		if (checkpoint(r))
			return AP_ECANCELLED;
		ap_sleep_ms(left > 250 ? 250 : left);
	}
	return checkpoint(r);
}

/* The PR of the job's branch, created with body or, when it exists, updated to it. A retried
 * job must never open a second PR, so the PR is looked up first (by the number in the state,
 * else by the head branch) and looked up again before every further create: after a 422
 * ("already exists": a create whose answer was lost, or a race) and after a create that GitHub
 * may have applied (a 5xx or a cut connection, which the REST client does not repeat). */
static int find_or_create_pr(struct run *r, struct work *w, const char *body)
{
	gh_pull_new req = GH_PULL_NEW_INIT;
	gh_pull pr = {0};
	char *title = NULL, *stored, numbuf[32], why[1100] = "";
	int64_t number = 0;
	int rc;

	stored = job_ctl_state_get(r->ctl, "pr_number");
	if (stored) {
		number = strtoll(stored, NULL, 10);
		free(stored);
	}
	for (int round = 0;; round++) {
		if (number > 0)
			rc = gh_pull_get(r->rest, r->job->repo, number, &pr);
		else
			rc = gh_pull_find_by_head(r->rest, r->job->repo, w->branch, "open", &pr);
		number = 0;
		if (rc == 0) {
			rc = fence(r);
			if (rc == 0)
				rc = gh_pull_update(r->rest, r->job->repo, pr.number, NULL, body,
						    NULL, NULL);
			break;
		}
		if (rc != AP_ENOTFOUND)
			break;
		ap_error_clear();
		if (why[0]) { /* a 422 that no PR of ours explains: GitHub's message stands */
			rc = ap_error_set(AP_EHTTP, "%s", why);
			break;
		}
		if (round >= PR_CREATE_ROUNDS) {
			rc = ap_error_set(AP_EUNAVAIL,
					  "GitHub did not confirm the pull request after %d tries",
					  PR_CREATE_ROUNDS);
			break;
		}
		if ((rc = checkpoint(r)))
			break;
		if (!title) {
			rc = progress_render_pr_title(w->issue_no, w->issue.title,
						      w->res.harness_changed, &title);
			if (rc)
				break;
		}
		req.title = title;
		req.head = w->branch;
		req.base = w->repo.default_branch ? w->repo.default_branch : "main";
		req.body = body;
		req.draft = true;
		if ((rc = fence(r)))
			break;
		rc = gh_pull_create(r->rest, r->job->repo, &req, &pr);
		if (rc == 0)
			break;
		if (rc == AP_EHTTP) {
			snprintf(why, sizeof(why), "%s", ap_error_last());
			continue;
		}
		if (!gh_rest_maybe_applied(r->rest))
			break;
		ap_log(AP_LOG_WARN, r->job->delivery, r->job->id,
		       "%s; looking for the pull request before trying again", ap_error_last());
		ap_error_clear();
		if ((rc = nap(r, r->p->gh_backoff_ms << round)))
			break;
	}
	free(title);
	if (rc == 0) {
		snprintf(numbuf, sizeof(numbuf), "%" PRId64, pr.number);
		job_ctl_state_set(r->ctl, "pr_number", numbuf);
		if (pr.html_url)
			job_ctl_state_set(r->ctl, "pr_url", pr.html_url);
		set_str(&r->pr_url, pr.html_url);
		/* A harness change is labelled as such, so nobody takes it for a proof. A label
		 * that cannot be added leaves the title and body saying it. */
		if (w->res.harness_changed) {
			static const char *const labels[] = {HARNESS_LABEL};

			if (gh_labels_add(r->rest, r->job->repo, pr.number, labels, 1) != 0) {
				ap_log(AP_LOG_WARN, r->job->delivery, r->job->id,
				       "could not label the pull request: %s", ap_error_last());
				ap_error_clear();
			}
		}
	}
	gh_pull_release(&pr);
	return rc;
}

/* How long to wait after a call that returned AP_ERATELIMIT: until the time the REST client
 * says the installation may call again (reset, retry-after or its secondary-limit wait), else
 * the secondary-limit default doubling with n. */
static int64_t rate_limit_wait_ms(const struct run *r, int n)
{
	int64_t at = gh_rest_retry_after(r->rest), w = r->p->ratelimit_wait_s * 1000;

	if (at > 0) {
		w = (at - ap_wall_s()) * 1000;
	} else {
		for (int i = 0; i < n && i < 10; i++)
			w *= 2;
	}
	return w < 1000 ? 1000 : w;
}

/* GitHub rate-limited a call beyond what one REST call waits (while preparing, or publishing
 * with the branch pushed and the patch proven): wait the limit out here (the worker keeps the
 * lease alive) rather than fail the job or spend an attempt. AP_ERATELIMIT once the job waited
 * ratelimit_max_wait_s in all (the job is then re-queued), AP_ECANCELLED when stopped while
 * waiting. */
static int wait_rate_limit(struct run *r, int n, int64_t *waited_ms)
{
	int64_t ms = rate_limit_wait_ms(r, n);
	char msg[160];

	if (*waited_ms + ms > r->p->ratelimit_max_wait_s * 1000)
		return AP_ERATELIMIT; /* the REST client's message stays the error */
	*waited_ms += ms;
	snprintf(msg, sizeof(msg), "GitHub rate limit: waiting %lld s before trying again",
		 (long long)((ms + 999) / 1000));
	event(r, msg);
	ap_error_clear();
	return nap(r, ms);
}

/* The proven diff, checked again on the host before it leaves in a push: the whole policy on
 * the bytes about to be applied (the Tester's hook saw the same bytes; this does not depend on
 * it having run), and no credential (the model may have copied one from a log; masking it
 * would change the proven code). */
static int check_patch(struct work *w)
{
	char *masked;
	bool clean;
	int rc;

	if (!w->res.diff || !*w->res.diff)
		return ap_error_set(AP_EINVAL, "the fixer reported success but produced no diff");
	rc = patch_policy_check(&w->policy, w->res.diff, strlen(w->res.diff));
	if (rc)
		return rc;
	masked = redact_str(w->res.diff);
	clean = masked && strcmp(masked, w->res.diff) == 0;
	free(masked);
	if (!clean)
		return ap_error_set(AP_EDENIED, "the patch contains a credential or a string "
						"that looks like one; it was not pushed");
	return 0;
}

/* Apply the patch on the host, commit it on the job's branch (*sha: the caller's) and push. */
static int commit_and_push(struct run *r, struct work *w, bool iterate, char **sha)
{
	const char *repo_dir = sbx_box_repo_dir(w->box);
	char *token = NULL, *msg = NULL;
	int rc;

	rc = gh_git_apply(r->p->git, repo_dir, w->res.diff, strlen(w->res.diff));
	if (rc)
		return rc;
	if (iterate)
		rc = asprintf(&msg,
			      "autopatch: address review feedback on #%" PRId64 "\n\nRefs #%" PRId64
			      "\n",
			      r->job->issue, w->issue_no);
	else
		rc = asprintf(&msg, "Fix #%" PRId64 ": %.200s\n\nFixes #%" PRId64 "\n", w->issue_no,
			      w->issue.title ? w->issue.title : "", w->issue_no);
	if (rc < 0)
		return ap_error_set(AP_ENOMEM, "out of memory");
	rc = gh_git_commit(r->p->git, repo_dir, w->branch, msg, sha);
	free(msg);
	if (rc)
		return rc;
	/* "Files changed" is what the pushed commit changes, as the host's libgit2 reads it. */
	if (gh_git_changed_files(r->p->git, repo_dir, *sha, &w->files) != 0) {
		ap_warn("cannot list the files of commit %.12s: %s", *sha, ap_error_last());
		ap_error_clear();
	}
	if ((rc = checkpoint(r)) || (rc = gh_app_token(r->p->app, r->job->installation_id, &token)))
		return rc;
	/* A first run owns the branch (force: a retry after a crash rewrites it); an iteration
	 * adds a commit on top of the PR's head, so a plain push. */
	if (!(rc = fence(r)))
		rc = gh_git_push(r->p->git, repo_dir, w->git_url, token, w->branch, !iterate);
	free(token);
	if (rc)
		return rc;
	event(r, iterate ? "pushed a new commit to the pull request" : "pushed the branch");
	return 0;
}

/* An iteration's reply on the pull request, posted once: found by its marker first (a re-run
 * of this job, or a post that GitHub answered with a 5xx, may have made it already). */
static int post_reply(struct run *r, struct work *w, const pr_body_input *in, const char *sha)
{
	char *body = NULL;
	int64_t waited = 0;
	int rc;

	set_str(&r->pr_url, w->pull.html_url);
	rc = progress_render_reply(in, 1, sha, NULL, &body);
	for (int n = 0; rc == 0; n++) {
		int64_t reply_id;

		if ((rc = fence(r)))
			break;
		rc = comment_create_once(r->rest, r->job->repo, r->job->issue, REPLY_MARKER,
					 r->job->id, body, true, &reply_id);
		if (rc != AP_ERATELIMIT || (rc = wait_rate_limit(r, n, &waited)))
			break;
	}
	free(body);
	return rc;
}

/* The draft pull request, found or created (find_or_create_pr is idempotent: it finds a PR
 * whose creation was cut off). */
static int open_pr(struct run *r, struct work *w, const pr_body_input *in)
{
	char *body = NULL;
	int64_t waited = 0;
	int rc;

	if ((rc = progress_render_pr_body(in, &body)) || (rc = checkpoint(r)))
		goto out;
	for (int n = 0;; n++) {
		rc = find_or_create_pr(r, w, body);
		if (rc != AP_ERATELIMIT || (rc = wait_rate_limit(r, n, &waited)))
			break;
	}
out:
	free(body);
	return rc;
}

static int publish(struct run *r, struct work *w, bool iterate)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *sha = NULL;
	int rc;

	if ((rc = check_patch(w)))
		return rc;
	stage(r, STAGE_PUBLISHING, "applying the proven patch on the host");
	if ((rc = commit_and_push(r, w, iterate, &sha)))
		goto out;
	body_input(r, w, &in);
	rc = iterate ? post_reply(r, w, &in, sha) : open_pr(r, w, &in);
out:
	free(sha);
	return rc;
}

/* Which errors are passing conditions worth another run: GitHub or the model unreachable or
 * slow, an I/O error, and a rate limit (GitHub saying "later", not "no"). The pool decides
 * whether an attempt is left (job_info.final_attempt). */
static bool retryable(int rc)
{
	return rc == AP_EUNAVAIL || rc == AP_ETIMEOUT || rc == AP_EIO || rc == AP_ERATELIMIT;
}

/* When the job failed before the fixer wrote a trajectory (bad config, GitHub unreachable), the
 * comment still points the operator at one: write the job's own events there. */
static void ensure_trajectory(const struct run *r)
{
	cJSON *o = NULL, *evs;
	char *line = NULL, *clean = NULL;
	FILE *f;

	if (!r->trajectory || access(r->trajectory, F_OK) == 0)
		return;
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", "pipeline_failure");
	cJSON_AddNumberToObject(o, "job", (double)r->job->id);
	cJSON_AddStringToObject(o, "repo", r->job->repo ? r->job->repo : "");
	cJSON_AddNumberToObject(o, "issue", (double)r->job->issue);
	cJSON_AddStringToObject(o, "failure", r->failure ? r->failure : "");
	evs = cJSON_AddArrayToObject(o, "events");
	for (size_t i = 0; evs && i < r->n_ev; i++) {
		cJSON *e = cJSON_CreateObject();

		cJSON_AddNumberToObject(e, "time_ms", (double)r->ev[i].time_ms);
		if (r->ev[i].stage)
			cJSON_AddStringToObject(e, "stage", r->ev[i].stage);
		if (r->ev[i].message)
			cJSON_AddStringToObject(e, "message", r->ev[i].message);
		cJSON_AddItemToArray(evs, e);
	}
	line = cJSON_PrintUnformatted(o);
	clean = line ? redact_str(line) : NULL;
	f = clean ? fopen(r->trajectory, "wx") : NULL;
	if (f) {
		fprintf(f, "%s\n", clean);
		fclose(f);
	}
	free(clean);
	free(line);
	cJSON_Delete(o);
}

static void finish_failure(struct run *r, struct work *w, int rc, bool iterate)
{
	bool final = !retryable(rc) || r->job->final_attempt;
	const char *why = ap_error_last();

	if (!r->failure)
		set_str(&r->failure, *why ? why : ap_error_name(rc));
	if (rc == AP_ESTALE || r->stale) {
		/* Presumed dead and replaced: the run that owns the job now tells the issue. */
		ap_log(AP_LOG_WARN, r->job->delivery, r->job->id,
		       "lease no longer current (epoch %" PRId64 "): stopping without publishing",
		       r->job->epoch);
		return;
	}
	describe_tried(r, &w->res);
	if (rc == AP_ECANCELLED && job_ctl_cancelled(r->ctl)) {
		r->state = PROGRESS_CANCELLED;
		set_str(&r->failure, "the job was cancelled (the label was removed or "
				     "`/autopatch stop` was posted); its sandbox was destroyed");
	} else if (rc == AP_ECANCELLED) {
		/* Server shutdown: the job is re-queued and will continue. */
		add_event(r, -1, "interrupted by a server shutdown; it will resume");
		comment_final(r);
		return;
	} else if (!final) {
		char note[600];

		snprintf(note, sizeof(note), "attempt %d failed (%.400s); autopatch will retry",
			 r->job->attempts, r->failure);
		add_event(r, -1, note);
		comment_final(r);
		return;
	} else {
		r->state = PROGRESS_FAILED;
		ensure_trajectory(r);
	}
	comment_final(r);
	if (r->state == PROGRESS_FAILED && !iterate) {
		static const char *const labels[] = {FAILED_LABEL};

		if (fence(r) != 0 ||
		    gh_labels_add(r->rest, r->job->repo, r->job->issue, labels, 1) != 0) {
			ap_log(AP_LOG_WARN, r->job->delivery, r->job->id, "could not add label: %s",
			       ap_error_last());
			ap_error_clear();
		}
	}
}

/* The run's trajectory path, progress comment and REST client. */
static int run_open(struct run *r)
{
	char *stored, path[4096];
	int rc;

	rc = ap_fmt(path, sizeof(path), "%s/trajectories/job-%" PRId64 ".jsonl", r->p->data_dir,
		    r->job->id);
	if (rc)
		return rc;
	r->trajectory = strdup(path);
	job_ctl_state_set(r->ctl, "trajectory", path);
	stored = job_ctl_state_get(r->ctl, "comment_id");
	r->cm_fence = (comment_fence){fence_cb, (void *)r->ctl};
	rc = comment_new(&r->cm, r->p->cfg, gh_app_creds(r->p->app), r->job, &r->cm_fence,
			 stored ? strtoll(stored, NULL, 10) : 0, r->p->comment_interval_ms);
	free(stored);
	if (rc)
		return rc;
	rc = gh_rest_new(&r->rest, r->p->cfg, gh_app_creds(r->p->app), r->job->installation_id);
	if (rc)
		return rc;
	gh_rest_set_write_guard(r->rest, write_guard, r);
	return 0;
}

/* prepare(), again after a rate limit while reading the issue or repository: wait it out and
 * prepare afresh (a re-queue would spend an attempt per retry and fail on a reset an hour
 * away). */
static int prepare_past_rate_limits(struct run *r, struct work *w, bool iterate)
{
	int64_t waited = 0;
	int rc;

	for (int n = 0;; n++) {
		rc = prepare(r, w, iterate);
		if (rc != AP_ERATELIMIT)
			return rc;
		work_release(w);
		memset(w, 0, sizeof(*w));
		if ((rc = wait_rate_limit(r, n, &waited)))
			return rc;
	}
}

/* The job's stages, from preparing to the published pull request (or reply). */
static int run_stages(struct run *r, struct work *w, bool iterate)
{
	int rc;

	/* A job cancelled while it waited for a retry comes here only to say so in its comment. */
	if ((rc = checkpoint(r)) || (rc = open_spending(r)))
		return rc;
	stage(r, STAGE_PREPARING, r->job->attempts > 1 ? "resuming after an interruption" : NULL);
	if ((rc = checkpoint(r)) || (rc = prepare_past_rate_limits(r, w, iterate)) ||
	    (rc = checkpoint(r)))
		return rc;
	rc = setup_env(r, w);
	if (rc) {
		collect_blocked(r, w);
		return rc;
	}
	if ((rc = checkpoint(r)))
		return rc;
	/* The fixer names its stages: the Tester's baseline is still "preparing". */
	rc = run_fixer(r, w, iterate);
	collect_blocked(r, w);
	if (rc)
		return rc;
	if (!w->res.proven) {
		set_str(&r->failure,
			w->res.failure ? w->res.failure : "the Tester did not accept any patch");
		return ap_error_set(AP_EINVAL, "%s", r->failure);
	}
	r->harness = w->res.harness_changed;
	if ((rc = checkpoint(r)) || (rc = publish(r, w, iterate)))
		return rc;
	r->state = PROGRESS_SUCCEEDED;
	add_event(r, -1, iterate ? "replied on the pull request" : "draft pull request ready");
	comment_final(r);
	return 0;
}

/* What the queue learns: succeeded, failed, cancelled or retried (when), and why. */
static void set_outcome(struct run *r, struct work *w, int rc, bool iterate, job_outcome *outcome)
{
	const job_info *job = r->job;
	char *why;

	if (!rc) {
		outcome->kind = JOB_SUCCEEDED;
		outcome->summary = redact_str(r->pr_url ? r->pr_url : "done");
		ap_log(AP_LOG_INFO, job->delivery, job->id, "job succeeded: %s",
		       r->pr_url ? r->pr_url : "");
		return;
	}
	if (rc == AP_EBUDGET && w->res.failure)
		set_str(&r->failure, w->res.failure);
	finish_failure(r, w, rc, iterate);
	why = redact_str(r->failure ? r->failure : ap_error_name(rc));
	outcome->summary = why;
	ap_log(AP_LOG_INFO, job->delivery, job->id, "job ended: %s: %s", ap_error_name(rc),
	       why ? why : "");
	if (rc == AP_ECANCELLED || rc == AP_ESTALE) {
		outcome->kind = JOB_CANCELLED;
	} else if (retryable(rc)) {
		outcome->kind = JOB_RETRY;
		/* A rate limit names when GitHub takes calls again. */
		if (rc == AP_ERATELIMIT && r->rest && gh_rest_retry_after(r->rest) > 0)
			outcome->not_before_ms = gh_rest_retry_after(r->rest) * 1000;
	} else {
		outcome->kind = JOB_FAILED;
	}
}

void pipeline_run(const job_info *job, const job_ctl *ctl, void *ud, job_outcome *outcome)
{
	struct run r = {0};
	struct work w = {0};
	bool iterate = job->trigger == JOB_TRIGGER_PR_FEEDBACK;
	int rc;

	r.p = ud;
	r.job = job;
	r.ctl = ctl;
	r.last_stage = -1;
	r.live_ev = -1;
	r.state = PROGRESS_RUNNING;
	if (!(rc = run_open(&r)))
		rc = run_stages(&r, &w, iterate);
	if (r.spending) {
		job_usage u = usage_of(&w.res);

		if (job_ctl_spend_record(ctl, &u, true) != 0) {
			ap_log(AP_LOG_WARN, job->delivery, job->id, "closing spending: %s",
			       ap_error_last());
			ap_error_clear();
		}
	}
	set_outcome(&r, &w, rc, iterate, outcome);
	work_release(&w);
	run_release(&r);
}
