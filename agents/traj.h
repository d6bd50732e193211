/* SPDX-License-Identifier: MIT */
/* agents/traj.h - the trajectory: one redacted JSONL file per run.
 *
 * Each line is one event: {"t": <ms since start>, "type": "...", ...}. Types used: "start",
 * "llm_request", "llm_response", "llm_usage", "llm_retry", "llm_error", "progress",
 * "tool_result", "sandbox_exec" (a command a tool ran in the box), "tester_run",
 * "tester_tests" (per-test results of a suite run), "verdict", "budget", "end" (with the
 * diff and the evidence). Every line passes through the redaction layer before it reaches the
 * file, so a secret in a model message or a command's output never lands on disk.
 */
#ifndef AP_TRAJ_H
#define AP_TRAJ_H

#include <cjson/cJSON.h>
#include <stdint.h>

typedef struct traj traj;

/* Create (truncate) the file at path. Free with traj_free() (closes it). */
int traj_open(traj **out, const char *path);
void traj_free(traj *t);

/* Append one event; takes ownership of obj (may be NULL for a bare event) and adds "t" and
 * "type". Write errors are logged once and then ignored: a trajectory never fails a job. */
void traj_event(traj *t, const char *type, cJSON *obj);

/* Milliseconds since the trajectory started; with t NULL, a monotonic clock in milliseconds
 * (only differences are meaningful). Thread-safe. */
int64_t traj_millis(const traj *t);

#endif
