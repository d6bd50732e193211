/* SPDX-License-Identifier: MIT */
/* agents/agent.h - internal to agents/: the state one fixer run shares between the Planner
 * (planner.c), the Builder (builder.c) and the loop (fixer.c), and the helpers they share
 * (agent.c). */
#ifndef AP_AGENT_H
#define AP_AGENT_H

#include "agents/budget.h"
#include "agents/cost.h"
#include "agents/fixer_types.h"
#include "agents/llm.h"
#include "agents/tester.h"
#include "agents/tools.h"
#include "agents/traj.h"

#include <stdbool.h>

typedef struct agent_ctx {
	const fixer_opts *opts;
	fixer_result *res;
	llm *model;
	traj *traj;
	budget bud;
	cost_plan plan; /* the model's price (AUTOPATCH_PRICES) */
	tool_ctx tools;
	tester *tester;
	const char *stage; /* "planning", "building", "testing" */
	int round;	   /* Builder/Tester round, 1-based */
	int max_rounds;
	char *last_verdict; /* the Tester's last rejection reason */
} agent_ctx;

/* A progress line to the caller's callback (redacted) and the trajectory. */
void agent_progress(agent_ctx *a, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One model call under the budgets and the cancellation check; records usage and cost in res
 * and reports them to opts->usage. A call the model answered but whose answer could not be
 * used (malformed, over the cap) is charged the most it could have used. Returns 0, AP_EBUDGET
 * (res->failure names the budget and how far the job got), AP_ECANCELLED, or the provider's error.
 * The reply is added to conv on success (its calls stay readable in conv->msgs[conv->n - 1]). */
int agent_chat(agent_ctx *a, llm_conv *conv, enum tool_set set);

/* Run one tool call (repeat detection, trajectory, progress). Unless it was a valid `finish`,
 * its result is added to conv. *finished/fin report a valid finish; the caller then adds the
 * Tester's verdict as that call's result. Returns 0, AP_EBUDGET (repeat stop), AP_ECANCELLED
 * or an infrastructure error. */
int agent_tool(agent_ctx *a, llm_conv *conv, enum tool_set set, const llm_tool_call *call,
	       bool *finished, tool_finish *fin);

/* Record a budget stop in res->failure and return AP_EBUDGET. */
int agent_stop(agent_ctx *a, const char *what);

#endif
