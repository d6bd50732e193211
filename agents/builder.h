/* SPDX-License-Identifier: MIT */
/* agents/builder.h - the Builder with the Tester: writes the repro test and the fix, runs them,
 * and asks the Tester (code, not a model) for a verdict at every `finish`. */
#ifndef AP_BUILDER_H
#define AP_BUILDER_H

#include "agents/agent.h"

/* Fills a->res (proven, diff, evidence...) and returns 0 when it reached a verdict; errors as
 * agent_chat. */
int builder_run(agent_ctx *a, const char *issue, const char *plan);

#endif
