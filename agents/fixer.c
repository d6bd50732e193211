/* SPDX-License-Identifier: MIT */
/* agents/fixer.c - one Planner -> Builder -> Tester run (see fixer.h): budgets, cancellation,
 * progress, trajectory, and the shared helpers of roles.h. */
#include "fixer.h"
#include "err.h"
#include "log.h"
#include "redact.h"
#include "roles.h"

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
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += STOP_POLL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
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

void agent_progress(agent_ctx *a, const char *stage, const char *fmt, ...)
{
	va_list ap;
	char *line = NULL, *clean = NULL;
	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line)
		return;
	clean = redact_str(line);
	free(line);
	if (!clean)
		return;
	/* One step, one line. */
	for (char *c = clean; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	if (a->opts->progress)
		a->opts->progress(a->opts->ud, stage, clean);
	if (a->traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "stage", stage);
		cJSON_AddStringToObject(o, "line", clean);
		traj_event(a->traj, "progress", o);
	}
	free(clean);
}

int agent_stop(agent_ctx *a, const char *what)
{
	char *prog = budget_progress(&a->bud, traj_millis(a->traj));
	free(a->res->failure);
	if (asprintf(&a->res->failure,
		     "stopped: %s budget exhausted during %s (round %d of %d; %s)%s%s", what,
		     a->stage, a->round ? a->round : 1, a->max_rounds, prog ? prog : "",
		     a->last_verdict ? "; last Tester verdict: " : "",
		     a->last_verdict ? a->last_verdict : "") < 0)
		a->res->failure = NULL;
	free(prog);
	if (a->traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "budget", what);
		cJSON_AddStringToObject(o, "failure", a->res->failure ? a->res->failure : "");
		traj_event(a->traj, "budget", o);
	}
	agent_progress(a, a->stage, "%s", a->res->failure ? a->res->failure : "budget exhausted");
	return AP_EBUDGET;
}

static bool cancelled(agent_ctx *a)
{
	return (a->tools.cancel && *a->tools.cancel) ||
	       (a->opts->should_stop && a->opts->should_stop(a->opts->ud));
}

int agent_chat(agent_ctx *a, llm_conv *conv, enum tool_set set)
{
	const char *which = NULL;
	llm_reply r = LLM_REPLY_INIT;
	size_t ntools;
	const llm_tool *tools = tools_offered(set, &ntools);
	int rc;
	if (cancelled(a))
		return ap_error_set(AP_ECANCELLED, "the job was cancelled");
	if (budget_before_call(&a->bud, traj_millis(a->traj), &which)) {
		char what[64];
		snprintf(what, sizeof(what), "%s", which);
		return agent_stop(a, what);
	}
	rc = llm_chat(a->model, conv, tools, ntools, &r);
	if (rc) {
		char *msg = strdup(ap_error_last());
		free(a->res->failure);
		if (asprintf(&a->res->failure, "model call failed during %s: %s", a->stage,
			     msg ? msg : "") < 0)
			a->res->failure = NULL;
		free(msg);
		return rc;
	}
	budget_after_call(&a->bud, r.tokens_in, r.tokens_out);
	a->res->model_calls = (int)a->bud.calls;
	a->res->tokens_in = a->bud.tokens_in;
	a->res->tokens_out = a->bud.tokens_out;
	rc = llm_conv_add_reply(conv, &r);
	llm_reply_release(&r);
	return rc;
}

/* A short, single-line rendering of the arguments for progress lines. */
static char *short_args(const char *args)
{
	char buf[100];
	size_t j = 0;
	for (size_t i = 0; args && args[i] && j + 4 < sizeof(buf); i++)
		buf[j++] = (args[i] == '\n' || args[i] == '\r' || args[i] == '\t') ? ' ' : args[i];
	if (args && strlen(args) > j)
		buf[j++] = '.', buf[j++] = '.', buf[j++] = '.';
	buf[j] = '\0';
	return strdup(buf);
}

int agent_tool(agent_ctx *a, llm_conv *conv, enum tool_set set, const llm_tool_call *call,
	       bool *finished, tool_finish *fin)
{
	char *out = NULL, *sa = NULL;
	tool_ctx tctx;
	bool is_error = false;
	int64_t t0 = traj_millis(a->traj);
	int rc = 0;
	*finished = false;
	if (cancelled(a))
		return ap_error_set(AP_ECANCELLED, "the job was cancelled");
	sa = short_args(call->arguments);
	agent_progress(a, a->stage, "%s %s", call->name, sa ? sa : "");
	switch (budget_repeat(&a->bud, call->name, call->arguments)) {
	case BUDGET_STOP:
		rc = agent_stop(a, "repeated-call");
		goto out;
	case BUDGET_NUDGE:
		is_error = true;
		if (asprintf(&out,
			     "You have made this exact %s call %lld times and the workspace has "
			     "not changed, so the result will not change. Do something different; "
			     "repeating it again stops the job.",
			     call->name, (long long)a->bud.repeat_limit) < 0)
			out = NULL;
		break;
	case BUDGET_OK:
		/* The Planner reads the read-only /repo mount: even a bug in a tool cannot let
		 * it change anything. The Builder works in the writable workspace. */
		tctx = a->tools;
		if (set == TOOLS_PLANNER)
			tctx.root = "/repo";
		rc = tools_call(&tctx, set, call->name, call->arguments, &out, &is_error, finished,
				fin);
		if (rc)
			goto out;
		break;
	}
	if (!out) {
		rc = AP_ENOMEM;
		goto out;
	}
	if (!is_error &&
	    (strcmp(call->name, "write_file") == 0 || strcmp(call->name, "replace_in_file") == 0 ||
	     strcmp(call->name, "run") == 0))
		budget_forget_repeats(&a->bud);
	char *clean = redact_str(out);
	if (!clean) {
		rc = AP_ENOMEM;
		goto out;
	}
	if (a->traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "id", call->id);
		cJSON_AddStringToObject(o, "name", call->name);
		cJSON_AddStringToObject(o, "arguments", call->arguments ? call->arguments : "");
		cJSON_AddBoolToObject(o, "is_error", is_error);
		cJSON_AddNumberToObject(o, "millis", (double)(traj_millis(a->traj) - t0));
		cJSON_AddStringToObject(o, "result", clean);
		traj_event(a->traj, "tool_result", o);
	}
	if (is_error)
		agent_progress(a, a->stage, "%s: error: %.200s", call->name, clean);
	if (!*finished)
		rc = llm_conv_add_tool_result(conv, call->id, call->name, clean, is_error);
	free(clean);
out:
	free(out);
	free(sa);
	return rc;
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

static int setup(agent_ctx *a)
{
	const char *argv[] = {"sh", "-c", a->opts->setup_cmd, NULL};
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result r = SBX_RESULT_INIT;
	cmd.argv = argv;
	cmd.timeout_s = 900;
	cmd.cancel = a->tools.cancel;
	int rc = sbx_exec(a->opts->box, &cmd, &r);
	if (!rc)
		agent_progress(a, "planning", "setup command exited with %d", r.exit_code);
	sbx_result_release(&r);
	return rc;
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
	if (!opts->box || !opts->test_cmd || !opts->cfg)
		return ap_error_set(AP_EINVAL,
				    "fixer_run needs a box, a config and a test command");
	if (opts->trajectory_path && (rc = traj_open(&a.traj, opts->trajectory_path)))
		return rc;
	stop_watch_start(&watch, opts->should_stop, opts->ud);
	if (watch.started)
		a.tools.cancel = &watch.flag;
	if ((rc = budget_init(&a.bud, opts->cfg, traj_millis(a.traj))))
		goto out;
	if ((rc = llm_new(&a.model, opts->cfg)))
		goto out;
	llm_set_trajectory(a.model, a.traj);
	res->model = strdup(llm_describe(a.model));
	if (a.traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "model", llm_describe(a.model));
		cJSON_AddStringToObject(o, "issue_title",
					opts->issue_title ? opts->issue_title : "");
		cJSON_AddStringToObject(o, "test_command", opts->test_cmd);
		cJSON_AddNumberToObject(o, "max_iterations", a.max_rounds);
		cJSON_AddNumberToObject(o, "max_model_calls", (double)a.bud.max_calls);
		cJSON_AddNumberToObject(o, "max_tokens", (double)a.bud.max_tokens);
		cJSON_AddNumberToObject(o, "max_wall_seconds", (double)a.bud.max_wall_s);
		traj_event(a.traj, "start", o);
	}
	if ((rc = tester_new(&a.tester, opts->box, opts->test_cmd, a.traj)))
		goto out;
	int64_t max_diff;
	if ((rc = cfg_get_int(opts->cfg, "AUTOPATCH_MAX_DIFF_LINES", 500, 0, 1000000, &max_diff)))
		goto out;
	tester_set_max_diff_lines(a.tester, max_diff);
	tester_set_cancel(a.tester, a.tools.cancel);
	if (!(issue = issue_text(opts))) {
		rc = AP_ENOMEM;
		goto out;
	}
	if (opts->setup_cmd && *opts->setup_cmd && (rc = setup(&a)))
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
	if (a.traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "proven", res->proven);
		cJSON_AddNumberToObject(o, "code", rc);
		if (res->failure)
			cJSON_AddStringToObject(o, "failure", res->failure);
		cJSON_AddNumberToObject(o, "model_calls", res->model_calls);
		cJSON_AddNumberToObject(o, "tokens_in", (double)res->tokens_in);
		cJSON_AddNumberToObject(o, "tokens_out", (double)res->tokens_out);
		cJSON_AddNumberToObject(o, "iterations", res->iterations);
		traj_event(a.traj, "end", o);
	}
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
	free(res->failure);
	free(res->model);
	memset(res, 0, sizeof(*res));
}
