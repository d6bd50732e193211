/* SPDX-License-Identifier: MIT */
/* agents/ci_workflow.h - the test command a repository's GitHub Actions workflow runs.
 *
 * Nearly every repository has a workflow (.github/workflows/NAME.yml) that says exactly how its
 * tests run. The test-command detector (agents/testcmd.h) asks this module for the command of
 * one workflow file's test job, so the sandbox runs the suite as the repository's CI does.
 *
 * The text is untrusted: it is parsed with libyaml's document loader (aliases are shared
 * nodes, never expanded), only a bounded number of jobs, steps and lines is looked at, and
 * the command is built from `run:` steps only, never from an action (`uses:`).
 *
 * How the job and steps are chosen:
 *   - jobs in file order, those whose id or name mentions test first; a job that calls a
 *     reusable workflow, or runs only on Windows or macOS, is passed over;
 *   - in a job, each `run:` step's lines are sorted: install lines (pip install, npm ci,
 *     apt-get, ...) and lint lines (ruff, eslint, cargo clippy, go vet, `make lint`, ...) are
 *     dropped, test lines (a runner, or a test-like argument: `go test`, `make check`, `npm run
 *     test:unit`) make the step a test step, other lines (configure, build) are kept. A step
 *     whose name says install, setup, lint, upload, docs, ... is dropped unless it has a test
 *     line; one whose name says test is a test step. Steps with an `if:` on the matrix, the
 *     runner or the event, and steps with a shell other than bash or sh, are dropped;
 *   - the command is the kept lines of the job's steps up to its last test step, joined with
 *     " && "; a step's `working-directory:` (or `defaults.run.working-directory`) becomes a
 *     `cd`, in a subshell when more steps follow;
 *   - `${{ matrix.KEY }}` takes KEY's first value (the answer says so); `${{ env.KEY }}` takes
 *     the step's, job's or workflow's env value; `${{ github.workspace }}` is the checkout
 *     ("."). Any other expression (secrets, inputs, step outputs, functions), a value with
 *     characters outside [A-Za-z0-9._+,:=@/-], a shell construct spread over lines (if, for,
 *     a heredoc) or a command longer than CI_WORKFLOW_MAX_CMD refuses the job.
 */
#ifndef AP_CI_WORKFLOW_H
#define AP_CI_WORKFLOW_H

#include <stddef.h>

#define CI_WORKFLOW_MAX_CMD   1000 /* bytes of the command built */
#define CI_WORKFLOW_MAX_JOBS  64   /* jobs looked at in one file */
#define CI_WORKFLOW_MAX_STEPS 100  /* steps looked at in one job */
#define CI_WORKFLOW_MAX_LINES 200  /* lines of one step's `run:` */

/* What was chosen: all malloc'd, owned by the caller (ci_workflow_pick_clear()). */
typedef struct {
	char *cmd;   /* the shell command, run from the repository root */
	char *job;   /* the job's id (printable ASCII, capped) */
	char *steps; /* the steps taken, by name or first line: "Build", "Run tests" */
	char *note;  /* NULL, or what was substituted: "matrix.python = 3.9 (first of 3)" */
} ci_workflow_pick;

/* Choose the test command of the workflow text[0..len). 0 with *out filled; AP_ENOTFOUND
 * with a short message (no job runs tests, or why the test job was refused: "job test step
 * \"Run\": ${{ secrets.X }} cannot be run outside CI") when there is none; AP_EINVAL when
 * the text is not YAML or not a workflow (the message names the line); AP_ENOMEM. On failure
 * *out is all NULL. */
int ci_workflow_test_command(ci_workflow_pick *out, const char *text, size_t len);

/* Free what *p holds and set it all NULL; NULL is accepted. */
void ci_workflow_pick_clear(ci_workflow_pick *p);

#endif
