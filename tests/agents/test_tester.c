/* SPDX-License-Identifier: MIT */
/* tests/agents/test_tester.c - the Tester's per-test comparison and budgets (the parts that
 * need no box; the box parts run in tests/e2e/test_fix.py). Test command detection:
 * test_testcmd.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/budget.h"
#include "agents/tester.h"
#include "common/err.h"

static const char PRISTINE_OUT[] =
    ".......F\n"
    "=========================== short test summary info ============================\n"
    "PASSED tests/test_calc.py::test_total\n"
    "PASSED tests/test_calc.py::test_mean\n"
    "PASSED tests/test_calc.py::test_param[a - b]\n"
    "PASSED tests/test_calc.py::test_gone\n"
    "FAILED tests/test_calc.py::test_flaky - assert 1 == 2\n"
    "SKIPPED [1] tests/test_calc.py:30: no network\n"
    "7 passed, 1 failed in 0.05s\n";

static const char PATCHED_OUT[] =
    "PASSED tests/test_calc.py::test_total\n"
    "FAILED tests/test_calc.py::test_mean - AssertionError: assert 2 == 2.5\n"
    "PASSED tests/test_calc.py::test_flaky\n"
    "PASSED tests/test_calc.py::test_param[a - b]\n"
    "ERROR tests/test_new.py::test_x - ImportError\n";

static void test_parse_pytest_ra(void **state)
{
	(void)state;
	test_outcomes o;
	assert_int_equal(tester_parse_pytest(PRISTINE_OUT, &o), 0);
	assert_int_equal(o.n, 5);
	assert_string_equal(o.names[0], "tests/test_calc.py::test_total");
	assert_int_equal(o.status[0], 'P');
	/* " - " inside a parametrised id is cut like pytest's message separator; the id stays
	 * stable between runs, which is what the comparison needs */
	assert_string_equal(o.names[4], "tests/test_calc.py::test_flaky");
	assert_int_equal(o.status[4], 'F');
	test_outcomes_release(&o);
	assert_int_equal(tester_parse_pytest("1 passed\nno summary\n", &o), 0);
	assert_int_equal(o.n, 0);
	test_outcomes_release(&o);
}

static void test_regressions(void **state)
{
	(void)state;
	test_outcomes before, after;
	tester_parse_pytest(PRISTINE_OUT, &before);
	tester_parse_pytest(PATCHED_OUT, &after);
	char *r = tester_regressions(&before, &after);
	assert_non_null(r);
	assert_non_null(strstr(r, "tests/test_calc.py::test_mean (failed)"));
	assert_non_null(strstr(r, "tests/test_calc.py::test_gone (missing after the patch)"));
	/* failed before, passes now: fine; new erroring test: not a regression of an old one */
	assert_null(strstr(r, "test_flaky"));
	assert_null(strstr(r, "test_x"));
	assert_null(strstr(r, "test_total"));
	free(r);
	/* identical runs: nothing */
	assert_null(tester_regressions(&before, &before));
	test_outcomes_release(&before);
	test_outcomes_release(&after);
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

static void test_parse_junit(void **state)
{
	(void)state;
	const char *xml =
	    "<!-- autopatch: ./target/surefire-reports/TEST-a.xml -->\n"
	    "<?xml version=\"1.0\"?><testsuites><testsuite name=\"pytest\">"
	    "<testcase classname=\"tests.test_calc\" name=\"test_total\" time=\"0.001\" />"
	    "<testcase classname=\"tests.test_calc\" name=\"test_mean\"><failure message=\"x\">"
	    "assert 2 == 2.5</failure></testcase>"
	    "<testcase name='test_io' classname='pkg.IoTest'><error type=\"E\"/></testcase>"
	    "<testcase classname=\"c\" name=\"test_skip\"><skipped/></testcase>"
	    "<testcase\n classname=\"c\"\n name=\"test_ok\"></testcase>"
	    "<testcases-not-a-case name=\"zzz\"/>"
	    "</testsuite></testsuites>\n";
	test_outcomes o;
	assert_int_equal(tester_parse_junit(xml, &o), 0);
	assert_int_equal(o.n, 4);
	assert_string_equal(o.names[0], "tests.test_calc::test_total");
	assert_int_equal(o.status[0], 'P');
	assert_string_equal(o.names[1], "tests.test_calc::test_mean");
	assert_int_equal(o.status[1], 'F');
	assert_string_equal(o.names[2], "pkg.IoTest::test_io");
	assert_int_equal(o.status[2], 'E');
	assert_string_equal(o.names[3], "c::test_ok");
	assert_int_equal(o.status[3], 'P');
	test_outcomes_release(&o);
	/* truncated input never reads past the end */
	assert_int_equal(tester_parse_junit("<testcase classname=\"a", &o), 0);
	assert_int_equal(o.n, 0);
	assert_int_equal(tester_parse_junit("<testcase name=\"a\"><failure>", &o), 0);
	assert_int_equal(o.n, 1);
	assert_int_equal(o.status[0], 'F');
	test_outcomes_release(&o);
}

static void test_suite_cmd(void **state)
{
	(void)state;
	char *s = tester_suite_cmd("python3 -m pytest -q");
	assert_string_equal(s, "python3 -m pytest -q -rA");
	free(s);
	s = tester_suite_cmd("pytest -rA tests");
	assert_string_equal(s, "pytest -rA tests");
	free(s);
	s = tester_suite_cmd("make test");
	assert_string_equal(s, "make test");
	free(s);
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
	    cmocka_unit_test(test_parse_pytest_ra),    cmocka_unit_test(test_regressions),
	    cmocka_unit_test(test_suite_cmd),	       cmocka_unit_test(test_parse_junit),
	    cmocka_unit_test(test_diff_changed_lines), cmocka_unit_test(test_budget_limits),
	    cmocka_unit_test(test_repeat_detector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
