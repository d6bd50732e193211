/* SPDX-License-Identifier: MIT */
/* tests/job/test_run_config.c - every setting of .github/autopatch.yml reaches the setup
 * phase's and the fixer's options through the one function both front ends use, and fix's
 * flags override exactly the settings they name. */
#include "common/err.h"
#include "job/run_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const char full[] = "setup:\n"
			   "  - pip install -e .\n"
			   "  - make deps\n"
			   "test: python3 -m pytest -q tests\n"
			   "max_iterations: 3\n"
			   "network:\n"
			   "  - pypi.org:443\n"
			   "agent_network: true\n"
			   "cache_key: [\"requirements*.txt\"]\n"
			   "setup_timeout: 61\n"
			   "repro_timeout: 7\n"
			   "suite_timeout: 99\n"
			   "allow_weak_evidence: true\n"
			   "allow_harness_changes: true\n";

static repo_config *parse(const char *text)
{
	repo_config *c = NULL;

	if (repo_config_parse(&c, text, strlen(text)) != 0)
		fail_msg("parse failed: %s", ap_error_last());
	return c;
}

static run_config in_for(repo_config *c, env_choice *choice)
{
	run_config rc = RUN_CONFIG_INIT;

	rc.rc = c;
	rc.choice = choice;
	rc.box = (sbx_box *)0x1; /* never dereferenced: only passed on */
	rc.repo_id = "owner/name";
	rc.repo_dir = "/srv/checkout";
	rc.cost_cap_micro = 1234;
	return rc;
}

static void test_every_setting_reaches_both(void **state)
{
	repo_config *c = parse(full);
	env_choice choice = {0};
	run_config rc = in_for(c, &choice);
	env_setup_opts eo = ENV_SETUP_OPTS_INIT;
	fixer_opts fo = FIXER_OPTS_INIT;

	(void)state;
	run_config_options(&rc, &eo, &fo);
	assert_ptr_equal(eo.box, rc.box);
	assert_ptr_equal(eo.image, &choice);
	assert_string_equal(eo.repo_id, "owner/name");
	assert_string_equal(eo.repo_dir, "/srv/checkout");
	assert_string_equal(eo.setup_steps[0], "pip install -e .");
	assert_string_equal(eo.setup_steps[1], "make deps");
	assert_null(eo.setup_steps[2]);
	assert_ptr_equal(eo.setup_script, c->setup);
	assert_string_equal(eo.cache_key_globs[0], "requirements*.txt");
	assert_true(eo.had_network);
	assert_true(eo.agent_network);
	assert_int_equal(eo.timeout_s, 61);

	assert_ptr_equal(fo.box, rc.box);
	assert_string_equal(fo.test_cmd, "python3 -m pytest -q tests");
	assert_int_equal(fo.max_iterations, 3);
	assert_int_equal(fo.setup_timeout_s, 61);
	assert_int_equal(fo.repro_timeout_s, 7);
	assert_int_equal(fo.suite_timeout_s, 99);
	assert_true(fo.allow_weak_evidence);
	assert_true(fo.allow_harness_changes);
	assert_int_equal(fo.cost_cap_micro, 1234);
	repo_config_free(c);
}

static void test_flags_override_only_their_settings(void **state)
{
	repo_config *c = parse(full);
	env_choice choice = {0};
	run_config rc = in_for(c, &choice);
	env_setup_opts eo = ENV_SETUP_OPTS_INIT;
	fixer_opts fo = FIXER_OPTS_INIT;

	(void)state;
	rc.test_cmd = "make check";
	rc.setup_cmd = "./configure";
	rc.max_iterations = 9;
	run_config_options(&rc, &eo, &fo);
	assert_string_equal(fo.test_cmd, "make check");
	assert_string_equal(run_config_test_cmd(&rc), "make check");
	assert_string_equal(eo.setup_steps[0], "./configure");
	assert_null(eo.setup_steps[1]);
	assert_string_equal(eo.setup_script, "./configure");
	assert_int_equal(fo.max_iterations, 9);
	/* the rest is still the file's */
	assert_int_equal(fo.suite_timeout_s, 99);
	assert_true(eo.agent_network);
	repo_config_free(c);
}

static void test_tester_wiring(void **state)
{
	repo_config *c = parse(full);
	env_choice choice = {0};
	run_config rc = in_for(c, &choice);
	env_setup_opts eo = ENV_SETUP_OPTS_INIT;
	fixer_opts fo = FIXER_OPTS_INIT;
	env_setup_result er = {0};
	patch_policy policy = {0};
	tester_boxes tb = {.made = 5};

	(void)state;
	snprintf(choice.image, sizeof(choice.image), "%s", "autopatch-sandbox:python-x");
	run_config_options(&rc, &eo, &fo);
	run_config_tester(&rc, &er, NULL, (sbx_engine *)0x2, "job-7", &policy, &tb, &fo);
	assert_null(fo.setup_cmd); /* setup made nothing */
	assert_string_equal(policy.test_cmd, "python3 -m pytest -q tests");
	assert_ptr_equal(policy.setup_cmd, c->setup);
	assert_ptr_equal(fo.patch_check_ud, &policy);
	assert_ptr_equal(fo.files_check_ud, &policy);
	assert_non_null(fo.patch_check);
	assert_non_null(fo.files_check);
	assert_ptr_equal(fo.tester_box_ud, &tb);
	assert_int_equal(tb.made, 0); /* a fresh count for this run */
	assert_string_equal(tb.image, "autopatch-sandbox:python-x");
	assert_string_equal(tb.repo_dir, "/srv/checkout");
	assert_string_equal(tb.job_label, "job-7");

	er.have_products = true;
	run_config_tester(&rc, &er, NULL, (sbx_engine *)0x2, "job-7", &policy, &tb, &fo);
	assert_string_equal(fo.setup_cmd, ENV_PREPARE_TREE_CMD);
	repo_config_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_setting_reaches_both),
	    cmocka_unit_test(test_flags_override_only_their_settings),
	    cmocka_unit_test(test_tester_wiring),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
