/* SPDX-License-Identifier: MIT */
/* agents/testcmd.c - the test-command detector (see testcmd.h for the precedence and why). */
#include "agents/testcmd.h"
#include "common/beneath.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define WHY_MAX		96   /* bytes of the "why" */
#define HEADING_QUOTE	40   /* characters of a markdown heading quoted in the "why" */
#define MAX_DIR_ENTRIES 4096 /* entries looked at per directory when searching test files */
#define PY_TEST_DEPTH	2    /* subdirectory levels searched below tests/ and test/ */

#define CMAKE_CMD                                                                                  \
	"cmake -S . -B build-autopatch && cmake --build build-autopatch && cd build-autopatch && " \
	"ctest --output-on-failure"
#define PYTEST_CMD "python3 -m pytest -q"

static const char looked_for[] =
    "a test command documented in AGENTS.md or CONTRIBUTING.md, a Makefile test or check "
    "target, CMake tests, pytest configuration, a package.json test script, go.mod, "
    "Cargo.toml, test_*.py files";

/* One detection run: the open checkout and, once decided, the answer. */
struct det {
	int root;		       /* the checkout directory */
	const char *dir;	       /* ... and its path */
	ap_buf text;		       /* the file being looked at */
	char cmd[TESTCMD_MAX_CMD + 1]; /* the command decided on */
	char why[WHY_MAX];	       /* what decided it */
};

static bool decide(struct det *d, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the answer; always returns true, so a rule can end with `return decide(...)`. */
static bool decide(struct det *d, const char *cmd, const char *fmt, ...)
{
	va_list ap;

	snprintf(d->cmd, sizeof(d->cmd), "%s", cmd);
	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	return true;
}

/* ---- reading the untrusted checkout ---- */

/* Read the regular file rel of the checkout into d->text, beneath the checkout and through no
 * symbolic link in any component (fs_read_file_at with FS_READ_NOFOLLOW, common/beneath.h). 0,
 * or a negative code when it is missing, a symbolic link (or under one), not a regular file,
 * larger than TESTCMD_FILE_CAP (the buffer's cap) or unreadable. No message is kept: to the
 * detector each of these means "not there". */
static int read_small(struct det *d, const char *rel)
{
	int rc;

	ap_buf_reset(&d->text);
	rc = fs_read_file_at(&d->text, d->dir, rel, FS_READ_NOFOLLOW);
	if (rc) {
		ap_buf_reset(&d->text);
		ap_error_clear();
	}
	return rc;
}

/* Whether rel is a regular file of the checkout (not a link, nothing linked on the way). */
static bool has_file(const struct det *d, const char *rel)
{
	struct stat st;
	bool yes;
	int fd;

	if (beneath_open(&fd, d->root, rel, O_RDONLY | O_NONBLOCK) != 0) {
		ap_error_clear();
		return false;
	}
	yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	close(fd);
	return yes;
}

/* The line starting at p: its length without the line break; *next is the following line or
 * NULL at the end of the text. */
static size_t line_at(const char *p, const char **next)
{
	const char *nl = strchr(p, '\n');
	size_t n = nl ? (size_t)(nl - p) : strlen(p);

	*next = nl ? nl + 1 : NULL;
	if (n > 0 && p[n - 1] == '\r')
		n--;
	return n;
}

static void trim(const char **p, size_t *n)
{
	while (*n > 0 && (**p == ' ' || **p == '\t')) {
		(*p)++;
		(*n)--;
	}
	while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
		(*n)--;
}

/* Whether some line of text starts (after blanks) with prefix. */
static bool has_line_prefix(const char *text, const char *prefix)
{
	size_t want = strlen(prefix);

	for (const char *l = text, *next; l; l = next) {
		size_t n = line_at(l, &next);

		trim(&l, &n);
		if (n >= want && strncmp(l, prefix, want) == 0)
			return true;
	}
	return false;
}

/* ---- 1. a command documented in AGENTS.md or CONTRIBUTING.md ---- */

static bool word_in(const char *w, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && strncasecmp(w, *list, n) == 0)
			return true;
	return false;
}

/* An argument that names a test run: test*, a pytest/unittest module, or a script or target
 * whose name has a "test" part (unit-test, test:unit, tests/run.py); for a build tool also
 * check or verify (`make check`, `mvn verify`; `cargo check` only type-checks). */
static bool test_like(const char *w, size_t n, bool build_tool)
{
	static const char *const exact[] = {"pytest", "unittest", "rspec", NULL};
	static const char *const build[] = {"check", "verify", NULL};
	static const char *const parts[] = {"-test", "_test", ":test", "/test", ".test", NULL};
	char low[TESTCMD_MAX_CMD + 1];

	if (word_in(w, n, exact) || (build_tool && word_in(w, n, build)))
		return true;
	for (size_t i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)w[i]);
	low[n] = '\0';
	if (strncmp(low, "test", 4) == 0)
		return true;
	for (const char *const *p = parts; *p; p++)
		if (strstr(low, *p))
			return true;
	return false;
}

bool testcmd_is_runner(const char *line)
{
	/* Programs that only run tests: any arguments will do. */
	static const char *const runners[] = {"pytest", "py.test", "tox",     "nox",
					      "ctest",	"rspec",   "phpunit", NULL};
	/* General tools: they must be asked for a test run (`make test`, `go test ./...`). */
	static const char *const tools[] = {
	    "make",	 "gmake",  "python", "python3", "npm",	 "yarn", "pnpm",   "bun",
	    "deno",	 "go",	   "cargo",  "meson",	"ninja", "mvn",	 "./mvnw", "gradle",
	    "./gradlew", "dotnet", "bundle", "rake",	"mix",	 "just", NULL};
	/* ... of which these build: check and verify are test runs for them. */
	static const char *const build_tools[] = {"make",   "gmake",	 "ninja", "mvn", "./mvnw",
						  "gradle", "./gradlew", "just",  NULL};
	size_t len = strlen(line), n;
	const char *p = line;
	bool build_tool;

	if (len == 0 || len > TESTCMD_MAX_CMD)
		return false;
	for (const char *c = line; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f ||
		    strchr(";&|<>$`\\", *c))
			return false;
	n = strcspn(p, " \t");
	if (word_in(p, n, runners))
		return true;
	if (!word_in(p, n, tools))
		return false;
	build_tool = word_in(p, n, build_tools);
	for (p += n; *p;) {
		p += strspn(p, " \t");
		n = strcspn(p, " \t");
		if (n > 0 && test_like(p, n, build_tool))
			return true;
		p += n;
	}
	return false;
}

/* ATX heading level (1-6) of the line, with its text in *title; 0 when it is none. */
static int heading(const char *l, size_t n, const char **title, size_t *tn)
{
	size_t i = 0, level = 0;

	while (i < n && i < 3 && l[i] == ' ')
		i++;
	while (i < n && l[i] == '#' && level < 7) {
		i++;
		level++;
	}
	if (level == 0 || level > 6 || (i < n && l[i] != ' ' && l[i] != '\t'))
		return 0;
	*title = l + i;
	*tn = n - i;
	trim(title, tn);
	while (*tn > 0 && (*title)[*tn - 1] == '#')
		(*tn)--;
	trim(title, tn);
	return (int)level;
}

/* Whether a heading is about tests: one of its words is test, tests or testing. */
static bool about_tests(const char *t, size_t n)
{
	static const char *const words[] = {"test", "tests", "testing", NULL};

	for (size_t i = 0; i < n;) {
		size_t w = 0;

		while (i + w < n && isalnum((unsigned char)t[i + w]))
			w++;
		if (w > 0 && word_in(t + i, w, words))
			return true;
		i += w ? w : 1;
	}
	return false;
}

/* A fence opening or closing line (blanks, then 3+ ` or ~; indented too, as in a list
 * item): the length of the run, else 0. */
static size_t fence(const char *l, size_t n, char *ch)
{
	size_t i = 0, k = 0;

	while (i < n && (l[i] == ' ' || l[i] == '\t'))
		i++;
	if (i >= n || (l[i] != '`' && l[i] != '~'))
		return 0;
	*ch = l[i];
	while (i + k < n && l[i + k] == *ch)
		k++;
	return k >= 3 ? k : 0;
}

/* Whether a fence's info string says shell (or nothing): other languages hold no command. */
static bool shell_info(const char *info, size_t n)
{
	static const char *const shells[] = {
	    "sh", "bash", "shell", "console", "zsh", "text", "sh-session", "shell-session", NULL};

	size_t w = 0;

	trim(&info, &n);
	while (w < n && !strchr(" \t{,", info[w]))
		w++;
	return n == 0 || word_in(info, w, shells);
}

/* Whether the candidate (a code line or span) is accepted; copies it into d->cmd. A shell
 * prompt "$ " in front is dropped. */
static bool candidate(struct det *d, const char *p, size_t n)
{
	char line[TESTCMD_MAX_CMD + 1];

	trim(&p, &n);
	if (n >= 2 && p[0] == '$' && p[1] == ' ') {
		p += 2;
		n -= 2;
		trim(&p, &n);
	}
	if (n == 0 || n > TESTCMD_MAX_CMD)
		return false;
	memcpy(line, p, n);
	line[n] = '\0';
	if (!testcmd_is_runner(line))
		return false;
	memcpy(d->cmd, line, n + 1);
	return true;
}

/* Inline `code` spans of a prose line, in order, until one is accepted. */
static bool inline_spans(struct det *d, const char *l, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t k = 0, j;

		if (l[i] != '`') {
			i++;
			continue;
		}
		while (i + k < n && l[i + k] == '`')
			k++;
		for (j = i + k; j < n; j++) {
			size_t m = 0;

			while (j + m < n && l[j + m] == '`')
				m++;
			if (m == k)
				break;
			j += m ? m - 1 : 0;
		}
		if (j >= n)
			return false; /* unclosed: the rest is not code */
		if (candidate(d, l + i + k, j - i - k))
			return true;
		i = j + k;
	}
	return false;
}

/* The documented command of a markdown text, in d->cmd; the heading it was under in *title.
 * Only sections under a heading about tests count (down to the next heading of the same or a
 * higher level). In them, a fenced shell block counts when it holds exactly one command line
 * (blank lines and # comments aside; in a console transcript, one "$ " line), and so does
 * each inline code span. */
static bool documented(struct det *d, const char *text, const char **title, size_t *tn)
{
	const char *l, *next, *block = NULL, *prompt = NULL, *t;
	size_t n, block_n = 0, prompt_n = 0, fence_len = 0, k;
	int section = 0, level, commands = 0, prompts = 0;
	bool shell = false;
	char fch = 0, ch;

	for (l = text; l; l = next) {
		n = line_at(l, &next);
		if (fence_len) {
			const char *c = l;
			size_t cn = n;

			k = fence(l, n, &ch);
			if (k >= fence_len && ch == fch) {
				trim(&c, &cn);
				if (cn == k) {
					fence_len = 0;
					/* With "$ " prompts, the other lines are output. */
					if (prompts) {
						commands = prompts;
						block = prompt;
						block_n = prompt_n;
					}
					if (section && shell && commands == 1 &&
					    candidate(d, block, block_n))
						return true;
					continue;
				}
			}
			trim(&c, &cn);
			if (cn == 0 || c[0] == '#')
				continue;
			if (++commands == 1) {
				block = c;
				block_n = cn;
			}
			if (cn >= 2 && c[0] == '$' && c[1] == ' ' && ++prompts == 1) {
				prompt = c;
				prompt_n = cn;
			}
			continue;
		}
		k = fence(l, n, &fch);
		if (k) {
			const char *info = strchr(l, fch) + k;

			fence_len = k;
			shell = shell_info(info, n - (size_t)(info - l));
			commands = prompts = 0;
			continue;
		}
		level = heading(l, n, &t, &k);
		if (level) {
			if (section && level <= section)
				section = 0;
			if (about_tests(t, k)) {
				/* The nearest heading about tests names the section. */
				section = section ? section : level;
				*title = t;
				*tn = k;
			}
			continue;
		}
		if (section && inline_spans(d, l, n))
			return true;
	}
	return false;
}

static bool from_docs(struct det *d)
{
	static const char *const files[] = {"AGENTS.md", "CONTRIBUTING.md",
					    ".github/CONTRIBUTING.md", "docs/CONTRIBUTING.md",
					    NULL};

	for (const char *const *f = files; *f; f++) {
		const char *title = "";
		char quote[HEADING_QUOTE + 4];
		size_t tn = 0, i;

		if (read_small(d, *f) != 0 || !d->text.data ||
		    !documented(d, d->text.data, &title, &tn))
			continue;
		/* The heading is the repository's text: printable ASCII only, short. */
		for (i = 0; i < tn && i < HEADING_QUOTE; i++)
			quote[i] =
			    ((unsigned char)title[i] < 0x20 || (unsigned char)title[i] >= 0x7f ||
			     title[i] == '"' || title[i] == '`')
				? '?'
				: title[i];
		if (i < tn) {
			memcpy(quote + i, "...", 3);
			i += 3;
		}
		quote[i] = '\0';
		snprintf(d->why, sizeof(d->why), "%s section \"%s\"", *f, quote);
		return true;
	}
	return false;
}

/* ---- 2. a make target ---- */

/* "test" when the makefile text defines a test target, else "check" for a check target, else
 * NULL. A rule line starts in column 0 and has the targets before a ':' that is not an
 * assignment (:=, ::=); ".PHONY: test" names no target test. */
static const char *make_target(const char *text)
{
	bool test = false, check = false;

	for (const char *l = text, *next; l; l = next) {
		size_t n = line_at(l, &next), i = 0;
		const char *colon = memchr(l, ':', n);

		if (n == 0 || !colon || l[0] == '\t' || l[0] == ' ' || l[0] == '#' ||
		    memchr(l, '=', (size_t)(colon - l)))
			continue;
		if ((colon + 1 < l + n && colon[1] == '=') ||
		    (colon + 2 < l + n && colon[1] == ':' && colon[2] == '='))
			continue;
		while (l + i < colon) {
			size_t w = strcspn(l + i, " \t:");

			test = test || (w == 4 && strncmp(l + i, "test", 4) == 0);
			check = check || (w == 5 && strncmp(l + i, "check", 5) == 0);
			i += w ? w : 1;
		}
	}
	return test ? "test" : check ? "check" : NULL;
}

static bool from_make(struct det *d)
{
	/* GNU make's own search order: it reads the first of these that exists. */
	static const char *const files[] = {"GNUmakefile", "makefile", "Makefile", NULL};

	for (const char *const *f = files; *f; f++) {
		const char *target;
		char cmd[16];

		int rc = read_small(d, *f);

		if (rc == AP_ENOTFOUND)
			continue;
		if (rc) /* the makefile make would read is a link, or too big: no answer */
			return false;
		target = d->text.data ? make_target(d->text.data) : NULL;
		if (!target)
			return false;
		snprintf(cmd, sizeof(cmd), "make %s", target);
		return decide(d, cmd, "%s target %s", *f, target);
	}
	return false;
}

/* ---- 3. CMake tests ---- */

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* The CMake command that enables tests ("enable_testing", "add_test", "include(CTest)"), or
 * NULL. Command names are case-insensitive; # comments are skipped. */
static const char *cmake_tests(const char *text)
{
	for (const char *p = text; *p;) {
		const char *id = p, *q;
		size_t n = 0;

		if (*p == '#') {
			p += strcspn(p, "\n");
			continue;
		}
		if (!ident_char(*p) || (p > text && ident_char(p[-1]))) {
			p++;
			continue;
		}
		while (ident_char(id[n]))
			n++;
		q = id + n;
		q += strspn(q, " \t");
		p = id + n;
		if (*q != '(')
			continue;
		if (n == 14 && strncasecmp(id, "enable_testing", n) == 0)
			return "enable_testing";
		if (n == 8 && strncasecmp(id, "add_test", n) == 0)
			return "add_test";
		if (n == 7 && strncasecmp(id, "include", n) == 0) {
			q++;
			q += strspn(q, " \t");
			if (strncasecmp(q, "ctest", 5) == 0 && !ident_char(q[5]))
				return "include(CTest)";
		}
	}
	return NULL;
}

static bool from_cmake(struct det *d)
{
	const char *how;

	if (read_small(d, "CMakeLists.txt") != 0 || !d->text.data)
		return false;
	how = cmake_tests(d->text.data);
	return how && decide(d, CMAKE_CMD, "CMakeLists.txt %s", how);
}

/* ---- 4. pytest configuration ---- */

static bool from_pytest_config(struct det *d)
{
	/* In pytest's own order of looking for its configuration. */
	static const struct {
		const char *file;
		const char *section; /* a line starting so; NULL: the file alone is enough */
		const char *why;
	} cfgs[] = {
	    {"pytest.ini", NULL, "pytest.ini"},
	    {"pyproject.toml", "[tool.pytest.ini_options]",
	     "pyproject.toml [tool.pytest.ini_options]"},
	    {"pyproject.toml", "[tool.pytest]", "pyproject.toml [tool.pytest]"},
	    {"tox.ini", "[pytest]", "tox.ini [pytest]"},
	    {"setup.cfg", "[tool:pytest]", "setup.cfg [tool:pytest]"},
	    {"conftest.py", NULL, "conftest.py"},
	};

	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		bool yes = cfgs[i].section ? read_small(d, cfgs[i].file) == 0 && d->text.data &&
						 has_line_prefix(d->text.data, cfgs[i].section)
					   : has_file(d, cfgs[i].file);

		if (yes)
			return decide(d, PYTEST_CMD, "%s", cfgs[i].why);
	}
	return false;
}

/* ---- 5. package.json ---- */

static bool from_npm(struct det *d)
{
	cJSON *root, *test;
	bool yes = false;

	if (read_small(d, "package.json") != 0 || !d->text.data)
		return false;
	root = cJSON_ParseWithLength(d->text.data, d->text.len);
	test = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "scripts"),
						"test");
	if (cJSON_IsString(test)) {
		const char *s = test->valuestring;
		size_t n = strlen(s);

		trim(&s, &n);
		/* `npm init` writes a test script that only fails: it runs no test. */
		yes = n > 0 && !strstr(s, "no test specified");
	}
	cJSON_Delete(root);
	return yes && decide(d, "npm test", "package.json scripts.test");
}

/* ---- 6, 7. language manifests ---- */

static bool from_manifest(struct det *d)
{
	if (has_file(d, "go.mod"))
		return decide(d, "go test ./...", "go.mod");
	if (has_file(d, "Cargo.toml"))
		return decide(d, "cargo test", "Cargo.toml");
	return false;
}

/* ---- 8. Python test files ---- */

static bool py_test_name(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && strcmp(name + n - 3, ".py") == 0 &&
	       ((n > 8 && strncmp(name, "test_", 5) == 0) ||
		(n > 8 && strcmp(name + n - 8, "_test.py") == 0));
}

/* Whether the directory fd (taken over and closed) or its subdirectories down to depth levels
 * hold a test_*.py or *_test.py file. Links are neither followed nor counted. */
static bool py_tests_in(int fd, int depth)
{
	DIR *dir = fdopendir(fd);
	struct dirent *e;
	bool found = false;
	int seen = 0;

	if (!dir) {
		close(fd);
		return false;
	}
	while (!found && seen++ < MAX_DIR_ENTRIES && (e = readdir(dir)) != NULL) {
		struct stat st;

		if (e->d_name[0] == '.' ||
		    fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			found = py_test_name(e->d_name);
		} else if (S_ISDIR(st.st_mode) && depth > 0) {
			int sub = openat(dirfd(dir), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub >= 0)
				found = py_tests_in(sub, depth - 1);
		}
	}
	closedir(dir);
	return found;
}

static bool from_py_files(struct det *d)
{
	static const char *const dirs[] = {"tests", "test", NULL};
	int fd = dup(d->root);

	if (fd >= 0 && py_tests_in(fd, 0))
		return decide(d, PYTEST_CMD, "test_*.py files at the top level");
	for (const char *const *dir = dirs; *dir; dir++) {
		if (beneath_open(&fd, d->root, *dir, O_RDONLY | O_DIRECTORY) != 0)
			ap_error_clear();
		else if (py_tests_in(fd, PY_TEST_DEPTH))
			return decide(d, PYTEST_CMD, "test_*.py files in %s/", *dir);
	}
	return false;
}

int testcmd_detect(char **cmd, char **why, const char *repo_dir)
{
	struct det d = {.root = -1, .dir = repo_dir, .text = AP_BUF_INIT(TESTCMD_FILE_CAP)};
	bool found;

	*cmd = NULL;
	*why = NULL;
	d.root = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d.root < 0)
		return ap_error_set(AP_EIO, "cannot open %s: %s", repo_dir, strerror(errno));
	found = from_docs(&d) || from_make(&d) || from_cmake(&d) || from_pytest_config(&d) ||
		from_npm(&d) || from_manifest(&d) || from_py_files(&d);
	ap_buf_release(&d.text);
	close(d.root);
	if (!found)
		return ap_error_set(AP_ENOTFOUND, "no test command detected (looked for %s)",
				    looked_for);
	*cmd = strdup(d.cmd);
	*why = strdup(d.why);
	if (!*cmd || !*why) {
		free(*cmd);
		free(*why);
		*cmd = *why = NULL;
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}
