/* SPDX-License-Identifier: MIT */
/* agents/pipeline.c - placeholder until the end-to-end issue lands: every job fails honestly
 * with "pipeline not available". */
#include "pipeline.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

struct pipeline {
	const ap_config *cfg;
};

int pipeline_new(pipeline **out, const ap_config *cfg)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return AP_ENOMEM;
	(*out)->cfg = cfg;
	return 0;
}

void pipeline_free(pipeline *p)
{
	free(p);
}

int pipeline_run(const q_job *job, q_ctl *ctl, void *ud, char **result)
{
	(void)job;
	(void)ctl;
	(void)ud;
	*result = strdup("pipeline not available");
	return AP_EINVAL;
}
