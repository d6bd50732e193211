/* SPDX-License-Identifier: MIT */
/* agents/tester.c - the deterministic Tester (see tester.h). */
#include "agents/tester.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKSPACE	    "/tmp/workspace"
#define PRISTINE	    "/tmp/pristine"
#define SUITE_TIMEOUT_S	    900
#define REPRO_TIMEOUT_S	    300
#define FEEDBACK_OUTPUT_CAP 6000
#define DIFF_CAP	    (1u << 20)

struct tester {
	sbx_box *box;
	const char *test_cmd;
	char *suite_cmd;
	traj *traj;
	int64_t max_diff_lines;
	const volatile sig_atomic_t *cancel;
	int (*patch_check)(void *ud, const char *diff, size_t len, char **why);
	void *patch_check_ud;
	bool have_baseline;
	int baseline_exit;
	test_outcomes baseline;
};

/* git in the box ignores the system and global config; the workspace's own .git/config is the
 * model's to write, so every option that changes what `git diff` prints is given on the
 * command line: no external diff driver or textconv, no colour, fixed a/ and b/ prefixes,
 * unquoted non-ASCII names, submodules shown. The host never relies on any of this: it parses
 * and checks the bytes itself (the patch_check hook, github/patch.h). */
#define GIT_ENV "export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null && "
#define GIT	"git -c safe.directory='*' -c core.quotePath=false"

/* Stage everything except interpreter caches, then print the diff (or the names). */
static const char SCRIPT_DIFF[] =
    "cd \"$1\" && " GIT_ENV GIT " add -A -- . ':(exclude,glob)**/__pycache__/**' "
    "':(exclude,glob)**/*.pyc' ':(exclude,glob)**/.pytest_cache/**' && " GIT
    " diff --cached --no-ext-diff --no-textconv --no-color --no-relative --src-prefix=a/ "
    "--dst-prefix=b/ --submodule=short --ignore-submodules=none $2";

/* $1 test path: a fresh pristine copy plus only the reproduction test. The repository's .git
 * is left out: it can be large, /tmp is a size-capped tmpfs, and no test needs it. */
static const char SCRIPT_PRISTINE[] =
    "rm -rf " PRISTINE " && mkdir -p " PRISTINE " && "
    "tar -C /repo --exclude=./.git -cf - . | tar -C " PRISTINE " -xf - && "
    "if [ -n \"$1\" ]; then mkdir -p -- \"$(dirname -- \"" PRISTINE "/$1\")\" && "
    "cp -- \"" WORKSPACE "/$1\" \"" PRISTINE "/$1\"; fi";

/* Before a suite run: remember the untracked files and mark the time, so the run's JUnit
 * reports can be found and the files it created removed again. */
static const char SCRIPT_SUITE_BEFORE[] =
    "cd \"$1\" && " GIT_ENV "{ " GIT " ls-files -o > /tmp/.ap-untracked 2>/dev/null || "
    ": > /tmp/.ap-untracked; } && touch /tmp/.ap-suite-mark";

/* JUnit XML reports the run wrote (conventional names), each preceded by a marker line. */
static const char SCRIPT_JUNIT[] =
    "cd \"$1\" && find . -path ./.git -prune -o -type f -name '*.xml' -newer /tmp/.ap-suite-mark "
    "-print | head -n 50 | while IFS= read -r f; do case \"$f\" in *TEST-*|*junit*|*JUnit*|"
    "*test-results*|*test_results*|*report*) echo \"<!-- autopatch: $f -->\"; cat -- \"$f\";; "
    "esac; done";

/* After a suite run in the workspace: remove the untracked files it created (reports,
 * caches), so the Tester leaves the workspace - and the diff - as it found them. */
static const char SCRIPT_SUITE_AFTER[] =
    "cd \"$1\" && " GIT_ENV GIT " ls-files -o > /tmp/.ap-untracked-after && "
    "grep -vxFf /tmp/.ap-untracked /tmp/.ap-untracked-after | while IFS= read -r f; do "
    "rm -f -- \"$f\"; done; true";

/* ---- pytest -rA parsing ---------------------------------------------------------------- */

void test_outcomes_release(test_outcomes *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->n; i++)
		free(o->names[i]);
	free(o->names);
	free(o->status);
	memset(o, 0, sizeof(*o));
}

static int outcomes_add(test_outcomes *o, const char *name, size_t len, char st)
{
	char **nn = realloc(o->names, (o->n + 1) * sizeof(*nn));
	if (!nn)
		return AP_ENOMEM;
	o->names = nn;
	char *ns = realloc(o->status, o->n + 1);
	if (!ns)
		return AP_ENOMEM;
	o->status = ns;
	if (!(o->names[o->n] = strndup(name, len)))
		return AP_ENOMEM;
	o->status[o->n] = st;
	o->n++;
	return 0;
}

int tester_parse_pytest(const char *out, test_outcomes *o)
{
	static const struct {
		const char *prefix;
		char st;
	} kinds[] = {{"PASSED ", 'P'}, {"FAILED ", 'F'}, {"ERROR ", 'E'}};
	memset(o, 0, sizeof(*o));
	for (const char *line = out; line && *line;) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		for (size_t k = 0; k < 3; k++) {
			size_t pl = strlen(kinds[k].prefix);
			if (len > pl && strncmp(line, kinds[k].prefix, pl) == 0) {
				const char *name = line + pl;
				size_t nl = len - pl;
				/* "FAILED a::b - message": the name ends at " - ". */
				for (size_t i = 0; i + 2 < nl; i++)
					if (name[i] == ' ' && name[i + 1] == '-' &&
					    name[i + 2] == ' ') {
						nl = i;
						break;
					}
				while (nl && (name[nl - 1] == '\r' || name[nl - 1] == ' '))
					nl--;
				/* Only node ids ("file::test"), not free text. */
				if (nl && memchr(name, ':', nl) && !memchr(name, ' ', nl) &&
				    outcomes_add(o, name, nl, kinds[k].st) != 0) {
					test_outcomes_release(o);
					return AP_ENOMEM;
				}
			}
		}
		line = eol ? eol + 1 : NULL;
	}
	return 0;
}

static char status_of(const test_outcomes *o, const char *name)
{
	char st = 0;
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->names[i], name) == 0)
			st = st == 'P' || st == 0 ? o->status[i] : st; /* any failure wins */
	return st;
}

char *tester_regressions(const test_outcomes *before, const test_outcomes *after)
{
	ap_buf b = AP_BUF_INIT(64u << 10);
	for (size_t i = 0; i < before->n; i++) {
		if (before->status[i] != 'P' || status_of(before, before->names[i]) != 'P')
			continue;
		char st = status_of(after, before->names[i]);
		if (st == 'P')
			continue;
		ap_buf_addf(&b, "%s (%s)\n", before->names[i],
			    st == 0	? "missing after the patch"
			    : st == 'E' ? "error"
					: "failed");
	}
	if (b.len == 0) {
		ap_buf_release(&b);
		return NULL;
	}
	return ap_buf_take(&b);
}

/* The value of attribute name in the tag text [tag, end), malloc'd, or NULL. */
static char *xml_attr(const char *tag, const char *end, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = tag; p && p + nl + 2 < end; p++) {
		if ((p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n') && strncmp(p, name, nl) == 0 &&
		    p[nl] == '=' && (p[nl + 1] == '"' || p[nl + 1] == '\'')) {
			const char *v = p + nl + 2;
			const char *q = memchr(v, p[nl + 1], (size_t)(end - v));
			return q ? strndup(v, (size_t)(q - v)) : NULL;
		}
	}
	return NULL;
}

int tester_parse_junit(const char *xml, test_outcomes *o)
{
	memset(o, 0, sizeof(*o));
	for (const char *p = xml; (p = strstr(p, "<testcase")) != NULL;) {
		const char *gt = strchr(p, '>');
		if (!gt)
			break;
		if (p[9] != ' ' && p[9] != '\t' && p[9] != '\n' && p[9] != '>' && p[9] != '/') {
			p += 9;
			continue;
		}
		bool self_closed = gt > p && gt[-1] == '/';
		const char *body_end = gt;
		if (!self_closed) {
			const char *close = strstr(gt, "</testcase>");
			body_end = close ? close : gt + strlen(gt);
		}
		char st = 'P';
		if (!self_closed) {
			size_t bl = (size_t)(body_end - gt);
			char *body = strndup(gt, bl);
			if (!body)
				goto nomem;
			if (strstr(body, "<failure"))
				st = 'F';
			else if (strstr(body, "<error"))
				st = 'E';
			else if (strstr(body, "<skipped"))
				st = 'S';
			free(body);
		}
		char *cls = xml_attr(p + 1, gt, "classname");
		char *name = xml_attr(p + 1, gt, "name");
		if (name && st != 'S') {
			char *full =
			    tools_asprintf("%s%s%s", cls ? cls : "", cls ? "::" : "", name);
			int rc = full ? outcomes_add(o, full, strlen(full), st) : AP_ENOMEM;
			free(full);
			if (rc) {
				free(cls);
				free(name);
				goto nomem;
			}
		}
		free(cls);
		free(name);
		p = self_closed ? gt + 1 : body_end;
	}
	return 0;
nomem:
	test_outcomes_release(o);
	return AP_ENOMEM;
}

char *tester_suite_cmd(const char *test_cmd)
{
	if (strstr(test_cmd, "pytest") && !strstr(test_cmd, "-rA"))
		return tools_asprintf("%s -rA", test_cmd);
	return strdup(test_cmd);
}

static void count_outcomes(const test_outcomes *o, int *pass, int *fail)
{
	*pass = *fail = 0;
	for (size_t i = 0; i < o->n; i++)
		(o->status[i] == 'P' ? (*pass)++ : (*fail)++);
}

/* ---- running things in the box --------------------------------------------------------- */

static int run(tester *t, const char *workdir, const char *const *argv, int timeout_s,
	       sbx_result *r)
{
	sbx_cmd cmd = SBX_CMD_INIT;
	cmd.argv = argv;
	cmd.workdir = workdir;
	cmd.timeout_s = timeout_s;
	cmd.output_cap = DIFF_CAP;
	cmd.cancel = t->cancel;
	return sbx_exec(t->box, &cmd, r);
}

/* A shell command string (the repository's or the Builder's test command). */
static int run_cmd(tester *t, const char *workdir, const char *shell_cmd, int timeout_s,
		   sbx_result *r)
{
	const char *argv[] = {"env", "PYTHONDONTWRITEBYTECODE=1", "sh", "-c", shell_cmd, NULL};
	int rc = run(t, workdir, argv, timeout_s, r);
	if (!rc && t->traj)
		tools_traj_command(t->traj, "tester_run", shell_cmd, workdir, r);
	return rc;
}

static char *combined_output(const sbx_result *r, size_t cap)
{
	ap_buf b = AP_BUF_INIT(4u << 20);
	ap_buf_add(&b, r->out ? r->out : "", r->out_len);
	if (r->err_len) {
		ap_buf_adds(&b, "\n--- stderr ---\n");
		ap_buf_add(&b, r->err, r->err_len);
	}
	char *s = tools_head_tail(ap_buf_str(&b), b.len, cap);
	ap_buf_release(&b);
	char *clean = s ? redact_str(s) : NULL;
	free(s);
	return clean;
}

/* Last n lines of the output, for the evidence. */
static char *tail_lines(const sbx_result *r, int n)
{
	const char *s = r->out ? r->out : "";
	size_t len = r->out_len;
	while (len && s[len - 1] == '\n')
		len--;
	size_t start = len;
	int lines = 0;
	while (start > 0 && lines < n) {
		start--;
		if (s[start] == '\n')
			lines++;
	}
	if (s[start] == '\n')
		start++;
	char *t = tools_head_tail(s + start, len - start, 2000);
	char *clean = t ? redact_str(t) : NULL;
	free(t);
	return clean;
}

static int reject(tester_verdict *v, const char *reason, const char *cmd, const char *dir,
		  const sbx_result *r)
{
	char *out = r ? combined_output(r, FEEDBACK_OUTPUT_CAP) : NULL;
	v->proven = false;
	v->reason = strdup(reason);
	if (r)
		v->feedback =
		    tools_asprintf("Tester: REJECTED - %s\n\ncommand: %s\ndirectory: %s\nexit "
				   "status: %d%s\n--- output (head and tail) ---\n%s",
				   reason, cmd, dir, r->exit_code,
				   r->timed_out ? " (timed out)" : "", out ? out : "");
	else
		v->feedback = tools_asprintf("Tester: REJECTED - %s", reason);
	free(out);
	return v->reason && v->feedback ? 0 : AP_ENOMEM;
}

static const char *basename_of(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Run the repository's suite in dir and parse per-test outcomes: pytest -rA lines, else the
 * JUnit XML reports the run wrote, else none (compare by exit status). */
static int run_suite(tester *t, const char *dir, sbx_result *r, test_outcomes *o)
{
	const char *before[] = {"sh", "-c", SCRIPT_SUITE_BEFORE, "sh", dir, NULL};
	const char *junit[] = {"sh", "-c", SCRIPT_JUNIT, "sh", dir, NULL};
	const char *after[] = {"sh", "-c", SCRIPT_SUITE_AFTER, "sh", dir, NULL};
	sbx_result x = SBX_RESULT_INIT;
	int rc;
	memset(o, 0, sizeof(*o));
	if ((rc = run(t, dir, before, 60, &x)))
		goto out;
	sbx_result_release(&x);
	if ((rc = run_cmd(t, dir, t->suite_cmd, SUITE_TIMEOUT_S, r)))
		goto out;
	/* One source per tester, so both sides name tests alike: pytest's -rA lines when the
	 * command is pytest with -rA, else JUnit reports. */
	if (strstr(t->suite_cmd, "pytest") && strstr(t->suite_cmd, "-rA")) {
		if ((rc = tester_parse_pytest(r->out ? r->out : "", o)))
			goto out;
	} else {
		if ((rc = run(t, dir, junit, 60, &x)))
			goto out;
		if (x.exit_code == 0 && x.out_len && !x.truncated &&
		    (rc = tester_parse_junit(x.out, o)))
			goto out;
		sbx_result_release(&x);
	}
	if (t->traj && o->n) {
		cJSON *e = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(e, "tests");
		cJSON_AddStringToObject(e, "dir", dir);
		for (size_t i = 0; list && i < o->n; i++) {
			cJSON *one = cJSON_CreateObject();
			cJSON_AddStringToObject(one, "name", o->names[i]);
			cJSON_AddStringToObject(one, "status",
						o->status[i] == 'P'   ? "passed"
						: o->status[i] == 'F' ? "failed"
								      : "error");
			cJSON_AddItemToArray(list, one);
		}
		traj_event(t->traj, "tester_tests", e);
	}
	if (strcmp(dir, WORKSPACE) == 0)
		rc = run(t, dir, after, 60, &x);
out:
	sbx_result_release(&x);
	return rc;
}

static int baseline(tester *t)
{
	const char *argv[] = {"sh", "-c", SCRIPT_PRISTINE, "sh", "", NULL};
	sbx_result r = SBX_RESULT_INIT;
	int rc = run(t, "/tmp", argv, 300, &r);
	if (rc)
		goto out;
	if (r.exit_code != 0) {
		rc = ap_error_set(AP_EIO, "cannot copy /repo to " PRISTINE ": %.300s",
				  r.err ? r.err : "");
		goto out;
	}
	sbx_result_release(&r);
	if ((rc = run_suite(t, PRISTINE, &r, &t->baseline)))
		goto out;
	t->baseline_exit = r.exit_code;
	t->have_baseline = true;
out:
	sbx_result_release(&r);
	return rc;
}

static int fetch_diff(tester *t, tester_verdict *v, bool *too_big)
{
	const char *argv[] = {"sh", "-c", SCRIPT_DIFF, "sh", WORKSPACE, "--binary", NULL};
	sbx_result r = SBX_RESULT_INIT;
	int rc = run(t, WORKSPACE, argv, 120, &r);
	if (rc)
		goto out;
	if (r.exit_code != 0) {
		rc = ap_error_set(AP_EIO, "git diff failed in the workspace: %.300s",
				  r.err ? r.err : "");
		goto out;
	}
	*too_big = r.truncated;
	v->diff = strdup(r.out ? r.out : "");
	sbx_result_release(&r);
	argv[5] = "--name-only";
	if ((rc = run(t, WORKSPACE, argv, 120, &r)))
		goto out;
	v->files_changed = strdup(r.out ? r.out : "");
	if (!v->diff || !v->files_changed)
		rc = AP_ENOMEM;
out:
	sbx_result_release(&r);
	return rc;
}

int64_t tester_diff_changed_lines(const char *diff)
{
	int64_t n = 0;
	bool in_hunk = false;
	for (const char *l = diff; l && *l;) {
		const char *e = strchr(l, '\n');
		if (strncmp(l, "diff --git ", 11) == 0)
			in_hunk = false;
		else if (strncmp(l, "@@", 2) == 0)
			in_hunk = true;
		else if (in_hunk && (*l == '+' || *l == '-'))
			n++;
		l = e ? e + 1 : NULL;
	}
	return n;
}

void tester_set_max_diff_lines(tester *t, int64_t max)
{
	t->max_diff_lines = max;
}

void tester_set_cancel(tester *t, const volatile sig_atomic_t *cancel)
{
	t->cancel = cancel;
}

void tester_set_patch_check(tester *t,
			    int (*fn)(void *ud, const char *diff, size_t len, char **why), void *ud)
{
	t->patch_check = fn;
	t->patch_check_ud = ud;
}

/* The host's policy over the exact bytes about to be tested: 0 when it passes (or there is
 * none), 0 with a rejection in v when it refuses, < 0 when it failed. */
static int policy_check(tester *t, tester_verdict *v)
{
	char *why = NULL;
	int rc;

	if (!t->patch_check)
		return 0;
	rc = t->patch_check(t->patch_check_ud, v->diff, strlen(v->diff), &why);
	if (rc == AP_EDENIED) {
		v->proven = false;
		v->reason = why ? why : strdup("the host's patch policy refused the diff");
		why = NULL;
		v->feedback = tools_asprintf(
		    "Tester: REJECTED - %s\n\nThe host checks the diff of /tmp/workspace itself "
		    "and will not test, apply or publish a patch that breaks a rule. Undo that "
		    "change in the workspace (restore or delete the file) and call finish again.",
		    v->reason ? v->reason : "");
		rc = v->reason && v->feedback ? 0 : AP_ENOMEM;
	}
	free(why);
	return rc;
}

/* True when files (newline-separated) holds something besides path. */
static bool changes_besides(const char *files, const char *path)
{
	for (const char *l = files; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		if (n && !(n == strlen(path) && strncmp(l, path, n) == 0))
			return true;
		l = e ? e + 1 : l + n;
	}
	return false;
}

static bool has_line(const char *files, const char *path)
{
	size_t pl = strlen(path);
	for (const char *l = files; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		if (n == pl && strncmp(l, path, n) == 0)
			return true;
		l = e ? e + 1 : l + n;
	}
	return false;
}

/* Strip "./" prefixes so the test path compares with git's names. */
static const char *norm_path(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p;
}

int tester_check(tester *t, const tool_finish *fin, tester_verdict *v)
{
	sbx_result r = SBX_RESULT_INIT;
	test_outcomes after = {0};
	char *regress = NULL, *pristine_tail = NULL;
	const char *test_path = norm_path(fin->test_path);
	bool too_big = false;
	int rc = 0;
	memset(v, 0, sizeof(*v));

	if (!strstr(fin->test_command, basename_of(test_path))) {
		rc = reject(v,
			    "test_command must run the reproduction test: it does not name the "
			    "file given as test_path",
			    fin->test_command, WORKSPACE, NULL);
		goto out;
	}
	if ((rc = fetch_diff(t, v, &too_big)))
		goto out;
	if (too_big) {
		rc = reject(v, "the diff is larger than 1 MiB: keep the change small", "git diff",
			    WORKSPACE, NULL);
		goto out;
	}
	if (!*v->diff) {
		rc = reject(v, "the workspace has no changes", "git diff", WORKSPACE, NULL);
		goto out;
	}
	if ((rc = policy_check(t, v)) || v->reason)
		goto out;
	int64_t changed = tester_diff_changed_lines(v->diff);
	if (t->max_diff_lines > 0 && changed > t->max_diff_lines) {
		char *why = tools_asprintf(
		    "the diff adds or removes %lld lines (limit %lld): make the "
		    "smallest change that fixes the issue and remove unrelated "
		    "files and edits (changed files:\n%s)",
		    (long long)changed, (long long)t->max_diff_lines, v->files_changed);
		rc = why ? reject(v, why, "git diff", WORKSPACE, NULL) : AP_ENOMEM;
		free(why);
		goto out;
	}
	if (!has_line(v->files_changed, test_path)) {
		rc = reject(v,
			    "the reproduction test is not a new or changed file in the workspace "
			    "(test_path must name the test you wrote)",
			    "git diff --name-only", WORKSPACE, NULL);
		goto out;
	}
	if (!changes_besides(v->files_changed, test_path)) {
		rc = reject(v, "only the reproduction test changed: the fix itself is missing",
			    "git diff --name-only", WORKSPACE, NULL);
		goto out;
	}
	if (!t->have_baseline && (rc = baseline(t)))
		goto out;

	/* 1. The reproduction test must fail on the pristine code. */
	{
		const char *argv[] = {"sh", "-c", SCRIPT_PRISTINE, "sh", test_path, NULL};
		if ((rc = run(t, "/tmp", argv, 300, &r)))
			goto out;
		if (r.exit_code != 0) {
			rc = ap_error_set(AP_EIO, "cannot prepare " PRISTINE ": %.300s",
					  r.err ? r.err : "");
			goto out;
		}
		sbx_result_release(&r);
	}
	if ((rc = run_cmd(t, PRISTINE, fin->test_command, REPRO_TIMEOUT_S, &r)))
		goto out;
	if (r.exit_code == 0) {
		rc = reject(v,
			    "the reproduction test PASSED on the pristine code: it does not "
			    "reproduce the bug. It must fail before the fix and pass after it",
			    fin->test_command, PRISTINE, &r);
		goto out;
	}
	int pristine_exit = r.exit_code;
	pristine_tail = tail_lines(&r, 12);
	sbx_result_release(&r);

	/* 2. ... and pass on the patched workspace. */
	if ((rc = run_cmd(t, WORKSPACE, fin->test_command, REPRO_TIMEOUT_S, &r)))
		goto out;
	if (r.exit_code != 0) {
		rc = reject(v,
			    "the reproduction test FAILS on the patched code: the fix does not "
			    "work yet",
			    fin->test_command, WORKSPACE, &r);
		goto out;
	}
	sbx_result_release(&r);

	/* 3. No test that passed on pristine may fail on patched. */
	if ((rc = run_suite(t, WORKSPACE, &r, &after)))
		goto out;
	int bp, bf, ap_, af;
	count_outcomes(&t->baseline, &bp, &bf);
	count_outcomes(&after, &ap_, &af);
	if (t->baseline.n > 0) {
		regress = tester_regressions(&t->baseline, &after);
		if (regress) {
			char *why = tools_asprintf("the patch breaks tests that passed before:\n%s",
						   regress);
			rc = why ? reject(v, why, t->suite_cmd, WORKSPACE, &r) : AP_ENOMEM;
			free(why);
			goto out;
		}
	} else if (t->baseline_exit == 0 && r.exit_code != 0) {
		rc = reject(v,
			    "the test suite passed on the pristine code and fails on the patched "
			    "code",
			    t->suite_cmd, WORKSPACE, &r);
		goto out;
	}

	v->proven = true;
	v->reason = strdup("proven");
	if (t->baseline.n > 0)
		v->evidence = tools_asprintf(
		    "**Reproduction test** `%s`, run with `%s`\n"
		    "- pristine code: **fails** (exit %d), as it must:\n```\n%s\n```\n"
		    "- patched code: **passes** (exit 0)\n\n"
		    "**Test suite** `%s`\n"
		    "- pristine: %d passed, %d failed (exit %d)\n"
		    "- patched: %d passed, %d failed (exit %d)\n"
		    "- no test that passed before fails after the patch\n",
		    test_path, fin->test_command, pristine_exit, pristine_tail ? pristine_tail : "",
		    t->suite_cmd, bp, bf, t->baseline_exit, ap_, af, r.exit_code);
	else
		v->evidence = tools_asprintf(
		    "**Reproduction test** `%s`, run with `%s`\n"
		    "- pristine code: **fails** (exit %d), as it must:\n```\n%s\n```\n"
		    "- patched code: **passes** (exit 0)\n\n"
		    "**Test suite** `%s` (compared by exit status)\n"
		    "- pristine: exit %d\n- patched: exit %d\n",
		    test_path, fin->test_command, pristine_exit, pristine_tail ? pristine_tail : "",
		    t->suite_cmd, t->baseline_exit, r.exit_code);
	if (!v->reason || !v->evidence)
		rc = AP_ENOMEM;
out:
	if (t->traj && v->reason) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "proven", v->proven);
		cJSON_AddStringToObject(o, "reason", v->reason);
		if (v->files_changed)
			cJSON_AddStringToObject(o, "files_changed", v->files_changed);
		traj_event(t->traj, "verdict", o);
	}
	free(regress);
	free(pristine_tail);
	test_outcomes_release(&after);
	sbx_result_release(&r);
	return rc;
}

void tester_verdict_release(tester_verdict *v)
{
	if (!v)
		return;
	free(v->reason);
	free(v->feedback);
	free(v->evidence);
	free(v->diff);
	free(v->files_changed);
	memset(v, 0, sizeof(*v));
}

int tester_new(tester **out, sbx_box *box, const char *test_cmd, traj *tr)
{
	tester *t = calloc(1, sizeof(*t));
	if (!t)
		return AP_ENOMEM;
	t->box = box;
	t->test_cmd = test_cmd;
	t->traj = tr;
	t->max_diff_lines = 500;
	t->suite_cmd = tester_suite_cmd(test_cmd);
	if (!t->suite_cmd) {
		free(t);
		return AP_ENOMEM;
	}
	*out = t;
	return 0;
}

void tester_free(tester *t)
{
	if (!t)
		return;
	free(t->suite_cmd);
	test_outcomes_release(&t->baseline);
	free(t);
}
