/* SPDX-License-Identifier: MIT */
/* agents/ci_workflow.c - the test command of a GitHub Actions workflow (see ci_workflow.h for
 * how the job and its steps are chosen). */
#include "agents/ci_workflow.h"

#include "common/buf.h"
#include "common/err.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#define LABEL_MAX  40  /* characters of a job id or step label quoted */
#define MAX_KEPT   256 /* command lines kept from one job */
#define VALUE_MAX  100 /* bytes of a substituted matrix or env value */
#define REASON_MAX 300 /* bytes of why a job was refused */

enum kind { LINE_OTHER, LINE_INSTALL, LINE_LINT, LINE_TEST };

/* One kept command line of the job being assembled. */
struct kept {
	char *text;
	int step; /* index of its step among the kept steps */
};

/* The job being looked at. */
struct job {
	yaml_document_t *doc;
	const yaml_node_t *wf;	   /* the workflow's root mapping */
	const yaml_node_t *node;   /* the job's mapping */
	const yaml_node_t *matrix; /* strategy.matrix, or NULL */
	const char *id;
	struct kept kept[MAX_KEPT];
	int nkept;
	int nsteps;		 /* steps kept so far */
	bool step_cd[MAX_KEPT];	 /* per kept step: it changes directory */
	int last_test;		 /* the last kept step that is a test step, -1: none */
	int refused_at;		 /* kept-step index of the first refused step, -1: none */
	int last_test_line;	 /* kept lines up to and including that step */
	ap_buf labels;		 /* "Build", "Run tests" */
	int labels_at_test;	 /* labels.len when the last test step was added */
	ap_buf note;		 /* what was substituted */
	char reason[REASON_MAX]; /* why the job was refused ("" when it was not) */
};

static void refuse(struct job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void refuse(struct job *j, const char *fmt, ...)
{
	va_list ap;

	if (j->reason[0])
		return;
	/* Only shown (a note on the chosen command); names in it are labels cut visibly at
	 * LABEL_MAX, so every reason fits REASON_MAX. */
	va_start(ap, fmt);
	vsnprintf(j->reason, sizeof(j->reason), fmt, ap);
	va_end(ap);
}

/* ---- the YAML document ---- */

/* The scalar's text, or NULL when n is not a scalar or holds a NUL byte. */
static const char *scalar(const yaml_node_t *n)
{
	if (!n || n->type != YAML_SCALAR_NODE)
		return NULL;
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return NULL;
	return (const char *)n->data.scalar.value;
}

/* The value under key in the mapping map, or NULL. */
static const yaml_node_t *get(yaml_document_t *doc, const yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *k = scalar(yaml_document_get_node(doc, p->key));

		if (k && strcmp(k, key) == 0)
			return yaml_document_get_node(doc, p->value);
	}
	return NULL;
}

static const char *get_str(yaml_document_t *doc, const yaml_node_t *map, const char *key)
{
	return scalar(get(doc, map, key));
}

/* A short printable label of untrusted text: ASCII 0x20-0x7e except quotes and backticks,
 * at most LABEL_MAX characters, "..." when cut. */
static void add_label(ap_buf *b, const char *s)
{
	size_t i;

	for (i = 0; s[i] && s[i] != '\n' && i < LABEL_MAX; i++) {
		unsigned char c = (unsigned char)s[i];

		ap_buf_add(b, (c < 0x20 || c >= 0x7f || c == '"' || c == '`') ? "?" : &s[i], 1);
	}
	if (s[i] && s[i] != '\n')
		ap_buf_adds(b, "...");
}

/* Whether s mentions word (case-insensitive, as a part of a word too: "tests", "unittest"). */
static bool mentions(const char *s, const char *word)
{
	return s && strcasestr(s, word) != NULL;
}

/* ---- expressions ---- */

static bool safe_value(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > VALUE_MAX)
		return false;
	for (; *v; v++)
		if (!isalnum((unsigned char)*v) && !strchr("._+,:=@/-", *v))
			return false;
	return true;
}

/* The first value of matrix key (and how many it has) when it is a list of scalars, or a
 * scalar itself. */
static const char *matrix_first(struct job *j, const char *key, size_t *count)
{
	const yaml_node_t *v = get(j->doc, j->matrix, key), *first, *inc;

	*count = 1;
	if (!v) { /* only in `include:` entries: the first entry's */
		inc = get(j->doc, j->matrix, "include");
		if (inc && inc->type == YAML_SEQUENCE_NODE &&
		    inc->data.sequence.items.top > inc->data.sequence.items.start) {
			*count =
			    (size_t)(inc->data.sequence.items.top - inc->data.sequence.items.start);
			v = get(j->doc,
				yaml_document_get_node(j->doc, *inc->data.sequence.items.start),
				key);
			return scalar(v);
		}
	}
	if (v && v->type == YAML_SEQUENCE_NODE &&
	    v->data.sequence.items.top > v->data.sequence.items.start) {
		*count = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
		first = yaml_document_get_node(j->doc, *v->data.sequence.items.start);
		return scalar(first);
	}
	return scalar(v);
}

/* The env value of key: the step's, else the job's, else the workflow's. */
static const char *env_value(struct job *j, const yaml_node_t *step, const char *key)
{
	const char *v = get_str(j->doc, get(j->doc, step, "env"), key);

	if (!v)
		v = get_str(j->doc, get(j->doc, j->node, "env"), key);
	if (!v)
		v = get_str(j->doc, get(j->doc, j->wf, "env"), key);
	return v;
}

/* Replace the ${{ ... }} expressions of in, appending to out. false (with j->reason) when one
 * cannot be replaced. */
static bool expand(struct job *j, const yaml_node_t *step, const char *in, ap_buf *out)
{
	const char *p = in, *open;

	while ((open = strstr(p, "${{")) != NULL) {
		const char *close = strstr(open + 3, "}}"), *e, *v = NULL;
		char expr[VALUE_MAX + 1];
		size_t n, count = 1;

		ap_buf_add(out, p, (size_t)(open - p));
		if (!close) {
			refuse(j, "an expression is not closed");
			return false;
		}
		e = open + 3;
		while (*e == ' ')
			e++;
		n = (size_t)(close - e);
		while (n > 0 && e[n - 1] == ' ')
			n--;
		if (n > VALUE_MAX) {
			refuse(j, "an expression is too long");
			return false;
		}
		memcpy(expr, e, n);
		expr[n] = '\0';
		if (strncmp(expr, "matrix.", 7) == 0) {
			v = matrix_first(j, expr + 7, &count);
			if (v && safe_value(v) && count > 1) {
				ap_buf_addf(&j->note, "%s%s = %s (the first of %zu values)",
					    j->note.len ? ", " : "", expr, v, count);
			} else if (v && safe_value(v)) {
				ap_buf_addf(&j->note, "%s%s = %s", j->note.len ? ", " : "", expr,
					    v);
			}
		} else if (strncmp(expr, "env.", 4) == 0) {
			v = env_value(j, step, expr + 4);
		} else if (strcmp(expr, "github.workspace") == 0) {
			v = ".";
		}
		if (!v || !safe_value(v)) {
			ap_buf b = AP_BUF_INIT(128);

			add_label(&b, expr);
			refuse(j, "${{ %s }} has no value outside CI", ap_buf_str(&b));
			ap_buf_release(&b);
			return false;
		}
		ap_buf_adds(out, v);
		p = close + 2;
	}
	ap_buf_adds(out, p);
	return true;
}

/* ---- sorting the lines of a step ---- */

static bool word_is(const char *w, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && strncmp(w, *list, n) == 0)
			return true;
	return false;
}

/* The words of a line (at most 16), after leading VAR=value assignments and `sudo`. */
static int words(const char *line, const char **w, size_t *wn, int max)
{
	int n = 0;

	for (const char *p = line; *p && n < max;) {
		size_t len;

		p += strspn(p, " \t");
		len = strcspn(p, " \t");
		if (len == 0)
			break;
		bool assign = n == 0 && memchr(p, '=', len) && isalpha((unsigned char)*p);
		if (!assign && !(n == 0 && len == 4 && strncmp(p, "sudo", 4) == 0)) {
			w[n] = p;
			wn[n++] = len;
		}
		p += len;
	}
	return n;
}

/* A word that names a test run: test*, *test, *tests, unittest, pytest, check (for a build
 * tool), verify (Maven); "test:unit", "tests/run.py" too. */
static bool test_word(const char *w, size_t n, bool build_tool)
{
	char low[64];

	if (n == 0 || n >= sizeof(low))
		return false;
	for (size_t i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)w[i]);
	low[n] = '\0';
	if (build_tool && (strcmp(low, "check") == 0 || strcmp(low, "verify") == 0))
		return true;
	if (low[0] == '-')
		return false; /* an option: --test-threads, -DBUILD_TESTING=ON */
	return strstr(low, "test") != NULL && !strstr(low, "latest") && !strstr(low, "contest");
}

static enum kind sort_line(const char *line)
{
	static const char *const installers[] = {
	    "apt",	"apt-get", "brew",	     "choco",  "yum",  "dnf",
	    "apk",	"pacman",  "zypper",	     "curl",   "wget", "git",
	    "pipx",	"conda",   "mamba",	     "rustup", "nvm",  "sdk",
	    "corepack", "docker",  "docker-compose", "podman", NULL};
	static const char *const managers[] = {
	    "pip", "pip3",  "npm", "yarn",   "pnpm",	 "bun",	   "poetry", "pipenv", "uv",
	    "go",  "cargo", "gem", "bundle", "composer", "dotnet", "hatch",  "pdm",    NULL};
	static const char *const install_verbs[] = {"install", "ci",	   "i",	  "add",
						    "sync",    "download", "get", "fetch",
						    "restore", "lock",	   NULL};
	static const char *const linters[] = {"flake8",		"ruff",	       "black",
					      "isort",		"mypy",	       "pylint",
					      "pyright",	"pre-commit",  "eslint",
					      "prettier",	"tsc",	       "gofmt",
					      "golangci-lint",	"staticcheck", "clang-format",
					      "clang-tidy",	"shellcheck",  "codespell",
					      "cppcheck",	"rubocop",     "yamllint",
					      "markdownlint",	"pycodestyle", "pydocstyle",
					      "pyflakes",	"bandit",      "vulture",
					      "autopep8",	"yapf",	       "twine",
					      "check-manifest", "actionlint",  "hadolint",
					      "stylelint",	"tslint",      "biome",
					      "typos",		"cspell",      "sphinx-build",
					      "mkdocs",		NULL};
	static const char *const lint_words[] = {
	    "lint",   "linters", "flake8",     "ruff",	 "black",     "mypy",
	    "fmt",    "clippy",	 "format",     "vet",	 "typecheck", "type-check",
	    "pylint", "isort",	 "pre-commit", "eslint", "style",     "docs",
	    "doc",    "bench",	 "audit",      NULL};
	static const char *const runners[] = {"pytest", "py.test", "tox",  "nox",    "ctest",
					      "rspec",	"phpunit", "jest", "vitest", "mocha",
					      "prove",	"bats",	   NULL};
	static const char *const build_tools[] = {"make",   "gmake",	 "ninja", "mvn",   "./mvnw",
						  "gradle", "./gradlew", "just",  "meson", NULL};
	const char *w[16];
	size_t wn[16];
	int n = words(line, w, wn, 16);

	if (n == 0)
		return LINE_OTHER;
	if (word_is(w[0], wn[0], installers) ||
	    (n > 1 && word_is(w[0], wn[0], managers) && word_is(w[1], wn[1], install_verbs)) ||
	    (n > 1 && wn[0] == 3 && strncmp(w[0], "npm", 3) == 0 && wn[1] == 6 &&
	     strncmp(w[1], "update", 6) == 0) ||
	    (n > 2 && strncmp(w[0], "python", 6) == 0 && wn[1] == 2 &&
	     strncmp(w[1], "-m", 2) == 0 && wn[2] == 3 && strncmp(w[2], "pip", 3) == 0) ||
	    (n > 2 && wn[0] == 2 && strncmp(w[0], "go", 2) == 0 && wn[1] == 3 &&
	     strncmp(w[1], "mod", 3) == 0))
		return LINE_INSTALL;
	if (word_is(w[0], wn[0], linters))
		return LINE_LINT;
	for (int i = 1; i < n; i++)
		if (word_is(w[i], wn[i], lint_words) ||
		    (wn[i] > 5 && strncmp(w[i], "lint:", 5) == 0))
			return LINE_LINT;
	if (word_is(w[0], wn[0], runners) || test_word(w[0], wn[0], false))
		return LINE_TEST;
	for (int i = 1; i < n; i++) /* npx jest, poetry run pytest, bundle exec rspec */
		if (word_is(w[i], wn[i], runners))
			return LINE_TEST;
	bool build = word_is(w[0], wn[0], build_tools);
	bool cargo_or_go = (wn[0] == 5 && strncmp(w[0], "cargo", 5) == 0) ||
			   (wn[0] == 2 && strncmp(w[0], "go", 2) == 0);
	for (int i = 1; i < n; i++) {
		if (cargo_or_go && i == 1 && test_word(w[i], wn[i], false))
			return LINE_TEST;
		if (!cargo_or_go && test_word(w[i], wn[i], build))
			return LINE_TEST;
	}
	return LINE_OTHER;
}

/* What a step's name says it is: LINE_TEST, LINE_INSTALL (install, setup, upload, ...:
 * dropped unless it has a test line), else LINE_OTHER. */
static enum kind sort_name(const char *name)
{
	static const char *const skip[] = {
	    "install",	  "setup",     "set up", "set-up",	  "dependencies", "deps",
	    "lint",	  "format",    "fmt",	 "style",	  "clippy",	  "mypy",
	    "type check", "typecheck", "upload", "codecov",	  "coveralls",	  "publish",
	    "deploy",	  "release",   "docs",	 "documentation", "cache",	  "checkout",
	    "pre-commit", "audit",     "bench",	 "artifact",	  "login",	  "version",
	    NULL};

	if (!name)
		return LINE_OTHER;
	/* "Install test dependencies", "Upload test results": the skip word wins (a test line
	 * in such a step still makes it a test step). */
	for (const char *const *s = skip; *s; s++)
		if (mentions(name, *s))
			return LINE_INSTALL;
	for (const char *p = name; *p;) {
		size_t n = 0;

		while (p[n] && (isalnum((unsigned char)p[n]) || p[n] == '_'))
			n++;
		if (n > 0 &&
		    (test_word(p, n, true) || (n == 6 && strncasecmp(p, "checks", 6) == 0)))
			return LINE_TEST;
		p += n ? n : 1;
	}
	return LINE_OTHER;
}

/* Whether a kept line does some work: not only echo, printf, cd, export and the like (a
 * step named "Test summary" that echoes is no test step). */
static bool does_work(const char *line)
{
	static const char *const trivial[] = {"echo", "printf", "cat",	 "ls",	  "pwd",   "true",
					      "set",  "export", "cd",	 "mkdir", "rm",	   "cp",
					      "mv",   "touch",	"sleep", "date",  "env",   "which",
					      "tee",  ":",	"pushd", "popd",  "chmod", NULL};
	size_t n = strcspn(line, " \t");

	return !word_is(line, n, trivial);
}

/* Whether a line opens or closes a shell construct that spans lines, or feeds a heredoc. */
static bool multi_line_construct(const char *l)
{
	static const char *const kw[] = {
	    "if",   "then", "else",	"elif",	  "fi", "for", "while", "until", "do", "done",
	    "case", "esac", "function", "select", "{",	"}",   "(",	")",	 NULL};
	size_t n = strcspn(l, " \t;");

	if (word_is(l, n, kw) || strstr(l, "<<"))
		return true;
	n = strlen(l);
	return n > 0 && (l[n - 1] == '{' || l[n - 1] == '(');
}

static void trim(char **s)
{
	size_t n;

	while (**s == ' ' || **s == '\t')
		(*s)++;
	n = strlen(*s);
	while (n > 0 && ((*s)[n - 1] == ' ' || (*s)[n - 1] == '\t' || (*s)[n - 1] == '\r'))
		(*s)[--n] = '\0';
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Keep a command line of the current step. */
static bool keep(struct job *j, const char *text)
{
	if (j->nkept >= MAX_KEPT) {
		refuse(j, "it has more than %d command lines", MAX_KEPT);
		return false;
	}
	j->kept[j->nkept].text = strdup(text);
	if (!j->kept[j->nkept].text) {
		refuse(j, "out of memory");
		return false;
	}
	j->kept[j->nkept++].step = j->nsteps;
	return true;
}

/* The logical lines of run (continuations joined), sorted; the kept ones are kept. Returns
 * the step's kind: LINE_TEST when a line is a test line; -1 when the step is refused. */
static int take_lines(struct job *j, char *run, const char *label, bool *has_cd)
{
	char *save = NULL, *line, *joined = NULL;
	int lines = 0, result = LINE_OTHER;
	ap_buf logical = AP_BUF_INIT(CI_WORKFLOW_MAX_CMD + 1);

	for (line = strtok_r(run, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		enum kind k;

		trim(&line);
		if (++lines > CI_WORKFLOW_MAX_LINES) {
			refuse(j, "step \"%s\" is longer than %d lines", label,
			       CI_WORKFLOW_MAX_LINES);
			result = -1;
			break;
		}
		if (!*line || line[0] == '#')
			continue;
		if (logical.len)
			ap_buf_adds(&logical, " ");
		if (ap_buf_adds(&logical, line) != 0) {
			refuse(j, "step \"%s\" is too long", label);
			result = -1;
			break;
		}
		/* A line ending in \, && , || or | goes on on the next line. */
		if (ends_with(line, "\\")) {
			ap_buf_truncate(&logical, logical.len - 1);
			while (logical.len && (logical.data[logical.len - 1] == ' ' ||
					       logical.data[logical.len - 1] == '\t'))
				ap_buf_truncate(&logical, logical.len - 1);
			continue;
		}
		if (ends_with(line, "&&") || ends_with(line, "||") || ends_with(line, "|"))
			continue;
		joined = (char *)ap_buf_str(&logical);
		if (multi_line_construct(joined)) {
			refuse(j, "step \"%s\" has a shell construct over several lines", label);
			result = -1;
			break;
		}
		/* The Tester runs the command with sh, GitHub with bash. */
		if (strstr(joined, "[[") || strstr(joined, "<(") || strstr(joined, "$'")) {
			refuse(j, "step \"%s\" uses bash-only syntax", label);
			result = -1;
			break;
		}
		if (strncmp(joined, "source ", 7) == 0) {
			memmove(joined + 1, joined + 6, strlen(joined + 6) + 1); /* ". x" */
			joined[0] = '.';
		}
		k = sort_line(joined);
		if (k == LINE_TEST)
			result = LINE_TEST;
		if ((k == LINE_TEST || k == LINE_OTHER) && !keep(j, joined)) {
			result = -1;
			break;
		}
		if (k == LINE_OTHER &&
		    (strncmp(joined, "cd ", 3) == 0 || strncmp(joined, "pushd ", 6) == 0))
			*has_cd = true;
		ap_buf_reset(&logical);
	}
	if (result >= 0 && logical.len) {
		refuse(j, "step \"%s\" ends in the middle of a command", label);
		result = -1;
	}
	ap_buf_release(&logical);
	return result;
}

/* A working directory a step may cd into: relative, no "..", plain characters. */
static bool safe_dir(const char *d)
{
	if (!safe_value(d) || d[0] == '/' || strstr(d, ".."))
		return false;
	return true;
}

/* Whether the step's if: picks a platform, matrix entry or event (the step is not run
 * everywhere, so it is not the suite). */
static bool conditional(const char *cond)
{
	return cond && (strstr(cond, "matrix.") || strstr(cond, "runner.") ||
			strstr(cond, "github.") || strstr(cond, "inputs.") || strstr(cond, "env."));
}

/* Whether step is a run step without uses:, a condition or a shell other than sh or bash. */
static bool plain_shell_step(struct job *j, const yaml_node_t *step)
{
	const char *shell = get_str(j->doc, step, "shell");

	return !(get(j->doc, step, "uses") || conditional(get_str(j->doc, step, "if")) ||
		 (shell && strcmp(shell, "bash") != 0 && strcmp(shell, "sh") != 0 &&
		  strncmp(shell, "bash ", 5) != 0 && strncmp(shell, "sh ", 3) != 0));
}

/* The step's working directory (its own, else the job's or the workflow's default) into dir,
 * empty when none; false when it cannot be expanded or leaves the checkout (refused). */
static bool step_dir(struct job *j, const yaml_node_t *step, const ap_buf *label, ap_buf *dir)
{
	const char *wd = get_str(j->doc, step, "working-directory");

	if (!wd)
		wd = get_str(j->doc, get(j->doc, get(j->doc, j->node, "defaults"), "run"),
			     "working-directory");
	if (!wd)
		wd = get_str(j->doc, get(j->doc, get(j->doc, j->wf, "defaults"), "run"),
			     "working-directory");
	if (!wd)
		return true;
	if (!expand(j, step, wd, dir))
		return false;
	if (!safe_dir(ap_buf_str(dir))) {
		refuse(j, "step \"%s\" has a working directory outside the checkout",
		       ap_buf_str(label));
		return false;
	}
	return true;
}

/* Put `cd dir` before the step's kept lines (from first on); false when out of memory. */
static bool cd_first(struct job *j, int first, const char *dir)
{
	char *cd = NULL;

	if (asprintf(&cd, "cd %s", dir) < 0 || !keep(j, cd)) {
		free(cd);
		refuse(j, "out of memory");
		return false;
	}
	free(cd);
	/* The directory goes first: shift the step's lines by one. */
	struct kept last = j->kept[j->nkept - 1];
	memmove(&j->kept[first + 1], &j->kept[first],
		(size_t)(j->nkept - 1 - first) * sizeof(j->kept[0]));
	j->kept[first] = last;
	return true;
}

/* Look at one step; a step that cannot be taken is recorded in refused_at and reason. */
static void take_step(struct job *j, const yaml_node_t *step)
{
	const char *name = get_str(j->doc, step, "name"), *run = get_str(j->doc, step, "run");
	ap_buf label = AP_BUF_INIT(LABEL_MAX + 8), text = AP_BUF_INIT(64u << 10);
	ap_buf dir = AP_BUF_INIT(VALUE_MAX * 4);
	int first = j->nkept, kind;
	enum kind by_name = sort_name(name);
	bool has_cd = false, ok = false;

	if (!run || !plain_shell_step(j, step))
		return;
	add_label(&label, name ? name : run);
	if (!expand(j, step, run, &text) || !step_dir(j, step, &label, &dir))
		goto out;
	kind = take_lines(j, (char *)ap_buf_str(&text), ap_buf_str(&label), &has_cd);
	if (kind < 0)
		goto out;
	if (kind != LINE_TEST && by_name == LINE_INSTALL) {
		while (j->nkept > first)
			free(j->kept[--j->nkept].text);
		goto done_ok;
	}
	if (j->nkept == first)
		goto done_ok;
	if (dir.len && strcmp(ap_buf_str(&dir), ".") != 0) {
		if (!cd_first(j, first, ap_buf_str(&dir)))
			goto out;
		has_cd = true;
	}
	j->step_cd[j->nsteps] = has_cd;
	if (j->labels.len)
		ap_buf_adds(&j->labels, ", ");
	ap_buf_addf(&j->labels, "\"%s\"", ap_buf_str(&label));
	bool works = false;

	for (int i = first; i < j->nkept && !works; i++)
		works = does_work(j->kept[i].text);
	if (kind == LINE_TEST || (by_name == LINE_TEST && works)) {
		j->last_test = j->nsteps;
		j->last_test_line = j->nkept;
		j->labels_at_test = (int)j->labels.len;
	}
	j->nsteps++;
done_ok:
	ok = true;
out:
	if (!ok) {
		/* Refused: the job is refused only when a test step follows (assemble()); a
		 * step named install, setup, upload, ... is dropped whatever it holds. */
		while (j->nkept > first)
			free(j->kept[--j->nkept].text);
		if (by_name == LINE_INSTALL && j->refused_at < 0)
			j->reason[0] = '\0';
		else if (j->refused_at < 0)
			j->refused_at = j->nsteps;
	}
	ap_buf_release(&label);
	ap_buf_release(&text);
	ap_buf_release(&dir);
}

/* Join the kept lines up to the last test step into the command. */
static int assemble(struct job *j, ap_buf *cmd)
{
	int n = j->last_test_line;

	for (int i = 0; i < n; i++) {
		int s = j->kept[i].step;
		bool first_of_step = i == 0 || j->kept[i - 1].step != s;
		bool last_of_step = i == n - 1 || j->kept[i + 1].step != s;
		bool sub = j->step_cd[s] && s != j->kept[n - 1].step;
		const char *t = j->kept[i].text;
		bool paren = n > 1 && (strstr(t, "||") || strchr(t, ';') ||
				       (strchr(t, '&') && !strstr(t, "&&")));

		if (i > 0)
			ap_buf_adds(cmd, " && ");
		if (first_of_step && sub)
			ap_buf_adds(cmd, "(");
		ap_buf_addf(cmd, paren ? "(%s)" : "%s", t);
		if (last_of_step && sub)
			ap_buf_adds(cmd, ")");
	}
	if (cmd->len > CI_WORKFLOW_MAX_CMD) {
		refuse(j, "its command is longer than %d bytes", CI_WORKFLOW_MAX_CMD);
		return AP_ETOOBIG;
	}
	for (size_t i = 0; i < cmd->len; i++) {
		unsigned char c = (unsigned char)cmd->data[i];

		if (c < 0x20 || c >= 0x7f) {
			refuse(j, "its command has a control or non-ASCII character");
			return AP_EINVAL;
		}
	}
	return 0;
}

/* Whether the job runs only where the sandbox cannot (Windows, macOS). */
static bool foreign_runner(struct job *j)
{
	const yaml_node_t *r = get(j->doc, j->node, "runs-on");
	const char *s = scalar(r);
	size_t count;

	if (s && strncmp(s, "${{", 3) == 0 && strstr(s, "matrix.")) {
		char key[VALUE_MAX + 1];
		const char *k = strstr(s, "matrix.") + 7;
		size_t n = strcspn(k, " }");

		if (n > VALUE_MAX)
			return false;
		memcpy(key, k, n);
		key[n] = '\0';
		s = matrix_first(j, key, &count);
	}
	if (!s && r && r->type == YAML_SEQUENCE_NODE &&
	    r->data.sequence.items.top > r->data.sequence.items.start)
		s = scalar(yaml_document_get_node(j->doc, *r->data.sequence.items.start));
	return s && (mentions(s, "windows") || mentions(s, "macos"));
}

/* Look at one job: 0 with *cmd filled when it runs tests. */
static int take_job(struct job *j, ap_buf *cmd)
{
	const yaml_node_t *steps = get(j->doc, j->node, "steps");

	j->matrix = get(j->doc, get(j->doc, j->node, "strategy"), "matrix");
	j->last_test = -1;
	j->refused_at = -1;
	if (get(j->doc, j->node, "uses") || !steps || steps->type != YAML_SEQUENCE_NODE)
		return AP_ENOTFOUND;
	if (foreign_runner(j))
		return AP_ENOTFOUND;
	for (yaml_node_item_t *it = steps->data.sequence.items.start;
	     it < steps->data.sequence.items.top &&
	     it - steps->data.sequence.items.start < CI_WORKFLOW_MAX_STEPS;
	     it++) {
		const yaml_node_t *step = yaml_document_get_node(j->doc, *it);

		if (step && step->type == YAML_MAPPING_NODE)
			take_step(j, step);
	}
	if (j->last_test < 0)
		return AP_ENOTFOUND;
	if (j->refused_at >= 0 && j->refused_at <= j->last_test)
		return AP_EINVAL; /* a step before the tests cannot be run: j->reason */
	j->reason[0] = '\0';
	return assemble(j, cmd);
}

static void job_clear(struct job *j)
{
	for (int i = 0; i < j->nkept; i++)
		free(j->kept[i].text);
	j->nkept = 0;
	j->nsteps = 0;
	j->reason[0] = '\0';
	ap_buf_release(&j->labels);
	ap_buf_release(&j->note);
}

void ci_workflow_pick_clear(ci_workflow_pick *p)
{
	if (!p)
		return;
	free(p->cmd);
	free(p->job);
	free(p->steps);
	free(p->note);
	p->cmd = p->job = p->steps = p->note = NULL;
}

/* Fill out from the job j chose with command cmd. */
static int fill(ci_workflow_pick *out, struct job *j, ap_buf *cmd)
{
	ap_buf id = AP_BUF_INIT(LABEL_MAX + 8);

	add_label(&id, j->id);
	out->cmd = strdup(ap_buf_str(cmd));
	out->job = strdup(ap_buf_str(&id));
	out->steps = strndup(j->labels.data ? j->labels.data : "", (size_t)j->labels_at_test);
	out->note = j->note.len ? strndup(j->note.data, j->note.len) : NULL;
	ap_buf_release(&id);
	if (!out->cmd || !out->job || !out->steps || (j->note.len && !out->note)) {
		ci_workflow_pick_clear(out);
		return ap_error_set(AP_ENOMEM, "out of memory");
	}
	return 0;
}

/* Try the jobs of the mapping in order, those that mention test first (pass 0), then the
 * others (pass 1). */
static int choose(ci_workflow_pick *out, yaml_document_t *doc, const yaml_node_t *root,
		  const yaml_node_t *jobs)
{
	char first_reason[REASON_MAX + LABEL_MAX + 16] = "";
	int seen = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (yaml_node_pair_t *p = jobs->data.mapping.pairs.start;
		     p < jobs->data.mapping.pairs.top && seen < 2 * CI_WORKFLOW_MAX_JOBS; p++) {
			const yaml_node_t *node = yaml_document_get_node(doc, p->value);
			const char *id = scalar(yaml_document_get_node(doc, p->key));
			struct job *j;
			ap_buf cmd = AP_BUF_INIT(4 * CI_WORKFLOW_MAX_CMD);
			bool tests;
			int rc;

			seen++;
			if (!id || !node || node->type != YAML_MAPPING_NODE)
				continue;
			tests =
			    mentions(id, "test") || mentions(get_str(doc, node, "name"), "test");
			if (tests != (pass == 0))
				continue;
			j = calloc(1, sizeof(*j));
			if (!j)
				return ap_error_set(AP_ENOMEM, "out of memory");
			*j = (struct job){.doc = doc,
					  .wf = root,
					  .node = node,
					  .id = id,
					  .labels = AP_BUF_INIT(1024),
					  .note = AP_BUF_INIT(512)};
			rc = take_job(j, &cmd);
			if (rc == 0)
				rc = fill(out, j, &cmd);
			else if (j->reason[0] && !first_reason[0]) {
				ap_buf b = AP_BUF_INIT(LABEL_MAX + 8);

				add_label(&b, id);
				/* Fits: the label's buffer is capped below LABEL_MAX + 8. */
				snprintf(first_reason, sizeof(first_reason), "job %s: %s",
					 ap_buf_str(&b), j->reason);
				ap_buf_release(&b);
			}
			job_clear(j);
			free(j);
			ap_buf_release(&cmd);
			if (rc == 0 || rc == AP_ENOMEM)
				return rc;
		}
	}
	if (first_reason[0])
		return ap_error_set(AP_ENOTFOUND, "%s", first_reason);
	return ap_error_set(AP_ENOTFOUND, "no job runs tests");
}

int ci_workflow_test_command(ci_workflow_pick *out, const char *text, size_t len)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	const yaml_node_t *root, *jobs;
	int rc;

	*out = (ci_workflow_pick){0};
	if (!yaml_parser_initialize(&parser))
		return ap_error_set(AP_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc =
		    ap_error_set(AP_EINVAL, "not YAML (line %zu: %s)", parser.problem_mark.line + 1,
				 parser.problem ? parser.problem : "cannot parse");
		yaml_parser_delete(&parser);
		return rc;
	}
	root = yaml_document_get_root_node(&doc);
	jobs = get(&doc, root, "jobs");
	if (!jobs || jobs->type != YAML_MAPPING_NODE)
		rc = ap_error_set(AP_EINVAL, "not a workflow: no jobs");
	else
		rc = choose(out, &doc, root, jobs);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}
