/* SPDX-License-Identifier: MIT */
/* tests/agents/test_report.c - structured test results: the JUnit, go -json and cargo parsers
 * on reports shaped like the ones each runner writes, the classification of runs, runner
 * instrumentation and the read-back framing. */
#include "agents/report.h"
#include "agents/tester.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const report_test *find(report *r, const char *id)
{
	report_finish(r);
	return report_find(r, id);
}

/* What pytest 7 writes with --junitxml (a run with a pass, a failure, a skip, a fixture error,
 * an xfail, parametrised class tests). */
static const char PYTEST_XML[] =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"pytest\" "
    "errors=\"1\" failures=\"1\" skipped=\"2\" tests=\"7\"><testcase classname=\"t.test_a\" "
    "name=\"test_ok\" time=\"0.002\" /><testcase classname=\"t.test_a\" name=\"test_fail\" "
    "time=\"0.002\"><failure message=\"AssertionError: boom &lt;x&gt; &amp; y&#10;assert 1 == "
    "2\">&gt;   def test_fail(): assert 1 == 2\nE   AssertionError: boom &lt;x&gt; &amp; y\n"
    "\nt/test_a.py:3: AssertionError</failure></testcase><testcase classname=\"t.test_a\" "
    "name=\"test_skip\" time=\"0.001\"><skipped type=\"pytest.skip\" message=\"no module "
    "foo\">/repo/t/test_a.py:4: no module foo</skipped></testcase><testcase "
    "classname=\"t.test_a\" name=\"test_err\" time=\"0.001\"><error message=\"failed on setup "
    "with &quot;RuntimeError: fixture broke&quot;\">RuntimeError</error></testcase><testcase "
    "classname=\"t.test_a\" name=\"test_xf\" time=\"0.001\"><skipped type=\"pytest.xfail\" "
    "message=\"\" /></testcase><testcase classname=\"t.test_a.TestK\" name=\"test_p[1]\" "
    "time=\"0.001\" /><testcase classname=\"t.test_a.TestK\" name=\"test_p[2]\" /></testsuite>"
    "</testsuites>";

static void test_junit_pytest(void **state)
{
	(void)state;
	report r = REPORT_INIT;
	report_counts c;
	assert_int_equal(report_parse_junit(&r, PYTEST_XML, strlen(PYTEST_XML)), 0);
	assert_true(r.pytest);
	report_count(&r, &c);
	assert_int_equal(c.passed, 3);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.skipped, 2);
	assert_int_equal(c.errors, 1);
	assert_int_equal(c.collection, 0);
	const report_test *t = find(&r, "t.test_a::test_fail");
	assert_non_null(t);
	assert_int_equal(t->outcome, REPORT_FAILED);
	/* the message attribute, then the body, entities decoded */
	assert_non_null(strstr(t->message, "AssertionError: boom <x> & y\nassert 1 == 2\n"));
	assert_non_null(strstr(t->message, "t/test_a.py:3: AssertionError"));
	t = find(&r, "t.test_a::test_skip");
	assert_int_equal(t->outcome, REPORT_SKIPPED);
	assert_non_null(strstr(t->message, "no module foo"));
	t = find(&r, "t.test_a::test_err");
	assert_int_equal(t->outcome, REPORT_ERROR);
	assert_non_null(strstr(t->message, "failed on setup with \"RuntimeError: fixture broke\""));
	assert_false(t->collection);
	assert_int_equal(find(&r, "t.test_a.TestK::test_p[2]")->outcome, REPORT_PASSED);
	report_release(&r);
}

static void test_junit_collection_error(void **state)
{
	(void)state;
	static const char xml[] =
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"pytest\" "
	    "errors=\"1\"><testcase classname=\"\" name=\"t.test_broken\" time=\"0.000\"><error "
	    "message=\"collection failure\">ImportError while importing test module "
	    "'/repo/t/test_broken.py'.\nE   ModuleNotFoundError: No module named "
	    "'nonexistent_mod'</error></testcase></testsuite></testsuites>";
	report r = REPORT_INIT;
	report_counts c;
	assert_int_equal(report_parse_junit(&r, xml, strlen(xml)), 0);
	report_count(&r, &c);
	assert_int_equal(c.errors, 1);
	assert_int_equal(c.collection, 1);
	const report_test *t = find(&r, "t.test_broken"); /* no classname: the name alone */
	assert_non_null(t);
	assert_true(t->collection);
	assert_non_null(strstr(t->message, "No module named 'nonexistent_mod'"));
	report_run run = {
	    .exit_code = 2, .runner = REPORT_RUNNER_PYTEST, .have_report = true, .report = &r};
	assert_int_equal(report_classify(&run), REPORT_COLLECTION);
	report_release(&r);
}

/* Maven surefire (TEST-*.xml), Gradle, ctest --output-junit and node's junit reporter. */
static void test_junit_other_runners(void **state)
{
	(void)state;
	static const char surefire[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<testsuite xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
	    "name=\"com.example.CalcTest\" time=\"0.05\" tests=\"3\" errors=\"1\" "
	    "skipped=\"0\" failures=\"1\">\n  <properties>\n    <property name=\"java.version\" "
	    "value=\"17\"/>\n  </properties>\n"
	    "  <testcase name=\"adds\" classname=\"com.example.CalcTest\" time=\"0.001\"/>\n"
	    "  <testcase name=\"divides\" classname=\"com.example.CalcTest\" time=\"0.002\">\n"
	    "    <failure message=\"expected: &lt;2&gt; but was: &lt;3&gt;\" "
	    "type=\"org.opentest4j.AssertionFailedError\"><![CDATA[org.opentest4j."
	    "AssertionFailedError: expected: <2> but was: <3>\n\tat "
	    "com.example.CalcTest.divides(CalcTest.java:14)\n<testcase name=\"fake\"/>]]>"
	    "</failure>\n    <system-out><![CDATA[<testcase name=\"also-fake\"/>]]></system-out>\n"
	    "  </testcase>\n"
	    "  <testcase name=\"parses\" classname=\"com.example.CalcTest\" time=\"0\">\n"
	    "    <error message=\"For input string: &quot;x&quot;\" "
	    "type=\"java.lang.NumberFormatException\">java.lang.NumberFormatException</error>\n"
	    "  </testcase>\n</testsuite>\n";
	static const char ctest[] =
	    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"Linux\" tests=\"3\" "
	    "failures=\"1\" disabled=\"1\" skipped=\"1\">\n"
	    "\t<testcase name=\"unit_clamp\" classname=\"unit_clamp\" time=\"0.01\" "
	    "status=\"run\">\n\t\t<system-out>ok</system-out>\n\t</testcase>\n"
	    "\t<testcase name=\"unit_parse\" classname=\"unit_parse\" time=\"0.01\" "
	    "status=\"fail\">\n\t\t<failure message=\"Failed\"/>\n\t\t<system-out>parse.c:9: "
	    "assertion failed</system-out>\n\t</testcase>\n"
	    "\t<testcase name=\"slow\" classname=\"slow\" time=\"0\" status=\"disabled\">\n"
	    "\t\t<skipped message=\"Disabled\"/>\n\t</testcase>\n</testsuite>\n";
	static const char node[] =
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites>\n"
	    "\t<testsuite name=\"math\" time=\"0.002\" disabled=\"0\" errors=\"0\" tests=\"2\" "
	    "failures=\"1\" skipped=\"0\" hostname=\"box\">\n"
	    "\t\t<testcase name=\"adds\" time=\"0.000\" classname=\"test\"/>\n"
	    "\t\t<testcase name=\"divides by zero\" time=\"0.001\" classname=\"test\" "
	    "failure=\"Expected values to be strictly equal\">\n\t\t\t<failure "
	    "type=\"testCodeFailure\" message=\"Expected values to be strictly equal:&#xA;&#xA;"
	    "Infinity !== 0&#xA;\">\n[Error [ERR_TEST_FAILURE]: Expected values]</failure>\n"
	    "\t\t</testcase>\n\t</testsuite>\n\t<!-- tests 2 <testcase name=\"commented\"/> -->\n"
	    "</testsuites>\n";
	report r = REPORT_INIT;
	report_counts c;

	assert_int_equal(report_parse_junit(&r, surefire, strlen(surefire)), 0);
	assert_false(r.pytest);
	report_count(&r, &c);
	assert_int_equal(r.n, 3); /* nothing from CDATA or system-out */
	assert_int_equal(c.passed, 1);
	const report_test *t = find(&r, "com.example.CalcTest::divides");
	assert_int_equal(t->outcome, REPORT_FAILED);
	assert_non_null(strstr(t->message, "expected: <2> but was: <3>\n"));
	assert_non_null(strstr(t->message, "CalcTest.java:14"));
	assert_int_equal(find(&r, "com.example.CalcTest::parses")->outcome, REPORT_ERROR);
	assert_null(find(&r, "fake"));
	report_release(&r);

	assert_int_equal(report_parse_junit(&r, ctest, strlen(ctest)), 0);
	report_count(&r, &c);
	assert_int_equal(c.passed, 1);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.skipped, 1);
	assert_string_equal(find(&r, "unit_parse::unit_parse")->message, "Failed");
	report_release(&r);

	assert_int_equal(report_parse_junit(&r, node, strlen(node)), 0);
	assert_int_equal(r.n, 2);
	t = find(&r, "test::divides by zero");
	assert_int_equal(t->outcome, REPORT_FAILED);
	assert_non_null(strstr(t->message, "strictly equal:\n\nInfinity !== 0"));
	report_release(&r);

	/* two documents concatenated (the JUnit files found in a tree) */
	char *both = NULL;
	assert_true(asprintf(&both, "%s%s", surefire, ctest) > 0);
	assert_int_equal(report_parse_junit(&r, both, strlen(both)), 0);
	assert_int_equal(r.n, 6);
	free(both);
	report_release(&r);
}

static void test_junit_hostile(void **state)
{
	(void)state;
	report r = REPORT_INIT;
	/* truncated input never reads past the end */
	const char *cuts[] = {"<testcase classname=\"a",
			      "<testcase name=\"a\"><failure",
			      "<testcase name=\"a\"><failure message=\"m\">body",
			      "<![CDATA[ <testcase name=\"x\"/>",
			      "<!-- <testcase name=\"y\"/>",
			      "<?xml",
			      "<!DOCTYPE x [ <!ENTITY a \"b\">",
			      "&#x",
			      "<",
			      "</",
			      ""};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		assert_int_equal(report_parse_junit(&r, cuts[i], strlen(cuts[i])), 0);
		report_release(&r);
	}
	assert_int_equal(report_parse_junit(&r, cuts[2], strlen(cuts[2])), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.tests[0].outcome, REPORT_FAILED);
	assert_string_equal(r.tests[0].message, "m\nbody");
	report_release(&r);
	/* a DOCTYPE's entities are never expanded */
	static const char dt[] = "<!DOCTYPE t [<!ENTITY x \"<testcase name='evil'/>\">]><t>"
				 "<testcase name=\"&x;&#0;&#xFFFFFFFF;&bogus\"/></t>";
	assert_int_equal(report_parse_junit(&r, dt, strlen(dt)), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.tests[0].id, "&x;??&bogus"); /* out of range: ? */
	report_release(&r);
	/* a NUL in an id (found by fuzz_report) becomes U+FFFD and "00": ids are C strings */
	static const char nul[] = "<testcase classname=\"\0x\" name=\"t\"/>";
	assert_int_equal(report_parse_junit(&r, nul, sizeof(nul) - 1), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.tests[0].id, AP_UTF8_REPLACEMENT "00x::t");
	report_release(&r);
	/* a long failure message is cut, marked, and holds no NUL */
	size_t big = 100000;
	char *x = malloc(big + 200);
	int n = sprintf(x, "<testcase name=\"t\"><failure>");
	memset(x + n, 'a', big);
	x[n + 10] = '\0'; /* a NUL in the middle of the text */
	strcpy(x + n + big, "</failure></testcase>");
	assert_int_equal(report_parse_junit(&r, x, n + big + 21), 0);
	assert_int_equal(r.n, 1);
	assert_true(strlen(r.tests[0].message) <= REPORT_MAX_MESSAGE + 3);
	assert_non_null(strstr(r.tests[0].message, "..."));
	free(x);
	report_release(&r);
	/* the input cap */
	assert_int_equal(report_parse_junit(&r, "", (size_t)REPORT_READ_CAP + 1), AP_ETOOBIG);
}

static void test_go_json(void **state)
{
	(void)state;
	static const char go[] =
	    "{\"Time\":\"2024-01-01T00:00:00Z\",\"Action\":\"start\",\"Package\":\"ex/calc\"}\n"
	    "{\"Action\":\"run\",\"Package\":\"ex/calc\",\"Test\":\"TestAdd\"}\n"
	    "{\"Action\":\"output\",\"Package\":\"ex/calc\",\"Test\":\"TestAdd\",\"Output\":\"=== "
	    "RUN   TestAdd\\n\"}\n"
	    "{\"Action\":\"pass\",\"Package\":\"ex/calc\",\"Test\":\"TestAdd\",\"Elapsed\":0}\n"
	    "{\"Action\":\"run\",\"Package\":\"ex/calc\",\"Test\":\"TestDiv\"}\n"
	    "{\"Action\":\"run\",\"Package\":\"ex/calc\",\"Test\":\"TestDiv/zero\"}\n"
	    "{\"Action\":\"output\",\"Package\":\"ex/calc\",\"Test\":\"TestDiv/"
	    "zero\",\"Output\":\"=== "
	    "RUN   TestDiv/zero\\n\"}\n"
	    "{\"Action\":\"output\",\"Package\":\"ex/calc\",\"Test\":\"TestDiv/zero\",\"Output\":"
	    "\"    calc_test.go:12: Div(1, 0) = 3, want 0\\n\"}\n"
	    "{\"Action\":\"fail\",\"Package\":\"ex/calc\",\"Test\":\"TestDiv/zero\"}\n"
	    "{\"Action\":\"fail\",\"Package\":\"ex/calc\",\"Test\":\"TestDiv\"}\n"
	    "{\"Action\":\"skip\",\"Package\":\"ex/calc\",\"Test\":\"TestSlow\"}\n"
	    "not json: # ex/broken\n"
	    "{\"Action\":\"fail\",\"Package\":\"ex/calc\",\"Elapsed\":0.01}\n"
	    "{\"Action\":\"output\",\"Package\":\"ex/broken\",\"Output\":\"FAIL\\tex/broken "
	    "[build failed]\\n\"}\n"
	    "{\"Action\":\"fail\",\"Package\":\"ex/broken\",\"Elapsed\":0}\n"
	    "{\"Action\":\"skip\",\"Package\":\"ex/notests\"}\n"
	    "{\"Action\":\"pass\"\n";
	report r = REPORT_INIT;
	report_counts c;
	assert_int_equal(report_parse_go_json(&r, go, strlen(go)), 0);
	report_count(&r, &c);
	assert_int_equal(c.passed, 1);
	assert_int_equal(c.failed, 2);
	assert_int_equal(c.skipped, 1);
	assert_int_equal(c.errors, 1);
	assert_int_equal(c.collection, 1);
	const report_test *t = find(&r, "ex/calc::TestDiv/zero");
	/* the message starts with the test's own output, not go's "=== RUN" framing */
	assert_ptr_equal(strstr(t->message, "    calc_test.go:12: Div(1, 0) = 3, want 0"),
			 t->message);
	t = find(&r, "ex/broken");
	assert_true(t->collection);
	assert_non_null(strstr(t->message, "[build failed]"));
	assert_null(find(&r, "ex/calc")); /* a package with test results is not an entry */
	assert_null(find(&r, "ex/notests"));
	report_run run = {
	    .exit_code = 1, .runner = REPORT_RUNNER_GO, .have_report = true, .report = &r};
	assert_int_equal(report_classify(&run), REPORT_COLLECTION);
	report_release(&r);
}

static void test_cargo(void **state)
{
	(void)state;
	static const char out[] =
	    "\nrunning 4 tests\n"
	    "test tests::adds ... ok\n"
	    "test tests::divides ... FAILED\n"
	    "test tests::slow ... ignored, needs a database\n"
	    "test tests::prints ... ok\r\n"
	    "\nfailures:\n\n---- tests::divides stdout ----\nthread 'tests::divides' panicked at "
	    "src/lib.rs:20:9:\nassertion `left == right` failed\n  left: 3\n right: 0\n\n\n"
	    "failures:\n    tests::divides\n\n"
	    "test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out\n"
	    "\nrunning 1 test\ntest src/lib.rs - div (line 5) ... ok\n"
	    "test result: ok. 1 passed; 0 failed\n";
	report r = REPORT_INIT;
	report_counts c;
	assert_int_equal(report_parse_cargo(&r, out, strlen(out)), 0);
	report_count(&r, &c);
	assert_int_equal(c.passed, 3);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.skipped, 1);
	const report_test *t = find(&r, "tests::divides");
	assert_non_null(t->message);
	assert_non_null(strstr(t->message, "assertion `left == right` failed"));
	assert_null(strstr(t->message, "test result"));
	assert_non_null(find(&r, "src/lib.rs - div (line 5)"));
	report_release(&r);
	/* a build error: no test lines; with cargo's exit 101 that is "nothing ran" */
	static const char err[] = "error[E0425]: cannot find value `x` in this scope\n";
	assert_int_equal(report_parse_cargo(&r, err, strlen(err)), 0);
	assert_int_equal(r.n, 0);
	report_run run = {
	    .exit_code = 101, .runner = REPORT_RUNNER_CARGO, .have_report = true, .report = &r};
	assert_int_equal(report_classify(&run), REPORT_NOTHING_RAN);
	run.exit_code = 0;
	assert_int_equal(report_classify(&run), REPORT_NO_TESTS);
	report_release(&r);
}

static void test_cargo_targets(void **state)
{
	(void)state;
	/* cargo 1.65's stderr and the test binaries' stdout in one stream (the shim's file): each
	 * test under its target, the same name in two targets two tests, the failure message
	 * found under the right target */
	static const char out[] =
	    "   Compiling units v0.1.0 (/tmp/trees/pristine/repo)\n"
	    "    Finished test [unoptimized + debuginfo] target(s) in 1.20s\n"
	    "     Running unittests src/lib.rs (target/debug/deps/units-0f1e2d3c)\n"
	    "\nrunning 1 test\ntest tests::plain_number ... ok\n"
	    "test result: ok. 1 passed; 0 failed\n"
	    "     Running tests/known.rs (target/debug/deps/known-aa11)\n"
	    "\nrunning 1 test\ntest fractions ... FAILED\n\nfailures:\n\n"
	    "---- fractions stdout ----\nthread 'fractions' panicked at 'left: None'\n\n"
	    "failures:\n    fractions\n\ntest result: FAILED. 0 passed; 1 failed\n\n"
	    "     Running tests/render.rs (target/debug/deps/render-bb22)\n"
	    "\nrunning 2 tests\ntest fractions ... ok\ntest human_sizes ... ok\n"
	    "test result: ok. 2 passed; 0 failed\n"
	    "     Running target/debug/deps/old-cc33\n"
	    "\nrunning 1 test\ntest t ... ignored\n"
	    "   Doc-tests units\n\nrunning 1 test\ntest src/lib.rs - parse (line 5) ... ok\n"
	    "error: 1 target failed:\n    `--test known`\n";
	report r = REPORT_INIT;
	report_counts c;

	assert_int_equal(report_parse_cargo(&r, out, strlen(out)), 0);
	report_count(&r, &c);
	assert_int_equal(c.passed, 4);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.skipped, 1);
	assert_int_equal(find(&r, "src/lib.rs::tests::plain_number")->outcome, REPORT_PASSED);
	const report_test *t = find(&r, "tests/known.rs::fractions");
	assert_int_equal(t->outcome, REPORT_FAILED);
	assert_non_null(strstr(t->message, "panicked at 'left: None'"));
	assert_int_equal(find(&r, "tests/render.rs::fractions")->outcome, REPORT_PASSED);
	assert_non_null(find(&r, "old::t"));
	assert_non_null(find(&r, "doc::src/lib.rs - parse (line 5)"));
	assert_null(report_stopped_early(out, strlen(out), false)); /* --no-fail-fast: all ran */
	report_release(&r);
	/* a target that does not compile is a collection error, not "no tests" */
	static const char err[] = "error[E0425]: cannot find function `parse2`\n"
				  "error: could not compile `units` due to previous error\n";
	assert_int_equal(report_parse_cargo(&r, err, strlen(err)), 0);
	assert_int_equal(r.n, 1);
	assert_true(r.tests[0].collection);
	assert_string_equal(r.tests[0].id, "cargo::build");
	report_release(&r);
}

static void test_stopped_early(void **state)
{
	(void)state;
	static const char *const stopped[] = {
	    "test result: FAILED. 0 passed; 1 failed\n"
	    "error: test failed, to rerun pass `--test known`\n",
	    "error: test failed, to rerun pass '--test known'\n",
	    "F\n!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!\n",
	    "[INFO] Reactor Summary for app 1.0:\n[INFO] core ............. FAILURE [  1.2 s]\n"
	    "[INFO] web .............................................. SKIPPED\n",
	};
	static const char *const whole[] = {
	    "error: 2 targets failed:\n    `--test known`\n    `--test render`\n",
	    "1 failed, 3 passed in 0.1s\n",
	    "[INFO] Reactor Summary for app 1.0:\n[INFO] core ............. FAILURE [  1.2 s]\n"
	    "[INFO] web ............................................. FAILURE [ 0.3 s]\n",
	    "test stopping after 1 failures ... ok\n", /* a test's name, not pytest's banner */
	    "",
	};
	for (size_t i = 0; i < sizeof(stopped) / sizeof(stopped[0]); i++)
		assert_non_null(report_stopped_early(stopped[i], strlen(stopped[i]), false));
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
		assert_null(report_stopped_early(whole[i], strlen(whole[i]), false));
	assert_non_null(
	    strstr(report_stopped_early(stopped[0], strlen(stopped[0]), false), "--no-fail-fast"));
	/* cargo <= 1.67 says the same with --no-fail-fast when one target failed: through the
	 * shim (cargo_whole) that is no stop; the other runners' markers still are */
	assert_null(report_stopped_early(stopped[0], strlen(stopped[0]), true));
	assert_non_null(report_stopped_early(stopped[2], strlen(stopped[2]), true));
}

static void test_jest(void **state)
{
	(void)state;
	static const char json[] =
	    "{\"numFailedTests\":1,\"testResults\":["
	    "{\"name\":\"/tmp/trees/pristine/repo/test/units.test.js\",\"status\":\"failed\","
	    "\"assertionResults\":["
	    "{\"fullName\":\"parse upper units\",\"status\":\"passed\",\"failureMessages\":[]},"
	    "{\"fullName\":\"parse lowercase units\",\"status\":\"failed\","
	    "\"failureMessages\":[\"expected 4096, received NaN\"]},"
	    "{\"fullName\":\"parse later\",\"status\":\"todo\"},"
	    "{\"fullName\":7,\"status\":\"passed\"}]},"
	    "{\"name\":\"/tmp/trees/patched/repo/test/broken.test.js\",\"status\":\"failed\","
	    "\"message\":\"SyntaxError: Unexpected token\",\"assertionResults\":[]},"
	    "{\"status\":\"passed\"}]}";
	report r = REPORT_INIT;
	report_counts c;

	assert_int_equal(report_parse_jest(&r, json, strlen(json)), 0);
	report_count(&r, &c);
	assert_int_equal(c.passed, 1);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.skipped, 1);
	assert_int_equal(c.collection, 1);
	const report_test *t = find(&r, "test/units.test.js::parse lowercase units");
	assert_int_equal(t->outcome, REPORT_FAILED);
	assert_string_equal(t->message, "expected 4096, received NaN");
	/* the tree's path is cut off, so both sides name a file alike */
	assert_true(find(&r, "test/broken.test.js")->collection);
	report_release(&r);
	/* malformed: nothing, no error; over the cap: AP_ETOOBIG */
	assert_int_equal(report_parse_jest(&r, "{\"testResults\":[", 16), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(report_parse_jest(&r, json, REPORT_JSON_CAP + 1), AP_ETOOBIG);
	report_release(&r);
}

/* vitest's json reporter (3.2, in the shape it writes: jest's, with "skipped" for a skipped
 * test and a file that did not load as a failed file without results), parsed as jest's. */
static void test_vitest(void **state)
{
	(void)state;
	static const char json[] =
	    "{\"numTotalTests\":4,\"success\":false,\"testResults\":["
	    "{\"assertionResults\":[],\"status\":\"failed\",\"message\":\"Cannot find module "
	    "'./gone.mjs' imported from '/tmp/trees/pristine/repo/test/broken.test.mjs'\","
	    "\"name\":\"/tmp/trees/pristine/repo/test/broken.test.mjs\"},"
	    "{\"assertionResults\":["
	    "{\"ancestorTitles\":[\"parse\"],\"fullName\":\"parse reads upper units\","
	    "\"status\":\"passed\",\"title\":\"reads upper units\",\"failureMessages\":[]},"
	    "{\"ancestorTitles\":[\"parse\"],\"fullName\":\"parse reads lower units\","
	    "\"status\":\"failed\",\"title\":\"reads lower units\","
	    "\"failureMessages\":[\"Error: not a size: 4k\\n    at Object.parse\"]},"
	    "{\"ancestorTitles\":[\"parse\"],\"fullName\":\"parse skipped one\","
	    "\"status\":\"skipped\",\"failureMessages\":[]},"
	    "{\"ancestorTitles\":[],\"fullName\":\"top level\",\"status\":\"passed\","
	    "\"failureMessages\":[]}],"
	    "\"status\":\"failed\",\"name\":\"/tmp/trees/pristine/repo/test/parse.test.mjs\"}]}";
	report r = REPORT_INIT;
	report_counts c;

	assert_int_equal(report_parse_as(&r, REPORT_FORMAT_VITEST, json, strlen(json)), 0);
	report_finish(&r);
	report_count(&r, &c);
	assert_int_equal(c.passed, 2);
	assert_int_equal(c.failed, 1);
	assert_int_equal(c.skipped, 1);
	assert_int_equal(c.collection, 1);
	const report_test *t = find(&r, "test/parse.test.mjs::parse reads lower units");
	assert_int_equal(t->outcome, REPORT_FAILED);
	assert_non_null(strstr(t->message, "not a size: 4k"));
	assert_int_equal(find(&r, "test/parse.test.mjs::top level")->outcome, REPORT_PASSED);
	assert_true(find(&r, "test/broken.test.mjs")->collection);
	report_release(&r);
}

/* A command that chains test runs with && stops at the first failing one; other chains and
 * a single runner behind set-up steps do not. */
static void test_chain_stops(void **state)
{
	static const char *const stops[] = {
	    "go test ./a && go test ./b",
	    "GOFLAGS=-mod=mod go test ./size && cd format && go test .",
	    "python3 -m pytest tests/unit && python3 -m pytest tests/e2e",
	    "pip install -e . && pytest -q tests/a && tox -e py3",
	    "npm test && npm run test:e2e",
	    "make test && sh ci/integration-test.sh",
	    "python3 -m unittest units.tests.a&&python3 -m unittest units.tests.b",
	    "(cargo test --no-fail-fast) && (cd sub && cargo test)",
	    "env CI=1 npx jest && npx vitest run",
	    "./gradlew test && mvn -fae test",
	};
	static const char *const fine[] = {
	    "go test ./...",
	    "go vet ./... && go test ./...",
	    "cmake -S . -B build && cmake --build build && cd build && ctest --output-on-failure",
	    "pip install -e . && python3 -m pytest -q",
	    "go test ./a; go test ./b",
	    "go test ./a || go test ./b",
	    "npm ci && npm run build && npm test",
	    "echo 'go test ./a && go test ./b'",
	    "pytest -k \"a && b\" tests",
	    "make test",
	    "",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (!report_chain_stops(stops[i]))
			fail_msg("not seen to stop: %s", stops[i]);
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
		if (report_chain_stops(fine[i]))
			fail_msg("seen to stop: %s", fine[i]);
	assert_null(report_chain_stops(NULL));
	assert_non_null(strstr(report_chain_stops(stops[0]), "joined by `&&`"));
}

static void test_formats(void **state)
{
	(void)state;
	assert_int_equal(report_format_of("go.12.34.gojson", 15), REPORT_FORMAT_GO_JSON);
	assert_int_equal(report_format_of("cargo.1.2.cargo", 15), REPORT_FORMAT_CARGO);
	assert_int_equal(report_format_of("pytest.xml", 10), REPORT_FORMAT_JUNIT);
	assert_int_equal(report_format_of("jest.1.jestjson", 15), REPORT_FORMAT_JEST);
	assert_int_equal(report_format_of("node.1.2.vitestjson", 19), REPORT_FORMAT_VITEST);
	assert_string_equal(report_format_name(REPORT_FORMAT_VITEST), "vitest's JSON report");
	assert_int_equal(report_format_of("go.1.gojson.rc", 14), REPORT_FORMAT_NONE);
	assert_int_equal(report_format_of(".xml", 4), REPORT_FORMAT_NONE);
	assert_int_equal(report_format_of("x.xml", 3), REPORT_FORMAT_NONE); /* the length counts */
}

static void test_match(void **state)
{
	(void)state;
	static const char *const ids[] = {
	    "tests.test_a::test_x",			/* pytest JUnit */
	    "tests.test_a.TestK::test_y",		/* pytest class */
	    "tests.test_p::test_p[1]",			/* parametrised */
	    "tests.test_p::test_p[2]",			/* */
	    "example.com/units/size::TestParse",	/* go */
	    "example.com/units/format::TestParse",	/* the same name in another package */
	    "tests/lower.rs::lowercase_units",		/* cargo */
	    "com.acme.CalcTest::testAdd",		/* surefire */
	    "test_lower::test_lower",			/* ctest */
	    "units.tests.test_l.TestL::test_lowercase", /* unittest */
	};
	static const struct {
		const char *name, *want;
		size_t n;
		bool ambiguous;
	} cases[] = {
	    {"tests/test_a.py::test_x", "tests.test_a::test_x", 1, false},
	    {"tests/test_a.py::TestK::test_y", "tests.test_a.TestK::test_y", 1, false},
	    {"tests/test_p.py::test_p", "tests.test_p::test_p[1]", 2, false},
	    {"size::TestParse", "example.com/units/size::TestParse", 1, false},
	    {"./size::TestParse", "example.com/units/size::TestParse", 1, false},
	    {"TestParse", NULL, 2, true},
	    {"lower::lowercase_units", "tests/lower.rs::lowercase_units", 1, false},
	    {"tests/lower.rs::lowercase_units", "tests/lower.rs::lowercase_units", 1, false},
	    {"com.acme.CalcTest#testAdd", "com.acme.CalcTest::testAdd", 1, false},
	    {"CalcTest#testAdd", "com.acme.CalcTest::testAdd", 1, false},
	    {"test_lower", "test_lower::test_lower", 1, false},
	    {"units.tests.test_l.TestL.test_lowercase", "units.tests.test_l.TestL::test_lowercase",
	     1, false},
	    {"lower", NULL, 0, false}, /* not at a separator: "test_lower" is not "lower" */
	    {"owercase_units", NULL, 0, false},
	    {"", NULL, 0, false},
	    {"::", NULL, 0, false},
	};
	report r = REPORT_INIT;
	const report_test *m[4];
	bool amb;

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		assert_int_equal(
		    report_add(&r, ids[i], strlen(ids[i]), REPORT_PASSED, NULL, 0, false), 0);
	report_finish(&r);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = report_match(&r, cases[i].name, m, 4, &amb);

		print_message("%s\n", cases[i].name);
		assert_int_equal(n, cases[i].n);
		assert_int_equal(amb, cases[i].ambiguous);
		if (cases[i].want)
			assert_string_equal(m[0]->id, cases[i].want);
	}
	report_release(&r);
}

static void test_finish_merges_duplicates(void **state)
{
	(void)state;
	report r = REPORT_INIT;
	assert_int_equal(report_add(&r, "b", 1, REPORT_PASSED, NULL, 0, false), 0);
	assert_int_equal(report_add(&r, "a", 1, REPORT_PASSED, NULL, 0, false), 0);
	assert_int_equal(report_add(&r, "b", 1, REPORT_FAILED, "boom", 4, false), 0);
	assert_int_equal(report_add(&r, "b", 1, REPORT_SKIPPED, "skip", 4, false), 0);
	assert_int_equal(report_add(&r, "", 0, REPORT_FAILED, NULL, 0, false), 0); /* ignored */
	report_finish(&r);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.tests[0].id, "a");
	const report_test *b = report_find(&r, "b");
	assert_int_equal(b->outcome, REPORT_FAILED); /* the worst outcome wins */
	assert_string_equal(b->message, "boom");
	assert_null(report_find(&r, "c"));
	report_release(&r);
}

#define FFFD AP_UTF8_REPLACEMENT

/* Every id and message of r is text: valid UTF-8 without NUL. */
static void assert_text(const report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		assert_true(ap_utf8_valid(r->tests[i].id, strlen(r->tests[i].id)));
		if (r->tests[i].message)
			assert_true(
			    ap_utf8_valid(r->tests[i].message, strlen(r->tests[i].message)));
	}
}

/* Bytes that are not text in a report the box wrote (issue 26): \xff\xfe, a lone continuation
 * byte, an overlong '/', a UTF-16 surrogate in UTF-8 and a NUL, in a test's name and in its
 * failure. The second name differs from the first only in those bytes; the third is the first
 * one's cleaned id spelled in valid text, the fourth the names with every byte replaced. */
#define BAD_NAME "bad\xff\xfe\x80\xc0\xaf\xed\xa0\x80\0z"
#define BAD_ID                                                                                     \
	"t.m::bad" FFFD "ff" FFFD "fe" FFFD "80" FFFD "c0" FFFD "af" FFFD "ed" FFFD "a0" FFFD      \
	"80" FFFD "00z"
static const char BAD_XML[] =
    "<testsuite name=\"pytest\"><testcase classname=\"t.m\" name=\"" BAD_NAME "\"><failure "
    "message=\"boom \xff\xfe\">trace \x80 \xc0\xaf \xed\xa0\x80 \0 end</failure></testcase>"
    "<testcase classname=\"t.m\" name=\"bad\xfe\xff\x80\xc0\xaf\xed\xa0\x80\0z\"/>"
    "<testcase classname=\"t.m\" name=\"bad" FFFD "ff" FFFD "fe" FFFD "80" FFFD "c0" FFFD "af" FFFD
    "ed" FFFD "a0" FFFD "80" FFFD "00z\"/>"
    "<testcase classname=\"t.m\" name=\"bad" FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD
    "z\"/></testsuite>";

static void test_untrusted_bytes_become_text(void **state)
{
	(void)state;
	report r = REPORT_INIT;
	assert_int_equal(report_parse_junit(&r, BAD_XML, sizeof(BAD_XML) - 1), 0);
	report_finish(&r);
	assert_int_equal(r.n, 4); /* four names, four tests: none merged into another */
	assert_text(&r);
	const report_test *t = report_find(&r, BAD_ID);
	assert_non_null(t);
	assert_int_equal(t->outcome, REPORT_FAILED);
	assert_string_equal(t->message, "boom " FFFD FFFD "\ntrace " FFFD " " FFFD FFFD
					" " FFFD FFFD FFFD " " FFFD " end");
	assert_non_null(report_find(&r, "t.m::bad" FFFD "~ff" FFFD "~fe" FFFD "~80" FFFD "~c0" FFFD
					"~af" FFFD "~ed" FFFD "~a0" FFFD "~80" FFFD "~00z"));
	report_release(&r);

	/* go test -json and cargo: the same cleaning, and cargo still finds the test's block */
	static const char go[] = "{\"Action\":\"output\",\"Package\":\"p\xff\",\"Test\":\"T\x80\","
				 "\"Output\":\"x\xfe\\n\"}\n"
				 "{\"Action\":\"fail\",\"Package\":\"p\xff\",\"Test\":\"T\x80\"}\n";
	assert_int_equal(report_parse_go_json(&r, go, strlen(go)), 0);
	t = find(&r, "p" FFFD "ff::T" FFFD "80");
	assert_non_null(t);
	assert_string_equal(t->message, "x" FFFD "\n");
	report_release(&r);
	static const char cargo[] = "test t\xff ... FAILED\n\nfailures:\n\n---- t\xff stdout ----\n"
				    "boom\xfe\n\nfailures:\n    t\xff\n\ntest result: FAILED.\n";
	assert_int_equal(report_parse_cargo(&r, cargo, strlen(cargo)), 0);
	t = find(&r, "t" FFFD "ff");
	assert_non_null(t);
	assert_non_null(t->message);
	assert_string_equal(t->message, "boom" FFFD "\n\n");
	assert_text(&r);
	report_release(&r);

	/* a name of nothing but invalid bytes is cut within REPORT_MAX_ID, between two of them */
	ap_buf x = AP_BUF_INIT(20000);
	ap_buf_adds(&x, "<testcase name=\"");
	for (int i = 0; i < 5000; i++)
		ap_buf_add(&x, "\xff", 1);
	ap_buf_adds(&x, "\"/>");
	assert_int_equal(report_parse_junit(&r, x.data, x.len), 0);
	assert_int_equal(r.n, 1);
	assert_text(&r);
	assert_true(strlen(r.tests[0].id) <= REPORT_MAX_ID);
	assert_int_equal(strlen(r.tests[0].id) % 5, 0);
	ap_buf_release(&x);
	report_release(&r);
}

/* Cleaning is the same on both runs, so a test is found again; and two tests whose names
 * differ only in invalid bytes stay two: one failing cannot hide the other's regression. */
static void test_untrusted_bytes_keep_tests_apart(void **state)
{
	(void)state;
	report before = REPORT_INIT, after = REPORT_INIT;
	size_t count = 0;
	assert_int_equal(report_parse_junit(&before, BAD_XML, sizeof(BAD_XML) - 1), 0);
	/* after the patch, the second test fails too */
	char *patched = malloc(sizeof(BAD_XML) + 64);
	const char *second = memmem(BAD_XML, sizeof(BAD_XML) - 1, "bad\xfe\xff", 5);
	assert_non_null(patched);
	assert_non_null(second);
	size_t at = (size_t)(second - BAD_XML) + 14; /* past the name and its closing quote */
	assert_memory_equal(BAD_XML + at, "/>", 2);
	memcpy(patched, BAD_XML, at);
	int n = sprintf(patched + at, "><failure message=\"now\"/></testcase>");
	memcpy(patched + at + n, BAD_XML + at + 2, sizeof(BAD_XML) - at - 2);
	assert_int_equal(report_parse_junit(&after, patched, sizeof(BAD_XML) - 3 + (size_t)n), 0);
	report_finish(&before);
	report_finish(&after);
	char *reg = tester_regressions(&before, &after, 10, &count);
	assert_int_equal(count, 1);
	assert_non_null(reg);
	assert_non_null(strstr(reg, "t.m::bad" FFFD "fe" FFFD "ff"));
	assert_non_null(strstr(reg, "failed: now"));
	assert_int_equal(after.n, 4);
	free(reg);
	free(patched);
	report_release(&before);
	report_release(&after);
}

/* The trajectory's per-test event, written test by test, is one strict JSON line. */
static void test_traj_tests_line(void **state)
{
	(void)state;
	char path[] = "/tmp/ap-test-report-XXXXXX";
	int fd = mkstemp(path);
	traj *tj = NULL;
	report r = REPORT_INIT, empty = REPORT_INIT;
	ap_buf text = AP_BUF_INIT(1u << 20);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(traj_open(&tj, path), 0);
	assert_int_equal(report_parse_junit(&r, BAD_XML, sizeof(BAD_XML) - 1), 0);
	report_finish(&r);
	report_traj_tests(tj, "/tmp/trees/pristine", &r);
	report_traj_tests(tj, "/tmp/trees/patched", &empty);
	traj_free(tj);
	assert_int_equal(fs_read_file(&text, path, 0), 0);
	unlink(path);
	assert_true(ap_utf8_valid(text.data, text.len));
	char *nl = strchr(text.data, '\n');
	assert_non_null(nl);
	*nl = '\0';
	cJSON *e = cJSON_Parse(text.data), *tests = cJSON_GetObjectItem(e, "tests");
	assert_non_null(e);
	assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "tester_tests");
	assert_string_equal(cJSON_GetObjectItem(e, "dir")->valuestring, "/tmp/trees/pristine");
	assert_int_equal(cJSON_GetArraySize(tests), 4);
	for (int i = 0; i < 4; i++) {
		cJSON *one = cJSON_GetArrayItem(tests, i);
		assert_string_equal(cJSON_GetObjectItem(one, "name")->valuestring, r.tests[i].id);
		assert_string_equal(cJSON_GetObjectItem(one, "status")->valuestring,
				    r.tests[i].outcome == REPORT_FAILED ? "failed" : "passed");
	}
	cJSON_Delete(e);
	/* the second line: an empty report */
	e = cJSON_Parse(nl + 1);
	assert_non_null(e);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e, "tests")), 0);
	cJSON_Delete(e);
	ap_buf_release(&text);
	report_release(&r);
}

static void test_classify(void **state)
{
	(void)state;
	report empty = REPORT_INIT, one = REPORT_INIT;
	assert_int_equal(report_add(&one, "t", 1, REPORT_FAILED, NULL, 0, false), 0);
	struct {
		int exit_code;
		bool timed_out, oom, have_report;
		enum report_runner runner;
		const report *rep;
		enum report_class want;
	} cases[] = {
	    {0, false, false, true, REPORT_RUNNER_PYTEST, &one, REPORT_RAN},
	    {1, false, false, true, REPORT_RUNNER_OTHER, &one, REPORT_RAN},
	    /* a deadline or the OOM killer wins over everything, also over partial results */
	    {124, true, false, true, REPORT_RUNNER_PYTEST, &one, REPORT_TIMEOUT},
	    {137, false, true, false, REPORT_RUNNER_OTHER, &empty, REPORT_OOM},
	    {137, false, false, true, REPORT_RUNNER_GO, &one, REPORT_KILLED},
	    /* never "the test failed" */
	    {127, false, false, false, REPORT_RUNNER_OTHER, &empty, REPORT_NOT_FOUND},
	    {126, false, false, false, REPORT_RUNNER_OTHER, &empty, REPORT_NOT_EXECUTABLE},
	    {5, false, false, true, REPORT_RUNNER_PYTEST, &empty, REPORT_NO_TESTS},
	    {2, false, false, false, REPORT_RUNNER_PYTEST, &empty, REPORT_COLLECTION},
	    {4, false, false, true, REPORT_RUNNER_PYTEST, &empty, REPORT_NOTHING_RAN},
	    {0, false, false, true, REPORT_RUNNER_OTHER, &empty, REPORT_NO_TESTS},
	    {2, false, false, true, REPORT_RUNNER_OTHER, &empty, REPORT_NOTHING_RAN},
	    /* no report at all: the exit status is all there is */
	    {0, false, false, false, REPORT_RUNNER_OTHER, &empty, REPORT_EXIT_ONLY},
	    {2, false, false, false, REPORT_RUNNER_OTHER, &empty, REPORT_EXIT_ONLY},
	    {2, false, false, false, REPORT_RUNNER_OTHER, NULL, REPORT_EXIT_ONLY},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		report_run run = {.exit_code = cases[i].exit_code,
				  .timed_out = cases[i].timed_out,
				  .oom = cases[i].oom,
				  .runner = cases[i].runner,
				  .have_report = cases[i].have_report,
				  .report = cases[i].rep};
		enum report_class got = report_classify(&run);
		if (got != cases[i].want)
			fail_msg("case %zu: got %s, want %s", i, report_class_name(got),
				 report_class_name(cases[i].want));
	}
	assert_true(report_class_ran(REPORT_RAN) && report_class_ran(REPORT_EXIT_ONLY));
	assert_false(report_class_ran(REPORT_TIMEOUT) || report_class_ran(REPORT_COLLECTION) ||
		     report_class_ran(REPORT_NOT_FOUND) || report_class_ran(REPORT_NO_TESTS));
	assert_string_equal(report_class_name(REPORT_NOT_FOUND), "command not found (exit 127)");
	report_release(&one);
}

static void test_runners(void **state)
{
	(void)state;
	struct {
		const char *cmd;
		enum report_runner r;
		const char *instrumented;
	} cases[] = {
	    {"python3 -m pytest -q", REPORT_RUNNER_PYTEST, "python3 -m pytest -q"},
	    {"python3.11 -m pytest", REPORT_RUNNER_PYTEST, NULL},
	    {"PYTHONPATH=src pytest tests/", REPORT_RUNNER_PYTEST, NULL},
	    {"py.test", REPORT_RUNNER_PYTEST, NULL},
	    {"pytestx", REPORT_RUNNER_OTHER, NULL},
	    /* go and ctest get their report options from the shims (agents/shims.h) */
	    {"go test ./...", REPORT_RUNNER_GO, "go test ./..."},
	    {"CGO_ENABLED=0 go test -run TestX ./calc", REPORT_RUNNER_GO,
	     "CGO_ENABLED=0 go test -run TestX ./calc"},
	    {"go vet ./...", REPORT_RUNNER_OTHER, "go vet ./..."},
	    {"cargo test", REPORT_RUNNER_CARGO, "cargo test"},
	    {"node --test test/", REPORT_RUNNER_NODE,
	     "node --test --test-reporter=spec --test-reporter-destination=stdout "
	     "--test-reporter=junit --test-reporter-destination=/r/node.xml test/"},
	    {"ctest --test-dir build", REPORT_RUNNER_CTEST, "ctest --test-dir build"},
	    {"make test", REPORT_RUNNER_OTHER, "make test"},
	    {"npm test", REPORT_RUNNER_OTHER, NULL},
	    {"", REPORT_RUNNER_OTHER, ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(report_runner_of(cases[i].cmd), cases[i].r);
		if (cases[i].instrumented) {
			char *s = report_instrument(cases[i].cmd, "/r");
			assert_string_equal(s, cases[i].instrumented);
			free(s);
		}
	}
}

static void test_instrument_refuses_a_long_report_dir(void **state)
{
	char dir[1100];

	(void)state;
	memset(dir, 'd', sizeof(dir) - 1);
	dir[0] = '/';
	dir[sizeof(dir) - 1] = '\0';
	/* node's junit destination would be cut: no command rather than one writing elsewhere */
	assert_null(report_instrument("node --test test/", dir));
	assert_non_null(strstr(ap_error_last(), "would be cut"));
	ap_error_clear();
}

static void test_sections(void **state)
{
	(void)state;
	static const char text[] = "junk before\n@@ap:N0NCE:5:out\nab\0de\n@@ap:N0NCE:-1:err\n"
				   "\n@@ap:OTHER:3:fake\nxyz\n@@ap:N0NCE:7:oom";
	report_section s[8];
	size_t n = 0;
	assert_int_equal(report_sections(text, sizeof(text) - 1, "N0NCE", s, 8, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(s[0].name_len, 3);
	assert_memory_equal(s[0].name, "out", 3);
	assert_int_equal(s[0].len, 5);
	assert_memory_equal(s[0].data, "ab\0de", 5);
	assert_int_equal(s[0].size, 5);
	assert_int_equal(s[1].size, -1);
	/* a marker with another nonce is content */
	assert_int_equal(s[1].len, strlen("\n@@ap:OTHER:3:fake\nxyz"));
	assert_memory_equal(s[2].name, "oom", 3);
	assert_int_equal(s[2].size, 7);
	assert_int_equal(s[2].len, 0);
	/* at most max sections; an empty nonce is refused */
	assert_int_equal(report_sections(text, sizeof(text) - 1, "N0NCE", s, 1, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(report_sections(text, sizeof(text) - 1, "", s, 8, &n), AP_EINVAL);
	assert_int_equal(report_sections("", 0, "N0NCE", s, 8, &n), 0);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_junit_pytest),
	    cmocka_unit_test(test_junit_collection_error),
	    cmocka_unit_test(test_junit_other_runners),
	    cmocka_unit_test(test_junit_hostile),
	    cmocka_unit_test(test_go_json),
	    cmocka_unit_test(test_cargo),
	    cmocka_unit_test(test_cargo_targets),
	    cmocka_unit_test(test_stopped_early),
	    cmocka_unit_test(test_jest),
	    cmocka_unit_test(test_vitest),
	    cmocka_unit_test(test_chain_stops),
	    cmocka_unit_test(test_formats),
	    cmocka_unit_test(test_match),
	    cmocka_unit_test(test_finish_merges_duplicates),
	    cmocka_unit_test(test_untrusted_bytes_become_text),
	    cmocka_unit_test(test_untrusted_bytes_keep_tests_apart),
	    cmocka_unit_test(test_traj_tests_line),
	    cmocka_unit_test(test_classify),
	    cmocka_unit_test(test_runners),
	    cmocka_unit_test(test_instrument_refuses_a_long_report_dir),
	    cmocka_unit_test(test_sections),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
