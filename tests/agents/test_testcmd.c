/* SPDX-License-Identifier: MIT */
/* tests/agents/test_testcmd.c - the one test-command detector (agents/testcmd.h), over
 * temporary checkouts shaped like real repositories: its precedence, npm's placeholder
 * script, documented commands, CMake, and links that point out of the checkout. */
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

#include "agents/testcmd.h"
#include "common/err.h"

/* ---- fixture checkouts ---- */

static char *new_dir(void)
{
	char tmpl[] = "/tmp/ap-testcmd-XXXXXX";
	char *dir = mkdtemp(tmpl);

	assert_non_null(dir);
	dir = strdup(dir);
	assert_non_null(dir);
	return dir;
}

/* Write dir/rel (creating its directories) with the given text. */
static void put(const char *dir, const char *rel, const char *text)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		mkdir(path, 0700);
		*s = '/';
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A checkout holding files ("path=contents", NULL-terminated). */
static char *repo_with(const char *const *files)
{
	char *dir = new_dir();

	for (; *files; files++) {
		const char *eq = strchr(*files, '=');
		char rel[256];

		assert_non_null(eq);
		snprintf(rel, sizeof(rel), "%.*s", (int)(eq - *files), *files);
		put(dir, rel, eq + 1);
	}
	return dir;
}

static void rm_dir(char *dir)
{
	char cmd[1100];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	free(dir);
}

static void expect_in(const char *dir, const char *cmd, const char *why)
{
	char *c = NULL, *w = NULL;

	assert_int_equal(testcmd_detect(&c, &w, dir), 0);
	assert_string_equal(c, cmd);
	assert_string_equal(w, why);
	free(c);
	free(w);
}

static void expect_none_in(const char *dir)
{
	char *c = (char *)"x", *w = (char *)"x";

	assert_int_equal(testcmd_detect(&c, &w, dir), AP_ENOTFOUND);
	assert_null(c);
	assert_null(w);
	assert_non_null(strstr(ap_error_last(), "no test command detected (looked for "));
	ap_error_clear();
}

/* Detect in a fresh checkout of files; want NULL: nothing is detected. */
static void expect(const char *const *files, const char *cmd, const char *why)
{
	char *dir = repo_with(files);

	if (cmd)
		expect_in(dir, cmd, why);
	else
		expect_none_in(dir);
	rm_dir(dir);
}

/* ---- the cases ---- */

/* A Python project with both a Makefile test target and pytest tests and configuration: the
 * Makefile wins, the answer the pipeline always gave (`autopatch fix` said pytest before). */
static void test_makefile_beats_pytest(void **state)
{
	static const char *const files[] = {
	    "Makefile=PYTHON ?= python3\n"
	    ".PHONY: all lint test\n"
	    "all: lint test\n"
	    "lint:\n\truff check .\n"
	    "test:\n\tPYTHONPATH=src $(PYTHON) -m pytest -q\n",
	    "pyproject.toml=[project]\nname = \"calc\"\n\n"
	    "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n",
	    "pytest.ini=[pytest]\naddopts = -q\n",
	    "conftest.py=",
	    "src/calc/__init__.py=",
	    "tests/test_calc.py=def test_add():\n    assert 1 + 1 == 2\n",
	    NULL};

	(void)state;
	expect(files, "make test", "Makefile target test");
}

/* Each rule down the list loses to every rule above it: add the files of a higher rule one
 * by one and watch the answer move up. */
static void test_precedence_chain(void **state)
{
	char *dir = new_dir();

	(void)state;
	expect_none_in(dir);
	put(dir, "tests/unit/test_ops.py", "def test_ops(): pass\n");
	expect_in(dir, "python3 -m pytest -q", "test_*.py files in tests/");
	put(dir, "Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n");
	expect_in(dir, "cargo test", "Cargo.toml");
	put(dir, "go.mod", "module example.com/x\n\ngo 1.22\n");
	expect_in(dir, "go test ./...", "go.mod");
	put(dir, "package.json", "{\"name\": \"x\", \"scripts\": {\"test\": \"jest --ci\"}}\n");
	expect_in(dir, "npm test", "package.json scripts.test");
	put(dir, "setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n");
	expect_in(dir, "python3 -m pytest -q", "setup.cfg [tool:pytest]");
	put(dir, "tox.ini", "[tox]\nenvlist = py3\n\n[pytest]\naddopts = -q\n");
	expect_in(dir, "python3 -m pytest -q", "tox.ini [pytest]");
	put(dir, "pyproject.toml", "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n");
	expect_in(dir, "python3 -m pytest -q", "pyproject.toml [tool.pytest.ini_options]");
	put(dir, "pytest.ini", "");
	expect_in(dir, "python3 -m pytest -q", "pytest.ini");
	put(dir, "CMakeLists.txt",
	    "cmake_minimum_required(VERSION 3.16)\nproject(x C)\n"
	    "include(CTest)\n");
	expect_in(dir,
		  "cmake -S . -B build-autopatch && cmake --build build-autopatch && "
		  "cd build-autopatch && ctest --output-on-failure",
		  "CMakeLists.txt include(CTest)");
	put(dir, "Makefile", "all:\n\tcc -o x x.c\ncheck: all\n\t./x --self-test\n");
	expect_in(dir, "make check", "Makefile target check");
	put(dir, "Makefile", "all:\n\tcc -o x x.c\ncheck test: all\n\t./x --self-test\n");
	expect_in(dir, "make test", "Makefile target test");
	put(dir, "CONTRIBUTING.md",
	    "# Contributing\n\n## Running the tests\n\n"
	    "Run `make test-all` before you open a pull request.\n");
	expect_in(dir, "make test-all", "CONTRIBUTING.md section \"Running the tests\"");
	put(dir, "AGENTS.md", "# Agent notes\n\n## Testing\n\n```sh\ntox -e py312\n```\n");
	expect_in(dir, "tox -e py312", "AGENTS.md section \"Testing\"");
	rm_dir(dir);
}

/* `npm init` writes a test script that only fails; it is no test command. */
static void test_npm_placeholder_is_not_a_test(void **state)
{
	static const char *const placeholder[] = {
	    "package.json={\n  \"name\": \"left-pad\",\n  \"version\": \"1.0.0\",\n"
	    "  \"main\": \"index.js\",\n  \"scripts\": {\n"
	    "    \"test\": \"echo \\\"Error: no test specified\\\" && exit 1\"\n  },\n"
	    "  \"license\": \"ISC\"\n}\n",
	    "index.js=module.exports = (s) => s;\n", NULL};
	static const char *const placeholder_and_go[] = {
	    "package.json={\"scripts\": {\"test\": \"echo \\\"Error: no test specified\\\" && "
	    "exit 1\"}}",
	    "go.mod=module x\n", NULL};
	static const char *const empty_script[] = {"package.json={\"scripts\": {\"test\": \" \"}}",
						   NULL};
	static const char *const not_json[] = {"package.json={\"scripts\": {\"test\": ", NULL};
	static const char *const real[] = {
	    "package.json={\"scripts\": {\"build\": \"tsc\", \"test\": \"vitest run\"}}", NULL};

	(void)state;
	expect(placeholder, NULL, NULL);
	expect(placeholder_and_go, "go test ./...", "go.mod");
	expect(empty_script, NULL, NULL);
	expect(not_json, NULL, NULL);
	expect(real, "npm test", "package.json scripts.test");
}

/* AGENTS.md / CONTRIBUTING.md: only a single simple command of a known runner, under a heading
 * about tests, counts. */
static void test_documented_command(void **state)
{
	static const char *const agents[] = {
	    "AGENTS.md=# AGENTS.md\n\n"
	    "## Setup\n\n```sh\npip install -e '.[dev]'\n```\n\n"
	    "Use `make lint` to check style.\n\n"
	    "## Testing\n\n"
	    "Run the unit tests before every commit:\n\n"
	    "```bash\n# quick\n$ python3 -m pytest -q tests/unit\n```\n\n"
	    "## Style\n\nUse `ruff check .`.\n",
	    "Makefile=test:\n\tpytest\n", NULL};
	/* Two commands in the block, an installer, a non-shell block: none is taken. */
	static const char *const unclear[] = {
	    "AGENTS.md=## Tests\n\n```\npip install -r requirements.txt\npytest\n```\n\n"
	    "```python\nimport pytest\n```\n\n"
	    "Install with `pip install -e .`, lint with `cargo check`.\n"
	    "Or `make test && make lint`, `pytest; rm -rf /`, `make $(TARGET)`.\n",
	    "Makefile=test:\n\tpytest\n", NULL};
	/* A command outside a test section does not count; a subsection of one does. */
	static const char *const sections[] = {
	    "CONTRIBUTING.md=# Contributing\n\n## Building\n\n`make test-build`\n\n"
	    "## Tests\n\n### Unit tests\n\n    make unit\n\n"
	    "1. In a list:\n\n   ```console\n   $ go test -race ./...\n   ```\n\n"
	    "## Releasing\n\n`make test-release`\n",
	    NULL};
	static const char *const github_dir[] = {
	    ".github/CONTRIBUTING.md=Testing\n=======\n\n## How to test\n\n"
	    "```shell\nnpm run test:unit\n```\n",
	    NULL};
	/* A console transcript: the "$ " line is the command, the rest its output. */
	static const char *const transcript[] = {
	    "CONTRIBUTING.md=## Testing\n\n```console\n$ cargo test\n   Compiling x v0.1.0\n"
	    "test result: ok. 3 passed\n```\n",
	    NULL};
	static const char *const two_prompts[] = {
	    "CONTRIBUTING.md=## Testing\n\n```console\n$ cargo build\n$ cargo test\nok\n```\n",
	    NULL};
	static const char *const only_other_sections[] = {
	    "CONTRIBUTING.md=## Building\n\n`make test`\n\n## Latest changes\n\n`make test`\n",
	    NULL};

	(void)state;
	expect(agents, "python3 -m pytest -q tests/unit", "AGENTS.md section \"Testing\"");
	expect(unclear, "make test", "Makefile target test");
	expect(sections, "go test -race ./...", "CONTRIBUTING.md section \"Unit tests\"");
	expect(github_dir, "npm run test:unit", ".github/CONTRIBUTING.md section \"How to test\"");
	expect(transcript, "cargo test", "CONTRIBUTING.md section \"Testing\"");
	expect(two_prompts, NULL, NULL);
	expect(only_other_sections, NULL, NULL);
}

static void test_runner_words(void **state)
{
	static const char *const yes[] = {"make test",
					  "make -C build check",
					  "pytest",
					  "pytest -x tests/unit",
					  "py.test",
					  "python3 -m pytest",
					  "python -m unittest discover",
					  "tox -e py312",
					  "npm test",
					  "npm run test:unit",
					  "yarn test",
					  "go test ./...",
					  "cargo test --all",
					  "ctest",
					  "meson test -C build",
					  "mvn verify",
					  "./gradlew check",
					  "bundle exec rspec",
					  "make unit-test",
					  NULL};
	static const char *const no[] = {"",
					 "make",
					 "make install",
					 "cargo check",
					 "cargo build",
					 "npm install",
					 "npm run check",
					 "pip install pytest",
					 "go vet ./...",
					 "make latest",
					 "rm -rf / # test",
					 "make test && make lint",
					 "pytest; true",
					 "pytest | tee log",
					 "pytest > log",
					 "make $(T)",
					 "echo `make test`",
					 "PYTHONPATH=. pytest",
					 "make test\\",
					 "make\ttest\n",
					 "./run_tests.sh",
					 NULL};
	char longer[TESTCMD_MAX_CMD + 2];

	(void)state;
	for (const char *const *s = yes; *s; s++)
		if (!testcmd_is_runner(*s))
			fail_msg("not accepted: \"%s\"", *s);
	for (const char *const *s = no; *s; s++)
		if (testcmd_is_runner(*s))
			fail_msg("accepted: \"%s\"", *s);
	memset(longer, 'x', sizeof(longer) - 1);
	memcpy(longer, "pytest ", 7);
	longer[sizeof(longer) - 1] = '\0';
	assert_false(testcmd_is_runner(longer));
}

/* CMake: the commands are case-insensitive, comments do not count. */
static void test_cmake(void **state)
{
	static const char *const add_test[] = {
	    "CMakeLists.txt=cmake_minimum_required(VERSION 3.16)\n"
	    "project(calc C)\n"
	    "add_library(calc src/calc.c)\n"
	    "add_executable(test_calc tests/test_calc.c)\n"
	    "target_link_libraries(test_calc calc)\n"
	    "ADD_TEST (NAME test_calc COMMAND test_calc)\n",
	    "src/calc.c=int add(int a, int b) { return a + b; }\n", NULL};
	static const char *const enable[] = {
	    "CMakeLists.txt=project(x)\n# add_test(NAME a COMMAND a)\nenable_testing()\n"
	    "add_subdirectory(tests)\n",
	    NULL};
	static const char *const commented[] = {
	    "CMakeLists.txt=project(x)\n# enable_testing()\nmy_add_test(a)\n"
	    "set(add_test_flags 1)\n",
	    NULL};

	(void)state;
	expect(add_test,
	       "cmake -S . -B build-autopatch && cmake --build build-autopatch && "
	       "cd build-autopatch && ctest --output-on-failure",
	       "CMakeLists.txt add_test");
	expect(enable,
	       "cmake -S . -B build-autopatch && cmake --build build-autopatch && "
	       "cd build-autopatch && ctest --output-on-failure",
	       "CMakeLists.txt enable_testing");
	expect(commented, NULL, NULL);
}

static void test_make_targets(void **state)
{
	static const char *const phony_only[] = {
	    "Makefile=.PHONY: test check\nall:\n\tcc x.c\n\ttest -f x\n", NULL};
	static const char *const assignments[] = {
	    "Makefile=test := 1\ncheck ::= 2\nX = test: check:\n\ttest:\n# test:\n", NULL};
	static const char *const gnumakefile[] = {"GNUmakefile=all:\n\tcc x.c\n",
						  "Makefile=test:\n\t./t\n", NULL};
	static const char *const lower[] = {"makefile=test::\n\t./t\n", NULL};

	(void)state;
	expect(phony_only, NULL, NULL);
	expect(assignments, NULL, NULL);
	expect(gnumakefile, NULL, NULL); /* make reads GNUmakefile, which has no test target */
	expect(lower, "make test", "makefile target test");
}

static void test_python_files(void **state)
{
	static const char *const top[] = {"calc_test.py=def test(): pass\n", NULL};
	static const char *const deep[] = {"test/a/b/test_deep.py=", NULL};
	static const char *const too_deep[] = {"tests/a/b/c/test_deep.py=", NULL};
	static const char *const not_tests[] = {
	    "tests/helpers.py=", "test.py=", "testing.py=", "src/test_x.py=", NULL};

	(void)state;
	expect(top, "python3 -m pytest -q", "test_*.py files at the top level");
	expect(deep, "python3 -m pytest -q", "test_*.py files in test/");
	expect(too_deep, NULL, NULL);
	expect(not_tests, NULL, NULL);
}

/* The checkout is untrusted: a link in it must not make the host read or list another file.
 * Links to files that would decide are ignored, as are files under a linked directory. */
static void test_links_out_of_the_checkout_are_ignored(void **state)
{
	char *outside = new_dir(), *dir = new_dir(), src[1100], dst[1100];
	static const char *const names[] = {"Makefile", "AGENTS.md",	"pytest.ini",
					    "go.mod",	"package.json", "CMakeLists.txt",
					    NULL};

	(void)state;
	put(outside, "Makefile", "test:\n\t./t\n");
	put(outside, "AGENTS.md", "## Testing\n\n`make test`\n");
	put(outside, "pytest.ini", "[pytest]\n");
	put(outside, "go.mod", "module x\n");
	put(outside, "package.json", "{\"scripts\": {\"test\": \"jest\"}}");
	put(outside, "CMakeLists.txt", "enable_testing()\n");
	put(outside, "CONTRIBUTING.md", "## Testing\n\n`make test`\n");
	put(outside, "test_x.py", "");
	for (const char *const *n = names; *n; n++) {
		snprintf(src, sizeof(src), "%s/%s", outside, *n);
		snprintf(dst, sizeof(dst), "%s/%s", dir, *n);
		assert_int_equal(symlink(src, dst), 0);
	}
	snprintf(dst, sizeof(dst), "%s/.github", dir); /* .github/CONTRIBUTING.md via a link */
	assert_int_equal(symlink(outside, dst), 0);
	snprintf(dst, sizeof(dst), "%s/tests", dir); /* tests/test_x.py via a link */
	assert_int_equal(symlink(outside, dst), 0);
	snprintf(src, sizeof(src), "%s/test_x.py", outside);
	snprintf(dst, sizeof(dst), "%s/test_link.py", dir);
	assert_int_equal(symlink(src, dst), 0);
	expect_none_in(dir);

	/* The same files as real files of the checkout are taken. */
	snprintf(dst, sizeof(dst), "%s/Makefile", dir);
	assert_int_equal(unlink(dst), 0);
	put(dir, "Makefile", "test:\n\t./t\n");
	expect_in(dir, "make test", "Makefile target test");
	rm_dir(dir);
	rm_dir(outside);
}

/* A file larger than the cap is not read at all. */
static void test_big_files_are_ignored(void **state)
{
	char *dir = new_dir();
	size_t n = TESTCMD_FILE_CAP + 1;
	char *big = malloc(n + 1);

	(void)state;
	assert_non_null(big);
	memset(big, '#', n);
	memcpy(big, "test:\n\t./t\n", 11);
	big[n] = '\0';
	put(dir, "Makefile", big);
	expect_none_in(dir);
	big[n - 1] = '\0'; /* exactly the cap: read */
	put(dir, "Makefile", big);
	expect_in(dir, "make test", "Makefile target test");
	free(big);
	rm_dir(dir);
}

static void test_missing_checkout(void **state)
{
	char *c = NULL, *w = NULL;

	(void)state;
	assert_int_equal(testcmd_detect(&c, &w, "/nonexistent/ap-testcmd"), AP_EIO);
	assert_null(c);
	assert_null(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_makefile_beats_pytest),
	    cmocka_unit_test(test_precedence_chain),
	    cmocka_unit_test(test_npm_placeholder_is_not_a_test),
	    cmocka_unit_test(test_documented_command),
	    cmocka_unit_test(test_runner_words),
	    cmocka_unit_test(test_cmake),
	    cmocka_unit_test(test_make_targets),
	    cmocka_unit_test(test_python_files),
	    cmocka_unit_test(test_links_out_of_the_checkout_are_ignored),
	    cmocka_unit_test(test_big_files_are_ignored),
	    cmocka_unit_test(test_missing_checkout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
