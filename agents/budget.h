/* SPDX-License-Identifier: MIT */
/* agents/budget.h - per-job limits on model calls, tokens and wall time, and the repeated-call
 * detector.
 *
 * Settings: AUTOPATCH_MAX_MODEL_CALLS (60), AUTOPATCH_MAX_TOKENS (1000000, input + output),
 * AUTOPATCH_MAX_WALL_SECONDS (1800). The same tool call with the same arguments made
 * AUTOPATCH_REPEAT_LIMIT (3) times without the workspace changing in between gets a nudge
 * instead of a result; one more and the job stops.
 */
#ifndef AP_BUDGET_H
#define AP_BUDGET_H

#include "common/config.h"

#include <stddef.h>
#include <stdint.h>

typedef struct budget {
	int64_t max_calls, max_tokens, max_wall_s, repeat_limit;
	int64_t calls, tokens_in, tokens_out;
	int64_t start_ms;
	char **keys; /* "name\nargs" of calls since the workspace last changed */
	int *counts;
	size_t n;
} budget;

enum budget_repeat { BUDGET_OK, BUDGET_NUDGE, BUDGET_STOP };

/* Read the limits (AP_EINVAL with a sentence for a bad value). now_ms starts the wall clock. */
int budget_init(budget *b, const ap_config *cfg, int64_t now_ms);
void budget_release(budget *b);

/* Before a model call: 0, or AP_EBUDGET with *which set to the exhausted budget's name
 * (static string: "model-call", "token", "wall-time"). */
int budget_before_call(const budget *b, int64_t now_ms, const char **which);
void budget_after_call(budget *b, int64_t tokens_in, int64_t tokens_out);

/* Count one tool call; BUDGET_NUDGE at the limit, BUDGET_STOP beyond it. */
enum budget_repeat budget_repeat(budget *b, const char *name, const char *args);
/* The workspace changed: earlier calls may now give different results. */
void budget_forget_repeats(budget *b);

/* "12 model calls, 34567 tokens, 89 s": how far the job got (malloc'd). */
char *budget_progress(const budget *b, int64_t now_ms);

#endif
