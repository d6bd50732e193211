/* SPDX-License-Identifier: MIT */
/* agents/tester.h - the Tester: code, not a model, decides whether a patch is proven.
 *
 * Every verdict comes from structured evidence (agents/report.h): per-test results the runner
 * writes to a file outside the tree, and a classification of every run. Missing evidence is a
 * rejection that says what is missing, never a proof.
 *
 * Boxes: the Builder's box is only where the diff is read from (its bytes, judged on the host).
 * Every run of the Tester - the baseline, and in each round the pristine repro, the patched
 * repro and the patched suite - happens in a fresh box of its own from make_box (the job's
 * image, no network, /repo the host checkout read-only, the setup products restored from the
 * snapshot the host took before any model call; job/tester_box.h), destroyed after the run.
 * No process, file, tmpfs or network state of the Builder's box or of another run reaches it.
 * A round's runs go in two lanes side by side (tester_set_side_by_side): the repro lane
 * (pristine, then patched) and the suite lane, each run still in its own box; the verdict and
 * the trajectory are those of the runs one after the other (the repro lane decides first).
 *
 * Trees (built in the run's box, on the exec-able /tmp/trees mount, each with a fresh HOME and
 * TMPDIR outside the tree):
 * - pristine: a copy of /repo without .git; for the pristine repro run, with only the
 *   reproduction test's own part of the diff applied (`git apply`);
 * - patched: a copy of /repo with the exact diff bytes that will be published applied by `git
 *   apply` (no user or system git config).
 * setup_cmd runs in the tree (it copies the setup products there; HOME gets links to the
 * products that lived at the top of HOME during setup), then the one command. Its report is
 * written into a directory made fresh for the run, outside the tree; a symbolic link there is
 * refused; every process the run left is killed before anything is read back.
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

#include "agents/report.h"
#include "agents/tools.h"
#include "agents/traj.h"
#include "sandbox/sandbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default deadlines in seconds (`setup_timeout`, `repro_timeout`, `suite_timeout` in
 * .github/autopatch.yml override them per repository). */
#define TESTER_SETUP_TIMEOUT 900
#define TESTER_REPRO_TIMEOUT 300
#define TESTER_SUITE_TIMEOUT 1200

typedef struct tester tester;

/* Makes a fresh box for one Tester run (fixer_opts.tester_box): *out is the Tester's, which
 * destroys it after the run. 0 or a negative AP_E* with a message. */
typedef int (*tester_box_fn)(void *ud, sbx_box **out);

/* work: the Builder's box, read for the diff only; make_box/ud: the Tester's own boxes;
 * test_cmd: the repository's test command. All borrowed, must outlive the tester. AP_EINVAL
 * when one is missing. */
int tester_new(tester **out, sbx_box *work, tester_box_fn make_box, void *make_box_ud,
	       const char *test_cmd, traj *t);
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

/* What the patch's files are, decided on the host from the diff's bytes and the base
 * (job/patch_policy.c: github/patch.c reads the changed files, agents/harness.c classifies
 * them). The hook fills it; the Tester frees it. */
typedef struct tester_files {
	char *harness_reason; /* one line naming the harness files and why; NULL: none */
	char *harness_list;   /* markdown list of the same (harness_findings_markdown) */
	char *kinds;	      /* markdown: every file and what it is (harness_kinds_markdown) */
	char *tests;	      /* the test files the patch adds (one per line): the suite runs
			       * without them */
} tester_files;

/* 0 with *out filled, or a negative AP_E* (with a message) that ends the check unproven. */
typedef int (*tester_files_fn)(void *ud, const char *diff, size_t len, tester_files *out);

/* The host's files check, run on the exact diff bytes right after the patch policy. A patch
 * that changes the test harness is rejected with the reason and no test runs, unless
 * allow_harness (`allow_harness_changes: true`): then the proof runs as usual and a passing
 * verdict is marked harness (never "proven" to a reader). Borrowed; required by the fixer. */
void tester_set_files_check(tester *t, tester_files_fn fn, void *ud, bool allow_harness);

/* Deadlines in seconds; 0 keeps the default. */
void tester_set_limits(tester *t, int setup_s, int repro_s, int suite_s);

/* The repository accepts exit-status-only evidence for a suite that fails on pristine
 * (`allow_weak_evidence: true`); the verdict is then marked weak. */
void tester_set_weak_evidence(tester *t, bool allow);

/* The issue is about a hang: a repro that hits the deadline on pristine reproduces it. */
void tester_set_hang_issue(tester *t, bool about_hang);

/* The pristine suite's per-test results kept across jobs by the host (fixer_opts.baseline_get /
 * _put; job/baseline_cache.h). get: 1 with rep filled (report_add; the Tester finishes it),
 * *exit_code and *millis set when results of the same suite on the same inputs are kept; 0
 * when none (rep left empty), with *miss (malloc'd, or NULL) one line saying why nothing was
 * reused: which part of the key differs, or that the entry is absent or damaged (the Tester
 * shows it in the baseline's progress line and trajectory event); negative only for
 * AP_ENOMEM. The Tester checks the results
 * again (they must classify as a suite that ran, with per-test results) and runs the suite
 * when they do not. put: after a baseline that gave per-test results; its answer is only a
 * note. Either may be NULL. Borrowed; must outlive the tester. */
typedef int (*tester_baseline_get_fn)(void *ud, const char *test_cmd, report *rep, int *exit_code,
				      int64_t *millis, char **miss);
typedef int (*tester_baseline_put_fn)(void *ud, const char *test_cmd, const report *rep,
				      int exit_code, int64_t millis);
void tester_set_baseline_cache(tester *t, tester_baseline_get_fn get, tester_baseline_put_fn put,
			       void *ud);

/* The baseline: the pristine tree, setup there, one suite run. Returns 0 with *env_failure
 * NULL when the suite can serve as the baseline, or 0 with *env_failure set (malloc'd: the
 * class, the first error lines, what to change) when it cannot run - no patch can fix that.
 * Negative when the box failed. Runs once; later calls return the first answer.
 * *summary (optional, malloc'd) is one line about the baseline for progress. */
int tester_baseline(tester *t, char **env_failure, char **summary);

typedef struct tester_verdict {
	bool proven;	     /* every check passed (with harness set: NOT a proof, see below) */
	bool weak;	     /* proven on exit status only, by the repository's opt-in */
	bool harness;	     /* the patch changes the test harness (allow_harness_changes): the
			      * checks ran under a harness the patch changed, so nothing is proven */
	char *harness_list;  /* markdown: the harness files and why (with harness) */
	char *kinds;	     /* markdown: every changed file and what it is */
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

/* Run a round's two lanes (the repro on pristine then patched; the suite on patched) side by
 * side, each run still in a box of its own (default: on when the host has two or more CPUs;
 * the fixer turns it off for AUTOPATCH_TESTER_SIDE_BY_SIDE=off). Off: one after the other.
 * The verdict and the order of the trajectory's events are the same either way. */
void tester_set_side_by_side(tester *t, bool on);

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
