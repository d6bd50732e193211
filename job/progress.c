/* SPDX-License-Identifier: MIT */
/* job/progress.c - markdown for the progress comment, the PR body and the iteration reply
 * (see progress.h). Pure: no I/O, no clock. */
#include "job/progress.h"

#include "agents/cost.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/redact.h"
#include "job/sanitize.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BLOCKED_LINES 20
#define MAX_STEP_LINES	  12
#define MAX_STEP_CHARS	  200
#define MAX_PROSE	  4000
#define MAX_EVIDENCE	  30000
#define MAX_FILES	  100
#define BUILD_CAP	  (PROGRESS_MAX_BODY + 4096)

static const char *const stages[] = {"preparing", "planning", "building", "testing", "publishing"};
static const char *const stage_titles[] = {"Preparing", "Planning", "Building", "Testing",
					   "Publishing"};
#define N_STAGES (sizeof(stages) / sizeof(stages[0]))

/* Text the model can influence, made safe for GitHub: redacted as written and again as a
 * reader sees it (a secret spelled with character references or zero-width characters),
 * neutralised (job/sanitize.h: no reference, mention, link, image or HTML), at most max bytes.
 * *cut says whether it was shortened. NULL on ENOMEM. */
static char *clean(const char *s, size_t max, bool *cut)
{
	char *red, *t, *vis = NULL, *red2 = NULL;
	size_t n, tl;

	*cut = false;
	red = redact_str(s);
	if (!red)
		return NULL;
	n = ap_utf8_cut(red, max);
	*cut = red[n] != '\0';
	red[n] = '\0';
	t = sanitize_str(red);
	free(red);
	if (t)
		vis = sanitize_visible(t, strlen(t));
	if (vis)
		red2 = redact_str(vis);
	if (red2 && strcmp(vis, red2) != 0) {
		free(t);
		t = sanitize_str(red2);
	}
	if (!vis || !red2) {
		free(t);
		t = NULL;
	}
	free(vis);
	free(red2);
	if (!t)
		return NULL;
	tl = strlen(t);
	n = sanitize_cut(t, tl, max);
	if (n < tl) {
		t[n] = '\0';
		*cut = true;
	}
	return t;
}

#define OMITTED "(text omitted: out of memory)"

/* Inline code: one line, no backticks, neutralised, capped. */
static void add_inline(ap_buf *b, const char *s, size_t max)
{
	bool cut;
	char *t = clean(s, max, &cut);

	ap_buf_adds(b, "`");
	for (char *c = t; c && *c; c++) {
		if (*c == '`')
			*c = '\'';
		else if (*c == '\n' || *c == '\t')
			*c = ' ';
	}
	ap_buf_adds(b, t ? t : OMITTED);
	if (cut)
		ap_buf_adds(b, " ...");
	ap_buf_adds(b, "`");
	free(t);
}

/* A fenced code block that the text from start on opened at the beginning of a line and did
 * not close is closed, so what follows (our own sections) is not swallowed by it. Only fences
 * in column 0 count as opened: such a fence cannot be inside a list item or a quote, so the
 * closing line is never a new fence of its own. */
static void close_fence(ap_buf *b, size_t start)
{
	const char *p, *end;
	char fc = 0;
	size_t flen = 0;
	bool line_start = start == 0 || (b->data && b->data[start - 1] == '\n');

	if (!b->data)
		return;
	p = b->data + start;
	end = b->data + b->len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *le = eol ? eol : end;
		const char *q = p;
		size_t run = 0, ind = 0;

		while (q < le && *q == ' ' && ind < 4) {
			q++;
			ind++;
		}
		if (q < le && (*q == '`' || *q == '~'))
			while (q + run < le && q[run] == *q)
				run++;
		if (line_start && run >= 3 && !fc && ind == 0 &&
		    (*q == '~' || !memchr(q + run, '`', (size_t)(le - q - run)))) {
			fc = *q;
			flen = run;
		} else if (line_start && run >= flen && fc && ind < 4 && *q == fc) {
			const char *r = q + run;

			while (r < le && (*r == ' ' || *r == '\t'))
				r++;
			if (r == le)
				fc = 0;
		}
		line_start = true;
		p = eol ? eol + 1 : end;
	}
	if (!fc)
		return;
	ap_buf_adds(b, "\n");
	for (size_t i = 0; i < flen; i++)
		ap_buf_add(b, &fc, 1);
	ap_buf_adds(b, "\n");
}

/* Prose from the model or a test run: kept as markdown, neutralised (it cannot mention anyone,
 * link, reference or close an issue, embed an image, hide text or fake our marker), capped,
 * and any code block it opened is closed. */
static void add_prose(ap_buf *b, const char *s, size_t max)
{
	size_t start = b->len;
	bool cut;
	char *t = clean(s, max, &cut);

	ap_buf_adds(b, t ? t : OMITTED);
	free(t);
	close_fence(b, start);
	if (cut)
		ap_buf_adds(b, "\n\n(truncated)");
}

/* A fenced block whose fence is longer than any backtick run inside the (neutralised) text. */
static void add_fenced(ap_buf *b, const char *s, size_t max)
{
	size_t run = 0, longest = 0, n, fence;
	bool cut;
	char *t = clean(s, max, &cut);
	const char *text = t ? t : OMITTED;

	n = strlen(text);
	for (size_t i = 0; i < n; i++) {
		run = text[i] == '`' ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	fence = longest < 3 ? 3 : longest + 1;
	for (size_t i = 0; i < fence; i++)
		ap_buf_adds(b, "`");
	ap_buf_adds(b, "\n");
	ap_buf_add(b, text, n);
	if (n && text[n - 1] != '\n')
		ap_buf_adds(b, "\n");
	if (cut)
		ap_buf_adds(b, "... (truncated)\n");
	for (size_t i = 0; i < fence; i++)
		ap_buf_adds(b, "`");
	ap_buf_adds(b, "\n");
	free(t);
}

/* A URL GitHub gave us (the PR's html_url): written as is, so it stays a link, when it is one
 * plain http(s) URL; anything else is treated like model text. */
static void add_url(ap_buf *b, const char *url)
{
	bool plain = strncmp(url, "https://", 8) == 0 || strncmp(url, "http://", 7) == 0;

	for (const char *c = url; plain && *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7F ||
		    strchr("<>()[]`\\", *c))
			plain = false;
	if (plain && strlen(url) <= 400)
		ap_buf_adds(b, url);
	else
		add_inline(b, url, 400);
}

static void add_clock(ap_buf *b, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm)) {
		ap_buf_adds(b, "?");
		return;
	}
	ap_buf_addf(b, "%02d:%02d:%02d UTC", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void add_duration(ap_buf *b, int64_t ms)
{
	int64_t s = ms < 0 ? 0 : (ms + 500) / 1000;

	if (s < 60)
		ap_buf_addf(b, "%" PRId64 " s", s);
	else if (s < 3600)
		ap_buf_addf(b, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
	else
		ap_buf_addf(b, "%" PRId64 " h %" PRId64 " min", s / 3600, (s % 3600) / 60);
}

static int stage_index(const char *stage)
{
	if (!stage)
		return -1;
	for (size_t i = 0; i < N_STAGES; i++)
		if (strcmp(stage, stages[i]) == 0)
			return (int)i;
	return -1;
}

static const char *progress_latest_verdict(const progress_event *events, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		const char *m = events[i].message;

		if (m && strncmp(m, "tester:", 7) == 0) {
			m += 7;
			while (*m == ' ')
				m++;
			return m;
		}
	}
	return NULL;
}

/* Redact the finished buffer into *out. */
static int finish(ap_buf *b, char **out)
{
	*out = NULL;
	if (!b->data && ap_buf_adds(b, "") != 0)
		return ap_error_set(AP_ENOMEM, "out of memory");
	*out = redact_str(ap_buf_str(b));
	ap_buf_release(b);
	return *out ? 0 : ap_error_set(AP_ENOMEM, "out of memory rendering markdown");
}

static const char *headline(enum progress_state s, bool iteration, bool harness)
{
	switch (s) {
	case PROGRESS_SUCCEEDED:
		if (harness)
			return iteration ? "pushed an update that changes the test harness to this "
					   "pull request: not proven"
					 : "opened a draft pull request that changes the test "
					   "harness: not proven";
		return iteration ? "pushed a proven update to this pull request"
				 : "opened a pull request with a proven fix";
	case PROGRESS_FAILED:
		return "could not fix this issue";
	case PROGRESS_CANCELLED:
		return "stopped: the job was cancelled";
	default:
		return iteration ? "is working on this feedback" : "is working on this issue";
	}
}

static void render_checklist(ap_buf *b, const progress_view *v)
{
	int64_t start[N_STAGES];
	int last = -1;
	int64_t end_ms = v->n_events ? v->events[v->n_events - 1].time_ms : 0;

	for (size_t i = 0; i < N_STAGES; i++)
		start[i] = -1;
	for (size_t i = 0; i < v->n_events; i++) {
		int k = stage_index(v->events[i].stage);

		if (k >= 0 && start[k] < 0)
			start[k] = v->events[i].time_ms;
		if (k > last)
			last = k;
	}
	for (int i = 0; i < (int)N_STAGES; i++) {
		bool done = i < last || (i == last && v->state == PROGRESS_SUCCEEDED);
		bool current = i == last && !done;
		int64_t until = -1;

		if (start[i] >= 0) {
			for (int j = i + 1; j < (int)N_STAGES && until < 0; j++)
				until = start[j];
			if (until < 0 && v->state != PROGRESS_RUNNING)
				until = end_ms;
			if (until < 0 && v->now_ms > 0)
				until = v->now_ms;
		}
		ap_buf_addf(b, "- [%c] ", done ? 'x' : ' ');
		if (current && v->state == PROGRESS_RUNNING)
			ap_buf_addf(b, "**%s**", stage_titles[i]);
		else if (current)
			ap_buf_addf(b, "~~%s~~", stage_titles[i]);
		else
			ap_buf_adds(b, stage_titles[i]);
		if (start[i] >= 0) {
			ap_buf_adds(b, " · ");
			add_clock(b, start[i]);
			if (until >= 0) {
				ap_buf_adds(b, current && v->state == PROGRESS_RUNNING
						   ? " · running for "
						   : " · ");
				add_duration(b, until - start[i]);
			}
		}
		if (current && v->state == PROGRESS_FAILED)
			ap_buf_adds(b, " · failed here");
		else if (current && v->state == PROGRESS_CANCELLED)
			ap_buf_adds(b, " · cancelled here");
		ap_buf_adds(b, "\n");
	}
}

/* The connections the egress proxy refused (newline-separated), one item each. */
static void add_blocked(ap_buf *b, const char *blocked)
{
	const char *p = blocked, *eol;
	int n = 0;

	ap_buf_adds(b, "**Blocked network connections** (refused by the egress proxy):\n");
	while (*p && n++ < MAX_BLOCKED_LINES) {
		char line[1200];
		size_t len;

		eol = strchr(p, '\n');
		len = eol ? (size_t)(eol - p) : strlen(p);
		/* Only shown, and add_inline() keeps 600 bytes and marks its cut. */
		snprintf(line, sizeof(line), "%.*s", (int)len, p);
		ap_buf_adds(b, "- ");
		add_inline(b, line, 600);
		ap_buf_adds(b, "\n");
		p = eol ? eol + 1 : p + len;
	}
	ap_buf_adds(b, "\n");
}

/* Why a failed or cancelled job stopped, what was tried, where its trajectory is. */
static void add_failure(ap_buf *b, const progress_view *v)
{
	ap_buf_adds(b,
		    v->state == PROGRESS_FAILED ? "**Why it failed:** " : "**Why it stopped:** ");
	{
		/* A first line of prose; what follows (a command's output) fenced. */
		const char *f = v->failure ? v->failure : "no reason was recorded";
		const char *nl = strchr(f, '\n');
		char first_line[2100];

		/* Only shown: add_prose() keeps 2000 bytes and marks its cut. */
		snprintf(first_line, sizeof(first_line), "%.*s",
			 (int)(nl ? (size_t)(nl - f) : strlen(f)), f);
		add_prose(b, first_line, 2000);
		ap_buf_adds(b, "\n\n");
		if (nl && nl[1]) {
			add_fenced(b, nl + 1, 3000);
			ap_buf_adds(b, "\n");
		}
	}
	if (v->tried) {
		ap_buf_adds(b, "**What was tried:** ");
		add_prose(b, v->tried, 2000);
		ap_buf_adds(b, "\n\n");
	}
	if (v->state == PROGRESS_CANCELLED)
		ap_buf_adds(b, "No pull request was opened.\n\n");
	if (v->trajectory) {
		ap_buf_adds(b, "**Trajectory** (for the operator, on the autopatch server): ");
		add_inline(b, v->trajectory, 400);
		ap_buf_adds(b, "\n\n");
	}
}

/* The last MAX_STEP_LINES events, folded in a details block. */
static void add_steps(ap_buf *b, const progress_view *v)
{
	size_t first = v->n_events > MAX_STEP_LINES ? v->n_events - MAX_STEP_LINES : 0;

	if (!v->n_events)
		return;
	ap_buf_adds(b, "<details><summary>Steps</summary>\n\n");
	if (first)
		ap_buf_addf(b, "- (%zu earlier steps)\n", first);
	for (size_t i = first; i < v->n_events; i++) {
		const progress_event *e = &v->events[i];

		ap_buf_adds(b, "- ");
		add_clock(b, e->time_ms);
		if (e->stage)
			ap_buf_addf(b, " **%s**", e->stage);
		if (e->message && *e->message) {
			ap_buf_adds(b, " ");
			add_inline(b, e->message, MAX_STEP_CHARS);
		}
		ap_buf_adds(b, "\n");
	}
	ap_buf_adds(b, "\n</details>\n");
}

int progress_render_comment(const progress_view *v, char **out)
{
	ap_buf b = AP_BUF_INIT(BUILD_CAP);
	const char *verdict = progress_latest_verdict(v->events, v->n_events);

	ap_buf_adds(&b, PROGRESS_MARKER "\n");
	ap_buf_addf(&b, "**autopatch** %s (job %" PRId64 ")\n\n",
		    headline(v->state, v->iteration, v->harness), v->job_id);
	render_checklist(&b, v);
	ap_buf_adds(&b, "\n");
	if (v->test_note) {
		ap_buf_adds(&b, "**Test command:** ");
		add_prose(&b, v->test_note, 600);
		ap_buf_adds(&b, "\n\n");
	}
	if (v->environment) {
		ap_buf_adds(&b, "**Environment:** ");
		add_prose(&b, v->environment, 800);
		ap_buf_adds(&b, "\n\n");
	}
	if (v->blocked)
		add_blocked(&b, v->blocked);
	if (verdict) {
		ap_buf_adds(&b, "**Latest Tester verdict:** ");
		add_inline(&b, verdict, 300);
		ap_buf_adds(&b, "\n\n");
	}
	if (v->state == PROGRESS_FAILED || v->state == PROGRESS_CANCELLED)
		add_failure(&b, v);
	if (v->pr_url && !v->iteration) {
		ap_buf_adds(&b, "**Pull request:** ");
		add_url(&b, v->pr_url);
		ap_buf_adds(&b, "\n\n");
	}
	add_steps(&b, v);
	return finish(&b, out);
}

static void add_section(ap_buf *b, const char *title, const char *text, size_t max)
{
	if (!text || !*text)
		return;
	ap_buf_addf(b, "### %s\n\n", title);
	add_prose(b, text, max);
	ap_buf_adds(b, "\n\n");
}

static void add_files(ap_buf *b, const char *files)
{
	const char *p = files, *eol;
	int count = 0;

	if (!files || !*files)
		return;
	ap_buf_adds(b, "### Files changed\n\n");
	while (p && *p) {
		char line[1024];
		size_t n;

		eol = strchr(p, '\n');
		n = eol ? (size_t)(eol - p) : strlen(p);
		if (n && count < MAX_FILES) {
			if (n >= sizeof(line))
				n = sizeof(line) - 1;
			memcpy(line, p, n);
			line[n] = '\0';
			ap_buf_adds(b, "- ");
			add_inline(b, line, sizeof(line));
			ap_buf_adds(b, "\n");
		}
		if (n)
			count++;
		p = eol ? eol + 1 : NULL;
	}
	if (count > MAX_FILES)
		ap_buf_addf(b, "- ... and %d more\n", count - MAX_FILES);
	ap_buf_adds(b, "\n");
}

static void add_model_line(ap_buf *b, const pr_body_input *in)
{
	ap_buf_adds(b, "<sub>autopatch");
	if (in->job_id)
		ap_buf_addf(b, " job %" PRId64, in->job_id);
	if (in->model) {
		ap_buf_adds(b, " · model ");
		add_inline(b, in->model, 120);
	}
	ap_buf_addf(b, " · tokens: %" PRId64 " in, %" PRId64 " out", in->tokens_in, in->tokens_out);
	if (in->model_calls)
		ap_buf_addf(b, " · %d model calls", in->model_calls);
	if (in->priced) {
		char usd[32];

		ap_buf_addf(b, " · cost: %s", cost_format_usd(in->cost_micro, usd, sizeof(usd)));
		if (in->estimated_calls)
			ap_buf_addf(b,
				    " (%d call%s without reported usage counted at the most "
				    "they could have used)",
				    in->estimated_calls, in->estimated_calls == 1 ? "" : "s");
	}
	if (in->iterations)
		ap_buf_addf(b, " · %d Builder/Tester round%s", in->iterations,
			    in->iterations == 1 ? "" : "s");
	ap_buf_adds(b, "</sub>\n");
}

int progress_render_pr_body(const pr_body_input *in, char **out)
{
	ap_buf b = AP_BUF_INIT(BUILD_CAP);

	if (in->harness_changed)
		ap_buf_adds(&b,
			    "> [!CAUTION]\n> **Not proven: this change touches the test harness.** "
			    "It changes how the repository's tests are collected, configured, "
			    "started or reported, so the tests that checked it are not the ones "
			    "the repository had. The repository lets such changes open a draft "
			    "(`allow_harness_changes: true` in .github/autopatch.yml); read the "
			    "harness files below first and run the tests yourself.\n\n"
			    "This draft pull request was written by autopatch. In a network-less "
			    "sandbox, under the changed harness, the reproduction test failed "
			    "before the change and passed after it.\n\n");
	else if (in->weak_evidence)
		ap_buf_adds(&b,
			    "> [!WARNING]\n> **Weak evidence.** The repository's test suite "
			    "gives no per-test results and already fails without this change, "
			    "so autopatch could not check that no test breaks. The repository "
			    "accepts this (`allow_weak_evidence: true` in "
			    ".github/autopatch.yml); review the change and run the tests "
			    "yourself.\n\n"
			    "This draft pull request was written by autopatch. The reproduction "
			    "test failed before the fix and passes after it, in a network-less "
			    "sandbox.\n\n");
	else
		ap_buf_adds(&b,
			    "This draft pull request was written by autopatch. The reproduction "
			    "test failed before the fix and passes after it, and the "
			    "repository's tests show no new failures, in a network-less "
			    "sandbox.\n\n");
	/* Our closing line, before any text the model influenced, so nothing it wrote (an
	 * unclosed code block, say) can turn it into code. */
	ap_buf_addf(&b, "Fixes #%" PRId64 "\n\n", in->issue);
	add_section(&b, "Summary", in->summary, MAX_PROSE);
	add_section(&b, "Suspected cause", in->cause, MAX_PROSE);
	if (in->repro_test && *in->repro_test) {
		ap_buf_adds(&b, "### Reproduction test\n\n");
		add_fenced(&b, in->repro_test, 2000);
		ap_buf_adds(&b, "\n");
	}
	if (in->harness_changed && in->harness_list && *in->harness_list) {
		ap_buf_adds(&b, "### Test harness files changed\n\n");
		add_prose(&b, in->harness_list, MAX_PROSE);
		ap_buf_adds(&b, "\n\n");
	}
	add_section(&b, "Evidence (before / after)", in->evidence, MAX_EVIDENCE);
	if (in->file_kinds && *in->file_kinds) {
		ap_buf_adds(&b, "### What each file is\n\n");
		add_prose(&b, in->file_kinds, MAX_PROSE);
		ap_buf_adds(&b, "\n\n");
	}
	add_files(&b, in->files_changed);
	if (in->test_note) {
		ap_buf_adds(&b, "Test command: ");
		add_prose(&b, in->test_note, 600);
		ap_buf_adds(&b, "\n\n");
	}
	if (in->environment) {
		ap_buf_adds(&b, "Environment: ");
		add_prose(&b, in->environment, 800);
		ap_buf_adds(&b, "\n\n");
	}
	add_model_line(&b, in);
	return finish(&b, out);
}

int progress_render_pr_title(int64_t issue, const char *issue_title, bool harness, char **out)
{
	ap_buf b = AP_BUF_INIT(512);
	const char *t = issue_title ? issue_title : "";
	size_t n = ap_utf8_cut(t, 200);

	if (harness)
		ap_buf_addf(&b, "Not proven, changes the test harness (#%" PRId64 "): ", issue);
	else
		ap_buf_addf(&b, "Fix #%" PRId64 ": ", issue);
	for (size_t i = 0; i < n; i++) {
		char c = t[i];

		if ((unsigned char)c < 0x20)
			c = ' ';
		ap_buf_add(&b, &c, 1);
	}
	if (n < strlen(t))
		ap_buf_adds(&b, "...");
	return finish(&b, out);
}

int progress_render_reply(const pr_body_input *in, int ok, const char *commit_sha,
			  const char *failure, char **out)
{
	ap_buf b = AP_BUF_INIT(BUILD_CAP);

	ap_buf_addf(&b, REPLY_MARKER " (job %" PRId64 ") -->\n", in->job_id);
	if (ok) {
		ap_buf_adds(&b, "**autopatch** pushed a new commit");
		if (commit_sha) {
			ap_buf_adds(&b, " ");
			add_inline(&b, commit_sha, 40);
		}
		ap_buf_adds(&b, " for your feedback. The proof gate passed again.\n\n");
		add_section(&b, "What changed", in->summary, MAX_PROSE);
		add_section(&b, "Evidence (before / after)", in->evidence, MAX_EVIDENCE);
		add_files(&b, in->files_changed);
	} else {
		ap_buf_adds(&b,
			    "**autopatch** could not act on this feedback; nothing was pushed.\n\n"
			    "**Why:** ");
		add_prose(&b, failure ? failure : "no reason was recorded", 2000);
		ap_buf_adds(&b, "\n\n");
	}
	add_model_line(&b, in);
	return finish(&b, out);
}
