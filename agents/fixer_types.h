/* SPDX-License-Identifier: MIT */
/* agents/fixer_types.h - the fixer's options and result (see fixer.h for the run itself).
 * A header of their own so the roles (agent.h) and the loop (fixer.c) share them without
 * including each other. */
#ifndef AP_FIXER_TYPES_H
#define AP_FIXER_TYPES_H

#include "common/config.h"
#include "sandbox/sandbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tester_files; /* agents/tester.h */
struct report;	     /* agents/report.h */

/* Progress callback: called at every step with a short line ("planning", "tester: repro fails on
 * pristine as expected"). stage is one of "preparing" (setup and the Tester's baseline),
 * "planning", "building", "testing". */
typedef void (*fixer_progress_fn)(void *ud, const char *stage, const char *line);
/* Cancellation check, polled between steps and, from a helper thread, every 200 ms while a
 * sandbox command runs (a true answer kills the command with its box): it must be cheap and
 * thread-safe. Return true to stop (AP_ECANCELLED). */
typedef bool (*fixer_stop_fn)(void *ud);
struct fixer_result;
/* Usage callback: called on the fixer's thread after every model call with the result so far
 * (model_calls, tokens_in/out, cost_micro, estimated_calls are current), so the caller can
 * record spending as it happens. */
typedef void (*fixer_usage_fn)(void *ud, const struct fixer_result *so_far);

typedef struct fixer_opts {
	int version;
	const ap_config *cfg; /* AUTOPATCH_LLM_* and budgets */
	sbx_box *box;	      /* prepared: /tmp/workspace holds the repository */
	const char *issue_title;
	const char *issue_body;
	const char *feedback;	      /* iteration: the reviewer's request, else NULL */
	const char *previous_summary; /* iteration: what the earlier run did, else NULL */
	const char *test_cmd;	      /* the repository's test command (shell string, in the box) */
	const char *setup_cmd;	      /* optional: run offline in the workspace and in every
				       * tree the Tester tests, before anything else there (the
				       * pipeline and `fix`: ENV_PREPARE_TREE_CMD, which copies
				       * what env_setup produced; a no-op in the workspace) */
	int max_iterations;	      /* Builder/Tester rounds; 0 = default 4 */
	const char *trajectory_path;  /* JSONL file to write (redacted); NULL = none */
	fixer_progress_fn progress;
	fixer_stop_fn should_stop;
	fixer_usage_fn usage;	/* may be NULL */
	int64_t cost_cap_micro; /* when > 0 and the model is priced: no model call is made that
				 * could take the run's cost above this (the budget reservation
				 * the caller holds); the run stops with the "cost" budget */
	void *ud;
	/* Additions (zero: the defaults). Per-repository limits from .github/autopatch.yml
	 * (setup_timeout feeds env_setup's deadline, not the Tester's): */
	int setup_timeout_s; /* each run of setup_cmd (preparing a tree); 0 = TESTER_SETUP_TIMEOUT
			      */
	int repro_timeout_s; /* each run of the reproduction test; 0 = 300 */
	int suite_timeout_s; /* each run of the test suite; 0 = 1200 */
	bool
	    allow_weak_evidence; /* accept exit-status evidence for a suite that fails on
				  * pristine and gives no per-test results (result.weak_evidence) */
	/* The host's policy over a patch, called by the Tester on the exact diff bytes it fetched
	 * from the workspace, before anything is tested: 0 = test it; AP_EDENIED = refused, with
	 * *why one sentence naming the rule and the path (malloc'd; the Tester frees it), which
	 * becomes the verdict and the Builder's feedback; another negative code ends the run.
	 * NULL: no check (the publisher still checks). */
	int (*patch_check)(void *ud, const char *diff, size_t len, char **why);
	void *patch_check_ud;
	/* Required: where the Tester runs. Every Tester run (the baseline, each round's
	 * pristine repro, patched repro and patched suite) happens in a fresh box this makes
	 * (the job's image, no network, /repo the host checkout, the setup products restored
	 * from the host-held snapshot; job/tester_box.h), never in `box`, which the Tester only
	 * reads the diff from. *out is the Tester's: it destroys the box after the run. */
	int (*tester_box)(void *ud, sbx_box **out);
	void *tester_box_ud;
	/* Required: what the patch's files are and whether it changes the test harness, decided
	 * on the host from the diff's bytes and the base (job/patch_policy.c's
	 * patch_policy_fixer_files; tester.h's tester_files_fn). */
	int (*files_check)(void *ud, const char *diff, size_t len, struct tester_files *out);
	void *files_check_ud;
	bool allow_harness_changes; /* `allow_harness_changes: true`: a patch that changes the
				     * harness may still be published, marked not proven */
	/* Optional: the pristine suite's per-test results kept by the host across jobs
	 * (job/baseline_cache.h; tester.h's tester_baseline_get_fn / _put_fn). Both NULL: the
	 * baseline always runs. */
	int (*baseline_get)(void *ud, const char *test_cmd, struct report *rep, int *exit_code,
			    int64_t *millis, char **miss);
	int (*baseline_put)(void *ud, const char *test_cmd, const struct report *rep, int exit_code,
			    int64_t millis);
	void *baseline_ud;
} fixer_opts;

#define FIXER_OPTS_VERSION 1
#define FIXER_OPTS_INIT                                                                            \
	{                                                                                          \
		.version = FIXER_OPTS_VERSION                                                      \
	}

typedef struct fixer_result {
	bool proven;	      /* the Tester accepted the patch */
	char *diff;	      /* git diff of the workspace (unified, binary-safe), or NULL */
	char *summary;	      /* what was changed and why (from the plan and the Builder) */
	char *cause;	      /* the Planner's suspected cause */
	char *repro_test;     /* the reproduction test's path and the command that runs it */
	char *evidence;	      /* the Tester's before/after evidence, markdown */
	char *files_changed;  /* newline-separated paths */
	char *failure;	      /* why it failed (budget named, last Tester verdict), else NULL */
	bool env_failure;     /* the suite cannot run on the unchanged code (failure says why and
			       * what to change); no model call was made */
	bool weak_evidence;   /* proven on exit status only, by the repository's opt-in */
	bool harness_changed; /* every check passed, but the patch changes the test harness
			       * (allow_harness_changes): NOT proven; say so wherever it shows */
	char *harness_list;   /* markdown: the harness files and why (with harness_changed) */
	char *file_kinds;     /* markdown: every changed file and what it is */
	char *model;	      /* provider/model used */
	int64_t tokens_in, tokens_out;
	int model_calls;
	int iterations;
	bool priced;	     /* AUTOPATCH_PRICES has the model's price: cost_micro is meaningful */
	int64_t cost_micro;  /* what the calls cost (micro-dollars), rounded up */
	int estimated_calls; /* calls whose usage the provider did not report (charged at most) */
} fixer_result;

#define FIXER_RESULT_INIT                                                                          \
	{                                                                                          \
		0                                                                                  \
	}

#endif
