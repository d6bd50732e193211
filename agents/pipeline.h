/* SPDX-License-Identifier: MIT */
/* agents/pipeline.h - one server job end to end: token, progress comment, checkout, sandbox,
 * fixer, push, draft PR. `serve` creates one pipeline and registers pipeline_run as the
 * workers' job_run_fn with the pipeline as ud. */
#ifndef AP_PIPELINE_H
#define AP_PIPELINE_H

#include "config.h"
#include "server/job.h"

typedef struct pipeline pipeline;

/* Prepare shared state (GitHub App client, sandbox engine, caches). Fails with a sentence that
 * says what to fix when a required setting is missing. cfg must outlive the pipeline. */
int pipeline_new(pipeline **out, const ap_config *cfg);
void pipeline_free(pipeline *p);

/* A job_run_fn (server/job.h); ud is the pipeline. Thread-safe: workers call it in parallel. */
int pipeline_run(const q_job *job, q_ctl *ctl, void *ud, char **result);

#endif
