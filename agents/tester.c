/* SPDX-License-Identifier: MIT */
/* agents/tester.c - the deterministic Tester (see tester.h): trees, runs, their structured
 * results, the verdict and its evidence. */
#include "agents/tester.h"

#include "agents/javadeps.h"
#include "agents/run_output.h"
#include "agents/shims.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/redact.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define WORKSPACE	    "/tmp/workspace"
#define TREES		    "/tmp/trees"
#define PRISTINE	    TREES "/pristine"
#define PATCHED		    TREES "/patched"
#define REPORTS		    "/tmp/ap-reports" /* outside every tree; /tmp is noexec, fine */
#define FEEDBACK_OUTPUT_CAP 6000
#define SHOW_CAP	    (64u << 10) /* output kept for showing, per stream */
#define DIFF_CAP	    (1u << 20)
#define OUT_SECTION_CAP	    (16u << 20) /* stdout read back (go -json / cargo report on it) */
#define ERR_SECTION_CAP	    (2u << 20)
#define COLLECT_CAP	    (REPORT_READ_CAP + (4u << 20))
#define MAX_NAMED	    30 /* tests named in one verdict */

/* ---- scripts (fixed text; every variable part is a positional parameter) ---------------- */

/* $1 nonce: stage everything except interpreter caches and the tool caches a run writes at the
 * top of HOME, which is the workspace (Go's ~/.cache/go-build and ~/.config/go/telemetry,
 * Maven's ~/.m2, Gradle's ~/.gradle, ~/.npm: unstaged again, as a pathspec would fail on
 * them when they are ignored), then print two sections (see
 * report_sections): the changed names and the binary diff. No external diff or textconv, no
 * colour, fixed prefixes, raw UTF-8 names, no user or system git config: the bytes are what
 * gets applied and published. */
#define GIT_DIFF                                                                                   \
	"git -c safe.directory='*' -c core.quotePath=false diff --cached --no-ext-diff "           \
	"--no-textconv --no-color --no-relative --src-prefix=a/ --dst-prefix=b/ "                  \
	"--submodule=short --ignore-submodules=none "
static const char SCRIPT_DIFF[] =
    "cd " WORKSPACE " && export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null && "
    "git -c safe.directory='*' add -A -- . ':(exclude,glob)**/__pycache__/**' "
    "':(exclude,glob)**/*.pyc' ':(exclude,glob)**/.pytest_cache/**' && "
    "git -c safe.directory='*' reset -q -- .cache .m2 .gradle .npm .config/go && "
    "printf '\\n@@ap:%s:-1:names\\n' \"$1\" && " GIT_DIFF "--name-only && "
    "printf '\\n@@ap:%s:-1:diff\\n' \"$1\" && " GIT_DIFF "--binary";

/* $1 side dir, $2 "apply" or "": a fresh copy of /repo without .git in $1/repo, with its own
 * home and tmp; with apply, the diff on stdin applied by git without any git config. Prints
 * the box's OOM-kill count. Exit 70: copy failed, 71: the diff does not apply. */
static const char SCRIPT_TREE[] =
    "rm -rf \"$1\" && mkdir -p \"$1/repo\" \"$1/home\" \"$1/tmp\" || exit 70; "
    "find /repo -mindepth 1 -maxdepth 1 ! -name .git -exec cp -R "
    "--preserve=mode,timestamps,links --no-dereference -t \"$1/repo\" -- {} + || exit 70; "
    "if [ \"$2\" = apply ]; then cd \"$1/repo\" && env GIT_CONFIG_NOSYSTEM=1 "
    "GIT_CONFIG_GLOBAL=/dev/null GIT_CEILING_DIRECTORIES=" TREES " HOME=\"$1/home\" "
    "git apply --whitespace=nowarn - >&2 || exit 71; fi; "
    "sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events "
    "/sys/fs/cgroup/memory/memory.oom_control 2>/dev/null | head -n 1";

/* HOME of the commands in a tree is $1/home: made empty with the tree, outside it, so nothing
 * the patch adds to the tree (a `.local/` user site, a usercustomize.py, a `.pth`) is a
 * startup file of the run. The setup phase ran with the workspace as HOME, so what it put at
 * the top of HOME (a user site, ~/.cargo, ~/.m2, ~/go) is among the setup products that
 * setup_cmd (ENV_PREPARE_TREE_CMD) copies into the tree from the host's snapshot: HOME gets a
 * link to each such top-level product of the keep list, and nothing else. */
#define LINK_HOME_PRODUCTS                                                                         \
	"[ -s " SBX_SETUP_KEEP_LIST " ] && sed 's|/.*||' " SBX_SETUP_KEEP_LIST                     \
	" | sort -u | while IFS= read -r n; do "                                                   \
	"case $n in .*|go) [ -e \"$1/repo/$n\" ] && ln -sfn \"$1/repo/$n\" \"$1/home/$n\";; "      \
	"esac; "                                                                                   \
	"done; :"

/* $1 side dir, $2 setup command: run it in the tree with the run's home and tmp, then give
 * HOME its links to the setup products. */
static const char SCRIPT_SETUP[] = "cd \"$1/repo\" && env HOME=\"$1/home\" TMPDIR=\"$1/tmp\" "
				   "sh -c \"$2\" < /dev/null && " LINK_HOME_PRODUCTS;

/* $1 side dir, $2 report dir, $3 command, $4 the shim script, $5 the unittest runner, $6 the
 * tox starter. The report dir is made fresh, outside the tree; stdout and stderr go to files
 * there. The host's runner shims (agents/shims.h) are written afresh to SHIMS_DIR, read-only,
 * and put first on PATH with AP_REPORT_DIR, so a runner anywhere inside the command writes its
 * per-test results there and runs its whole suite; pytest writes JUnit XML to it whatever
 * the repository's addopts say (colour off, no cache). The environment is the fresh box's
 * (the image's and the host's settings; nothing of the Builder's) plus the run's own: HOME
 * and TMPDIR of the run, no PYTHONSTARTUP, and no Python user site unless the setup products
 * put one in HOME. Exit 125 before the command started; .started marks that it did. */
static const char SCRIPT_RUN[] =
    "{ [ ! -e " SHIMS_DIR " ] || chmod -R u+w " SHIMS_DIR "; } && rm -rf \"$2\" " SHIMS_DIR
    " && mkdir -p \"$2\" " SHIMS_DIR " && cd \"$1/repo\" || exit 125; "
    "printf '%s' \"$4\" > " SHIMS_DIR "/ap-shim && printf '%s' \"$5\" > " SHIMS_DIR
    "/ap_unittest.py && printf '%s' \"$6\" > " SHIMS_DIR "/ap_tox.py && chmod 0555 " SHIMS_DIR
    "/ap-shim && chmod 0444 " SHIMS_DIR "/ap_unittest.py " SHIMS_DIR
    "/ap_tox.py && for n in " SHIMS_NAMES "; do ln -s ap-shim " SHIMS_DIR
    "/$n || exit 125; done && chmod 0555 " SHIMS_DIR " || exit 125; "
    ": > \"$2/.started\" || exit 125; "
    "[ -e \"$1/home/.local\" ] || export PYTHONNOUSERSITE=1; "
    "exec env -u PYTHONSTARTUP HOME=\"$1/home\" TMPDIR=\"$1/tmp\" "
    "PATH=\"" SHIMS_DIR ":$PATH\" AP_REPORT_DIR=\"$2\" "
    "PYTEST_ADDOPTS=\"--junitxml=$2/pytest.xml -p no:cacheprovider --color=no\" "
    "sh -c \"$3\" > \"$2/out\" 2> \"$2/err\" < /dev/null";

static const char SCRIPT_COLLECT[] =
    "N=\"$3\"; sec() { s=$(wc -c < \"$3\" 2>/dev/null) || s=-1; "
    "printf '\\n@@ap:%s:%s:%s\\n' \"$N\" \"$s\" \"$1\"; head -c \"$2\" -- \"$3\" 2>/dev/null; }; "
    "if [ ! -e \"$1/.started\" ]; then printf '\\n@@ap:%s:0:nostart\\n' \"$N\"; exit 0; fi; "
    "sec out \"$4\" \"$1/out\"; sec err \"$5\" \"$1/err\"; "
    "for f in \"$1\"/*; do case ${f##*/} in out|err) continue;; esac; if [ -L \"$f\" ]; then "
    "printf '\\n@@ap:%s:0:link:%s\\n' \"$N\" "
    "\"${f##*/}\"; elif [ -f \"$f\" ]; then sec \"report:${f##*/}\" \"$6\" \"$f\"; fi; done; "
    "if cd \"$2\" 2>/dev/null; then printf '\\n@@ap:%s:-1:tree\\n' \"$N\"; "
    "find . -type f -name '*.xml' -newer \"$1/.started\" \\( -path '*TEST-*' -o "
    "-path '*junit*' -o -path '*JUnit*' -o -path '*test-results*' -o -path '*test_results*' "
    "-o -path '*surefire-reports*' -o -path '*report*' \\) -exec cat -- {} + 2>/dev/null | "
    "head -c \"$6\"; fi; "
    "o=$(sed -n 's/^oom_kill //p' /sys/fs/cgroup/memory.events "
    "/sys/fs/cgroup/memory/memory.oom_control 2>/dev/null | head -n 1); "
    "printf '\\n@@ap:%s:%s:oom\\n' \"$N\" \"${o:--1}\"";

/* ---- state --------------------------------------------------------------------------------- */

/* One run of tests, read back and classified. */
struct run_out {
	const char *side; /* "pristine" or "patched" */
	char *cmd;	  /* as run (instrumented) */
	int exit_code;
	bool timed_out, oom;
	int deadline_s;
	const char *deadline_key; /* "repro_timeout", "suite_timeout" */
	enum report_runner runner;
	bool have_report;
	const char *source;  /* where the per-test results came from (static text) */
	const char *stopped; /* the runner stopped at a first failure (static text), or NULL */
	report rep;	     /* finished */
	enum report_class cls;
	char *problem; /* the results could not be read (then nothing is decided from them) */
	char *out;     /* stdout, head and tail, for showing */
	char *err;     /* stderr, likewise */
	int64_t millis;
	int64_t started, ended; /* ms since the trajectory began: box asked for, results read */
};

struct tester {
	sbx_box *box; /* the Builder's: only the diff is read from it */
	tester_box_fn make_box;
	void *make_box_ud;
	const char *test_cmd;
	const char *setup_cmd;
	traj *traj;
	int64_t max_diff_lines;
	const volatile sig_atomic_t *cancel;
	int setup_s, repro_s, suite_s;
	bool allow_weak, hang_issue;
	tester_patch_check_fn patch_check;
	void *patch_check_ud;
	tester_files_fn files_check;
	void *files_check_ud;
	bool allow_harness;
	bool side_by_side; /* a round's repro and suite lanes run at once (tester_set_side_by_side)
			    */
	bool have_baseline;
	char *env_failure;
	char *baseline_summary;
	struct run_out base; /* the suite on pristine */
	char *repro_key;     /* command + the test's diff section of the cached pristine run */
	tester_baseline_get_fn baseline_get; /* the host's kept pristine results (or NULL) */
	tester_baseline_put_fn baseline_put;
	void *baseline_ud;
	bool baseline_reused; /* t->base came from baseline_get, not from a run */
	char *baseline_miss;  /* why the kept results were not used (NULL: reused, or none asked) */
	struct run_out prepro;
};

/* ---- lanes: where the runs happen ---------------------------------------------------------- */

#define LANE_EVENTS 12 /* a lane's runs write at most 4 events each (tree, setup, run, tests) */

/* A trajectory event a lane keeps until lane_flush(). */
struct lane_event {
	cJSON *obj;	   /* a "tester_run" event */
	const char *dir;   /* with rep: the "tester_tests" line of rep follows it */
	const report *rep; /* borrowed: its run_out outlives the flush */
};

/* Runs one after the other, each in a fresh box of its own. A round has two lanes (the repro:
 * pristine, then patched; the suite on patched) that run side by side in threads of their own
 * (run_lanes). Everything a run changes is its lane's (the box, that box's OOM count, the
 * events) or the run_out it was given; the tester is only read, except t->prepro and
 * t->repro_key, which only the repro lane touches. */
struct lane {
	tester *t;
	int id;				     /* 1 repro, 2 suite; 0 the baseline */
	sbx_box *box;			     /* the box of the run under way, else NULL */
	long long oom_seen;		     /* that box's OOM-kill count after the last command;
					      * -1 unknown */
	int64_t run_started;		     /* when the run under way asked for its box */
	const volatile sig_atomic_t *cancel; /* every command's cancel hook (sbx_cmd.cancel) */
	volatile sig_atomic_t stop;	     /* side by side: its work is no longer needed (the
					      * user cancelled, or the other lane decided) */
	bool defer;			     /* events wait in ev[] for lane_flush() */
	struct lane_event ev[LANE_EVENTS];
	int nev;
};

static void lane_init(struct lane *l, tester *t, int id, bool side_by_side)
{
	memset(l, 0, sizeof(*l));
	l->t = t;
	l->id = id;
	l->oom_seen = -1;
	l->defer = side_by_side;
	/* Side by side, the lane's own flag: run_lanes() sets it on the user's cancel too. */
	l->cancel = side_by_side ? &l->stop : t->cancel;
}

/* A "tester_run" event (and the per-test line of rep), now or, side by side, at the flush. */
static void lane_emit(struct lane *l, cJSON *obj, const char *dir, const report *rep)
{
	if (!l->defer || l->nev >= LANE_EVENTS) {
		traj_event(l->t->traj, "tester_run", obj);
		if (rep && rep->n) /* one test a line of its own: a million tests is no tree */
			report_traj_tests(l->t->traj, dir, rep);
		return;
	}
	l->ev[l->nev++] = (struct lane_event){obj, dir, rep};
}

/* Write the kept events in the order they were made (write false: drop them). */
static void lane_flush(struct lane *l, bool write)
{
	for (int i = 0; i < l->nev; i++) {
		struct lane_event *e = &l->ev[i];

		if (!write) {
			cJSON_Delete(e->obj);
			continue;
		}
		traj_event(l->t->traj, "tester_run", e->obj);
		if (e->rep && e->rep->n)
			report_traj_tests(l->t->traj, e->dir, e->rep);
	}
	l->nev = 0;
}

static void run_out_release(struct run_out *ro)
{
	free(ro->cmd);
	report_release(&ro->rep);
	free(ro->problem);
	free(ro->out);
	free(ro->err);
	memset(ro, 0, sizeof(*ro));
}

/* ---- small helpers ------------------------------------------------------------------------ */

/* Run argv in the lane's box of the run under way; fetch_diff alone reads the Builder's. */
static int exec_argv(struct lane *l, const char *workdir, const char *const *argv, int timeout_s,
		     const char *in, size_t in_len, size_t cap, sbx_result *r)
{
	sbx_cmd cmd = SBX_CMD_INIT;

	cmd.argv = argv;
	cmd.workdir = workdir;
	cmd.timeout_s = timeout_s;
	cmd.output_cap = cap;
	cmd.cancel = l->cancel;
	cmd.stdin_data = in;
	cmd.stdin_len = in_len;
	if (!l->box)
		return ap_error_set(AP_EINVAL, "the Tester ran a command outside a run's box");
	return sbx_exec(l->box, &cmd, r);
}

static const char *basename_of(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* Strip "./" prefixes so the test path compares with git's names. */
static const char *norm_path(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p;
}

/* The first n lines of s (at most max bytes), malloc'd; "" for NULL. */
static char *first_lines(const char *s, int n, size_t max)
{
	const char *p = s ? s : "";
	size_t len = 0;

	while (p[len] && n > 0 && len < max) {
		if (p[len] == '\n')
			n--;
		if (n > 0)
			len++;
	}
	while (len && (p[len - 1] == '\n' || p[len - 1] == '\r'))
		len--;
	return strndup(p, len);
}

/* A fenced block around untrusted text: the fence is longer than any backtick run in it, and
 * an empty text says so instead of leaving an empty block. */
static void add_fenced(ap_buf *b, const char *text)
{
	size_t run = 0, longest = 0;
	const char *s = text && *text ? text : "(the command printed nothing)";

	for (const char *p = s; *p; p++) {
		run = *p == '`' ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	size_t n = longest >= 3 ? longest + 1 : 3;
	for (size_t i = 0; i < n; i++)
		ap_buf_adds(b, "`");
	ap_buf_adds(b, "\n");
	ap_buf_adds(b, s);
	if (s[strlen(s) - 1] != '\n')
		ap_buf_adds(b, "\n");
	for (size_t i = 0; i < n; i++)
		ap_buf_adds(b, "`");
	ap_buf_adds(b, "\n");
}

/* Inline code for an id or command (one line, no backticks). */
static void add_code(ap_buf *b, const char *s)
{
	ap_buf_adds(b, "`");
	for (const char *p = s; *p && p - s < 400; p++)
		ap_buf_add(b, *p == '`' ? "'" : (*p == '\n' || *p == '\r') ? " " : p, 1);
	ap_buf_adds(b, "`");
}

static void add_output(ap_buf *b, const struct run_out *ro, size_t cap)
{
	ap_buf o = AP_BUF_INIT(4 * SHOW_CAP);

	ap_buf_adds(&o, ro->out ? ro->out : "");
	if (ro->err && *ro->err) {
		ap_buf_adds(&o, "\n--- stderr ---\n");
		ap_buf_adds(&o, ro->err);
	}
	char *s = tools_head_tail(ap_buf_str(&o), o.len, cap);
	ap_buf_adds(b, s ? s : "");
	free(s);
	ap_buf_release(&o);
}

/* Last n lines of the run's stdout (stderr when stdout is empty), for the evidence. */
static char *tail_lines(const struct run_out *ro, int n)
{
	const char *s = ro->out && *ro->out ? ro->out : ro->err ? ro->err : "";
	size_t len = strlen(s), start;
	int lines = 0;

	while (len && s[len - 1] == '\n')
		len--;
	start = len;
	while (start > 0 && lines < n) {
		start--;
		if (s[start] == '\n')
			lines++;
	}
	if (s[start] == '\n')
		start++;
	return tools_head_tail(s + start, len - start, 3000);
}

static void make_nonce(char out[33])
{
	unsigned char r[16];
	ssize_t got = getrandom(r, sizeof(r), 0);

	if (got != (ssize_t)sizeof(r)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)((ts.tv_nsec >> (i % 8)) ^ (getpid() >> (i % 4)) ^
					       (int)i * 37);
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

static long long parse_ll(const char *s, size_t n)
{
	long long v = 0;
	size_t i = 0;

	if (!n)
		return -1;
	for (; i < n && isdigit((unsigned char)s[i]) && v < (1LL << 50); i++)
		v = v * 10 + (s[i] - '0');
	return i == n ? v : -1;
}

static void note_oom_count(struct lane *l, long long n)
{
	if (n >= 0)
		l->oom_seen = n;
}

/* ---- runs --------------------------------------------------------------------------------- */

static void traj_run(struct lane *l, const char *kind, const char *dir, const char *cmd,
		     const struct run_out *ro, const sbx_result *r)
{
	if (!l->t->traj)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "kind", kind);
	cJSON_AddStringToObject(o, "dir", dir);
	cJSON_AddStringToObject(o, "command", cmd);
	if (l->id)
		cJSON_AddNumberToObject(o, "lane", l->id);
	if (ro) {
		report_counts c;

		report_count(&ro->rep, &c);
		cJSON_AddNumberToObject(o, "exit", ro->exit_code);
		cJSON_AddBoolToObject(o, "timed_out", ro->timed_out);
		cJSON_AddStringToObject(o, "class", report_class_name(ro->cls));
		if (ro->source)
			cJSON_AddStringToObject(o, "results", ro->source);
		cJSON_AddNumberToObject(o, "passed", (double)c.passed);
		cJSON_AddNumberToObject(o, "failed", (double)c.failed);
		cJSON_AddNumberToObject(o, "skipped", (double)c.skipped);
		cJSON_AddNumberToObject(o, "errors", (double)c.errors);
		cJSON_AddNumberToObject(o, "millis", (double)ro->millis);
		cJSON_AddNumberToObject(o, "started_t", (double)ro->started);
		cJSON_AddNumberToObject(o, "ended_t", (double)ro->ended);
		char *s =
		    tools_head_tail(ro->out ? ro->out : "", ro->out ? strlen(ro->out) : 0, 4000);
		if (s)
			cJSON_AddStringToObject(o, "stdout", s);
		free(s);
		s = tools_head_tail(ro->err ? ro->err : "", ro->err ? strlen(ro->err) : 0, 2000);
		if (s)
			cJSON_AddStringToObject(o, "stderr", s);
		free(s);
	} else if (r) {
		cJSON_AddNumberToObject(o, "exit", r->exit_code);
		cJSON_AddBoolToObject(o, "timed_out", r->timed_out);
		cJSON_AddNumberToObject(o, "millis", (double)r->millis);
		char *s = tools_head_tail(r->out ? r->out : "", r->out_len, 2000);
		if (s)
			cJSON_AddStringToObject(o, "stdout", s);
		free(s);
		s = tools_head_tail(r->err ? r->err : "", r->err_len, 2000);
		if (s)
			cJSON_AddStringToObject(o, "stderr", s);
		free(s);
	}
	lane_emit(l, o, dir, ro ? &ro->rep : NULL);
}

/* One report file section s ("report:NAME") into ro: parsed when NAME is a report format, a
 * problem in ro when it was cut at the read cap. Sets *cargo_whole for a cargo report and
 * *have_files for any report. */
static int read_report_file(struct run_out *ro, const report_section *s, bool cut,
			    bool *cargo_whole, bool *have_files)
{
	const char *name = s->name + 7;
	size_t nl = s->name_len - 7;
	enum report_format fmt = report_format_of(name, nl);
	const char *src;
	int rc;

	if (fmt == REPORT_FORMAT_NONE)
		return 0; /* not a report (a shim's status file) */
	if (cut) {
		ro->problem = tools_asprintf("its report %.*s is larger than %u MiB", (int)nl, name,
					     REPORT_READ_CAP >> 20);
		return ro->problem ? 0 : AP_ENOMEM;
	}
	if ((rc = report_parse_as(&ro->rep, fmt, s->data, s->len)))
		return rc;
	*cargo_whole = *cargo_whole || fmt == REPORT_FORMAT_CARGO;
	*have_files = ro->have_report = true;
	src = fmt == REPORT_FORMAT_JUNIT && ro->rep.pytest ? "JUnit XML (pytest `--junitxml`)"
							   : report_format_name(fmt);
	ro->source =
	    !ro->source || strcmp(ro->source, src) == 0 ? src : "the reports of several runners";
	return 0;
}

/* The JUnit XML files the run wrote in its tree (section "tree") into ro; a problem in ro when
 * they are larger than the read cap. */
static int read_tree_reports(struct run_out *ro, const report_section *s)
{
	int rc;

	if (s->len >= REPORT_READ_CAP) {
		ro->problem = tools_asprintf("the JUnit reports it wrote are larger "
					     "than %u MiB",
					     REPORT_READ_CAP >> 20);
		return ro->problem ? 0 : AP_ENOMEM;
	}
	if ((rc = report_parse_junit(&ro->rep, s->data, s->len)))
		return rc;
	if (ro->rep.n) {
		ro->have_report = true;
		ro->source = "the JUnit XML files the run wrote in the tree";
	}
	return 0;
}

/* Take the sections of a collect command apart into ro. */
static int read_back(struct lane *l, struct run_out *ro, const sbx_result *r, const char *nonce)
{
	report_section sec[REPORT_MAX_SECTIONS];
	size_t n = 0;
	bool have_files = false;
	const report_section *out = NULL, *err = NULL;
	bool cargo_whole = false; /* cargo ran through its shim, with --no-fail-fast */
	int rc;

	if (r->truncated) {
		ro->problem = tools_asprintf("its output and reports are larger than %u MiB "
					     "together; the results cannot be read in full",
					     REPORT_READ_CAP >> 20);
		return ro->problem ? 0 : AP_ENOMEM;
	}
	if ((rc = report_sections(r->out ? r->out : "", r->out_len, nonce, sec, REPORT_MAX_SECTIONS,
				  &n)))
		return rc;
	if (n >= REPORT_MAX_SECTIONS) { /* reports beyond the count would go unread */
		ro->problem = tools_asprintf("it wrote more than %d report files; the results "
					     "cannot be read in full",
					     REPORT_MAX_SECTIONS - 8);
		return ro->problem ? 0 : AP_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const report_section *s = &sec[i];
		bool cut = s->size >= 0 && (size_t)s->size > s->len;

#define IS(x) (s->name_len == strlen(x) && memcmp(s->name, x, s->name_len) == 0)
		if (IS("nostart"))
			return ap_error_set(AP_EIO, "the Tester could not start a run in the box");
		if (s->name_len > 5 && memcmp(s->name, "link:", 5) == 0) {
			ro->problem = tools_asprintf(
			    "its report %.*s is a symbolic link; a report is read only as a file "
			    "the run wrote in its own report directory",
			    (int)(s->name_len - 5), s->name + 5);
			return ro->problem ? 0 : AP_ENOMEM;
		}
		if (IS("oom")) { /* the size field carries the count */
			if (s->size >= 0 && l->oom_seen >= 0 && s->size > l->oom_seen)
				ro->oom = ro->exit_code == 128 + 9 && !ro->timed_out;
			note_oom_count(l, s->size);
		} else if (IS("out")) {
			ro->out = tools_head_tail(s->data, s->len, SHOW_CAP);
			out = s;
		} else if (IS("err")) {
			ro->err = tools_head_tail(s->data, s->len, SHOW_CAP);
			err = s;
		} else if (s->name_len > 7 && memcmp(s->name, "report:", 7) == 0) {
			if ((rc = read_report_file(ro, s, cut, &cargo_whole, &have_files)) ||
			    ro->problem)
				return rc;
		} else if (IS("tree") && !have_files && s->len) {
			if ((rc = read_tree_reports(ro, s)) || ro->problem)
				return rc;
		}
#undef IS
	}
	/* Read once every report is known: cargo through its shim ran with --no-fail-fast. */
	if (out)
		ro->stopped = report_stopped_early(out->data, out->len, cargo_whole);
	if (err && !ro->stopped)
		ro->stopped = report_stopped_early(err->data, err->len, cargo_whole);
	return 0;
}

/* Run the instrumented command ro->cmd in dir, its reports going to rdir: its exit status into
 * ro, an excerpt of its stderr into prep_err. */
static int run_instrumented(struct lane *l, const char *dir, const char *rdir, int timeout_s,
			    struct run_out *ro, char *prep_err, size_t prep_cap)
{
	sbx_result r = SBX_RESULT_INIT;
	const char *argv[] = {"sh",    "-c",	     SCRIPT_RUN,       "sh",	    dir, rdir,
			      ro->cmd, shim_ap_shim, shim_ap_unittest, shim_ap_tox, NULL};
	int rc;

	if ((rc = exec_argv(l, "/tmp", argv, timeout_s, NULL, 0, 64u << 10, &r)))
		goto out;
	ro->exit_code = r.exit_code;
	ro->timed_out = r.timed_out;
	ro->millis = r.millis;
	/* An excerpt of the box's stderr for a message, cut on purpose (invalid UTF-8 at the cut
	 * is replaced wherever the message is shown: traj.h, common/buf.h). */
	snprintf(prep_err, prep_cap, "%s", r.err ? r.err : "");
out:
	sbx_result_release(&r);
	return rc;
}

/* Read the output and reports of the run in dir back into *r, in sections marked with nonce.
 * The caller releases *r. */
static int collect_results(struct lane *l, const char *dir, const char *rdir, const char *nonce,
			   sbx_result *r)
{
	char caps[3][24], tree[96];
	int rc;

	snprintf(caps[0], sizeof(caps[0]), "%u", OUT_SECTION_CAP);
	snprintf(caps[1], sizeof(caps[1]), "%u", ERR_SECTION_CAP);
	snprintf(caps[2], sizeof(caps[2]), "%u", REPORT_READ_CAP);
	if ((rc = ap_fmt(tree, sizeof(tree), "%s/repo", dir)))
		return rc;
	const char *argv[] = {"sh",  "-c",    SCRIPT_COLLECT, "sh",    rdir, tree,
			      nonce, caps[0], caps[1],	      caps[2], NULL};

	if ((rc = exec_argv(l, "/tmp", argv, 300, NULL, 0, COLLECT_CAP, r)))
		return rc;
	if (r->exit_code != 0 || r->timed_out) /* cut short: what it printed is no evidence */
		return ap_error_set(
		    AP_EIO,
		    "the Tester could not read the results of a run in %s back (the "
		    "reading exited with %d%s)",
		    dir, r->exit_code, r->timed_out ? ", timed out" : "");
	return 0;
}

/* Classify the run read back into ro (cmd: its command, deadline_key: which run it is); a
 * run without the evidence it owes gets a problem. */
static int classify_run(struct run_out *ro, const char *cmd, const char *deadline_key)
{
	/* pytest always writes its JUnit report (PYTEST_ADDOPTS): a pytest run without one gave
	 * no evidence, and its exit status alone must not stand in for it. */
	if (ro->runner == REPORT_RUNNER_PYTEST && !ro->have_report && !ro->problem &&
	    !ro->timed_out && !ro->oom && ro->exit_code < 128 && /* killed: that is the class */
	    !(ro->problem = tools_asprintf("pytest ran but wrote no JUnit report (exit %d): the "
					   "per-test results are missing",
					   ro->exit_code)))
		return AP_ENOMEM;
	report_finish(&ro->rep);
	{
		report_run facts = {.exit_code = ro->exit_code,
				    .timed_out = ro->timed_out,
				    .oom = ro->oom,
				    .runner = ro->runner,
				    .have_report = ro->have_report,
				    .report = &ro->rep};

		ro->cls = report_classify(&facts);
	}
	/* A failed chain of test commands joined by && stopped at its first failing one. */
	if (!ro->stopped && !ro->timed_out && ro->exit_code > 0 && ro->exit_code < 128)
		ro->stopped = report_chain_stops(cmd);
	/* A suite run that stopped at its first failure ran only part of the suite: a test after
	 * that point could break unseen, so such a run is never evidence (fail closed). */
	if (ro->stopped && !ro->problem && strcmp(deadline_key, "suite_timeout") == 0 &&
	    !(ro->problem = tools_asprintf(
		  "%s, so the tests after that point never ran: the suite's evidence is "
		  "incomplete and cannot show that no test that passed before fails",
		  ro->stopped)))
		return AP_ENOMEM;
	return 0;
}

/* Run cmd in side's tree with the report instrumentation, read everything back, classify. */
static int run_tests(struct lane *l, const char *side, const char *cmd, int timeout_s,
		     const char *deadline_key, struct run_out *ro)
{
	char rdir[128], nonce[33], prep_err[300];
	sbx_result r = SBX_RESULT_INIT;
	const char *dir = strcmp(side, "pristine") == 0 ? PRISTINE : PATCHED;
	tester *t = l->t;
	int rc;

	memset(ro, 0, sizeof(*ro));
	ro->started = l->run_started;
	ro->side = side;
	ro->deadline_s = timeout_s;
	ro->deadline_key = deadline_key;
	ro->runner = report_runner_of(cmd);
	if ((rc = ap_fmt(rdir, sizeof(rdir), REPORTS "/%s", side)))
		return rc;
	if (!(ro->cmd = report_instrument(cmd, rdir)))
		return AP_ENOMEM;
	if ((rc = run_instrumented(l, dir, rdir, timeout_s, ro, prep_err, sizeof(prep_err))))
		goto out;
	/* Nothing the run started may outlive it: a background process could rewrite its report
	 * or output before they are read. A box that cannot be cleared is killed: the run gave
	 * no evidence, which is a rejection (or an environment failure), not a broken job. */
	if (sbx_box_sweep(l->box) != 0) {
		ap_error_clear();
		ro->problem = tools_asprintf("it left processes running that could not be stopped "
					     "after it ended (its sandbox was killed), so its "
					     "results cannot be trusted");
		rc = ro->problem ? 0 : AP_ENOMEM;
		goto out;
	}
	make_nonce(nonce);
	if ((rc = collect_results(l, dir, rdir, nonce, &r)))
		goto out;
	/* Ids the baseline has too are not stored again; t->base outlives every other run. */
	if (ro != &t->base)
		report_share_ids(&ro->rep, &t->base.rep);
	if ((rc = read_back(l, ro, &r, nonce))) {
		if (rc == AP_EIO)
			ap_error_set(AP_EIO, "the Tester could not start a run in %s: %s", dir,
				     prep_err);
		goto out;
	}
	sbx_result_release(&r); /* parsed: its raw text (up to COLLECT_CAP) is not needed now */
	if ((rc = classify_run(ro, cmd, deadline_key)))
		goto out;
	ro->ended = traj_millis(t->traj);
	traj_run(l, strcmp(deadline_key, "repro_timeout") == 0 ? "repro" : "suite", dir, ro->cmd,
		 ro, NULL);
out:
	sbx_result_release(&r);
	return rc;
}

/* A fresh tree for side (with the diff applied for patched). *why: a rejection sentence
 * when the diff does not apply. */
static int prepare_tree(struct lane *l, const char *dir, const char *diff, char **why)
{
	const char *argv[] = {"sh", "-c", SCRIPT_TREE, "sh", dir, diff ? "apply" : "", NULL};
	sbx_result r = SBX_RESULT_INIT;
	int rc;

	*why = NULL;
	rc = exec_argv(l, "/tmp", argv, 600, diff, diff ? strlen(diff) : 0, 64u << 10, &r);
	if (rc)
		return rc;
	traj_run(l, "tree", dir, diff ? "copy /repo, git apply the diff" : "copy /repo", NULL, &r);
	if (r.exit_code == 71) {
		char *e = first_lines(r.err, 8, 2000);

		*why = tools_asprintf("the diff does not apply to a fresh copy of the repository "
				      "with `git apply`: %s",
				      e ? e : "");
		free(e);
		rc = *why ? 0 : AP_ENOMEM;
	} else if (r.exit_code != 0) {
		rc = ap_error_set(AP_EIO, "cannot copy /repo to %s in the box (exit %d): %.300s",
				  dir, r.exit_code, r.err ? r.err : "");
	} else {
		note_oom_count(l, parse_ll(r.out ? r.out : "", r.out ? strcspn(r.out, "\n") : 0));
	}
	sbx_result_release(&r);
	return rc;
}

/* Run the setup command in side's tree. *why: a sentence when it failed. */
static int run_setup(struct lane *l, const char *side, const char *dir, char **why)
{
	tester *t = l->t;
	const char *argv[] = {"sh", "-c", SCRIPT_SETUP, "sh", dir, t->setup_cmd, NULL};
	sbx_result r = SBX_RESULT_INIT;
	int rc;

	*why = NULL;
	if (!t->setup_cmd || !*t->setup_cmd)
		return 0;
	if ((rc = exec_argv(l, "/tmp", argv, t->setup_s, NULL, 0, 1u << 20, &r)))
		return rc;
	traj_run(l, "setup", dir, t->setup_cmd, NULL, &r);
	if (r.exit_code != 0 || r.timed_out) {
		ap_buf o = AP_BUF_INIT(2 * SHOW_CAP);
		char *shown;

		ap_buf_add(&o, r.out ? r.out : "", r.out_len);
		if (r.err_len) {
			ap_buf_adds(&o, "\n--- stderr ---\n");
			ap_buf_add(&o, r.err, r.err_len);
		}
		shown = tools_head_tail(ap_buf_str(&o), o.len, 3000);
		if (r.timed_out)
			*why =
			    tools_asprintf("the setup command `%s` was killed by the setup "
					   "deadline (`setup_timeout`: %d s) on the %s code:\n%s",
					   t->setup_cmd, t->setup_s, side, shown ? shown : "");
		else
			*why =
			    tools_asprintf("the setup command `%s` failed on the %s code (%s):\n%s",
					   t->setup_cmd, side,
					   r.exit_code == 127	? "command not found, exit 127"
					   : r.exit_code == 126 ? "not executable, exit 126"
								: "non-zero exit",
					   shown ? shown : "");
		free(shown);
		ap_buf_release(&o);
		rc = *why ? 0 : AP_ENOMEM;
	}
	sbx_result_release(&r);
	return rc;
}

/* Where a fresh run stopped before its command ran (fresh_run). */
enum run_stop { RUN_RAN, RUN_NO_APPLY, RUN_NO_SETUP };

/* One test run in a box of its own (t->make_box), in lane l: the tree of side built there anew
 * (a copy of /repo, with diff applied when given), setup_cmd in it, the command, the results
 * read back into ro; then the box is destroyed, so nothing of this run reaches another. *why
 * and *stop say why the command did not run (the diff does not apply, setup failed; *why
 * malloc'd). AP_ECANCELLED when the lane was stopped. */
static int fresh_run(struct lane *l, const char *side, const char *diff, const char *cmd,
		     int timeout_s, const char *deadline_key, struct run_out *ro,
		     enum run_stop *stop, char **why)
{
	const char *dir = strcmp(side, "pristine") == 0 ? PRISTINE : PATCHED;
	tester *t = l->t;
	char msg[AP_ERROR_MSG_MAX];
	int rc, drc;

	*why = NULL;
	*stop = RUN_RAN;
	memset(ro, 0, sizeof(*ro));
	if (l->stop || (l->cancel && *l->cancel))
		return ap_error_set(AP_ECANCELLED, "the Tester's run was stopped");
	l->run_started = traj_millis(t->traj);
	if ((rc = t->make_box(t->make_box_ud, &l->box)))
		return rc;
	l->oom_seen = -1;
	if ((rc = prepare_tree(l, dir, diff, why)) || *why) {
		*stop = RUN_NO_APPLY;
		goto out_destroy;
	}
	if ((rc = run_setup(l, diff ? side : "unchanged", dir, why)) || *why) {
		*stop = RUN_NO_SETUP;
		goto out_destroy;
	}
	rc = run_tests(l, side, cmd, timeout_s, deadline_key, ro);
out_destroy:
	snprintf(msg, sizeof(msg), "%s", rc ? ap_error_last() : ""); /* same size: never cut */
	drc = sbx_destroy(l->box);
	l->box = NULL;
	if (rc)
		return ap_error_set(rc, "%s", msg);
	return drc;
}

/* "killed by the suite deadline (`suite_timeout`: 1200 s)" and the like, malloc'd. */
static char *describe_class(const struct run_out *ro)
{
	if (ro->problem)
		return tools_asprintf("its results cannot be used: %s", ro->problem);
	switch (ro->cls) {
	case REPORT_TIMEOUT:
		/* The box's life caps every command's deadline (sbx_exec): name what fired. */
		if (ro->millis + 2000 < (int64_t)ro->deadline_s * 1000)
			return tools_asprintf("killed after %.0f s when the sandbox's life ran out "
					      "(AUTOPATCH_SANDBOX_WALL_SECONDS), before the `%s` "
					      "deadline (%d s)",
					      (double)ro->millis / 1000.0, ro->deadline_key,
					      ro->deadline_s);
		return tools_asprintf("killed by the %s deadline (`%s`: %d s)",
				      strcmp(ro->deadline_key, "repro_timeout") == 0 ? "repro"
										     : "suite",
				      ro->deadline_key, ro->deadline_s);
	case REPORT_EXIT_ONLY:
		return tools_asprintf("exit status %d, no per-test results", ro->exit_code);
	case REPORT_NOTHING_RAN:
		return tools_asprintf("failed before any test ran (exit %d)", ro->exit_code);
	case REPORT_KILLED:
		return strdup("killed by SIGKILL (exit 137) before the deadline, and the box's "
			      "out-of-memory counter did not rise");
	default:
		return strdup(report_class_name(ro->cls));
	}
}

/* The messages of up to max entries of rep with outcome o (collection only when coll). */
static void add_messages(ap_buf *b, const report *rep, enum report_outcome o, bool coll_only,
			 int max)
{
	int shown = 0;

	for (size_t i = 0; i < rep->n && shown < max; i++) {
		const report_test *x = &rep->tests[i];

		if (x->outcome != o || (coll_only && !x->collection))
			continue;
		char *m = first_lines(x->message, 12, 1500);
		ap_buf_adds(b, "- ");
		add_code(b, x->id);
		ap_buf_adds(b, ":\n");
		add_fenced(b, m);
		free(m);
		shown++;
	}
}

/* ---- the baseline ------------------------------------------------------------------------ */

static const char *what_to_change(const struct run_out *ro)
{
	switch (ro->cls) {
	case REPORT_NOT_FOUND:
		return "The test command's program is not in the sandbox image. Use an image that "
		       "has the toolchain (`image:` in .github/autopatch.yml, or "
		       "AUTOPATCH_SANDBOX_IMAGE), install it in `setup:`, or change `test:`.";
	case REPORT_NOT_EXECUTABLE:
		return "A program the test command runs is not executable. Check file modes and "
		       "`setup:`, or change `test:`.";
	case REPORT_COLLECTION:
		return "The tests cannot be loaded on the unchanged code. Install the missing "
		       "dependencies in `setup:` (or use an image that has them), or leave the "
		       "broken modules out of `test:`.";
	case REPORT_NO_TESTS:
		return "The test command collected no tests. Check `test:` in "
		       ".github/autopatch.yml.";
	case REPORT_NOTHING_RAN:
		return "Check `test:`, `setup:` and the image: the command fails before running "
		       "any test.";
	case REPORT_TIMEOUT:
		return "Raise `suite_timeout` in .github/autopatch.yml or run a faster subset in "
		       "`test:`.";
	case REPORT_OOM:
		return "Give the sandbox more memory (AUTOPATCH_SANDBOX_MEMORY) or run fewer tests "
		       "at once in `test:`.";
	case REPORT_KILLED:
		return "Something killed the suite; check the pids limit (AUTOPATCH_SANDBOX_PIDS) "
		       "and `test:`.";
	default:
		if (ro->stopped)
			return "Make `test:` run the whole suite: no `-x`/`--maxfail` (pytest), "
			       "`cargo test --no-fail-fast`, `mvn -fae`, no `--stop-on-failure` "
			       "(ctest), no `--bail` (jest, mocha), and no `&&` chain that stops "
			       "at the first failing runner.";
		return "Make the suite write per-test results (pytest, `go test`, cargo, ctest "
		       "--output-junit, Maven/Gradle/jest JUnit reports), make it pass on the "
		       "unchanged code, or set `allow_weak_evidence: true` in "
		       ".github/autopatch.yml to accept exit-status evidence (the PR then says "
		       "so).";
	}
}

static int env_failure_for(tester *t, const struct run_out *ro, char **out)
{
	ap_buf b = AP_BUF_INIT(64u << 10);
	char *cls = describe_class(ro), *lines, *advice, *java = NULL;
	int rc;

	ap_buf_addf(&b, "the test suite cannot run on the unchanged code: %s.\ncommand: %s\n",
		    cls ? cls : "", t->test_cmd);
	free(cls);
	/* A Java build that could not resolve a plugin or library offline: say which, and what
	 * would fetch it, first (Maven's own error is deep in its output). */
	if ((rc = javadeps_hint(ro->out, &java)) == 0 && !java)
		rc = javadeps_hint(ro->err, &java);
	if (rc) {
		ap_buf_release(&b);
		return rc;
	}
	if (java) {
		ap_buf_addf(&b, "%s\n", java);
		free(java);
	}
	if (ro->cls == REPORT_COLLECTION && ro->rep.n) {
		ap_buf_adds(&b, "first errors:\n");
		add_messages(&b, &ro->rep, REPORT_ERROR, true, 3);
	} else {
		/* The runner's own error lines, ANSI stripped (agents/run_output.h). */
		bool errors = false;

		lines = run_output_excerpt(ro->err, ro->out, 20, 3000, &errors);
		ap_buf_adds(&b, errors ? "the runner's error lines:\n"
				       : "first and last lines of its output:\n");
		add_fenced(&b, lines);
		free(lines);
	}
	/* Advice that fits the cause seen in the output, else the class's. */
	advice = run_output_advice(ro->err, ro->out);
	ap_buf_addf(&b, "%s", advice ? advice : what_to_change(ro));
	free(advice);
	*out = ap_buf_take(&b);
	ap_buf_release(&b);
	return *out ? 0 : AP_ENOMEM;
}

static char *counts_line(const struct run_out *ro)
{
	report_counts c;

	report_count(&ro->rep, &c);
	if (ro->cls != REPORT_RAN)
		return tools_asprintf("exit %d, no per-test results", ro->exit_code);
	return tools_asprintf("%zu passed, %zu failed, %zu skipped, %zu errors", c.passed, c.failed,
			      c.skipped, c.errors);
}

/* The kept results of an earlier job as t->base: 1 when they stand in for the run (they
 * classify as a suite that ran with per-test results), 0 when the suite must run. */
static int reuse_baseline(tester *t)
{
	report rep = REPORT_INIT;
	int64_t millis = 0;
	int code = 0, rc;

	if (!t->baseline_get)
		return 0;
	if ((rc = t->baseline_get(t->baseline_ud, t->test_cmd, &rep, &code, &millis,
				  &t->baseline_miss)) <= 0) {
		report_release(&rep);
		return rc;
	}
	report_finish(&rep);
	report_run facts = {.exit_code = code,
			    .runner = report_runner_of(t->test_cmd),
			    .have_report = true,
			    .report = &rep};
	if (!rep.n || report_classify(&facts) != REPORT_RAN) { /* fail closed: run it */
		report_release(&rep);
		t->baseline_miss = strdup("the kept results are not those of a suite that ran with "
					  "per-test results");
		return 0;
	}
	t->base.side = "pristine";
	t->base.deadline_s = t->suite_s;
	t->base.deadline_key = "suite_timeout";
	t->base.runner = facts.runner;
	t->base.have_report = true;
	t->base.source = "the same suite's run on the same commit, environment and image in an "
			 "earlier job";
	t->base.rep = rep;
	t->base.cls = REPORT_RAN;
	t->base.exit_code = code;
	t->base.millis = millis;
	t->baseline_reused = true;
	return 1;
}

/* Hand a baseline with per-test results to the host's cache (a failure is only a note). */
static void keep_baseline(tester *t)
{
	if (!t->baseline_put || t->baseline_reused || t->base.problem || !t->base.have_report ||
	    t->base.cls != REPORT_RAN)
		return;
	if (t->baseline_put(t->baseline_ud, t->test_cmd, &t->base.rep, t->base.exit_code,
			    t->base.millis))
		ap_error_clear();
}

void tester_set_baseline_cache(tester *t, tester_baseline_get_fn get, tester_baseline_put_fn put,
			       void *ud)
{
	t->baseline_get = get;
	t->baseline_put = put;
	t->baseline_ud = ud;
}

int tester_baseline(tester *t, char **env_failure, char **summary)
{
	enum run_stop stop;
	struct lane l;
	char *why = NULL;
	int rc;

	*env_failure = NULL;
	if (summary)
		*summary = NULL;
	if (t->have_baseline)
		goto answer;
	if ((rc = reuse_baseline(t)) < 0)
		return rc;
	lane_init(&l, t, 0, false);
	if (rc == 0 && (rc = fresh_run(&l, "pristine", NULL, t->test_cmd, t->suite_s,
				       "suite_timeout", &t->base, &stop, &why)))
		return rc;
	if (why) {
		t->env_failure = tools_asprintf("%s\nFix `setup:` in .github/autopatch.yml or use "
						"an image that has what it needs.",
						why);
		free(why);
		if (!t->env_failure)
			return AP_ENOMEM;
		t->have_baseline = true;
		goto answer;
	}
	t->have_baseline = true;
	if (t->base.problem || !report_class_ran(t->base.cls) ||
	    (t->base.cls == REPORT_EXIT_ONLY && t->base.exit_code != 0 && !t->allow_weak)) {
		if ((rc = env_failure_for(t, &t->base, &t->env_failure)))
			return rc;
	} else {
		char *c = counts_line(&t->base);

		keep_baseline(t);
		t->baseline_summary = tools_asprintf(
		    t->baseline_reused
			? "baseline: reused from an earlier job (the suite took %.1f "
			  "s there): %s%s%s"
			: "baseline: the suite ran on the unchanged code in %.1f s: "
			  "%s%s%s",
		    (double)t->base.millis / 1000.0, c ? c : "", t->base.source ? " (from " : "",
		    t->base.source ? t->base.source : "");
		if (t->baseline_summary) {
			char *s = tools_asprintf(
			    "%s%s%s%s", t->baseline_summary, t->base.source ? ")" : "",
			    t->baseline_miss ? "; not reused from an earlier job: " : "",
			    t->baseline_miss ? t->baseline_miss : "");
			free(t->baseline_summary);
			t->baseline_summary = s;
		}
		free(c);
	}
	if (t->traj) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "usable", t->env_failure == NULL);
		cJSON_AddBoolToObject(o, "reused", t->baseline_reused);
		if (t->env_failure)
			cJSON_AddStringToObject(o, "env_failure", t->env_failure);
		if (t->baseline_summary)
			cJSON_AddStringToObject(o, "summary", t->baseline_summary);
		if (t->baseline_miss)
			cJSON_AddStringToObject(o, "reuse_miss", t->baseline_miss);
		traj_event(t->traj, "tester_baseline", o);
	}
answer:
	if (t->env_failure && !(*env_failure = strdup(t->env_failure)))
		return AP_ENOMEM;
	if (summary && t->baseline_summary && !(*summary = strdup(t->baseline_summary)))
		return AP_ENOMEM;
	return 0;
}

/* ---- comparisons ------------------------------------------------------------------------- */

static bool failing(const report_test *x)
{
	return x && (x->outcome == REPORT_FAILED || x->outcome == REPORT_ERROR);
}

char *tester_regressions(const report *before, const report *after, size_t max, size_t *count)
{
	ap_buf b = AP_BUF_INIT(256u << 10);

	*count = 0;
	for (size_t i = 0; i < before->n; i++) {
		const report_test *x = &before->tests[i], *y;
		char *m = NULL;

		if (x->outcome != REPORT_PASSED)
			continue;
		y = report_find(after, x->id);
		if (y && y->outcome == REPORT_PASSED)
			continue;
		if ((*count)++ >= max)
			continue;
		ap_buf_adds(&b, "- ");
		add_code(&b, x->id);
		if (!y) {
			ap_buf_adds(&b, ": disappeared (it did not run after the patch)\n");
			continue;
		}
		m = first_lines(y->message, 1, 300);
		ap_buf_addf(&b, ": %s%s%s\n",
			    y->outcome == REPORT_SKIPPED ? "now skipped"
			    : y->outcome == REPORT_ERROR ? "error"
							 : "failed",
			    m && *m ? ": " : "", m ? m : "");
		free(m);
	}
	if (*count > max)
		ap_buf_addf(&b, "- and %zu more\n", *count - max);
	if (*count == 0) {
		ap_buf_release(&b);
		return NULL;
	}
	return ap_buf_take(&b);
}

/* Names (inline code, comma-separated) of the tests that already failed on pristine. */
static void add_already_failing(ap_buf *b, const report *base, int max)
{
	int shown = 0;
	size_t total = 0;

	for (size_t i = 0; i < base->n; i++)
		if (failing(&base->tests[i]))
			total++;
	if (!total)
		return;
	ap_buf_addf(b, "- already failing before the patch (%zu): ", total);
	for (size_t i = 0; i < base->n && shown < max; i++)
		if (failing(&base->tests[i])) {
			ap_buf_adds(b, shown ? ", " : "");
			add_code(b, base->tests[i].id);
			shown++;
		}
	if (total > (size_t)max)
		ap_buf_addf(b, " and %zu more", total - (size_t)max);
	ap_buf_adds(b, "\n");
}

/* ---- verdict text ------------------------------------------------------------------------ */

static int reject(tester_verdict *v, const char *reason, const char *cmd, const char *dir,
		  const struct run_out *ro, const char *detail)
{
	ap_buf b = AP_BUF_INIT(256u << 10);
	char *cls = ro ? describe_class(ro) : NULL;

	v->proven = false;
	v->reason = strdup(reason);
	ap_buf_addf(&b, "Tester: REJECTED - %s\n", reason);
	if (cmd)
		ap_buf_addf(&b, "\ncommand: %s\ndirectory: %s\n", cmd, dir ? dir : "");
	if (ro)
		ap_buf_addf(&b, "run: %s (exit status %d%s)\n", cls ? cls : "", ro->exit_code,
			    ro->timed_out ? ", timed out" : "");
	if (detail && *detail)
		ap_buf_addf(&b, "%s\n", detail);
	if (ro) {
		ap_buf_adds(&b, "--- output (head and tail) ---\n");
		add_output(&b, ro, FEEDBACK_OUTPUT_CAP);
	}
	free(cls);
	v->feedback = ap_buf_take(&b);
	ap_buf_release(&b);
	if (v->feedback) {
		char *clean = redact_str(v->feedback);
		free(v->feedback);
		v->feedback = clean;
	}
	return v->reason && v->feedback ? 0 : AP_ENOMEM;
}

static int reject_fmt(tester_verdict *v, const char *cmd, const char *dir, const struct run_out *ro,
		      const char *detail, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int reject_fmt(tester_verdict *v, const char *cmd, const char *dir, const struct run_out *ro,
		      const char *detail, const char *fmt, ...)
{
	va_list ap;
	char *why = NULL;
	int rc;

	va_start(ap, fmt);
	if (vasprintf(&why, fmt, ap) < 0)
		why = NULL;
	va_end(ap);
	if (!why)
		return AP_ENOMEM;
	rc = reject(v, why, cmd, dir, ro, detail);
	free(why);
	return rc;
}

/* ---- the reproduction test --------------------------------------------------------------- */

enum repro_kind { REPRO_REJECT, REPRO_FAILS, REPRO_FAILS_EXIT, REPRO_HANGS };

/* The per-test results of the pristine repro run ro: REPRO_FAILS in *kind when a test new to
 * it fails, else a rejection in *why (malloc'd) with the messages that explain it in d. */
static void judge_pristine_tests(tester *t, const struct run_out *ro, enum repro_kind *kind,
				 char **why, ap_buf *d)
{
	bool pytest = ro->rep.pytest;
	size_t fails = 0, errors = 0, skips = 0, passes = 0;

	for (size_t i = 0; i < ro->rep.n; i++) {
		const report_test *x = &ro->rep.tests[i];
		const report_test *b = report_find(&t->base.rep, x->id);

		if (failing(b))
			continue; /* failed before this test existed: not the repro's doing */
		if (x->outcome == REPORT_FAILED ||
		    (x->outcome == REPORT_ERROR && !pytest && !x->collection))
			fails++;
		else if (x->outcome == REPORT_ERROR)
			errors++;
		else if (x->outcome == REPORT_SKIPPED)
			skips++;
		else
			passes++;
	}
	if (fails) {
		*kind = REPRO_FAILS;
	} else if (errors) {
		*why = strdup("the reproduction test errored before the test body on the pristine "
			      "code (in a fixture or set-up, not in the test): it must fail in the "
			      "test itself, with an assertion or an exception from the code under "
			      "test");
		add_messages(d, &ro->rep, REPORT_ERROR, false, 3);
	} else if (skips) {
		*why = strdup("the reproduction test was SKIPPED on the pristine code: a skipped "
			      "test proves nothing. It must run and fail (install what it needs in "
			      "`setup:` or do not skip)");
		add_messages(d, &ro->rep, REPORT_SKIPPED, false, 3);
	} else if (passes) {
		*why = strdup("the reproduction test PASSED on the pristine code: it does not "
			      "reproduce the bug. It must fail before the fix and pass after it");
	} else {
		*why = strdup("the reproduction test run on the pristine code reported only tests "
			      "that already failed before it was added: it does not reproduce the "
			      "bug");
	}
}

/* What the pristine repro run shows. On REPRO_REJECT, *why and *detail (malloc'd) say why. */
static int judge_pristine(tester *t, const struct run_out *ro, enum repro_kind *kind, char **why,
			  char **detail)
{
	ap_buf d = AP_BUF_INIT(64u << 10);
	char *cls = describe_class(ro);

	*kind = REPRO_REJECT;
	*why = *detail = NULL;
	if (!cls)
		return AP_ENOMEM;
	if (ro->problem) {
		*why = tools_asprintf("the reproduction test's results on the pristine code "
				      "cannot be used: %s",
				      ro->problem);
		goto out;
	}
	if (ro->cls == REPORT_TIMEOUT) {
		if (t->hang_issue) {
			*kind = REPRO_HANGS;
			goto out;
		}
		*why = tools_asprintf(
		    "the reproduction test was %s on the pristine code. A timeout reproduces "
		    "only an issue about a hang, and this issue does not describe one: make the "
		    "test fail with an assertion instead (or raise `repro_timeout`)",
		    cls);
		goto out;
	}
	if (ro->cls == REPORT_COLLECTION) {
		*why = tools_asprintf("the reproduction test errored before the test body on the "
				      "pristine code (%s): it must be collected and run, then fail "
				      "in the test",
				      cls);
		add_messages(&d, &ro->rep, REPORT_ERROR, false, 3);
		goto out;
	}
	if (!report_class_ran(ro->cls)) {
		*why = tools_asprintf("the reproduction test did not run on the pristine code: %s",
				      cls);
		goto out;
	}
	if (ro->cls == REPORT_EXIT_ONLY) {
		if (ro->exit_code == 0)
			*why = strdup("the reproduction test PASSED on the pristine code (exit 0): "
				      "it does not reproduce the bug. It must fail before the fix "
				      "and pass after it");
		else
			*kind = REPRO_FAILS_EXIT;
		goto out;
	}
	judge_pristine_tests(t, ro, kind, why, &d);
out:
	free(cls);
	if (d.len)
		*detail = ap_buf_take(&d);
	ap_buf_release(&d);
	return *kind != REPRO_REJECT || *why ? 0 : AP_ENOMEM;
}

/* The failing-on-pristine tests (their ids, with messages), for the evidence. */
static void add_pristine_failures(ap_buf *b, const tester *t, const struct run_out *ro)
{
	int shown = 0;

	for (size_t i = 0; i < ro->rep.n && shown < 5; i++) {
		const report_test *x = &ro->rep.tests[i];

		if (!(x->outcome == REPORT_FAILED ||
		      (x->outcome == REPORT_ERROR && !ro->rep.pytest)) ||
		    failing(report_find(&t->base.rep, x->id)))
			continue;
		char *m = first_lines(x->message, 15, 2000);
		ap_buf_adds(b, "  - ");
		add_code(b, x->id);
		ap_buf_adds(b, " failed:\n\n");
		add_fenced(b, m && *m ? m : NULL);
		ap_buf_adds(b, "\n");
		free(m);
		shown++;
	}
}

/* The per-test results of the patched repro run ro against the pristine one pre: true with a
 * rejection in *why (and messages in d) when a test that reproduced did not run, was skipped,
 * or a test new to the run fails. */
static bool judge_patched_tests(tester *t, enum repro_kind kind, const struct run_out *pre,
				const struct run_out *ro, char **why, ap_buf *d)
{
	for (size_t i = 0; kind == REPRO_FAILS && i < pre->rep.n; i++) {
		const report_test *x = &pre->rep.tests[i], *y;

		if (!(x->outcome == REPORT_FAILED ||
		      (x->outcome == REPORT_ERROR && !pre->rep.pytest)) ||
		    failing(report_find(&t->base.rep, x->id)))
			continue;
		y = report_find(&ro->rep, x->id);
		if (!y) {
			*why =
			    tools_asprintf("the reproduction test `%s` did not run on the patched "
					   "code",
					   x->id);
			return true;
		}
		if (y->outcome == REPORT_SKIPPED) {
			*why =
			    tools_asprintf("the reproduction test `%s` was SKIPPED on the patched "
					   "code: it must run and pass",
					   x->id);
			add_messages(d, &ro->rep, REPORT_SKIPPED, false, 3);
			return true;
		}
	}
	for (size_t i = 0; i < ro->rep.n; i++) {
		const report_test *y = &ro->rep.tests[i];

		if (failing(y) && !failing(report_find(&t->base.rep, y->id))) {
			*why =
			    strdup("the reproduction test FAILS on the patched code: the fix does "
				   "not work yet");
			add_messages(d, &ro->rep, REPORT_FAILED, false, 3);
			add_messages(d, &ro->rep, REPORT_ERROR, false, 3);
			return true;
		}
	}
	return false;
}

/* On the patched tree: every test that reproduced on pristine passes, nothing new fails. */
static int judge_patched(tester *t, enum repro_kind kind, const struct run_out *pre,
			 const struct run_out *ro, char **why, char **detail)
{
	ap_buf d = AP_BUF_INIT(64u << 10);
	char *cls = describe_class(ro);

	*why = *detail = NULL;
	if (!cls)
		return AP_ENOMEM;
	if (ro->problem) {
		*why = tools_asprintf("the reproduction test's results on the patched code cannot "
				      "be used: %s",
				      ro->problem);
		goto out;
	}
	if (!report_class_ran(ro->cls)) {
		*why = tools_asprintf("the reproduction test did not complete on the patched code: "
				      "%s",
				      cls);
		if (ro->cls == REPORT_COLLECTION)
			add_messages(&d, &ro->rep, REPORT_ERROR, false, 3);
		goto out;
	}
	if (kind == REPRO_FAILS && ro->cls != REPORT_RAN) {
		*why = strdup("the reproduction test gave per-test results on the pristine code "
			      "but none on the patched code: the evidence is missing");
		goto out;
	}
	if (judge_patched_tests(t, kind, pre, ro, why, &d))
		goto out;
	if (ro->cls == REPORT_RAN) {
		report_counts c;

		report_count(&ro->rep, &c);
		if (c.passed == 0) {
			*why =
			    strdup(c.skipped ? "the reproduction test was SKIPPED on the patched "
					       "code: it must run and pass"
					     : "the reproduction test ran no test on the patched "
					       "code");
			add_messages(&d, &ro->rep, REPORT_SKIPPED, false, 3);
			goto out;
		}
	}
	if (ro->cls == REPORT_EXIT_ONLY && ro->exit_code != 0) {
		*why = tools_asprintf("the reproduction test FAILS on the patched code (exit %d): "
				      "the fix does not work yet",
				      ro->exit_code);
		goto out;
	}
out:
	free(cls);
	if (d.len)
		*detail = ap_buf_take(&d);
	ap_buf_release(&d);
	return 0;
}

/* The diff section of path ("diff --git a/path b/path" up to the next file), or NULL. */
static char *diff_section(const char *diff, const char *path)
{
	char *hdr = tools_asprintf("diff --git a/%s b/%s\n", path, path);
	const char *p, *e;
	char *s = NULL;

	if (!hdr)
		return NULL;
	p = strstr(diff, hdr);
	if (p && (p == diff || p[-1] == '\n')) {
		e = strstr(p + strlen(hdr), "\ndiff --git ");
		s = strndup(p, e ? (size_t)(e - p) : strlen(p));
	}
	free(hdr);
	return s;
}

/* Up to max ids of rep, comma-separated inline code, into b. */
static void add_ids(ap_buf *b, const report *rep, size_t max)
{
	for (size_t i = 0; i < rep->n && i < max; i++) {
		ap_buf_adds(b, i ? ", " : "");
		add_code(b, rep->tests[i].id);
	}
	if (rep->n > max)
		ap_buf_addf(b, " and %zu more", rep->n - max);
}

static const char *outcome_word(const report_test *x)
{
	return x->collection		      ? "could not be collected"
	       : x->outcome == REPORT_PASSED  ? "passed"
	       : x->outcome == REPORT_SKIPPED ? "was skipped"
	       : x->outcome == REPORT_ERROR   ? "errored"
					      : "failed";
}

/* The reproduction test is named by test and checked by results, never by the command's text.
 * With fin->test_id: the tests it names in ro's per-test results (report_match) must be one
 * test that failed in the test on the pristine run (patched: passed). Without it, the results
 * already judged stand (the tests new to the run that failed on pristine must pass). A repro
 * run with no per-test results (exit-status evidence) cannot show which test ran: then the
 * command must at least name the file given as test_path. *why (malloc'd) when refused. */
static int check_named(const tool_finish *fin, const char *test_path, enum repro_kind kind,
		       const struct run_out *ro, bool patched, char **why)
{
	const char *id = fin->test_id, *side = patched ? "patched" : "pristine";
	const report_test *m[32];
	bool ambiguous = false;
	ap_buf b = AP_BUF_INIT(64u << 10);
	size_t n;

	*why = NULL;
	if (kind == REPRO_HANGS)
		return 0; /* a hang: the deadline is the evidence on pristine */
	if (ro->cls != REPORT_RAN) {
		if (strstr(fin->test_command, basename_of(test_path)))
			return 0;
		*why = tools_asprintf(
		    "the reproduction run gave no per-test results (%s), so the host cannot see "
		    "which test ran: use a runner that reports per test (pytest, `go test`, cargo, "
		    "ctest, unittest, jest, mocha, Maven, Gradle), or a test_command that names "
		    "the file given as test_path",
		    report_class_name(ro->cls));
		return *why ? 0 : AP_ENOMEM;
	}
	if (!id)
		return 0;
	n = report_match(&ro->rep, id, m, sizeof(m) / sizeof(m[0]), &ambiguous);
	if (n == 0) {
		ap_buf_addf(&b, "the reproduction test ");
		add_code(&b, id);
		ap_buf_addf(&b, " is not among the %zu tests the run on the %s code reported (",
			    ro->rep.n, side);
		add_ids(&b, &ro->rep, 10);
		ap_buf_adds(&b, "): name it in test_id as the runner does, and make test_command "
				"run it");
	} else if (ambiguous) {
		ap_buf_addf(&b, "test_id ");
		add_code(&b, id);
		ap_buf_adds(&b, " names more than one test (");
		for (size_t i = 0; i < n && i < 32; i++) {
			ap_buf_adds(&b, i ? ", " : "");
			add_code(&b, m[i]->id);
		}
		ap_buf_adds(&b, "): give the full name of the one reproduction test");
	} else {
		for (size_t i = 0; i < n && i < 32; i++) {
			bool ok = patched ? m[i]->outcome == REPORT_PASSED
					  : m[i]->outcome == REPORT_FAILED ||
						(m[i]->outcome == REPORT_ERROR && !ro->rep.pytest &&
						 !m[i]->collection);
			if (ok)
				continue;
			ap_buf_adds(&b, "the reproduction test ");
			add_code(&b, m[i]->id);
			ap_buf_addf(&b, " %s on the %s code: it must %s", outcome_word(m[i]), side,
				    patched ? "pass after the fix"
					    : "fail in the test before the fix");
			break;
		}
	}
	if (b.len && !(*why = ap_buf_take(&b))) {
		ap_buf_release(&b);
		return AP_ENOMEM;
	}
	ap_buf_release(&b);
	return 0;
}

/* ---- the diff ------------------------------------------------------------------------------ */

static int fetch_diff(tester *t, tester_verdict *v, bool *too_big)
{
	char nonce[33];
	const char *argv[] = {"sh", "-c", SCRIPT_DIFF, "sh", nonce, NULL};
	sbx_result r = SBX_RESULT_INIT;
	report_section sec[4];
	size_t n = 0;
	int rc;

	make_nonce(nonce);
	{
		sbx_cmd cmd = SBX_CMD_INIT;

		cmd.argv = argv;
		cmd.workdir = WORKSPACE;
		cmd.timeout_s = 120;
		cmd.output_cap = DIFF_CAP;
		cmd.cancel = t->cancel;
		if ((rc = sbx_exec(t->box, &cmd, &r))) /* the Builder's box: bytes only */
			goto out;
	}
	if (r.exit_code != 0) {
		rc = ap_error_set(AP_EIO, "git diff failed in the workspace: %.300s",
				  r.err ? r.err : "");
		goto out;
	}
	*too_big = r.truncated;
	if ((rc = report_sections(r.out ? r.out : "", r.out_len, nonce, sec, 4, &n)))
		goto out;
	if (n != 2 || sec[0].name_len != 5 || memcmp(sec[0].name, "names", 5) != 0 ||
	    sec[1].name_len != 4 || memcmp(sec[1].name, "diff", 4) != 0) {
		rc = *too_big ? 0
			      : ap_error_set(AP_EIO, "git diff in the workspace printed "
						     "something unexpected");
		v->diff = strdup("");
		v->files_changed = strdup("");
	} else {
		v->files_changed = strndup(sec[0].data, sec[0].len);
		v->diff = strndup(sec[1].data, sec[1].len);
	}
	if (!rc && (!v->diff || !v->files_changed))
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

/* ---- evidence ----------------------------------------------------------------------------- */

static void add_counts_table(ap_buf *b, const struct run_out *before, const struct run_out *after)
{
	report_counts x, y;

	report_count(&before->rep, &x);
	report_count(&after->rep, &y);
	ap_buf_adds(b, "| | passed | failed | skipped | errors | exit |\n"
		       "|---|---:|---:|---:|---:|---:|\n");
	ap_buf_addf(b, "| pristine | %zu | %zu | %zu | %zu | %d |\n", x.passed, x.failed, x.skipped,
		    x.errors, before->exit_code);
	ap_buf_addf(b, "| patched | %zu | %zu | %zu | %zu | %d |\n", y.passed, y.failed, y.skipped,
		    y.errors, after->exit_code);
}

/* The reproduction test's part of the evidence: how it failed before the patch and passed
 * after it. */
static void add_repro_evidence(ap_buf *b, tester *t, const tool_finish *fin, const char *test_path,
			       enum repro_kind kind, const struct run_out *pre,
			       const struct run_out *post)
{
	char *tail = NULL;

	ap_buf_adds(b, "**Reproduction test** ");
	add_code(b, test_path);
	if (fin->test_id && kind == REPRO_FAILS) {
		ap_buf_adds(b, ", test ");
		add_code(b, fin->test_id);
		ap_buf_adds(b, " (found in the per-test results of both runs)");
	}
	ap_buf_adds(b, ", run with ");
	add_code(b, fin->test_command);
	ap_buf_adds(b, "\n");
	switch (kind) {
	case REPRO_HANGS:
		ap_buf_addf(b,
			    "- pristine code: **timed out after %d s before the patch** (the "
			    "repro deadline, `repro_timeout`; the issue is about a hang)\n",
			    pre->deadline_s);
		tail = tail_lines(pre, 12);
		if (tail && *tail) {
			ap_buf_adds(b, "  last output before the deadline:\n\n");
			add_fenced(b, tail);
		}
		break;
	case REPRO_FAILS_EXIT:
		ap_buf_addf(b,
			    "- pristine code: **fails** with exit status %d (the runner gives no "
			    "per-test results: exit-status evidence):\n\n",
			    pre->exit_code);
		tail = tail_lines(pre, 15);
		add_fenced(b, tail);
		break;
	default:
		ap_buf_addf(b,
			    "- pristine code: **fails** in the test (per-test results from %s):\n",
			    pre->source ? pre->source : "the runner");
		add_pristine_failures(b, t, pre);
	}
	if (post->cls == REPORT_RAN) {
		report_counts c;

		report_count(&post->rep, &c);
		ap_buf_addf(b,
			    "- patched code: **passes** in %.1f s (%zu passed, %zu failed, %zu "
			    "skipped, exit %d)\n\n",
			    (double)post->millis / 1000.0, c.passed, c.failed, c.skipped,
			    post->exit_code);
	} else {
		ap_buf_addf(b, "- patched code: **passes** (exit %d in %.1f s)\n\n",
			    post->exit_code, (double)post->millis / 1000.0);
	}
	free(tail);
}

/* The test suite's part of the evidence: the baseline against the patched run. */
static void add_suite_evidence(ap_buf *b, tester *t, const struct run_out *suite)
{
	ap_buf_adds(b, "**Test suite** ");
	add_code(b, t->test_cmd);
	ap_buf_adds(b, ", on the patched code with the repository's own tests (the test files "
		       "the patch adds are not in this run)");
	if (t->base.cls == REPORT_RAN) {
		ap_buf_addf(b, " (per-test results from %s)\n\n",
			    t->base.source ? t->base.source : "the runner");
		add_counts_table(b, &t->base, suite);
		ap_buf_adds(b, "\n");
		add_already_failing(b, &t->base.rep, MAX_NAMED);
		ap_buf_adds(b, "- every test that passed before the patch passes after it\n");
	} else {
		ap_buf_addf(b,
			    " (no per-test results: compared by exit status)\n- pristine: exit %d\n"
			    "- patched: exit %d\n",
			    t->base.exit_code, suite->exit_code);
	}
}

/* The commands the evidence came from, for a reader who wants to run them again. */
static void add_commands(ap_buf *b, tester *t, const struct run_out *pre,
			 const struct run_out *suite)
{
	ap_buf_adds(b, "\n**Commands** (in the sandbox; each tree is its own HOME)\n");
	if (t->setup_cmd && *t->setup_cmd) {
		ap_buf_adds(b, "- setup, in both trees: ");
		add_code(b, t->setup_cmd);
		ap_buf_adds(b, "\n");
	}
	ap_buf_adds(b, "- patched tree: a fresh copy of the repository with this exact diff "
		       "applied by `git apply`\n- reproduction: ");
	add_code(b, pre->cmd);
	ap_buf_adds(b, "\n- suite: ");
	add_code(b, suite->cmd);
	ap_buf_adds(b, "\n");
}

static char *evidence(tester *t, const tool_finish *fin, const char *test_path,
		      enum repro_kind kind, const struct run_out *pre, const struct run_out *post,
		      const struct run_out *suite, bool weak)
{
	ap_buf b = AP_BUF_INIT(256u << 10);

	if (weak)
		ap_buf_adds(&b,
			    "> **Weak evidence.** The test suite gives no per-test results and "
			    "already fails on the unchanged code, so regressions cannot be ruled "
			    "out; this repository accepts that (`allow_weak_evidence: true`).\n\n");
	add_repro_evidence(&b, t, fin, test_path, kind, pre, post);
	add_suite_evidence(&b, t, suite);
	add_commands(&b, t, pre, suite);
	char *s = ap_buf_take(&b);
	ap_buf_release(&b);
	char *clean = s ? redact_str(s) : NULL;
	free(s);
	return clean;
}

/* ---- the check ------------------------------------------------------------------------------ */

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

/* The host's files check: what each file is, and whether the patch changes the test harness
 * (then rejected unless the repository allows it; v->harness marks it). */
static int files_check(tester *t, tester_verdict *v, char **tests)
{
	tester_files f = {NULL, NULL, NULL, NULL};
	int rc;

	*tests = NULL;
	if (!t->files_check)
		return ap_error_set(AP_EINVAL,
				    "the Tester has no files check: nothing can be proven "
				    "without knowing whether the patch changes the test "
				    "harness");
	if ((rc = t->files_check(t->files_check_ud, v->diff, strlen(v->diff), &f)))
		return rc;
	v->kinds = f.kinds;
	*tests = f.tests;
	f.kinds = f.tests = NULL;
	if (f.harness_reason && !t->allow_harness) {
		v->reason = f.harness_reason;
		f.harness_reason = NULL;
		v->feedback = tools_asprintf(
		    "Tester: REJECTED - %s\n\nA patch that changes how the tests are collected, "
		    "configured, started or reported cannot be proven by those tests. Undo the "
		    "change to these files in the workspace (restore or delete them): fix the "
		    "code, "
		    "and put the reproduction test in a test file.\n%s",
		    v->reason, f.harness_list ? f.harness_list : "");
		rc = v->feedback ? 0 : AP_ENOMEM;
	} else if (f.harness_reason) {
		v->harness = true;
		v->harness_list = f.harness_list;
		f.harness_list = NULL;
	}
	free(f.harness_reason);
	free(f.harness_list);
	free(f.kinds);
	free(f.tests);
	return rc;
}

/* The diff without the sections of the given paths (one per line): the code change alone,
 * for the suite run, which runs the base's tests. Sections are matched by their exact header
 * (`diff --git a/P b/P`), as diff_section() finds them; a rename's section is kept. */
static char *diff_without(const char *diff, const char *paths)
{
	ap_buf b = AP_BUF_INIT(DIFF_CAP + 1);
	const char *p = diff, *next;
	char *out = NULL;

	while (p && *p) {
		bool drop = false;

		next = strstr(p + 1, "\ndiff --git ");
		next = next ? next + 1 : NULL;
		for (const char *q = paths; q && *q && !drop;) {
			const char *eol = strchr(q, '\n');
			size_t n = eol ? (size_t)(eol - q) : strlen(q);
			char *hdr =
			    n ? tools_asprintf("diff --git a/%.*s b/%.*s\n", (int)n, q, (int)n, q)
			      : NULL;

			drop = hdr && strncmp(p, hdr, strlen(hdr)) == 0;
			free(hdr);
			q = eol ? eol + 1 : NULL;
		}
		if (!drop)
			ap_buf_add(&b, p, next ? (size_t)(next - p) : strlen(p));
		p = next;
	}
	if (ap_buf_adds(&b, "") == 0)
		out = strdup(ap_buf_str(&b));
	ap_buf_release(&b);
	return out;
}

/* The diff itself, before anything runs: fetched and in size, not empty, allowed by the
 * host's policy, its files told apart (*tests: the test files it adds), within the line
 * limit, naming the reproduction test and more than it. A refusal is v->reason. */
static int check_diff(tester *t, tester_verdict *v, const char *test_path, char **tests)
{
	bool too_big = false;
	int64_t changed;
	int rc;

	if ((rc = fetch_diff(t, v, &too_big)))
		return rc;
	if (too_big)
		return reject(v, "the diff is larger than 1 MiB: keep the change small", "git diff",
			      WORKSPACE, NULL, NULL);
	if (!*v->diff)
		return reject(v, "the workspace has no changes", "git diff", WORKSPACE, NULL, NULL);
	/* The host's policy on the bytes just fetched, before anything is tested. */
	if ((rc = policy_check(t, v)) || v->reason)
		return rc;
	if ((rc = files_check(t, v, tests)) || v->reason)
		return rc;
	changed = tester_diff_changed_lines(v->diff);
	if (t->max_diff_lines > 0 && changed > t->max_diff_lines)
		return reject_fmt(v, "git diff", WORKSPACE, NULL, NULL,
				  "the diff adds or removes %lld lines (limit %lld): make the "
				  "smallest change that fixes the issue and remove unrelated "
				  "files and edits (changed files:\n%s)",
				  (long long)changed, (long long)t->max_diff_lines,
				  v->files_changed);
	if (!has_line(v->files_changed, test_path))
		return reject(v,
			      "the reproduction test is not a new or changed file in the workspace "
			      "(test_path must name the test you wrote)",
			      "git diff --name-only", WORKSPACE, NULL, NULL);
	if (!changes_besides(v->files_changed, test_path))
		return reject(v, "only the reproduction test changed: the fix itself is missing",
			      "git diff --name-only", WORKSPACE, NULL, NULL);
	return 0;
}

/* The suite on the unchanged code (run once, or kept): a suite that cannot run there is no
 * patch's to fix. */
static int check_baseline(tester *t, tester_verdict *v)
{
	char *ef = NULL;
	int rc = tester_baseline(t, &ef, NULL);

	if (rc == 0 && ef)
		rc = reject(v, ef, t->test_cmd, PRISTINE, NULL, NULL);
	free(ef);
	return rc;
}

/* 1. The repro test must fail on the pristine code: a fresh pristine tree with only the
 * test's own part of the diff applied (reused when neither the test nor the command changed
 * since the last round: host-held results of a run nothing else touched). *kind: how it
 * failed. */
static int repro_on_pristine(struct lane *l, const tool_finish *fin, tester_verdict *v,
			     const char *test_path, enum repro_kind *kind)
{
	tester *t = l->t;
	char *section = diff_section(v->diff, test_path), *key = NULL, *why = NULL;
	char *detail = NULL;
	enum run_stop stop = RUN_RAN;
	int rc = 0;

	if (!section)
		return reject(v,
			      "the reproduction test's change cannot be told apart in the diff (a "
			      "rename or a mode change): write it as a new or edited file",
			      "git diff", WORKSPACE, NULL, NULL);
	if (!(key = tools_asprintf("%s\n%s", fin->test_command, section))) {
		rc = AP_ENOMEM;
		goto out;
	}
	if (!t->repro_key || strcmp(key, t->repro_key) != 0) {
		free(t->repro_key);
		t->repro_key = NULL;
		run_out_release(&t->prepro);
		if ((rc = fresh_run(l, "pristine", section, fin->test_command, t->repro_s,
				    "repro_timeout", &t->prepro, &stop, &why)))
			goto out;
		if (why) {
			rc = reject(v, why, stop == RUN_NO_APPLY ? "git apply" : t->setup_cmd,
				    PRISTINE "/repo", NULL, NULL);
			goto out;
		}
		t->repro_key = key;
		key = NULL;
	}
	if ((rc = judge_pristine(t, &t->prepro, kind, &why, &detail)))
		goto out;
	if (*kind == REPRO_REJECT) {
		rc = reject(v, why, fin->test_command, PRISTINE "/repo", &t->prepro, detail);
		goto out;
	}
	if ((rc = check_named(fin, test_path, *kind, &t->prepro, false, &why)) == 0 && why)
		rc = reject(v, why, fin->test_command, PRISTINE "/repo", &t->prepro, NULL);
out:
	free(section);
	free(key);
	free(why);
	free(detail);
	return rc;
}

/* 2. ... and pass on the patched code: the exact bytes applied to a fresh copy, in a box of
 * its own, then setup. */
static int repro_on_patched(struct lane *l, const tool_finish *fin, tester_verdict *v,
			    const char *test_path, enum repro_kind kind, struct run_out *post)
{
	tester *t = l->t;
	enum run_stop stop = RUN_RAN;
	char *why = NULL, *detail = NULL;
	int rc;

	if ((rc = fresh_run(l, "patched", v->diff, fin->test_command, t->repro_s, "repro_timeout",
			    post, &stop, &why)))
		goto out;
	if (why) {
		rc = reject(v, why, stop == RUN_NO_APPLY ? "git apply" : t->setup_cmd,
			    PATCHED "/repo", NULL, NULL);
		goto out;
	}
	if ((rc = judge_patched(t, kind, &t->prepro, post, &why, &detail)))
		goto out;
	if (why) {
		rc = reject(v, why, fin->test_command, PATCHED "/repo", post, detail);
		goto out;
	}
	if ((rc = check_named(fin, test_path, kind, post, true, &why)) == 0 && why)
		rc = reject(v, why, fin->test_command, PATCHED "/repo", post, NULL);
out:
	free(why);
	free(detail);
	return rc;
}

/* The patched suite against the pristine one: per-test results name any test that passed
 * before and does not now; without them, only exit statuses, and a pristine suite that
 * already fails is weak evidence (v->weak, when the repository allows it). */
static int compare_suites(tester *t, tester_verdict *v, const struct run_out *suite)
{
	if (t->base.cls == REPORT_RAN) {
		size_t count = 0;
		char *reg;
		int rc;

		if (suite->cls != REPORT_RAN)
			return reject(
			    v,
			    "the test suite gave per-test results on the pristine code but "
			    "none on the patched code: the evidence is missing",
			    t->test_cmd, PATCHED "/repo", suite, NULL);
		reg = tester_regressions(&t->base.rep, &suite->rep, MAX_NAMED, &count);
		if (!reg)
			return 0;
		rc = reject_fmt(v, t->test_cmd, PATCHED "/repo", suite, NULL,
				"the patch breaks %zu test%s that passed before:\n%s", count,
				count == 1 ? "" : "s", reg);
		free(reg);
		return rc;
	}
	if (t->base.exit_code == 0 && suite->exit_code != 0)
		return reject_fmt(
		    v, t->test_cmd, PATCHED "/repo", suite, NULL,
		    "the test suite passed on the pristine code (exit 0) and fails on "
		    "the patched code (exit %d); it gives no per-test results to say "
		    "which test",
		    suite->exit_code);
	if (t->base.exit_code != 0) {
		if (!t->allow_weak)
			return reject(
			    v,
			    "weak evidence: the test suite fails on the pristine code and "
			    "gives no per-test results, so a regression cannot be told "
			    "from the failures already there",
			    t->test_cmd, PATCHED "/repo", suite, NULL);
		v->weak = true;
	}
	return 0;
}

/* 3. No test that passed on pristine may fail, error, skip or disappear on patched: the
 * suite in another fresh box and tree, so the repro run above cannot have touched it, and
 * without the test files the patch adds (tests), so what a new test does in-process cannot
 * hide a regression. (A test file the patch changes runs as changed: it may change on
 * purpose; the PR names it a changed test.) */
static int suite_on_patched(struct lane *l, tester_verdict *v, const char *tests,
			    struct run_out *suite)
{
	tester *t = l->t;
	enum run_stop stop = RUN_RAN;
	char *code_diff = diff_without(v->diff, tests), *why = NULL;
	int rc = 0;

	if (!code_diff)
		return AP_ENOMEM;
	if (!*code_diff) {
		rc = reject(v, "the patch changes only tests: the fix itself is missing",
			    "git diff", WORKSPACE, NULL, NULL);
		goto out;
	}
	if ((rc = fresh_run(l, "patched", code_diff, t->test_cmd, t->suite_s, "suite_timeout",
			    suite, &stop, &why)))
		goto out;
	if (why) { /* it applied and set up a moment ago: the box or the setup is at fault */
		rc = reject(v, why, stop == RUN_NO_APPLY ? "git apply" : t->setup_cmd,
			    PATCHED "/repo", NULL, NULL);
		goto out;
	}
	if (suite->problem || !report_class_ran(suite->cls)) {
		char *cls = describe_class(suite);

		rc =
		    cls ? reject_fmt(v, t->test_cmd, PATCHED "/repo", suite, NULL,
				     "the test suite did not complete on the patched code: %s", cls)
			: AP_ENOMEM;
		free(cls);
		goto out;
	}
	rc = compare_suites(t, v, suite);
out:
	free(code_diff);
	free(why);
	return rc;
}

/* The verdict into the trajectory. */
static void log_verdict(tester *t, const tester_verdict *v)
{
	cJSON *o;

	if (!t->traj || !v->reason || !(o = cJSON_CreateObject()))
		return;
	cJSON_AddBoolToObject(o, "proven", v->proven);
	cJSON_AddBoolToObject(o, "weak", v->weak);
	cJSON_AddBoolToObject(o, "harness", v->harness);
	cJSON_AddStringToObject(o, "reason", v->reason);
	if (v->kinds)
		cJSON_AddStringToObject(o, "file_kinds", v->kinds);
	if (v->files_changed)
		cJSON_AddStringToObject(o, "files_changed", v->files_changed);
	traj_event(t->traj, "verdict", o);
}

/* ---- a round's runs, side by side ------------------------------------------------------ */

/* The work of one lane in a round, with a verdict of its own (reason, feedback, weak; its diff
 * and files_changed are the round's, borrowed) and its answer. */
struct round_job {
	struct lane lane;
	tester_verdict v;
	int (*fn)(struct round_job *j);
	const tool_finish *fin;
	const char *test_path, *tests;
	enum repro_kind kind;
	struct run_out *out; /* the patched repro run, or the suite run */
	int rc;
	char msg[AP_ERROR_MSG_MAX]; /* the error of rc (a thread's message is its own) */
	bool done;		    /* under round.lock */
	struct round *round;
};

struct round {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct round_job job[2]; /* [0] the repro lane, [1] the suite lane */
};

/* Lane 1: the repro must fail on pristine, then pass on patched. */
static int repro_job(struct round_job *j)
{
	int rc = repro_on_pristine(&j->lane, j->fin, &j->v, j->test_path, &j->kind);

	if (rc || j->v.reason)
		return rc;
	return repro_on_patched(&j->lane, j->fin, &j->v, j->test_path, j->kind, j->out);
}

/* Lane 2: no test that passed on pristine may stop passing on patched. */
static int suite_job(struct round_job *j)
{
	return suite_on_patched(&j->lane, &j->v, j->tests, j->out);
}

static void job_run(struct round_job *j)
{
	j->rc = j->fn(j);
	if (j->rc)
		snprintf(j->msg, sizeof(j->msg), "%s", ap_error_last()); /* same size: never cut */
}

/* The job has its answer and it decides the verdict: a rejection or an error. */
static bool job_decides(const struct round_job *j)
{
	return j->done && (j->rc || j->v.reason);
}

static void *job_main(void *arg)
{
	struct round_job *j = arg;

	job_run(j);
	pthread_mutex_lock(&j->round->lock);
	j->done = true;
	pthread_cond_signal(&j->round->cond);
	pthread_mutex_unlock(&j->round->lock);
	return NULL;
}

/* Wait for the started jobs; meanwhile the user's cancel reaches both lanes, and once the
 * repro lane decides the verdict the suite lane is stopped (its answer cannot count). */
static void wait_jobs(tester *t, struct round *r, const bool started[2])
{
	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct timespec ts;
		bool all = true;

		for (int i = 0; i < 2; i++)
			all = all && (!started[i] || r->job[i].done);
		if (all)
			break;
		if (t->cancel && *t->cancel)
			r->job[0].lane.stop = r->job[1].lane.stop = 1;
		if (job_decides(&r->job[0]))
			r->job[1].lane.stop = 1;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 100 * 1000000L; /* the user's cancel is polled, as sbx_exec does */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
}

/* Run the round's two jobs: side by side, each lane in a thread of its own, when
 * t->side_by_side; else (or when a thread cannot start) one after the other in this thread,
 * the suite only when the repro did not decide. Every box is the lane's own either way. */
static void run_lanes(tester *t, struct round *r)
{
	pthread_condattr_t ca;
	pthread_t th[2];
	bool started[2] = {false, false};

	for (int i = 0; i < 2; i++) {
		lane_init(&r->job[i].lane, t, i + 1, t->side_by_side);
		r->job[i].round = r;
	}
	if (t->side_by_side) {
		pthread_mutex_init(&r->lock, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&r->cond, &ca);
		pthread_condattr_destroy(&ca);
		for (int i = 0; i < 2; i++)
			started[i] = pthread_create(&th[i], NULL, job_main, &r->job[i]) == 0;
		wait_jobs(t, r, started);
		for (int i = 0; i < 2; i++)
			if (started[i])
				pthread_join(th[i], NULL);
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
	}
	for (int i = 0; i < 2; i++) {
		if (started[i] || (i == 1 && job_decides(&r->job[0])))
			continue;
		r->job[i].lane.cancel = t->cancel; /* this thread: nobody else sets its stop */
		job_run(&r->job[i]);
		r->job[i].done = true;
	}
}

/* The round's verdict from both jobs, in the order of the checks (repro on pristine, repro on
 * patched, suite), exactly as if they had run one after the other: the first error or
 * rejection decides; the suite lane counts only when the repro lane passed, and then its
 * events are written after the repro lane's (a fixed order, whatever the timing). */
static int round_verdict(struct round *r, tester_verdict *v)
{
	struct round_job *a = &r->job[0], *b = &r->job[1], *by = NULL;
	int rc = 0;

	lane_flush(&a->lane, true);
	lane_flush(&b->lane, !job_decides(a));
	if (a->rc)
		rc = ap_error_set(a->rc, "%s", a->msg);
	else if (a->v.reason)
		by = a;
	else if (b->rc)
		rc = ap_error_set(b->rc, "%s", b->msg);
	else if (b->v.reason)
		by = b;
	else
		v->weak = b->v.weak;
	if (by) {
		v->proven = false;
		v->reason = by->v.reason;
		v->feedback = by->v.feedback;
		by->v.reason = by->v.feedback = NULL;
	}
	for (int i = 0; i < 2; i++) {
		r->job[i].v.diff = r->job[i].v.files_changed = NULL; /* borrowed */
		tester_verdict_release(&r->job[i].v);
	}
	return rc;
}

int tester_check(tester *t, const tool_finish *fin, tester_verdict *v)
{
	struct run_out post = {0}, suite = {0};
	const char *test_path = norm_path(fin->test_path);
	struct round r;
	char *tests = NULL;
	int rc;

	memset(v, 0, sizeof(*v));
	memset(&r, 0, sizeof(r));
	/* Each step either passes (0, no reason), refuses (0, v->reason) or fails. */
	if ((rc = check_diff(t, v, test_path, &tests)) || v->reason)
		goto out;
	if ((rc = check_baseline(t, v)) || v->reason)
		goto out;
	/* The three runs need only the diff and the baseline: the repro lane (pristine, then
	 * patched) and the suite lane run at once, each run in a box of its own. */
	r.job[0] = (struct round_job){.fn = repro_job,
				      .fin = fin,
				      .test_path = test_path,
				      .kind = REPRO_REJECT,
				      .out = &post};
	r.job[1] = (struct round_job){.fn = suite_job, .tests = tests, .out = &suite};
	for (int i = 0; i < 2; i++) {
		r.job[i].v.diff = v->diff;
		r.job[i].v.files_changed = v->files_changed;
	}
	run_lanes(t, &r);
	if ((rc = round_verdict(&r, v)) || v->reason)
		goto out;
	v->proven = true;
	v->reason = v->harness ? strdup("every check passed, but the patch changes the test "
					"harness (allow_harness_changes): not proven")
			       : strdup("proven");
	v->evidence =
	    evidence(t, fin, test_path, r.job[0].kind, &t->prepro, &post, &suite, v->weak);
	if (!v->reason || !v->evidence)
		rc = AP_ENOMEM;
out:
	log_verdict(t, v);
	free(tests);
	run_out_release(&post);
	run_out_release(&suite);
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
	free(v->harness_list);
	free(v->kinds);
	memset(v, 0, sizeof(*v));
}

/* ---- hang issues -------------------------------------------------------------------------- */

static bool has_word(const char *text, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = text; p && *p; p++) {
		if (strncasecmp(p, w, n) != 0)
			continue;
		bool left = p == text || !isalnum((unsigned char)p[-1]);
		bool right = !isalnum((unsigned char)p[n]);

		if (left && right)
			return true;
	}
	return false;
}

bool tester_issue_about_hang(const char *title, const char *body)
{
	static const char *const words[] = {"hang",
					    "hangs",
					    "hung",
					    "hanging",
					    "deadlock",
					    "deadlocks",
					    "deadlocked",
					    "freeze",
					    "freezes",
					    "frozen",
					    "infinite loop",
					    "endless loop",
					    "never returns",
					    "never terminates",
					    "never finishes",
					    "never completes",
					    "stuck",
					    "livelock",
					    "times out",
					    "timed out",
					    NULL};

	for (const char *const *w = words; *w; w++)
		if (has_word(title, *w) || has_word(body, *w))
			return true;
	return false;
}

/* ---- life cycle ------------------------------------------------------------------------- */

void tester_set_max_diff_lines(tester *t, int64_t max)
{
	t->max_diff_lines = max;
}

void tester_set_cancel(tester *t, const volatile sig_atomic_t *cancel)
{
	t->cancel = cancel;
}

void tester_set_setup(tester *t, const char *setup_cmd)
{
	t->setup_cmd = setup_cmd;
}

void tester_set_limits(tester *t, int setup_s, int repro_s, int suite_s)
{
	if (setup_s > 0)
		t->setup_s = setup_s;
	if (repro_s > 0)
		t->repro_s = repro_s;
	if (suite_s > 0)
		t->suite_s = suite_s;
}

void tester_set_weak_evidence(tester *t, bool allow)
{
	t->allow_weak = allow;
}

void tester_set_hang_issue(tester *t, bool about_hang)
{
	t->hang_issue = about_hang;
}

void tester_set_side_by_side(tester *t, bool on)
{
	t->side_by_side = on;
}

void tester_set_files_check(tester *t, tester_files_fn fn, void *ud, bool allow_harness)
{
	t->files_check = fn;
	t->files_check_ud = ud;
	t->allow_harness = allow_harness;
}

void tester_set_patch_check(tester *t, tester_patch_check_fn fn, void *ud)
{
	t->patch_check = fn;
	t->patch_check_ud = ud;
}

int tester_new(tester **out, sbx_box *work, tester_box_fn make_box, void *make_box_ud,
	       const char *test_cmd, traj *tr)
{
	tester *t;

	*out = NULL;
	if (!work || !make_box || !test_cmd)
		return ap_error_set(AP_EINVAL, "the Tester needs the Builder's box (for the diff), "
					       "a maker of its own boxes and a test command");
	if (!(t = calloc(1, sizeof(*t))))
		return AP_ENOMEM;
	t->box = work;
	t->make_box = make_box;
	t->make_box_ud = make_box_ud;
	t->test_cmd = test_cmd;
	t->traj = tr;
	t->max_diff_lines = 500;
	t->setup_s = TESTER_SETUP_TIMEOUT;
	t->repro_s = TESTER_REPRO_TIMEOUT;
	t->suite_s = TESTER_SUITE_TIMEOUT;
	t->side_by_side =
	    sysconf(_SC_NPROCESSORS_ONLN) >= 2; /* two runs at once when cores allow */
	*out = t;
	return 0;
}

void tester_free(tester *t)
{
	if (!t)
		return;
	run_out_release(&t->base);
	run_out_release(&t->prepro);
	free(t->env_failure);
	free(t->baseline_summary);
	free(t->baseline_miss);
	free(t->repro_key);
	free(t);
}
