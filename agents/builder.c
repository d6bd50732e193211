/* SPDX-License-Identifier: MIT */
/* agents/builder.c - the Builder: writes the reproduction test and the fix with the edit and
 * run tools, then calls finish; the Tester (code) decides, and a rejection goes back to the
 * Builder with the evidence, for at most max_rounds rounds. */
#include "agents/builder.h"

#include "agents/prompts.h"
#include "common/err.h"
#include "common/redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT_ONLY_REPLIES 3

static int accept(agent_ctx *a, const tool_finish *fin, tester_verdict *v)
{
	fixer_result *res = a->res;
	res->proven = true;
	res->weak_evidence = v->weak;
	res->harness_changed = v->harness;
	res->diff = v->diff;
	res->evidence = v->evidence;
	res->files_changed = v->files_changed;
	res->harness_list = v->harness_list;
	res->file_kinds = v->kinds;
	v->diff = v->evidence = v->files_changed = v->harness_list = v->kinds = NULL;
	res->summary = redact_str(fin->summary);
	if (asprintf(&res->repro_test, "%s%s%s%s (run with `%s`)", fin->test_path,
		     fin->test_id ? ", test `" : "", fin->test_id ? fin->test_id : "",
		     fin->test_id ? "`" : "", fin->test_command) < 0)
		res->repro_test = NULL;
	return res->summary && res->repro_test ? 0 : AP_ENOMEM;
}

/* The Builder called finish: run the Tester and answer the call with its verdict. Returns 1
 * when proven, 0 when the Builder should go on, < 0 to end (rounds exhausted sets failure). */
static int judge(agent_ctx *a, llm_conv *conv, const llm_tool_call *call, const tool_finish *fin)
{
	tester_verdict v = TESTER_VERDICT_INIT;
	int rc;
	a->stage = "testing";
	agent_progress(a, "testing", "round %d of %d: Tester checks %s", a->round, a->max_rounds,
		       fin->test_path);
	if ((rc = tester_check(a->tester, fin, &v)))
		goto out;
	a->res->iterations = a->round;
	if (v.proven) {
		agent_progress(a, "testing", "round %d: %s", a->round,
			       v.harness
				   ? "checks passed but NOT proven - the patch changes the "
				     "test harness (allow_harness_changes)"
				   : "proven - the reproduction test fails on pristine, passes "
				     "on the patch, no regressions");
		rc = accept(a, fin, &v);
		rc = rc ? rc : 1;
		goto out;
	}
	agent_progress(a, "testing", "round %d: rejected - %s", a->round, v.reason);
	free(a->last_verdict);
	a->last_verdict = strdup(v.reason);
	if (a->round >= a->max_rounds) {
		free(a->res->failure);
		if (asprintf(&a->res->failure,
			     "the Tester rejected the patch in all %d rounds; last verdict: %s",
			     a->max_rounds, v.reason) < 0)
			a->res->failure = NULL;
		free(a->res->diff);
		a->res->diff = v.diff;
		v.diff = NULL;
		rc = AP_EDENIED;
		goto out;
	}
	a->round++;
	budget_forget_repeats(&a->bud);
	char *msg = NULL;
	if (asprintf(&msg, "%s\n\nThis was round %d of %d. Fix the problem and call finish again.",
		     v.feedback, a->round - 1, a->max_rounds) < 0) {
		rc = AP_ENOMEM;
		goto out;
	}
	char *clean = redact_str(msg);
	free(msg);
	rc = clean ? llm_conv_add_tool_result(conv, call->id, call->name, clean, true) : AP_ENOMEM;
	free(clean);
	a->stage = "building";
out:
	tester_verdict_release(&v);
	return rc;
}

int builder_run(agent_ctx *a, const char *issue, const char *plan)
{
	llm_conv conv = LLM_CONV_INIT;
	char *first = NULL;
	int rc, text_only = 0;
	a->stage = "building";
	a->round = 1;
	agent_progress(a, "building", "Builder started");
	if (asprintf(
		&first,
		"%s\n\n## Plan from the Planner\n%s\n\n## The repository's test command\n%s\n\n"
		"Write the reproduction test first, then the fix, then call finish.",
		issue, plan, a->opts->test_cmd) < 0) {
		first = NULL;
		rc = AP_ENOMEM;
		goto out;
	}
	if ((rc = llm_conv_set_system(&conv, prompt_builder)) ||
	    (rc = llm_conv_add_user(&conv, first)))
		goto out;
	for (;;) {
		if ((rc = agent_chat(a, &conv, TOOLS_BUILDER)))
			goto out;
		size_t idx = conv.n - 1;
		size_t n = conv.msgs[idx].ncalls;
		if (n == 0) {
			if (++text_only >= MAX_TEXT_ONLY_REPLIES) {
				rc = agent_stop(a, "tool use (the Builder answered without tools "
						   "3 times in a row)");
				goto out;
			}
			if ((rc =
				 llm_conv_add_user(&conv, "Use the tools to write the reproduction "
							  "test and the fix, then call finish.")))
				goto out;
			continue;
		}
		text_only = 0;
		for (size_t i = 0; i < n; i++) {
			bool finished = false;
			tool_finish fin = {0};
			llm_tool_call call = conv.msgs[idx].calls[i];
			rc = agent_tool(a, &conv, TOOLS_BUILDER, &call, &finished, &fin);
			if (!rc && finished)
				rc = judge(a, &conv, &call, &fin);
			tool_finish_release(&fin);
			if (rc == 1) {
				rc = 0;
				goto out;
			}
			if (rc == AP_EDENIED) {
				rc = 0; /* a verdict: not proven */
				goto out;
			}
			if (rc)
				goto out;
		}
	}
out:
	free(first);
	llm_conv_release(&conv);
	return rc;
}
