/* SPDX-License-Identifier: MIT */
/* agents/fixer.c - one Planner -> Builder -> Tester run (see fixer.h): set-up, the stop
 * watch that reaches running sandbox commands, the loop, the result. The helpers the roles
 * share (model call under budgets, tool call, progress) are agents/agent.c. */
#include "agents/fixer.h"

#include "agents/agent.h"
#include "agents/builder.h"
#include "agents/planner.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A sandbox command only watches a flag (sbx_cmd.cancel) while the caller's stop check is a
 * function: this thread polls the function and raises the flag, so a cancel ends a long
 * command (a Builder `run`, the Tester's suite with its 900 s deadline) within a fraction of a
 * second instead of at the command's end. The check is cheap (the pipeline's reads atomics). */
#define STOP_POLL_MS 200

typedef struct stop_watch {
	fixer_stop_fn fn;
	void *ud;
	volatile sig_atomic_t flag; /* the commands' cancel hook */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool quit;
	bool started;
	pthread_t th;
} stop_watch;

static void *stop_watch_main(void *arg)
{
	stop_watch *w = arg;
	struct timespec ts;
	bool stop;

	pthread_mutex_lock(&w->mu);
	while (!w->quit) {
		pthread_mutex_unlock(&w->mu);
		stop = w->fn(w->ud);
		pthread_mutex_lock(&w->mu);
		if (stop) {
			w->flag = 1;
			break;
		}
		ap_deadline_in(&ts, CLOCK_MONOTONIC, STOP_POLL_MS);
		if (!w->quit)
			pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Start polling fn (when there is one). Without the thread a cancel still works between
 * steps, so a failure to start it is only a warning. */
static void stop_watch_start(stop_watch *w, fixer_stop_fn fn, void *ud)
{
	pthread_condattr_t ca;

	w->fn = fn;
	w->ud = ud;
	w->flag = 0;
	w->quit = false;
	w->started = false;
	if (!fn)
		return;
	if (pthread_condattr_init(&ca))
		goto out_warn;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&w->cv, &ca)) {
		pthread_condattr_destroy(&ca);
		goto out_warn;
	}
	pthread_condattr_destroy(&ca);
	if (pthread_mutex_init(&w->mu, NULL))
		goto out_cond;
	if (pthread_create(&w->th, NULL, stop_watch_main, w))
		goto out_mutex;
	w->started = true;
	return;
out_mutex:
	pthread_mutex_destroy(&w->mu);
out_cond:
	pthread_cond_destroy(&w->cv);
out_warn:
	ap_warn("fixer: cannot start the cancel watcher; a cancel waits for the running command");
}

static void stop_watch_stop(stop_watch *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	w->quit = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	w->started = false;
}

static char *issue_text(const fixer_opts *o)
{
	char *s = NULL;
	if (asprintf(&s, "# Issue: %s\n\n%s%s%s%s%s", o->issue_title ? o->issue_title : "",
		     o->issue_body ? o->issue_body : "",
		     o->feedback ? "\n\n## Reviewer feedback on the earlier attempt\n" : "",
		     o->feedback ? o->feedback : "",
		     o->previous_summary ? "\n\n## What the earlier attempt did\n" : "",
		     o->previous_summary ? o->previous_summary : "") < 0)
		return NULL;
	return s;
}

/* Setup in the workspace (the Builder's tree), before anything else. *failed: a sentence
 * when it failed or hit its deadline. */
static int setup(agent_ctx *a, int timeout_s, char **failed)
{
	const char *argv[] = {"sh", "-c", a->opts->setup_cmd, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result r = SBX_RESULT_INIT;
	cmd.argv = argv;
	cmd.timeout_s = timeout_s;
	cmd.cancel = a->tools.cancel;
	*failed = NULL;
	int rc = sbx_exec(a->opts->box, &cmd, &r);
	if (!rc)
		agent_progress(a, "preparing", "setup command exited with %d%s", r.exit_code,
			       r.timed_out ? " (killed by the setup deadline)" : "");
	if (!rc && (r.exit_code != 0 || r.timed_out)) {
		char *tail = tools_head_tail(r.err_len ? r.err
					     : r.out   ? r.out
						       : "",
					     r.err_len ? r.err_len : r.out_len, 3000);
		if (r.timed_out)
			*failed = tools_asprintf(
			    "the setup command `%s` was killed by the setup deadline "
			    "(`setup_timeout`: %d s) in the workspace:\n%s\nRaise `setup_timeout` "
			    "in .github/autopatch.yml or make the setup faster.",
			    a->opts->setup_cmd, timeout_s, tail ? tail : "");
		else
			*failed = tools_asprintf(
			    "the setup command `%s` failed in the workspace (exit %d):\n%s\nFix "
			    "`setup:` in .github/autopatch.yml or use an image that has what it "
			    "needs.",
			    a->opts->setup_cmd, r.exit_code, tail ? tail : "");
		free(tail);
		if (!*failed)
			rc = AP_ENOMEM;
	}
	sbx_result_release(&r);
	return rc;
}

/* Set-up and the Tester's baseline, before the Planner's first model call: an environment
 * that cannot run the suite stops the job here (res->env_failure) at no model cost. */
static int prepare(agent_ctx *a, bool *stop)
{
	fixer_result *res = a->res;
	char *env = NULL, *summary = NULL;
	int setup_s =
	    a->opts->setup_timeout_s > 0 ? a->opts->setup_timeout_s : TESTER_SETUP_TIMEOUT;
	int rc;

	*stop = false;
	if (a->opts->setup_cmd && *a->opts->setup_cmd) {
		if ((rc = setup(a, setup_s, &env)))
			return rc;
	}
	if (!env) {
		agent_progress(a, "preparing",
			       "baseline: running the test suite on the "
			       "unchanged code");
		if ((rc = tester_baseline(a->tester, &env, &summary)))
			return rc;
	}
	if (env) {
		res->env_failure = true;
		res->failure = tools_asprintf("environment failure: %s", env);
		agent_progress(a, "preparing", "environment failure: %s", env);
		free(env);
		*stop = true;
		return res->failure ? 0 : AP_ENOMEM;
	}
	if (summary)
		agent_progress(a, "preparing", "%s", summary);
	free(summary);
	return 0;
}

/* The trajectory's "start" event: the model, the issue and the budget. */
static void trace_start(const agent_ctx *a)
{
	const fixer_opts *opts = a->opts;

	if (!a->traj)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "model", llm_describe(a->model));
	cJSON_AddStringToObject(o, "issue_title", opts->issue_title ? opts->issue_title : "");
	cJSON_AddStringToObject(o, "test_command", opts->test_cmd);
	cJSON_AddNumberToObject(o, "max_iterations", a->max_rounds);
	cJSON_AddNumberToObject(o, "max_model_calls", (double)a->bud.max_calls);
	cJSON_AddNumberToObject(o, "max_tokens", (double)a->bud.max_tokens);
	cJSON_AddNumberToObject(o, "max_wall_seconds", (double)a->bud.max_wall_s);
	traj_event(a->traj, "start", o);
}

/* The trajectory's "end" event: the result and what it cost (rc: the run's code). */
static void trace_end(const agent_ctx *a, int rc)
{
	const fixer_result *res = a->res;

	if (!a->traj)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "proven", res->proven);
	cJSON_AddBoolToObject(o, "env_failure", res->env_failure);
	cJSON_AddBoolToObject(o, "weak_evidence", res->weak_evidence);
	cJSON_AddBoolToObject(o, "harness_changed", res->harness_changed);
	cJSON_AddNumberToObject(o, "code", rc);
	if (res->failure)
		cJSON_AddStringToObject(o, "failure", res->failure);
	cJSON_AddNumberToObject(o, "model_calls", res->model_calls);
	cJSON_AddNumberToObject(o, "tokens_in", (double)res->tokens_in);
	cJSON_AddNumberToObject(o, "tokens_out", (double)res->tokens_out);
	if (res->priced)
		cJSON_AddNumberToObject(o, "cost_usd", (double)res->cost_micro / 1e6);
	cJSON_AddNumberToObject(o, "estimated_calls", res->estimated_calls);
	cJSON_AddNumberToObject(o, "iterations", res->iterations);
	if (res->diff)
		cJSON_AddStringToObject(o, "diff", res->diff);
	if (res->evidence)
		cJSON_AddStringToObject(o, "evidence", res->evidence);
	traj_event(a->traj, "end", o);
}

/* The process settings the Tester reads, each in its range. */
static int read_settings(const ap_config *cfg, int64_t *max_diff, bool *side_by_side)
{
	int rc;

	if ((rc = cfg_int(cfg, "AUTOPATCH_MAX_DIFF_LINES", 0, 1000000, max_diff)))
		return rc;
	return cfg_bool(cfg, "AUTOPATCH_TESTER_SIDE_BY_SIDE", side_by_side);
}

int fixer_check_settings(const ap_config *cfg)
{
	int64_t max_diff;
	bool side_by_side;

	return read_settings(cfg, &max_diff, &side_by_side);
}

/* The Tester for this run (a->tester), set up from the options and the configuration. */
static int tester_make(agent_ctx *a)
{
	const fixer_opts *opts = a->opts;
	int64_t max_diff;
	bool side_by_side;
	int rc;

	if ((rc = tester_new(&a->tester, opts->box, opts->tester_box, opts->tester_box_ud,
			     opts->test_cmd, a->traj)))
		return rc;
	if ((rc = read_settings(opts->cfg, &max_diff, &side_by_side)))
		return rc;
	tester_set_max_diff_lines(a->tester, max_diff);
	/* On: the Tester's own choice (two or more CPUs). */
	if (!side_by_side)
		tester_set_side_by_side(a->tester, false);
	tester_set_cancel(a->tester, a->tools.cancel);
	tester_set_setup(a->tester, opts->setup_cmd);
	tester_set_limits(a->tester, opts->setup_timeout_s, opts->repro_timeout_s,
			  opts->suite_timeout_s);
	tester_set_weak_evidence(a->tester, opts->allow_weak_evidence);
	tester_set_hang_issue(a->tester,
			      tester_issue_about_hang(opts->issue_title, opts->issue_body));
	if (opts->patch_check)
		tester_set_patch_check(a->tester, opts->patch_check, opts->patch_check_ud);
	tester_set_files_check(a->tester, opts->files_check, opts->files_check_ud,
			       opts->allow_harness_changes);
	tester_set_baseline_cache(a->tester, opts->baseline_get, opts->baseline_put,
				  opts->baseline_ud);
	return 0;
}

int fixer_run(const fixer_opts *opts, fixer_result *res)
{
	agent_ctx a = {0};
	stop_watch watch = {0};
	char *issue = NULL, *plan = NULL;
	int rc;
	memset(res, 0, sizeof(*res));
	a.opts = opts;
	a.res = res;
	a.stage = "planning";
	a.max_rounds = opts->max_iterations > 0 ? opts->max_iterations : 4;
	a.tools = (tool_ctx)TOOL_CTX_INIT;
	a.tools.box = opts->box;
	if (!opts->box || !opts->test_cmd || !opts->cfg || !opts->tester_box || !opts->files_check)
		return ap_error_set(AP_EINVAL, "fixer_run needs a box, a config, a test command, "
					       "the Tester's boxes and the files check");
	if (opts->trajectory_path && (rc = traj_open(&a.traj, opts->trajectory_path)))
		return rc;
	a.tools.traj = a.traj;
	stop_watch_start(&watch, opts->should_stop, opts->ud);
	if (watch.started)
		a.tools.cancel = &watch.flag;
	if ((rc = budget_init(&a.bud, opts->cfg, traj_millis(a.traj))))
		goto out;
	if ((rc = cost_plan_from_cfg(opts->cfg, &a.plan)))
		goto out;
	res->priced = a.plan.priced;
	if ((rc = llm_new(&a.model, opts->cfg)))
		goto out;
	llm_set_trajectory(a.model, a.traj);
	res->model = strdup(llm_describe(a.model));
	trace_start(&a);
	if ((rc = tester_make(&a)))
		goto out;
	if (!(issue = issue_text(opts))) {
		rc = AP_ENOMEM;
		goto out;
	}
	bool stop = false;
	if ((rc = prepare(&a, &stop)) || stop)
		goto out;
	if ((rc = planner_run(&a, issue, &plan)))
		goto out;
	rc = builder_run(&a, issue, plan);
out:
	stop_watch_stop(&watch);
	if (rc && !res->failure) {
		const char *msg = ap_error_last();
		res->failure = strdup(*msg ? msg : ap_error_name(rc));
	}
	trace_end(&a, rc);
	free(issue);
	free(plan);
	free(a.last_verdict);
	tester_free(a.tester);
	llm_free(a.model);
	budget_release(&a.bud);
	traj_free(a.traj);
	return rc;
}

void fixer_result_release(fixer_result *res)
{
	if (!res)
		return;
	free(res->diff);
	free(res->summary);
	free(res->cause);
	free(res->repro_test);
	free(res->evidence);
	free(res->files_changed);
	free(res->harness_list);
	free(res->file_kinds);
	free(res->failure);
	free(res->model);
	memset(res, 0, sizeof(*res));
}
