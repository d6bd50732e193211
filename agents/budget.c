/* SPDX-License-Identifier: MIT */
/* agents/budget.c - agent budgets and the repeated-call detector (see budget.h). */
#include "agents/budget.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int budget_init(budget *b, const ap_config *cfg, int64_t now_ms)
{
	int rc;
	memset(b, 0, sizeof(*b));
	b->start_ms = now_ms;
	if ((rc = cfg_int(cfg, "AUTOPATCH_MAX_MODEL_CALLS", 1, 100000, &b->max_calls)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_MAX_TOKENS", 1000, INT64_C(1) << 40, &b->max_tokens)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_MAX_WALL_SECONDS", 10, 7 * 86400, &b->max_wall_s)) ||
	    (rc = cfg_int(cfg, "AUTOPATCH_REPEAT_LIMIT", 2, 100, &b->repeat_limit)))
		return rc;
	return 0;
}

void budget_release(budget *b)
{
	budget_forget_repeats(b);
}

int budget_before_call(const budget *b, int64_t now_ms, const char **which)
{
	if (b->calls >= b->max_calls)
		*which = "model-call";
	else if (b->tokens_in + b->tokens_out >= b->max_tokens)
		*which = "token";
	else if (now_ms - b->start_ms >= b->max_wall_s * 1000)
		*which = "wall-time";
	else
		return 0;
	return AP_EBUDGET;
}

void budget_after_call(budget *b, int64_t tokens_in, int64_t tokens_out)
{
	b->calls++;
	b->tokens_in += tokens_in;
	b->tokens_out += tokens_out;
}

enum budget_repeat budget_repeat(budget *b, const char *name, const char *args)
{
	char *key = NULL;
	if (asprintf(&key, "%s\n%s", name, args ? args : "") < 0)
		return BUDGET_OK; /* cannot track: let the call through */
	for (size_t i = 0; i < b->n; i++) {
		if (strcmp(b->keys[i], key) == 0) {
			free(key);
			b->counts[i]++;
			if (b->counts[i] > b->repeat_limit)
				return BUDGET_STOP;
			return b->counts[i] == b->repeat_limit ? BUDGET_NUDGE : BUDGET_OK;
		}
	}
	char **nk = realloc(b->keys, (b->n + 1) * sizeof(*nk));
	if (!nk) {
		free(key);
		return BUDGET_OK;
	}
	b->keys = nk;
	int *nc = realloc(b->counts, (b->n + 1) * sizeof(*nc));
	if (!nc) {
		free(key);
		return BUDGET_OK;
	}
	b->counts = nc;
	b->keys[b->n] = key;
	b->counts[b->n] = 1;
	b->n++;
	return BUDGET_OK;
}

void budget_forget_repeats(budget *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->keys[i]);
	free(b->keys);
	free(b->counts);
	b->keys = NULL;
	b->counts = NULL;
	b->n = 0;
}

char *budget_progress(const budget *b, int64_t now_ms)
{
	char *s = NULL;
	if (asprintf(&s, "%lld of %lld model calls, %lld of %lld tokens, %lld of %lld s",
		     (long long)b->calls, (long long)b->max_calls,
		     (long long)(b->tokens_in + b->tokens_out), (long long)b->max_tokens,
		     (long long)((now_ms - b->start_ms) / 1000), (long long)b->max_wall_s) < 0)
		return NULL;
	return s;
}
