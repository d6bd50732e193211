/* SPDX-License-Identifier: MIT */
/* tests/sandbox/sbx_probe.c - drives the sandbox library directly for the end-to-end tests and
 * the lifecycle benchmark (things `autopatch sandbox run` does not expose: the warm pool,
 * repeated execs, stdin, output caps). Prints one JSON object per line.
 *
 * Usage: sbx_probe warm N | cold N | exec N | pool | stdin | deadline | hostdeadline
 *        | background | bomb SECONDS
 * Settings come from the environment like autopatch's (AUTOPATCH_SANDBOX_*, AUTOPATCH_OWNER_ID).
 */
#include "common/clock.h"
#include "common/config.h"
#include "common/err.h"
#include "sandbox/backend.h"
#include "sandbox/sandbox.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const true_argv[] = {"true", NULL};

static int fail(const char *what)
{
	fprintf(stderr, "sbx_probe: %s: %s\n", what, ap_error_last());
	return 1;
}

static int run_true(sbx_box *b)
{
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	int rc;

	cmd.argv = true_argv;
	cmd.timeout_s = 30;
	rc = sbx_exec(b, &cmd, &res);
	if (!rc && res.exit_code != 0)
		rc = ap_error_set(AP_EIO, "true exited %d", res.exit_code);
	sbx_result_release(&res);
	return rc;
}

static int wait_pool(sbx_engine *e, int n, int seconds)
{
	for (int i = 0; i < seconds * 100; i++) {
		if (sbx_pool_ready(e) >= n)
			return 0;
		usleep(10000);
	}
	return ap_error_set(AP_ETIMEOUT, "the pool did not fill to %d", n);
}

/* Boxes with this owner id, counted through the backend's API. */
static int count_owned(sbx_engine *e)
{
	return sbx_owned_count(e);
}

static int cmd_warm(sbx_engine *e, int n)
{
	sbx_box *b;

	if (sbx_pool_start(e) || wait_pool(e, 1, 120))
		return fail("pool");
	for (int i = 0; i < n; i++) {
		long long t0 = ap_mono_ms(), t1, t2;

		if (sbx_acquire(e, "bench", &b))
			return fail("acquire");
		t1 = ap_mono_ms();
		if (run_true(b))
			return fail("exec");
		if (sbx_destroy(b))
			return fail("destroy");
		t2 = ap_mono_ms();
		printf("{\"op\":\"warm\",\"acquire_ms\":%lld,\"total_ms\":%lld}\n", t1 - t0,
		       t2 - t0);
		fflush(stdout);
		if (wait_pool(e, 1, 120))
			return fail("refill");
	}
	return 0;
}

static int cmd_cold(sbx_engine *e, int n)
{
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b;

	spec.job_label = "bench";
	for (int i = 0; i < n; i++) {
		long long t0 = ap_mono_ms(), t1;

		if (sbx_create(e, &spec, &b))
			return fail("create");
		if (run_true(b))
			return fail("exec");
		if (sbx_destroy(b))
			return fail("destroy");
		t1 = ap_mono_ms();
		printf("{\"op\":\"cold\",\"total_ms\":%lld}\n", t1 - t0);
		fflush(stdout);
	}
	return 0;
}

static int cmd_exec(sbx_engine *e, int n)
{
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b;
	int rc = 0;

	spec.job_label = "bench";
	if (sbx_create(e, &spec, &b))
		return fail("create");
	for (int i = 0; i < n && !rc; i++) {
		long long t0 = ap_mono_ms();

		rc = run_true(b);
		if (!rc)
			printf("{\"op\":\"exec\",\"total_ms\":%lld}\n", ap_mono_ms() - t0);
		fflush(stdout);
	}
	if (rc)
		fail("exec");
	sbx_destroy(b);
	return rc ? 1 : 0;
}

/* One command in b; prints {"op":op,"rc":…,"exit":…,"timed_out":…,"millis":…,"out":first line}.
 * Returns sbx_exec's rc (a refused command is not a probe failure: the tests look at "rc"). */
static int probe_exec(sbx_box *b, const char *op, const char *const *argv, int timeout_s)
{
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	int rc;

	cmd.argv = argv;
	cmd.timeout_s = timeout_s;
	rc = sbx_exec(b, &cmd, &res);
	if (rc)
		fprintf(stderr, "sbx_probe: %s: %s\n", op, ap_error_last());
	printf("{\"op\":\"%s\",\"rc\":%d,\"exit\":%d,\"timed_out\":%s,\"millis\":%lld,"
	       "\"out\":\"%.*s\"}\n",
	       op, rc, rc ? -1 : res.exit_code, res.timed_out ? "true" : "false",
	       rc ? 0LL : (long long)res.millis, rc ? 0 : (int)strcspn(res.out, "\n\"\\"),
	       rc ? "" : res.out);
	fflush(stdout);
	sbx_result_release(&res);
	return rc;
}

/* Prints the box id, then waits for a line on stdin (the test looks at the host meanwhile). */
static void hold(sbx_box *b, const char *op)
{
	char line[16];

	printf("{\"op\":\"%s\",\"id\":\"%s\"}\n", op, sbx_box_id(b));
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return;
}

/* Lists the box's processes whose command line contains what (from /proc, inside). */
#define FIND_PROC(what)                                                                            \
	"for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done | "           \
	"grep -c '" what "'"

/* The two deadlines of sbx_exec (docs/sandbox.md, "exec"): the inside `timeout -s KILL`
 * ("deadline") and the host's, 3 s later ("hostdeadline"). */
static int cmd_deadline(sbx_engine *e, bool host)
{
	/* Ignores SIGTERM, stays in timeout's process group: the inside kill ends it. */
	const char *const busy[] = {"sh", "-c",
				    "trap '' TERM INT; echo looping; while :; do :; done", NULL};
	/* A setsid() child escapes timeout's process group and holds stdout. */
	const char *const escape[] = {
	    "sh", "-c", "setsid sh -c 'echo escaped; exec sleep 997' & sleep 600", NULL};
	/* Stops its own `timeout` so the inside deadline never fires; the escapee holds stdout:
	 * only the host deadline ends this. */
	const char *const stopper[] = {
	    "sh", "-c", "setsid sh -c 'exec sleep 996' & kill -STOP $PPID; echo stopped; sleep 600",
	    NULL};
	const char *const alive[] = {"sh", "-c", "echo alive", NULL};
	const char *const find997[] = {"sh", "-c", FIND_PROC("[s]leep 997"), NULL};
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b;

	spec.job_label = "probe";
	if (sbx_create(e, &spec, &b))
		return fail("create");
	if (!host) {
		probe_exec(b, "inside", busy, 2);
		probe_exec(b, "after_inside", alive, 20);
		probe_exec(b, "escape", escape, 2);
		probe_exec(b, "after_escape", find997, 20);
	} else {
		probe_exec(b, "host", stopper, 2);
		probe_exec(b, "after_host", alive, 20);
	}
	printf("{\"op\":\"state\",\"running\":%d}\n", sbx_box_running(b) ? 1 : 0);
	hold(b, "destroying");
	sbx_destroy(b);
	printf("{\"op\":\"destroyed\",\"containers\":%d}\n", count_owned(e));
	return 0;
}

/* A background process outlives the exec that started it, the next exec sees it, destroy ends
 * it with the box. */
static int cmd_background(sbx_engine *e)
{
	const char *const start[] = {"sh", "-c", "nohup sleep 9871 >/dev/null 2>&1 & echo $!",
				     NULL};
	const char *const find[] = {"sh", "-c", FIND_PROC("[s]leep 9871"), NULL};
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b;

	spec.job_label = "probe";
	if (sbx_create(e, &spec, &b))
		return fail("create");
	probe_exec(b, "start", start, 20);
	probe_exec(b, "find", find, 20);
	hold(b, "destroying");
	sbx_destroy(b);
	printf("{\"op\":\"destroyed\",\"containers\":%d}\n", count_owned(e));
	return 0;
}

/* A fork bomb that never gives up (retries on EAGAIN), with a deadline of seconds. */
static int cmd_bomb(sbx_engine *e, int seconds)
{
	const char *const bomb[] = {"python3", "-c",
				    "import os, time\n"
				    "n = 0\n"
				    "print('bombing', flush=True)\n"
				    "while True:\n"
				    "    try:\n"
				    "        if os.fork() == 0:\n"
				    "            b = bytearray(1 << 20)\n"
				    "            time.sleep(600); os._exit(0)\n"
				    "        n += 1\n"
				    "    except OSError:\n"
				    "        time.sleep(0.01)\n",
				    NULL};
	const char *const alive[] = {"sh", "-c", "echo alive", NULL};
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_box *b;

	spec.job_label = "probe";
	if (sbx_create(e, &spec, &b))
		return fail("create");
	probe_exec(b, "bomb", bomb, seconds);
	probe_exec(b, "after_bomb", alive, 20);
	hold(b, "destroying");
	sbx_destroy(b);
	printf("{\"op\":\"destroyed\",\"containers\":%d}\n", count_owned(e));
	return 0;
}

/* Exercise the pool: fill, acquire past its size, check isolation and the size bound. */
static int cmd_pool(sbx_engine *e)
{
	const char *const write_argv[] = {"sh", "-c",
					  "echo mine > /tmp/workspace/owner; cat repo.txt", NULL};
	const char *const read_argv[] = {"sh", "-c", "cat /tmp/workspace/owner 2>&1; cat repo.txt",
					 NULL};
	sbx_box *a = NULL, *b = NULL, *c = NULL;
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result ra = SBX_RESULT_INIT, rb = SBX_RESULT_INIT;
	int max_seen = 0, n;
	char path[4096];
	FILE *f;

	if (sbx_pool_start(e) || wait_pool(e, 2, 120))
		return fail("pool");
	usleep(300000);
	printf("{\"op\":\"filled\",\"ready\":%d,\"containers\":%d}\n", sbx_pool_ready(e),
	       count_owned(e));
	if (sbx_acquire(e, "job-a", &a) || sbx_acquire(e, "job-b", &b) ||
	    sbx_acquire(e, "job-c", &c))
		return fail("acquire");
	/* Each box has its own repo dir; fill them differently. */
	snprintf(path, sizeof(path), "%s/repo.txt", sbx_box_repo_dir(a));
	f = fopen(path, "w");
	fputs("repo-a\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/repo.txt", sbx_box_repo_dir(b));
	f = fopen(path, "w");
	fputs("repo-b\n", f);
	fclose(f);
	if (sbx_prepare(a) || sbx_prepare(b))
		return fail("prepare");
	cmd.argv = write_argv;
	if (sbx_exec(a, &cmd, &ra))
		return fail("exec a");
	cmd.argv = read_argv;
	if (sbx_exec(b, &cmd, &rb))
		return fail("exec b");
	printf("{\"op\":\"isolation\",\"a_id\":\"%s\",\"b_id\":\"%s\",\"c_id\":\"%s\","
	       "\"a_out\":\"%.*s\",\"b_sees_owner\":%s,\"b_repo\":\"%.6s\"}\n",
	       sbx_box_id(a), sbx_box_id(b), sbx_box_id(c), (int)strcspn(ra.out, "\n"), ra.out,
	       strstr(rb.out, "mine") ? "true" : "false", rb.out + strcspn(rb.out, "\n") + 1);
	sbx_result_release(&ra);
	sbx_result_release(&rb);
	/* While refilling, the pool holds at most 2 ready boxes + the 3 acquired. */
	for (int i = 0; i < 60; i++) {
		n = count_owned(e);
		if (n > max_seen)
			max_seen = n;
		usleep(100000);
	}
	printf("{\"op\":\"bounded\",\"max_containers\":%d,\"ready\":%d}\n", max_seen,
	       sbx_pool_ready(e));
	snprintf(path, sizeof(path), "%s", sbx_box_repo_dir(a));
	sbx_destroy(a);
	sbx_destroy(b);
	sbx_destroy(c);
	printf("{\"op\":\"destroyed\",\"repo_dir_left\":%s,\"containers\":%d}\n",
	       access(path, F_OK) == 0 ? "true" : "false", count_owned(e));
	return 0;
}

/* stdin reaches the command, then EOF; output caps keep head and tail. */
static int cmd_stdin_cap(sbx_engine *e)
{
	const char *const cat_argv[] = {"sh", "-c", "cat > f.txt; wc -c < f.txt; head -c 5 f.txt",
					NULL};
	const char *const flood_argv[] = {
	    "sh", "-c", "printf START; head -c 1000000 /dev/zero | tr '\\0' x; printf END", NULL};
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	sbx_box *b;
	size_t n = 3 << 20;
	char *big = malloc(n);

	memset(big, 'y', n);
	memcpy(big, "hello", 5);
	spec.job_label = "probe";
	if (sbx_create(e, &spec, &b))
		return fail("create");
	cmd.argv = cat_argv;
	cmd.stdin_data = big;
	cmd.stdin_len = n;
	if (sbx_exec(b, &cmd, &res))
		return fail("exec stdin");
	printf("{\"op\":\"stdin\",\"exit\":%d,\"out\":\"%.*s\"}\n", res.exit_code,
	       (int)strcspn(res.out, "\n"), res.out);
	sbx_result_release(&res);
	cmd = (sbx_cmd)SBX_CMD_INIT;
	cmd.argv = flood_argv;
	cmd.output_cap = 64;
	if (sbx_exec(b, &cmd, &res))
		return fail("exec flood");
	printf("{\"op\":\"cap\",\"exit\":%d,\"truncated\":%s,\"len\":%zu,\"head\":\"%.5s\","
	       "\"tail\":\"%s\"}\n",
	       res.exit_code, res.truncated ? "true" : "false", res.out_len, res.out,
	       res.out_len >= 3 ? res.out + res.out_len - 3 : "");
	sbx_result_release(&res);
	sbx_destroy(b);
	free(big);
	return 0;
}

int main(int argc, char **argv)
{
	ap_config *cfg = NULL;
	sbx_engine *e = NULL;
	int n = argc > 2 ? atoi(argv[2]) : 10, rc = 2;

	if (argc < 2) {
		fprintf(stderr, "usage: sbx_probe warm N | cold N | exec N | pool | stdin | "
				"deadline | hostdeadline | "
				"background | bomb SECONDS\n");
		return 2;
	}
	if (cfg_load(&cfg, cfg_env("AUTOPATCH_ENV_FILE")) || sbx_engine_new(&e, cfg)) {
		fail("setup");
		goto out;
	}
	if (strcmp(argv[1], "warm") == 0)
		rc = cmd_warm(e, n);
	else if (strcmp(argv[1], "cold") == 0)
		rc = cmd_cold(e, n);
	else if (strcmp(argv[1], "exec") == 0)
		rc = cmd_exec(e, n);
	else if (strcmp(argv[1], "pool") == 0)
		rc = cmd_pool(e);
	else if (strcmp(argv[1], "stdin") == 0)
		rc = cmd_stdin_cap(e);
	else if (strcmp(argv[1], "deadline") == 0)
		rc = cmd_deadline(e, false);
	else if (strcmp(argv[1], "hostdeadline") == 0)
		rc = cmd_deadline(e, true);
	else if (strcmp(argv[1], "background") == 0)
		rc = cmd_background(e);
	else if (strcmp(argv[1], "bomb") == 0)
		rc = cmd_bomb(e, n);
out:
	sbx_engine_free(e);
	cfg_free(cfg);
	return rc;
}
