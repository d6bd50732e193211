/* SPDX-License-Identifier: MIT */
/* agents/tester.h - the Tester: code, not a model, decides whether a patch is proven.
 *
 * Every verdict comes from structured evidence (agents/report.h): per-test results the runner
 * writes to a file outside the tree, and a classification of every run. Missing evidence is a
 * rejection that says what is missing, never a proof.
 *
 * Trees (all in the box, on the exec-able /tmp/trees mount, each with its own HOME and TMPDIR
 * so an editable install or a build points at its own tree):
 * - pristine: /repo without .git; `setup` runs there once and the suite runs once (the
 *   baseline, tester_baseline(), before any model call). The reproduction test is added to it
 *   for the pristine repro run, and removed again when a later round names another file.
 * - patched: every round a fresh copy of /repo with the exact diff bytes that will be
 *   published applied by `git apply` (no user or system git config); `setup` runs there, then
 *   the repro test and the suite.
 *
 * Proof: the diff is not empty, changes more than the test, passes the host's patch_check
 * hook; the repro test is collected and executed on pristine and FAILS in the test (an
 * assertion or an exception, not a skip, an error before the test body, a missing command or
 * a timeout - unless the issue is about a hang, then the repro deadline on pristine counts),
 * then PASSES (not skips) on patched; every test that passed on pristine passes on patched.
 * Runners without per-test results are compared by exit status only when the pristine suite
 * passed, else refused as weak evidence unless the repository opts in.
 */
#ifndef AP_TESTER_H
#define AP_TESTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/sandbox.h"
#include "agents/report.h"
#include "agents/tools.h"
#include "agents/traj.h"

/* Default deadlines in seconds (`setup_timeout`, `repro_timeout`, `suite_timeout` in
 * .github/autopatch.yml override them per repository). */
#define TESTER_SETUP_TIMEOUT 900
#define TESTER_REPRO_TIMEOUT 300
#define TESTER_SUITE_TIMEOUT 1200

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
typedef int (*tester_patch_check_fn)(void *ud, const char *diff, size_t len, char **why);
void tester_set_patch_check(tester *t, tester_patch_check_fn fn, void *ud);

/* The command that prepares a tree (borrowed; NULL: none), run offline in every tree the
 * Tester tests: fixer_opts.setup_cmd, ENV_PREPARE_TREE_CMD in the pipeline and `fix`, which
 * copies what the setup phase (env_setup) produced into that tree. */
void tester_set_setup(tester *t, const char *setup_cmd);

/* Deadlines in seconds; 0 keeps the default. */
void tester_set_limits(tester *t, int setup_s, int repro_s, int suite_s);

/* The repository accepts exit-status-only evidence for a suite that fails on pristine
 * (`allow_weak_evidence: true`); the verdict is then marked weak. */
void tester_set_weak_evidence(tester *t, bool allow);

/* The issue is about a hang: a repro that hits the deadline on pristine reproduces it. */
void tester_set_hang_issue(tester *t, bool about_hang);

/* The baseline: the pristine tree, setup there, one suite run. Returns 0 with *env_failure
 * NULL when the suite can serve as the baseline, or 0 with *env_failure set (malloc'd: the
 * class, the first error lines, what to change) when it cannot run - no patch can fix that.
 * Negative when the box failed. Runs once; later calls return the first answer.
 * *summary (optional, malloc'd) is one line about the baseline for progress. */
int tester_baseline(tester *t, char **env_failure, char **summary);

typedef struct tester_verdict {
	bool proven;
	bool weak;	     /* proven on exit status only, by the repository's opt-in */
	char *reason;	     /* one line: why rejected, or "proven" */
	char *feedback;	     /* for the Builder on rejection: reason + head/tail of the output */
	char *evidence;	     /* markdown: before/after of the repro test and the suite */
	char *diff;	     /* the exact diff tested (binary-safe text) */
	char *files_changed; /* newline-separated */
} tester_verdict;

#define TESTER_VERDICT_INIT                                                                        \
	{                                                                                          \
		0                                                                                  \
	}

/* Check the Builder's claim. Returns 0 with a verdict (v->proven or not), or a negative code
 * when the box failed. Runs tester_baseline() first if nobody did. */
int tester_check(tester *t, const tool_finish *fin, tester_verdict *v);
void tester_verdict_release(tester_verdict *v);

/* Whether an issue is about a hang: its title or body names one (hang, hangs, hung, hanging,
 * deadlock, freeze, freezes, frozen, infinite/endless loop, never returns/terminates/finishes/
 * completes, stuck, livelock, times out, timed out), as whole words, any case. */
bool tester_issue_about_hang(const char *title, const char *body);

/* ---- exposed for unit tests ---- */

/* Tests that passed in before (finished reports) and do not pass in after, one per line:
 * "- `id`: failed: first message line" / "error" / "now skipped" / "disappeared (did not run
 * after the patch)". At most max lines plus "and N more". NULL when none; *count the total. */
char *tester_regressions(const report *before, const report *after, size_t max, size_t *count);

/* Lines a unified diff adds or removes (not counting the ---/+++ file headers). */
int64_t tester_diff_changed_lines(const char *diff);

#endif
