/* SPDX-License-Identifier: MIT */
/* agents/planner.h - the Planner: reads the code through read-only tools and writes a plan. */
#ifndef AP_PLANNER_H
#define AP_PLANNER_H

#include "agents/agent.h"

/* Run the Planner on the issue text. On 0, *plan is a malloc'd plan the caller frees. Errors as
 * agent_chat. */
int planner_run(agent_ctx *a, const char *issue, char **plan);

#endif
