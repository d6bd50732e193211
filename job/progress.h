/* SPDX-License-Identifier: MIT */
/* job/progress.h - what users read: the issue's progress comment, the PR body and the reply
 * on a PR after an iteration, rendered as markdown.
 *
 * Pure functions of their inputs (no I/O, no clock), so the comment is a view of the job's event
 * rows and can be re-rendered identically after a restart. Every result is already redacted and
 * capped below GitHub's 65536-character body limit. Every text that came from the model, a test
 * run or the repository (summary, cause, evidence, failure, events, file names, the test note)
 * is neutralised by job/sanitize.h — it cannot close or link an issue, mention anyone, embed an
 * image or link elsewhere, or fake a marker — and redacted both as written and as a reader sees
 * it. Only text autopatch writes itself (the "Fixes #N" line, the PR link) is left live.
 */
#ifndef AP_PROGRESS_H
#define AP_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROGRESS_MAX_BODY 60000

/* One job_events row. stage is "preparing", "planning", "building", "testing" or "publishing"
 * for a stage transition, NULL for a detail event of the current stage. A message starting
 * with "tester:" is a Tester verdict. */
typedef struct progress_event {
	int64_t time_ms; /* Unix time in milliseconds */
	const char *stage;
	const char *message; /* may be NULL */
} progress_event;

enum progress_state { PROGRESS_RUNNING, PROGRESS_SUCCEEDED, PROGRESS_FAILED, PROGRESS_CANCELLED };

/* Everything the comment shows. Strings are borrowed; NULL means "not known (yet)". */
typedef struct progress_view {
	int version;
	int64_t job_id;
	enum progress_state state;
	const progress_event *events;
	size_t n_events;
	const char *test_note;	 /* which test command and why ("detected `make test`: ...") */
	const char *pr_url;	 /* the PR, once it exists */
	const char *failure;	 /* why it failed or was cancelled */
	const char *tried;	 /* what was tried (iterations, last verdict, budgets) */
	const char *trajectory;	 /* where the operator finds the trajectory (host path) */
	int64_t now_ms;		 /* for the running stage's elapsed time; 0: omit it */
	bool iteration;		 /* the job changes an existing PR after review feedback */
	const char *environment; /* image and setup ("sandbox image ...; setup ran (12 s)") */
	const char *blocked;	 /* connections the egress proxy refused, one per line */
	bool harness;		 /* the published patch changes the test harness: not proven */
} progress_view;

#define PROGRESS_VIEW_VERSION 1
#define PROGRESS_VIEW_INIT                                                                         \
	{                                                                                          \
		.version = PROGRESS_VIEW_VERSION                                                   \
	}

/* The marker that starts every progress comment (a hidden HTML comment). A re-run that lost
 * the comment id can find its own comment by it. */
#define PROGRESS_MARKER "<!-- autopatch:progress -->"

/* Render the progress comment. *out is malloc'd (caller frees). 0 or AP_ENOMEM. */
int progress_render_comment(const progress_view *v, char **out);

/* What the draft PR says. Strings are borrowed; NULL parts are left out. */
typedef struct pr_body_input {
	int version;
	int64_t issue;
	int64_t job_id;
	const char *summary;
	const char *cause;
	const char *repro_test;
	const char *evidence;	   /* markdown from the Tester */
	const char *files_changed; /* newline-separated paths */
	const char *test_note;
	const char *model;
	int64_t tokens_in, tokens_out;
	int model_calls;
	int iterations;
	bool priced;	      /* cost_micro is known (AUTOPATCH_PRICES has the model) */
	int64_t cost_micro;   /* micro-dollars */
	int estimated_calls;  /* calls the provider reported no usage for (charged at most) */
	bool weak_evidence;   /* proven on exit status only (allow_weak_evidence): the body warns */
	bool harness_changed; /* the patch changes the test harness (allow_harness_changes):
			       * the body says NOT proven first, and why */
	const char *harness_list; /* markdown: the harness files and why */
	const char *file_kinds;	  /* markdown: every changed file and what it is */
	const char *environment;  /* the sandbox image, its toolchain versions and the setup */
} pr_body_input;

#define PR_BODY_INPUT_VERSION 1
#define PR_BODY_INPUT_INIT                                                                         \
	{                                                                                          \
		.version = PR_BODY_INPUT_VERSION                                                   \
	}

/* Render the PR body. With weak_evidence it starts with a warning that the suite could not
 * rule out regressions. Its only closing reference is the "Fixes #N" line after the first
 * paragraph, ahead of every text the model influenced (all of which is neutralised, see
 * job/sanitize.h). *out is malloc'd. 0 or AP_ENOMEM. */
int progress_render_pr_body(const pr_body_input *in, char **out);

/* The PR title: "Fix #N: <issue title>" (with harness: "Not proven, changes the test harness
 * (#N): <issue title>") with the title's control characters removed and its length capped.
 * *out is malloc'd. */
int progress_render_pr_title(int64_t issue, const char *issue_title, bool harness, char **out);

/* The start of the reply's first line: REPLY_MARKER " (job N) -->". A retry that cannot tell
 * whether its reply was posted (GitHub answered 5xx) finds it by this line. */
#define REPLY_MARKER "<!-- autopatch:reply"

/* The reply posted on the PR after an iteration: what changed (commit, summary, evidence) or
 * why nothing was pushed. ok selects which. It starts with the reply marker line naming
 * in->job_id. *out is malloc'd. */
int progress_render_reply(const pr_body_input *in, int ok, const char *commit_sha,
			  const char *failure, char **out);

#endif
