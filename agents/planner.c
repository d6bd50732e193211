/* SPDX-License-Identifier: MIT */
/* agents/planner.c - the Planner: read-only tools, then a plan (cause, files, reproduction
 * test, fix outline). It is never offered a writing or running tool. */
#include "agents/planner.h"

#include "agents/prompts.h"
#include "common/err.h"

#include <stdlib.h>
#include <string.h>

#define PLANNER_MAX_ROUNDS 16

/* The "Cause:" line of the plan, else its first line. */
static char *cause_of(const char *plan)
{
	const char *p = strstr(plan, "Cause:");
	if (p)
		p += 6;
	else
		p = plan;
	while (*p == ' ')
		p++;
	size_t n = strcspn(p, "\n");
	return strndup(p, n);
}

int planner_run(agent_ctx *a, const char *issue, char **plan)
{
	llm_conv conv = LLM_CONV_INIT;
	int rc;
	*plan = NULL;
	a->stage = "planning";
	agent_progress(a, "planning", "Planner started (%s)", llm_describe(a->model));
	if ((rc = llm_conv_set_system(&conv, prompt_planner)) ||
	    (rc = llm_conv_add_user(&conv, issue)))
		goto out;
	for (int round = 0; round < PLANNER_MAX_ROUNDS; round++) {
		if ((rc = agent_chat(a, &conv, TOOLS_PLANNER)))
			goto out;
		const llm_msg *m = &conv.msgs[conv.n - 1];
		if (m->ncalls == 0) {
			if (m->text && *m->text) {
				*plan = strdup(m->text);
				rc = *plan ? 0 : AP_ENOMEM;
				goto out;
			}
			if ((rc = llm_conv_add_user(&conv, "Reply with the plan now, in the form "
							   "the instructions give.")))
				goto out;
			continue;
		}
		/* Copy: agent_tool appends to conv, which may move m. */
		size_t n = m->ncalls;
		size_t idx = conv.n - 1;
		for (size_t i = 0; i < n; i++) {
			bool finished = false;
			tool_finish fin = {0};
			llm_tool_call call = conv.msgs[idx].calls[i];
			rc = agent_tool(a, &conv, TOOLS_PLANNER, &call, &finished, &fin);
			tool_finish_release(&fin);
			if (rc)
				goto out;
		}
		if (round == PLANNER_MAX_ROUNDS - 4 &&
		    (rc = llm_conv_add_user(&conv, "You have explored enough: reply now with the "
						   "plan, without tool calls.")))
			goto out;
	}
	rc = agent_stop(a, "planner rounds (no plan after 16 rounds)");
out:
	if (*plan) {
		free(a->res->cause);
		a->res->cause = cause_of(*plan);
		agent_progress(a, "planning", "plan ready: %s", a->res->cause ? a->res->cause : "");
	}
	llm_conv_release(&conv);
	return rc;
}
