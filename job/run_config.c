/* SPDX-License-Identifier: MIT */
/* job/run_config.c - a repository's settings into the setup phase's and the fixer's options,
 * once for `fix` and `serve` (run_config.h). */
#include "job/run_config.h"

int run_config_check_settings(const ap_config *cfg)
{
	int rc;

	if ((rc = fixer_check_settings(cfg)))
		return rc;
	return tester_boxes_check_settings(cfg);
}

const char *run_config_test_cmd(const run_config *rc)
{
	return rc->test_cmd ? rc->test_cmd : rc->rc->test;
}

const char *const *run_config_setup_steps(run_config *rc)
{
	if (!rc->setup_cmd)
		return (const char *const *)rc->rc->setup_steps;
	rc->one_step[0] = rc->setup_cmd;
	rc->one_step[1] = NULL;
	return rc->one_step;
}

/* The setup steps as one script (NULL: no setup). */
static const char *run_config_setup_script(const run_config *rc)
{
	return rc->setup_cmd ? rc->setup_cmd : rc->rc->setup;
}

void run_config_options(run_config *rc, env_setup_opts *eo, fixer_opts *fo)
{
	const repo_config *f = rc->rc;

	eo->cfg = rc->cfg;
	eo->box = rc->box;
	eo->image = rc->choice;
	eo->repo_id = rc->repo_id;
	eo->repo_dir = rc->repo_dir;
	eo->setup_steps = run_config_setup_steps(rc);
	eo->setup_script = run_config_setup_script(rc);
	eo->cache_key_globs = (const char *const *)f->cache_key;
	eo->had_network = f->network[0] != NULL;
	eo->agent_network = f->agent_network;
	eo->timeout_s = f->setup_timeout; /* 0: AUTOPATCH_SETUP_TIMEOUT_S */

	fo->cfg = rc->cfg;
	fo->box = rc->box;
	fo->test_cmd = run_config_test_cmd(rc);
	fo->max_iterations = rc->max_iterations ? rc->max_iterations : f->max_iterations;
	/* setup_timeout is env_setup's deadline, and the one of preparing each tree: */
	fo->setup_timeout_s = f->setup_timeout;
	fo->repro_timeout_s = f->repro_timeout;
	fo->suite_timeout_s = f->suite_timeout;
	fo->allow_weak_evidence = f->allow_weak_evidence;
	fo->allow_harness_changes = f->allow_harness_changes;
	fo->cost_cap_micro = rc->cost_cap_micro;
}

void run_config_tester(run_config *rc, const env_setup_result *er, const env_snapshot *snapshot,
		       sbx_engine *engine, const char *job_label, patch_policy *policy,
		       tester_boxes *tb, fixer_opts *fo)
{
	/* Setup ran (or was restored) before the fixer; the fixer only prepares other trees
	 * from it. */
	fo->setup_cmd = er->have_products ? ENV_PREPARE_TREE_CMD : NULL;
	/* What each file is, and whether the patch changes the test harness, is decided on the
	 * host against the repository's own commands, never the Builder's. */
	policy->test_cmd = run_config_test_cmd(rc);
	policy->setup_cmd = run_config_setup_script(rc);
	fo->patch_check = patch_policy_fixer_check;
	fo->patch_check_ud = policy;
	fo->files_check = patch_policy_fixer_files;
	fo->files_check_ud = policy;
	/* Every Tester run is a fresh box of the job's image, filled from the host-held
	 * snapshot of what setup made (taken before any model call). */
	*tb = (tester_boxes)TESTER_BOXES_INIT;
	tb->engine = engine;
	tb->image = rc->choice->image;
	tb->repo_dir = rc->repo_dir;
	tb->job_label = job_label;
	tb->snapshot = snapshot;
	fo->tester_box = tester_box_make;
	fo->tester_box_ud = tb;
	tester_boxes_start(tb, rc->cfg); /* spares, made while the baseline and Builder run */
	/* The pristine suite's results of an earlier job on the same inputs stand in for the
	 * baseline run. */
	baseline_cache_init(&rc->baseline, rc->cfg, rc->repo_id, rc->repo_dir, er->key,
			    rc->choice->image_id);
	fo->baseline_get = baseline_cache_get;
	fo->baseline_put = baseline_cache_put;
	fo->baseline_ud = &rc->baseline;
}
