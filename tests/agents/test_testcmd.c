/* SPDX-License-Identifier: MIT */
/* tests/agents/test_testcmd.c - the one test-command detector (agents/testcmd.h), over
 * temporary checkouts shaped like real repositories: its precedence, npm's placeholder
 * script, documented commands, CMake, and links that point out of the checkout. */
#include "agents/testcmd.h"
#include "common/err.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

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

/* Nothing is detected in dir; the message (what was looked at) in msg when it is not NULL. */
static void expect_none_msg(const char *dir, char *msg, size_t cap)
{
	char *c = (char *)"x", *w = (char *)"x";

	assert_int_equal(testcmd_detect(&c, &w, dir), AP_ENOTFOUND);
	assert_null(c);
	assert_null(w);
	if (strncmp(ap_error_last(), "no test command detected; looked at: ", 37) != 0)
		fail_msg("message: %s", ap_error_last());
	if (msg)
		snprintf(msg, cap, "%s", ap_error_last());
	ap_error_clear();
}

static void expect_none_in(const char *dir)
{
	expect_none_msg(dir, NULL, 0);
}

/* The message of a failed detection in dir contains each of the NULL-terminated parts. */
static void expect_looked_at(const char *dir, const char *const *parts)
{
	char msg[4096];

	expect_none_msg(dir, msg, sizeof(msg));
	for (; *parts; parts++)
		if (!strstr(msg, *parts))
			fail_msg("\"%s\" is not in: %s", *parts, msg);
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
 * by one and watch the answer move up (agents/testcmd.h gives the order). */
static void test_precedence_chain(void **state)
{
	char *dir = new_dir();

	(void)state;
	expect_none_in(dir);
	put(dir, "pkg/tests/unit/test_ops.py", "def test_ops(): pass\n");
	expect_in(dir, "python3 -m pytest -q", "test files such as pkg/tests/unit/test_ops.py");
	put(dir, "meson.build", "project('x', 'c')\ntest('t', executable('t', 't.c'))\n");
	expect_in(dir, "meson setup build-autopatch && meson test -C build-autopatch",
		  "meson.build");
	put(dir, "CMakeLists.txt",
	    "cmake_minimum_required(VERSION 3.16)\nproject(x C)\n"
	    "include(CTest)\n");
	expect_in(dir,
		  "cmake -S . -B build-autopatch && cmake --build build-autopatch && "
		  "cd build-autopatch && ctest --output-on-failure",
		  "CMakeLists.txt include(CTest)");
	put(dir, "build.gradle.kts", "plugins { java }\n");
	expect_in(dir, "gradle test", "build.gradle.kts");
	put(dir, "gradlew", "#!/bin/sh\n");
	expect_in(dir, "./gradlew test", "build.gradle.kts and the wrapper gradlew");
	put(dir, "pom.xml", "<project><modelVersion>4.0.0</modelVersion></project>\n");
	expect_in(dir, "mvn -B test", "pom.xml");
	put(dir, "Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n");
	expect_in(dir, "cargo test --no-fail-fast", "Cargo.toml");
	put(dir, "go.mod", "module example.com/x\n\ngo 1.22\n");
	expect_in(dir, "go test ./...", "go.mod");
	put(dir, "setup.cfg", "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n");
	expect_in(dir, "python3 -m pytest -q", "setup.cfg [tool:pytest]");
	put(dir, "tox.ini", "[pytest]\naddopts = -q\n"); /* no [tox]: only pytest's settings */
	expect_in(dir, "python3 -m pytest -q", "tox.ini [pytest]");
	put(dir, "pyproject.toml", "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n");
	expect_in(dir, "python3 -m pytest -q", "pyproject.toml [tool.pytest.ini_options]");
	put(dir, "pytest.ini", "");
	expect_in(dir, "python3 -m pytest -q", "pytest.ini");
	put(dir, "package.json", "{\"name\": \"x\", \"scripts\": {\"test\": \"jest --ci\"}}\n");
	expect_in(dir, "npm test", "package.json scripts.test");
	put(dir, "justfile",
	    "set shell := [\"bash\", \"-c\"]\n\n@test *ARGS:\n    pytest {{ARGS}}\n");
	expect_in(dir, "just test", "justfile recipe test");
	put(dir, "Makefile", "all:\n\tcc -o x x.c\ncheck: all\n\t./x --self-test\n");
	expect_in(dir, "make check", "Makefile target check");
	put(dir, "Makefile", "all:\n\tcc -o x x.c\ncheck test: all\n\t./x --self-test\n");
	expect_in(dir, "make test", "Makefile target test");
	put(dir, "noxfile.py",
	    "import nox\n\n@nox.session\ndef tests(session):\n"
	    "    session.run('pytest')\n");
	expect_in(dir, "nox -s tests", "noxfile.py session tests");
	put(dir, "tox.ini",
	    "[tox]\nenvlist = py3\n\n[testenv]\ndeps = pytest\n"
	    "commands = pytest {posargs:tests}\n\n[pytest]\naddopts = -q\n");
	expect_in(dir, "pytest tests", "tox.ini [testenv] commands");
	put(dir, ".github/workflows/ci.yml",
	    "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - uses: actions/checkout@v4\n      - run: pip install -e .\n"
	    "      - name: Unit tests\n        run: python -m pytest -q tests/unit\n");
	expect_in(dir, "python -m pytest -q tests/unit",
		  ".github/workflows/ci.yml job test, step \"Unit tests\"");
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

/* Test files at any depth (bounded), inside the package too; the shallowest is named. */
static void test_python_files(void **state)
{
	static const char *const top[] = {"calc_test.py=def test(): pass\n", NULL};
	static const char *const toolz[] = {
	    "toolz/__init__.py=", "toolz/itertoolz.py=", "toolz/tests/test_itertoolz.py=", NULL};
	static const char *const pyflakes[] = {
	    "pyflakes/test/harness.py=", "pyflakes/test/test_imports.py=", NULL};
	static const char *const shallowest[] = {"a/b/c/test_deep.py=", "x/test_shallow.py=", NULL};
	static const char *const level6[] = {"a/b/c/d/e/f/test_x.py=", NULL};
	static const char *const level7[] = {"a/b/c/d/e/f/g/test_x.py=", NULL};
	static const char *const skipped[] = {
	    "node_modules/m/test_a.py=", ".tox/py3/test_b.py=", "venv/lib/test_c.py=",
	    "src/__pycache__/test_d.py=", NULL};
	static const char *const not_tests[] = {
	    "tests/helpers.py=", "test.py=", "testing.py=", "src/mytest_x.py=", NULL};

	(void)state;
	expect(top, "python3 -m pytest -q", "test files such as calc_test.py");
	expect(toolz, "python3 -m pytest -q", "test files such as toolz/tests/test_itertoolz.py");
	expect(pyflakes, "python3 -m pytest -q",
	       "test files such as pyflakes/test/test_imports.py");
	expect(shallowest, "python3 -m pytest -q", "test files such as x/test_shallow.py");
	expect(level6, "python3 -m pytest -q", "test files such as a/b/c/d/e/f/test_x.py");
	expect(level7, NULL, NULL);
	expect(skipped, NULL, NULL);
	expect(not_tests, NULL, NULL);
}

/* The walk stops after TESTCMD_WALK_ENTRIES entries and says so. */
static void test_walk_is_bounded(void **state)
{
	char tmpl[] = "/dev/shm/ap-testcmd-XXXXXX", *dir, path[1100];
	static const char *const parts[] = {"entries read, the most read", NULL};

	(void)state;
	/* 20,000 files: on tmpfs when there is one (a busy disk takes a millisecond a file). */
	dir = mkdtemp(tmpl);
	if (!dir) {
		char alt[] = "/tmp/ap-testcmd-XXXXXX";

		dir = mkdtemp(alt);
		assert_non_null(dir);
		dir = strdup(dir);
	} else {
		dir = strdup(dir);
	}
	assert_non_null(dir);
	put(dir, "a/f", "");
	for (int i = 0; i < TESTCMD_WALK_ENTRIES + 10; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/a/f%05d", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		close(fd);
	}
	put(dir, "z/y/test_late.py", ""); /* a level below the full directory */
	expect_looked_at(dir, parts);
	rm_dir(dir);
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

/* ---- the CI workflow ---- */

/* A Python project's workflow: a lint job first, then a matrix test job whose steps install,
 * lint, run a Windows-only step, test and upload coverage with a secret. The test step alone
 * is the command, with the matrix's first Python version put in. */
static void test_workflow_python_matrix(void **state)
{
	static const char *const files[] = {
	    ".github/workflows/ci.yml="
	    "name: CI\n"
	    "on: [push, pull_request]\n"
	    "jobs:\n"
	    "  lint:\n"
	    "    runs-on: ubuntu-latest\n"
	    "    steps:\n"
	    "      - uses: actions/checkout@v4\n"
	    "      - run: pip install ruff\n"
	    "      - run: ruff check .\n"
	    "  test:\n"
	    "    runs-on: ${{ matrix.os }}\n"
	    "    strategy:\n"
	    "      matrix:\n"
	    "        os: [ubuntu-latest, windows-latest]\n"
	    "        python-version: [\"3.9\", \"3.10\", \"3.12\"]\n"
	    "    steps:\n"
	    "      - uses: actions/checkout@v4\n"
	    "      - uses: actions/setup-python@v5\n"
	    "        with:\n"
	    "          python-version: ${{ matrix.python-version }}\n"
	    "      - name: Install dependencies\n"
	    "        run: |\n"
	    "          python -m pip install --upgrade pip\n"
	    "          pip install -e .[test]\n"
	    "      - name: Lint with flake8\n"
	    "        run: flake8 . --count --show-source\n"
	    "      - name: Windows only\n"
	    "        if: runner.os == 'Windows'\n"
	    "        run: echo windows\n"
	    "      - name: Test with pytest\n"
	    "        run: python -m pytest -q tests --python ${{ matrix.python-version }}\n"
	    "      - name: Upload coverage\n"
	    "        run: codecov --token ${{ secrets.CODECOV_TOKEN }}\n",
	    "Makefile=test:\n\tpytest\n", NULL};

	(void)state;
	expect(files, "python -m pytest -q tests --python 3.9",
	       ".github/workflows/ci.yml job test, step \"Test with pytest\"; "
	       "matrix.python-version = 3.9 (the first of 3 values)");
}

/* GitHub's CMake starter workflow: env and workspace expressions, a working directory, and
 * every step up to the test is kept (configure and build must run first). */
static void test_workflow_cmake_starter(void **state)
{
	static const char *const files[] = {
	    ".github/workflows/cmake-single-platform.yml="
	    "name: CMake on a single platform\n"
	    "on:\n  push:\n    branches: [ \"main\" ]\n"
	    "env:\n  BUILD_TYPE: Release\n"
	    "jobs:\n"
	    "  build:\n"
	    "    runs-on: ubuntu-latest\n"
	    "    steps:\n"
	    "    - uses: actions/checkout@v4\n"
	    "    - name: Configure CMake\n"
	    "      run: cmake -B ${{github.workspace}}/build "
	    "-DCMAKE_BUILD_TYPE=${{env.BUILD_TYPE}}\n"
	    "    - name: Build\n"
	    "      run: cmake --build ${{github.workspace}}/build --config ${{env.BUILD_TYPE}}\n"
	    "    - name: Test\n"
	    "      working-directory: ${{github.workspace}}/build\n"
	    "      run: ctest -C ${{env.BUILD_TYPE}}\n",
	    "CMakeLists.txt=enable_testing()\n", NULL};

	(void)state;
	expect(files,
	       "cmake -B ./build -DCMAKE_BUILD_TYPE=Release && cmake --build ./build --config "
	       "Release && cd ./build && ctest -C Release",
	       ".github/workflows/cmake-single-platform.yml job build, steps \"Configure CMake\", "
	       "\"Build\", \"Test\"");
}

/* Go: a build step, then a step that vets (lint: dropped) and tests. A step in another
 * directory before the test runs in a subshell; a line with || keeps its meaning. */
static void test_workflow_steps_kept_and_dropped(void **state)
{
	static const char *const go[] = {".github/workflows/go.yml="
					 "jobs:\n"
					 "  build:\n"
					 "    runs-on: ubuntu-latest\n"
					 "    steps:\n"
					 "    - uses: actions/setup-go@v5\n"
					 "    - name: Build\n"
					 "      run: go build -v ./...\n"
					 "    - name: Test\n"
					 "      run: |\n"
					 "        go vet ./...\n"
					 "        go test -v \\\n"
					 "          ./...\n",
					 NULL};
	static const char *const subdir[] = {".github/workflows/ci.yaml="
					     "jobs:\n"
					     "  unit-tests:\n"
					     "    runs-on: [self-hosted, linux]\n"
					     "    defaults:\n"
					     "      run:\n"
					     "        working-directory: native\n"
					     "    steps:\n"
					     "    - name: Build the helper\n"
					     "      run: make helper\n"
					     "    - name: Run\n"
					     "      working-directory: .\n"
					     "      run: |\n"
					     "        rm -f stale.db || true\n"
					     "        npm run test:unit\n"
					     "    - name: Docs\n"
					     "      run: make docs\n",
					     NULL};

	(void)state;
	expect(go, "go build -v ./... && go test -v ./...",
	       ".github/workflows/go.yml job build, steps \"Build\", \"Test\"");
	expect(subdir,
	       "(cd native && make helper) && (rm -f stale.db || true) && npm run test:unit",
	       ".github/workflows/ci.yaml job unit-tests, steps \"Build the helper\", \"Run\"");
}

/* GitHub's Python starter workflow (an install step with a one-line `if`, flake8 twice), a
 * step that tests and then installs and runs a style checker, runners behind launchers, and
 * what sh cannot run the way bash does. */
static void test_workflow_starters(void **state)
{
	static const char *const python_package[] = {
	    ".github/workflows/python-package.yml="
	    "name: Python package\n"
	    "on: [push]\n"
	    "jobs:\n"
	    "  build:\n"
	    "    runs-on: ubuntu-latest\n"
	    "    strategy:\n"
	    "      fail-fast: false\n"
	    "      matrix:\n"
	    "        python-version: [\"3.9\", \"3.10\", \"3.11\"]\n"
	    "    steps:\n"
	    "    - uses: actions/checkout@v4\n"
	    "    - name: Set up Python ${{ matrix.python-version }}\n"
	    "      uses: actions/setup-python@v3\n"
	    "      with:\n"
	    "        python-version: ${{ matrix.python-version }}\n"
	    "    - name: Install dependencies\n"
	    "      run: |\n"
	    "        python -m pip install --upgrade pip\n"
	    "        python -m pip install flake8 pytest\n"
	    "        if [ -f requirements.txt ]; then pip install -r requirements.txt; fi\n"
	    "    - name: Lint with flake8\n"
	    "      run: |\n"
	    "        # stop the build if there are Python syntax errors or undefined names\n"
	    "        flake8 . --count --select=E9,F63,F7,F82 --show-source --statistics\n"
	    "        flake8 . --count --exit-zero --max-complexity=10 --statistics\n"
	    "    - name: Test with pytest\n"
	    "      run: |\n"
	    "        pytest\n",
	    NULL};
	static const char *const test_then_style[] = {
	    ".github/workflows/test.yml="
	    "jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - name: PyTest\n        run: |\n"
	    "          coverage run -m pytest --doctest-modules\n"
	    "          pip install pycodestyle\n"
	    "          pycodestyle --ignore=\"E731,W503\" -r --show-source .\n",
	    NULL};
	static const char *const node[] = {
	    ".github/workflows/node.js.yml="
	    "jobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "    - run: npm ci\n    - run: npm run build --if-present\n"
	    "    - run: npx jest --ci\n    - run: docker build .\n",
	    NULL};
	static const char *const venv[] = {
	    ".github/workflows/ci.yml="
	    "jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "    - name: Tests\n      shell: bash\n      run: |\n"
	    "        source .venv/bin/activate\n        poetry run pytest -x\n",
	    NULL};
	static const char *const bashisms[] = {
	    ".github/workflows/ci.yml="
	    "jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "    - run: '[[ -n \"$CI\" ]] && pytest'\n",
	    NULL};
	static const char *const bash_parts[] = {"uses bash-only syntax", NULL};
	/* Names that only look like tests: "latest", a skip word with "test", an echo. */
	static const char *const lookalikes[] = {
	    ".github/workflows/ci.yml="
	    "jobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "    - name: Build latest\n      run: make all\n"
	    "    - name: Install test dependencies\n      run: ./scripts/fetch-fixtures.sh\n"
	    "    - name: Test summary\n      run: echo \"all good\"\n",
	    NULL};
	static const char *const lookalike_parts[] = {
	    ".github/workflows/ci.yml (no job runs tests)", NULL};
	static const char *const summary_after[] = {
	    ".github/workflows/ci.yml="
	    "jobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "    - name: Unit\n      run: ./run_tests.sh --fast\n"
	    "    - name: Test summary\n      run: echo \"all good\"\n",
	    NULL};
	static const char *const include[] = {
	    ".github/workflows/ci.yml="
	    "jobs:\n  test:\n    runs-on: ubuntu-latest\n    strategy:\n      matrix:\n"
	    "        include:\n          - toxenv: py311\n          - toxenv: py312\n"
	    "    steps:\n    - run: tox -e ${{ matrix.toxenv }}\n",
	    NULL};
	char *dir;

	(void)state;
	expect(python_package, "pytest",
	       ".github/workflows/python-package.yml job build, step \"Test with pytest\"");
	expect(test_then_style, "coverage run -m pytest --doctest-modules",
	       ".github/workflows/test.yml job test, step \"PyTest\"");
	expect(node, "npm run build --if-present && npx jest --ci",
	       ".github/workflows/node.js.yml job build, steps \"npm run build --if-present\", "
	       "\"npx jest --ci\"");
	expect(venv, ". .venv/bin/activate && poetry run pytest -x",
	       ".github/workflows/ci.yml job test, step \"Tests\"");
	expect(include, "tox -e py311",
	       ".github/workflows/ci.yml job test, step \"tox -e ${{ matrix.toxenv }}\"; "
	       "matrix.toxenv = py311 (the first of 2 values)");
	dir = repo_with(lookalikes);
	expect_looked_at(dir, lookalike_parts);
	rm_dir(dir);
	expect(summary_after, "./run_tests.sh --fast",
	       ".github/workflows/ci.yml job build, step \"Unit\"");
	dir = repo_with(bashisms);
	expect_looked_at(dir, bash_parts);
	rm_dir(dir);
}

/* Jobs that cannot be run here are passed over or refused, and the next source answers; the
 * "not found" message says why for each file. */
static void test_workflow_refusals(void **state)
{
	static const char *const secret[] = {
	    ".github/workflows/ci.yml=jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - run: pytest --token ${{ secrets.API_TOKEN }}\n",
	    NULL};
	static const char *const secret_parts[] = {
	    ".github/workflows/ci.yml (job test: ${{ secrets.API_TOKEN }} has no value outside CI)",
	    NULL};
	static const char *const construct[] = {
	    ".github/workflows/ci.yml=jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - name: Test\n        run: |\n          if [ -f x ]; then\n            make "
	    "test\n"
	    "          fi\n",
	    NULL};
	static const char *const construct_parts[] = {"shell construct over several lines", NULL};
	static const char *const windows[] = {
	    ".github/workflows/win.yml=jobs:\n  test:\n    runs-on: windows-latest\n    steps:\n"
	    "      - run: pytest\n",
	    "go.mod=module x\n", NULL};
	static const char *const no_matrix_key[] = {
	    ".github/workflows/ci.yml=jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - run: tox -e ${{ matrix.toxenv }}\n",
	    NULL};
	static const char *const no_matrix_parts[] = {"${{ matrix.toxenv }} has no value", NULL};
	static const char *const pwsh[] = {
	    ".github/workflows/ci.yml=jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - run: Invoke-Pester\n        shell: pwsh\n        name: Test\n",
	    NULL};
	static const char *const reusable[] = {".github/workflows/ci.yml=jobs:\n  test:\n    uses: "
					       "org/repo/.github/workflows/t.yml@v1\n",
					       NULL};
	static const char *const lint_only[] = {
	    ".github/workflows/lint.yml=jobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - run: npm ci\n      - run: npm run lint\n      - run: npx prettier --check .\n",
	    NULL};
	static const char *const no_job_parts[] = {".github/workflows/ci.yml (no job runs tests)",
						   NULL};
	static const char *const lint_parts[] = {".github/workflows/lint.yml (no job runs tests)",
						 NULL};
	static const char *const not_yaml[] = {".github/workflows/ci.yml=jobs: [\n  - {\n", NULL};
	static const char *const not_yaml_parts[] = {".github/workflows/ci.yml (not YAML (line ",
						     NULL};
	static const char *const not_workflow[] = {".github/workflows/ci.yml=- a\n- b\n", NULL};
	static const char *const not_workflow_parts[] = {"not a workflow: no jobs", NULL};
	char *dir;

	(void)state;
	dir = repo_with(secret);
	expect_looked_at(dir, secret_parts);
	put(dir, "Makefile", "test:\n\tpytest\n");
	expect_in(dir, "make test", "Makefile target test");
	rm_dir(dir);
	dir = repo_with(construct);
	expect_looked_at(dir, construct_parts);
	rm_dir(dir);
	expect(windows, "go test ./...", "go.mod");
	dir = repo_with(no_matrix_key);
	expect_looked_at(dir, no_matrix_parts);
	rm_dir(dir);
	dir = repo_with(pwsh);
	expect_looked_at(dir, no_job_parts);
	rm_dir(dir);
	dir = repo_with(reusable);
	expect_looked_at(dir, no_job_parts);
	rm_dir(dir);
	dir = repo_with(lint_only);
	expect_looked_at(dir, lint_parts);
	rm_dir(dir);
	dir = repo_with(not_yaml);
	expect_looked_at(dir, not_yaml_parts);
	rm_dir(dir);
	dir = repo_with(not_workflow);
	expect_looked_at(dir, not_workflow_parts);
	rm_dir(dir);
}

/* Workflow files with "test" in the name are tried first, then "ci", then the rest; in a
 * file, jobs that mention test first. */
static void test_workflow_file_and_job_order(void **state)
{
	static const char *const files[] = {
	    ".github/workflows/a-release.yml=jobs:\n  build:\n    runs-on: ubuntu-latest\n"
	    "    steps:\n      - run: make check-release\n",
	    ".github/workflows/ci.yml=jobs:\n  build:\n    runs-on: ubuntu-latest\n"
	    "    steps:\n      - run: make check\n",
	    ".github/workflows/tests.yml=jobs:\n"
	    "  build:\n    runs-on: ubuntu-latest\n    steps:\n      - run: make check\n"
	    "  other:\n    name: Unit tests\n    runs-on: ubuntu-latest\n"
	    "    steps:\n      - run: make unit-test\n",
	    NULL};

	(void)state;
	expect(files, "make unit-test",
	       ".github/workflows/tests.yml job other, step \"make unit-test\"");
}

/* A symbolic link among the workflows, and a workflow over the cap, are not read; the list
 * of what was looked at says so. */
static void test_workflow_links_and_big_files(void **state)
{
	char *outside = new_dir(), *dir = new_dir(), src[1100], dst[1100];
	size_t n = TESTCMD_FILE_CAP + 100;
	char *big = malloc(n + 1);
	static const char *const parts[] = {
	    ".github/workflows/ci.yml (a symbolic link or not a regular file: ignored)",
	    ".github/workflows/huge.yml (larger than 256 KiB: ignored)", NULL};

	(void)state;
	assert_non_null(big);
	put(outside, "ci.yml",
	    "jobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - run: pytest\n");
	put(dir, ".github/workflows/keep", "");
	snprintf(src, sizeof(src), "%s/ci.yml", outside);
	snprintf(dst, sizeof(dst), "%s/.github/workflows/ci.yml", dir);
	assert_int_equal(symlink(src, dst), 0);
	memset(big, ' ', n);
	memcpy(big, "jobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n      - run: pytest\n",
	       66);
	big[n] = '\0';
	put(dir, ".github/workflows/huge.yml", big);
	expect_looked_at(dir, parts);
	free(big);
	rm_dir(dir);
	rm_dir(outside);
}

/* ---- tox and nox ---- */

static void expect_tox(const char *ini, int rc, const char *cmd)
{
	char *c = (char *)"x";

	assert_int_equal(testcmd_tox_commands(&c, ini, strlen(ini)), rc);
	if (cmd) {
		assert_non_null(c);
		assert_string_equal(c, cmd);
	} else {
		assert_null(c);
	}
	free(c);
	ap_error_clear();
}

static void test_tox_commands(void **state)
{
	(void)state;
	expect_tox("[tox]\nenvlist = py39, py312, lint\n\n"
		   "[testenv]\ndeps =\n    pytest\n    coverage\n"
		   "commands =\n    - coverage erase\n"
		   "    coverage run -m pytest {posargs:tests/unit}\n"
		   "    py39: python -c 'import sys'\n"
		   "    {envpython} -m doctest README.rst {posargs}\n"
		   "setenv = X=1\n\n[testenv:lint]\ncommands = ruff check .\n",
		   0,
		   "(coverage erase || true) && coverage run -m pytest tests/unit && python3 -m "
		   "doctest README.rst");
	expect_tox("[testenv:tests]\ncommands = pytest {toxinidir}/tests\n", 0, "pytest ./tests");
	expect_tox("[tox]\nenvlist = py3\n\n[testenv]\ndeps = pytest\n", AP_ENOTFOUND, NULL);
	expect_tox("[testenv]\ncommands = {envbindir}/pytest\n", AP_EINVAL, NULL);
	expect_tox("[testenv]\ncommands = pytest > log.txt\n", AP_EINVAL, NULL);
	expect_tox("[testenv]\ncommands = pytest \\\n  tests\n", AP_EINVAL, NULL);
	expect_tox("", AP_ENOTFOUND, NULL);
	/* found by fuzz_testcmd: a {posargs} default brings its own characters; a key line
	 * without '=' must not reach into the next line */
	expect_tox("[testenv]\ncommands = pytest {posargs:a;rm}\n", AP_EINVAL, NULL);
	expect_tox("[testenv]\ncommands = pytest {posargs:t\xc3\xa9}\n", AP_EINVAL, NULL);
	expect_tox("[testenv]\ncommands\n= pytest\n", AP_ENOTFOUND, NULL);
}

static void test_tox_and_nox_files(void **state)
{
	static const char *const tox_unreadable[] = {
	    "tox.ini=[tox]\nenvlist = py3\n[testenv]\ncommands = {envbindir}/pytest\n", NULL};
	static const char *const tox_no_commands[] = {
	    "tox.ini=[tox]\nenvlist = py3\n[testenv]\ndeps = pytest\n", NULL};
	static const char *const nox_plain[] = {
	    "noxfile.py=import nox\n@nox.session\ndef lint(s):\n    s.run('ruff')\n", NULL};
	static const char *const tox_flake8_only[] = {"tox.ini=[flake8]\nmax-line-length = 99\n",
						      NULL};
	static const char *const flake8_parts[] = {"tox.ini (no [tox] or [testenv] section)", NULL};
	char *dir;

	(void)state;
	expect(tox_unreadable, "tox",
	       "tox.ini (its commands are not read: a command uses the substitution "
	       "{envbindir})");
	expect(tox_no_commands, "tox",
	       "tox.ini (its commands are not read: no commands in "
	       "[testenv])");
	expect(nox_plain, "nox", "noxfile.py");
	dir = repo_with(tox_flake8_only);
	expect_looked_at(dir, flake8_parts);
	rm_dir(dir);
}

/* ---- "not found" lists everything looked at ---- */

static void test_not_found_lists_everything(void **state)
{
	static const char *const files[] = {
	    "AGENTS.md=# Notes\n\n## Style\n\n`make lint`\n",
	    "Makefile=all:\n\tcc x.c\nlint:\n\tclang-format --dry-run x.c\n",
	    "package.json={\"scripts\": {\"test\": \"echo \\\"Error: no test specified\\\" && "
	    "exit 1\"}}",
	    "CMakeLists.txt=project(x C)\nadd_executable(x x.c)\n",
	    "tox.ini=[flake8]\nmax-line-length = 99\n",
	    ".github/workflows/lint.yml=jobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n"
	    "      - run: npm run lint\n",
	    "src/x.c=int main(void) { return 0; }\n",
	    NULL};
	static const char *const parts[] = {
	    "AGENTS.md (no single test command under a heading about tests)",
	    ".github/workflows/lint.yml (no job runs tests)",
	    "tox.ini (no [tox] or [testenv] section)",
	    "Makefile (no test or check target)",
	    "package.json (scripts.test is npm's placeholder)",
	    "CMakeLists.txt (no enable_testing, add_test or include(CTest))",
	    "no test_*.py or *_test.py file within 6 directory levels",
	    "; not present: CONTRIBUTING.md, .github/CONTRIBUTING.md, docs/CONTRIBUTING.md, "
	    "noxfile.py, GNUmakefile, makefile, justfile, Justfile, .justfile, pytest.ini, "
	    "pyproject.toml, setup.cfg, conftest.py, go.mod, Cargo.toml, pom.xml, build.gradle, "
	    "build.gradle.kts, settings.gradle, settings.gradle.kts, meson.build",
	    NULL};
	static const char *const empty_parts[] = {".github/workflows/*.yml", "AGENTS.md", "pom.xml",
						  NULL};
	char *dir = repo_with(files), *empty = new_dir();

	(void)state;
	expect_looked_at(dir, parts);
	expect_looked_at(empty, empty_parts);
	rm_dir(dir);
	rm_dir(empty);
}

/* Maven and Gradle; a gradlew that is a link is no wrapper. */
static void test_jvm(void **state)
{
	static const char *const maven[] = {"pom.xml=<project/>\n", "build.gradle=\n", NULL};
	static const char *const gradle[] = {"settings.gradle=rootProject.name = 'x'\n", NULL};
	char *dir = new_dir(), dst[1100];

	(void)state;
	expect(maven, "mvn -B test", "pom.xml");
	expect(gradle, "gradle test", "settings.gradle");
	put(dir, "build.gradle", "plugins { id 'java' }\n");
	snprintf(dst, sizeof(dst), "%s/gradlew", dir);
	assert_int_equal(symlink("/bin/sh", dst), 0);
	expect_in(dir, "gradle test", "build.gradle");
	rm_dir(dir);
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
	    cmocka_unit_test(test_walk_is_bounded),
	    cmocka_unit_test(test_workflow_python_matrix),
	    cmocka_unit_test(test_workflow_cmake_starter),
	    cmocka_unit_test(test_workflow_steps_kept_and_dropped),
	    cmocka_unit_test(test_workflow_refusals),
	    cmocka_unit_test(test_workflow_starters),
	    cmocka_unit_test(test_workflow_file_and_job_order),
	    cmocka_unit_test(test_workflow_links_and_big_files),
	    cmocka_unit_test(test_tox_commands),
	    cmocka_unit_test(test_tox_and_nox_files),
	    cmocka_unit_test(test_not_found_lists_everything),
	    cmocka_unit_test(test_jvm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
