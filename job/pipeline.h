/* SPDX-License-Identifier: MIT */
/* job/pipeline.h - one server job end to end: token, progress comment, checkout, sandbox,
 * fixer, push, draft PR. `serve` creates one pipeline and registers pipeline_run as the
 * workers' job_run_fn with the pipeline as ud. */
#ifndef AP_PIPELINE_H
#define AP_PIPELINE_H

#include "common/config.h"
#include "job/job.h"

typedef struct pipeline pipeline;

/* Prepare shared state (GitHub App client, sandbox engine, caches). Fails with a sentence that
 * says what to fix when a required setting is missing. cfg must outlive the pipeline. */
int pipeline_new(pipeline **out, const ap_config *cfg);

/* The same for an App registered while the server runs (APP_ID and the key are not in cfg):
 * app_id and pem (the private key's PEM text) come from the registration and are copied. */
int pipeline_new_as(pipeline **out, const ap_config *cfg, const char *app_id, const char *pem);

/* A new registration replaced the App: jobs authenticate as app_id with pem from their next
 * GitHub call on (github/app.h, gh_app_set_identity). Thread-safe while jobs run; on error the
 * pipeline keeps the App it had. */
int pipeline_set_app(pipeline *p, const char *app_id, const char *pem);

void pipeline_free(pipeline *p);

/* A job_run_fn (job/job.h); ud is the pipeline. Thread-safe: workers call it in parallel.
 * Errors that may pass (GitHub or the model unreachable, timeouts, rate limits) end in
 * JOB_RETRY (with the rate limit's reset as not_before), a stop in JOB_CANCELLED, the rest in
 * JOB_FAILED; the summary is redacted. */
void pipeline_run(const job_info *job, const job_ctl *ctl, void *ud, job_outcome *out);

#endif
