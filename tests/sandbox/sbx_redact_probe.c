/* SPDX-License-Identifier: MIT */
/* tests/sandbox/sbx_redact_probe.c - drives sbx_exec for tests/e2e/test_sandbox_redact.py: a
 * registered secret that the command prints so that it straddles the head/tail cut of a small
 * output cap (stdout: the end of the head; stderr: the start of the tail), written a few bytes
 * per write so it also spans Docker frames. Prints one JSON object: the captured stdout and
 * stderr and what the streaming callback received, all as sbx_exec handed them over (no
 * redaction here): the test looks for pieces of the secret in them.
 *
 * Usage: sbx_redact_probe CAP, with the secret in $AP_CANARY (40 bytes, the layout below
 * assumes it) and the sandbox settings in the environment like autopatch's.
 */
#include "common/buf.h"
#include "common/config.h"
#include "common/err.h"
#include "common/redact.h"
#include "sandbox/sandbox.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stdout: 2028 'a', the secret 7 bytes per printf, 6000 'b'; stderr: 6000 'c', the secret,
 * 2028 'd'. With CAP 4096 the head (2048) ends 20 bytes into the secret on stdout and the
 * tail (2048) starts 20 bytes into it on stderr. */
static const char script[] =
    "c=$(cat); fill() { head -c \"$1\" /dev/zero | tr '\\0' \"$2\"; }; "
    "fill 2028 a; i=1; while [ $i -le 40 ]; do "
    "printf %s \"$(printf %s \"$c\" | cut -c$i-$((i + 6)))\"; i=$((i + 7)); done; "
    "fill 6000 b; { fill 6000 c; printf %s \"$c\"; fill 2028 d; } >&2";

static void on_output(void *ud, int stream, const char *p, size_t n)
{
	ap_buf *seen = ud;

	(void)stream;
	ap_buf_add(seen, p, n); /* capped: the test only needs what fits */
}

int main(int argc, char **argv)
{
	const char *const cmd_argv[] = {"sh", "-c", script, NULL};
	const char *canary = getenv("AP_CANARY");
	ap_config *cfg = NULL;
	sbx_engine *e = NULL;
	sbx_box *b = NULL;
	sbx_spec spec = SBX_SPEC_INIT;
	sbx_cmd cmd = SBX_CMD_INIT;
	sbx_result res = SBX_RESULT_INIT;
	ap_buf seen = AP_BUF_INIT(1 << 20);
	cJSON *o = NULL;
	char *json = NULL;
	int rc = 1;

	if (argc != 2 || !canary || strlen(canary) != 40) {
		fprintf(stderr, "usage: AP_CANARY=<40 bytes> sbx_redact_probe CAP\n");
		return 2;
	}
	if (redact_add_secret(canary) || cfg_load(&cfg, cfg_env("AUTOPATCH_ENV_FILE")) ||
	    sbx_engine_new(&e, cfg)) {
		fprintf(stderr, "sbx_redact_probe: %s\n", ap_error_last());
		goto out_free;
	}
	spec.job_label = "redact";
	if (sbx_create(e, &spec, &b)) {
		fprintf(stderr, "sbx_redact_probe: create: %s\n", ap_error_last());
		goto out_free;
	}
	cmd.argv = cmd_argv;
	cmd.workdir = "/";
	cmd.timeout_s = 60;
	cmd.stdin_data = canary;
	cmd.stdin_len = strlen(canary);
	cmd.output_cap = (size_t)strtoull(argv[1], NULL, 10);
	cmd.on_output = on_output;
	cmd.on_output_ud = &seen;
	if (sbx_exec(b, &cmd, &res)) {
		fprintf(stderr, "sbx_redact_probe: exec: %s\n", ap_error_last());
		goto out_free;
	}
	o = cJSON_CreateObject();
	if (!o || !cJSON_AddNumberToObject(o, "exit", res.exit_code) ||
	    !cJSON_AddBoolToObject(o, "truncated", res.truncated) ||
	    !cJSON_AddStringToObject(o, "out", res.out) ||
	    !cJSON_AddStringToObject(o, "err", res.err) ||
	    !cJSON_AddStringToObject(o, "stream", ap_buf_str(&seen)) ||
	    !cJSON_AddNumberToObject(o, "stream_len", (double)seen.len) ||
	    !(json = cJSON_PrintUnformatted(o))) {
		fprintf(stderr, "sbx_redact_probe: out of memory\n");
		goto out_free;
	}
	printf("%s\n", json);
	rc = 0;
out_free:
	free(json);
	cJSON_Delete(o);
	sbx_result_release(&res);
	ap_buf_release(&seen);
	if (b && sbx_destroy(b))
		fprintf(stderr, "sbx_redact_probe: destroy: %s\n", ap_error_last());
	sbx_engine_free(e);
	cfg_free(cfg);
	return rc;
}
