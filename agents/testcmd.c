/* SPDX-License-Identifier: MIT */
/* agents/testcmd.c - the test-command detector (see testcmd.h for the precedence and why). */
#include "agents/testcmd.h"

#include "agents/ci_workflow.h"
#include "common/beneath.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"

#include <assert.h>
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

#define WHY_MAX	      400  /* bytes of the "why" */
#define HEADING_QUOTE 40   /* characters of a markdown heading quoted in the "why" */
#define NAME_QUOTE    120  /* bytes of a file name of the checkout quoted */
#define MAX_NOTED     64   /* files named in the "not found" list */
#define LOOKED_CAP    4096 /* bytes of that list */
#define CMD_CAP                                                                                    \
	(CI_WORKFLOW_MAX_CMD > TESTCMD_MAX_TOX_CMD ? CI_WORKFLOW_MAX_CMD : TESTCMD_MAX_TOX_CMD)

#define CMAKE_CMD                                                                                  \
	"cmake -S . -B build-autopatch && cmake --build build-autopatch && cd build-autopatch && " \
	"ctest --output-on-failure"
#define MESON_CMD  "meson setup build-autopatch && meson test -C build-autopatch"
#define PYTEST_CMD "python3 -m pytest -q"

/* One detection run: the open checkout, what was looked at and, once decided, the answer. */
struct det {
	int root;		/* the checkout directory */
	const char *dir;	/* ... and its path */
	ap_buf text;		/* the file being looked at */
	char cmd[CMD_CAP + 1];	/* the command decided on */
	char why[WHY_MAX];	/* what decided it */
	ap_buf looked;		/* files present that gave no command, and why */
	ap_buf absent;		/* files looked for and not there */
	char *noted[MAX_NOTED]; /* the names in those two lists */
	int nnoted;
};

static bool decide(struct det *d, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the answer; always returns true, so a rule can end with `return decide(...)`. */
static bool decide(struct det *d, const char *cmd, const char *fmt, ...)
{
	va_list ap;

	/* A cut command would run another one. It fits: every source caps its command at
	 * CI_WORKFLOW_MAX_CMD or TESTCMD_MAX_TOX_CMD, or is our own. The why is only shown. */
	assert(strlen(cmd) <= CMD_CAP);
	snprintf(d->cmd, sizeof(d->cmd), "%s", cmd);
	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	return true;
}

/* ---- what was looked at ---- */

/* Whether name is already in the lists; else remember it. */
static bool noted(struct det *d, const char *name)
{
	for (int i = 0; i < d->nnoted; i++)
		if (strcmp(d->noted[i], name) == 0)
			return true;
	if (d->nnoted < MAX_NOTED)
		d->noted[d->nnoted++] = strdup(name);
	return false;
}

static void note(struct det *d, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Say that name was present and gave no command, and why (fmt). Once per name. */
static void note(struct det *d, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (noted(d, name))
		return;
	ap_buf_addf(&d->looked, "%s%s (", d->looked.len ? "; " : "", name);
	va_start(ap, fmt);
	ap_buf_vaddf(&d->looked, fmt, ap);
	va_end(ap);
	ap_buf_adds(&d->looked, ")");
}

static void absent(struct det *d, const char *name)
{
	if (!noted(d, name))
		ap_buf_addf(&d->absent, "%s%s", d->absent.len ? ", " : "", name);
}

/* Note why a file of the checkout could not be read (rc from fs_read_file_at). */
static void unread(struct det *d, const char *rel, int rc)
{
	if (rc == AP_ENOTFOUND)
		absent(d, rel);
	else if (rc == AP_EDENIED)
		note(d, rel, "a symbolic link or not a regular file: ignored");
	else if (rc == AP_ETOOBIG)
		note(d, rel, "larger than %d KiB: ignored", TESTCMD_FILE_CAP / 1024);
	else
		note(d, rel, "unreadable");
}

/* ---- reading the untrusted checkout ---- */

/* Read the regular file rel of the checkout into d->text, beneath the checkout and through no
 * symbolic link in any component (fs_read_file_at with FS_READ_NOFOLLOW, common/beneath.h). 0,
 * or a negative code when it is missing, a symbolic link (or under one), not a regular file,
 * larger than TESTCMD_FILE_CAP (the buffer's cap) or unreadable; that is noted in the "not
 * found" list. */
static int read_small(struct det *d, const char *rel)
{
	int rc;

	ap_buf_reset(&d->text);
	rc = fs_read_file_at(&d->text, d->dir, rel, FS_READ_NOFOLLOW);
	if (rc) {
		ap_buf_reset(&d->text);
		ap_error_clear();
		unread(d, rel, rc);
	} else if (!d->text.data) {
		rc = ap_buf_adds(&d->text, ""); /* an empty file is "" */
	}
	return rc;
}

/* Whether rel is a regular file of the checkout (not a link, nothing linked on the way);
 * noted when it is not. */
static bool has_file(struct det *d, const char *rel)
{
	struct stat st;
	bool yes;
	int fd, rc;

	if ((rc = beneath_open(&fd, d->root, rel, O_RDONLY | O_NONBLOCK)) != 0) {
		ap_error_clear();
		unread(d, rel, rc == AP_ENOTFOUND ? rc : AP_EDENIED);
		return false;
	}
	yes = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	close(fd);
	if (!yes)
		unread(d, rel, AP_EDENIED);
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

		if (read_small(d, *f) != 0)
			continue;
		if (!documented(d, d->text.data, &title, &tn)) {
			note(d, *f, "no single test command under a heading about tests");
			continue;
		}
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

/* ---- 2. the CI workflow ---- */

/* Whether a workflow file name sorts into group g: 0 names with "test", 1 with "ci", 2 others. */
static int workflow_group(const char *name)
{
	return strcasestr(name, "test") ? 0 : strcasestr(name, "ci") ? 1 : 2;
}

static int by_group_then_name(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int gx = workflow_group(x), gy = workflow_group(y);

	return gx != gy ? gx - gy : strcmp(x, y);
}

/* A file name of the checkout, as safe to show: printable ASCII but quotes, capped. */
static void safe_name(char *out, size_t cap, const char *name)
{
	size_t i;

	for (i = 0; name[i] && i + 4 < cap && i < NAME_QUOTE; i++)
		out[i] = ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7f ||
			  name[i] == '"' || name[i] == '`')
			     ? '?'
			     : name[i];
	if (name[i]) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
}

/* The names of the regular .yml/.yaml files of .github/workflows (at most
 * TESTCMD_MAX_WORKFLOWS, in the order they are tried); how many. */
static int workflow_files(struct det *d, char **names)
{
	int fd, n = 0, seen = 0;
	struct dirent *e;
	DIR *dir;

	if (beneath_open(&fd, d->root, ".github/workflows", O_RDONLY | O_DIRECTORY) != 0) {
		ap_error_clear();
		absent(d, ".github/workflows/*.yml");
		return 0;
	}
	if (!(dir = fdopendir(fd))) {
		close(fd);
		return 0;
	}
	while (n < TESTCMD_MAX_WORKFLOWS && seen++ < TESTCMD_WALK_ENTRIES &&
	       (e = readdir(dir)) != NULL) {
		size_t len = strlen(e->d_name);
		struct stat st;

		if (e->d_name[0] == '.' ||
		    !((len > 4 && strcmp(e->d_name + len - 4, ".yml") == 0) ||
		      (len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0)))
			continue;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode)) {
			char rel[NAME_QUOTE + 32], q[NAME_QUOTE + 4];

			safe_name(q, sizeof(q), e->d_name); /* at most NAME_QUOTE + 3 bytes */
			snprintf(rel, sizeof(rel), ".github/workflows/%s", q);
			note(d, rel, "a symbolic link or not a regular file: ignored");
			continue;
		}
		if ((names[n] = strdup(e->d_name)) != NULL)
			n++;
	}
	closedir(dir);
	qsort(names, (size_t)n, sizeof(names[0]), by_group_then_name);
	if (n == 0)
		absent(d, ".github/workflows/*.yml");
	return n;
}

static bool from_workflow(struct det *d, const char *name)
{
	char rel[NAME_QUOTE + 32], q[NAME_QUOTE + 4];
	ci_workflow_pick pick;
	int rc;

	if (strlen(name) > NAME_QUOTE) /* so rel fits, with name or its quote q */
		return false;
	snprintf(rel, sizeof(rel), ".github/workflows/%s", name);
	safe_name(q, sizeof(q), name);
	if (read_small(d, rel) != 0)
		return false;
	rc = ci_workflow_test_command(&pick, d->text.data, d->text.len);
	if (rc) {
		snprintf(rel, sizeof(rel), ".github/workflows/%s", q);
		note(d, rel, "%s", ap_error_last());
		ap_error_clear();
		return false;
	}
	decide(d, pick.cmd, ".github/workflows/%s job %s, step%s %s%s%s", q, pick.job,
	       strchr(pick.steps, ',') ? "s" : "", pick.steps, pick.note ? "; " : "",
	       pick.note ? pick.note : "");
	ci_workflow_pick_clear(&pick);
	return true;
}

static bool from_workflows(struct det *d)
{
	char *names[TESTCMD_MAX_WORKFLOWS];
	int n = workflow_files(d, names);
	bool found = false;

	for (int i = 0; i < n; i++) {
		if (!found)
			found = from_workflow(d, names[i]);
		free(names[i]);
	}
	return found;
}

/* ---- 3. tox and nox ---- */

/* One tox command line translated into the shell command it means, appended to out. */
static int tox_line(ap_buf *out, const char *l, size_t n)
{
	static const struct {
		const char *from, *to;
	} subst[] = {{"{posargs}", ""},
		     {"{envpython}", "python3"},
		     {"{toxinidir}", "."},
		     {"{tox_root}", "."}};
	bool ignore = false;
	ap_buf c = AP_BUF_INIT(TESTCMD_MAX_TOX_CMD + 1);
	int rc = 0;

	if (n > 0 && l[0] == '-') {
		ignore = true;
		l++;
		n--;
		trim(&l, &n);
	}
	for (size_t i = 0; i < n && rc == 0;) {
		size_t k, m;

		if (strchr(";&|<>$`\\\"'", l[i]) || (unsigned char)l[i] < 0x20 ||
		    (unsigned char)l[i] >= 0x7f) {
			rc = ap_error_set(
			    AP_EINVAL,
			    "a command has a character tox does not give a "
			    "shell (%c)",
			    (unsigned char)l[i] >= 0x20 && (unsigned char)l[i] < 0x7f ? l[i] : '?');
			break;
		}
		if (l[i] != '{') {
			rc = ap_buf_add(&c, l + i++, 1);
			continue;
		}
		for (k = 0; k < sizeof(subst) / sizeof(subst[0]); k++) {
			m = strlen(subst[k].from);
			if (n - i >= m && strncmp(l + i, subst[k].from, m) == 0)
				break;
		}
		if (k < sizeof(subst) / sizeof(subst[0])) {
			rc = ap_buf_adds(&c, subst[k].to);
			i += m;
		} else if (n - i > 9 && strncmp(l + i, "{posargs:", 9) == 0 &&
			   (m = strcspn(l + i, "}")) < n - i && !memchr(l + i + 9, '{', m - 9)) {
			rc = ap_buf_add(&c, l + i + 9, m - 9);
			i += m + 1;
		} else {
			size_t e = strcspn(l + i, "}");

			rc = ap_error_set(AP_EINVAL, "a command uses the substitution %.*s",
					  (int)(e < 40 && e < n - i ? e + 1 : 1), l + i);
		}
	}
	/* A {posargs:DEFAULT} brings text of its own: the same characters are refused in it. */
	for (size_t i = 0; rc == 0 && i < c.len; i++)
		if (strchr(";&|<>$`\\\"'{}", c.data[i]) || (unsigned char)c.data[i] < 0x20 ||
		    (unsigned char)c.data[i] >= 0x7f)
			rc =
			    ap_error_set(AP_EINVAL, "a command's {posargs} default has a character "
						    "tox does not give a shell");
	if (rc == 0) {
		const char *s = ap_buf_str(&c);
		size_t sn = c.len;

		trim(&s, &sn);
		if (sn && out->len)
			ap_buf_adds(out, " && ");
		if (sn)
			ap_buf_addf(out, ignore ? "(%.*s || true)" : "%.*s", (int)sn, s);
	}
	ap_buf_release(&c);
	return rc;
}

/* The commands value of the section named sect (its first line and the indented lines that
 * follow); joined into out. AP_ENOTFOUND when the section or its commands are missing. */
static int tox_section(ap_buf *out, const char *text, const char *sect)
{
	bool in = false, cmds = false, found = false;
	int rc = 0;

	for (const char *l = text, *next; l && rc == 0; l = next) {
		size_t n = line_at(l, &next);
		bool indented = n > 0 && (l[0] == ' ' || l[0] == '\t');

		if (!indented)
			cmds = false;
		trim(&l, &n);
		if (n == 0 || l[0] == '#' || l[0] == ';')
			continue;
		if (l[0] == '[' && !indented) {
			in = n == strlen(sect) + 2 && strncmp(l + 1, sect, n - 2) == 0 &&
			     l[n - 1] == ']';
			continue;
		}
		if (!in)
			continue;
		if (!indented) {
			const char *eq = memchr(l, '=', n), *key = l;
			size_t k = eq ? (size_t)(eq - l) : n, kn = k;

			if (!eq)
				continue;

			trim(&key, &kn);
			if (kn != 8 || strncmp(key, "commands", 8) != 0)
				continue;
			cmds = found = true;
			l += k + 1;
			n -= k + 1;
			trim(&l, &n);
			if (n == 0)
				continue;
		} else if (!cmds) {
			continue;
		}
		/* A factor-conditional line ("py38: pytest", "!lint: ...") runs in some envs. */
		size_t f = strspn(
		    l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,!{}-");
		if (f > n)
			f = n;
		if (f > 0 && f < n && l[f] == ':' && (f + 1 == n || l[f + 1] == ' '))
			continue;
		if (n > 0 && l[n - 1] == '\\')
			return ap_error_set(AP_EINVAL, "a command goes on over lines");
		rc = tox_line(out, l, n);
	}
	if (rc == 0 && (!found || out->len == 0))
		rc = ap_error_set(AP_ENOTFOUND, "no commands in [%s]", sect);
	return rc;
}

int testcmd_tox_commands(char **cmd, const char *text, size_t len)
{
	static const char *const sections[] = {"testenv", "testenv:test", "testenv:tests", NULL};
	ap_buf out = AP_BUF_INIT(4 * TESTCMD_MAX_TOX_CMD);
	char *copy = strndup(text, len);
	int rc = AP_ENOTFOUND;

	*cmd = NULL;
	if (!copy)
		return ap_error_set(AP_ENOMEM, "out of memory");
	for (const char *const *s = sections; *s && rc == AP_ENOTFOUND; s++) {
		ap_buf_reset(&out);
		ap_error_clear();
		rc = tox_section(&out, copy, *s);
	}
	if (rc == 0 && out.len > TESTCMD_MAX_TOX_CMD)
		rc = ap_error_set(AP_EINVAL, "the commands are longer than %d bytes",
				  TESTCMD_MAX_TOX_CMD);
	if (rc == 0 && !(*cmd = strdup(ap_buf_str(&out))))
		rc = ap_error_set(AP_ENOMEM, "out of memory");
	if (rc == AP_ENOTFOUND)
		rc = ap_error_set(AP_ENOTFOUND, "no commands in [testenv]");
	ap_buf_release(&out);
	free(copy);
	return rc;
}

static bool from_tox(struct det *d)
{
	char *cmd = NULL;
	int rc;

	if (read_small(d, "tox.ini") == 0) {
		if (!has_line_prefix(d->text.data, "[tox]") &&
		    !has_line_prefix(d->text.data, "[testenv")) {
			note(d, "tox.ini", "no [tox] or [testenv] section");
		} else if ((rc = testcmd_tox_commands(&cmd, d->text.data, d->text.len)) == 0) {
			decide(d, cmd, "tox.ini [testenv] commands");
			free(cmd);
			return true;
		} else {
			/* tox itself knows what its configuration means. */
			decide(d, "tox", "tox.ini (its commands are not read: %s)",
			       ap_error_last());
			ap_error_clear();
			return true;
		}
	}
	if (read_small(d, "noxfile.py") == 0) {
		if (strstr(d->text.data, "def tests("))
			return decide(d, "nox -s tests", "noxfile.py session tests");
		if (strstr(d->text.data, "def test("))
			return decide(d, "nox -s test", "noxfile.py session test");
		return decide(d, "nox", "noxfile.py");
	}
	return false;
}

/* ---- 4. a make target or a just recipe ---- */

/* "test" when the makefile (or justfile) text defines a test target, else "check" for a check
 * target, else NULL. A rule line starts in column 0 and has the targets before a ':' that is
 * not an assignment (:=, ::=); ".PHONY: test" names no target test. In a justfile the recipe
 * name comes first, then its parameters ("test *ARGS:"). */
static const char *make_target(const char *text, bool just)
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

			if (l[i] == '@') { /* a just recipe marked quiet */
				i++;
				continue;
			}
			test = test || (w == 4 && strncmp(l + i, "test", 4) == 0);
			check = check || (w == 5 && strncmp(l + i, "check", 5) == 0);
			if (just)
				break; /* the rest are parameters */
			i += w ? w : 1;
		}
	}
	return test ? "test" : check ? "check" : NULL;
}

static bool from_make_file(struct det *d, const char *const *files, const char *tool, bool just)
{
	for (const char *const *f = files; *f; f++) {
		const char *target;
		char cmd[16];

		int rc = read_small(d, *f);

		if (rc == AP_ENOTFOUND)
			continue;
		if (rc) /* the file the tool would read is a link, or too big: no answer */
			return false;
		target = make_target(d->text.data, just);
		if (!target) {
			note(d, *f, "no test or check %s", just ? "recipe" : "target");
			return false;
		}
		snprintf(cmd, sizeof(cmd), "%s %s", tool,
			 target); /* "make"/"just", "test"/"check" */
		return decide(d, cmd, "%s %s %s", *f, just ? "recipe" : "target", target);
	}
	return false;
}

static bool from_make(struct det *d)
{
	/* GNU make's own search order: it reads the first of these that exists. */
	static const char *const makefiles[] = {"GNUmakefile", "makefile", "Makefile", NULL};
	static const char *const justfiles[] = {"justfile", "Justfile", ".justfile", NULL};

	return from_make_file(d, makefiles, "make", false) ||
	       from_make_file(d, justfiles, "just", true);
}

/* ---- 5. package.json ---- */

static bool from_npm(struct det *d)
{
	cJSON *root, *test;
	bool yes = false;

	if (read_small(d, "package.json") != 0)
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
		if (!yes)
			note(d, "package.json", "scripts.test is %s",
			     n ? "npm's placeholder" : "empty");
	} else {
		note(d, "package.json", root ? "no scripts.test" : "not JSON");
	}
	cJSON_Delete(root);
	return yes && decide(d, "npm test", "package.json scripts.test");
}

/* ---- 6. pytest configuration ---- */

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
		bool yes = cfgs[i].section ? read_small(d, cfgs[i].file) == 0 &&
						 has_line_prefix(d->text.data, cfgs[i].section)
					   : has_file(d, cfgs[i].file);

		if (yes)
			return decide(d, PYTEST_CMD, "%s", cfgs[i].why);
		if (cfgs[i].section && d->text.data && i != 1)
			note(d, cfgs[i].file, "no %s section", cfgs[i].section);
	}
	return false;
}

/* ---- 7, 8. language manifests and build tools ---- */

static bool from_manifest(struct det *d)
{
	if (has_file(d, "go.mod"))
		return decide(d, "go test ./...", "go.mod");
	if (has_file(d, "Cargo.toml"))
		return decide(d, "cargo test --no-fail-fast", "Cargo.toml");
	return false;
}

static bool from_jvm(struct det *d)
{
	static const char *const gradle[] = {"build.gradle", "build.gradle.kts", "settings.gradle",
					     "settings.gradle.kts", NULL};

	if (has_file(d, "pom.xml"))
		return decide(d, "mvn -B test", "pom.xml");
	for (const char *const *g = gradle; *g; g++) {
		if (!has_file(d, *g))
			continue;
		if (has_file(d, "gradlew"))
			return decide(d, "./gradlew test", "%s and the wrapper gradlew", *g);
		return decide(d, "gradle test", "%s", *g);
	}
	return false;
}

/* ---- 9. CMake and meson ---- */

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

static bool from_build_system(struct det *d)
{
	const char *how;

	if (read_small(d, "CMakeLists.txt") == 0) {
		how = cmake_tests(d->text.data);
		if (how)
			return decide(d, CMAKE_CMD, "CMakeLists.txt %s", how);
		note(d, "CMakeLists.txt", "no enable_testing, add_test or include(CTest)");
	}
	if (has_file(d, "meson.build"))
		return decide(d, MESON_CMD, "meson.build");
	return false;
}

/* ---- 10. Python test files at any depth ---- */

static bool py_test_name(const char *name)
{
	size_t n = strlen(name);

	return n > 3 && strcmp(name + n - 3, ".py") == 0 &&
	       ((n > 8 && strncmp(name, "test_", 5) == 0) ||
		(n > 8 && strcmp(name + n - 8, "_test.py") == 0));
}

/* Directories never searched: hidden ones, installed packages, virtual environments. */
static bool skipped_dir(const char *name)
{
	static const char *const skip[] = {"node_modules", "site-packages",   "venv", "env",
					   "__pycache__",  "build-autopatch", NULL};

	if (name[0] == '.')
		return true;
	for (const char *const *s = skip; *s; s++)
		if (strcmp(name, *s) == 0)
			return true;
	return false;
}

/* The walk: a queue of directories (relative paths, "" for the top) and how much was read. */
struct walk {
	char **dirs;
	int *depth;
	size_t head, n, cap;
	long entries;
};

static int walk_push(struct walk *w, const char *rel, int depth)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		char **dirs = realloc(w->dirs, cap * sizeof(*dirs));

		if (!dirs)
			return AP_ENOMEM;
		w->dirs = dirs;
		int *dp = realloc(w->depth, cap * sizeof(*dp));
		if (!dp)
			return AP_ENOMEM;
		w->depth = dp;
		w->cap = cap;
	}
	if (!(w->dirs[w->n] = strdup(rel)))
		return AP_ENOMEM;
	w->depth[w->n++] = depth;
	return 0;
}

/* Look through one directory of the queue: true with *found set (malloc'd relative path)
 * when it holds a test file; its subdirectories are queued. */
static bool walk_one(struct det *d, struct walk *w, const char *rel, int depth, char **found)
{
	struct dirent *e;
	DIR *dir;
	int fd;

	if (!*rel) {
		fd = dup(d->root);
	} else if (beneath_open(&fd, d->root, rel, O_RDONLY | O_DIRECTORY) != 0) {
		ap_error_clear();
		return false;
	}
	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while (!*found && w->entries < TESTCMD_WALK_ENTRIES && (e = readdir(dir)) != NULL) {
		char path[4096];
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		w->entries++;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "/" : "", e->d_name) >=
		    (int)sizeof(path))
			continue;
		if (S_ISREG(st.st_mode) && py_test_name(e->d_name))
			*found = strdup(path);
		else if (S_ISDIR(st.st_mode) && depth < TESTCMD_WALK_DEPTH &&
			 !skipped_dir(e->d_name))
			walk_push(w, path, depth + 1);
	}
	closedir(dir);
	return *found != NULL;
}

static bool from_py_files(struct det *d)
{
	struct walk w = {0};
	char *found = NULL, q[NAME_QUOTE + 4];

	if (walk_push(&w, "", 0) == 0)
		while (w.head < w.n && w.entries < TESTCMD_WALK_ENTRIES &&
		       !walk_one(d, &w, w.dirs[w.head], w.depth[w.head], &found))
			w.head++;
	for (size_t i = 0; i < w.n; i++)
		free(w.dirs[i]);
	free(w.dirs);
	free(w.depth);
	if (found) {
		safe_name(q, sizeof(q), found);
		free(found);
		return decide(d, PYTEST_CMD, "test files such as %s", q);
	}
	ap_buf_addf(&d->looked,
		    "%sno test_*.py or *_test.py file within %d directory levels (%ld "
		    "entries read%s)",
		    d->looked.len ? "; " : "", TESTCMD_WALK_DEPTH, w.entries,
		    w.entries >= TESTCMD_WALK_ENTRIES ? ", the most read" : "");
	return false;
}

int testcmd_detect(char **cmd, char **why, const char *repo_dir)
{
	struct det d = {.root = -1,
			.dir = repo_dir,
			.text = AP_BUF_INIT(TESTCMD_FILE_CAP),
			.looked = AP_BUF_INIT(LOOKED_CAP),
			.absent = AP_BUF_INIT(LOOKED_CAP)};
	bool found;
	int rc = 0;

	*cmd = NULL;
	*why = NULL;
	d.root = open(repo_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d.root < 0)
		return ap_error_set(AP_EIO, "cannot open %s: %s", repo_dir, strerror(errno));
	found = from_docs(&d) || from_workflows(&d) || from_tox(&d) || from_make(&d) ||
		from_npm(&d) || from_pytest_config(&d) || from_manifest(&d) || from_jvm(&d) ||
		from_build_system(&d) || from_py_files(&d);
	if (!found) {
		rc = ap_error_set(AP_ENOTFOUND, "no test command detected; looked at: %s%s%s",
				  ap_buf_str(&d.looked), d.absent.len ? "; not present: " : "",
				  ap_buf_str(&d.absent));
	} else {
		*cmd = strdup(d.cmd);
		*why = strdup(d.why);
		if (!*cmd || !*why) {
			free(*cmd);
			free(*why);
			*cmd = *why = NULL;
			rc = ap_error_set(AP_ENOMEM, "out of memory");
		}
	}
	for (int i = 0; i < d.nnoted; i++)
		free(d.noted[i]);
	ap_buf_release(&d.text);
	ap_buf_release(&d.looked);
	ap_buf_release(&d.absent);
	close(d.root);
	return rc;
}
