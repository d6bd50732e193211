/* SPDX-License-Identifier: MIT */
/* tests/agents/test_tester.c - the Tester's per-test comparison, hang issues and budgets (the
 * parts that need no box; the box parts run in tests/e2e/test_fix.py and test_proof.py). The
 * parsers are tests/agents/test_report.c; test command detection: test_testcmd.c. */
#include "agents/budget.h"
#include "agents/tester.h"
#include "common/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

/* Reports built by hand: id, outcome, message. */
static void add(report *r, const char *id, enum report_outcome o, const char *msg)
{
	assert_int_equal(report_add(r, id, strlen(id), o, msg, msg ? strlen(msg) : 0, false), 0);
}

static void test_regressions(void **state)
{
	(void)state;
	report before = REPORT_INIT, after = REPORT_INIT;
	size_t count = 0;
	add(&before, "tests.test_calc::test_total", REPORT_PASSED, NULL);
	add(&before, "tests.test_calc::test_mean", REPORT_PASSED, NULL);
	add(&before, "tests.test_calc::test_gone", REPORT_PASSED, NULL);
	add(&before, "tests.test_calc::test_skipme", REPORT_PASSED, NULL);
	add(&before, "tests.test_calc::test_flaky", REPORT_FAILED, "assert 1 == 2");
	add(&before, "tests.test_calc::test_was_skipped", REPORT_SKIPPED, "no network");
	add(&after, "tests.test_calc::test_total", REPORT_PASSED, NULL);
	add(&after, "tests.test_calc::test_mean", REPORT_FAILED,
	    "AssertionError: assert 2 == 2.5\nmore lines");
	add(&after, "tests.test_calc::test_flaky", REPORT_FAILED, "assert 1 == 2");
	add(&after, "tests.test_calc::test_skipme", REPORT_SKIPPED, "skipped now");
	add(&after, "tests.test_new::test_x", REPORT_ERROR, "ImportError");
	report_finish(&before);
	report_finish(&after);
	char *r = tester_regressions(&before, &after, 10, &count);
	assert_non_null(r);
	assert_int_equal(count, 3);
	assert_non_null(
	    strstr(r, "`tests.test_calc::test_mean`: failed: AssertionError: assert 2 == 2.5\n"));
	assert_non_null(strstr(r, "`tests.test_calc::test_gone`: disappeared"));
	assert_non_null(strstr(r, "`tests.test_calc::test_skipme`: now skipped"));
	/* failed before and still fails: not a regression; new erroring test: not one of the
	 * old ones; skipped before: nothing to keep */
	assert_null(strstr(r, "test_flaky"));
	assert_null(strstr(r, "test_x"));
	assert_null(strstr(r, "test_total"));
	assert_null(strstr(r, "test_was_skipped"));
	free(r);
	/* the list is capped, the count is not */
	r = tester_regressions(&before, &after, 1, &count);
	assert_int_equal(count, 3);
	assert_non_null(strstr(r, "and 2 more"));
	free(r);
	/* identical runs: nothing */
	assert_null(tester_regressions(&before, &before, 10, &count));
	assert_int_equal(count, 0);
	report_release(&before);
	report_release(&after);
}

/* 20,000 tests, one regression: named, and fast (sorted lookups, not a quadratic scan). */
static void test_regressions_large(void **state)
{
	(void)state;
	report before = REPORT_INIT, after = REPORT_INIT;
	char id[64];
	size_t count = 0;
	for (int i = 0; i < 20000; i++) {
		snprintf(id, sizeof(id), "tests.test_gen::test_n[%d]", i);
		add(&before, id, REPORT_PASSED, NULL);
		add(&after, id, i == 12345 ? REPORT_FAILED : REPORT_PASSED,
		    i == 12345 ? "assert 24691 == 24690" : NULL);
	}
	clock_t c0 = clock();
	report_finish(&before);
	report_finish(&after);
	char *r = tester_regressions(&before, &after, 30, &count);
	double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
	assert_int_equal(count, 1);
	assert_non_null(
	    strstr(r, "`tests.test_gen::test_n[12345]`: failed: assert 24691 == 24690"));
	assert_true(secs < 2.0);
	free(r);
	report_release(&before);
	report_release(&after);
}

static void test_issue_about_hang(void **state)
{
	(void)state;
	assert_true(tester_issue_about_hang("parse() hangs on an empty file", ""));
	assert_true(tester_issue_about_hang("Bug", "the loop never terminates when n is 0"));
	assert_true(tester_issue_about_hang("Deadlock in the pool", NULL));
	assert_true(tester_issue_about_hang("x", "It is an INFINITE LOOP."));
	assert_true(tester_issue_about_hang("request times out", ""));
	assert_true(tester_issue_about_hang("UI freezes", ""));
	/* whole words only, and ordinary bugs are not hangs */
	assert_false(tester_issue_about_hang("changelog typo", "the hangar door count is wrong"));
	assert_false(tester_issue_about_hang("mean([]) raises ZeroDivisionError", "crash"));
	assert_false(tester_issue_about_hang("Timeout option ignored", "TimeoutError is raised"));
	assert_false(tester_issue_about_hang(NULL, NULL));
}

static void test_diff_changed_lines(void **state)
{
	(void)state;
	const char *diff = "diff --git a/calc.py b/calc.py\n"
			   "index d18b18e..ab5c996 100644\n"
			   "--- a/calc.py\n"
			   "+++ b/calc.py\n"
			   "@@ -15,6 +15,8 @@ def total(values):\n"
			   " \n"
			   "-    return 1\n"
			   "+    if not values:\n"
			   "+        return 0.0\n"
			   "diff --git a/t.py b/t.py\n"
			   "new file mode 100644\n"
			   "--- /dev/null\n"
			   "+++ b/t.py\n"
			   "@@ -0,0 +1,2 @@\n"
			   "+import calc\n"
			   "+--- not a header inside a hunk\n";
	assert_int_equal(tester_diff_changed_lines(diff), 5);
	assert_int_equal(tester_diff_changed_lines(""), 0);
}

static void test_budget_limits(void **state)
{
	(void)state;
	ap_config *cfg;
	budget b;
	const char *which = NULL;
	assert_int_equal(cfg_new_empty(&cfg), 0);
	cfg_set(cfg, "AUTOPATCH_MAX_MODEL_CALLS", "2");
	cfg_set(cfg, "AUTOPATCH_MAX_TOKENS", "1000");
	cfg_set(cfg, "AUTOPATCH_MAX_WALL_SECONDS", "10");
	assert_int_equal(budget_init(&b, cfg, 0), 0);
	assert_int_equal(budget_before_call(&b, 0, &which), 0);
	budget_after_call(&b, 100, 10);
	assert_int_equal(budget_before_call(&b, 9999, &which), 0);
	assert_int_equal(budget_before_call(&b, 10000, &which), AP_EBUDGET);
	assert_string_equal(which, "wall-time");
	budget_after_call(&b, 800, 100);
	assert_int_equal(budget_before_call(&b, 0, &which), AP_EBUDGET);
	assert_string_equal(which, "model-call");
	b.max_calls = 100;
	assert_int_equal(budget_before_call(&b, 0, &which), AP_EBUDGET);
	assert_string_equal(which, "token");
	char *p = budget_progress(&b, 4000);
	assert_string_equal(p, "2 of 100 model calls, 1010 of 1000 tokens, 4 of 10 s");
	free(p);
	budget_release(&b);
	cfg_set(cfg, "AUTOPATCH_MAX_MODEL_CALLS", "lots");
	assert_int_equal(budget_init(&b, cfg, 0), AP_EINVAL);
	cfg_free(cfg);
}

static void test_repeat_detector(void **state)
{
	(void)state;
	ap_config *cfg;
	budget b;
	assert_int_equal(cfg_new_empty(&cfg), 0);
	assert_int_equal(budget_init(&b, cfg, 0), 0);
	assert_int_equal(budget_repeat(&b, "read_file", "{\"path\":\"a\"}"), BUDGET_OK);
	assert_int_equal(budget_repeat(&b, "read_file", "{\"path\":\"b\"}"), BUDGET_OK);
	assert_int_equal(budget_repeat(&b, "read_file", "{\"path\":\"a\"}"), BUDGET_OK);
	assert_int_equal(budget_repeat(&b, "read_file", "{\"path\":\"a\"}"), BUDGET_NUDGE);
	assert_int_equal(budget_repeat(&b, "read_file", "{\"path\":\"a\"}"), BUDGET_STOP);
	/* a change to the workspace makes the same call meaningful again */
	budget_forget_repeats(&b);
	assert_int_equal(budget_repeat(&b, "read_file", "{\"path\":\"a\"}"), BUDGET_OK);
	assert_int_equal(budget_repeat(&b, "run", "{\"path\":\"a\"}"), BUDGET_OK);
	budget_release(&b);
	cfg_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_regressions),	     cmocka_unit_test(test_regressions_large),
	    cmocka_unit_test(test_issue_about_hang), cmocka_unit_test(test_diff_changed_lines),
	    cmocka_unit_test(test_budget_limits),    cmocka_unit_test(test_repeat_detector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
