/* SPDX-License-Identifier: MIT */
/* tests/agents/test_run_output.c - a runner's output made readable (agents/run_output.h):
 * ANSI and progress bars cleaned away, each runner's own error lines chosen over the first
 * lines, bounds, and advice that fits the cause. The outputs are written here in the shape
 * each tool prints. */
#include "agents/run_output.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Maven 3.9 offline, coloured as in a terminal: the colour codes, download progress and the
 * help boilerplate hide the one line that says what went wrong. */
#define ESC "\x1b"
static const char maven_out[] =
    "[" ESC "[1;34mINFO" ESC "[m] Scanning for projects...\n"
    "[" ESC "[1;34mINFO" ESC "[m] " ESC "[1m------------------< " ESC "[0;36mcom.example:calc" ESC
    "[0;1m >------------------" ESC "[m\n"
    "[" ESC "[1;34mINFO" ESC "[m] " ESC "[1mBuilding calc 1.0" ESC "[m\n"
    "Progress (1): 2.3/5.6 kB\rProgress (1): 5.6 kB\r\n"
    "[" ESC "[1;34mINFO" ESC "[m] " ESC "[1;31mBUILD FAILURE" ESC "[m\n"
    "[" ESC "[1;31mERROR" ESC "[m] Plugin org.apache.maven.plugins:maven-resources-plugin:3.3.1 "
    "or one of its dependencies could not be resolved: Failed to read artifact descriptor for "
    "org.apache.maven.plugins:maven-resources-plugin:jar:3.3.1: Could not transfer artifact "
    "org.apache.maven.plugins:maven-resources-plugin:pom:3.3.1 from/to central "
    "(https://maven.example/maven2): maven.example: Temporary failure in name resolution -> [" ESC
    "[1mHelp 1" ESC "[m]\n"
    "[" ESC "[1;31mERROR" ESC "[m] \n"
    "[" ESC "[1;31mERROR" ESC "[m] To see the full stack trace of the errors, re-run Maven with "
    "the " ESC "[1m-e" ESC "[m switch.\n"
    "[" ESC "[1;31mERROR" ESC "[m] Re-run Maven using the " ESC "[1m-X" ESC "[m switch to enable "
    "full debug logging.\n"
    "[" ESC "[1;31mERROR" ESC "[m] \n"
    "[" ESC "[1;31mERROR" ESC "[m] For more information about the errors and possible solutions, "
    "please read the following articles:\n"
    "[" ESC "[1;31mERROR" ESC "[m] " ESC "[1m[Help 1]" ESC "[m "
    "http://cwiki.example/MAVEN/PluginResolutionException\n";

static void test_maven_offline_with_ansi(void **state)
{
	bool errors = false;
	char *x = run_output_excerpt(NULL, maven_out, 20, 3000, &errors);
	char *a = run_output_advice(NULL, maven_out);

	(void)state;
	assert_non_null(x);
	assert_true(errors);
	assert_null(strchr(x, '\x1b'));
	assert_non_null(strstr(x, "[ERROR] Plugin org.apache.maven.plugins:maven-resources-plugin:"
				  "3.3.1 or one of its dependencies could not be resolved"));
	assert_non_null(strstr(x, "BUILD FAILURE"));
	assert_null(strstr(x, "Scanning for projects"));
	assert_null(strstr(x, "To see the full stack trace"));
	assert_null(strstr(x, "Re-run Maven"));
	assert_null(strstr(x, "[Help 1] http"));
	/* the error line is longer than the cap: cut with "..." */
	assert_non_null(strstr(x, "...\n") ? strstr(x, "...") : strstr(x, "..."));
	assert_non_null(a);
	assert_non_null(strstr(a, "Maven could not fetch"));
	assert_non_null(strstr(a, "`setup:`"));
	assert_non_null(strstr(a, "`network:`"));
	assert_non_null(strstr(a, "mvn -B dependency:go-offline"));
	free(x);
	free(a);
}

static void test_clean(void **state)
{
	static const char in[] = "a" ESC "]0;title\x07"
				 "b" ESC "(B"
				 "c" ESC "[38;5;196mred" ESC "[0m\r\n"
				 "10%\r50%\r100% done\n"
				 "tab\there\bx\x01\x7f\n"
				 "bad \xff utf8\n";
	char *c = run_output_clean(in, sizeof(in) - 1);

	(void)state;
	assert_non_null(c);
	assert_string_equal(c, "abcred\n100% done\ntab\therex\nbad \xef\xbf\xbd utf8\n");
	free(c);
	c = run_output_clean(NULL, 0);
	assert_string_equal(c, "");
	free(c);
}

/* One output per runner's error style; the excerpt is the error line(s), not the first lines. */
static void test_error_styles(void **state)
{
	static const struct {
		const char *err, *out, *want, *not_want;
	} cases[] = {
	    {"cc -c src/calc.c\nsrc/calc.c:3:5: error: unknown type name 'integer'\n", "",
	     "src/calc.c:3:5: error: unknown type name 'integer'", "cc -c src/calc.c"},
	    {"   Compiling calc v0.1.0\nerror[E0425]: cannot find value `y` in this scope\n"
	     " --> src/lib.rs:2:5\n",
	     "", "error[E0425]: cannot find value `y` in this scope", "Compiling"},
	    {"",
	     "collected 3 items\n\ntests/test_a.py ..F\nFAILED tests/test_a.py::test_x - assert 1 "
	     "== 2\n",
	     "FAILED tests/test_a.py::test_x - assert 1 == 2", "collected 3 items"},
	    {"",
	     "=== RUN   TestAdd\npanic: runtime error: index out of range [3] with length 3\n\n"
	     "goroutine 7 [running]:\n",
	     "panic: runtime error: index out of range [3] with length 3", "=== RUN"},
	    {"", "=== RUN   TestAdd\n--- FAIL: TestAdd (0.00s)\nFAIL\tcalc\t0.002s\n",
	     "--- FAIL: TestAdd (0.00s)", "=== RUN"},
	    {"npm ERR! code ENOENT\nnpm ERR! syscall open\n", "> calc@1.0.0 test\n",
	     "npm ERR! code ENOENT\nnpm ERR! syscall open", "> calc@1.0.0 test"},
	    {"", "thread 'main' panicked at src/main.rs:2:5:\nboom\n",
	     "thread 'main' panicked at src/main.rs:2:5:", NULL},
	    {"CMake Error at CMakeLists.txt:3 (add_executable):\n  Cannot find source file\n", "",
	     "CMake Error at CMakeLists.txt:3 (add_executable):", NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool errors = false;
		char *x = run_output_excerpt(cases[i].err, cases[i].out, 20, 3000, &errors);

		assert_non_null(x);
		if (!errors || !strstr(x, cases[i].want) ||
		    (cases[i].not_want && strstr(x, cases[i].not_want)))
			fail_msg("case %zu: excerpt \"%s\"", i, x);
		free(x);
	}
}

/* A traceback: its first line, its last two lines and the exception line; the advice names the
 * module. */
static void test_traceback(void **state)
{
	static const char out[] = "running tests\n"
				  "Traceback (most recent call last):\n"
				  "  File \"/repo/run.py\", line 1, in <module>\n"
				  "    import calc\n"
				  "  File \"/repo/calc/__init__.py\", line 2, in <module>\n"
				  "    import numpy\n"
				  "ModuleNotFoundError: No module named 'numpy'\n"
				  "done\n";
	bool errors;
	char *x = run_output_excerpt(NULL, out, 20, 3000, &errors);
	char *a = run_output_advice(NULL, out);

	(void)state;
	assert_true(errors);
	assert_string_equal(x, "Traceback (most recent call last):\n"
			       "  File \"/repo/calc/__init__.py\", line 2, in <module>\n"
			       "    import numpy\n"
			       "ModuleNotFoundError: No module named 'numpy'");
	assert_non_null(a);
	assert_non_null(strstr(a, "The Python module `numpy` is not installed"));
	assert_non_null(strstr(a, "`setup:`"));
	free(x);
	free(a);
}

/* Gradle's "What went wrong" and the lines under it; the advice is Gradle's. */
static void test_gradle(void **state)
{
	static const char err[] =
	    "\nFAILURE: Build failed with an exception.\n\n"
	    "* What went wrong:\n"
	    "Execution failed for task ':test'.\n"
	    "> Could not resolve all files for configuration ':testRuntimeClasspath'.\n"
	    "   > Could not resolve junit:junit:4.13.2.\n"
	    "\n* Try:\n> Run with --stacktrace option.\n";
	bool errors;
	char *x = run_output_excerpt(err, "> Task :compileJava\n", 20, 3000, &errors);
	char *a = run_output_advice(err, NULL);

	(void)state;
	assert_true(errors);
	assert_non_null(strstr(x, "FAILURE: Build failed with an exception.\n"
				  "* What went wrong:\n"
				  "Execution failed for task ':test'.\n"
				  "> Could not resolve all files"));
	assert_null(strstr(x, "Run with --stacktrace"));
	assert_null(strstr(x, "compileJava"));
	assert_non_null(strstr(a, "Gradle could not fetch"));
	free(x);
	free(a);
}

/* The advice per cause: each package manager offline, a program the image lacks (with the
 * flavour that has it), an unknown program, plain network errors, and nothing recognised. */
static void test_advice(void **state)
{
	static const struct {
		const char *err, *want;
	} cases[] = {
	    {"npm ERR! code ENOTFOUND\nnpm ERR! network request to https://npm.example/x failed\n",
	     "npm could not fetch"},
	    {"npm error code EAI_AGAIN\n", "npm could not fetch"},
	    {"ERROR: Could not find a version that satisfies the requirement hypothesis\n"
	     "ERROR: No matching distribution found for hypothesis\n",
	     "pip could not fetch"},
	    {"error: failed to get `serde` as a dependency of package `calc v0.1.0`\n",
	     "cargo could not fetch"},
	    {"go: github.com/x/y@v1.2.3: missing go.sum entry\n", "go could not fetch"},
	    {"sh: 1: mvn: not found\n", "`mvn` is not in the sandbox image: the `java` flavour has "
					"it. Set `image: java`"},
	    {"/bin/sh: 1: cargo: not found\n", "the `rust` flavour"},
	    {"bash: line 1: npx: command not found\n", "the `node` flavour"},
	    {"sh: 1: tox: not found\n", "`tox` is not in the sandbox image: the `python` flavour"},
	    {"sh: 1: rebar3: not found\n",
	     "`rebar3` is not in the sandbox image: install it in `setup:`"},
	    {"curl: (6) Could not resolve host: files.example\n", "reach the network"},
	};
	char *a;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		a = run_output_advice(cases[i].err, "");
		if (!a || !strstr(a, cases[i].want))
			fail_msg("case %zu: advice \"%s\"", i, a ? a : "(none)");
		assert_non_null(strstr(a, ".github/autopatch.yml"));
		free(a);
	}
	assert_null(run_output_advice("FAILED tests/test_a.py::test_x\n", "1 failed\n"));
	assert_null(run_output_advice(NULL, NULL));
	/* a name that is not a plain program name is not quoted */
	a = run_output_advice("sh: 1: `rm -rf`: not found\n", NULL);
	assert_null(a);
}

/* No error line: the first and last lines, with how many were left out. */
/* tox that could not install offline: pip's error on stderr, tox's own lines on stdout; the
 * advice says which tox.ini shapes work without a network. pip alone keeps pip's advice. */
static void test_advice_tox(void **state)
{
	static const char err[] = "ERROR: Could not find a version that satisfies the requirement "
				  "pytest (from versions: none)\n"
				  "ERROR: No matching distribution found for pytest\n";
	static const char out[] = "py3: install_deps> python -I -m pip install pytest\n"
				  "py3: exit 1 (10.52 seconds) /tmp/w> python -I -m pip install "
				  "pytest pid=16\n"
				  "  py3: FAIL code 1 (11.82 seconds)\n"
				  "  evaluation failed :( (12.00 seconds)\n";
	char *a = run_output_advice(err, out);

	(void)state;
	assert_non_null(a);
	assert_non_null(strstr(a, "tox could not install what its environment needs"));
	assert_non_null(strstr(a, "`skip_install = true`"));
	assert_non_null(strstr(a, "`sitepackages = true`"));
	assert_non_null(strstr(a, "PIP_NO_INDEX=1 PIP_FIND_LINKS=/usr/share/python-wheels"));
	free(a);
	a = run_output_advice(err, "1 failed\n");
	assert_non_null(a);
	assert_non_null(strstr(a, "pip could not fetch"));
	free(a);
	assert_null(run_output_advice("", out)); /* tox failed, not for want of a download */
}

static void test_no_error_lines(void **state)
{
	char out[4096] = "";
	bool errors = true;
	char *x;

	(void)state;
	for (int i = 1; i <= 50; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "line %d\n", i);
	x = run_output_excerpt("", out, 20, 3000, &errors);
	assert_false(errors);
	assert_non_null(strstr(x, "line 1\nline 2\n"));
	assert_non_null(strstr(x, "line 10\n... (31 lines left out) ...\nline 42\n"));
	assert_non_null(strstr(x, "\nline 50"));
	assert_null(strstr(x, "line 11\n"));
	free(x);
	x = run_output_excerpt(NULL, "only\n", 20, 3000, &errors);
	assert_string_equal(x, "only");
	free(x);
	x = run_output_excerpt(NULL, NULL, 20, 3000, &errors);
	assert_string_equal(x, "");
	free(x);
}

/* However much error output, the excerpt stays within its lines and bytes; repeats once. */
static void test_bounds(void **state)
{
	size_t n = 2000 * 40 + 1000;
	char *out = malloc(n), *x;
	char line[600];
	bool errors;
	int lines = 0;

	(void)state;
	assert_non_null(out);
	out[0] = '\0';
	for (int i = 0; i < 5; i++)
		strcat(out, "[ERROR] the same error\n");
	for (int i = 0; i < 2000; i++)
		snprintf(out + strlen(out), n - strlen(out), "error: number %d\n", i);
	x = run_output_excerpt(NULL, out, 20, 3000, &errors);
	assert_true(errors);
	for (const char *p = x; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines + 1, 20);
	assert_non_null(strstr(x, "[ERROR] the same error\nerror: number 0\n"));
	free(x);
	x = run_output_excerpt(NULL, out, 1000, 500, &errors);
	assert_true(strlen(x) <= 500);
	free(x);
	memset(line, 'x', sizeof(line) - 1);
	memcpy(line, "error: ", 7);
	line[sizeof(line) - 1] = '\0';
	x = run_output_excerpt(line, NULL, 20, 3000, &errors);
	assert_int_equal(strlen(x), RUN_OUTPUT_LINE_CAP + 3);
	assert_string_equal(x + RUN_OUTPUT_LINE_CAP, "...");
	free(x);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_maven_offline_with_ansi),
	    cmocka_unit_test(test_clean),
	    cmocka_unit_test(test_error_styles),
	    cmocka_unit_test(test_traceback),
	    cmocka_unit_test(test_gradle),
	    cmocka_unit_test(test_advice),
	    cmocka_unit_test(test_advice_tox),
	    cmocka_unit_test(test_no_error_lines),
	    cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
