/* SPDX-License-Identifier: MIT */
/* cli/sandbox.c - `autopatch sandbox run|reap`: run one command in a fresh hardened box, or
 * remove boxes a crash left behind.
 *
 * `run` exit codes: the command's own code; 124 when it passed its deadline; 125 when the
 * sandbox itself failed (daemon unreachable, image missing), like `docker run`; 2 for bad
 * usage or settings; 130/143 after SIGINT/SIGTERM (the box is destroyed first).
 */
#include "sandbox/sandbox.h"

#include "cli/commands.h"
#include "common/err.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_SANDBOX 125

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static const char run_usage[] =
    "usage: autopatch sandbox run [--repo DIR] [--timeout S] [--image I] [--runtime R]\n"
    "                             [--allow HOST:PORT]... -- CMD...\n"
    "       autopatch sandbox reap [--all]\n";

struct sink {
	bool broken[3]; /* a stream's reader went away: stop writing to it */
};

static void on_output(void *ud, int stream, const char *p, size_t n)
{
	struct sink *s = ud;
	int fd = stream == 2 ? 2 : 1;
	ssize_t w;

	while (n && !s->broken[fd]) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			s->broken[fd] = true;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
}

static int signal_exit(void)
{
	fprintf(stderr, "autopatch: stopped by signal %d; the sandbox was removed\n",
		(int)got_signal);
	return 128 + (int)got_signal;
}

struct run_opts {
	const char *repo, *image, *runtime;
	char repo_abs[PATH_MAX];
	const char *allow[17]; /* NULL-terminated */
	size_t n_allow;
	long timeout;
	char **cmd; /* the command's argv, NULL-terminated (main's argv) */
};

/* Parse `sandbox run` options: 0, or 2 (usage) with the sentence printed. */
static int run_parse(int argc, char **argv, struct run_opts *o)
{
	char *end;
	int i;

	o->timeout = 600;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "autopatch: %s needs a value\n%s", argv[i], run_usage);
			return 2;
		}
		if (strcmp(argv[i], "--repo") == 0) {
			o->repo = argv[++i];
		} else if (strcmp(argv[i], "--image") == 0) {
			o->image = argv[++i];
		} else if (strcmp(argv[i], "--allow") == 0) {
			if (o->n_allow + 1 >= sizeof(o->allow) / sizeof(o->allow[0])) {
				fprintf(stderr, "autopatch: at most 16 --allow entries\n");
				return 2;
			}
			o->allow[o->n_allow++] = argv[++i];
		} else if (strcmp(argv[i], "--runtime") == 0) {
			o->runtime = argv[++i];
		} else if (strcmp(argv[i], "--timeout") == 0) {
			errno = 0;
			o->timeout = strtol(argv[++i], &end, 10);
			if (errno || *end || o->timeout < 1 || o->timeout > 7 * 24 * 3600) {
				fprintf(stderr, "autopatch: --timeout wants seconds (1-604800)\n");
				return 2;
			}
		} else {
			fprintf(stderr, "autopatch: unknown option %s\n%s", argv[i], run_usage);
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "autopatch: no command given\n%s", run_usage);
		return 2;
	}
	if (o->repo && !realpath(o->repo, o->repo_abs)) {
		fprintf(stderr, "autopatch: --repo %s: %s\n", o->repo, strerror(errno));
		return 2;
	}
	o->allow[o->n_allow] = NULL;
	o->cmd = argv + i;
	return 0;
}

/* SIGINT, SIGTERM and SIGHUP end the run through got_signal; SIGPIPE is ignored. */
static void catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls return early */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Run the command of o in box b, its output streamed; returns its exit status, or code when
 * it could not run. */
static int run_command(sbx_box *b, const struct run_opts *o, long timeout, int code)
{
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	struct sink sink = {{false, false, false}};
	int rc;

	cmd.argv = (const char *const *)o->cmd;
	cmd.timeout_s = (int)timeout;
	cmd.output_cap = 4096; /* everything is streamed; the capture only backs the result */
	cmd.on_output = on_output;
	cmd.on_output_ud = &sink;
	cmd.cancel = &got_signal;
	rc = sbx_exec(b, &cmd, &res);
	if (rc && rc != AP_ECANCELLED) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
	} else if (!rc) {
		code = res.exit_code;
		if (res.timed_out)
			fprintf(stderr,
				"autopatch: the command timed out after %ld s and was killed\n",
				timeout);
	}
	sbx_result_release(&res);
	return code;
}

static int run_run(ap_config *cfg, const struct run_opts *o)
{
	char job[32];
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_engine *e = NULL;
	sbx_box *b = NULL;
	long timeout = o->timeout;
	int rc, code = EXIT_SANDBOX;

	if (o->image)
		cfg_set(cfg, "AUTOPATCH_SANDBOX_IMAGE", o->image);
	if (o->runtime)
		cfg_set(cfg, "AUTOPATCH_SANDBOX_RUNTIME", o->runtime);

	catch_signals();
	rc = sbx_engine_new(&e, cfg);
	if (rc) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return rc == AP_EINVAL ? 2 : EXIT_SANDBOX;
	}
	/* Boxes of crashed runs with this owner id go first (live runs keep theirs). */
	if (sbx_reap_orphans(e) < 0)
		fprintf(stderr, "autopatch: warning: %s\n", ap_error_last());
	snprintf(job, sizeof(job), "cli-%ld", (long)getpid());
	spec.job_label = job;
	spec.repo_dir = o->repo ? o->repo_abs : NULL;
	if (o->n_allow) {
		spec.network = SBX_NET_ALLOWLIST;
		spec.allow = o->allow;
	}
	if (timeout + 60 > INT_MAX)
		timeout = INT_MAX - 60;
	spec.wall_seconds = (int)timeout + 60;
	rc = sbx_create(e, &spec, &b);
	if (rc) {
		fprintf(stderr, "autopatch: cannot create the sandbox: %s\n", ap_error_last());
		goto out_free_engine;
	}
	if (got_signal)
		goto out_destroy;
	rc = sbx_prepare(b);
	if (rc) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		goto out_destroy;
	}
	code = run_command(b, o, timeout, code);
out_destroy:
	if (sbx_destroy(b)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		code = code == 0 ? EXIT_SANDBOX : code;
	}
	if (got_signal) /* after the box is gone */
		code = signal_exit();
out_free_engine:
	sbx_engine_free(e);
	return code;
}

static int run_main(int argc, char **argv, ap_config *cfg)
{
	struct run_opts o = {0};
	int rc = run_parse(argc, argv, &o);

	return rc ? rc : run_run(cfg, &o);
}

static int reap_main(int argc, char **argv, ap_config *cfg)
{
	sbx_engine *e = NULL;
	bool all = argc > 1 && strcmp(argv[1], "--all") == 0;
	int n;

	if (argc > 2 || (argc == 2 && !all)) {
		fputs(run_usage, stderr);
		return 2;
	}
	cfg_set(cfg, "AUTOPATCH_SANDBOX_POOL", "0");
	if (sbx_engine_new(&e, cfg)) {
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
		return 1;
	}
	n = all ? sbx_reap_all(e) : sbx_reap_orphans(e);
	if (n < 0)
		fprintf(stderr, "autopatch: %s\n", ap_error_last());
	else
		printf("removed %d container(s) and network(s) of owner %s\n", n, sbx_owner_id(e));
	sbx_engine_free(e);
	return n < 0 ? 1 : 0;
}

int sandbox_main(int argc, char **argv, ap_config *cfg)
{
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return run_main(argc - 1, argv + 1, cfg);
	if (argc >= 2 && strcmp(argv[1], "reap") == 0)
		return reap_main(argc - 1, argv + 1, cfg);
	fputs(run_usage, argc >= 2 && strcmp(argv[1], "--help") == 0 ? stdout : stderr);
	return argc >= 2 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
}
