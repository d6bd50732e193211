/* SPDX-License-Identifier: MIT */
/* agents/tools.h - the agents' tools: schemas, strict argument checks, and fixed-argv commands
 * run inside the job's box.
 *
 * Planner: list_files, read_file, search_code (read-only). Builder adds write_file,
 * replace_in_file, run and finish. Model text only ever reaches a box as one whole argv element
 * or as stdin, never spliced into a shell string - except `run`, whose command is a shell
 * string by design (the container is the boundary). Paths are relative to the workspace; an
 * absolute path, a `..` component or anything that resolves (realpath, inside the box) outside
 * the workspace is refused. Bad arguments are answered with an error text for the model: the
 * job goes on.
 */
#ifndef AP_TOOLS_H
#define AP_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "agents/llm.h"
#include "agents/traj.h"
#include "sandbox/sandbox.h"

enum tool_set { TOOLS_PLANNER, TOOLS_BUILDER };

/* The tools offered to a role (static storage). */
const llm_tool *tools_offered(enum tool_set set, size_t *n);

/* Where and how tools run. */
typedef struct tool_ctx {
	sbx_box *box;
	const char *root;  /* workspace inside the box, default /tmp/workspace */
	int run_timeout_s; /* default and cap for `run` (default 120) */
	size_t result_cap; /* max bytes of a tool result shown to the model (default 16 KiB) */
	/* When it becomes non-zero, a running command is killed with its box and the tool call
	 * returns AP_ECANCELLED (sbx_cmd.cancel); NULL: none. */
	const volatile sig_atomic_t *cancel;
	/* Every command a tool runs in the box is a "sandbox_exec" event here; NULL: none. */
	traj *traj;
} tool_ctx;

#define TOOL_CTX_INIT                                                                              \
	{                                                                                          \
		NULL, "/tmp/workspace", 120, 16384, NULL, NULL                                     \
	}

/* What `finish` declared. Strings malloc'd; release with tool_finish_release(). */
typedef struct tool_finish {
	char *test_path;    /* reproduction test file, workspace-relative */
	char *test_command; /* shell command that runs just that test, from the workspace root */
	char *test_id;	    /* the test as its runner names it, or NULL (not given) */
	char *summary;
} tool_finish;

void tool_finish_release(tool_finish *f);

/* Run one tool call. *out receives the text for the model (malloc'd, never NULL on return 0),
 * *is_error whether it reports a failure (bad arguments, refused path, missing file). When a
 * valid `finish` was called, *finished is set and fin filled. Returns 0, or a negative code
 * only for infrastructure failures (the box or the daemon), which end the job. */
int tools_call(const tool_ctx *ctx, enum tool_set set, const char *name, const char *args,
	       char **out, bool *is_error, bool *finished, tool_finish *fin);

/* ---- exposed for unit tests ---- */

/* Strict check of args (JSON text) against the tool's schema: object, known properties only,
 * types, required ones present, bounds. Returns the parsed object, or NULL with *why set
 * (malloc'd message for the model). A tool not in the set is refused the same way. */
cJSON *tools_check_args(enum tool_set set, const char *name, const char *args, char **why);

/* Host-side path check: relative, no `..` component, no empty path, at most 1024 bytes, not
 * inside .git/. Returns NULL when acceptable, else a static reason. */
const char *tools_path_refusal(const char *path);

/* The argv a tool runs (without the box): argv[0..] NULL-terminated, elements malloc'd;
 * *stdin_data for write tools. Free with tools_argv_free(). */
typedef struct tool_argv {
	char *argv[16];
	char *stdin_data;
	size_t stdin_len;
	int timeout_s;
} tool_argv;

int tools_build_argv(const tool_ctx *ctx, const char *name, const cJSON *args, tool_argv *out);
void tools_argv_free(tool_argv *a);

/* Replace exactly one occurrence of old in text. Returns a malloc'd result, or NULL with *count
 * set to the number of matches (0 or > 1) or -1 on allocation failure. */
char *tools_replace_once(const char *text, const char *old, const char *new_text, int *count);

/* text[0..len) (bytes from a box) as text to show: valid UTF-8 without NUL (invalid bytes and
 * NULs become U+FFFD, common/buf.h), and when that is longer than cap bytes only its head and
 * its tail (whole characters, at most cap / 2 bytes each) with a marker in between that counts
 * the bytes of text left out. Returns a malloc'd string, NULL on ENOMEM. */
char *tools_head_tail(const char *text, size_t len, size_t cap);

/* Append a command's event of type ("sandbox_exec", "tester_run") to t: command, dir, exit,
 * timed_out, millis and the head and tail of stdout (4000 bytes) and stderr (2000). */
void tools_traj_command(traj *t, const char *type, const char *command, const char *dir,
			const sbx_result *r);

/* printf into a malloc'd string (caller frees), or NULL when out of memory. */
char *tools_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
