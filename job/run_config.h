/* SPDX-License-Identifier: MIT */
/* job/run_config.h - one place that turns a repository's settings (.github/autopatch.yml, a
 * repo_config) into the options of the setup phase and of the fixer, for both front ends:
 * `autopatch fix` (cli/fix.c) and the pipeline (`serve`, job/pipeline.c). Before it, each
 * copied the same settings field by field and the copies drifted (fix had no cost cap); a
 * setting added to repo_config is wired here once.
 *
 * The caller keeps what is its own: the issue text, callbacks and their ud, the trajectory
 * path, iteration feedback. Every pointer in the structures filled here is borrowed from the
 * inputs, which must outlive the setup phase and the fixer run. */
#ifndef AP_RUN_CONFIG_H
#define AP_RUN_CONFIG_H

#include "agents/fixer.h"
#include "job/baseline_cache.h"
#include "job/environment.h"
#include "job/patch_policy.h"
#include "job/repo_config.h"
#include "job/tester_box.h"

#include <stdint.h>

/* What a run is made from. The override fields are `fix`'s flags: zero or NULL means the
 * file's setting. */
typedef struct run_config {
	const ap_config *cfg;
	const repo_config *rc;
	const env_choice *choice; /* the image (env_choose_image) */
	sbx_box *box;		  /* the box setup and the Builder run in */
	const char *repo_id;	  /* "owner/name" or "local:/abs/path": the cache key's */
	const char *repo_dir;	  /* the host checkout: the policy's base, the Tester's /repo */
	const char *test_cmd;	  /* override of rc->test */
	const char *setup_cmd;	  /* override of the setup steps: one step, this script */
	int max_iterations;	  /* override of rc->max_iterations */
	int64_t cost_cap_micro;	  /* the budget the caller holds (0: none) */
	const char *one_step[2];  /* scratch for setup_cmd as a step list */
	baseline_cache baseline;  /* the pristine results kept across jobs (run_config_tester) */
} run_config;

#define RUN_CONFIG_INIT                                                                            \
	{                                                                                          \
		0                                                                                  \
	}

/* Check the process settings a run reads besides the repository's (the Tester's and its
 * spares'), for a front end to stop at start-up on a bad value: 0, or AP_EINVAL with a message
 * naming the setting. */
int run_config_check_settings(const ap_config *cfg);

/* The test command the run uses: the override, else the file's (or the detected one). */
const char *run_config_test_cmd(const run_config *rc);

/* The setup steps the run uses (NULL-terminated, maybe empty). run_config is not const: the
 * one-step list lives in it. */
const char *const *run_config_setup_steps(run_config *rc);

/* Fill the setup phase's options (everything but note/live/ud/cancel) and the fixer's
 * repository settings (test command, rounds, timeouts, evidence and harness opt-ins, cost
 * cap; cfg and box). eo and fo must have been initialised (ENV_SETUP_OPTS_INIT,
 * FIXER_OPTS_INIT); fields not named here are left as they are. */
void run_config_options(run_config *rc, env_setup_opts *eo, fixer_opts *fo);

/* After setup, before the fixer: wire the Tester. The policy (patch_policy_init done by the
 * caller) learns the repository's own test and setup commands; tb is reset and filled to make
 * fresh Tester boxes of the job's image from the snapshot, and starts making its spares
 * (tester_boxes_start: the caller calls tester_boxes_stop(tb) when the fixer run is over, on
 * every path); fo gets the policy's hooks, the Tester box maker, the tree-preparing command
 * when setup made products, and the baseline cache (rc->baseline, keyed by the checkout's
 * commit, er->key, the image id and the test command; job/baseline_cache.h). */
void run_config_tester(run_config *rc, const env_setup_result *er, const env_snapshot *snapshot,
		       sbx_engine *engine, const char *job_label, patch_policy *policy,
		       tester_boxes *tb, fixer_opts *fo);

#endif
