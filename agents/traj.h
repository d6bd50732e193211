/* SPDX-License-Identifier: MIT */
/* agents/traj.h - the trajectory: one redacted JSONL file per run.
 *
 * Each line is one event: {"t": <ms since start>, "type": "...", ...}. Types used: "start",
 * "llm_request", "llm_response", "llm_usage", "llm_retry", "llm_error", "progress",
 * "tool_result", "sandbox_exec" (a command a tool ran in the box), "tester_run",
 * "tester_tests" (per-test results of a suite run), "verdict", "budget", "end" (with the
 * diff and the evidence). Every line passes through the redaction layer before it reaches the
 * file, so a secret in a model message or a command's output never lands on disk, and every
 * line is valid UTF-8: strings are printed as cJSON holds them (cJSON passes invalid bytes
 * through), so a line that is not valid UTF-8 has those bytes replaced by U+FFFD before it is
 * written (common/buf.h); the event's structure is unchanged, as such bytes can only be inside
 * its strings.
 *
 * Thread-safe: events from several threads go out as whole lines (a lock around each write);
 * their order between threads is the order of the writes, so a caller that needs a fixed
 * order (the Tester's runs side by side) collects its events and writes them itself.
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

/* An event written while it is made, piece by piece, for events too big to build as one cJSON
 * tree (the per-test results of a large suite: a tree of a million tests took some 400 MiB).
 * The pieces go to the file through the redaction layer as they come (common/redact.h's
 * stream: the same masking as one redaction of the whole line) and are made valid UTF-8 like
 * any line. traj_line_begin() writes {"t": ..., "type": type; the caller adds the members, each
 * starting with a ','; traj_line_end() writes the closing brace and the newline. The line
 * holds the trajectory's lock from begin to end: other threads wait, and the same thread
 * must not write another event in between (it would wait for itself). */
typedef struct traj_line traj_line;

/* Start an event; NULL when t is NULL or out of memory (the calls below accept NULL). */
traj_line *traj_line_begin(traj *t, const char *type);

/* Add JSON text (structure written by the caller, such as ",\"tests\":[") as it is. */
void traj_line_raw(traj_line *l, const char *json);

/* Add s as a JSON string, quoted and escaped. */
void traj_line_string(traj_line *l, const char *s);

/* Close the event and free l. When a piece failed (out of memory), the line written so far is
 * ended as it is, so the lines after it stay whole; a reader skips it as malformed. */
void traj_line_end(traj_line *l);

/* Milliseconds since the trajectory started; with t NULL, a monotonic clock in milliseconds
 * (only differences are meaningful). Thread-safe. */
int64_t traj_millis(const traj *t);

#endif
