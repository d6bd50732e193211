/* SPDX-License-Identifier: MIT */
/* tests/agents/test_progress.c - the progress comment, PR body, title and iteration reply. */
#include "common/err.h"
#include "common/redact.h"
#include "job/progress.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#define T0 1764469865000LL /* 2025-11-30 02:31:05 UTC */

static const progress_event running_events[] = {
    {T0, "preparing", "checking out main"},
    {T0 + 4000, "planning", NULL},
    {T0 + 16000, "building", "writing tests/test_div.py"},
    {T0 + 20000, NULL, "tester: repro fails on pristine as expected"},
    {T0 + 25000, NULL, "tester: repro still fails after the patch"},
};

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_running_checklist(void **state)
{
	progress_view v = PROGRESS_VIEW_INIT;
	char *md;

	(void)state;
	v.job_id = 7;
	v.events = running_events;
	v.n_events = 5;
	v.test_note = "detected `python3 -m pytest -q`: pytest files";
	v.now_ms = T0 + 46000;
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_true(strncmp(md, PROGRESS_MARKER, strlen(PROGRESS_MARKER)) == 0);
	assert_non_null(strstr(md, "is working on this issue (job 7)"));
	assert_non_null(strstr(md, "- [x] Preparing · 02:31:05 UTC · 4 s\n"));
	assert_non_null(strstr(md, "- [x] Planning · 02:31:09 UTC · 12 s\n"));
	assert_non_null(strstr(md, "- [ ] **Building** · 02:31:21 UTC · running for 30 s\n"));
	assert_non_null(strstr(md, "- [ ] Testing\n"));
	assert_non_null(strstr(md, "- [ ] Publishing\n"));
	/* The latest verdict, not the first. */
	assert_non_null(
	    strstr(md, "**Latest Tester verdict:** `repro still fails after the patch`"));
	assert_non_null(strstr(md, "python3 -m pytest -q"));
	assert_null(strstr(md, "Pull request"));
	free(md);
}

static void test_succeeded_has_pr_link(void **state)
{
	progress_event ev[] = {
	    {T0, "preparing", NULL},
	    {T0 + 1000, "planning", NULL},
	    {T0 + 2000, "building", NULL},
	    {T0 + 3000, "testing", NULL},
	    {T0 + 4000, NULL, "tester: proven"},
	    {T0 + 5000, "publishing", NULL},
	    {T0 + 7000, NULL, "pull request opened"},
	};
	progress_view v = PROGRESS_VIEW_INIT;
	char *md;
	const char *pr;

	(void)state;
	v.job_id = 8;
	v.state = PROGRESS_SUCCEEDED;
	v.events = ev;
	v.n_events = 7;
	v.pr_url = "http://127.0.0.1:9/o/r/pull/3";
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_int_equal(count(md, "- [x] "), 5);
	assert_non_null(strstr(md, "- [x] Publishing · 02:31:10 UTC · 2 s\n"));
	pr = strstr(md, "**Pull request:** http://127.0.0.1:9/o/r/pull/3");
	assert_non_null(pr);
	/* The PR link comes after the checklist and the verdict. */
	assert_true(pr > strstr(md, "Latest Tester verdict"));
	free(md);

	v.iteration = true;
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_non_null(strstr(md, "pushed a proven update to this pull request"));
	assert_null(strstr(md, "opened a pull request"));
	free(md);
}

static void test_failed_says_why_what_where(void **state)
{
	progress_view v = PROGRESS_VIEW_INIT;
	char *md;

	(void)state;
	v.job_id = 9;
	v.state = PROGRESS_FAILED;
	v.events = running_events;
	v.n_events = 5;
	v.failure = "budget of 4 Builder/Tester rounds used up";
	v.tried = "4 rounds; last patch changed calc/ops.py";
	v.trajectory = "/var/lib/autopatch/trajectories/job-9.jsonl";
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_non_null(strstr(md, "could not fix this issue"));
	assert_non_null(strstr(md, "~~Building~~ · 02:31:21 UTC · 9 s · failed here"));
	assert_non_null(strstr(md, "**Why it failed:** budget of 4 Builder/Tester rounds used up"));
	assert_non_null(strstr(md, "**What was tried:** 4 rounds"));
	assert_non_null(strstr(md, "`/var/lib/autopatch/trajectories/job-9.jsonl`"));
	assert_null(strstr(md, "Pull request"));
	free(md);
}

static void test_cancelled_says_so(void **state)
{
	progress_view v = PROGRESS_VIEW_INIT;
	char *md;

	(void)state;
	v.job_id = 10;
	v.state = PROGRESS_CANCELLED;
	v.events = running_events;
	v.n_events = 3;
	v.failure = "the `autopatch` label was removed";
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_non_null(strstr(md, "cancelled"));
	assert_non_null(strstr(md, "label was removed"));
	assert_non_null(strstr(md, "No pull request was opened."));
	assert_non_null(strstr(md, "cancelled here"));
	free(md);
}

static void test_hostile_text_is_neutralised_and_redacted(void **state)
{
	progress_event ev[] = {
	    {T0, "building", "ran `rm` @octocat <!-- autopatch:progress --> closes #1"},
	    {T0 + 1, NULL, "tester: token canary-model-key-42 leaked"},
	};
	progress_view v = PROGRESS_VIEW_INIT;
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *md;

	(void)state;
	assert_int_equal(redact_add_secret("canary-model-key-42"), 0);
	v.events = ev;
	v.n_events = 2;
	v.state = PROGRESS_FAILED;
	v.failure = "model said canary-model-key-42 and pinged @octocat, fixes #12";
	assert_int_equal(progress_render_comment(&v, &md), 0);
	assert_null(strstr(md, "canary-model-key-42"));
	assert_null(strstr(md, "@octocat"));
	assert_null(strstr(md, "fixes #12"));
	assert_int_equal(count(md, PROGRESS_MARKER), 1); /* the model cannot fake the marker */
	free(md);

	in.issue = 5;
	in.summary = "Summary with canary-model-key-42 and @octocat; closes #1";
	in.evidence = "before: FAIL\nafter: PASS";
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_null(strstr(md, "canary-model-key-42"));
	assert_null(strstr(md, "@octocat"));
	assert_null(strstr(md, "closes #1"));
	assert_int_equal(count(md, "Fixes #"), 1);
	free(md);
	redact__clear();
}

static void test_pr_body_sections(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *md;

	(void)state;
	in.issue = 1;
	in.job_id = 4;
	in.summary = "divide() now raises ZeroDivisionError";
	in.cause = "divide() returned 0 when b == 0";
	in.repro_test = "tests/test_repro.py::test_divide_by_zero\n```nested fence```";
	in.evidence = "| | before | after |\n|--|--|--|\n| repro | FAIL | PASS |";
	in.files_changed = "calc/ops.py\ntests/test_repro.py\n";
	in.model = "openai/gpt-test";
	in.tokens_in = 1234;
	in.tokens_out = 56;
	in.model_calls = 6;
	in.iterations = 1;
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_non_null(strstr(md, "### Summary\n\ndivide() now raises ZeroDivisionError"));
	assert_non_null(strstr(md, "### Suspected cause\n\ndivide() returned 0"));
	/* The fence is longer than the backtick run inside the test text. */
	assert_non_null(strstr(md, "### Reproduction test\n\n````\ntests/test_repro.py"));
	assert_non_null(strstr(md, "| repro | FAIL | PASS |"));
	assert_non_null(
	    strstr(md, "### Files changed\n\n- `calc/ops.py`\n- `tests/test_repro.py`\n"));
	assert_non_null(strstr(md, "Fixes #1\n"));
	assert_non_null(strstr(md, "`openai/gpt-test`"));
	assert_non_null(strstr(md, "tokens: 1234 in, 56 out"));
	assert_null(strstr(md, "cost:")); /* no price: no cost, never "$0.00" */
	assert_null(strstr(md, "Environment:"));
	assert_true(strlen(md) < PROGRESS_MAX_BODY);
	free(md);
	/* the sandbox image and the toolchain versions it was proven with */
	in.environment = "sandbox image autopatch-sandbox:go (flavour go: go.mod in the checkout); "
			 "toolchain go 1.24.4, gcc 14.2.0 (Debian trixie)";
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_non_null(strstr(md, "Environment: sandbox image autopatch-sandbox:go (flavour go: "
				   "go.mod in the checkout); toolchain go 1.24.4, gcc 14.2.0 "
				   "(Debian trixie)\n"));
	free(md);
	in.environment = NULL;
	/* with a price, the footer shows the cost, and says when usage was counted at most */
	in.priced = true;
	in.cost_micro = 12345;
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_non_null(strstr(md, " · 6 model calls · cost: $0.012345 · 1 Builder"));
	free(md);
	in.estimated_calls = 2;
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_non_null(strstr(md, "cost: $0.012345 (2 calls without reported usage counted at "
				   "the most they could have used)"));
	free(md);
}

static void test_pr_body_is_capped(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *big = malloc(200000), *md;

	(void)state;
	memset(big, 'x', 199999);
	big[199999] = '\0';
	in.issue = 2;
	in.summary = big;
	in.cause = big;
	in.evidence = big;
	in.repro_test = big;
	assert_int_equal(progress_render_pr_body(&in, &md), 0);
	assert_true(strlen(md) < PROGRESS_MAX_BODY);
	assert_non_null(strstr(md, "Fixes #2"));
	free(md);
	free(big);
}

/* allow_harness_changes: the PR and the comment say "not proven" first, name the harness files
 * and never say "proven" on its own; every file says what it is. */
static void test_harness_change_is_never_called_proven(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	progress_view v = PROGRESS_VIEW_INIT;
	char *s, *first;

	(void)state;
	in.issue = 7;
	in.harness_changed = true;
	in.harness_list = "- `conftest.py`: a pytest conftest.py (rule `pytest-conftest`)\n";
	in.file_kinds =
	    "- `calc.py`: code\n- `conftest.py`: harness\n- `tests/test_x.py`: new test\n";
	in.evidence = "repro before: failed; after: passed";
	assert_int_equal(progress_render_pr_body(&in, &s), 0);
	first = strndup(s, 120); /* the caution block leads */
	assert_non_null(strstr(first, "Not proven"));
	free(first);
	assert_non_null(strstr(s, "### Test harness files changed"));
	assert_non_null(strstr(s, "rule `pytest-conftest`"));
	assert_non_null(strstr(s, "### What each file is"));
	assert_non_null(strstr(s, "`tests/test_x.py`: new test"));
	/* "proven" appears only as "Not proven" */
	for (const char *p = s; (p = strcasestr(p, "proven")); p++)
		assert_true(p - s >= 4 && strncasecmp(p - 4, "not ", 4) == 0);
	free(s);

	v.job_id = 3;
	v.state = PROGRESS_SUCCEEDED;
	v.pr_url = "https://example.test/pr/8";
	v.harness = true;
	assert_int_equal(progress_render_comment(&v, &s), 0);
	assert_non_null(strstr(s, "changes the test harness: not proven"));
	assert_null(strstr(s, "proven fix"));
	free(s);
	v.harness = false;
	assert_int_equal(progress_render_comment(&v, &s), 0);
	assert_non_null(strstr(s, "opened a pull request with a proven fix"));
	free(s);
}

static void test_title_and_reply(void **state)
{
	pr_body_input in = PR_BODY_INPUT_INIT;
	char *s;

	(void)state;
	assert_int_equal(progress_render_pr_title(12, "divide by zero\nreturns 0", false, &s), 0);
	assert_string_equal(s, "Fix #12: divide by zero returns 0");
	free(s);
	assert_int_equal(progress_render_pr_title(12, "divide by zero", true, &s), 0);
	assert_string_equal(s, "Not proven, changes the test harness (#12): divide by zero");
	free(s);

	in.summary = "raise ValueError instead";
	assert_int_equal(progress_render_reply(&in, 1, "abc123", NULL, &s), 0);
	assert_non_null(strstr(s, "pushed a new commit `abc123`"));
	assert_non_null(strstr(s, "raise ValueError instead"));
	free(s);
	assert_int_equal(progress_render_reply(&in, 0, NULL, "the proof gate failed", &s), 0);
	assert_non_null(strstr(s, "nothing was pushed"));
	assert_non_null(strstr(s, "the proof gate failed"));
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_running_checklist),
	    cmocka_unit_test(test_succeeded_has_pr_link),
	    cmocka_unit_test(test_failed_says_why_what_where),
	    cmocka_unit_test(test_cancelled_says_so),
	    cmocka_unit_test(test_hostile_text_is_neutralised_and_redacted),
	    cmocka_unit_test(test_pr_body_sections),
	    cmocka_unit_test(test_pr_body_is_capped),
	    cmocka_unit_test(test_title_and_reply),
	    cmocka_unit_test(test_harness_change_is_never_called_proven),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
