/* SPDX-License-Identifier: MIT */
/* cli/fix.c - `autopatch fix`: the whole Planner -> Builder -> Tester run on a local git
 * repository, without GitHub. Reads the repository's .github/autopatch.yml with the
 * pipeline's loader (job/repo_config.h), so fix and serve run a repository the same way;
 * command-line flags win over the file. Prints one line per step, then the diff and the
 * Tester's evidence; exits 0 only for a proven fix. */
#include "agents/fixer.h"
#include "cli/commands.h"
#include "common/buf.h"
#include "common/err.h"
#include "common/fs.h"
#include "common/redact.h"
#include "job/environment.h"
#include "job/patch_policy.h"
#include "job/repo_config.h"
#include "job/run_config.h"
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

/* One run of `fix`: what the command line gave, and what the steps made (released by
 * fix_release). */
struct fix {
	const char *repo, *issue_file, *issue_arg, *out_path, *traj_path;
	const char *test_arg, *setup_arg;
	int max_iter;
	char repo_abs[PATH_MAX];
	char repo_id[PATH_MAX + 8];
	char label[64];
	ap_buf issue;
	repo_config *rcfg;
	run_config run; /* the repository's settings, overridden by the flags */
	patch_policy policy;
	env_choice choice;
	sbx_engine *engine;
	sbx_box *box;
	env_setup_opts eo;
	env_setup_result er;
	env_snapshot *snapshot;
	tester_boxes tb;
	fixer_opts fo;
	fixer_result res;
};

static void fix_release(struct fix *f)
{
	fflush(stdout);
	tester_boxes_stop(&f->tb); /* before the snapshot it restores from */
	if (f->box && sbx_destroy(f->box) != 0)
		fprintf(stderr, "autopatch fix: removing the sandbox failed: %s\n",
			ap_error_last());
	env_snapshot_free(f->snapshot);
	sbx_engine_free(f->engine);
	fixer_result_release(&f->res);
	repo_config_free(f->rcfg);
	ap_buf_release(&f->issue);
}

/* The checks passed under a harness the patch changed: nothing is proven. The repository
 * allows publishing it (allow_harness_changes); fix writes it out, and exits 1. */
static int report_harness(const struct fix *f)
{
	const fixer_result *res = &f->res;
	const char *diff = res->diff ? res->diff : "";

	printf("\n=== diff ===\n%s", diff);
	printf("\n=== Tester evidence (under the changed harness) ===\n%s\n",
	       res->evidence ? res->evidence : "");
	printf("\n=== what each file is ===\n%s", res->file_kinds ? res->file_kinds : "");
	printf("\n=== test harness files changed ===\n%s",
	       res->harness_list ? res->harness_list : "");
	printf("NOT PROVEN: the patch changes the test harness (allowed by "
	       "allow_harness_changes); the checks passed under the changed harness.\n");
	if (f->out_path && write_out(f->out_path, diff) == 0)
		printf("patch written to %s\n", f->out_path);
	return 1;
}

/* A proven fix: the diff, the evidence, what each file is; exit 0 (1 when --out fails). */
static int report_proven(const struct fix *f)
{
	const fixer_result *res = &f->res;
	const char *diff = res->diff ? res->diff : "";

	if (res->weak_evidence)
		printf("\nWEAK EVIDENCE: the suite gives no per-test results and fails on "
		       "the unchanged code; accepted because of allow_weak_evidence\n");
	printf("\n=== diff ===\n%s", diff);
	printf("\n=== Tester evidence ===\n%s\n", res->evidence ? res->evidence : "");
	printf("\n=== what each file is ===\n%s", res->file_kinds ? res->file_kinds : "");
	printf("summary: %s\n", res->summary ? res->summary : "");
	printf("PROVEN: the reproduction test %s fails before the patch and passes after "
	       "it; no test that passed before fails.\n",
	       res->repro_test ? res->repro_test : "");
	if (f->out_path && write_out(f->out_path, diff) != 0) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		return 1;
	}
	if (f->out_path)
		printf("patch written to %s\n", f->out_path);
	return 0;
}

/* The flags. 0, or the exit code (2: usage; 0 for --help, with *done). */
static int parse_args(struct fix *f, int argc, char **argv, bool *done)
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
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			f->repo = optarg;
			break;
		case 'f':
			f->issue_file = optarg;
			break;
		case 'i':
			f->issue_arg = optarg;
			break;
		case 'o':
			f->out_path = optarg;
			break;
		case 't':
			f->test_arg = optarg;
			break;
		case 's':
			f->setup_arg = optarg;
			break;
		case 'j':
			f->traj_path = optarg;
			break;
		case 'm':
			f->max_iter = atoi(optarg);
			if (f->max_iter < 1 || f->max_iter > 20) {
				fprintf(stderr,
					"autopatch fix: --max-iterations must be 1 to 20\n");
				return 2;
			}
			break;
		case 'h':
			usage();
			*done = true;
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (!f->repo || (!f->issue_file == !f->issue_arg) || optind != argc) {
		usage();
		return 2;
	}
	return 0;
}

/* The repository, the issue, .github/autopatch.yml and the policy; a problem is a usage
 * error (2) with the sentence a job would post. */
static int load_inputs(struct fix *f, ap_config *cfg)
{
	char gitdir[PATH_MAX + 8];
	struct stat st;
	int rc;

	if (!realpath(f->repo, f->repo_abs) || stat(f->repo_abs, &st) != 0 ||
	    !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "autopatch fix: %s is not a directory\n", f->repo);
		return 2;
	}
	if (ap_fmt(gitdir, sizeof(gitdir), "%s/.git", f->repo_abs) != 0 || stat(gitdir, &st) != 0) {
		fprintf(stderr,
			"autopatch fix: %s is not a git repository (run git init and "
			"commit first: the Tester diffs against it)\n",
			f->repo_abs);
		return 2;
	}
	rc = f->issue_file ? fs_read_file(&f->issue, f->issue_file, 0)
			   : ap_buf_adds(&f->issue, f->issue_arg);
	if (rc || f->issue.len == 0) {
		fprintf(stderr, "autopatch fix: %s\n", rc ? ap_error_last() : "the issue is empty");
		return 2;
	}
	/* The same loader as the pipeline. */
	if (repo_config_load(&f->rcfg, f->repo_abs) != 0) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		return 2;
	}
	if (!f->test_arg && !f->rcfg->test) {
		fprintf(stderr, "autopatch fix: %s: pass --test CMD (or set `test:` in %s)\n",
			f->rcfg->test_source, REPO_CONFIG_PATH);
		return 2;
	}
	if (f->rcfg->from_file)
		print_settings(f->rcfg, f->test_arg, f->setup_arg, f->max_iter);
	/* The pipeline's policy, on the bytes, against the repository's HEAD. */
	if (patch_policy_init(&f->policy, cfg, f->rcfg, f->repo_abs) != 0) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		return 2;
	}
	f->run = (run_config)RUN_CONFIG_INIT;
	f->run.cfg = cfg;
	f->run.rc = f->rcfg;
	f->run.choice = &f->choice;
	f->run.repo_dir = f->repo_abs;
	f->run.repo_id = f->repo_id;
	f->run.test_cmd = f->test_arg;
	f->run.setup_cmd = f->setup_arg;
	f->run.max_iterations = f->max_iter;
	/* Fits: repo_abs is under PATH_MAX (realpath), repo_id 8 bytes more. */
	snprintf(f->repo_id, sizeof(f->repo_id), "local:%s", f->repo_abs);
	snprintf(f->label, sizeof(f->label), "fix-%ld", (long)getpid());
	return 0;
}

/* Where the test command came from. */
static void print_test_cmd(const struct fix *f)
{
	const char *cmd = run_config_test_cmd(&f->run);

	if (f->test_arg)
		printf("test command: %s (from --test)\n", cmd);
	else if (f->rcfg->test_why)
		printf("test command: %s (detected: %s)\n", cmd, f->rcfg->test_why);
	else
		printf("test command: %s (from %s)\n", cmd, REPO_CONFIG_PATH);
}

/* An environment check's failure: AP_ENOTFOUND is the environment's (exit 3), anything else
 * is not proven (1). */
static int env_check_exit(int rc)
{
	int code = rc == AP_ENOTFOUND ? env_failure_exit(rc, NULL) : 1;

	if (code == 1)
		printf("NOT PROVEN: %s\n", ap_error_last());
	return code;
}

/* Image, engine, box, toolchain check and the setup phase, all before any model call.
 * 0, or the exit code. */
static int prepare_env(struct fix *f, ap_config *cfg)
{
	const repo_config *rc_file = f->rcfg;
	sbx_spec spec = {.version = SBX_SPEC_VERSION};
	char line[700];
	int rc;

	printf("[preparing] repository %s, test command: %s\n", f->repo_abs,
	       run_config_test_cmd(&f->run));
	fflush(stdout);
	if ((rc = env_choose_image(&f->choice, cfg, f->repo_abs, rc_file->image,
				   REPO_CONFIG_PATH))) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		return 1;
	}
	env_describe_choice(&f->choice, line, sizeof(line));
	printf("[preparing] %s\n", line);
	fflush(stdout);
	if ((rc = run_config_check_settings(cfg)) || (rc = sbx_engine_new(&f->engine, cfg))) {
		fprintf(stderr, "autopatch fix: %s\n", ap_error_last());
		return rc == AP_EINVAL ? 2 : 1;
	}
	/* Environment errors end here, before any box or model call. */
	if ((rc = env_check_image(f->engine, cfg, &f->choice, env_note, env_build_live, NULL)))
		return env_check_exit(rc);
	if (f->choice.toolchain[0]) {
		printf("[preparing] toolchain: %s\n", f->choice.toolchain);
		fflush(stdout);
	}
	spec.repo_dir = f->repo_abs;
	spec.job_label = f->label;
	spec.image = f->choice.image;
	if (rc_file->network[0]) {
		spec.network = SBX_NET_ALLOWLIST;
		spec.allow = (const char *const *)rc_file->network;
	}
	if ((rc = sbx_create(f->engine, &spec, &f->box)) || (rc = sbx_prepare(f->box))) {
		fprintf(stderr, "autopatch fix: cannot prepare the sandbox: %s\n", ap_error_last());
		return 1;
	}
	printf("[preparing] sandbox ready%s\n",
	       rc_file->network[0] ? " (egress allow-list for setup)" : "");
	fflush(stdout);
	f->run.box = f->box;
	if ((rc = env_check_tools(f->box, &f->choice, run_config_setup_steps(&f->run),
				  run_config_test_cmd(&f->run))))
		return env_check_exit(rc);
	f->eo = (env_setup_opts)ENV_SETUP_OPTS_INIT;
	f->fo = (fixer_opts)FIXER_OPTS_INIT;
	run_config_options(&f->run, &f->eo, &f->fo);
	f->eo.note = env_note;
	f->eo.live = env_live;
	if ((rc = env_setup(&f->eo, &f->er))) {
		/* The repository's setup failed (or passed its deadline): an environment failure.
		 * An engine error stays an error. */
		int code = 1;

		if (rc == AP_EINVAL || rc == AP_ETIMEOUT || rc == AP_ECANCELLED) {
			code = env_failure_exit(rc, NULL);
		} else {
			char *why = redact_str(ap_error_last());
			printf("NOT PROVEN: %s\n", why ? why : "setup failed");
			free(why);
		}
		print_blocked(f->box);
		return code;
	}
	/* The Tester runs in fresh boxes of its own, filled from the host-held snapshot of what
	 * setup made (taken now, before any model call). */
	if ((rc = env_snapshot_take(&f->eo, &f->er, &f->snapshot))) {
		fprintf(stderr, "autopatch fix: cannot keep the setup products: %s\n",
			ap_error_last());
		return 1;
	}
	return 0;
}

/* The Planner -> Builder -> Tester rounds. Returns fixer_run's code. */
static int run_fixer(struct fix *f)
{
	const char *title, *body;
	struct sigaction sa;
	char line[160];
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	split_issue(f->issue.data, &title, &body);
	f->fo.issue_title = title;
	f->fo.issue_body = body;
	f->fo.trajectory_path = f->traj_path;
	f->fo.progress = progress;
	f->fo.should_stop = should_stop;
	run_config_tester(&f->run, &f->er, f->snapshot, f->engine, f->label, &f->policy, &f->tb,
			  &f->fo);
	rc = fixer_run(&f->fo, &f->res);
	tester_boxes_stop(&f->tb); /* no spare outlives the fixer run */
	tester_boxes_describe(&f->tb, line, sizeof(line));
	printf("[tester] %s\n", line);
	return rc;
}

/* The verdict, with the diff and evidence; returns the exit code. */
static int report(struct fix *f, int rc)
{
	const fixer_result *res = &f->res;
	const char *diff = res->diff ? res->diff : "";

	if (f->traj_path)
		printf("trajectory: %s\n", f->traj_path);
	print_blocked(f->box);
	printf("\nmodel: %s, %d model calls, %lld tokens in, %lld tokens out, %d round(s)\n",
	       res->model ? res->model : "?", res->model_calls, (long long)res->tokens_in,
	       (long long)res->tokens_out, res->iterations);
	if (rc == 0 && res->proven) {
		/* The Tester's hook already judged these bytes; the pipeline checks again before
		 * it applies them, and so does fix before it calls them proven. */
		if (patch_policy_check(&f->policy, diff, strlen(diff)) != 0) {
			printf("\n=== diff ===\n%s", diff);
			printf("REFUSED: %s\n", ap_error_last());
			return 1;
		}
		return res->harness_changed ? report_harness(f) : report_proven(f);
	}
	if (rc == 0 && res->env_failure) /* the environment must change (image, setup, test) */
		return env_failure_exit(0, res->failure ? res->failure : "");
	char *why = redact_str(res->failure ? res->failure : ap_error_last());
	printf("NOT PROVEN: %s\n", why ? why : "");
	free(why);
	return rc == AP_ECANCELLED ? 130 : 1;
}

int fix_main(int argc, char **argv, ap_config *cfg)
{
	struct fix f = {.issue = AP_BUF_INIT(ISSUE_CAP), .res = FIXER_RESULT_INIT};
	bool done = false;
	int code;

	if ((code = parse_args(&f, argc, argv, &done)) || done)
		return code;
	if ((code = load_inputs(&f, cfg)))
		goto out;
	print_test_cmd(&f);
	cfg_register_secrets(cfg);
	if ((code = prepare_env(&f, cfg)))
		goto out;
	code = report(&f, run_fixer(&f));
out:
	fix_release(&f);
	return code;
}
