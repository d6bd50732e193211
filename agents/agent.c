/* SPDX-License-Identifier: MIT */
/* agents/agent.c - the helpers the Planner and the Builder share (see agent.h): one model call
 * under the budgets, one tool call with repeat detection, progress lines and budget stops. */
#include "agents/agent.h"

#include "common/buf.h"
#include "common/err.h"
#include "common/redact.h"
#include "common/stats.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	/* The line goes into events, the comment and the trajectory: valid UTF-8 (it may quote
	 * a command's output or a test's name). */
	if (!ap_utf8_valid(clean, strlen(clean))) {
		line = ap_utf8_clean_dup(clean, strlen(clean));
		free(clean);
		if (!(clean = line))
			return;
	}
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

/* Add one call's usage to the budgets and the result, and tell the caller. */
static void charge(agent_ctx *a, int64_t tokens_in, int64_t tokens_out, bool estimated)
{
	int64_t before = a->res->cost_micro;

	budget_after_call(&a->bud, tokens_in, tokens_out);
	a->res->model_calls = (int)a->bud.calls;
	a->res->tokens_in = a->bud.tokens_in;
	a->res->tokens_out = a->bud.tokens_out;
	if (estimated)
		a->res->estimated_calls++;
	if (a->plan.priced)
		a->res->cost_micro =
		    cost_micro(&a->plan.price, a->bud.tokens_in, a->bud.tokens_out);
	ap_stat_add(AP_STAT_MODEL_CALLS, 1);
	ap_stat_add(AP_STAT_MODEL_CALLS_ESTIMATED, estimated ? 1 : 0);
	ap_stat_add(AP_STAT_MODEL_TOKENS_IN, tokens_in);
	ap_stat_add(AP_STAT_MODEL_TOKENS_OUT, tokens_out);
	ap_stat_add(AP_STAT_MODEL_COST_MICRO, a->res->cost_micro - before);
	if (a->opts->usage)
		a->opts->usage(a->opts->ud, a->res);
}

int agent_chat(agent_ctx *a, llm_conv *conv, enum tool_set set)
{
	const char *which = NULL;
	llm_reply r = LLM_REPLY_INIT;
	size_t ntools;
	const llm_tool *tools = tools_offered(set, &ntools);
	int64_t bound_in = 0, bound_out = 0;
	int rc;
	if (cancelled(a))
		return ap_error_set(AP_ECANCELLED, "the job was cancelled");
	if (budget_before_call(&a->bud, traj_millis(a->traj), &which)) {
		char what[64];
		snprintf(what, sizeof(what), "%s", which); /* a budget's short static name */
		return agent_stop(a, what);
	}
	if ((rc = llm_call_bound(a->model, conv, tools, ntools, &bound_in, &bound_out)))
		return rc;
	if (a->plan.priced && a->opts->cost_cap_micro > 0 &&
	    a->res->cost_micro + cost_micro(&a->plan.price, bound_in, bound_out) >
		a->opts->cost_cap_micro)
		return agent_stop(a, "cost");
	rc = llm_chat(a->model, conv, tools, ntools, &r);
	if (rc) {
		char *msg = strdup(ap_error_last());
		ap_stat_add(AP_STAT_MODEL_ERRORS, 1);
		/* An answer arrived (and was billed) but cannot be used: never free. */
		if (rc == AP_EINVAL || rc == AP_ETOOBIG)
			charge(a, bound_in, bound_out, true);
		free(a->res->failure);
		if (asprintf(&a->res->failure, "model call failed during %s: %s", a->stage,
			     msg ? msg : "") < 0)
			a->res->failure = NULL;
		free(msg);
		return rc;
	}
	charge(a, r.tokens_in, r.tokens_out, r.usage_estimated);
	rc = llm_conv_add_reply(conv, &r);
	llm_reply_release(&r);
	return rc;
}

/* A short, single-line rendering of the arguments for progress lines. */
static char *short_args(const char *args)
{
	char buf[100];
	size_t j = 0, n = args ? ap_utf8_cut(args, sizeof(buf) - 4) : 0;
	for (size_t i = 0; i < n; i++)
		buf[j++] = (args[i] == '\n' || args[i] == '\r' || args[i] == '\t') ? ' ' : args[i];
	if (args && args[n])
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
		agent_progress(a, a->stage, "%s: error: %.*s", call->name,
			       (int)ap_utf8_cut(clean, 200), clean);
	if (!*finished)
		rc = llm_conv_add_tool_result(conv, call->id, call->name, clean, is_error);
	free(clean);
out:
	free(out);
	free(sa);
	return rc;
}
