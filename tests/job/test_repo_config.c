/* SPDX-License-Identifier: MIT */
/* tests/job/test_repo_config.c - .github/autopatch.yml parsing, errors that quote the line,
 * the test command (from the file, else the shared detector) and the path globs the diff must
 * respect. */
#include "common/err.h"
#include "job/repo_config.h"

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

static repo_config *parse_ok(const char *text)
{
	repo_config *c = NULL;
	int rc = repo_config_parse(&c, text, strlen(text));

	if (rc)
		fail_msg("parse failed: %s", ap_error_last());
	return c;
}

static const char *parse_err(const char *text)
{
	repo_config *c = NULL;

	assert_int_equal(repo_config_parse(&c, text, strlen(text)), AP_EINVAL);
	assert_null(c);
	return ap_error_last();
}

static void test_full_file(void **state)
{
	repo_config *c = parse_ok("# settings\n"
				  "image: python:3.12-slim\n"
				  "setup: pip install -e .\n"
				  "test: python3 -m pytest -q tests\n"
				  "max_iterations: 3\n"
				  "paths:\n"
				  "  allow: [\"src/**\", \"tests/**\"]\n"
				  "  deny:\n"
				  "    - src/vendor/**\n"
				  "network:\n"
				  "  - pypi.org:443\n"
				  "  - files.example\n");

	(void)state;
	assert_true(c->from_file);
	assert_string_equal(c->image, "python:3.12-slim");
	assert_string_equal(c->setup, "pip install -e .");
	assert_string_equal(c->test, "python3 -m pytest -q tests");
	assert_int_equal(c->max_iterations, 3);
	assert_string_equal(c->allow[0], "src/**");
	assert_string_equal(c->allow[1], "tests/**");
	assert_null(c->allow[2]);
	assert_string_equal(c->deny[0], "src/vendor/**");
	assert_null(c->deny[1]);
	assert_string_equal(c->network[0], "pypi.org:443");
	assert_string_equal(c->network[1], "files.example:443"); /* default port */
	assert_null(c->network[2]);
	assert_non_null(strstr(c->test_source, ".github/autopatch.yml"));
	repo_config_free(c);
}

static void test_empty_file_is_defaults(void **state)
{
	repo_config *c = parse_ok("# nothing configured\n");

	(void)state;
	assert_null(c->image);
	assert_null(c->test);
	assert_int_equal(c->max_iterations, 0);
	assert_null(c->allow[0]);
	assert_null(c->deny[0]);
	assert_null(c->network[0]);
	repo_config_free(c);
}

static void test_unknown_key_quotes_line(void **state)
{
	const char *m = parse_err("image: x\ntest: make test\nmax_iteration: 3\n");

	(void)state;
	assert_non_null(strstr(m, "line 3"));
	assert_non_null(strstr(m, "`max_iteration: 3`"));
	assert_non_null(strstr(m, "unknown key \"max_iteration\""));
	assert_non_null(strstr(m, "max_iterations")); /* lists what is allowed */
}

static void test_bad_values_are_named(void **state)
{
	const char *m;

	(void)state;
	m = parse_err("max_iterations: lots\n");
	assert_non_null(strstr(m, "line 1"));
	assert_non_null(strstr(m, "whole number"));
	m = parse_err("test: make\nmax_iterations: 99\n");
	assert_non_null(strstr(m, "line 2"));
	assert_non_null(strstr(m, "between 1 and 20"));
	m = parse_err("image:\n  - a\n  - b\n");
	assert_non_null(strstr(m, "\"image\" must be a string"));
	m = parse_err("paths:\n  allow: [\"src/**\"]\n  only: [\"x\"]\n");
	assert_non_null(strstr(m, "line 3"));
	assert_non_null(strstr(m, "unknown key \"only\" under \"paths\""));
	m = parse_err("paths:\n  deny: [\"../etc/**\"]\n");
	assert_non_null(strstr(m, "\"..\""));
	m = parse_err("paths: [\"src/**\"]\n");
	assert_non_null(strstr(m, "\"paths\" must be a mapping"));
	m = parse_err("network:\n  - \"evil host:80\"\n");
	assert_non_null(strstr(m, "line 2"));
	assert_non_null(strstr(m, "network entry"));
	m = parse_err("network: [\"pypi.org:99999\"]\n");
	assert_non_null(strstr(m, "bad port"));
	m = parse_err("test: a\ntest: b\n");
	assert_non_null(strstr(m, "given twice"));
	m = parse_err("setup: ~\n");
	assert_non_null(strstr(m, "\"setup\" is empty"));
	m = parse_err("- just\n- a list\n");
	assert_non_null(strstr(m, "must be a mapping"));
}

/* The Tester's limits per repository: deadlines in seconds and the weak-evidence opt-in. */
static void test_tester_limits(void **state)
{
	repo_config *c = parse_ok("test: make test\nsetup_timeout: 60\nrepro_timeout: 5\n"
				  "suite_timeout: 3600\nallow_weak_evidence: true\n");
	const char *m;

	(void)state;
	assert_int_equal(c->setup_timeout, 60);
	assert_int_equal(c->repro_timeout, 5);
	assert_int_equal(c->suite_timeout, 3600);
	assert_true(c->allow_weak_evidence);
	repo_config_free(c);
	c = parse_ok("allow_weak_evidence: false\n");
	assert_false(c->allow_weak_evidence);
	assert_int_equal(c->repro_timeout, 0); /* 0: the Tester's default */
	repo_config_free(c);
	m = parse_err("repro_timeout: 0\n");
	assert_non_null(strstr(m, "\"repro_timeout\" must be between 1 and 86400"));
	m = parse_err("suite_timeout: 10m\n");
	assert_non_null(strstr(m, "whole number"));
	m = parse_err("test: x\nallow_weak_evidence: maybe\n");
	assert_non_null(strstr(m, "line 2"));
	assert_non_null(strstr(m, "must be true or false"));
	m = parse_err("allow_weak_evidence: \"true\"\n");
	assert_non_null(strstr(m, "must be true or false"));
	m = parse_err("suite_timout: 5\n");
	assert_non_null(strstr(m, "suite_timeout")); /* the list of allowed keys names it */
}

static void test_syntax_error_quotes_line(void **state)
{
	const char *m = parse_err("image: a\ntest: \"unterminated\nsetup: b\n");

	(void)state;
	assert_non_null(strstr(m, "not valid YAML"));
	assert_non_null(strstr(m, ".github/autopatch.yml line "));
}

static void test_size_cap(void **state)
{
	size_t n = REPO_CONFIG_MAX_BYTES + 1;
	char *big = malloc(n + 1);
	repo_config *c = NULL;

	(void)state;
	memset(big, '#', n);
	big[n] = '\0';
	assert_int_equal(repo_config_parse(&c, big, n), AP_ETOOBIG);
	assert_null(c);
	free(big);
}

static void test_globs(void **state)
{
	(void)state;
	assert_true(repo_config_glob("src/**", "src/a/b/c.py"));
	assert_true(repo_config_glob("src/**", "src/x"));
	assert_false(repo_config_glob("src/**", "srcx/a"));
	assert_true(repo_config_glob("*.py", "calc.py"));
	assert_false(repo_config_glob("*.py", "pkg/calc.py")); /* '*' stays in one segment */
	assert_true(repo_config_glob("**/test_*.py", "test_a.py"));
	assert_true(repo_config_glob("**/test_*.py", "a/b/test_a.py"));
	assert_false(repo_config_glob("**/test_*.py", "a/b/a_test.py"));
	assert_true(repo_config_glob("docs/?.md", "docs/a.md"));
	assert_false(repo_config_glob("docs/?.md", "docs/ab.md"));
	assert_true(repo_config_glob("[a-c]*.c", "b.c"));
	assert_false(repo_config_glob("[!a-c]*.c", "b.c"));
	assert_true(repo_config_glob(".github/workflows/**", ".github/workflows/ci.yml"));
}

/* The repository's own path rules: NULL when allowed, else a phrase naming the glob. The
 * rules every patch obeys (autopatch's own configuration, .git, ...) are github/patch.c's,
 * tested in tests/github/test_patch.c. */
static void test_path_policy(void **state)
{
	repo_config *c = parse_ok("paths:\n  allow: [\"calc/**\", \"tests/**\"]\n"
				  "  deny: [\"calc/vendor/**\"]\n");
	char buf[256];
	const char *why;

	(void)state;
	assert_null(repo_config_path_refusal(c, "calc/ops.py", buf, sizeof(buf)));
	assert_null(repo_config_path_refusal(c, "tests/test_ops.py", buf, sizeof(buf)));
	why = repo_config_path_refusal(c, "README.md", buf, sizeof(buf));
	assert_non_null(why);
	assert_string_equal(why, "matches no paths.allow glob in .github/autopatch.yml");
	why = repo_config_path_refusal(c, "calc/vendor/x.py", buf, sizeof(buf));
	assert_non_null(why);
	assert_string_equal(why, "is refused by the paths.deny glob `calc/vendor/**` in "
				 ".github/autopatch.yml");
	/* a glob too long for the caller's buffer is not quoted cut */
	why = repo_config_path_refusal(c, "calc/vendor/x.py", buf, 40);
	assert_string_equal(why, "is refused by a paths.deny glob (too long to quote) in "
				 ".github/autopatch.yml");
	repo_config_free(c);

	c = parse_ok("test: make test\n");
	assert_null(repo_config_path_refusal(c, "anything/at/all.c", buf, sizeof(buf)));
	repo_config_free(c);
}

/* A temporary checkout with the given files ("path=contents"). */
static char *make_repo(const char *const *files)
{
	char tmpl[] = "/tmp/ap-rc-XXXXXX";
	char *dir = strdup(mkdtemp(tmpl));
	char path[512];

	for (; *files; files++) {
		const char *eq = strchr(*files, '=');
		FILE *f;

		snprintf(path, sizeof(path), "%s/%.*s", dir, (int)(eq - *files), *files);
		if (strchr(path + strlen(dir) + 1, '/')) {
			char sub[512];

			snprintf(sub, sizeof(sub), "%s", path);
			*strrchr(sub, '/') = '\0';
			mkdir(sub, 0700);
		}
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(eq + 1, f);
		fclose(f);
	}
	return dir;
}

static void rm_repo(char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	free(dir);
}

/* The loader asks the shared detector (agents/testcmd.c, tested in tests/agents/
 * test_testcmd.c) and says what it chose. A repository with a Makefile test target and pytest
 * tests gets `make test`, as the pipeline always chose (and `autopatch fix` now too). */
static void test_detection_is_the_shared_detector(void **state)
{
	static const char *const make_and_pytest[] = {
	    "Makefile=.PHONY: test\ntest:\n\tpython3 -m pytest -q\n", "pytest.ini=[pytest]\n",
	    "tests/test_calc.py=def test(): pass\n", NULL};
	static const char *const none[] = {"README.md=hi\n", NULL};
	repo_config *c;
	char *dir;

	(void)state;
	dir = make_repo(make_and_pytest);
	assert_int_equal(repo_config_load(&c, dir), 0);
	assert_string_equal(c->test, "make test");
	assert_string_equal(c->test_why, "Makefile target test");
	assert_string_equal(c->test_source, "detected `make test` from Makefile target test (no "
					    "`test` in .github/autopatch.yml)");
	repo_config_free(c);
	rm_repo(dir);

	dir = make_repo(none);
	assert_int_equal(repo_config_load(&c, dir), 0);
	assert_null(c->test);
	assert_null(c->test_why);
	assert_non_null(strstr(c->test_source, "no `test` in .github/autopatch.yml, and no test "
					       "command detected; looked at: "));
	assert_string_equal(ap_error_last(), "");
	repo_config_free(c);
	rm_repo(dir);
}

static void test_load_file_and_detection(void **state)
{
	static const char *const with_file[] = {
	    ".github/autopatch.yml=test: ./run-tests.sh\nmax_iterations: 2\n",
	    "tests/test_a.py=", NULL};
	static const char *const without[] = {"tests/test_a.py=", NULL};
	static const char *const bad[] = {".github/autopatch.yml=image: a\nbogus: 1\n", NULL};
	static const char *const no_test[] = {".github/autopatch.yml=max_iterations: 2\n",
					      "go.mod=module x\n", NULL};
	repo_config *c;
	char *dir;

	(void)state;
	dir = make_repo(with_file);
	assert_int_equal(repo_config_load(&c, dir), 0);
	assert_string_equal(c->test, "./run-tests.sh");
	assert_int_equal(c->max_iterations, 2);
	assert_non_null(strstr(c->test_source, "from .github/autopatch.yml"));
	assert_null(c->test_why); /* from the file, not detected */
	repo_config_free(c);
	rm_repo(dir);

	dir = make_repo(without);
	assert_int_equal(repo_config_load(&c, dir), 0);
	assert_false(c->from_file);
	assert_string_equal(c->test, "python3 -m pytest -q");
	assert_string_equal(c->test_why, "test files such as tests/test_a.py");
	assert_non_null(strstr(c->test_source, "detected"));
	repo_config_free(c);
	rm_repo(dir);

	dir = make_repo(no_test);
	assert_int_equal(repo_config_load(&c, dir), 0);
	assert_true(c->from_file);
	assert_string_equal(c->test, "go test ./...");
	assert_string_equal(c->test_why, "go.mod");
	repo_config_free(c);
	rm_repo(dir);

	dir = make_repo(bad);
	assert_int_equal(repo_config_load(&c, dir), AP_EINVAL);
	assert_non_null(strstr(ap_error_last(), "line 2: `bogus: 1`"));
	rm_repo(dir);
}

static void test_load_refuses_symlink(void **state)
{
	static const char *const files[] = {"x=", NULL};
	char *dir = make_repo(files), path[600];
	repo_config *c = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/.github", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/.github/autopatch.yml", dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(repo_config_load(&c, dir), AP_EDENIED);
	assert_null(c);
	rm_repo(dir);
}

/* A directory symlink on the way (`.github -> <host dir>`) is refused too, and the host file
 * behind it is never read: its content appears in no message. */
static void test_load_refuses_symlinked_directory(void **state)
{
	static const char *const files[] = {"x=", NULL};
	static const char *const host_files[] = {"autopatch.yml=test: echo canary-rc-91f3\n", NULL};
	char *dir = make_repo(files), *host = make_repo(host_files), path[600];
	repo_config *c = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/.github", dir);
	assert_int_equal(symlink(host, path), 0);
	assert_int_equal(repo_config_load(&c, dir), AP_EDENIED);
	assert_null(c);
	assert_non_null(strstr(ap_error_last(), ".github/autopatch.yml"));
	assert_non_null(strstr(ap_error_last(), "symbolic link"));
	assert_null(strstr(ap_error_last(), "canary-rc-91f3"));
	rm_repo(dir);
	rm_repo(host);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_file),
	    cmocka_unit_test(test_empty_file_is_defaults),
	    cmocka_unit_test(test_unknown_key_quotes_line),
	    cmocka_unit_test(test_bad_values_are_named),
	    cmocka_unit_test(test_tester_limits),
	    cmocka_unit_test(test_syntax_error_quotes_line),
	    cmocka_unit_test(test_size_cap),
	    cmocka_unit_test(test_globs),
	    cmocka_unit_test(test_path_policy),
	    cmocka_unit_test(test_detection_is_the_shared_detector),
	    cmocka_unit_test(test_load_file_and_detection),
	    cmocka_unit_test(test_load_refuses_symlink),
	    cmocka_unit_test(test_load_refuses_symlinked_directory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
