/* SPDX-License-Identifier: MIT */
/* tests/fuzz/fuzz_testcmd.c - the test-command detector's parsers of untrusted repository
 * files on arbitrary text: the CI workflow reader (agents/ci_workflow.h), tox.ini's commands
 * (testcmd_tox_commands) and the runner-output summariser (agents/run_output.h). No crash, no
 * leak, and every answer keeps its contract: a workflow command is printable ASCII within
 * CI_WORKFLOW_MAX_CMD with a job and steps named, a failure leaves nothing behind; a tox
 * command fits TESTCMD_MAX_TOX_CMD; an excerpt keeps its bounds and holds no escape. */
#include "agents/ci_workflow.h"
#include "agents/run_output.h"
#include "agents/testcmd.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_printable(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ci_workflow_pick pick;
	char *cmd = NULL, *x;
	bool errors;
	int lines = 0;

	if (ci_workflow_test_command(&pick, (const char *)data, size) == 0) {
		check_printable(pick.cmd, CI_WORKFLOW_MAX_CMD);
		if (!pick.job || !pick.steps || strlen(pick.steps) == 0)
			abort();
		ci_workflow_pick_clear(&pick);
	} else if (pick.cmd || pick.job || pick.steps || pick.note) {
		abort();
	}
	if (testcmd_tox_commands(&cmd, (const char *)data, size) == 0) {
		check_printable(cmd, TESTCMD_MAX_TOX_CMD + 20);
		free(cmd);
	} else if (cmd) {
		abort();
	}
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	x = run_output_excerpt(s, NULL, 20, 3000, &errors);
	if (x) {
		if (strlen(x) > 3000 || strchr(x, '\x1b'))
			abort();
		for (const char *p = x; *p; p++)
			lines += *p == '\n';
		if (lines >= 20)
			abort();
		free(x);
	}
	free(run_output_advice(NULL, s));
	free(s);
	return 0;
}
