/* SPDX-License-Identifier: MIT */
/* cli/fix.c - `autopatch fix`: the whole Planner -> Builder -> Tester run on a local git
 * repository, without GitHub. Reads the repository's .github/autopatch.yml with the
 * pipeline's loader (job/repo_config.h), so fix and serve run a repository the same way;
 * command-line flags win over the file. Prints one line per step, then the diff and the
 * Tester's evidence; exits 0 only for a proven fix. */
#include "cli/commands.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "agents/fixer.h"
#include "common/redact.h"
#include "job/environment.h"
#include "job/patch_policy.h"
#include "job/repo_config.h"
#include "job/tester_box.h"
#include "sandbox/sandbox.h"

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

static void env_note(void *ud, const char *msg)
{
	(void)ud;
	printf("[preparing] %s\n", msg);
	fflush(stdout);
}

/* A first-use image build's progress line. */
static void env_build_live(void *ud, const char *msg)
{
	(void)ud;
	printf("[preparing] %s\n", msg);
	fflush(stdout);
}

/* The live setup line: printed when it changes. */
static void env_live(void *ud, const char *msg)
{
	static char last[600];

	(void)ud;
	if (strcmp(last, msg) == 0)
		return;
	snprintf(last, sizeof(last), "%s", msg);
	printf("[setup] %s\n", msg);
	fflush(stdout);
}

/* Connections the egress proxy refused, with the line to add. */
static void print_blocked(sbx_box *box)
{
	char *rep = NULL;

	if (!box || env_blocked_report(box, &rep) != 0 || !rep)
		return;
	printf("\nBLOCKED network connections (the egress proxy refused them):\n");
	for (char *line = strtok(rep, "\n"); line; line = strtok(NULL, "\n"))
		printf("  - %s\n", line);
	free(rep);
}

/* An environment problem found before the fixer (image, toolchain, setup): no patch can fix
 * it, so it is reported as one (exit 3, like the Tester's baseline) with what to change.
 * Returns the exit code. */
static int env_failure_exit(int rc, const char *what)
{
	const char *f = what && *what ? what : ap_error_last();
	char *why;

	if (rc == AP_ECANCELLED) {
		printf("NOT PROVEN: cancelled\n");
		return 130;
	}
	if (strncmp(f, "environment failure: ", 21) == 0)
		f += 21;
	why = redact_str(f);
	printf("ENVIRONMENT FAILURE (no model call was made): %s\n", why ? why : "");
	free(why);
	return 3;
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: autopatch fix --repo DIR (--issue-file F | --issue TEXT) [--out patch.diff]\n"
	    "                     [--test CMD] [--setup CMD] [--max-iterations N]\n"
	    "                     [--trajectory FILE]\n");
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

/* Which settings of the file apply, in the file's documented order, for the line
 * "settings from .github/autopatch.yml: ...". A flag that overrides a setting says so. */
static void print_settings(const repo_config *rc, const char *test_arg, const char *setup_arg,
			   int max_iter)
{
	ap_buf b = AP_BUF_INIT(1024);

	if (rc->image)
		ap_buf_adds(&b, ", image");
	if (rc->setup)
		ap_buf_adds(&b, setup_arg ? ", setup (overridden by --setup)" : ", setup");
	if (rc->test && !rc->test_why)
		ap_buf_adds(&b, test_arg ? ", test (overridden by --test)" : ", test");
	if (rc->max_iterations)
		ap_buf_adds(&b, max_iter ? ", max_iterations (overridden by --max-iterations)"
					 : ", max_iterations");
	if (rc->allow[0] || rc->deny[0])
		ap_buf_adds(&b, ", paths");
	if (rc->network[0])
		ap_buf_adds(&b, ", network");
	if (rc->agent_network)
		ap_buf_adds(&b, ", agent_network");
	if (rc->cache_key[0])
		ap_buf_adds(&b, ", cache_key");
	printf("settings from %s: %s\n", REPO_CONFIG_PATH, b.len ? b.data + 2 : "none");
	ap_buf_release(&b);
	if (rc->setup_timeout || rc->repro_timeout || rc->suite_timeout ||
	    rc->allow_weak_evidence) {
		printf("[preparing] from %s:", REPO_CONFIG_PATH);
		if (rc->setup_timeout)
			printf(" setup_timeout %d s", rc->setup_timeout);
		if (rc->repro_timeout)
			printf(" repro_timeout %d s", rc->repro_timeout);
		if (rc->suite_timeout)
			printf(" suite_timeout %d s", rc->suite_timeout);
		if (rc->allow_weak_evidence)
			printf(" allow_weak_evidence");
		printf("\n");
	}
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
	const char *test_cmd;
	char repo_abs[PATH_MAX], gitdir[PATH_MAX + 8];
	repo_config *rcfg = NULL;
	patch_policy policy;
	sbx_engine *engine = NULL;
	sbx_box *box = NULL;
	env_snapshot *snapshot = NULL;
	fixer_result res = FIXER_RESULT_INIT;
	struct stat st;
	env_choice choice;
	char line[700];
	const char *const *steps;
	const char *one_step[2] = {NULL, NULL};

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
			one_step[0] = optarg;
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
	rc = issue_file ? fs_read_file(&issue, issue_file, 0) : ap_buf_adds(&issue, issue_arg);
	if (rc || issue.len == 0) {
		fprintf(stderr, "autopatch fix: %s\n", rc ? ap_error_last() : "the issue is empty");
		goto out;
	}
	/* The same loader as the pipeline: an invalid file is a usage error (exit 2) with the
	 * sentence, quoting the line, that a job would post. */
	if (repo_config_load(&rcfg, repo_abs) != 0) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		goto out;
	}
	if (!test_arg && !rcfg->test) {
		fprintf(stderr, "autopatch fix: %s: pass --test CMD (or set `test:` in %s)\n",
			rcfg->test_source, REPO_CONFIG_PATH);
		goto out;
	}
	if (rcfg->from_file)
		print_settings(rcfg, test_arg, setup_arg, max_iter);
	/* The pipeline's policy, on the bytes, against the repository's HEAD. */
	if (patch_policy_init(&policy, cfg, rcfg, repo_abs) != 0) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		goto out;
	}
	test_cmd = test_arg ? test_arg : rcfg->test;
	if (test_arg)
		printf("test command: %s (from --test)\n", test_cmd);
	else if (rcfg->test_why)
		printf("test command: %s (detected: %s)\n", test_cmd, rcfg->test_why);
	else
		printf("test command: %s (from %s)\n", test_cmd, REPO_CONFIG_PATH);
	cfg_register_secrets(cfg);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	code = 1;
	printf("[preparing] repository %s, test command: %s\n", repo_abs, test_cmd);
	fflush(stdout);
	if ((rc = env_choose_image(&choice, cfg, repo_abs, rcfg->image, REPO_CONFIG_PATH))) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		goto out;
	}
	env_describe_choice(&choice, line, sizeof(line));
	printf("[preparing] %s\n", line);
	fflush(stdout);
	if ((rc = sbx_engine_new(&engine, cfg))) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		code = rc == AP_EINVAL ? 2 : 1;
		goto out;
	}
	/* Environment errors end here, before any box or model call. */
	if ((rc = env_check_image(engine, cfg, &choice, env_note, env_build_live, NULL))) {
		code = rc == AP_ENOTFOUND ? env_failure_exit(rc, NULL) : 1;
		if (code == 1)
			printf("NOT PROVEN: %s\n", ap_error_last());
		goto out;
	}
	if (choice.toolchain[0]) {
		printf("[preparing] toolchain: %s\n", choice.toolchain);
		fflush(stdout);
	}
	sbx_spec spec = {.version = SBX_SPEC_VERSION};
	char label[64];
	snprintf(label, sizeof(label), "fix-%ld", (long)getpid());
	spec.repo_dir = repo_abs;
	spec.job_label = label;
	spec.image = choice.image;
	if (rcfg->network[0]) {
		spec.network = SBX_NET_ALLOWLIST;
		spec.allow = (const char *const *)rcfg->network;
	}
	if ((rc = sbx_create(engine, &spec, &box)) || (rc = sbx_prepare(box))) {
		fprintf(stderr, "autopatch fix: cannot prepare the sandbox: %s\n", ap_error_last());
		goto out;
	}
	printf("[preparing] sandbox ready%s\n",
	       rcfg->network[0] ? " (egress allow-list for setup)" : "");
	fflush(stdout);
	steps = setup_arg ? one_step : (const char *const *)rcfg->setup_steps;
	if ((rc = env_check_tools(box, &choice, steps, test_cmd))) {
		code = rc == AP_ENOTFOUND ? env_failure_exit(rc, NULL) : 1;
		if (code == 1)
			printf("NOT PROVEN: %s\n", ap_error_last());
		goto out;
	}
	env_setup_opts eo = ENV_SETUP_OPTS_INIT;
	env_setup_result er;
	char repo_id[PATH_MAX + 8];
	snprintf(repo_id, sizeof(repo_id), "local:%s", repo_abs);
	eo.cfg = cfg;
	eo.box = box;
	eo.image = &choice;
	eo.repo_id = repo_id;
	eo.repo_dir = repo_abs;
	eo.setup_steps = steps;
	eo.setup_script = setup_arg ? setup_arg : rcfg->setup;
	eo.cache_key_globs = (const char *const *)rcfg->cache_key;
	eo.had_network = rcfg->network[0] != NULL;
	eo.agent_network = rcfg->agent_network;
	eo.timeout_s = rcfg->setup_timeout;
	eo.note = env_note;
	eo.live = env_live;
	if ((rc = env_setup(&eo, &er))) {
		/* The repository's setup failed (or passed its deadline): an environment failure.
		 * An engine error stays an error. */
		if (rc == AP_EINVAL || rc == AP_ETIMEOUT || rc == AP_ECANCELLED) {
			code = env_failure_exit(rc, NULL);
		} else {
			char *why = redact_str(ap_error_last());
			printf("NOT PROVEN: %s\n", why ? why : "setup failed");
			free(why);
		}
		print_blocked(box);
		goto out;
	}

	const char *title, *body;
	split_issue(issue.data, &title, &body);
	fixer_opts fo = FIXER_OPTS_INIT;
	fo.cfg = cfg;
	fo.box = box;
	fo.issue_title = title;
	fo.issue_body = body;
	fo.test_cmd = test_cmd;
	/* Setup ran (or was restored) above; the fixer only prepares other trees from it. */
	fo.setup_cmd = er.have_products ? ENV_PREPARE_TREE_CMD : NULL;
	fo.max_iterations = max_iter ? max_iter : rcfg->max_iterations;
	fo.trajectory_path = traj_path;
	fo.progress = progress;
	fo.should_stop = should_stop;
	fo.patch_check = patch_policy_fixer_check;
	fo.patch_check_ud = &policy;
	/* setup_timeout is env_setup's deadline above, and the one of preparing each tree: */
	fo.setup_timeout_s = rcfg->setup_timeout;
	fo.repro_timeout_s = rcfg->repro_timeout;
	fo.suite_timeout_s = rcfg->suite_timeout;
	fo.allow_weak_evidence = rcfg->allow_weak_evidence;
	/* The Tester runs in fresh boxes of its own, filled from the host-held snapshot of what
	 * setup made (taken now, before any model call). */
	if ((rc = env_snapshot_take(&eo, &er, &snapshot))) {
		fprintf(stderr, "autopatch fix: cannot keep the setup products: %s\n",
			ap_error_last());
		goto out;
	}
	tester_boxes tb = TESTER_BOXES_INIT;
	tb.engine = engine;
	tb.image = choice.image;
	tb.repo_dir = repo_abs;
	tb.job_label = label;
	tb.snapshot = snapshot;
	fo.tester_box = tester_box_make;
	fo.tester_box_ud = &tb;
	/* What each file is, and whether the patch changes the test harness, on the host. */
	policy.test_cmd = test_cmd;
	policy.setup_cmd = setup_arg ? setup_arg : rcfg->setup;
	fo.files_check = patch_policy_fixer_files;
	fo.files_check_ud = &policy;
	fo.allow_harness_changes = rcfg->allow_harness_changes;
	rc = fixer_run(&fo, &res);

	if (traj_path)
		printf("trajectory: %s\n", traj_path);
	print_blocked(box);
	printf("\nmodel: %s, %d model calls, %lld tokens in, %lld tokens out, %d round(s)\n",
	       res.model ? res.model : "?", res.model_calls, (long long)res.tokens_in,
	       (long long)res.tokens_out, res.iterations);
	/* The Tester's hook already judged these bytes; the pipeline checks again before it
	 * applies them, and so does fix before it calls them proven. */
	if (rc == 0 && res.proven &&
	    patch_policy_check(&policy, res.diff ? res.diff : "",
			       res.diff ? strlen(res.diff) : 0) != 0) {
		printf("\n=== diff ===\n%s", res.diff ? res.diff : "");
		printf("REFUSED: %s\n", ap_error_last());
		code = 1;
	} else if (rc == 0 && res.proven && res.harness_changed) {
		/* The checks passed under a harness the patch changed: nothing is proven. The
		 * repository allows publishing it (allow_harness_changes); fix writes it out. */
		printf("\n=== diff ===\n%s", res.diff ? res.diff : "");
		printf("\n=== Tester evidence (under the changed harness) ===\n%s\n",
		       res.evidence ? res.evidence : "");
		printf("\n=== what each file is ===\n%s", res.file_kinds ? res.file_kinds : "");
		printf("\n=== test harness files changed ===\n%s",
		       res.harness_list ? res.harness_list : "");
		printf("NOT PROVEN: the patch changes the test harness (allowed by "
		       "allow_harness_changes); the checks passed under the changed harness.\n");
		if (out_path && write_out(out_path, res.diff ? res.diff : "") == 0)
			printf("patch written to %s\n", out_path);
		code = 1;
	} else if (rc == 0 && res.proven) {
		if (res.weak_evidence)
			printf("\nWEAK EVIDENCE: the suite gives no per-test results and fails on "
			       "the unchanged code; accepted because of allow_weak_evidence\n");
		printf("\n=== diff ===\n%s", res.diff ? res.diff : "");
		printf("\n=== Tester evidence ===\n%s\n", res.evidence ? res.evidence : "");
		printf("\n=== what each file is ===\n%s", res.file_kinds ? res.file_kinds : "");
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
		code = env_failure_exit(0, res.failure ? res.failure : "");
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
	env_snapshot_free(snapshot);
	sbx_engine_free(engine);
	fixer_result_release(&res);
	repo_config_free(rcfg);
	ap_buf_release(&issue);
	return code;
}
