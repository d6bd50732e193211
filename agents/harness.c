/* SPDX-License-Identifier: MIT */
/* agents/harness.c - the test-harness detector: the one rule table and the classifier over the
 * changed files the host computed (see harness.h).
 *
 * Path rules match components of a path; content rules compare the old and new contents of a
 * file part by part: TOML and INI files as (section, key) entries, each its lines in the file
 * (a multi-line value included), read twice - once tracking strings and brackets as the format
 * does, once taking every `[` line for a header - and harness when either reading finds a
 * changed entry in a test table; package.json as parsed JSON (cJSON), every top-level member of
 * a watched name compared; pom.xml and Gradle scripts by the lines between the first and the
 * last changed line (a common prefix and suffix are skipped), placed in the elements or blocks
 * they lie in.
 */
#include "agents/harness.h"

#include "common/buf.h"
#include "common/err.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATH_QUOTE 200		     /* bytes of a path quoted in text */
#define KEY_QUOTE  100		     /* bytes of a key or section quoted in a reason */
#define NAME_CAP   256		     /* bytes of a section or key name; longer does not parse */
#define TEXT_CAP   ((size_t)1 << 20) /* bytes of rendered findings */
#define CMD_CAP	   ((size_t)1 << 16) /* bytes of a command read for the paths it names */
#define DEPS_CAP   2048		     /* entries of one package.json dependency member */
#define QUOTED_DOT 0x1f		     /* a `.` inside a quoted TOML key: not a separator */

enum kind {
	K_PATH,		/* the path alone */
	K_TEST_CMD,	/* a path the test or setup command names */
	K_SETUP_CFG,	/* setup.cfg sections */
	K_PYPROJECT,	/* pyproject.toml tables */
	K_REQUIREMENTS, /* requirements lines naming local code */
	K_PACKAGE_JSON, /* package.json members */
	K_CARGO,	/* Cargo.toml tables and keys */
	K_POM,		/* pom.xml elements */
	K_GRADLE,	/* Gradle scripts outside `dependencies { }` */
};

struct rule {
	harness_rule pub;
	enum kind kind;
	const char *const *paths; /* path patterns (path_matches()), NULL-terminated */
};

#define PATTERNS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- the table -------------------------------------------------------------------------
 *
 * Path patterns, ASCII case ignored, `*` matching any bytes inside one component:
 *   "name"   the last component, in any directory: "conftest.py", "*.pth", "jest.config.*"
 *   "a/b"    the last components: "pytest/__init__.py" (and "requirements/" then "*.txt")
 *   "dir/"   directory components anywhere, consecutive: ".cargo/", "META-INF/services/"
 *            (and ".*" then "/": any dot-directory)
 * A path gets the first rule that matches it; a content rule that finds nothing lets the later
 * rules try. The commands come first: "the test command runs it" is the plainest reason. */
static const struct rule rules[] = {
    /* everywhere, first: what the commands name */
    {{"test-command", "any",
      "a path the test or setup command names: a word of the command (split at blanks, "
      "quotes, backticks, backslashes and `; & | ( ) < > = , : { } $`; options left out, "
      "`./` dropped, compared literally) that is the path, ends with `/`+path, or is what the "
      "path ends with after a `/`, or a Python module (`a.b` for `a/b.py`, "
      "`a/b/__init__.py`, `a/b/__main__.py`)",
      "the test or setup command names it: it runs as part of the test run"},
     K_TEST_CMD,
     NULL},
    /* Python */
    {{"pytest-conftest", "Python", "`conftest.py` in any directory",
      "a pytest conftest.py: its hooks and fixtures run inside the test run and can rewrite "
      "results"},
     K_PATH,
     PATTERNS("conftest.py")},
    {{"pytest-config", "Python", "`pytest.ini`, `.pytest.ini`",
      "pytest's configuration: options, plugins (`-p`), collection and reporting"},
     K_PATH,
     PATTERNS("pytest.ini", ".pytest.ini")},
    {{"tox-ini", "Python", "`tox.ini`",
      "tox's configuration (and often pytest's): the environments and commands tests run in"},
     K_PATH,
     PATTERNS("tox.ini")},
    {{"noxfile", "Python", "`noxfile.py`", "nox's sessions: the commands tests run with"},
     K_PATH,
     PATTERNS("noxfile.py")},
    {{"python-startup", "Python", "`*.pth`, `sitecustomize.py`, `usercustomize.py`",
      "Python runs it at interpreter start-up, before any test"},
     K_PATH,
     PATTERNS("*.pth", "sitecustomize.py", "usercustomize.py")},
    {{"python-bytecode", "Python", "`*.pyc`, `*.pyo`, anything under `__pycache__/`",
      "compiled bytecode, which Python can load instead of the source"},
     K_PATH,
     PATTERNS("*.pyc", "*.pyo", "__pycache__/")},
    {{"python-shadow", "Python",
      "`pytest.py`, `_pytest.py`, `py.py`, `pluggy.py`, `unittest.py`, `doctest.py`, "
      "`pytest_*.py`, `pytest/__init__.py`, `_pytest/__init__.py`, `pluggy/__init__.py`, "
      "`unittest/__init__.py`",
      "a module named like the test framework's own (or a pytest plugin by name), which the "
      "test run may import instead"},
     K_PATH,
     PATTERNS("pytest.py", "_pytest.py", "py.py", "pluggy.py", "unittest.py", "doctest.py",
	      "pytest_*.py", "pytest/__init__.py", "_pytest/__init__.py", "pluggy/__init__.py",
	      "unittest/__init__.py")},
    {{"setup-py", "Python", "`setup.py`",
      "runs when the package is installed (the setup command) and can change what the tests "
      "run with"},
     K_PATH,
     PATTERNS("setup.py")},
    {{"python-env", "Python", "`Pipfile`, `poetry.toml`, `pdm.toml`, `uv.toml`",
      "configures the environment the tests are installed into"},
     K_PATH,
     PATTERNS("Pipfile", "poetry.toml", "pdm.toml", "uv.toml")},
    {{"setup-cfg", "Python",
      "`setup.cfg`, when the change touches `[tool:pytest]`, `[pytest]`, `[tox]`, `[tox:*]`, "
      "`[testenv]`, `[testenv:*]`, `[coverage:*]`, `[aliases]`, `[nosetests]`, "
      "`[options.entry_points]` or `entry_points`, `test_suite`, `tests_require`, "
      "`setup_requires`, `cmdclass` in `[options]`",
      "setup.cfg's test sections configure pytest, tox and coverage, and its entry points "
      "load pytest plugins"},
     K_SETUP_CFG,
     PATTERNS("setup.cfg")},
    {{"pyproject", "Python",
      "`pyproject.toml`, when the change touches `[tool.pytest*]`, `[tool.tox*]`, "
      "`[tool.nox*]`, `[tool.coverage*]`, `[tool.hatch.envs*]`, `[tool.hatch.build*]`, "
      "`[tool.hatch.metadata*]`, `[tool.setuptools.cmdclass]`, `[tool.poetry.plugins*]`, "
      "`[tool.poetry.scripts]`, `[tool.pdm.scripts]`, `[tool.pdm.build]`, `[tool.poe*]`, "
      "`[tool.rye.scripts]`, `[project.entry-points*]`, `[project.scripts]`, "
      "`[build-system]` (as tables, dotted keys or inline tables), or points a dependency "
      "at local code (`path =`, `file:`, `@`, `git`)",
      "pyproject.toml's tool tables configure pytest, tox, nox, hatch and coverage, its entry "
      "points load pytest plugins, its build system runs at install"},
     K_PYPROJECT,
     PATTERNS("pyproject.toml")},
    {{"python-requirements", "Python",
      "`requirements*.txt`, `requirements*.in`, `constraints*.txt`, `requirements/*.txt`, "
      "when a changed line is not a plain `name[extras] op version ; marker` requirement",
      "a requirement that is an option, a path or a URL installs code from the tree or "
      "elsewhere into the test environment"},
     K_REQUIREMENTS,
     PATTERNS("requirements*.txt", "requirements*.in", "constraints*.txt", "requirements/*.txt")},
    /* JavaScript */
    {{"package-json", "JavaScript",
      "`package.json`, when it does not parse on either side, or its `scripts`, `config`, "
      "`workspaces`, `jest`, `jest-junit`, `mocha`, `ava`, `vitest`, `c8`, `nyc`, `tap`, "
      "`jasmine`, `karma` or `babel` member changes, or a dependency is pointed at local code "
      "or a URL",
      "package.json's scripts and test-runner fields decide what `npm test` runs and how"},
     K_PACKAGE_JSON,
     PATTERNS("package.json")},
    {{"js-runner-config", "JavaScript",
      "`jest.config.*`, `vitest.config.*`, `vitest.workspace.*`, `vite.config.*`, "
      "`.mocharc*`, `mocha.opts`, `ava.config.*`, `karma.conf.*`, `jasmine.json`, "
      "`playwright.config.*`, `cypress.config.*`, `wdio.conf.*`, `bunfig.toml`, "
      "`deno.json`, `deno.jsonc`, `.taprc`, `.nycrc*`, `.c8rc*`",
      "a JavaScript test runner's configuration: set-up files, reporters, which tests run"},
     K_PATH,
     PATTERNS("jest.config.*", "vitest.config.*", "vitest.workspace.*", "vite.config.*",
	      ".mocharc*", "mocha.opts", "ava.config.*", "karma.conf.*", "jasmine.json",
	      "playwright.config.*", "cypress.config.*", "wdio.conf.*", "bunfig.toml", "deno.json",
	      "deno.jsonc", ".taprc", ".nycrc*", ".c8rc*")},
    {{"js-transform", "JavaScript",
      "`babel.config.*`, `.babelrc*`, `tsconfig*.json`, `jsconfig*.json`, `.swcrc`",
      "transforms or resolves the code the tests run (a path mapping can swap one module for "
      "another)"},
     K_PATH,
     PATTERNS("babel.config.*", ".babelrc*", "tsconfig*.json", "jsconfig*.json", ".swcrc")},
    {{"js-test-setup", "JavaScript",
      "`setupTests.*`, `setup-tests.*`, `jest.setup.*`, `jest-setup.*`, `vitest.setup.*`, "
      "`vitest-setup.*`, `test-setup.*`, `test.setup.*`, `global-setup.*`, `globalSetup.*`",
      "a test set-up file by its usual name: runs before the tests and can patch the "
      "assertions"},
     K_PATH,
     PATTERNS("setupTests.*", "setup-tests.*", "jest.setup.*", "jest-setup.*", "vitest.setup.*",
	      "vitest-setup.*", "test-setup.*", "test.setup.*", "global-setup.*", "globalSetup.*")},
    /* Rust */
    {{"rust-build-script", "Rust", "`build.rs` in any directory",
      "a Cargo build script: runs before the tests are compiled and can change them"},
     K_PATH,
     PATTERNS("build.rs")},
    {{"cargo-config", "Rust", "anything under a `.cargo/` directory",
      "Cargo's configuration: test runners, rustflags, aliases, target wrappers"},
     K_PATH,
     PATTERNS(".cargo/")},
    {{"cargo-toml", "Rust",
      "`Cargo.toml`, when the change touches `[lib]`, `[[bin]]`, `[[test]]`, `[[bench]]`, "
      "`[[example]]`, `[profile.*]`, `[workspace*]`, `[patch*]`, `[replace]`, "
      "`[dev-dependencies]` (also under `[target.*]`), `build` or `auto*` in `[package]`, any "
      "key named `harness`, `test`, `build`, `autotests`, `autobenches`, `autobins`, "
      "`autoexamples`, `autolib`, or points a dependency at local code (`path`, `git`)",
      "Cargo.toml's target, profile and workspace tables decide how tests are built and which "
      "harness runs them"},
     K_CARGO,
     PATTERNS("Cargo.toml")},
    {{"rust-toolchain", "Rust", "`rust-toolchain`, `rust-toolchain.toml`",
      "picks the toolchain (and its test harness) the tests are built with"},
     K_PATH,
     PATTERNS("rust-toolchain", "rust-toolchain.toml")},
    /* Java */
    {{"maven-pom", "Java",
      "`pom.xml`, when a changed line lies in `<build>`, `<profiles>`, `<reporting>`, "
      "`<properties>`, `<parent>`, `<modules>`, `<repositories>` or "
      "`<pluginRepositories>`, names a `systemPath` or `system` scope, or the file does not "
      "parse (a DTD included)",
      "pom.xml's build, profiles and properties configure surefire and failsafe (skips, "
      "`argLine`, listeners)"},
     K_POM,
     PATTERNS("pom.xml")},
    {{"maven-config", "Java", "anything under a `.mvn/` directory",
      "Maven's per-project JVM and Maven options and build extensions"},
     K_PATH,
     PATTERNS(".mvn/")},
    {{"gradle-script", "Java",
      "`*.gradle`, `*.gradle.kts`, when a changed line is not inside a top-level "
      "`dependencies { }` block, or holds a brace, a multi-line string, a comment opener, "
      "`files(` or `fileTree(`",
      "a Gradle script: outside its dependencies it can configure the test task (filters, "
      "`ignoreFailures`, listeners)"},
     K_GRADLE,
     PATTERNS("*.gradle", "*.gradle.kts")},
    {{"gradle-config", "Java",
      "`gradle.properties`, anything under `gradle/wrapper/` or `buildSrc/`",
      "Gradle's properties, wrapper and build logic"},
     K_PATH,
     PATTERNS("gradle.properties", "gradle/wrapper/", "buildSrc/")},
    {{"junit-platform", "Java", "`junit-platform.properties` in any directory",
      "the JUnit Platform's configuration: auto-detected extensions, listeners, which tests "
      "run"},
     K_PATH,
     PATTERNS("junit-platform.properties")},
    {{"java-services", "Java", "anything under `META-INF/services/`",
      "Java service registrations: JUnit extensions, listeners and filters load from here"},
     K_PATH,
     PATTERNS("META-INF/services/")},
    /* C/C++ and build systems */
    {{"make", "C/C++",
      "`Makefile`, `GNUmakefile`, `makefile`, `*.mk`, `*.mak`, `Makefile.am`, `Makefile.in`, "
      "`configure`, `configure.ac`, `configure.in`",
      "make's rules: the test target and the commands it runs"},
     K_PATH,
     PATTERNS("Makefile", "GNUmakefile", "makefile", "*.mk", "*.mak", "Makefile.am", "Makefile.in",
	      "configure", "configure.ac", "configure.in")},
    {{"cmake", "C/C++",
      "`CMakeLists.txt`, `*.cmake` (`CTestTestfile.cmake` too), `CMakePresets.json`, "
      "`CMakeUserPresets.json`",
      "CMake's build and CTest's test definitions"},
     K_PATH,
     PATTERNS("CMakeLists.txt", "*.cmake", "CMakePresets.json", "CMakeUserPresets.json")},
    {{"meson", "C/C++", "`meson.build`, `meson_options.txt`, `meson.options`",
      "meson's build and test definitions"},
     K_PATH,
     PATTERNS("meson.build", "meson_options.txt", "meson.options")},
    {{"bazel", "C/C++",
      "`BUILD`, `BUILD.bazel`, `WORKSPACE`, `WORKSPACE.bazel`, `MODULE.bazel`, `*.bzl`",
      "Bazel's build and test rules"},
     K_PATH,
     PATTERNS("BUILD", "BUILD.bazel", "WORKSPACE", "WORKSPACE.bazel", "MODULE.bazel", "*.bzl")},
    /* Ruby */
    {{"ruby-test-setup", "Ruby",
      "`spec_helper.rb`, `rails_helper.rb`, `test_helper.rb`, `Rakefile`, `*.rake`, "
      "`.rspec`, `.rspec-local`",
      "loaded before every spec or test, or the rake task that runs them"},
     K_PATH,
     PATTERNS("spec_helper.rb", "rails_helper.rb", "test_helper.rb", "Rakefile", "*.rake", ".rspec",
	      ".rspec-local")},
    /* everywhere */
    {{"task-runner", "any",
      "`justfile`, `.justfile`, `Taskfile.yml`, `Taskfile.yaml`, `Taskfile.dist.yml`",
      "a task runner's recipes: the commands `just test` or `task test` run"},
     K_PATH,
     PATTERNS("justfile", ".justfile", "Taskfile.yml", "Taskfile.yaml", "Taskfile.dist.yml")},
    {{"test-runner-script", "any",
      "`runtests*`, `run_tests*`, `run-tests*`, `run_test*`, `run-test*`, `test.sh`, "
      "`tests.sh`, `test.bash`, `test.bat`, `test.cmd`, `test.ps1`, `check.sh`, `ci.sh`",
      "a test-runner script by its usual name"},
     K_PATH,
     PATTERNS("runtests*", "run_tests*", "run-tests*", "run_test*", "run-test*", "test.sh",
	      "tests.sh", "test.bash", "test.bat", "test.cmd", "test.ps1", "check.sh", "ci.sh")},
    {{"binary-artifact", "any",
      "`*.jar`, `*.class`, `*.so`, `*.dylib`, `*.dll`, `*.node`, `*.whl`, `*.egg`",
      "compiled code the test run can load, which the diff does not show"},
     K_PATH,
     PATTERNS("*.jar", "*.class", "*.so", "*.dylib", "*.dll", "*.node", "*.whl", "*.egg")},
    {{"installed-packages", "any",
      "anything under `site-packages/`, `dist-packages/` or `node_modules/`",
      "installed packages: test runners and their plugins are imported from here"},
     K_PATH,
     PATTERNS("site-packages/", "dist-packages/", "node_modules/")},
    {{"dot-directory", "any",
      "anything under a directory whose name starts with `.` (`.local/`, `.config/`, "
      "`.github/`, `.venv/`, ...)",
      "a dot-directory: tool configuration and per-user start-up files"},
     K_PATH,
     PATTERNS(".*/")},
    {{"dotfile", "any",
      "a file whose name starts with `.`, in any directory (`.coveragerc`, `.npmrc`, "
      "`.env`, `.pnpmfile.cjs`, `.python-version`, ...)",
      "a dotfile: tools read their configuration and start-up hooks from dotfiles"},
     K_PATH,
     PATTERNS(".*")},
};

#define NRULES (sizeof(rules) / sizeof(rules[0]))

size_t harness__rule_count(void)
{
	return NRULES;
}

const harness_rule *harness__rule_get(size_t i)
{
	return i < NRULES ? &rules[i].pub : NULL;
}

/* ---- small helpers --------------------------------------------------------------------- */

struct span {
	const char *s;
	size_t n;
};

/* The byte names are compared by: ASCII lower case, `_` read as `-`. */
static int nc(int c)
{
	c = tolower((unsigned char)c);
	return c == '_' ? '-' : c;
}

static bool ieq(const char *a, size_t an, const char *b, size_t bn)
{
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++)
		if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
			return false;
	return true;
}

/* Whether s[0..n) matches the pattern p[0..pn), where `*` matches any run of bytes; map()
 * maps each byte of both first. */
static bool glob(const char *p, size_t pn, const char *s, size_t n, int (*map)(int))
{
	size_t i = 0, j = 0, star = SIZE_MAX, mark = 0;

	while (i < n) {
		if (j < pn && p[j] == '*') {
			star = j++;
			mark = i;
		} else if (j < pn && map((unsigned char)p[j]) == map((unsigned char)s[i])) {
			i++;
			j++;
		} else if (star != SIZE_MAX) {
			j = star + 1;
			i = ++mark;
		} else {
			return false;
		}
	}
	while (j < pn && p[j] == '*')
		j++;
	return j == pn;
}

static int lower(int c)
{
	return tolower((unsigned char)c);
}

/* Append s[0..n) inside backticks, control bytes, DEL, backslash and backtick as \ooo, at most
 * cap bytes of s (then "..."), without cutting a UTF-8 sequence. */
static void put_code(ap_buf *b, const char *s, size_t n, size_t cap)
{
	size_t keep = ap_utf8_prefix(s, n, cap);

	ap_buf_adds(b, "`");
	for (size_t i = 0; i < keep; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x20 || ch == 0x7f || ch == '\\' || ch == '`')
			ap_buf_addf(b, "\\%03o", ch);
		else
			ap_buf_add(b, s + i, 1);
	}
	ap_buf_adds(b, keep < n ? "...`" : "`");
}

/* The lines of s[0..n), each with its newline. *out is malloc'd (NULL when n == 0). */
static int split_lines(const char *s, size_t n, struct span **out, size_t *count)
{
	size_t lines = 0, k = 0;
	struct span *v;

	*out = NULL;
	*count = 0;
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\n')
			lines++;
	if (s[n - 1] != '\n')
		lines++;
	v = malloc(lines * sizeof(*v));
	if (!v)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(s + i, '\n', n - i);
		size_t e = nl ? (size_t)(nl - s) + 1 : n;

		v[k].s = s + i;
		v[k++].n = e - i;
		i = e;
	}
	*out = v;
	*count = k;
	return 0;
}

static bool span_eq(struct span a, struct span b)
{
	return a.n == b.n && memcmp(a.s, b.s, a.n) == 0;
}

/* The changed lines of two files: old lines [*first, *old_end), new lines [*first, *new_end),
 * after the longest common prefix and suffix. */
static void changed_region(const struct span *o, size_t on, const struct span *n, size_t nn,
			   size_t *first, size_t *old_end, size_t *new_end)
{
	size_t p = 0, q = 0;

	while (p < on && p < nn && span_eq(o[p], n[p]))
		p++;
	while (q < on - p && q < nn - p && span_eq(o[on - 1 - q], n[nn - 1 - q]))
		q++;
	*first = p;
	*old_end = on - q;
	*new_end = nn - q;
}

/* ---- paths ----------------------------------------------------------------------------- */

/* The components of a path; *out is malloc'd. */
static int split_path(const char *path, struct span **out, size_t *count)
{
	size_t n = 1, k = 0;
	struct span *v;
	const char *p = path;

	for (const char *c = path; *c; c++)
		n += *c == '/';
	v = malloc(n * sizeof(*v));
	if (!v)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (;;) {
		size_t len = strcspn(p, "/");

		v[k].s = p;
		v[k++].n = len;
		if (!p[len])
			break;
		p += len + 1;
	}
	*out = v;
	*count = k;
	return 0;
}

/* Whether the path with components c[0..n) matches one pattern (see the table). */
static bool path_matches(const char *pat, const struct span *c, size_t n)
{
	struct span pc[8];
	size_t k = 0, plen = strlen(pat);
	bool dir = plen && pat[plen - 1] == '/';
	const char *p = pat, *end = pat + plen - (dir ? 1 : 0);

	while (p < end && k < 8) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		size_t len = slash ? (size_t)(slash - p) : (size_t)(end - p);

		pc[k].s = p;
		pc[k++].n = len;
		p += len + (slash ? 1 : 0);
	}
	if (k == 0)
		return false;
	if (!dir) {
		if (k > n)
			return false;
		for (size_t t = 0; t < k; t++)
			if (!glob(pc[t].s, pc[t].n, c[n - k + t].s, c[n - k + t].n, lower))
				return false;
		return true;
	}
	for (size_t j = 0; j + k < n; j++) { /* directories only: the last component is the file */
		size_t t = 0;

		while (t < k && glob(pc[t].s, pc[t].n, c[j + t].s, c[j + t].n, lower))
			t++;
		if (t == k)
			return true;
	}
	return false;
}

/* ---- the commands ---------------------------------------------------------------------- */

struct words {
	struct span *v;
	size_t n, alloc;
};

/* Split cmd (at most CMD_CAP bytes of it) into the words that may name a file: not an option,
 * `./` dropped from the front and `/` from the end. Words are compared literally (a glob names
 * no file by itself). */
static int add_words(struct words *w, const char *cmd)
{
	static const char sep[] = " \t\r\n\v\f;&|()<>'\"`=,:{}$\\";
	size_t len = cmd ? strnlen(cmd, CMD_CAP) : 0, i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && strchr(sep, cmd[i]))
			i++;
		s = i;
		while (i < len && !strchr(sep, cmd[i]))
			i++;
		e = i;
		if (s == e || cmd[s] == '-')
			continue;
		while (e - s >= 2 && cmd[s] == '.' && cmd[s + 1] == '/')
			s += 2;
		while (e > s && cmd[e - 1] == '/')
			e--;
		if (e == s || (e - s == 1 && cmd[s] == '.') ||
		    (e - s == 2 && cmd[s] == '.' && cmd[s + 1] == '.'))
			continue;
		if (w->n == w->alloc) {
			size_t na = w->alloc ? w->alloc * 2 : 16;
			struct span *nv = realloc(w->v, na * sizeof(*nv));

			if (!nv)
				return ap_error_set(AP_ENOMEM, "out of memory");
			w->v = nv;
			w->alloc = na;
		}
		w->v[w->n].s = cmd + s;
		w->v[w->n++].n = e - s;
	}
	return 0;
}

/* Whether the word names the path as a Python module: `a.b` for a/b.py, a/b/__init__.py or
 * a/b/__main__.py at the top of the tree. */
static bool module_names(struct span w, const char *path, size_t plen)
{
	static const char *const tails[] = {".py", "/__init__.py", "/__main__.py"};

	if (!(isalpha((unsigned char)w.s[0]) || w.s[0] == '_') || plen <= w.n)
		return false;
	for (size_t i = 0; i < w.n; i++) {
		char c = w.s[i] == '.' ? '/' : w.s[i];

		if (!(isalnum((unsigned char)w.s[i]) || w.s[i] == '_' || w.s[i] == '.'))
			return false;
		if (tolower((unsigned char)c) != tolower((unsigned char)path[i]))
			return false;
	}
	for (size_t t = 0; t < sizeof(tails) / sizeof(tails[0]); t++)
		if (ieq(path + w.n, plen - w.n, tails[t], strlen(tails[t])))
			return true;
	return false;
}

static bool command_names(const struct words *w, const char *path)
{
	size_t plen = strlen(path);

	for (size_t i = 0; i < w->n; i++) {
		struct span x = w->v[i];

		if (ieq(x.s, x.n, path, plen) ||
		    (plen > x.n && path[plen - x.n - 1] == '/' &&
		     ieq(path + plen - x.n, x.n, x.s, x.n)) ||
		    (x.n > plen && x.s[x.n - plen - 1] == '/' &&
		     ieq(x.s + x.n - plen, plen, path, plen)) ||
		    module_names(x, path, plen))
			return true;
	}
	return false;
}

/* ---- a side of a file ------------------------------------------------------------------ */

/* One side of a path: absent (the file is not there), unreadable, or its bytes. */
struct side {
	bool exists;
	bool readable;
	const char *s;
	size_t n;
};

/* What a content rule found: nothing, or harness with the detail in det. */
struct verdict {
	bool harness;
	ap_buf det;
};

/* Harness, with the detail fmt where `@` stands for what[0..n) quoted as code. */
static void harness_because(struct verdict *v, const char *fmt, const char *what, size_t n)
{
	v->harness = true;
	ap_buf_reset(&v->det);
	while (*fmt) {
		if (*fmt == '@') {
			put_code(&v->det, what, n, KEY_QUOTE);
			fmt++;
		} else {
			ap_buf_add(&v->det, fmt++, 1);
		}
	}
}

/* ---- TOML and INI: entries ------------------------------------------------------------- */

/* One entry of a TOML or INI file: a header line, or a key with the lines of its value (a line
 * that does not parse is an entry of its own, `bad`). */
struct entry {
	const char *sec; /* the section's name (points into the arena) */
	size_t sec_n;
	const char *key; /* the key's, "" for a header */
	size_t key_n;
	size_t sec_off, key_off; /* where they are while the arena grows */
	bool bad;		 /* the line does not parse: it may be anything */
	struct span text;
	size_t seq;
};

struct entries {
	struct entry *v;
	size_t n, alloc;
	ap_buf arena;
	size_t cur_sec, cur_sec_n; /* the current section (offset 0: "", the top) */
	bool cur_bad;		   /* the current section's header does not parse */
	bool in_section;	   /* a header came before */
};

static int arena_add(struct entries *es, const char *s, size_t n, size_t *off)
{
	*off = es->arena.len;
	if (ap_buf_add(&es->arena, s, n) != 0 || ap_buf_add(&es->arena, "", 1) != 0)
		return ap_error_set(AP_ENOMEM, "out of memory");
	return 0;
}

/* Start an entry at line l: a header (key NULL) or a key of the current section. */
static int entry_new(struct entries *es, struct span l, const char *key, size_t key_n, bool bad)
{
	struct entry *e;

	if (es->n == es->alloc) {
		size_t na = es->alloc ? es->alloc * 2 : 64;
		struct entry *nv = realloc(es->v, na * sizeof(*nv));

		if (!nv)
			return ap_error_set(AP_ENOMEM, "out of memory");
		es->v = nv;
		es->alloc = na;
	}
	e = &es->v[es->n];
	memset(e, 0, sizeof(*e));
	e->sec_off = es->cur_sec;
	e->sec_n = es->cur_sec_n;
	e->bad = bad || es->cur_bad;
	e->text = l;
	e->seq = es->n;
	es->n++;
	if (key && key_n)
		return arena_add(es, key, key_n, &e->key_off);
	return arena_add(es, "", 0, &e->key_off);
}

/* A header line: it names the current section (bad: it does not parse). */
static int section_new(struct entries *es, struct span l, const char *name, size_t n, bool bad)
{
	int rc = arena_add(es, bad ? "" : name, bad ? 0 : n, &es->cur_sec);

	if (rc)
		return rc;
	es->cur_sec_n = bad ? 0 : n;
	es->cur_bad = bad;
	es->in_section = true;
	return entry_new(es, l, NULL, 0, bad);
}

/* Line l continues the current entry (entries are consecutive lines; a blank or comment line
 * between them belongs to none, one inside a value to its entry); before any entry it starts
 * one that may be anything. */
static int entry_extend(struct entries *es, struct span l)
{
	if (es->n == 0)
		return entry_new(es, l, NULL, 0, true);
	es->v[es->n - 1].text.n = (size_t)(l.s + l.n - es->v[es->n - 1].text.s);
	return 0;
}

static void entries_release(struct entries *es)
{
	free(es->v);
	ap_buf_release(&es->arena);
	memset(es, 0, sizeof(*es));
}

static const char *skip_blank(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* Whether [p, e) holds only blanks, a line end or a comment starting with one of cm. */
static bool rest_empty(const char *p, const char *e, const char *cm)
{
	p = skip_blank(p, e);
	return p == e || *p == '\n' || *p == '\r' || (*p && strchr(cm, *p));
}

/* ---- TOML ------------------------------------------------------------------------------ */

/* Append the name bytes s[0..n) to buf at *o (NAME_CAP): false when they do not fit or hold a
 * control byte. Names keep their spelling: entries group by exact name (a respelling is a
 * change), the table matches them with nc(). */
static bool name_put(char *buf, size_t *o, const char *s, size_t n)
{
	if (*o + n > NAME_CAP)
		return false;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
		buf[(*o)++] = s[i];
	}
	return true;
}

/* A dotted key at p: its components, unquoted, joined with '.' into buf (NAME_CAP + 1),
 * a `.` inside a quoted component kept as QUOTED_DOT, *len its length. The position after it and
 * the blanks that follow, or NULL when it does not parse (a quoted component with an escape or a
 * control byte, an empty bare component, too long). */
static const char *toml_key(const char *p, const char *e, char *buf, size_t *len)
{
	size_t o = 0;

	for (;;) {
		const char *start;

		p = skip_blank(p, e);
		if (p >= e)
			return NULL;
		if (o && !name_put(buf, &o, ".", 1))
			return NULL;
		if (*p == '"' || *p == '\'') {
			char q = *p++;

			start = p;
			while (p < e && *p != q) {
				if ((q == '"' && *p == '\\') || (unsigned char)*p < 0x20)
					return NULL;
				p++;
			}
			if (p >= e || !name_put(buf, &o, start, (size_t)(p - start)))
				return NULL;
			for (size_t i = o - (size_t)(p - start); i < o; i++)
				if (buf[i] == '.')
					buf[i] = QUOTED_DOT;
			p++;
		} else {
			start = p;
			while (p < e && (isalnum((unsigned char)*p) || *p == '_' || *p == '-'))
				p++;
			if (p == start || !name_put(buf, &o, start, (size_t)(p - start)))
				return NULL;
		}
		p = skip_blank(p, e);
		if (p < e && *p == '.') {
			p++;
			continue;
		}
		break;
	}
	buf[o] = '\0';
	*len = o;
	return p;
}

/* What a TOML value has open at the end of a line: a multi-line string, brackets. */
struct tstate {
	char ml;      /* '"' or '\'' inside a multi-line string, else 0 */
	size_t depth; /* open [ and { */
};

/* Follow strings, comments and brackets over [p, e). */
static void toml_scan(struct tstate *st, const char *p, const char *e)
{
	size_t n = (size_t)(e - p), i = 0;

	while (i < n) {
		char c = p[i];

		if (st->ml) {
			if (st->ml == '"' && c == '\\') {
				i += 2;
			} else if (i + 3 <= n && c == st->ml && p[i + 1] == c && p[i + 2] == c) {
				size_t q = 3;

				while (q < 5 && i + q < n && p[i + q] == c)
					q++;
				i += q;
				st->ml = 0;
			} else {
				i++;
			}
			continue;
		}
		if (c == '#')
			return;
		if ((c == '"' || c == '\'') && i + 3 <= n && p[i + 1] == c && p[i + 2] == c) {
			st->ml = c;
			i += 3;
		} else if (c == '"' || c == '\'') {
			for (i++; i < n && p[i] != c && p[i] != '\n'; i++)
				if (c == '"' && p[i] == '\\')
					i++;
			i++;
		} else {
			if (c == '[' || c == '{')
				st->depth++;
			else if ((c == ']' || c == '}') && st->depth)
				st->depth--;
			i++;
		}
	}
}

/* The entries of a TOML text. naive: every line whose first non-blank byte is `[` is a header
 * and nothing else is tracked (the reading that does not depend on string tracking). */
static int toml_entries(const struct side *sd, bool naive, struct entries *es)
{
	struct span *lines = NULL;
	struct tstate st = {0, 0};
	char name[NAME_CAP + 1];
	size_t nl = 0, n;
	int rc = split_lines(sd->s, sd->exists ? sd->n : 0, &lines, &nl);

	for (size_t i = 0; i < nl && !rc; i++) {
		const char *l = lines[i].s, *e = l + lines[i].n, *t = skip_blank(l, e), *p;

		if (!naive && (st.ml || st.depth)) {
			rc = entry_extend(es, lines[i]);
			toml_scan(&st, l, e);
			continue;
		}
		if (rest_empty(t, e, "#"))
			continue;
		if (*t == '[') {
			bool arr = t + 1 < e && t[1] == '[';

			p = toml_key(t + (arr ? 2 : 1), e, name, &n);
			if (p && p < e && *p == ']' && (!arr || (p + 1 < e && p[1] == ']')))
				p += arr ? 2 : 1;
			else
				p = NULL;
			rc = section_new(es, lines[i], name, p ? n : 0,
					 !p || !rest_empty(p, e, "#"));
			continue;
		}
		p = toml_key(t, e, name, &n);
		if (p && p < e && *p == '=') {
			rc = entry_new(es, lines[i], name, n, false);
			if (!naive)
				toml_scan(&st, p + 1, e);
		} else if (naive) {
			rc = entry_extend(es, lines[i]);
		} else {
			rc = entry_new(es, lines[i], NULL, 0, true);
			toml_scan(&st, t, e);
		}
	}
	free(lines);
	return rc;
}

/* ---- INI (setup.cfg) ------------------------------------------------------------------- */

/* The entries of an INI text as configparser reads it: `[name]` at the start of a line is a
 * header (between the first `[` and the last `]`), `key = value` or `key: value` at the start
 * of a line a key, an indented line a continuation. naive: an indented `[` line is a header
 * too. */
static int ini_entries(const struct side *sd, bool naive, struct entries *es)
{
	struct span *lines = NULL;
	char name[NAME_CAP + 1];
	size_t nl = 0;
	int rc = split_lines(sd->s, sd->exists ? sd->n : 0, &lines, &nl);

	for (size_t i = 0; i < nl && !rc; i++) {
		const char *l = lines[i].s, *e = l + lines[i].n, *t = skip_blank(l, e);
		const char *close, *p;
		size_t o = 0;

		if (rest_empty(t, e, "#;"))
			continue;
		if (*t == '[' && (t == l || naive)) {
			close = NULL;
			for (p = t + 1; p < e; p++)
				if (*p == ']')
					close = p;
			if (close) {
				const char *s = skip_blank(t + 1, close), *x = close;

				while (x > s && (x[-1] == ' ' || x[-1] == '\t'))
					x--;
				if (!name_put(name, &o, s, (size_t)(x - s)) || o == 0)
					close = NULL;
			}
			rc = section_new(es, lines[i], name, o, !close);
			continue;
		}
		if (t != l) {
			rc = entry_extend(es, lines[i]);
			continue;
		}
		p = t;
		while (p < e && *p != '=' && *p != ':' && *p != '\n')
			p++;
		if (p < e && (*p == '=' || *p == ':')) {
			const char *x = p;

			while (x > t && (x[-1] == ' ' || x[-1] == '\t'))
				x--;
			if (name_put(name, &o, t, (size_t)(x - t)) && o && es->in_section) {
				rc = entry_new(es, lines[i], name, o, false);
				continue;
			}
		}
		rc = entry_new(es, lines[i], NULL, 0, true);
	}
	free(lines);
	return rc;
}

/* ---- entries compared ------------------------------------------------------------------ */

/* Entries group by (bad, section, key). */
static int cmp_group(const struct entry *x, const struct entry *y)
{
	int c;

	if (x->bad != y->bad)
		return x->bad ? -1 : 1;
	if ((c = strcmp(x->sec, y->sec)) != 0)
		return c;
	return strcmp(x->key, y->key);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	int c = cmp_group(x, y);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Resolve the arena offsets and sort by (bad, section, key, order). */
static void entries_sort(struct entries *es)
{
	const char *base = es->arena.data ? es->arena.data : "";

	for (size_t i = 0; i < es->n; i++) {
		es->v[i].sec = es->arena.data ? base + es->v[i].sec_off : "";
		es->v[i].key = es->arena.data ? base + es->v[i].key_off : "";
		es->v[i].sec_n = strlen(es->v[i].sec);
		es->v[i].key_n = strlen(es->v[i].key);
	}
	if (es->n > 1)
		qsort(es->v, es->n, sizeof(*es->v), cmp_entry);
}

/* Whether the entries a[0..an) and b[0..bn) (one group each) say the same. */
static bool group_eq(const struct entry *a, size_t an, const struct entry *b, size_t bn)
{
	if (an != bn)
		return false;
	for (size_t i = 0; i < an; i++)
		if (!span_eq(a[i].text, b[i].text))
			return false;
	return true;
}

/* Decides whether one changed group (one of its entries e, and the group's entries on both
 * sides) is harness; fills v. */
typedef void (*group_judge)(const struct entry *e, const struct entry *a, size_t an,
			    const struct entry *b, size_t bn, struct verdict *v);

/* Walk both sorted lists; every group that differs goes to judge until one is harness. */
static void compare_entries(const struct entries *o, const struct entries *n, group_judge judge,
			    struct verdict *v)
{
	size_t i = 0, j = 0;

	while ((i < o->n || j < n->n) && !v->harness) {
		const struct entry *first, *a, *b;
		size_t ie = i, je = j;
		int c;

		if (i < o->n && j < n->n)
			c = cmp_group(&o->v[i], &n->v[j]);
		else
			c = i < o->n ? -1 : 1;
		first = c <= 0 ? &o->v[i] : &n->v[j];
		if (c <= 0)
			while (ie < o->n && cmp_group(&o->v[ie], first) == 0)
				ie++;
		if (c >= 0)
			while (je < n->n && cmp_group(&n->v[je], first) == 0)
				je++;
		a = ie > i ? &o->v[i] : NULL;
		b = je > j ? &n->v[j] : NULL;
		if (!group_eq(a, ie - i, b, je - j))
			judge(first, a, ie - i, b, je - j, v);
		i = ie;
		j = je;
	}
}

/* Build both readings of both sides and compare them. */
static int compare_sections(const struct side *before, const struct side *after, bool toml,
			    group_judge judge, struct verdict *v)
{
	int rc = 0;

	for (int naive = 0; naive < 2 && !rc && !v->harness; naive++) {
		struct entries o = {0}, n = {0};

		ap_buf_init(&o.arena, 4 * before->n + 8192);
		ap_buf_init(&n.arena, 4 * after->n + 8192);
		rc = arena_add(&o, "", 0, &o.cur_sec);
		if (!rc)
			rc = arena_add(&n, "", 0, &n.cur_sec);
		if (!rc)
			rc =
			    toml ? toml_entries(before, naive, &o) : ini_entries(before, naive, &o);
		if (!rc)
			rc = toml ? toml_entries(after, naive, &n) : ini_entries(after, naive, &n);
		if (!rc) {
			entries_sort(&o);
			entries_sort(&n);
			compare_entries(&o, &n, judge, v);
		}
		entries_release(&o);
		entries_release(&n);
	}
	return rc;
}

/* The full dotted path of a TOML entry into buf (2 * NAME_CAP + 2). */
static size_t toml_path(const struct entry *e, char *buf)
{
	size_t n = 0;

	memcpy(buf, e->sec, e->sec_n);
	n = e->sec_n;
	if (e->key_n) {
		if (n)
			buf[n++] = '.';
		memcpy(buf + n, e->key, e->key_n);
		n += e->key_n;
	}
	buf[n] = '\0';
	return n;
}

/* Whether dotted path f (its components) and pattern p (components, each a glob) overlap: one
 * is a prefix of the other, component by component - a table inside a test table, or one that
 * can define it (a dotted key, an inline table). */
static bool toml_touches(const char *f, size_t fn, const char *p)
{
	size_t i = 0, j = 0, pn = strlen(p);

	for (;;) {
		size_t fe = i, pe = j;

		while (fe < fn && f[fe] != '.')
			fe++;
		while (pe < pn && p[pe] != '.')
			pe++;
		if (!glob(p + j, pe - j, f + i, fe - i, nc))
			return false;
		if (fe >= fn || pe >= pn)
			return true;
		i = fe + 1;
		j = pe + 1;
	}
}

/* Whether a group's text has a key named `name` (bare or quoted) followed by `=`: an inline
 * table's key. */
static bool has_key_named(const struct entry *a, size_t an, const char *name)
{
	size_t wn = strlen(name);

	for (size_t k = 0; k < an; k++) {
		const char *s = a[k].text.s;
		size_t n = a[k].text.n;

		for (size_t i = 0; i + wn <= n; i++) {
			size_t x = i + wn;

			if (i > 0 && (isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_' ||
				      s[i - 1] == '-'))
				continue;
			if (!ieq(s + i, wn, name, wn))
				continue;
			if (x < n && (s[x] == '"' || s[x] == '\''))
				x++;
			while (x < n && (s[x] == ' ' || s[x] == '\t'))
				x++;
			if (x < n && s[x] == '=')
				return true;
		}
	}
	return false;
}

/* Whether any entry's text of a group names local code: a `path` or `git` key, `file:`, or a
 * PEP 508 direct reference (`@`). */
static bool names_local(const struct entry *a, size_t an)
{
	for (size_t k = 0; k < an; k++) {
		const char *s = a[k].text.s;
		size_t n = a[k].text.n;

		for (size_t i = 0; i < n; i++)
			if (s[i] == '@' || (i + 5 <= n && ieq(s + i, 5, "file:", 5)))
				return true;
	}
	return has_key_named(a, an, "path") || has_key_named(a, an, "git");
}

/* The tables of a TOML file that are harness: touched at all, or (deps) when an entry there
 * names local code; keys named by `keys` anywhere. */
struct toml_tables {
	const char *const *harness;
	const char *const *deps;
	const char *const *keys;
};

static const struct toml_tables pyproject_tables = {
    PATTERNS("tool.pytest", "tool.tox", "tool.nox", "tool.coverage", "tool.hatch.envs",
	     "tool.hatch.build", "tool.hatch.metadata", "tool.setuptools.cmdclass",
	     "tool.poetry.plugins", "tool.poetry.scripts", "tool.pdm.scripts", "tool.pdm.build",
	     "tool.poe", "tool.rye.scripts", "project.entry-points", "project.scripts",
	     "build-system"),
    PATTERNS("project.dependencies", "project.optional-dependencies", "dependency-groups",
	     "tool.poetry.dependencies", "tool.poetry.dev-dependencies", "tool.poetry.group",
	     "tool.pdm.dev-dependencies", "tool.uv"),
    NULL,
};

static const struct toml_tables cargo_tables = {
    PATTERNS("lib", "bin", "test", "bench", "example", "profile", "workspace", "patch", "replace",
	     "dev-dependencies", "target.*.dev-dependencies", "package.build", "package.autotests",
	     "package.autobenches", "package.autobins", "package.autoexamples", "package.autolib"),
    PATTERNS("dependencies", "build-dependencies", "target.*.dependencies",
	     "target.*.build-dependencies"),
    PATTERNS("harness", "test", "build", "autotests", "autobenches", "autobins", "autoexamples",
	     "autolib"),
};

static void toml_judge_with(const struct toml_tables *t, const struct entry *e,
			    const struct entry *a, size_t an, const struct entry *b, size_t bn,
			    struct verdict *v)
{
	char path[2 * NAME_CAP + 2];
	size_t n, last;

	if (e->bad) {
		v->harness = true;
		ap_buf_reset(&v->det);
		ap_buf_adds(&v->det, "changes a line that does not parse as TOML");
		return;
	}
	n = toml_path(e, path);
	for (const char *const *p = t->harness; p && *p; p++)
		if (toml_touches(path, n, *p)) {
			harness_because(v, "changes @", path, n);
			return;
		}
	for (const char *const *p = t->deps; p && *p; p++)
		if (toml_touches(path, n, *p) && (names_local(a, an) || names_local(b, bn))) {
			harness_because(v, "points a dependency in @ at local code", path, n);
			return;
		}
	last = n;
	while (last > 0 && path[last - 1] != '.')
		last--;
	for (const char *const *k = t->keys; k && *k; k++)
		if (glob(*k, strlen(*k), path + last, n - last, nc) || has_key_named(a, an, *k) ||
		    has_key_named(b, bn, *k)) {
			harness_because(v, "changes a key named @", *k, strlen(*k));
			return;
		}
}

static void pyproject_judge(const struct entry *e, const struct entry *a, size_t an,
			    const struct entry *b, size_t bn, struct verdict *v)
{
	toml_judge_with(&pyproject_tables, e, a, an, b, bn, v);
}

static void cargo_judge(const struct entry *e, const struct entry *a, size_t an,
			const struct entry *b, size_t bn, struct verdict *v)
{
	toml_judge_with(&cargo_tables, e, a, an, b, bn, v);
}

/* setup.cfg: sections (globs) that are harness, and keys of [options]. */
static const char *const cfg_sections[] = {
    "tool:pytest", "pytest",	 "tox",	    "tox:*",	 "testenv",
    "testenv:*",   "coverage:*", "aliases", "nosetests", "options.entry-points",
    NULL,
};
static const char *const cfg_option_keys[] = {
    "entry-points", "test-suite", "tests-require", "setup-requires", "cmdclass", NULL,
};

static void cfg_judge(const struct entry *e, const struct entry *a, size_t an,
		      const struct entry *b, size_t bn, struct verdict *v)
{
	size_t sn = e->sec_n;

	(void)a;
	(void)an;
	(void)b;
	(void)bn;
	if (e->bad) {
		v->harness = true;
		ap_buf_reset(&v->det);
		ap_buf_adds(&v->det, "changes a line outside any section, or one that does not "
				     "parse");
		return;
	}
	for (const char *const *p = cfg_sections; *p; p++)
		if (glob(*p, strlen(*p), e->sec, sn, nc)) {
			harness_because(v, "changes the @ section", e->sec, sn);
			return;
		}
	if (!ieq(e->sec, sn, "options", 7) || !e->key_n)
		return;
	for (const char *const *k = cfg_option_keys; *k; k++)
		if (glob(*k, strlen(*k), e->key, e->key_n, nc)) {
			harness_because(v, "changes @ in [options]", e->key, e->key_n);
			return;
		}
}

/* ---- package.json ---------------------------------------------------------------------- */

static const char *const pkg_members[] = {
    "scripts", "config", "workspaces", "jest",	  "jest-junit", "mocha", "ava", "vitest",
    "c8",      "nyc",	 "tap",	       "jasmine", "karma",	"babel", NULL,
};
static const char *const pkg_deps[] = {
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
    "overrides",
    "resolutions",
    "pnpm",
    NULL,
};

/* Parse one side: *out NULL for an absent side; false when it does not parse as an object. */
static bool json_side(const struct side *sd, cJSON **out)
{
	const char *s = sd->s, *end = NULL;
	size_t n = sd->n;

	*out = NULL;
	if (!sd->exists)
		return true;
	if (n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) {
		s += 3;
		n -= 3;
	}
	for (size_t i = 0; i + 6 <= n; i++) /* cJSON keeps a decoded NUL and compares up to it */
		if (s[i] == '\\' && ieq(s + i + 1, 5, "u0000", 5))
			return false;
	*out = cJSON_ParseWithLengthOpts(s, n, &end, false);
	if (!*out)
		return false;
	while (end && end < s + n && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
		end++;
	if (!cJSON_IsObject(*out) || !end || end != s + n) {
		cJSON_Delete(*out);
		*out = NULL;
		return false;
	}
	return true;
}

/* Whether the top-level members named name (any case) are the same, in the same order, on
 * both sides (an absent object has none). cJSON_Compare() looks duplicate keys up by their
 * first occurrence on the other side, so two members that differ in any duplicate compare
 * unequal; equal ones mean the same under first-wins and last-wins alike. */
static bool members_same(const cJSON *a, const cJSON *b, const char *name)
{
	size_t nn = strlen(name);
	const cJSON *x = a ? a->child : NULL, *y = b ? b->child : NULL;

	for (;;) {
		while (x && !(x->string && ieq(x->string, strlen(x->string), name, nn)))
			x = x->next;
		while (y && !(y->string && ieq(y->string, strlen(y->string), name, nn)))
			y = y->next;
		if (!x || !y)
			return !x && !y;
		if (strcmp(x->string, y->string) != 0 || !cJSON_Compare(x, y, true))
			return false;
		x = x->next;
		y = y->next;
	}
}

/* A dependency spec that is a plain version range, not a path, URL, alias or protocol. */
static bool plain_version(const cJSON *v)
{
	const char *s = cJSON_IsString(v) ? v->valuestring : NULL;

	return s && !strchr(s, ':') && !strchr(s, '/') && !strchr(s, '\\') && s[0] != '.';
}

/* Whether a dependency member of obj (one side) has an entry the other side (old) lacks whose
 * spec is not a plain version; a member that is not an object, or holds more than DEPS_CAP
 * entries (the comparison is quadratic), counts. Asked both ways, so a dependency moved to or
 * from local code counts either way. */
static bool deps_local(const cJSON *old, const cJSON *obj, const char *name)
{
	for (const cJSON *m = obj ? obj->child : NULL; m; m = m->next) {
		if (!m->string || !ieq(m->string, strlen(m->string), name, strlen(name)))
			continue;
		if (!cJSON_IsObject(m) || cJSON_GetArraySize(m) > DEPS_CAP)
			return true;
		for (const cJSON *d = m->child; d; d = d->next) {
			const cJSON *was = NULL;

			for (const cJSON *om = old ? old->child : NULL; om && !was; om = om->next)
				if (om->string &&
				    ieq(om->string, strlen(om->string), name, strlen(name)) &&
				    cJSON_IsObject(om))
					for (const cJSON *od = om->child; od && !was; od = od->next)
						if (od->string && d->string &&
						    strcmp(od->string, d->string) == 0 &&
						    cJSON_Compare(od, d, true))
							was = od;
			if (!was && !plain_version(d))
				return true;
		}
	}
	return false;
}

static int package_json(const struct side *before, const struct side *after, struct verdict *v)
{
	cJSON *o = NULL, *n = NULL;
	bool ok_o = json_side(before, &o), ok_n = json_side(after, &n);

	if (!ok_o || !ok_n) {
		v->harness = true;
		ap_buf_adds(&v->det, ok_o ? "the new package.json does not parse as a JSON object"
					  : "the old package.json does not parse as a JSON object");
		goto out;
	}
	for (const char *const *m = pkg_members; *m && !v->harness; m++)
		if (!members_same(o, n, *m))
			harness_because(v, "changes @", *m, strlen(*m));
	for (const char *const *m = pkg_deps; *m && !v->harness; m++)
		if (deps_local(o, n, *m) || deps_local(n, o, *m))
			harness_because(v, "points an entry of @ at local code, a URL or an alias",
					*m, strlen(*m));
out:
	cJSON_Delete(o);
	cJSON_Delete(n);
	return 0;
}

/* ---- requirements ---------------------------------------------------------------------- */

/* A plain requirement line: name, extras, version operators, a marker - nothing that is an
 * option (a `-` at the start of a word: pip strips the line), a path or a URL. */
static bool plain_requirement(struct span l)
{
	for (size_t i = 0; i < l.n; i++) {
		unsigned char c = (unsigned char)l.s[i];

		if (c == '#')
			return true;
		if (c == '-' && (i == 0 || l.s[i - 1] == ' ' || l.s[i - 1] == '\t'))
			return false;
		if (!(isalnum(c) || strchr(" \t\r\n._-[],<>=!~*;\"'()", c)))
			return false;
	}
	return true;
}

/* ---- line regions: pom.xml and Gradle -------------------------------------------------- */

/* Per line of one side: whether it is harness if changed, and why (a static phrase). */
struct marks {
	const char **why; /* NULL: fine to change */
	bool bad;	  /* the side does not parse */
	const char *bad_why;
};

static const char *const pom_elements[] = {
    "build",   "profiles",     "reporting",	     "properties", "parent",
    "modules", "repositories", "pluginRepositories", NULL,
};
static const char *const pom_whys[] = {
    "inside `<build>`",	       "inside `<profiles>`",
    "inside `<reporting>`",    "inside `<properties>`",
    "inside `<parent>`",       "inside `<modules>`",
    "inside `<repositories>`", "inside `<pluginRepositories>`",
};

/* The index of the line (of nl > 0) holding byte off of the text at base. */
static size_t line_of(const struct span *lines, size_t nl, const char *base, size_t off)
{
	size_t lo = 0, hi = nl;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if ((size_t)(lines[mid].s - base) <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Mark the lines of a pom.xml that name a system dependency. */
static void pom_mark_system(const struct span *lines, size_t nl, struct marks *m)
{
	for (size_t k = 0; k < nl; k++) {
		const char *l = lines[k].s;
		size_t ln = lines[k].n;

		for (size_t j = 0; j + 10 <= ln; j++)
			if (ieq(l + j, 10, "systempath", 10) ||
			    (j + 13 <= ln && ieq(l + j, 13, "<scope>system", 13)))
				m->why[k] = "naming a `system` dependency (a local jar)";
	}
}

/* A pom.xml being scanned for harness elements. */
struct pom_scan {
	const char *s; /* the text, n bytes */
	size_t n;
	const struct span *lines; /* its nl lines */
	size_t nl;
	struct marks *m;
	size_t depth;	   /* harness elements open */
	const char *outer; /* why of the outermost open harness element */
};

/* The end of the comment, CDATA section, processing instruction or declaration at s[i] into
 * *end; false when s[i] starts none of them (a tag). */
static bool pom_skip_markup(struct pom_scan *p, size_t i, size_t *end)
{
	const char *s = p->s;
	size_t n = p->n;
	struct marks *m = p->m;

	if (i + 4 <= n && memcmp(s + i, "<!--", 4) == 0) {
		const char *e = memmem(s + i + 4, n - i - 4, "-->", 3);

		*end = e ? (size_t)(e - s) + 3 : n;
		if (!e)
			m->bad = true, m->bad_why = "an unterminated comment";
	} else if (i + 9 <= n && memcmp(s + i, "<![CDATA[", 9) == 0) {
		const char *e = memmem(s + i + 9, n - i - 9, "]]>", 3);

		*end = e ? (size_t)(e - s) + 3 : n;
		if (!e)
			m->bad = true, m->bad_why = "an unterminated CDATA section";
	} else if (i + 2 <= n && s[i + 1] == '?') {
		const char *e = memmem(s + i + 2, n - i - 2, "?>", 2);

		*end = e ? (size_t)(e - s) + 2 : n;
	} else if (i + 2 <= n && s[i + 1] == '!') {
		m->bad = true;
		m->bad_why = "a DTD or entity declaration";
		*end = i + 2;
	} else {
		return false;
	}
	return true;
}

/* The tag tagname (len bytes; close: a closing tag) from line to s[end] (its `>`, or n): when
 * it is a harness element, mark its lines and track the elements open. */
static void pom_element(struct pom_scan *p, const char *tagname, size_t len, bool close,
			size_t line, size_t end)
{
	const char *s = p->s;
	size_t n = p->n;
	struct marks *m = p->m;

	for (size_t e = 0; pom_elements[e]; e++) {
		if (!ieq(tagname, len, pom_elements[e], strlen(pom_elements[e])))
			continue;
		size_t last = line_of(p->lines, p->nl, s, end < n ? end : n - 1);

		for (size_t x = line; x <= last; x++)
			if (!m->why[x])
				m->why[x] = pom_whys[e];
		if (close) {
			if (p->depth == 0) {
				m->bad = true;
				m->bad_why = "a closing tag without its opening one";
			} else if (--p->depth == 0) {
				p->outer = NULL;
			}
		} else if (end < n && s[end - 1] != '/') {
			if (p->depth++ == 0)
				p->outer = pom_whys[e];
		}
		break;
	}
}

/* The tag at s[i] (on line): its end (past the `>`) into *end; false when the `<` starts no
 * tag. */
static bool pom_tag(struct pom_scan *p, size_t i, size_t line, size_t *end)
{
	const char *s = p->s, *tagname;
	size_t n = p->n, start, len = 0, e;
	bool close = i + 1 < n && s[i + 1] == '/';

	start = i + (close ? 2 : 1);
	while (start + len < n &&
	       (isalnum((unsigned char)s[start + len]) || strchr("_.:-", s[start + len])))
		len++;
	if (len == 0) {
		p->m->bad = true;
		p->m->bad_why = "a `<` that starts no tag";
		return false;
	}
	tagname = s + start;
	for (size_t c = len; c > 0; c--)
		if (tagname[c - 1] == ':') {
			len -= c;
			tagname += c;
			break;
		}
	e = start;
	for (char q = 0; e < n; e++) {
		if (q) {
			q = s[e] == q ? 0 : q;
		} else if (s[e] == '"' || s[e] == '\'') {
			q = s[e];
		} else if (s[e] == '>') {
			break;
		}
	}
	if (e >= n) {
		p->m->bad = true;
		p->m->bad_why = "an unterminated tag";
	}
	pom_element(p, tagname, len, close, line, e);
	*end = e < n ? e + 1 : n;
	return true;
}

/* Mark the lines of a pom.xml that lie in a harness element, or name a system dependency. */
static void pom_marks(const char *s, size_t n, const struct span *lines, size_t nl, struct marks *m)
{
	struct pom_scan p = {.s = s, .n = n, .lines = lines, .nl = nl, .m = m};
	size_t i = 0;

	pom_mark_system(lines, nl, m);
	while (i < n) {
		size_t line = line_of(lines, nl, s, i), end;

		if (p.depth && p.outer && !m->why[line])
			m->why[line] = p.outer;
		if (s[i] != '<') {
			i++;
			continue;
		}
		if (!pom_skip_markup(&p, i, &end) && !pom_tag(&p, i, line, &end)) {
			i++;
			continue;
		}
		for (size_t x = line; p.depth && p.outer && x < nl && lines[x].s < s + end; x++)
			if (!m->why[x])
				m->why[x] = p.outer;
		i = end;
	}
	if (p.depth) {
		m->bad = true;
		m->bad_why = "an element left open";
	}
}

/* What a Gradle script has open at a point. */
struct gstate {
	char str;     /* '"' or '\'' inside a triple-quoted string */
	bool comment; /* inside a block comment */
	size_t depth; /* open braces */
	bool deps;    /* the open top-level block is `dependencies {` */
};

/* Whether line l opens a top-level `dependencies {` block and holds nothing else. */
static bool deps_opener(struct span l)
{
	const char *p = skip_blank(l.s, l.s + l.n), *e = l.s + l.n;

	if ((size_t)(e - p) < 12 || memcmp(p, "dependencies", 12) != 0)
		return false;
	p = skip_blank(p + 12, e);
	if (p >= e || *p != '{')
		return false;
	p = skip_blank(p + 1, e);
	return p == e || *p == '\n' || *p == '\r' || (e - p >= 2 && p[0] == '/' && p[1] == '/');
}

/* A line that cannot change the structure: no brace, no string or comment that could span
 * lines, no local files, no interpolation. */
static bool gradle_safe(struct span l)
{
	static const char *const banned[] = {"/*",     "*/",	    "'''",     "\"\"\"", "${",
					     "files(", "fileTree(", "flatDir", NULL};

	for (size_t i = 0; i < l.n; i++)
		if (l.s[i] == '{' || l.s[i] == '}' || l.s[i] == '\\')
			return false;
	for (const char *const *b = banned; *b; b++)
		if (memmem(l.s, l.n, *b, strlen(*b)))
			return false;
	return true;
}

/* Mark the lines of a Gradle script that are not inside a top-level dependencies block. */
static void gradle_marks(const struct span *lines, size_t nl, struct marks *m)
{
	struct gstate st = {0, false, 0, false};

	for (size_t k = 0; k < nl; k++) {
		const char *p = lines[k].s;
		size_t n = lines[k].n, i = 0;
		bool inside = st.deps && st.depth == 1 && !st.str && !st.comment;

		if (st.depth == 0 && !st.str && !st.comment && deps_opener(lines[k]))
			st.deps = true;
		while (i < n) {
			char c = p[i];

			if (st.comment) {
				if (c == '*' && i + 1 < n && p[i + 1] == '/') {
					st.comment = false;
					i++;
				}
				i++;
			} else if (st.str) {
				if (c == '\\')
					i++;
				else if (c == st.str && i + 2 < n && p[i + 1] == c && p[i + 2] == c)
					st.str = 0, i += 2;
				i++;
			} else if (c == '/' && i + 1 < n && p[i + 1] == '/') {
				break;
			} else if (c == '/' && i + 1 < n && p[i + 1] == '*') {
				st.comment = true;
				i += 2;
			} else if ((c == '"' || c == '\'') && i + 2 < n && p[i + 1] == c &&
				   p[i + 2] == c) {
				st.str = c;
				i += 3;
			} else if (c == '"' || c == '\'') {
				for (i++; i < n && p[i] != c && p[i] != '\n'; i++)
					if (p[i] == '\\')
						i++;
				if (i >= n || p[i] == '\n') {
					m->bad = true;
					m->bad_why = "an unterminated string";
				}
				i++;
			} else {
				if (c == '{') {
					st.depth++;
				} else if (c == '}') {
					if (st.depth == 0) {
						m->bad = true;
						m->bad_why = "a `}` without its `{`";
					} else if (--st.depth == 0) {
						st.deps = false;
					}
					inside = inside && st.depth >= 1;
				}
				i++;
			}
		}
		if (!(inside && st.depth == 1 && st.deps))
			m->why[k] = "outside a top-level `dependencies { }` block";
		else if (!gradle_safe(lines[k]))
			m->why[k] = "with a brace, a multi-line string or comment, `${`, `files(` "
				    "or `fileTree(`";
	}
	if (st.depth || st.str || st.comment) {
		m->bad = true;
		m->bad_why = "an unclosed block, string or comment";
	}
}

/* Compare two sides by the lines between the first and the last changed one, each judged by
 * the marks of its own side (pom.xml's elements, or Gradle's blocks); a side that does not
 * parse makes any change harness. what names the file in the detail. */
static int compare_lines(const struct side *before, const struct side *after, bool pom,
			 const char *what, struct verdict *v)
{
	struct span *ol = NULL, *nl = NULL;
	size_t on = 0, nn = 0, first, oe, ne;
	struct marks om = {NULL, false, NULL}, nm = {NULL, false, NULL};
	int rc;

	if ((rc = split_lines(before->s, before->exists ? before->n : 0, &ol, &on)) != 0 ||
	    (rc = split_lines(after->s, after->exists ? after->n : 0, &nl, &nn)) != 0)
		goto out;
	om.why = calloc(on + 1, sizeof(*om.why));
	nm.why = calloc(nn + 1, sizeof(*nm.why));
	if (!om.why || !nm.why) {
		rc = ap_error_set(AP_ENOMEM, "out of memory");
		goto out;
	}
	if (pom) {
		pom_marks(before->s, before->exists ? before->n : 0, ol, on, &om);
		pom_marks(after->s, after->exists ? after->n : 0, nl, nn, &nm);
	} else {
		gradle_marks(ol, on, &om);
		gradle_marks(nl, nn, &nm);
	}
	changed_region(ol, on, nl, nn, &first, &oe, &ne);
	if (first == oe && first == ne)
		goto out;
	if (om.bad || nm.bad) {
		v->harness = true;
		ap_buf_addf(&v->det, "the %s %s does not parse (%s)", om.bad ? "old" : "new", what,
			    om.bad ? om.bad_why : nm.bad_why);
		goto out;
	}
	for (size_t k = first; k < ne && !v->harness; k++)
		if (nm.why[k]) {
			v->harness = true;
			ap_buf_addf(&v->det, "changes line %zu %s", k + 1, nm.why[k]);
		}
	for (size_t k = first; k < oe && !v->harness; k++)
		if (om.why[k]) {
			v->harness = true;
			ap_buf_addf(&v->det, "changes old line %zu %s", k + 1, om.why[k]);
		}
out:
	free(om.why);
	free(nm.why);
	free(ol);
	free(nl);
	return rc;
}

static int requirements(const struct side *before, const struct side *after, struct verdict *v)
{
	struct span *ol = NULL, *nl = NULL;
	size_t on = 0, nn = 0, first, oe, ne;
	int rc;

	if ((rc = split_lines(before->s, before->exists ? before->n : 0, &ol, &on)) != 0 ||
	    (rc = split_lines(after->s, after->exists ? after->n : 0, &nl, &nn)) != 0)
		goto out;
	changed_region(ol, on, nl, nn, &first, &oe, &ne);
	for (size_t k = first; k < ne && !v->harness; k++)
		if (!plain_requirement(nl[k])) {
			v->harness = true;
			ap_buf_addf(&v->det, "changes line %zu to an option, a path or a URL",
				    k + 1);
		}
	for (size_t k = first; k < oe && !v->harness; k++)
		if (!plain_requirement(ol[k])) {
			v->harness = true;
			ap_buf_addf(&v->det, "changes old line %zu, an option, a path or a URL",
				    k + 1);
		}
out:
	free(ol);
	free(nl);
	return rc;
}

/* ---- one path -------------------------------------------------------------------------- */

/* Run a content rule on the two sides of one path. */
static int judge_content(enum kind k, const struct side *before, const struct side *after,
			 struct verdict *v)
{
	if ((before->exists && !before->readable) || (after->exists && !after->readable)) {
		v->harness = true;
		ap_buf_adds(&v->det, "its contents could not be compared (a binary change, or "
				     "larger than the cap)");
		return 0;
	}
	if (before->exists && after->exists && before->n == after->n &&
	    memcmp(before->s, after->s, before->n) == 0)
		return 0;
	switch (k) {
	case K_SETUP_CFG:
		return compare_sections(before, after, false, cfg_judge, v);
	case K_PYPROJECT:
		return compare_sections(before, after, true, pyproject_judge, v);
	case K_CARGO:
		return compare_sections(before, after, true, cargo_judge, v);
	case K_PACKAGE_JSON:
		return package_json(before, after, v);
	case K_REQUIREMENTS:
		return requirements(before, after, v);
	case K_POM:
		return compare_lines(before, after, true, "pom.xml", v);
	case K_GRADLE:
		return compare_lines(before, after, false, "Gradle script", v);
	default:
		return 0;
	}
}

static int add_finding(harness_findings *out, const char *path, const struct rule *r,
		       const ap_buf *det)
{
	harness_finding *f;
	ap_buf b = AP_BUF_INIT(4096);

	if (out->n == out->alloc) {
		size_t na = out->alloc ? out->alloc * 2 : 8;
		harness_finding *nv = realloc(out->items, na * sizeof(*nv));

		if (!nv)
			return ap_error_set(AP_ENOMEM, "out of memory");
		out->items = nv;
		out->alloc = na;
	}
	ap_buf_adds(&b, r->pub.why);
	if (det && det->len) {
		ap_buf_adds(&b, "; ");
		ap_buf_add(&b, det->data, det->len);
	}
	f = &out->items[out->n];
	f->rule = &r->pub;
	f->path = strdup(path);
	f->reason = ap_buf_take(&b);
	ap_buf_release(&b);
	if (!f->path || !f->reason) {
		free(f->path);
		free(f->reason);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	out->n++;
	return 0;
}

/* The first rule that calls path harness, given its two sides; appended to out. */
static int classify_path(harness_findings *out, const char *path, const struct side *before,
			 const struct side *after, const struct words *w)
{
	struct span *comps = NULL;
	size_t ncomp = 0;
	struct verdict v = {false, AP_BUF_INIT(4096)};
	int rc = split_path(path, &comps, &ncomp);

	for (size_t r = 0; r < NRULES && !rc; r++) {
		const struct rule *ru = &rules[r];
		bool hit = false;

		if (ru->kind == K_TEST_CMD) {
			hit = command_names(w, path);
		} else {
			for (const char *const *p = ru->paths; p && *p && !hit; p++)
				hit = path_matches(*p, comps, ncomp);
			if (hit && ru->kind != K_PATH) {
				v.harness = false;
				ap_buf_reset(&v.det);
				rc = judge_content(ru->kind, before, after, &v);
				hit = !rc && v.harness;
			}
		}
		if (hit) {
			rc = add_finding(out, path, ru, &v.det);
			break;
		}
	}
	ap_buf_release(&v.det);
	free(comps);
	return rc;
}

static struct side side_of(const harness_file *f, bool old)
{
	struct side s;
	const char *d = old ? f->old_data : f->new_data;
	size_t n = old ? f->old_len : f->new_len;

	s.exists = old ? f->status != 'A' : f->status != 'D';
	s.readable = s.exists && d && !f->binary && n <= HARNESS_CONTENT_CAP;
	s.s = s.readable ? d : "";
	s.n = s.readable ? n : 0;
	return s;
}

int harness_classify(harness_findings *out, const harness_file *files, size_t n,
		     const char *test_cmd, const char *setup_cmd)
{
	const struct side absent = {false, false, "", 0};
	struct words w = {NULL, 0, 0};
	size_t before_n = out->n;
	int rc;

	if ((rc = add_words(&w, test_cmd)) != 0 || (rc = add_words(&w, setup_cmd)) != 0)
		goto out;
	for (size_t i = 0; i < n && !rc; i++) {
		const harness_file *f = &files[i];
		const char *op = f->old_path ? f->old_path : f->new_path;
		const char *np = f->new_path ? f->new_path : f->old_path;
		struct side o = side_of(f, true), nw = side_of(f, false);
		char st = f->status;

		if (!op || !np)
			continue;
		if (st != 'A' && st != 'D' && st != 'R' && st != 'C')
			st = 'M';
		if (strcmp(op, np) == 0 || st == 'A' || st == 'D') {
			rc = classify_path(out, st == 'D' ? op : np, &o, &nw, &w);
		} else {
			if (st != 'C') /* a copy leaves its source as it was */
				rc = classify_path(out, op, &o, &absent, &w);
			if (!rc)
				rc = classify_path(out, np, &absent, &nw, &w);
		}
	}
out:
	free(w.v);
	if (rc) {
		for (size_t i = before_n; i < out->n; i++) {
			free(out->items[i].path);
			free(out->items[i].reason);
		}
		out->n = before_n;
	}
	return rc;
}

void harness_findings_release(harness_findings *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->items[i].path);
		free(f->items[i].reason);
	}
	free(f->items);
	f->items = NULL;
	f->n = f->alloc = 0;
}

/* ---- text ------------------------------------------------------------------------------ */

static int finish_text(ap_buf *b, char **out)
{
	*out = ap_buf_take(b);
	ap_buf_release(b);
	return *out ? 0 : ap_error_set(AP_ENOMEM, "out of memory");
}

int harness_findings_markdown(const harness_findings *f, size_t max, char **out)
{
	ap_buf b = AP_BUF_INIT(TEXT_CAP + 4096);
	size_t shown = 0;

	*out = NULL;
	for (; shown < f->n && (max == 0 || shown < max) && b.len < TEXT_CAP; shown++) {
		const harness_finding *x = &f->items[shown];

		ap_buf_adds(&b, "- ");
		put_code(&b, x->path, strlen(x->path), PATH_QUOTE);
		ap_buf_addf(&b, ": %s (rule `%s`)\n", x->reason, x->rule->name);
	}
	if (shown < f->n)
		ap_buf_addf(&b, "- and %zu more\n", f->n - shown);
	return finish_text(&b, out);
}

int harness_findings_reason(const harness_findings *f, size_t max, char **out)
{
	ap_buf b = AP_BUF_INIT(TEXT_CAP + 4096);
	size_t shown = 0;

	*out = NULL;
	if (f->n == 0)
		return 0;
	ap_buf_adds(&b, "the patch changes the test harness: ");
	for (; shown < f->n && (max == 0 || shown < max) && b.len < TEXT_CAP; shown++) {
		const harness_finding *x = &f->items[shown];

		if (shown)
			ap_buf_adds(&b, ", ");
		put_code(&b, x->path, strlen(x->path), PATH_QUOTE);
		ap_buf_addf(&b, " (%s)", x->reason);
	}
	if (shown < f->n)
		ap_buf_addf(&b, " and %zu more", f->n - shown);
	return finish_text(&b, out);
}

/* ---- what each file is ---- */

static bool ci_eq(const char *a, size_t n, const char *b)
{
	return strlen(b) == n && strncasecmp(a, b, n) == 0;
}

static bool ends_ci(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && strncasecmp(s + n - k, suffix, k) == 0;
}

/* Whether path looks like a test by the conventions of the common runners: a directory named
 * test(s), testing, __tests__, spec(s) or t, or a file named test_*, *_test.*, *.test.*,
 * *.spec.*, *Test(s).java / .kt, *_spec.rb, tests.rs, conftest excluded (harness). */
static bool looks_like_test(const char *path)
{
	const char *p = path, *slash, *base = path;
	size_t n;

	while ((slash = strchr(p, '/'))) {
		n = (size_t)(slash - p);
		if (ci_eq(p, n, "test") || ci_eq(p, n, "tests") || ci_eq(p, n, "testing") ||
		    ci_eq(p, n, "__tests__") || ci_eq(p, n, "spec") || ci_eq(p, n, "specs") ||
		    ci_eq(p, n, "t"))
			return true;
		p = base = slash + 1;
	}
	n = strlen(base);
	return strncasecmp(base, "test_", 5) == 0 || strstr(base, "_test.") ||
	       strstr(base, ".test.") || strstr(base, ".spec.") || strstr(base, "_spec.") ||
	       ends_ci(base, n, "Test.java") || ends_ci(base, n, "Tests.java") ||
	       ends_ci(base, n, "Test.kt") || ends_ci(base, n, "Tests.kt") ||
	       ci_eq(base, n, "tests.rs");
}

static const harness_finding *finding_for(const harness_findings *f, const char *path)
{
	for (size_t i = 0; f && i < f->n; i++)
		if (strcmp(f->items[i].path, path) == 0)
			return &f->items[i];
	return NULL;
}

const char *harness_kind(const harness_file *file, const harness_findings *found)
{
	const char *path = file->status == 'D' ? file->old_path : file->new_path;

	if (finding_for(found, path) || (file->status == 'R' && finding_for(found, file->old_path)))
		return "harness";
	if (looks_like_test(path))
		return file->status == 'A' || file->status == 'C' ? "new test"
		       : file->status == 'D'			  ? "deleted test"
								  : "changed test";
	return file->status == 'D' ? "deleted code" : "code";
}

int harness_kinds_markdown(const harness_file *files, size_t n, const harness_findings *found,
			   size_t max, char **out)
{
	ap_buf b = AP_BUF_INIT(TEXT_CAP + 4096);
	size_t shown = 0;

	*out = NULL;
	for (; shown < n && (max == 0 || shown < max) && b.len < TEXT_CAP; shown++) {
		const harness_file *x = &files[shown];
		const char *path = x->status == 'D' ? x->old_path : x->new_path;

		ap_buf_adds(&b, "- ");
		put_code(&b, path, strlen(path), PATH_QUOTE);
		if (x->status == 'R') {
			ap_buf_adds(&b, " (renamed from ");
			put_code(&b, x->old_path, strlen(x->old_path), PATH_QUOTE);
			ap_buf_adds(&b, ")");
		}
		ap_buf_addf(&b, ": %s\n", harness_kind(x, found));
	}
	if (shown < n)
		ap_buf_addf(&b, "- and %zu more\n", n - shown);
	return finish_text(&b, out);
}
