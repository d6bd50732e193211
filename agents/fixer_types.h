/* SPDX-License-Identifier: MIT */
/* agents/fixer_types.h - the fixer's options and result (see fixer.h for the run itself).
 * A header of their own so the roles (agent.h) and the loop (fixer.c) share them without
 * including each other. */
#ifndef AP_FIXER_TYPES_H
#define AP_FIXER_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "sandbox/sandbox.h"

/* Progress callback: called at every step with a short line ("planning", "tester: repro fails on
 * pristine as expected"). stage is one of "planning", "building", "testing". */
typedef void (*fixer_progress_fn)(void *ud, const char *stage, const char *line);
/* Cancellation check, polled between steps and, from a helper thread, every 200 ms while a
 * sandbox command runs (a true answer kills the command with its box): it must be cheap and
 * thread-safe. Return true to stop (AP_ECANCELLED). */
typedef bool (*fixer_stop_fn)(void *ud);

typedef struct fixer_opts {
	int version;
	const ap_config *cfg; /* AUTOPATCH_LLM_* and budgets */
	sbx_box *box;	      /* prepared: /tmp/workspace holds the repository */
	const char *issue_title;
	const char *issue_body;
	const char *feedback;	      /* iteration: the reviewer's request, else NULL */
	const char *previous_summary; /* iteration: what the earlier run did, else NULL */
	const char *test_cmd;	      /* the repository's test command (shell string, in the box) */
	const char *setup_cmd;	      /* optional, run once before anything */
	int max_iterations;	      /* Builder/Tester rounds; 0 = default 4 */
	const char *trajectory_path;  /* JSONL file to write (redacted); NULL = none */
	fixer_progress_fn progress;
	fixer_stop_fn should_stop;
	void *ud;
	/* The host's policy over a patch, called by the Tester on the exact diff bytes it fetched
	 * from the workspace, before anything is tested: 0 = test it; AP_EDENIED = refused, with
	 * *why one sentence naming the rule and the path (malloc'd; the Tester frees it), which
	 * becomes the verdict and the Builder's feedback; another negative code ends the run.
	 * NULL: no check (the publisher still checks). */
	int (*patch_check)(void *ud, const char *diff, size_t len, char **why);
	void *patch_check_ud;
} fixer_opts;

#define FIXER_OPTS_VERSION 1
#define FIXER_OPTS_INIT                                                                            \
	{                                                                                          \
		.version = FIXER_OPTS_VERSION                                                      \
	}

typedef struct fixer_result {
	bool proven;	     /* the Tester accepted the patch */
	char *diff;	     /* git diff of the workspace (unified, binary-safe), or NULL */
	char *summary;	     /* what was changed and why (from the plan and the Builder) */
	char *cause;	     /* the Planner's suspected cause */
	char *repro_test;    /* the reproduction test's path and the command that runs it */
	char *evidence;	     /* the Tester's before/after evidence, markdown */
	char *files_changed; /* newline-separated paths */
	char *failure;	     /* why it failed (budget named, last Tester verdict), else NULL */
	char *model;	     /* provider/model used */
	int64_t tokens_in, tokens_out;
	int model_calls;
	int iterations;
} fixer_result;

#define FIXER_RESULT_INIT                                                                          \
	{                                                                                          \
		0                                                                                  \
	}

#endif
