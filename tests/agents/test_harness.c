/* SPDX-License-Identifier: MIT */
/* tests/agents/test_harness.c - the test-harness detector (agents/harness.h): a positive and a
 * negative case for every rule of the table (checked: a rule without both fails, and removing
 * a rule fails its positive cases, which name it), the section-aware readings of setup.cfg,
 * pyproject.toml and Cargo.toml, package.json as JSON, pom.xml and Gradle by the lines they
 * change, renames and copies, unreadable contents, the commands, the rendered text, and the
 * table's rows in docs/security.md. */
#include "agents/harness.h"
#include "common/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* One case: a single changed file, the rule it is about, and whether that rule calls it
 * harness (true: exactly one finding, by that rule, at `at`; false: no finding at all). */
struct hcase {
	const char *rule;
	bool harness;
	char status;	      /* 'M' when 0 */
	const char *path;     /* old path ('A': the new one) */
	const char *new_path; /* NULL: path */
	const char *old_data; /* NULL: "x\n" where the side exists */
	const char *new_data;
	const char *cmd;    /* the test command */
	const char *reason; /* a substring the finding's reason must hold */
	const char *at;	    /* the finding's path when it is not the case's new path */
};

static harness_file file_of(const struct hcase *c)
{
	harness_file f;
	char st = c->status ? c->status : 'M';

	memset(&f, 0, sizeof(f));
	f.status = st;
	f.old_path = c->path;
	f.new_path = c->new_path ? c->new_path : c->path;
	if (st != 'A') {
		f.old_data = c->old_data ? c->old_data : "x\n";
		f.old_len = strlen(f.old_data);
	}
	if (st != 'D') {
		f.new_data = c->new_data ? c->new_data : "x\n";
		f.new_len = strlen(f.new_data);
	}
	return f;
}

static void run_case(const struct hcase *c)
{
	harness_file f = file_of(c);
	harness_findings r = HARNESS_FINDINGS_INIT;
	const char *at = c->at ? c->at : f.status == 'D' ? f.old_path : f.new_path;

	assert_int_equal(harness_classify(&r, &f, 1, c->cmd, NULL), 0);
	if (!c->harness) {
		if (r.n)
			fail_msg("rule %s: `%s` should not be harness, got %s: %s", c->rule, at,
				 r.items[0].rule->name, r.items[0].reason);
	} else {
		if (r.n != 1)
			fail_msg("rule %s: `%s` should be one finding, got %zu", c->rule, at, r.n);
		if (strcmp(r.items[0].rule->name, c->rule) != 0)
			fail_msg("`%s` should be rule %s, got %s (%s)", at, c->rule,
				 r.items[0].rule->name, r.items[0].reason);
		assert_string_equal(r.items[0].path, at);
		if (c->reason && !strstr(r.items[0].reason, c->reason))
			fail_msg("rule %s: reason \"%s\" lacks \"%s\"", c->rule, r.items[0].reason,
				 c->reason);
		assert_non_null(strstr(r.items[0].reason, r.items[0].rule->why));
	}
	harness_findings_release(&r);
}

/* A path rule's case: a one-line change of the file. */
#define P(rule, yes, path)                                                                         \
	{                                                                                          \
		rule, yes, 'M', path, NULL, NULL, "y\n", NULL, NULL, NULL                          \
	}
/* A content rule's case: old and new contents. */
#define C(rule, yes, path, old, new, reason)                                                       \
	{                                                                                          \
		rule, yes, 'M', path, NULL, old, new, NULL, reason, NULL                           \
	}

/* ---- fixtures ---- */

#define PYPROJECT                                                                                  \
	"[project]\n"                                                                              \
	"name = \"calc\"\n"                                                                        \
	"version = \"1.0\"\n"                                                                      \
	"dependencies = [\n"                                                                       \
	"    \"requests>=2\",\n"                                                                   \
	"]\n"                                                                                      \
	"\n"                                                                                       \
	"[project.optional-dependencies]\n"                                                        \
	"test = [\"pytest>=7\"]\n"                                                                 \
	"\n"                                                                                       \
	"[tool.pytest.ini_options]\n"                                                              \
	"addopts = \"-q\"\n"                                                                       \
	"testpaths = [\"tests\"]\n"                                                                \
	"\n"                                                                                       \
	"[tool.black]\n"                                                                           \
	"line-length = 100\n"

#define PYPROJECT_NO_PYTEST                                                                        \
	"[project]\n"                                                                              \
	"name = \"calc\"\n"                                                                        \
	"version = \"1.0\"\n"                                                                      \
	"description = \"\"\"\n"                                                                   \
	"A calculator.\n"                                                                          \
	"\"\"\"\n"

#define SETUP_CFG                                                                                  \
	"[metadata]\n"                                                                             \
	"name = calc\n"                                                                            \
	"version = 1.0\n"                                                                          \
	"\n"                                                                                       \
	"[options]\n"                                                                              \
	"packages = find:\n"                                                                       \
	"install_requires =\n"                                                                     \
	"    requests\n"                                                                           \
	"\n"                                                                                       \
	"[tool:pytest]\n"                                                                          \
	"addopts = -q\n"                                                                           \
	"    --strict-markers\n"                                                                   \
	"\n"                                                                                       \
	"[flake8]\n"                                                                               \
	"max-line-length = 100\n"

#define PACKAGE_JSON(version, rest)                                                                \
	"{\n  \"name\": \"calc\",\n  \"version\": \"" version "\",\n"                              \
	"  \"scripts\": {\"test\": \"jest\"},\n"                                                   \
	"  \"devDependencies\": {\"jest\": \"^29.0.0\"}" rest "\n}\n"

#define CARGO                                                                                      \
	"[package]\n"                                                                              \
	"name = \"calc\"\n"                                                                        \
	"version = \"0.1.0\"\n"                                                                    \
	"edition = \"2021\"\n"                                                                     \
	"\n"                                                                                       \
	"[dependencies]\n"                                                                         \
	"serde = \"1.0\"\n"                                                                        \
	"\n"                                                                                       \
	"[dev-dependencies]\n"                                                                     \
	"proptest = \"1\"\n"

#define POM_HEAD                                                                                   \
	"<?xml version=\"1.0\"?>\n"                                                                \
	"<project>\n"                                                                              \
	"  <modelVersion>4.0.0</modelVersion>\n"                                                   \
	"  <dependencies>\n"                                                                       \
	"    <dependency>\n"                                                                       \
	"      <groupId>junit</groupId>\n"                                                         \
	"      <artifactId>junit</artifactId>\n"
#define POM_TAIL(plugin)                                                                           \
	"    </dependency>\n"                                                                      \
	"  </dependencies>\n"                                                                      \
	"  <build>\n"                                                                              \
	"    <plugins>\n"                                                                          \
	"      <plugin>\n"                                                                         \
	"        <artifactId>maven-surefire-plugin</artifactId>\n" plugin "      </plugin>\n"      \
	"    </plugins>\n"                                                                         \
	"  </build>\n"                                                                             \
	"</project>\n"
#define POM(version, dep, plugin)                                                                  \
	POM_HEAD "      <version>" version "</version>\n" dep POM_TAIL(plugin)

#define GRADLE(dep, test)                                                                          \
	"plugins {\n"                                                                              \
	"    id 'java'\n"                                                                          \
	"}\n"                                                                                      \
	"\n"                                                                                       \
	"dependencies {\n"                                                                         \
	"    implementation 'com.google.guava:guava:" dep "'\n"                                    \
	"    testImplementation 'junit:junit:4.13.2'\n"                                            \
	"}\n"                                                                                      \
	"\n"                                                                                       \
	"test {\n"                                                                                 \
	"    useJUnit()\n" test "}\n"

/* ---- the cases ---- */

static const struct hcase cases[] = {
    /* the commands */
    {"test-command", true, 'M', "scripts/run-tests.sh", NULL, NULL, NULL, "sh scripts/run-tests.sh",
     "test or setup command names it", NULL},
    {"test-command", true, 'M', "ci/go.sh", NULL, NULL, NULL, "bash ./ci/go.sh && echo ok", NULL,
     NULL},
    {"test-command", true, 'M', "tools/check.py", NULL, NULL, NULL, "python -m tools.check -v",
     NULL, NULL},
    {"test-command", true, 'M', "tools/x.sh", NULL, NULL, NULL, "/repo/tools/x.sh", NULL, NULL},
    {"test-command", true, 'M', "sub/run.sh", NULL, NULL, NULL, "cd sub && ./run.sh", NULL, NULL},
    {"test-command", true, 'A', "etc/pytest-ci.ini", NULL, NULL, NULL,
     "pytest -c=etc/pytest-ci.ini", NULL, NULL},
    {"test-command", false, 'A', "tests/test_new.py", NULL, NULL, NULL,
     "pytest 'tests/test_*.py' -q", NULL, NULL},
    {"test-command", false, 'M', "src/calc.py", NULL, NULL, NULL, "pytest -q tests/", NULL, NULL},
    {"test-command", false, 'M', "src/test_helpers.py", NULL, NULL, NULL, "make test", NULL, NULL},
    /* Python */
    P("pytest-conftest", true, "conftest.py"),
    P("pytest-conftest", true, "tests/unit/conftest.py"),
    {"pytest-conftest", true, 'R', "conftest.py", "helpers.py", NULL, NULL, NULL, NULL,
     "conftest.py"},
    {"pytest-conftest", true, 'C', "helpers.py", "tests/conftest.py", NULL, NULL, NULL, NULL, NULL},
    {"pytest-conftest", true, 'D', "tests/conftest.py", NULL, NULL, NULL, NULL, NULL, NULL},
    {"pytest-conftest", false, 'C', "conftest.py", "tests/helpers.py", NULL, NULL, NULL, NULL,
     NULL},
    P("pytest-conftest", false, "tests/test_conftest_like.py"),
    P("pytest-config", true, "pytest.ini"),
    P("pytest-config", true, "sub/.pytest.ini"),
    P("pytest-config", false, "docs/pytest.ini.md"),
    P("tox-ini", true, "tox.ini"),
    P("tox-ini", false, "tox.ini.example"),
    P("noxfile", true, "noxfile.py"),
    P("noxfile", false, "noxfiles.py"),
    P("python-startup", true, ".local/lib/python3.11/site-packages/x.pth"),
    P("python-startup", true, "src/sitecustomize.py"),
    P("python-startup", true, "usercustomize.py"),
    P("python-startup", false, "src/paths.txt"),
    P("python-bytecode", true, "tests/__pycache__/test_x.cpython-311.pyc"),
    P("python-bytecode", true, "lib/x.pyo"),
    P("python-bytecode", false, "src/pycache_utils.py"),
    P("python-shadow", true, "pytest.py"),
    P("python-shadow", true, "tests/unittest.py"),
    P("python-shadow", true, "pytest_evil.py"),
    P("python-shadow", true, "_pytest/__init__.py"),
    P("python-shadow", false, "src/mypytest.py"),
    P("setup-py", true, "setup.py"),
    P("setup-py", false, "src/setup_utils.py"),
    P("python-env", true, "Pipfile"),
    P("python-env", false, "docs/pipfile.txt"),
    {"setup-cfg", false, 'M', "setup.cfg", NULL, SETUP_CFG,
     "[metadata]\nname = calc\nversion = 1.1\n\n[options]\npackages = find:\n"
     "install_requires =\n    requests\n    six\n\n[tool:pytest]\naddopts = -q\n"
     "    --strict-markers\n\n[flake8]\nmax-line-length = 120\n",
     NULL, NULL, NULL},
    C("setup-cfg", true, "setup.cfg", SETUP_CFG,
      "[metadata]\nname = calc\nversion = 1.0\n\n[options]\npackages = find:\n"
      "install_requires =\n    requests\n\n[tool:pytest]\naddopts = -q -p evil\n"
      "    --strict-markers\n\n[flake8]\nmax-line-length = 100\n",
      "the `tool:pytest` section"),
    C("setup-cfg", true, "setup.cfg", SETUP_CFG, SETUP_CFG "\n[coverage:run]\nomit = *\n",
      "`coverage:run`"),
    C("setup-cfg", true, "setup.cfg", SETUP_CFG,
      SETUP_CFG "\n[options.entry_points]\npytest11 =\n    evil = evil.plugin\n",
      "options.entry_points"),
    C("setup-cfg", true, "setup.cfg", "[metadata]\nname = x\n[options]\npackages = find:\n",
      "[metadata]\nname = x\n[options]\npackages = find:\nentry_points = file: ep.cfg\n",
      "`entry_points` in [options]"),
    /* an indented header-like line: configparser reads a continuation, the naive reading a
     * header; either touching a test section is enough */
    C("setup-cfg", true, "setup.cfg", "[metadata]\nname = x\n",
      "[metadata]\nname = x\n  [tool:pytest]\n  addopts = -p evil\n", "tool:pytest"),
    C("setup-cfg", true, "setup.cfg", "[tool:pytest]\naddopts = -q\n    --strict\n",
      "[tool:pytest]\naddopts = -q\n    --strict\n    [x]\n    -p evil\n", "tool:pytest"),
    C("setup-cfg", true, "setup.cfg", "[metadata]\nname = x\n", "name = y\n[metadata]\nname = x\n",
      "outside any section"),
    C("pyproject", false, "pyproject.toml", PYPROJECT,
      "[project]\nname = \"calc\"\nversion = \"1.1\"\ndependencies = [\n    \"requests>=2\",\n"
      "    \"six\",\n]\n\n[project.optional-dependencies]\ntest = [\"pytest>=8\"]\n\n"
      "[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n[tool.black]\n"
      "line-length = 120\n",
      NULL),
    C("pyproject", true, "pyproject.toml", PYPROJECT,
      "[project]\nname = \"calc\"\nversion = \"1.0\"\ndependencies = [\n    \"requests>=2\",\n]\n"
      "\n[project.optional-dependencies]\ntest = [\"pytest>=7\"]\n\n[tool.pytest.ini_options]\n"
      "addopts = \"-q -p evil\"\ntestpaths = [\"tests\"]\n\n[tool.black]\nline-length = 100\n",
      "`tool.pytest.ini_options.addopts`"),
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      PYPROJECT_NO_PYTEST "\n[tool.pytest.ini_options]\naddopts = \"-p evil\"\n",
      "tool.pytest.ini_options"),
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      "tool.pytest.ini_options.addopts = \"-p evil\"\n" PYPROJECT_NO_PYTEST,
      "tool.pytest.ini_options.addopts"),
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      "[project]\nname = \"calc\"\nentry-points = { pytest11 = { evil = \"evil\" } }\n"
      "version = \"1.0\"\ndescription = \"\"\"\nA calculator.\n\"\"\"\n",
      "project.entry-points"),
    /* an inline table on a parent of a test table, at the top and in [tool] */
    C("pyproject", true, "pyproject.toml", "[tool]\nblack = { line-length = 100 }\n",
      "[tool]\nblack = { line-length = 100 }\nhatch = { envs = { default = { x = 1 } } }\n",
      "`tool.hatch`"),
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      "tool = { pytest = { ini_options = { addopts = \"-p x\" } } }\n" PYPROJECT_NO_PYTEST,
      "changes `tool`"),
    C("pyproject", true, "pyproject.toml", "[tool]\nblack = { line-length = 100 }\n",
      "[tool]\nblack = { line-length = 100 }\npytest = { ini_options = { addopts = \"-p x\" } }\n",
      "tool.pytest"),
    C("pyproject", true, "pyproject.toml",
      "[tool.pytest.ini_options]\naddopts = \"\"\"\n-q\n\"\"\"\n",
      "[tool.pytest.ini_options]\naddopts = \"\"\"\n-q\n-p evil\n\"\"\"\n", "tool.pytest"),
    C("pyproject", true, "pyproject.toml", "[tool.pytest.ini_options]\naddopts = [\n  \"-q\",\n]\n",
      "[tool.pytest.ini_options]\naddopts = [\n  \"-q\",\n  \"-p\", \"evil\",\n]\n", "tool.pytest"),
    /* a header-like line inside a multi-line string: the naive reading counts it */
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      "[project]\nname = \"calc\"\nversion = \"1.0\"\ndescription = \"\"\"\nA calculator.\n"
      "[tool.pytest.ini_options]\n\"\"\"\n",
      "tool.pytest"),
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      PYPROJECT_NO_PYTEST "[tool.\"pytest\".ini_options]\naddopts = \"-p x\"\n", "tool.pytest"),
    C("pyproject", true, "pyproject.toml", PYPROJECT_NO_PYTEST,
      PYPROJECT_NO_PYTEST "[tool.\"\\u0070ytest\".ini_options]\naddopts = \"-p x\"\n",
      "does not parse as TOML"),
    C("pyproject", true, "pyproject.toml", PYPROJECT,
      "[project]\nname = \"calc\"\nversion = \"1.0\"\ndependencies = [\n    \"requests>=2\",\n]\n"
      "\n[project.optional-dependencies]\ntest = [\"pytest @ file:///tmp/fake\"]\n\n"
      "[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n[tool.black]\n"
      "line-length = 100\n",
      "local code"),
    C("pyproject", true, "pyproject.toml", "[build-system]\nrequires = [\"setuptools\"]\n",
      "[build-system]\nrequires = [\"setuptools\"]\nbackend-path = [\".\"]\n", "build-system"),
    C("pyproject", false, "pyproject.toml", "[tool.black]\nline-length = 100\n",
      "[tool.black]\nline-length = 120\n", NULL),
    {"pyproject", true, 'D', "pyproject.toml", NULL, PYPROJECT, NULL, NULL, NULL, NULL},
    C("python-requirements", true, "requirements.txt", "requests==2.31.0\n",
      "requests==2.31.0\n-e ./fake_pytest\n", "option, a path or a URL"),
    C("python-requirements", true, "requirements/dev.txt", "pytest>=7\n",
      "pytest @ file:///tmp/fake\n", NULL),
    C("python-requirements", true, "requirements.txt", "requests==2.31.0\n",
      "requests==2.31.0\n   -r other.txt\n", NULL),
    C("python-requirements", true, "requirements.txt", "requests==2.31.0\n",
      "requests==2.31.0 --config-settings=x=y\n", NULL),
    C("python-requirements", false, "requirements-dev.txt", "requests==2.31.0\n# tools\n",
      "requests==2.32.0 ; python_version >= \"3.8\"\n# tools\n", NULL),
    /* JavaScript */
    C("package-json", false, "package.json", PACKAGE_JSON("1.0.0", ""), PACKAGE_JSON("1.0.1", ""),
      NULL),
    C("package-json", true, "package.json", PACKAGE_JSON("1.0.0", ""),
      "{\"name\": \"calc\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"jest || true\"},"
      " \"devDependencies\": {\"jest\": \"^29.0.0\"}}",
      "changes `scripts`"),
    C("package-json", true, "package.json", PACKAGE_JSON("1.0.0", ""),
      PACKAGE_JSON("1.0.0", ",\n  \"jest\": {\"testEnvironment\": \"./env.js\"}"), "`jest`"),
    C("package-json", true, "package.json", PACKAGE_JSON("1.0.0", ""),
      PACKAGE_JSON("1.0.0", ",\n  \"scripts\": {\"test\": \"exit 0\"}"), "`scripts`"),
    C("package-json", true, "package.json", PACKAGE_JSON("1.0.0", ""),
      PACKAGE_JSON("1.0.0", ",") "x", "does not parse"),
    C("package-json", true, "package.json", PACKAGE_JSON("1.0.0", ""),
      "{\"name\": \"calc\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"jest\"},"
      " \"devDependencies\": {\"jest\": \"file:../fake-jest\"}}",
      "local code"),
    C("package-json", false, "package.json", PACKAGE_JSON("1.0.0", ""),
      "{\"name\": \"calc\", \"version\": \"1.0.0\", \"scripts\": {\"test\": \"jest\"},"
      " \"devDependencies\": {\"jest\": \"^29.7.0\", \"@types/node\": \"~20.1\"}}",
      NULL),
    C("package-json", false, "package.json", "\xef\xbb\xbf" PACKAGE_JSON("1.0.0", ""),
      "\xef\xbb\xbf" PACKAGE_JSON("1.0.2", ""), NULL),
    C("package-json", true, "package.json", "{\"scripts\": {\"test\": \"jest\\u0000a\"}}",
      "{\"scripts\": {\"test\": \"jest\\u0000b\"}}", "does not parse"),
    {"package-json", true, 'A', "web/package.json", NULL, NULL, PACKAGE_JSON("1.0.0", ""), NULL,
     "`scripts`", NULL},
    {"package-json", false, 'A', "web/package.json", NULL, NULL,
     "{\"name\": \"web\", \"version\": \"1.0.0\"}", NULL, NULL, NULL},
    P("js-runner-config", true, "jest.config.js"),
    P("js-runner-config", true, "web/vitest.config.ts"),
    P("js-runner-config", true, ".mocharc.yml"),
    P("js-runner-config", false, "src/jest_config_helper.js"),
    P("js-transform", true, "babel.config.js"),
    P("js-transform", true, ".babelrc"),
    P("js-transform", true, "tsconfig.test.json"),
    P("js-transform", false, "src/babel.js"),
    P("js-test-setup", true, "src/setupTests.ts"),
    P("js-test-setup", true, "jest.setup.js"),
    P("js-test-setup", false, "src/setup.ts"),
    /* Rust */
    P("rust-build-script", true, "build.rs"),
    P("rust-build-script", true, "crates/x/build.rs"),
    P("rust-build-script", false, "src/build_utils.rs"),
    P("cargo-config", true, ".cargo/config.toml"),
    P("cargo-config", false, "src/cargo.rs"),
    C("cargo-toml", false, "Cargo.toml", CARGO,
      "[package]\nname = \"calc\"\nversion = \"0.1.1\"\nedition = \"2021\"\n\n[dependencies]\n"
      "serde = { version = \"1.0.200\", features = [\"derive\"] }\n\n[dev-dependencies]\n"
      "proptest = \"1\"\n",
      NULL),
    C("cargo-toml", true, "Cargo.toml", CARGO, CARGO "\n[[test]]\nname = \"t\"\nharness = false\n",
      "`test`"),
    C("cargo-toml", true, "Cargo.toml", CARGO, CARGO "\n[profile.test]\nopt-level = 3\n",
      "profile.test"),
    C("cargo-toml", true, "Cargo.toml", CARGO,
      "[package]\nname = \"calc\"\nbuild = \"evil.rs\"\nversion = \"0.1.0\"\n"
      "edition = \"2021\"\n\n[dependencies]\nserde = \"1.0\"\n\n[dev-dependencies]\n"
      "proptest = \"1\"\n",
      "package.build"),
    C("cargo-toml", true, "Cargo.toml", CARGO,
      "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
      "serde = { path = \"../fake-serde\" }\n\n[dev-dependencies]\nproptest = \"1\"\n",
      "local code"),
    C("cargo-toml", true, "Cargo.toml", CARGO,
      "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
      "serde = \"1.0\"\n\n[dev-dependencies]\nproptest = \"1.4\"\n",
      "dev-dependencies"),
    C("cargo-toml", true, "Cargo.toml", CARGO,
      "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n"
      "serde = \"1.0\"\nx = { version = \"1\", harness = false }\n\n[dev-dependencies]\n"
      "proptest = \"1\"\n",
      "`harness`"),
    P("rust-toolchain", true, "rust-toolchain.toml"),
    P("rust-toolchain", false, "docs/toolchain.md"),
    /* Java */
    C("maven-pom", false, "pom.xml", POM("4.13.1", "", ""), POM("4.13.2", "", ""), NULL),
    C("maven-pom", true, "pom.xml", POM("4.13.1", "", ""),
      POM("4.13.1", "",
	  "        <configuration><testFailureIgnore>true</testFailureIgnore></configuration>\n"),
      "inside `<build>`"),
    C("maven-pom", true, "pom.xml", POM("4.13.1", "", ""),
      POM("4.13.1", "",
	  "        <!-- </build> -->\n        <configuration>\n"
	  "          <skipTests>true</skipTests>\n        </configuration>\n"),
      "inside `<build>`"),
    C("maven-pom", true, "pom.xml", POM("4.13.1", "", ""),
      POM("4.13.1",
	  "      <scope>system</scope>\n      <systemPath>${basedir}/lib/j.jar</systemPath>\n", ""),
      "system"),
    C("maven-pom", true, "pom.xml", POM("4.13.1", "", ""),
      "<!DOCTYPE project [<!ENTITY b SYSTEM \"b.xml\">]>\n" POM("4.13.1", "", ""),
      "does not parse"),
    C("maven-pom", true, "pom.xml", POM("4.13.1", "", ""),
      POM_HEAD
      "      <version>4.13.1</version>\n    </dependency>\n  </dependencies>\n"
      "  <properties><skipTests>true</skipTests></properties>\n"
      "  <dependencies>\n    <dependency>\n      <artifactId>x</artifactId>\n" POM_TAIL(""),
      "`<properties>`"),
    P("maven-config", true, ".mvn/jvm.config"),
    P("maven-config", false, "src/mvn.txt"),
    C("gradle-script", false, "build.gradle", GRADLE("31.1-jre", ""), GRADLE("32.0-jre", ""), NULL),
    C("gradle-script", false, "app/build.gradle.kts",
      "plugins {\n    java\n}\ndependencies {\n    implementation(\"a:b:1\")\n}\n",
      "plugins {\n    java\n}\ndependencies {\n    implementation(\"a:b:1\")\n"
      "    testImplementation(\"org.assertj:assertj-core:3.24.2\")\n}\n",
      NULL),
    C("gradle-script", true, "build.gradle", GRADLE("31.1-jre", ""),
      GRADLE("31.1-jre", "    ignoreFailures = true\n"), "outside a top-level"),
    C("gradle-script", true, "build.gradle", GRADLE("31.1-jre", ""),
      GRADLE("31.1-jre", "") "test.ignoreFailures = true\n", "outside a top-level"),
    C("gradle-script", true, "build.gradle", GRADLE("31.1-jre", ""),
      GRADLE("31.1-jre'\n    testImplementation files('libs/fake-junit.jar')\n    //'", ""),
      "files("),
    C("gradle-script", true, "build.gradle", GRADLE("31.1-jre", ""), GRADLE("31.1-jre' // }", ""),
      "brace"),
    C("gradle-script", true, "build.gradle",
      "buildscript {\n    dependencies {\n        classpath 'a:b:1'\n    }\n}\n",
      "buildscript {\n    dependencies {\n        classpath 'a:b:2'\n    }\n}\n",
      "outside a top-level"),
    P("gradle-config", true, "gradle.properties"),
    P("gradle-config", true, "gradle/wrapper/gradle-wrapper.properties"),
    P("gradle-config", true, "buildSrc/src/main/kotlin/conventions.kt"),
    P("gradle-config", false, "src/gradle.txt"),
    P("junit-platform", true, "src/test/resources/junit-platform.properties"),
    P("junit-platform", false, "docs/junit-platform.md"),
    P("java-services", true,
      "src/test/resources/META-INF/services/org.junit.jupiter.api.extension.Extension"),
    P("java-services", false, "src/main/resources/META-INF/x.txt"),
    /* C/C++ and build systems */
    {"make", true, 'M', "Makefile", NULL, NULL, NULL, "make test", NULL, NULL},
    P("make", true, "mk/rules.mk"),
    P("make", false, "src/make.c"),
    P("cmake", true, "CMakeLists.txt"),
    P("cmake", true, "tests/CTestTestfile.cmake"),
    P("cmake", false, "src/cmake_helpers.c"),
    P("meson", true, "meson.build"),
    P("meson", true, "meson_options.txt"),
    P("meson", false, "src/meson.c"),
    P("bazel", true, "BUILD.bazel"),
    P("bazel", true, "tools/defs.bzl"),
    P("bazel", false, "src/building.c"),
    /* Ruby */
    P("ruby-test-setup", true, "spec/spec_helper.rb"),
    P("ruby-test-setup", true, "Rakefile"),
    P("ruby-test-setup", false, "lib/helper.rb"),
    /* everywhere */
    P("task-runner", true, "justfile"),
    P("task-runner", false, "src/just.rs"),
    P("test-runner-script", true, "scripts/run_tests.sh"),
    P("test-runner-script", true, "tests/runtests.py"),
    P("test-runner-script", false, "scripts/deploy.sh"),
    P("binary-artifact", true, "libs/fake-junit.jar"),
    P("binary-artifact", false, "docs/jar.md"),
    P("installed-packages", true, "node_modules/jest/index.js"),
    P("installed-packages", true, "venv/lib/python3.11/site-packages/_pytest/runner.py"),
    P("installed-packages", false, "src/packages/x.py"),
    P("dot-directory", true, ".github/scripts/x.py"),
    P("dot-directory", true, ".local/bin/pytest"),
    P("dot-directory", true, "tools/.config/x"),
    P("dot-directory", false, "src/config/x"),
    P("dotfile", true, ".coveragerc"),
    P("dotfile", true, ".npmrc"),
    P("dotfile", true, "tests/.env"),
    P("dotfile", false, "src/env.py"),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void test_every_case(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCASES; i++)
		run_case(&cases[i]);
}

/* Every rule of the table has a case that calls a file harness by it and one that does not:
 * a rule added without tests fails here, a rule removed fails its positive cases above. */
static void test_every_rule_has_both_cases(void **state)
{
	(void)state;
	assert_true(harness__rule_count() > 30);
	assert_null(harness__rule_get(harness__rule_count()));
	for (size_t r = 0; r < harness__rule_count(); r++) {
		const harness_rule *ru = harness__rule_get(r);
		bool yes = false, no = false;

		assert_non_null(ru->name);
		assert_non_null(ru->ecosystem);
		assert_non_null(ru->matches);
		assert_non_null(ru->why);
		for (size_t s = 0; s < r; s++)
			assert_string_not_equal(harness__rule_get(s)->name, ru->name);
		for (size_t i = 0; i < NCASES; i++)
			if (strcmp(cases[i].rule, ru->name) == 0)
				*(cases[i].harness ? &yes : &no) = true;
		if (!yes || !no)
			fail_msg("rule %s lacks a %s case", ru->name,
				 yes ? "negative" : "positive");
	}
	for (size_t i = 0; i < NCASES; i++) {
		bool known = false;

		for (size_t r = 0; r < harness__rule_count(); r++)
			known = known || strcmp(cases[i].rule, harness__rule_get(r)->name) == 0;
		if (!known)
			fail_msg("case %zu names no rule of the table: %s", i, cases[i].rule);
	}
}

/* A content rule whose contents are missing fails closed; a path no rule names stays clean. */
static void test_unreadable_contents_fail_closed(void **state)
{
	harness_file f = {
	    "pyproject.toml", "pyproject.toml", 'M', NULL, 0, "[project]\n", 10, false, true};
	harness_findings r = HARNESS_FINDINGS_INIT;

	(void)state;
	assert_int_equal(harness_classify(&r, &f, 1, NULL, NULL), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.items[0].rule->name, "pyproject");
	assert_non_null(strstr(r.items[0].reason, "could not be compared"));
	harness_findings_release(&r);
	/* binary: both sides given, still not compared */
	f = (harness_file){"package.json", "package.json", 'M', "{}", 2, "{}", 2, true, false};
	assert_int_equal(harness_classify(&r, &f, 1, NULL, NULL), 0);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.items[0].rule->name, "package-json");
	harness_findings_release(&r);
	/* a side over HARNESS_CONTENT_CAP counts as unread */
	{
		size_t big = HARNESS_CONTENT_CAP + 1;
		char *s = malloc(big);

		assert_non_null(s);
		memset(s, '\n', big);
		f = (harness_file){"Cargo.toml", "Cargo.toml", 'M',  s, big, s,
				   big - 1,	 false,	       false};
		assert_int_equal(harness_classify(&r, &f, 1, NULL, NULL), 0);
		assert_int_equal(r.n, 1);
		assert_string_equal(r.items[0].rule->name, "cargo-toml");
		harness_findings_release(&r);
		free(s);
	}
	/* unreadable, but no rule looks at the contents of this path */
	f = (harness_file){"src/calc.py", "src/calc.py", 'M', NULL, 0, NULL, 0, true, false};
	assert_int_equal(harness_classify(&r, &f, 1, NULL, NULL), 0);
	assert_int_equal(r.n, 0);
	harness_findings_release(&r);
}

/* Several files: findings in file order, old path before new; the setup command names paths
 * too; findings append; an unknown status reads as a modification. */
static void test_many_files_and_the_setup_command(void **state)
{
	harness_file f[] = {
	    {"src/calc.py", "src/calc.py", 'M', "a\n", 2, "b\n", 2, false, false},
	    {"conftest.py", "pytest.ini", 'R', "x\n", 2, "x\n", 2, false, false},
	    {"tools/prepare.sh", "tools/prepare.sh", 'M', "a\n", 2, "b\n", 2, false, false},
	    {"tox.ini", "tox.ini", '?', "a\n", 2, "b\n", 2, false, false},
	};
	harness_findings r = HARNESS_FINDINGS_INIT;

	(void)state;
	assert_int_equal(harness_classify(&r, f, 4, "pytest -q", "sh tools/prepare.sh"), 0);
	assert_int_equal(r.n, 4);
	assert_string_equal(r.items[0].path, "conftest.py");
	assert_string_equal(r.items[1].path, "pytest.ini");
	assert_string_equal(r.items[1].rule->name, "pytest-config");
	assert_string_equal(r.items[2].path, "tools/prepare.sh");
	assert_string_equal(r.items[2].rule->name, "test-command");
	assert_string_equal(r.items[3].rule->name, "tox-ini");
	assert_int_equal(harness_classify(&r, f, 1, NULL, NULL), 0);
	assert_int_equal(r.n, 4);
	assert_int_equal(harness_classify(&r, f + 1, 1, NULL, NULL), 0);
	assert_int_equal(r.n, 6);
	harness_findings_release(&r);
	assert_int_equal(r.n, 0);
	harness_findings_release(&r);
	harness_findings_release(NULL);
	assert_int_equal(harness_classify(&r, NULL, 0, NULL, NULL), 0);
	assert_int_equal(r.n, 0);
}

static void test_rendered_text(void **state)
{
	harness_file f[] = {
	    {"conftest.py", "conftest.py", 'A', NULL, 0, "x", 1, false, false},
	    {"pytest.ini", "pytest.ini", 'A', NULL, 0, "x", 1, false, false},
	    {"a`b\n.pth", "a`b\n.pth", 'A', NULL, 0, "x", 1, false, false},
	};
	harness_findings r = HARNESS_FINDINGS_INIT;
	char *s = NULL;

	(void)state;
	assert_int_equal(harness_findings_reason(&r, 2, &s), 0);
	assert_null(s);
	assert_int_equal(harness_findings_markdown(&r, 2, &s), 0);
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(harness_classify(&r, f, 3, NULL, NULL), 0);
	assert_int_equal(r.n, 3);
	assert_int_equal(harness_findings_reason(&r, 2, &s), 0);
	assert_string_equal(
	    s, "the patch changes the test harness: `conftest.py` (a pytest conftest.py: its hooks "
	       "and fixtures run inside the test run and can rewrite results), `pytest.ini` "
	       "(pytest's configuration: options, plugins (`-p`), collection and reporting) and 1 "
	       "more");
	free(s);
	assert_int_equal(harness_findings_reason(&r, 0, &s), 0);
	assert_non_null(strstr(s, "`a\\140b\\012.pth` (Python runs it at interpreter start-up"));
	assert_null(strstr(s, "more"));
	free(s);
	assert_int_equal(harness_findings_markdown(&r, 1, &s), 0);
	assert_string_equal(s, "- `conftest.py`: a pytest conftest.py: its hooks and fixtures run "
			       "inside the test run and can rewrite results (rule "
			       "`pytest-conftest`)\n- and 2 more\n");
	free(s);
	assert_int_equal(harness_findings_markdown(&r, 0, &s), 0);
	assert_non_null(strstr(s, "- `a\\140b\\012.pth`: "));
	assert_non_null(strstr(s, "(rule `python-startup`)\n"));
	free(s);
	harness_findings_release(&r);
}

/* The table and docs/security.md agree: every rule has a row naming it there. */
static void test_table_is_in_security_md(void **state)
{
	const char *root = getenv("AP_SOURCE_ROOT");
	char path[1024], *doc, *sec;
	FILE *fp;
	long n;

	(void)state;
	if (!root) /* meson sets it (test_env); a silent skip would hide a drifted table */
		fail_msg("AP_SOURCE_ROOT is not set: run this test with `meson test`");
	snprintf(path, sizeof(path), "%s/docs/security.md", root);
	fp = fopen(path, "rb");
	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	n = ftell(fp);
	assert_true(n > 0);
	rewind(fp);
	doc = malloc((size_t)n + 1);
	assert_non_null(doc);
	assert_int_equal(fread(doc, 1, (size_t)n, fp), (size_t)n);
	doc[n] = '\0';
	fclose(fp);
	sec = strstr(doc, "## What counts as the test harness");
	assert_non_null(sec);
	for (size_t r = 0; r < harness__rule_count(); r++) {
		char row[128];

		snprintf(row, sizeof(row), "| `%s` |", harness__rule_get(r)->name);
		if (!strstr(sec, row))
			fail_msg("docs/security.md has no row %s", row);
	}
	free(doc);
}

/* What the PR says each file is: harness (a finding), new / changed / deleted test by the
 * runners' naming conventions, else code. */
static void test_what_each_file_is(void **state)
{
	const char code[] = "x = 1\n";
	harness_file f[] = {
	    {"calc.py", "calc.py", 'M', code, 6, code, 6, false, false},
	    {"tests/test_calc.py", "tests/test_calc.py", 'A', NULL, 0, code, 6, false, false},
	    {"pkg/util_test.go", "pkg/util_test.go", 'M', code, 6, code, 6, false, false},
	    {"src/app.spec.ts", "src/app.spec.ts", 'D', code, 6, NULL, 0, false, false},
	    {"conftest.py", "conftest.py", 'A', NULL, 0, code, 6, false, false},
	    {"old.py", "new.py", 'R', code, 6, code, 6, false, false},
	    {"src/main/java/FooTest.java", "src/main/java/FooTest.java", 'A', NULL, 0, code, 6,
	     false, false},
	    {"contest.py", "contest.py", 'M', code, 6, code, 6, false, false},
	};
	harness_findings found = HARNESS_FINDINGS_INIT;
	const size_t n = sizeof(f) / sizeof(f[0]);
	char *md = NULL;

	(void)state;
	assert_int_equal(harness_classify(&found, f, n, "python3 -m pytest -q", NULL), 0);
	assert_string_equal(harness_kind(&f[0], &found), "code");
	assert_string_equal(harness_kind(&f[1], &found), "new test");
	assert_string_equal(harness_kind(&f[2], &found), "changed test");
	assert_string_equal(harness_kind(&f[3], &found), "deleted test");
	assert_string_equal(harness_kind(&f[4], &found), "harness");
	assert_string_equal(harness_kind(&f[5], &found), "code");
	assert_string_equal(harness_kind(&f[6], &found), "new test");
	assert_string_equal(harness_kind(&f[7], &found), "code");
	assert_int_equal(harness_kinds_markdown(f, n, &found, 3, &md), 0);
	assert_non_null(strstr(md, "- `calc.py`: code\n- `tests/test_calc.py`: new test\n"));
	assert_non_null(strstr(md, "- and 5 more\n"));
	free(md);
	assert_int_equal(harness_kinds_markdown(f, n, &found, 0, &md), 0);
	assert_non_null(strstr(md, "- `new.py` (renamed from `old.py`): code\n"));
	assert_non_null(strstr(md, "- `conftest.py`: harness\n"));
	free(md);
	harness_findings_release(&found);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_case),
	    cmocka_unit_test(test_every_rule_has_both_cases),
	    cmocka_unit_test(test_unreadable_contents_fail_closed),
	    cmocka_unit_test(test_many_files_and_the_setup_command),
	    cmocka_unit_test(test_rendered_text),
	    cmocka_unit_test(test_table_is_in_security_md),
	    cmocka_unit_test(test_what_each_file_is),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
