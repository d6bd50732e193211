/* SPDX-License-Identifier: MIT */
/* agents/tester.h - the Tester: code, not a model, decides whether a patch is proven.
 *
 * Proof: the diff is not empty and changes more than the reproduction test; the reproduction
 * test FAILS on a pristine copy of the repository (/repo copied to /tmp/pristine plus only the
 * test file) and PASSES on the patched workspace; the repository's test command runs on both
 * and no test that passed on pristine fails (or disappears) on patched - compared per test
 * when the runner reports per test (pytest -rA, or JUnit XML reports the run writes), else by
 * exit status. Files a suite run creates in the workspace are removed again.
 */
#ifndef AP_TESTER_H
#define AP_TESTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/sandbox.h"
#include "agents/tools.h"
#include "agents/traj.h"

typedef struct tester tester;

/* test_cmd: the repository's test command (borrowed, must outlive the tester). */
int tester_new(tester **out, sbx_box *box, const char *test_cmd, traj *t);
void tester_free(tester *t);

/* Refuse patches that add or remove more than max lines (0 = no limit; default 500), against
 * the huge unrelated diffs users of other tools complain about. */
void tester_set_max_diff_lines(tester *t, int64_t max);

/* Every command the Tester runs gets this cancel hook (sbx_cmd.cancel): once *cancel is
 * non-zero the running command is killed with its box and tester_check() returns
 * AP_ECANCELLED. Borrowed; must outlive the tester. NULL: none. */
void tester_set_cancel(tester *t, const volatile sig_atomic_t *cancel);

/* The host's patch policy (fixer_opts.patch_check), run on the exact diff bytes right after
 * they are fetched: a refusal (AP_EDENIED) rejects the patch with its sentence as the reason
 * and the Builder's feedback; any other error ends tester_check(). fn NULL: none. Borrowed. */
void tester_set_patch_check(tester *t,
			    int (*fn)(void *ud, const char *diff, size_t len, char **why),
			    void *ud);

typedef struct tester_verdict {
	bool proven;
	char *reason;	     /* one line: why rejected, or "proven" */
	char *feedback;	     /* for the Builder on rejection: reason + head/tail of the output */
	char *evidence;	     /* markdown: before/after of the repro test and the suite */
	char *diff;	     /* staged git diff of the workspace (binary-safe text) */
	char *files_changed; /* newline-separated */
} tester_verdict;

#define TESTER_VERDICT_INIT                                                                        \
	{                                                                                          \
		0                                                                                  \
	}

/* Check the Builder's claim. Returns 0 with a verdict (v->proven or not), or a negative code
 * when the box failed. The suite's pristine run is done once and reused. */
int tester_check(tester *t, const tool_finish *fin, tester_verdict *v);
void tester_verdict_release(tester_verdict *v);

/* ---- exposed for unit tests ---- */

/* Per-test outcomes parsed from `pytest -rA` output. */
typedef struct test_outcomes {
	char **names;
	char *status; /* 'P' passed, 'F' failed, 'E' error */
	size_t n;
} test_outcomes;

/* Parse the "PASSED x", "FAILED x - msg", "ERROR x - msg" lines; n == 0 when none found. */
int tester_parse_pytest(const char *out, test_outcomes *o);
void test_outcomes_release(test_outcomes *o);

/* Per-test outcomes from JUnit XML (one or more reports concatenated): "classname::name" of
 * every <testcase>, failed with <failure>, error with <error>; skipped ones are left out. */
int tester_parse_junit(const char *xml, test_outcomes *o);

/* Names (malloc'd, newline-separated) of tests that passed in before but did not pass (or are
 * missing) in after; NULL when there are none. */
char *tester_regressions(const test_outcomes *before, const test_outcomes *after);

/* Lines a unified diff adds or removes (not counting the ---/+++ file headers). */
int64_t tester_diff_changed_lines(const char *diff);

/* The suite command with -rA added when it runs pytest and lacks it (malloc'd). */
char *tester_suite_cmd(const char *test_cmd);

#endif
