/* SPDX-License-Identifier: MIT */
/* agents/fix_cmd.c - `autopatch fix`: the whole Planner -> Builder -> Tester run on a local git
 * repository, without GitHub. Prints one line per step, then the diff and the Tester's
 * evidence; exits 0 only for a proven fix. */
#include "cli/commands.h"
#include "common/buf.h"
#include "common/err.h"
#include "agents/fixer.h"
#include "common/redact.h"
#include "sandbox/sandbox.h"
#include "agents/testcmd.h"
#include "job/repo_config.h"

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ISSUE_CAP (256u << 10)

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static bool should_stop(void *ud)
{
	(void)ud;
	return stop_requested != 0;
}

static void progress(void *ud, const char *stage, const char *line)
{
	(void)ud;
	printf("[%s] %s\n", stage, line);
	fflush(stdout);
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: autopatch fix --repo DIR (--issue-file F | --issue TEXT) [--out patch.diff]\n"
	    "                     [--test CMD] [--setup CMD] [--max-iterations N]\n"
	    "                     [--trajectory FILE]\n");
}

static int read_file(const char *path, ap_buf *b)
{
	char chunk[4096];
	size_t n;
	FILE *f = fopen(path, "r");
	int rc = 0;
	if (!f)
		return ap_error_set(AP_EIO, "cannot read %s", path);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if ((rc = ap_buf_add(b, chunk, n)) != 0) {
			rc = ap_error_set(rc, "%s is larger than %u bytes", path, ISSUE_CAP);
			break;
		}
	fclose(f);
	return rc;
}

/* Split the issue text: the first non-empty line (without leading '#') is the title. */
static void split_issue(char *text, const char **title, const char **body)
{
	while (*text == '\n' || *text == '\r' || *text == ' ')
		text++;
	char *nl = strchr(text, '\n');
	if (nl) {
		*nl = '\0';
		if (nl > text && nl[-1] == '\r')
			nl[-1] = '\0';
		*body = nl + 1;
	} else {
		*body = "";
	}
	while (*text == '#' || *text == ' ')
		text++;
	*title = text;
}

static int write_out(const char *path, const char *diff)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return ap_error_set(AP_EIO, "cannot write %s", path);
	int bad = fputs(diff, f) < 0;
	bad |= fclose(f) != 0;
	return bad ? ap_error_set(AP_EIO, "cannot write %s", path) : 0;
}

/* The Tester's limits from .github/autopatch.yml (deadlines, the weak-evidence opt-in), and a
 * line saying which came from there. *rcfg keeps the strings alive. */
static int load_tester_limits(const char *repo, fixer_opts *fo, repo_config **rcfg)
{
	repo_config *c = NULL;
	int rc = repo_config_load(&c, repo);

	*rcfg = NULL;
	if (rc)
		return rc;
	fo->setup_timeout_s = c->setup_timeout;
	fo->repro_timeout_s = c->repro_timeout;
	fo->suite_timeout_s = c->suite_timeout;
	fo->allow_weak_evidence = c->allow_weak_evidence;
	if (c->setup_timeout || c->repro_timeout || c->suite_timeout || c->allow_weak_evidence) {
		printf("[preparing] from %s:", REPO_CONFIG_PATH);
		if (c->setup_timeout)
			printf(" setup_timeout %d s", c->setup_timeout);
		if (c->repro_timeout)
			printf(" repro_timeout %d s", c->repro_timeout);
		if (c->suite_timeout)
			printf(" suite_timeout %d s", c->suite_timeout);
		if (c->allow_weak_evidence)
			printf(" allow_weak_evidence");
		printf("\n");
	}
	*rcfg = c;
	return 0;
}

int fix_main(int argc, char **argv, ap_config *cfg)
{
	static const struct option longopts[] = {
	    {"repo", required_argument, NULL, 'r'},
	    {"issue-file", required_argument, NULL, 'f'},
	    {"issue", required_argument, NULL, 'i'},
	    {"out", required_argument, NULL, 'o'},
	    {"test", required_argument, NULL, 't'},
	    {"setup", required_argument, NULL, 's'},
	    {"max-iterations", required_argument, NULL, 'm'},
	    {"trajectory", required_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *repo = NULL, *issue_file = NULL, *issue_arg = NULL, *out_path = NULL;
	const char *test_arg = NULL, *setup_arg = NULL, *traj_path = NULL;
	int max_iter = 0, c, code = 2, rc;
	ap_buf issue = AP_BUF_INIT(ISSUE_CAP);
	char *test_cmd = NULL, repo_abs[PATH_MAX], gitdir[PATH_MAX + 8];
	sbx_engine *engine = NULL;
	sbx_box *box = NULL;
	fixer_result res = FIXER_RESULT_INIT;
	repo_config *rcfg = NULL;
	struct stat st;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			repo = optarg;
			break;
		case 'f':
			issue_file = optarg;
			break;
		case 'i':
			issue_arg = optarg;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 't':
			test_arg = optarg;
			break;
		case 's':
			setup_arg = optarg;
			break;
		case 'j':
			traj_path = optarg;
			break;
		case 'm':
			max_iter = atoi(optarg);
			if (max_iter < 1 || max_iter > 20) {
				fprintf(stderr,
					"autopatch fix: --max-iterations must be 1 to 20\n");
				return 2;
			}
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (!repo || (!issue_file == !issue_arg) || optind != argc) {
		usage();
		return 2;
	}
	if (!realpath(repo, repo_abs) || stat(repo_abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "autopatch fix: %s is not a directory\n", repo);
		return 2;
	}
	snprintf(gitdir, sizeof(gitdir), "%s/.git", repo_abs);
	if (stat(gitdir, &st) != 0) {
		fprintf(stderr,
			"autopatch fix: %s is not a git repository (run git init and "
			"commit first: the Tester diffs against it)\n",
			repo_abs);
		return 2;
	}
	rc = issue_file ? read_file(issue_file, &issue) : ap_buf_adds(&issue, issue_arg);
	if (rc || issue.len == 0) {
		fprintf(stderr, "autopatch fix: %s\n", rc ? ap_error_last() : "the issue is empty");
		goto out;
	}
	if (test_arg) {
		test_cmd = strdup(test_arg);
	} else if (testcmd_detect(repo_abs, &test_cmd) != 0) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		goto out;
	}
	cfg_register_secrets(cfg);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	code = 1;
	printf("[preparing] repository %s, test command: %s\n", repo_abs, test_cmd);
	fflush(stdout);
	if ((rc = sbx_engine_new(&engine, cfg))) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		code = rc == AP_EINVAL ? 2 : 1;
		goto out;
	}
	sbx_spec spec = {.version = SBX_SPEC_VERSION};
	char label[64];
	snprintf(label, sizeof(label), "fix-%ld", (long)getpid());
	spec.repo_dir = repo_abs;
	spec.job_label = label;
	if ((rc = sbx_create(engine, &spec, &box)) || (rc = sbx_prepare(box))) {
		fprintf(stderr, "autopatch fix: cannot prepare the sandbox: %s\n", ap_error_last());
		goto out;
	}
	printf("[preparing] sandbox ready\n");
	fflush(stdout);

	const char *title, *body;
	split_issue(issue.data, &title, &body);
	fixer_opts fo = FIXER_OPTS_INIT;
	fo.cfg = cfg;
	fo.box = box;
	fo.issue_title = title;
	fo.issue_body = body;
	fo.test_cmd = test_cmd;
	fo.setup_cmd = setup_arg;
	fo.max_iterations = max_iter;
	fo.trajectory_path = traj_path;
	fo.progress = progress;
	fo.should_stop = should_stop;
	if ((rc = load_tester_limits(repo_abs, &fo, &rcfg))) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		code = 2;
		goto out;
	}
	rc = fixer_run(&fo, &res);

	if (traj_path)
		printf("trajectory: %s\n", traj_path);
	printf("\nmodel: %s, %d model calls, %lld tokens in, %lld tokens out, %d round(s)\n",
	       res.model ? res.model : "?", res.model_calls, (long long)res.tokens_in,
	       (long long)res.tokens_out, res.iterations);
	if (rc == 0 && res.proven) {
		if (res.weak_evidence)
			printf("\nWEAK EVIDENCE: the suite gives no per-test results and fails on "
			       "the unchanged code; accepted because of allow_weak_evidence\n");
		printf("\n=== diff ===\n%s", res.diff ? res.diff : "");
		printf("\n=== Tester evidence ===\n%s\n", res.evidence ? res.evidence : "");
		printf("summary: %s\n", res.summary ? res.summary : "");
		printf("PROVEN: the reproduction test %s fails before the patch and passes after "
		       "it; no test that passed before fails.\n",
		       res.repro_test ? res.repro_test : "");
		if (out_path && write_out(out_path, res.diff ? res.diff : "") != 0) {
			fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
			goto out;
		}
		if (out_path)
			printf("patch written to %s\n", out_path);
		code = 0;
	} else if (rc == 0 && res.env_failure) {
		/* No patch can fix this: the environment must change (image, setup, test). */
		const char *f = res.failure ? res.failure : "";
		char *why;

		if (strncmp(f, "environment failure: ", 21) == 0)
			f += 21;
		why = redact_str(f);
		printf("ENVIRONMENT FAILURE (no model call was made): %s\n", why ? why : "");
		free(why);
		code = 3;
	} else {
		char *why = redact_str(res.failure ? res.failure : ap_error_last());
		printf("NOT PROVEN: %s\n", why ? why : "");
		free(why);
		code = rc == AP_ECANCELLED ? 130 : 1;
	}
out:
	fflush(stdout);
	if (box && sbx_destroy(box) != 0)
		fprintf(stderr, "autopatch fix: removing the sandbox failed: %s\n",
			ap_error_last());
	sbx_engine_free(engine);
	fixer_result_release(&res);
	repo_config_free(rcfg);
	free(test_cmd);
	ap_buf_release(&issue);
	return code;
}
