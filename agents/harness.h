/* SPDX-License-Identifier: MIT */
/* agents/harness.h - the test-harness detector: which files of a patch change how the tests are
 * collected, configured, started or reported.
 *
 * A Builder rewarded by a passing Tester can change the harness instead of the code (a
 * conftest.py hook that rewrites failures as passes, a pytest plugin named in pytest.ini, a
 * *.pth in a user site-packages inside the tree, a Makefile whose test target becomes `exit
 * 0`). A patch that changes the harness cannot be proven by that harness, so the host decides
 * here, from the changed files the host computed itself (github/patch.h's gh_patch_read_files,
 * converted by the caller), whether it does. Pure C: no I/O, no libgit2.
 *
 * The rules are ONE table (harness__rule_get(); docs/security.md, "What counts as the test
 * harness", has a row per rule). Each path of a delta (both paths of a rename; the new path
 * of a copy, whose source stays as it was) gets at most one finding: the first rule in table
 * order that matches. Most rules match the path alone (any directory, ASCII case ignored); a
 * few look at the contents (setup.cfg, pyproject.toml, package.json, Cargo.toml, pom.xml,
 * *.gradle[.kts]) and call the file harness only when the change touches the part that
 * configures tests. Fail closed throughout: a content rule whose contents are missing (binary,
 * over a cap) or do not parse calls the file harness.
 */
#ifndef AP_HARNESS_H
#define AP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

/* Contents larger than this (either side) are treated as unreadable: harness for a content
 * rule. */
#define HARNESS_CONTENT_CAP ((size_t)4 << 20)

/* One changed file. Every pointer is borrowed for the call. A side exists unless the status
 * says otherwise ('A' has no old side, 'D' no new one); an existing side whose data is NULL
 * was not read, and a content rule then fails closed. Data need not be NUL-terminated. */
typedef struct harness_file {
	const char *old_path; /* path before the patch ('A': the new path) */
	const char *new_path; /* path after the patch ('D': the old path) */
	char status;	      /* 'A', 'D', 'M', 'R', 'C'; anything else is read as 'M' */
	const char *old_data; /* bytes of the old side, or NULL */
	size_t old_len;
	const char *new_data; /* bytes of the new side, or NULL */
	size_t new_len;
	bool binary;  /* a binary delta: contents not read */
	bool too_big; /* a side over the reader's cap: contents not read */
} harness_file;

/* One rule of the table. Strings are static. */
typedef struct harness_rule {
	const char *name;      /* "pytest-conftest": stable, for tests, docs and logs */
	const char *ecosystem; /* "Python", "JavaScript", "Rust", "Java", "C/C++", "Ruby",
				* "any" */
	const char *matches;   /* Markdown: what it matches ("`conftest.py` in any directory") */
	const char *why;       /* one line, completes "`path` (...)" */
} harness_rule;

/* For tests only (they check docs/security.md against it): the table, in the order rules are
 * tried: harness__rule_get(i) for i < harness__rule_count(),
 * NULL past the end. */
size_t harness__rule_count(void);
const harness_rule *harness__rule_get(size_t i);

/* One path of the patch that changes the harness. Owned by the findings list. */
typedef struct harness_finding {
	char *path;		  /* the path, as given (the caller escapes it for text) */
	const harness_rule *rule; /* the rule that matched (points into the table) */
	char *reason;		  /* one line: the rule's why, plus what changed for a content
				   * rule ("changes `tool.pytest.ini_options.addopts`") */
} harness_finding;

typedef struct harness_findings {
	harness_finding *items;
	size_t n;
	size_t alloc;
} harness_findings;

#define HARNESS_FINDINGS_INIT                                                                      \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

/* Classify the n changed files. test_cmd and setup_cmd (either may be NULL) are the
 * repository's commands: a file either names counts as harness (see the `test-command` rule).
 * Findings are appended to *out in file order (old path before new path). Returns 0 (also
 * when nothing is harness: out->n == 0) or AP_ENOMEM; a failed call leaves *out as it was.
 * Deterministic, thread-safe, no I/O. */
int harness_classify(harness_findings *out, const harness_file *files, size_t n,
		     const char *test_cmd, const char *setup_cmd);

/* Free the findings' contents; *f is empty and reusable. Accepts NULL. */
void harness_findings_release(harness_findings *f);

/* Markdown, one line per finding, at most max of them (0: all), then "- and N more":
 * "- `conftest.py`: a pytest conftest.py: its hooks run inside the test run and can rewrite
 * results (rule `pytest-conftest`)\n". Paths are escaped (control bytes, backslash and
 * backtick as \ooo) and cut at 200 bytes. *out is malloc'd; "" when there are no findings.
 * AP_ENOMEM. */
int harness_findings_markdown(const harness_findings *f, size_t max, char **out);

/* One line: "the patch changes the test harness: `conftest.py` (a pytest conftest.py: ...),
 * `pytest.ini` (...) and N more", naming at most max paths (0: all), escaped as above.
 * *out is malloc'd; NULL when there are no findings. AP_ENOMEM. */
int harness_findings_reason(const harness_findings *f, size_t max, char **out);

/* What a changed file is, for the PR and the evidence: "harness" (a finding names it), else
 * by the common runners' naming conventions "new test", "changed test" or "deleted test"
 * (a test directory such as tests/ or __tests__/, test_*.py, *_test.go, *.test.ts,
 * *Test.java, ...), else "code" or "deleted code". Static strings. */
const char *harness_kind(const harness_file *file, const harness_findings *found);

/* Markdown, one line per file, at most max (0: all), then "- and N more":
 * "- `src/calc.py`: code\n", "- `tests/test_x.py`: new test\n", "- `b.py` (renamed from
 * `a.py`): code\n". Paths escaped as above. *out is malloc'd ("" for no files); AP_ENOMEM. */
int harness_kinds_markdown(const harness_file *files, size_t n, const harness_findings *found,
			   size_t max, char **out);

#endif
